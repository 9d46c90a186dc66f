#!/usr/bin/python3
"""Writes small models with constant weights into tests/fuzz/seeds/import, so the import fuzzer
starts from graphs the optimizer fuses and the oneDNN and cpu backends prepare kernels for (the
ONNX node tests pass weights as graph inputs, which those backends leave to the reference).
Run from the repository root: /usr/bin/python3 scripts/make_fuzz_seeds.py"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = "tests/fuzz/seeds/import"
rng = np.random.default_rng(7)


def const(name, shape):
    return numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(np.float32), name)


def save(name, nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, f"{OUT}/{name}.onnx")


def tensor(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


# Conv + BatchNorm + Relu + residual Add + MaxPool + GlobalAveragePool + Gemm: a ResNet block.
save("conv_block", [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
    helper.make_node("BatchNormalization", ["c1", "s", "bb", "m", "v"], ["n1"]),
    helper.make_node("Relu", ["n1"], ["r1"]),
    helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
    helper.make_node("Add", ["c2", "r1"], ["a"]),
    helper.make_node("MaxPool", ["a"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    helper.make_node("GlobalAveragePool", ["p"], ["g"]),
    helper.make_node("Flatten", ["g"], ["f"]),
    helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
], [tensor("x", ["N", 16, 8, 8])], [tensor("y", ["N", 10])],
    [const("w1", [16, 16, 3, 3]), const("b1", [16]), const("s", [16]), const("bb", [16]), const("m", [16]),
     numpy_helper.from_array(np.full([16], 0.5, np.float32), "v"), const("w2", [16, 16, 3, 3]),
     const("wf", [10, 16]), const("bf", [10])])

# MatMul + bias + Gelu written out with Erf + LayerNormalization: a transformer MLP.
save("mlp_layernorm", [
    helper.make_node("MatMul", ["x", "w1"], ["h"]),
    helper.make_node("Add", ["h", "b1"], ["hb"]),
    helper.make_node("Div", ["hb", "sqrt2"], ["hd"]),
    helper.make_node("Erf", ["hd"], ["e"]),
    helper.make_node("Add", ["e", "one"], ["e1"]),
    helper.make_node("Mul", ["hb", "e1"], ["hm"]),
    helper.make_node("Mul", ["hm", "half"], ["gelu"]),
    helper.make_node("MatMul", ["gelu", "w2"], ["o"]),
    helper.make_node("Add", ["o", "x"], ["res"]),
    helper.make_node("LayerNormalization", ["res", "g", "be"], ["y"], axis=-1),
], [tensor("x", ["N", 8, 32])], [tensor("y", ["N", 8, 32])],
    [const("w1", [32, 64]), const("b1", [64]), const("w2", [64, 32]), const("g", [32]), const("be", [32]),
     numpy_helper.from_array(np.array(1.4142135, np.float32), "sqrt2"),
     numpy_helper.from_array(np.array(1.0, np.float32), "one"),
     numpy_helper.from_array(np.array(0.5, np.float32), "half")])

# Depthwise conv + Clip (MobileNet) and a squeeze-excite scale over the channels.
save("depthwise_se", [
    helper.make_node("Conv", ["x", "wd"], ["d"], group=16, pads=[1, 1, 1, 1]),
    helper.make_node("Clip", ["d", "lo", "hi"], ["c"]),
    helper.make_node("GlobalAveragePool", ["c"], ["s"]),
    helper.make_node("Conv", ["s", "ws"], ["sw"]),
    helper.make_node("Sigmoid", ["sw"], ["sg"]),
    helper.make_node("Mul", ["c", "sg"], ["y"]),
], [tensor("x", ["N", 16, 8, 8])], [tensor("y", ["N", 16, 8, 8])],
    [const("wd", [16, 1, 3, 3]), const("ws", [16, 16, 1, 1]),
     numpy_helper.from_array(np.array(0.0, np.float32), "lo"), numpy_helper.from_array(np.array(6.0, np.float32), "hi")])

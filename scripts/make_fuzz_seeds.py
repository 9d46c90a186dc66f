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


def q8(name, values, dtype):
    return numpy_helper.from_array(np.array(values, dtype), name)


# A QDQ ResNet block as quantizers write it (fold_qdq's groups: Conv, Relu, MaxPool, Add, Gemm).
w8 = rng.integers(-127, 128, [8, 8, 3, 3]).astype(np.int8)
save("qdq_block", [
    helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
    helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
    helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0),
    helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bd"], axis=0),
    helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c"], ["r"]),
    helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["rq"]),
    helper.make_node("DequantizeLinear", ["rq", "ys", "yz"], ["rd"]),
    helper.make_node("MaxPool", ["rd"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    helper.make_node("QuantizeLinear", ["p", "ys", "yz"], ["pq"]),
    helper.make_node("DequantizeLinear", ["pq", "ys", "yz"], ["pd"]),
    helper.make_node("Add", ["pd", "xd"], ["a"]),
    helper.make_node("QuantizeLinear", ["a", "ys", "yz"], ["aq"]),
    helper.make_node("DequantizeLinear", ["aq", "ys", "yz"], ["y"]),
], [tensor("x", ["N", 8, 6, 6])], [tensor("y", ["N", 8, 6, 6])],
    [q8("xs", 0.02, np.float32), q8("xz", 128, np.uint8), q8("ys", 0.05, np.float32), q8("yz", 0, np.uint8),
     numpy_helper.from_array(w8, "wq"), q8("ws", [0.001 * (i + 1) for i in range(8)], np.float32),
     q8("wz", [0] * 8, np.int8), q8("bq", [i * 100 for i in range(8)], np.int32),
     q8("bs", [0.02 * 0.001 * (i + 1) for i in range(8)], np.float32), q8("bz", [0] * 8, np.int32)])

# A dynamically quantized product (fuse_matmul_integer's pattern) with ONNX Runtime's QOperator
# QLinearAdd beside it (expanded at import).
graph = helper.make_graph([
    helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
    helper.make_node("MatMulInteger", ["xq", "b", "xz", "bz"], ["acc"]),
    helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
    helper.make_node("Mul", ["xs", "bs"], ["s"]),
    helper.make_node("Mul", ["accf", "s"], ["m"]),
    helper.make_node("QuantizeLinear", ["m", "qs", "qz"], ["mq"]),
    helper.make_node("QLinearAdd", ["mq", "qs", "qz", "mq", "qs", "qz", "qs", "qz"], ["aq"], domain="com.microsoft"),
    helper.make_node("DequantizeLinear", ["aq", "qs", "qz"], ["y"]),
], "dynamic_and_contrib", [tensor("x", ["N", 16])], [tensor("y", ["N", 24])],
    [numpy_helper.from_array(rng.integers(-127, 128, [16, 24]).astype(np.int8), "b"), q8("bz", 0, np.int8),
     q8("bs", 0.01, np.float32), q8("qs", 0.1, np.float32), q8("qz", 100, np.uint8)])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
onnx.save(model, f"{OUT}/dynamic_and_contrib.onnx")

# A dynamically quantized convolution (ConvInteger -> Cast -> Mul, fuse_matmul_integer's conv
# pattern) with its bias added after, as ONNX Runtime's quantize_dynamic writes it.
save("dynamic_conv", [
    helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
    helper.make_node("ConvInteger", ["xq", "w", "xz", "wz"], ["acc"], pads=[1, 1, 1, 1], strides=[2, 2]),
    helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
    helper.make_node("Mul", ["xs", "ws"], ["s"]),
    helper.make_node("Mul", ["accf", "s"], ["m"]),
    helper.make_node("Add", ["m", "b"], ["y"]),
], [tensor("x", ["N", 8, 7, 7])], [tensor("y", ["N", 16, 4, 4])],
    [numpy_helper.from_array(rng.integers(-127, 128, [16, 8, 3, 3]).astype(np.int8), "w"), q8("wz", 0, np.int8),
     q8("ws", 0.004, np.float32), const("b", [1, 16, 1, 1])])

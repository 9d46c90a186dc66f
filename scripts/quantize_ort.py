#!/usr/bin/env python3
"""int8 versions of wpk's test models, made by ONNX Runtime's quantization tool (the peer's own
way to quantize, so both runtimes run the same int8 model). Runs in the venv that
scripts/compare_ort.sh makes (onnxruntime, onnx, numpy from PyPI).

Usage: quantize_ort.py MODELS_DIR NAME ...
  resnet50_int8  QDQ, static: int8 weights per output channel, uint8 activations, calibrated on
                 the stored PyTorch input and 7 normal inputs from a fixed seed
  bert_base_int8 dynamic: int8 weights, activations quantized at run time
  resnet18_int8_dynamic  dynamic, as bert_base_int8: its convs become ConvInteger
Each NAME.onnx is written next to its float model (exported first: scripts/export_models.py);
one already there is left alone.
"""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                      quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process

QUANTIZED = {"resnet50_int8": ("resnet50", "static"), "bert_base_int8": ("bert_base", "dynamic"),
             "resnet18_int8_dynamic": ("resnet18", "dynamic")}


class Calibration(CalibrationDataReader):
    """The stored input, then seeded normal inputs of its shape."""

    def __init__(self, model_path, test_input, extra=7):
        name = onnx.load(model_path, load_external_data=False).graph.input[0].name
        first = numpy_helper.to_array(onnx.load_tensor(test_input))
        rng = np.random.default_rng(20261125)
        self.samples = iter([{name: first}] +
                            [{name: rng.standard_normal(first.shape).astype(np.float32)} for _ in range(extra)])

    def get_next(self):
        return next(self.samples, None)


def quantize(models_dir, name):
    base, kind = QUANTIZED[name]
    src = os.path.join(models_dir, base + ".onnx")
    dst = os.path.join(models_dir, name + ".onnx")
    if os.path.exists(dst):
        return
    if not os.path.exists(src):
        sys.exit("quantize_ort: %s not found; run scripts/export_models.py %s %s" % (src, models_dir, base))
    tmp = dst + ".tmp"
    if kind == "dynamic":
        quantize_dynamic(src, tmp, weight_type=QuantType.QInt8)
    else:
        pre = dst + ".pre.onnx"
        quant_pre_process(src, pre, skip_symbolic_shape=True)
        reader = Calibration(src, os.path.join(models_dir, base, "test_data_set_0", "input_0.pb"))
        quantize_static(pre, tmp, reader, quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        os.remove(pre)
    os.replace(tmp, dst)
    print("quantize_ort: wrote %s (%s)" % (dst, kind), file=sys.stderr)


def main():
    if len(sys.argv) < 3 or any(n not in QUANTIZED for n in sys.argv[2:]):
        sys.exit(__doc__)
    for name in sys.argv[2:]:
        quantize(sys.argv[1], name)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""How closely wpk's output on an int8 model follows ONNX Runtime's on the same model, and how far
each is from the float model's. Runs in the venv of scripts/compare_ort.sh, which calls it for
its int8 rows.

Usage: agreement_ort.py INT8_MODEL FLOAT_MODEL INPUT_DIR WPK_CLI

INPUT_DIR holds input_0.pb, ... in the models' input order (the stored PyTorch input). Prints one
JSON line: "rel_l2_wpk_ort" (relative L2 between the two runtimes' outputs), "steps_wpk_ort" (the
largest difference in units of the output's quantization step, when the model's output is a
DequantizeLinear with a constant scale; else null), "rel_l2_to_float" for each runtime.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


def rel_l2(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / max(np.linalg.norm(b.astype(np.float64)), 1e-30))


def output_step(model_path):
    """The scale of the DequantizeLinear writing the model's first output, when it is a constant."""
    m = onnx.load(model_path, load_external_data=False)
    out = m.graph.output[0].name
    inits = {t.name: t for t in m.graph.initializer}
    for n in m.graph.node:
        if out in n.output and n.op_type == "DequantizeLinear" and n.input[1] in inits:
            scale = numpy_helper.to_array(inits[n.input[1]])
            return float(scale) if scale.size == 1 else None
    return None


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    int8_model, float_model, input_dir, cli = sys.argv[1:]
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    session = ort.InferenceSession(int8_model, so, providers=["CPUExecutionProvider"])
    feeds = {}
    for k, i in enumerate(session.get_inputs()):
        feeds[i.name] = numpy_helper.to_array(onnx.load_tensor(os.path.join(input_dir, "input_%d.pb" % k)))
    ort_out = session.run(None, feeds)[0]
    float_out = ort.InferenceSession(float_model, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    with tempfile.TemporaryDirectory() as out_dir:
        subprocess.run([cli, "run", int8_model, "--inputs", input_dir, "--outputs", out_dir], check=True,
                       stdout=subprocess.DEVNULL)
        wpk_out = numpy_helper.to_array(onnx.load_tensor(os.path.join(out_dir, "output_0.pb")))
    step = output_step(int8_model)
    print(json.dumps({
        "model": os.path.basename(int8_model)[:-5],
        "rel_l2_wpk_ort": round(rel_l2(wpk_out, ort_out), 5),
        "steps_wpk_ort": round(float(np.abs(wpk_out.astype(np.float64) - ort_out).max()) / step, 3) if step else None,
        "rel_l2_to_float": {"wpk": round(rel_l2(wpk_out, float_out), 5), "onnxruntime": round(rel_l2(ort_out, float_out), 5)},
    }), flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""ONNX Runtime on an ONNX backend test suite, judged as wpk_conformance judges wpk (same
rtol/atol, every data set, outputs in the model's order), so the two pass counts compare.

  .venv/bin/python scripts/conformance_ort.py DIR [DIR ...] [--verbose]

Prints one line per suite: passed, wrong, unsupported (the session could not be made) of cases.
"""
import argparse
import glob
import os
import sys

RTOL = 1e-3
ATOL = 1e-7


def load_value(path):
    import onnx
    from onnx import numpy_helper

    data = open(path, "rb").read()
    for proto, convert in ((onnx.TensorProto, numpy_helper.to_array),
                           (onnx.SequenceProto, numpy_helper.to_list),
                           (onnx.OptionalProto, numpy_helper.to_optional),
                           (onnx.MapProto, numpy_helper.to_dict)):
        p = proto()
        try:
            p.ParseFromString(data)
        except Exception:
            continue
        # A TensorProto parse of another message's bytes succeeds with no dims or data; check that
        # the message re-serialises to the same bytes before trusting it.
        if p.SerializeToString() == data:
            return convert(p)
    raise ValueError(f"{path}: not a tensor, sequence, optional or map")


def close(actual, expected):
    import numpy as np

    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(
            close(a, e) for a, e in zip(actual, expected))
    if expected is None:
        return actual is None
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        return False
    if expected.dtype.kind in "OUS":
        return actual.tolist() == expected.tolist()
    if expected.dtype.kind == "b" or expected.dtype.kind in "iu":
        return np.array_equal(actual, expected)
    return np.allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=RTOL, atol=ATOL, equal_nan=True)


def run_case(case_dir):
    import onnxruntime as ort

    try:
        options = ort.SessionOptions()
        options.log_severity_level = 4
        sess = ort.InferenceSession(os.path.join(case_dir, "model.onnx"), options, providers=["CPUExecutionProvider"])
    except Exception as e:
        return "unsupported", str(e).splitlines()[0] if str(e) else type(e).__name__
    names = [i.name for i in sess.get_inputs()]
    for set_dir in sorted(glob.glob(os.path.join(case_dir, "test_data_set_*"))):
        try:
            inputs = [load_value(p) for p in sorted(glob.glob(os.path.join(set_dir, "input_*.pb")),
                                                   key=lambda p: int(p.rsplit("_", 1)[1][:-3]))]
            expected = [load_value(p) for p in sorted(glob.glob(os.path.join(set_dir, "output_*.pb")),
                                                     key=lambda p: int(p.rsplit("_", 1)[1][:-3]))]
            outputs = sess.run(None, dict(zip(names, inputs)))
        except Exception as e:
            return "wrong", str(e).splitlines()[0] if str(e) else type(e).__name__
        if len(outputs) != len(expected) or not all(close(a, e) for a, e in zip(outputs, expected)):
            return "wrong", os.path.basename(set_dir) + ": outputs differ"
    return "passed", ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("suites", nargs="+")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    for suite in args.suites:
        tally = {"passed": 0, "wrong": 0, "unsupported": 0}
        cases = sorted(d for d in glob.glob(os.path.join(suite, "*")) if os.path.isdir(d))
        for case in cases:
            outcome, detail = run_case(case)
            tally[outcome] += 1
            if args.verbose and outcome != "passed":
                print(f"{outcome.upper():12} {os.path.basename(case)}: {detail[:200]}")
        print(f"{suite}: onnxruntime passed {tally['passed']}, wrong {tally['wrong']}, "
              f"unsupported {tally['unsupported']} of {len(cases)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

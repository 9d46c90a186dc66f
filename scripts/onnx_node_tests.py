#!/usr/bin/env python3
"""Writes the node test cases of the installed `onnx` package (a newer release than Debian's
libonnx-testdata) in the backend test-data layout: OUT/<case>/model.onnx and
OUT/<case>/test_data_set_0/{input,output}_<i>.pb.

Only cases whose model imports the default ONNX domain at an opset in [--min-opset, --max-opset]
are written; the others belong to Debian's suite or to opsets wpk does not claim. Cases whose
inputs or outputs are not plain tensors (sequences, maps, optionals) are written too, as
TensorProto, SequenceProto, MapProto or OptionalProto, so the runner can count them as unsupported.

  python scripts/onnx_node_tests.py OUT [--min-opset 18] [--max-opset 22]
"""
import argparse
import os
import shutil
import sys
import warnings


def default_opset(model):
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    return max(versions) if versions else None


def serialized(value, value_info):
    from onnx import TensorProto, numpy_helper

    t = value_info.type
    if t.HasField("sequence_type"):
        return numpy_helper.from_list(value, value_info.name).SerializeToString()
    if t.HasField("map_type"):
        return numpy_helper.from_dict(value, value_info.name).SerializeToString()
    if t.HasField("optional_type"):
        return numpy_helper.from_optional(value, value_info.name).SerializeToString()
    if isinstance(value, TensorProto):
        return value.SerializeToString()
    return numpy_helper.from_array(value, value_info.name).SerializeToString()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--min-opset", type=int, default=18)
    ap.add_argument("--max-opset", type=int, default=22)
    args = ap.parse_args()

    import onnx
    from onnx.backend.test.case import node as node_cases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case builders divide by zero on purpose
        cases = node_cases.collect_testcases()

    tmp = args.out + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    written = 0
    for case in cases:
        opset = default_opset(case.model)
        if opset is None or not (args.min_opset <= opset <= args.max_opset):
            continue
        case_dir = os.path.join(tmp, case.name)
        for k, (inputs, outputs) in enumerate(case.data_sets):
            set_dir = os.path.join(case_dir, f"test_data_set_{k}")
            os.makedirs(set_dir)
            graph = case.model.graph
            for kind, values, infos in (("input", inputs, graph.input), ("output", outputs, graph.output)):
                for i, value in enumerate(values):
                    with open(os.path.join(set_dir, f"{kind}_{i}.pb"), "wb") as f:
                        f.write(serialized(value, infos[i]))
        with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        written += 1
    shutil.rmtree(args.out, ignore_errors=True)
    os.rename(tmp, args.out)
    print(f"onnx_node_tests: {written} cases of opsets {args.min_opset}-{args.max_opset} "
          f"from onnx {onnx.__version__} in {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()

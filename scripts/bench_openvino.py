#!/usr/bin/env python3
"""The OpenVINO peer of `wpk bench`, as scripts/bench_ort.py is ONNX Runtime's (same options, same
JSON line with "runtime": "openvino"). Runs in the venv of scripts/compare_ort.sh (`--peer
openvino` installs openvino from PyPI).

Usage: bench_openvino.py MODEL [--threads N] [--batch B] [--iters K] [--warmup W] [--dim NAME=SIZE]... [--json]

OpenVINO runs the ONNX model on its CPU plugin with its defaults but for the threads
(INFERENCE_NUM_THREADS = N) and one stream with the latency hint: its default inference
precision is its own choice, bf16 on CPUs with AMX or AVX-512 BF16 (which wpk matches with
--precision bf16). Symbolic dims are fixed at load to --batch (the first) or --dim (else 1), as
OpenVINO compiles for static shapes; load_ms is read + reshape + compile. Inputs follow
bench_ort.py's rule (floats uniform in [-1, 1], integers in [0, 100)).
"""
import os
import time

# numpy's OpenBLAS starts a thread per core at import that spins for a while: left at its default
# it competes with the session being measured. The peer's own threads are set below.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402 (after the environment it reads)
import openvino as ov

from bench_common import parse_args, random_value, report, stored_inputs, time_runs

_DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64, "i32": np.int32, "boolean": np.bool_}


def main():
    a = parse_args("bench_openvino", "OpenVINO peer of `wpk bench`")
    core = ov.Core()
    stored = stored_inputs(a.inputs) if a.inputs else None
    t0 = time.perf_counter()
    model = core.read_model(a.model)
    if stored is not None and len(stored) != len(model.inputs):
        raise SystemExit("bench_openvino: %s holds %d inputs, the model takes %d" % (a.inputs, len(stored), len(model.inputs)))
    shapes = {}
    for n, port in enumerate(model.inputs):
        if stored is not None:
            shapes[port.get_any_name()] = list(stored[n].shape)
            continue
        shape = []
        for i, d in enumerate(port.get_partial_shape()):
            if d.is_static:
                shape.append(d.get_length())
            else:
                # A symbolic dim keeps its name in the ONNX file only; --dim applies by position 0 or name.
                shape.append(a.batch if i == 0 else a.dims.get(port.get_any_name(), 1))
        shapes[port.get_any_name()] = shape
    model.reshape(shapes)
    config = {"INFERENCE_NUM_THREADS": a.threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY"}
    compiled = core.compile_model(model, "CPU", config)
    load_ms = (time.perf_counter() - t0) * 1e3
    request = compiled.create_infer_request()

    rng = np.random.default_rng(20261121)
    feed = {}
    for n, port in enumerate(compiled.inputs):
        if stored is not None:
            feed[port.get_any_name()] = stored[n]
            continue
        dtype = _DTYPES.get(port.get_element_type().get_type_name())
        if dtype is None:
            raise SystemExit("bench_openvino: random inputs of type %s are not supported" % port.get_element_type())
        feed[port.get_any_name()] = random_value(rng, list(port.get_shape()), dtype)
    times = time_runs(lambda: request.infer(feed), a.warmup, a.iters)
    precision = str(core.get_property("CPU", "INFERENCE_PRECISION_HINT"))
    report(a, "openvino", load_ms, times, "openvino %s, inference precision %s" % (ov.__version__, precision),
           {"precision": precision})


if __name__ == "__main__":
    main()

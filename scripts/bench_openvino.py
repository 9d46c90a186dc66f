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
import argparse
import json
import os
import resource
import sys
import time

import numpy as np
import openvino as ov

_DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64, "i32": np.int32, "boolean": np.bool_}


def main():
    p = argparse.ArgumentParser(description="OpenVINO peer of `wpk bench`")
    p.add_argument("model")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    dims = {}
    for item in a.dim:
        name, _, size = item.partition("=")
        if not name or not size.isdigit() or int(size) < 1:
            sys.exit("bench_openvino: --dim needs NAME=SIZE with SIZE >= 1, got '%s'" % item)
        dims[name] = int(size)
    if a.threads < 1 or a.batch < 1 or a.iters < 1 or a.warmup < 0:
        sys.exit("bench_openvino: --threads, --batch and --iters need integers >= 1, --warmup >= 0")

    core = ov.Core()
    t0 = time.perf_counter()
    model = core.read_model(a.model)
    shapes = {}
    for port in model.inputs:
        shape = []
        for i, d in enumerate(port.get_partial_shape()):
            if d.is_static:
                shape.append(d.get_length())
            else:
                # A symbolic dim keeps its name in the ONNX file only; --dim applies by position 0 or name.
                shape.append(a.batch if i == 0 else dims.get(port.get_any_name(), 1))
        shapes[port.get_any_name()] = shape
    model.reshape(shapes)
    config = {"INFERENCE_NUM_THREADS": a.threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY"}
    compiled = core.compile_model(model, "CPU", config)
    load_ms = (time.perf_counter() - t0) * 1e3
    request = compiled.create_infer_request()

    rng = np.random.default_rng(20261121)
    feed = {}
    for port in compiled.inputs:
        dtype = _DTYPES.get(port.get_element_type().get_type_name())
        if dtype is None:
            sys.exit("bench_openvino: random inputs of type %s are not supported" % port.get_element_type())
        shape = list(port.get_shape())
        if dtype in (np.float32, np.float64, np.float16):
            feed[port.get_any_name()] = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
        elif dtype is np.bool_:
            feed[port.get_any_name()] = rng.integers(0, 2, size=shape).astype(np.bool_)
        else:
            feed[port.get_any_name()] = rng.integers(0, 100, size=shape).astype(dtype)
    for _ in range(a.warmup):
        request.infer(feed)
    times = []
    for _ in range(a.iters):
        t = time.perf_counter()
        request.infer(feed)
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    n = len(times)
    median = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    p90 = times[min(n - 1, int(0.9 * n))]
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    name = os.path.splitext(os.path.basename(a.model))[0]
    precision = core.get_property("CPU", "INFERENCE_PRECISION_HINT")
    if a.json:
        print(json.dumps({"model": name, "runtime": "openvino", "threads": a.threads, "batch": a.batch,
                          "load_ms": round(load_ms, 3), "median_ms": round(median, 3), "p90_ms": round(p90, 3),
                          "min_ms": round(times[0], 3), "peak_rss_mb": round(rss_mb, 1),
                          "precision": str(precision)}))
    else:
        print("model %s  batch %d  threads %d  (openvino %s, inference precision %s)"
              % (name, a.batch, a.threads, ov.__version__, precision))
        print("load %.1f ms  median %.3f ms  p90 %.3f ms  min %.3f ms  (%d runs after %d warm-up)  peak RSS %.1f MB"
              % (load_ms, median, p90, times[0], a.iters, a.warmup, rss_mb))


if __name__ == "__main__":
    main()

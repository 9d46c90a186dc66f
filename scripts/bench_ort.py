#!/usr/bin/env python3
"""The ONNX Runtime peer of `wpk bench`, for the comparison of ../shared/BENCHMARKS.md.

Usage: bench_ort.py MODEL [--threads N] [--batch B] [--iters K] [--warmup W] [--dim NAME=SIZE]... [--json]

Runs in the venv that has onnxruntime and numpy (scripts/compare_ort.sh makes it). One process
measures one model, so peak_rss_mb (getrusage of this process: the Python interpreter, numpy,
onnxruntime and the model together) belongs to that model alone.

The session follows the protocol: CPU execution provider, intra_op_num_threads = N,
inter_op_num_threads = 1, graph optimization level ALL, sequential execution. load_ms is the
time to create the InferenceSession (file to first-run-ready session). Inputs follow wpk's rule
for random inputs: floats uniform in [-1, 1], integers in [0, 100), booleans 0/1; a symbolic
first dimension takes --batch, any other symbolic dimension 1, unless --dim names it. A --dim
is also fixed in the session (a free dimension override), as `wpk bench` fixes the dims it sets
at load (SessionOptions::fixed_dims). The generator is numpy's, not
wpk's mt19937_64, so the values differ from wpk's but their distribution does not (the timing of
these fp32 models does not depend on the values). Median and p90 are computed exactly as
`wpk bench` computes them.
"""
import argparse
import json
import os
import resource
import sys
import time

import numpy as np
import onnxruntime as ort

_DTYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(bool)": np.bool_,
}


def make_inputs(session, batch, dims, seed=20261121):
    rng = np.random.default_rng(seed)
    feed = {}
    for info in session.get_inputs():
        shape = []
        for i, d in enumerate(info.shape):
            if isinstance(d, int) and d >= 0:
                shape.append(d)
            elif isinstance(d, str) and d in dims:
                shape.append(dims[d])
            else:  # symbolic (a name) or unknown (None)
                shape.append(batch if i == 0 else 1)
        dtype = _DTYPES.get(info.type)
        if dtype is None:
            sys.exit("bench_ort: random inputs of type %s are not supported (input '%s')" % (info.type, info.name))
        if dtype in (np.float32, np.float64, np.float16):
            value = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
        elif dtype is np.bool_:
            value = rng.integers(0, 2, size=shape).astype(np.bool_)
        else:
            value = rng.integers(0, 100, size=shape).astype(dtype)
        feed[info.name] = value
    return feed


def main():
    p = argparse.ArgumentParser(description="ONNX Runtime peer of `wpk bench`")
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
            sys.exit("bench_ort: --dim needs NAME=SIZE with SIZE >= 1, got '%s'" % item)
        dims[name] = int(size)
    if a.threads < 1 or a.batch < 1 or a.iters < 1 or a.warmup < 0:
        sys.exit("bench_ort: --threads, --batch and --iters need integers >= 1, --warmup >= 0")

    options = ort.SessionOptions()
    options.intra_op_num_threads = a.threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    for name, size in dims.items():
        options.add_free_dimension_override_by_name(name, size)

    t0 = time.perf_counter()
    session = ort.InferenceSession(a.model, sess_options=options, providers=["CPUExecutionProvider"])
    load_ms = (time.perf_counter() - t0) * 1e3

    feed = make_inputs(session, a.batch, dims)
    for _ in range(a.warmup):
        session.run(None, feed)
    times = []
    for _ in range(a.iters):
        t = time.perf_counter()
        session.run(None, feed)
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    n = len(times)
    median = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    p90 = times[min(n - 1, int(0.9 * n))]
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    model = os.path.splitext(os.path.basename(a.model))[0]
    if a.json:
        print(json.dumps({"model": model, "runtime": "onnxruntime", "threads": a.threads, "batch": a.batch,
                          "load_ms": round(load_ms, 3), "median_ms": round(median, 3), "p90_ms": round(p90, 3),
                          "min_ms": round(times[0], 3), "peak_rss_mb": round(rss_mb, 1)}))
    else:
        print("model %s  batch %d  threads %d  (onnxruntime %s)" % (model, a.batch, a.threads, ort.__version__))
        print("load %.1f ms  median %.3f ms  p90 %.3f ms  min %.3f ms  (%d runs after %d warm-up)  peak RSS %.1f MB"
              % (load_ms, median, p90, times[0], a.iters, a.warmup, rss_mb))


if __name__ == "__main__":
    main()

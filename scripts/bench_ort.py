#!/usr/bin/env python3
"""The ONNX Runtime peer of `wpk bench`, for the comparison of ../shared/BENCHMARKS.md.

Usage: bench_ort.py MODEL [--threads N] [--batch B] [--iters K] [--warmup W] [--dim NAME=SIZE]... [--inputs DIR] [--json]

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
import os
import sys
import time

# numpy's OpenBLAS starts a thread per core at import that spins for a while: left at its default
# it competes with the session being measured. The peer's own threads are set below.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402 (after the environment it reads)
import onnxruntime as ort

from bench_common import parse_args, random_value, report, stored_inputs, time_runs

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
        feed[info.name] = random_value(rng, shape, dtype)
    return feed


def main():
    a = parse_args("bench_ort", "ONNX Runtime peer of `wpk bench`")
    options = ort.SessionOptions()
    options.intra_op_num_threads = a.threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    for name, size in a.dims.items():
        options.add_free_dimension_override_by_name(name, size)

    stored = stored_inputs(a.inputs) if a.inputs else None
    t0 = time.perf_counter()
    session = ort.InferenceSession(a.model, sess_options=options, providers=["CPUExecutionProvider"])
    load_ms = (time.perf_counter() - t0) * 1e3

    if stored is not None:
        names = [i.name for i in session.get_inputs()]
        if len(stored) != len(names):
            sys.exit("bench_ort: %s holds %d inputs, the model takes %d" % (a.inputs, len(stored), len(names)))
        feed = dict(zip(names, stored))
    else:
        feed = make_inputs(session, a.batch, a.dims)
    times = time_runs(lambda: session.run(None, feed), a.warmup, a.iters)
    report(a, "onnxruntime", load_ms, times, "onnxruntime %s" % ort.__version__)


if __name__ == "__main__":
    main()

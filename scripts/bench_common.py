"""What scripts/bench_ort.py and scripts/bench_openvino.py share: the options of `wpk bench`, its
rule for random inputs, the timing loop and the JSON line of ../shared/BENCHMARKS.md. Imports
nothing heavy, so each peer's process holds only its own runtime (peak RSS is per runtime)."""
import argparse
import json
import os
import resource
import sys
import time

import numpy as np


def parse_args(prog, description):
    """The options of `wpk bench` both peers take; exits with a message on bad values."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("model")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE")
    p.add_argument("--inputs", metavar="DIR", help="input_0.pb, ... in the model's input order, for random ones")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    a.dims = {}
    for item in a.dim:
        name, _, size = item.partition("=")
        if not name or not size.isdigit() or int(size) < 1:
            sys.exit("%s: --dim needs NAME=SIZE with SIZE >= 1, got '%s'" % (prog, item))
        a.dims[name] = int(size)
    if a.threads < 1 or a.batch < 1 or a.iters < 1 or a.warmup < 0:
        sys.exit("%s: --threads, --batch and --iters need integers >= 1, --warmup >= 0" % prog)
    if a.inputs and not os.path.isfile(os.path.join(a.inputs, "input_0.pb")):
        sys.exit("%s: no input_0.pb in --inputs %s" % (prog, a.inputs))
    return a


def stored_inputs(folder):
    """input_0.pb, input_1.pb, ... of `folder` (the ONNX test-data layout) as numpy arrays, in order."""
    from onnx import TensorProto, numpy_helper  # only here: the peers' processes need it for --inputs alone
    arrays = []
    while os.path.isfile(os.path.join(folder, "input_%d.pb" % len(arrays))):
        t = TensorProto()
        with open(os.path.join(folder, "input_%d.pb" % len(arrays)), "rb") as f:
            t.ParseFromString(f.read())
        arrays.append(numpy_helper.to_array(t))
    return arrays


def random_value(rng, shape, dtype):
    """wpk bench's rule: floats uniform in [-1, 1], integers in [0, 100), booleans 0/1."""
    if dtype in (np.float32, np.float64, np.float16):
        return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    if dtype is np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    return rng.integers(0, 100, size=shape).astype(dtype)


def time_runs(run, warmup, iters):
    """Sorted wall times of `iters` calls of run() after `warmup` untimed ones, in ms."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        run()
        times.append((time.perf_counter() - t) * 1e3)
    return sorted(times)


def report(a, runtime, load_ms, times, header, extra=None):
    """Median and p90 exactly as `wpk bench` computes them; the JSON line, or two text lines."""
    n = len(times)
    median = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    p90 = times[min(n - 1, int(0.9 * n))]
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    model = os.path.splitext(os.path.basename(a.model))[0]
    if a.json:
        line = {"model": model, "runtime": runtime, "threads": a.threads, "batch": a.batch,
                "load_ms": round(load_ms, 3), "median_ms": round(median, 3), "p90_ms": round(p90, 3),
                "min_ms": round(times[0], 3), "peak_rss_mb": round(rss_mb, 1)}
        line.update(extra or {})
        print(json.dumps(line))
    else:
        print("model %s  batch %d  threads %d  (%s)" % (model, a.batch, a.threads, header))
        print("load %.1f ms  median %.3f ms  p90 %.3f ms  min %.3f ms  (%d runs after %d warm-up)  peak RSS %.1f MB"
              % (load_ms, median, p90, times[0], a.iters, a.warmup, rss_mb))

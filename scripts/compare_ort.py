#!/usr/bin/env python3
"""Side-by-side speed comparison of wpk and ONNX Runtime, by the protocol of ../shared/BENCHMARKS.md.
Run it through scripts/compare_ort.sh, which makes the venv and builds wpk first.

Usage: compare_ort.py [--models LIST] [--iters K] [--rounds R] [--warmup W] [--threads N] [--quick] [--fix-dims]
                      [--peer onnxruntime|openvino] [--precision fp32|bf16]

LIST is comma-separated: NAME (its default rows) or NAME:BATCH, or `all` (every model in the models
folder at batch 1). The default rows are resnet50:1, mobilenet_v2:1, bert_base:1 (seq 128),
resnet50:8, and the int8 rows resnet50_int8:1 and bert_base_int8:1; a NAME with no default row runs
at batch 1. Models come from scripts/export_models.py (build/models), exported on first use; the
int8 ones from scripts/quantize_ort.py (ONNX Runtime's quantization tool), made on first use
(resnet18_int8_dynamic, not a default row: ResNet-18 quantized dynamically, its convs ConvInteger).

--peer openvino measures OpenVINO (scripts/bench_openvino.py: its CPU defaults, so bf16 where the
CPU has AMX or AVX-512 BF16) in place of ONNX Runtime; --precision bf16 runs wpk with
`--precision bf16` (the issue's AMX rows: wpk bf16 against OpenVINO's default).

With --fix-dims both runtimes get the model's symbolic first dims (its batch) fixed at load to the
row's batch, or to the stored input's where a row runs one (`--dim NAME=SIZE`:
SessionOptions::fixed_dims in wpk, a free dimension override in ONNX Runtime); by default they
stay symbolic, as the models declare them.

For each row it runs R rounds of `wpk bench` then scripts/bench_ort.py (A B A B ...), each a fresh
process doing W warm-up runs and K timed runs, so drift hits both and peak RSS is per model; the
model file is read once before a row's rounds, so both load it from the page cache. At
batch 1 both feed the model's stored input (NAME/test_data_set_0, `--inputs`) where it has one:
some models take only meaningful values (the greedy decoder's token ids lie below its vocabulary). It
then prints, on stdout, one JSON line per runtime in the format of BENCHMARKS.md, aggregated over
the rounds (median_ms and p90_ms: median of the rounds' values; min_ms: the least; load_ms: the
slowest of the rounds' loads; peak_rss_mb: the largest), and one ratio line wpk / onnxruntime (below 1.0 =
wpk faster): ratio_median of the aggregated medians (the protocol's), and ratio_rounds, the median
of each round's ratio of the two neighbouring processes' medians, which a machine that slows
down for a few seconds at a time (a shared VM) moves less. For the int8 rows a last line
(scripts/agreement_ort.py) says how closely the two runtimes' outputs agree on the stored input,
and how far each is from the float model. Progress
and per-round figures go to stderr. Exit status 1 if any row failed.
"""
import argparse
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_ROWS = [("resnet50", 1), ("mobilenet_v2", 1), ("bert_base", 1), ("resnet50", 8),
                ("resnet50_int8", 1), ("bert_base_int8", 1)]
EXPORTABLE = ["resnet18", "resnet50", "mobilenet_v2", "bert_base"]
# made by scripts/quantize_ort.py
QUANTIZED = {"resnet50_int8": "resnet50", "bert_base_int8": "bert_base", "resnet18_int8_dynamic": "resnet18"}
FIELDS = ["model", "runtime", "threads", "batch", "load_ms", "median_ms", "p90_ms", "min_ms", "peak_rss_mb"]


def log(msg):
    print("compare_ort: " + msg, file=sys.stderr, flush=True)


def warn_if_busy(when):
    """These machines are shared: a load above the core count makes every figure slower and noisier."""
    try:
        load, cores = os.getloadavg()[0], os.cpu_count() or 1
    except OSError:
        return
    if load > cores:
        log("warning: load average %.1f on %d cores %s; the figures are noisy (ratios hold up better than times)"
            % (load, cores, when))


def read_into_page_cache(path):
    """Reads the model file once, so the runtime measured first in a row does not alone pay for
    bringing it from disk: these machines page out file data idle for about a minute (DAMON's
    proactive reclaim), and a row's first wpk load read its model cold (twice its other loads)."""
    folder = os.path.dirname(os.path.join(ROOT, path)) or "."
    stem = os.path.basename(path)
    for name in [stem] + [f for f in sorted(os.listdir(folder)) if f.startswith(stem + ".")]:  # external data
        with open(os.path.join(folder, name), "rb") as f:
            while f.read(1 << 24):
                pass


def batch_dims(path, batch, stored=None):
    """(name, size) of the model inputs' symbolic first dims: `batch`, or with a stored input folder
    the size its input_<i>.pb has there. Read with Debian's onnx in a separate process (so neither
    benchmark process pays for it)."""
    code = ("import onnx, os, sys\n"
            "g = onnx.load(sys.argv[1], load_external_data=False).graph\n"
            "init = {t.name for t in g.initializer}\n"
            "inputs = [i for i in g.input if i.name not in init]\n"
            "for k, i in enumerate(inputs):\n"
            "    d = i.type.tensor_type.shape.dim\n"
            "    if not len(d) or not d[0].dim_param: continue\n"
            "    size = sys.argv[2]\n"
            "    if len(sys.argv) > 3:\n"
            "        t = onnx.TensorProto()\n"
            "        with open(os.path.join(sys.argv[3], 'input_%d.pb' % k), 'rb') as f: t.ParseFromString(f.read())\n"
            "        size = t.dims[0]\n"
            "    print(d[0].dim_param, size)\n")
    args = ["/usr/bin/python3", "-c", code, path, str(batch)] + ([stored] if stored else [])
    out = subprocess.run(args, cwd=ROOT, check=True, capture_output=True, text=True)
    return sorted(set(tuple(line.split()) for line in out.stdout.splitlines() if line.strip()))


def parse_rows(spec, models_dir):
    if not spec:
        return list(DEFAULT_ROWS)
    if spec == "all":
        folder = os.path.join(ROOT, models_dir)
        return [(f[:-5], 1) for f in sorted(os.listdir(folder)) if f.endswith(".onnx")]
    rows = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if ":" in item:
            name, b = item.split(":", 1)
            if not b.isdigit() or int(b) < 1:
                sys.exit("compare_ort: bad batch in '%s' (NAME:BATCH, BATCH >= 1)" % item)
            rows.append((name, int(b)))
        else:
            rows.extend([r for r in DEFAULT_ROWS if r[0] == item] or [(item, 1)])
    return rows


def run_json(cmd):
    """Runs one measurement process; returns its JSON line as a dict, or None with the error logged."""
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        log("failed (exit %d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr.strip()))
        return None
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        log("no JSON line from: %s\n%s" % (" ".join(cmd), p.stdout.strip()))
        return None


def aggregate(results, runtime, model, threads, batch):
    return {
        "model": model, "runtime": runtime, "threads": threads, "batch": batch,
        # A service restarts and scales out by loading: the slowest load is the one it waits for.
        "load_ms": round(max(r["load_ms"] for r in results), 3),
        "median_ms": round(statistics.median(r["median_ms"] for r in results), 3),
        "p90_ms": round(statistics.median(r["p90_ms"] for r in results), 3),
        "min_ms": round(min(r["min_ms"] for r in results), 3),
        "peak_rss_mb": round(max(r["peak_rss_mb"] for r in results), 1),
    }


def ratio(a, b):
    return round(a / b, 3) if b > 0 else None


def round_ratio(ours, theirs):
    """The median over rounds of wpk's median / the peer's in that round (None if none has one)."""
    ratios = [r for r in (ratio(x["median_ms"], y["median_ms"]) for x, y in zip(ours, theirs)) if r is not None]
    return round(statistics.median(ratios), 3) if ratios else None


def main():
    p = argparse.ArgumentParser(description="wpk vs ONNX Runtime, side by side (see BENCHMARKS.md)")
    p.add_argument("--models", default="", help="comma-separated NAME or NAME:BATCH (default: the four rows)")
    p.add_argument("--iters", type=int, help="timed runs per process (default 20; --quick 3)")
    p.add_argument("--rounds", type=int, help="A B rounds per row (default 5; --quick 2)")
    p.add_argument("--warmup", type=int, help="warm-up runs per process (default 3; --quick 1)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="a smoke test, not a measurement by the protocol")
    p.add_argument("--fix-dims", action="store_true", help="fix the batch dims at load in both runtimes")
    p.add_argument("--peer", choices=["onnxruntime", "openvino"], default="onnxruntime")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="wpk's SessionOptions::precision")
    p.add_argument("--wpk", default=os.path.join("build", "examples", "wpk"))
    p.add_argument("--models-dir", default=os.path.join("build", "models"))
    a = p.parse_args()
    iters = a.iters if a.iters is not None else (3 if a.quick else 20)
    rounds = a.rounds if a.rounds is not None else (2 if a.quick else 5)
    warmup = a.warmup if a.warmup is not None else (1 if a.quick else 3)
    if iters < 1 or rounds < 1 or warmup < 0 or a.threads < 1:
        sys.exit("compare_ort: --iters, --rounds and --threads need integers >= 1, --warmup >= 0")
    if warmup < 3 or iters * rounds < 20:
        log("note: %d warm-up and %d timed runs per runtime: fewer than the protocol's 3 and 20, a smoke test only"
            % (warmup, iters * rounds))
    rows = parse_rows(a.models, a.models_dir)
    if not os.access(os.path.join(ROOT, a.wpk), os.X_OK):
        sys.exit("compare_ort: %s not found; build it with scripts/setup.sh" % a.wpk)

    names = sorted({m for m, _ in rows})
    to_export = sorted({QUANTIZED.get(m, m) for m in names} & set(EXPORTABLE))
    if to_export:
        subprocess.run(["/usr/bin/python3", "scripts/export_models.py", a.models_dir] + to_export, cwd=ROOT, check=True)
    to_quantize = [m for m in names if m in QUANTIZED]
    if to_quantize:
        subprocess.run([sys.executable, "scripts/quantize_ort.py", a.models_dir] + to_quantize, cwd=ROOT, check=True)
    for m in names:
        if not os.path.exists(os.path.join(ROOT, a.models_dir, m + ".onnx")):
            sys.exit("compare_ort: no model %s.onnx in %s (exportable: %s)"
                     % (m, a.models_dir, " ".join(EXPORTABLE + sorted(QUANTIZED))))

    # The peer's version from its package metadata, not by importing it: the import brings numpy,
    # whose OpenBLAS threads spin for a while after it and took CPU from the first measured process
    # (its load ran ~40% slower than the next ones').
    try:
        peer_version = importlib.metadata.version(a.peer)
    except importlib.metadata.PackageNotFoundError:
        sys.exit("compare_ort: %s is not installed in this Python (%s)" % (a.peer, sys.executable))
    log("%s %s, wpk %s, %d threads, %d rounds x (%d warm-up + %d timed runs) per runtime and row"
        % (a.peer, peer_version, a.precision, a.threads, rounds, warmup, iters))
    peer_bench = os.path.join("scripts", "bench_openvino.py" if a.peer == "openvino" else "bench_ort.py")

    warn_if_busy("before the run")
    failed = 0
    for model, batch in rows:
        path = os.path.join(a.models_dir, model + ".onnx")
        common = ["--threads", str(a.threads), "--batch", str(batch), "--iters", str(iters), "--warmup", str(warmup), "--json"]
        # At batch 1 both runtimes run the model's own stored input where it has one: some models
        # take only meaningful values (a decoder's token ids below its vocabulary).
        stored = os.path.join(a.models_dir, model, "test_data_set_0")
        uses_stored = batch == 1 and os.path.isfile(os.path.join(ROOT, stored, "input_0.pb"))
        if uses_stored:
            common += ["--inputs", stored]
        fix = []
        if a.fix_dims:  # the stored input's sizes where it runs one (a few store a batch of 2 or 3)
            for name, size in batch_dims(path, batch, stored if uses_stored else None):
                fix += ["--dim", "%s=%s" % (name, size)]
        cmds = {"wpk": [a.wpk, "bench", path] + common + fix + (["--fix-dims"] if fix else []) +
                       (["--precision", a.precision] if a.precision != "fp32" else []),
                a.peer: [sys.executable, peer_bench, path] + common + fix}
        results = {"wpk": [], a.peer: []}
        read_into_page_cache(path)
        ok = True
        for r in range(rounds):
            for runtime in ("wpk", a.peer):  # A B A B ...
                res = run_json(cmds[runtime])
                if res is None:
                    ok = False
                    break
                results[runtime].append(res)
                log("%s batch %d round %d/%d %-11s median %.3f ms  min %.3f ms  load %.1f ms  rss %.1f MB"
                    % (model, batch, r + 1, rounds, runtime, res["median_ms"], res["min_ms"], res["load_ms"],
                       res["peak_rss_mb"]))
            if not ok:
                break
        if not ok:
            failed += 1
            log("%s batch %d: skipped" % (model, batch))
            continue
        w = aggregate(results["wpk"], "wpk", model, a.threads, batch)
        o = aggregate(results[a.peer], a.peer, model, a.threads, batch)
        print(json.dumps({k: w[k] for k in FIELDS}))
        print(json.dumps({k: o[k] for k in FIELDS}))
        print(json.dumps({"model": model, "batch": batch, "threads": a.threads,
                          "ratio_median": ratio(w["median_ms"], o["median_ms"]),
                          "ratio_rounds": round_ratio(results["wpk"], results[a.peer]),
                          "ratio_rss": ratio(w["peak_rss_mb"], o["peak_rss_mb"]),
                          "ratio_load": ratio(w["load_ms"], o["load_ms"])}), flush=True)
        if model in QUANTIZED and a.peer == "onnxruntime":
            base = QUANTIZED[model]
            subprocess.run([sys.executable, os.path.join("scripts", "agreement_ort.py"), path,
                            os.path.join(a.models_dir, base + ".onnx"),
                            os.path.join(a.models_dir, base, "test_data_set_0"), a.wpk], cwd=ROOT, check=False)
    warn_if_busy("at the end")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

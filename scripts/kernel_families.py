#!/usr/bin/env python3
"""Which kernel family was fastest on each tuned node, from a cache folder's trial logs.

Usage: kernel_families.py [CACHE_DIR] [--ops SUBSTRING,...] [--all]

Reads CACHE_DIR/tuning-v1.tsv (default: where wpk keeps it: $WPK_CACHE_DIR, else
$XDG_CACHE_HOME/wpk, else ~/.cache/wpk) as `wpk tune` left it
and, for each environment (machine, compiler, format) in it, prints per logged node signature the
best measured trial of each kernel family (backend and kernel name up to `__`, or oneDNN's
algorithm: the tuner's families), fastest first; then, for each hand-written family of the cpu
backend, over the signatures where it was the fastest of all: how far the best generated kernel
was behind it (median of gen / hand-written, and how many within 3%, the code-generation
issue's rule for deleting a hand-written kernel); then, per op, the best generated kernel against
the best that runs on oneDNN alone (oneDNN's algorithms, or a group's parts all on oneDNN) and
against the best of any other backend, over the signatures where both were measured.
--summary prints the two summaries only. --ops keeps signatures whose op text holds one of the
substrings (default: Conv,MatMul,Gemm,Attention,Pool,Normalization,Softmax); --all keeps every one.
Times are the tuner's medians in microseconds; rejected or failed trials (inf) are left out.
"""
import argparse
import math
import os
import statistics
import sys
from collections import defaultdict

DEFAULT_OPS = "Conv,MatMul,Gemm,Attention,Pool,Normalization,Softmax"


def family(identity, kernel):
    """The tuner's family (tuner.cpp's candidate_family): the backend and the kernel's name up to
    `__`, or where the kernel has no name (oneDNN's) the config's first knob."""
    backend, _, config = identity.partition("(")
    return backend + ":" + (kernel.split("__", 1)[0] if kernel else config.rstrip(")").split(",", 1)[0])


def parse_trials(value):
    """[(family, us, identity, threads)] of one trial log, skipping malformed items as wpk does."""
    out = []
    for item in value[len("trials:"):].split(";"):
        parts = item.split("|")
        if len(parts) < 4:
            continue
        try:
            us = float(parts[2])
        except ValueError:
            continue
        if not math.isfinite(us) or parts[0].startswith("reference"):
            continue
        kernel = parts[4] if len(parts) > 4 else ""
        out.append((family(parts[0], kernel), us, parts[0], parts[1]))
    return out


def onednn_only(fam):
    """True for a family that runs on oneDNN alone: one of its algorithms, or a group whose parts
    all run there."""
    if fam.startswith("onednn:"):
        return True
    return fam.startswith("parts:") and all(p.startswith("onednn(") for p in fam[len("parts:"):].split("+"))


def read_database(path):
    envs, nodes = {}, defaultdict(dict)  # env hash -> key; env hash -> {op: {family: (us, identity, threads)}}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# env "):
                h, _, key = line[len("# env "):].partition("\t")
                envs[h] = key
                continue
            fields = line.split("\t")
            if line.startswith("#") or len(fields) < 5 or not fields[2].startswith("trials:"):
                continue
            best = nodes[fields[0]].setdefault(fields[4], {})
            for fam, us, identity, threads in parse_trials(fields[2]):
                if fam not in best or us < best[fam][0]:
                    best[fam] = (us, identity, threads)
    return envs, nodes


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("cache_dir", nargs="?",
                   default=os.environ.get("WPK_CACHE_DIR") or
                   os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "wpk"))
    p.add_argument("--ops", default=DEFAULT_OPS)
    p.add_argument("--all", action="store_true")
    p.add_argument("--summary", action="store_true", help="the summaries only, not each signature's families")
    a = p.parse_args()
    path = os.path.join(a.cache_dir, "tuning-v1.tsv")
    if not os.path.exists(path):
        sys.exit("kernel_families: no tuning database at %s (run `wpk tune` with WPK_CACHE_DIR there)" % path)
    envs, nodes = read_database(path)
    wanted = [s for s in a.ops.split(",") if s]
    for env, ops in nodes.items():
        print("== environment %s: %s" % (env, envs.get(env, "(no env line)")))
        behind = defaultdict(list)  # hand-written family -> [gen best / its best] where it won
        versus = defaultdict(list)  # (op, against) -> [gen best / the other's best]
        for op in sorted(ops):
            if not a.all and not any(s in op for s in wanted):
                continue
            ranked = sorted(ops[op].items(), key=lambda kv: kv[1][0])
            if not ranked:
                continue
            if not a.summary:
                print(op)
                for fam, (us, identity, threads) in ranked:
                    print("  %10.1f us  threads=%s  %-28s %s" % (us, threads, fam, identity))
            winner, (win_us, _, _) = ranked[0]
            gen = [us for fam, (us, _, _) in ranked if fam.startswith("gen:")]
            if winner.startswith("cpu:") and gen:
                behind[winner].append(gen[0] / win_us)
            onednn = [us for fam, (us, _, _) in ranked if onednn_only(fam)]
            others = [us for fam, (us, _, _) in ranked if not fam.startswith("gen:")]
            if gen and onednn:
                versus[op.split(" ", 1)[0], "oneDNN alone"].append(gen[0] / onednn[0])
            if gen and others:
                versus[op.split(" ", 1)[0], "any other"].append(gen[0] / others[0])
        print("\nhand-written families where they won, against the best generated kernel there:")
        if not behind:
            print("  (none: no hand-written kernel won a signature that a generated one also ran)")
        for fam, ratios in sorted(behind.items()):
            within = sum(r <= 1.03 for r in ratios)
            print("  %-28s won %3d signatures; gen / it: median %.2f, range %.2f-%.2f, within 3%%: %d" %
                  (fam, len(ratios), statistics.median(ratios), min(ratios), max(ratios), within))
        print("\nthe best generated kernel against the best on oneDNN alone and the best of any other backend,")
        print("per op (gen / it):")
        if not versus:
            print("  (none: no signature measured a generated kernel and another)")
        for (op, against), ratios in sorted(versus.items()):
            print("  %-30s vs %-12s %3d signatures; median %.2f, range %.2f-%.2f, generated ahead on %d" %
                  (op, against, len(ratios), statistics.median(ratios), min(ratios), max(ratios), sum(r < 1 for r in ratios)))
        print()


if __name__ == "__main__":
    main()

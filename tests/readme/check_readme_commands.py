#!/usr/bin/python3
"""Every `wpk` command line the README shows works as written.

    check_readme_commands.py README.md WPK_CLI

For each command line in a code block, and each `wpk ...` in inline code: the subcommand must be
one the tool has, and each option it names must be accepted: the tool runs with it (a sample
value where it takes one) on a small model and exits 0. Placeholders (MODEL, N, FILE, ...) take
sample values; an option that takes a value and has no sample here fails, so a new one gets one.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

readme, cli = sys.argv[1], os.path.abspath(sys.argv[2])
work = tempfile.mkdtemp(prefix="wpk-readme-")
failures = []

# A two-node model with a symbolic batch, and an input for it in the test-data layout.
model = os.path.join(work, "model.onnx")
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
w = numpy_helper.from_array(np.full((4, 4), 0.25, np.float32), "w")
graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
                          "readme", [x], [y], [w])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
inputs = os.path.join(work, "inputs")
os.makedirs(inputs)
with open(os.path.join(inputs, "input_0.pb"), "wb") as f:
    f.write(numpy_helper.from_array(np.ones((1, 4), np.float32), "x").SerializeToString())

have_dot = shutil.which("dot") is not None
# Options that take no value, and a sample value for the others.
switches = {"--json", "--profile", "--tune", "--fix-dims", "--optimized", "--reduce-range"}
samples = {
    "--inputs": inputs, "--outputs": os.path.join(work, "out"), "--threads": "1", "--batch": "2", "--iters": "1",
    "--warmup": "0", "--dim": "N=2", "--trace": os.path.join(work, "trace.json"), "--idle": "1", "--clients": "2",
    "--dot": os.path.join(work, "g.dot"), "--svg": os.path.join(work, "g.svg"), "--algo": "ga",
    "--budget-seconds": "1", "--budget-trials": "2", "--seed": "1", "--disable": "fold_pad",
    "--disable-kernels": "gen", "--dir": os.path.join(work, "cache"), "--method": "percentile", "--percentile": "99.9",
    "--precision": "bf16", "--device": "auto", "--simulate": "sm_90",
}
subcommands = {"run", "bench", "info", "tune", "cache", "quantize"}
# What a subcommand needs besides MODEL to run at all.
required = {"quantize": [os.path.join(work, "int8.onnx"), "--calibrate", inputs]}


def commands(text):
    """(line number, command text) for each wpk command the README shows."""
    found, in_code = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            m = re.match(r"\s*(?:build/examples/)?wpk (.*)", line)
            if m:
                found.append((number, "wpk " + m.group(1).split("#")[0]))
        else:
            for m in re.finditer(r"`((?:build/examples/)?wpk [a-z][^`]*)`", line):
                found.append((number, re.sub(r"^build/examples/", "", m.group(1))))
    return found


def run(args, where):
    env = dict(os.environ, WPK_CACHE_DIR=os.path.join(work, "cache"))
    r = subprocess.run([cli] + args, cwd=work, env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        failures.append(f"{where}: wpk {' '.join(args)} exited {r.returncode}: {r.stderr.strip()}")


checked = set()
with open(readme) as f:
    found = commands(f.read())
for number, command in found:
    where = f"README.md:{number} `{command.strip()}`"
    words = command.split()
    if len(words) < 2:
        continue
    if words[1] in ("--help", "-h"):
        run([words[1]], where)
        continue
    subs = words[1].split("|") if words[1] != "cache" else ["cache"]
    for sub in subs:
        if sub not in subcommands:
            failures.append(f"{where}: '{sub}' is not a wpk subcommand")
            continue
        actions = [None]
        if sub == "cache":
            actions = words[2].split("|") if len(words) > 2 and not words[2].startswith("-") else ["ls"]
        options = sorted(set(re.findall(r"--[a-z][a-z-]*", command)))
        for action in actions:
            head = ["cache", action] if sub == "cache" else [sub, model] + required.get(sub, [])
            if ("--svg" in options) and not have_dot:
                options = [o for o in options if o != "--svg"]
            for option in options or [None]:
                key = (sub, action, option)
                if key in checked:
                    continue
                checked.add(key)
                if option is None or option in head:
                    run(head, where)
                elif option in switches:
                    run(head + [option], where)
                elif option in samples:
                    run(head + [option, samples[option]], where)
                else:  # the tool says whether it knows the option; a real one needs a sample value here
                    run(head + [option], where + f" (no sample value for {option} in {os.path.basename(sys.argv[0])})")

print(f"{len(found)} README command lines, {len(checked)} subcommand/option pairs run")
shutil.rmtree(work, ignore_errors=True)
if failures:
    print("\n".join(failures), file=sys.stderr)
    sys.exit(1)

#!/usr/bin/env bash
# What generated kernels win after tuning, per model, and how they compare with oneDNN and with
# wpk's hand-written kernels (the code-generation issue's evidence):
#   scripts/codegen_evidence.sh [MODELS...]
# Default models: resnet50 mobilenet_v2 bert_base densenet121 efficientnet_b0, plus a chain of
# element-wise ops built here (elementwise_chain: Mul, Add, Sigmoid, Mul, Sub, Relu over
# [1, 64, 112, 112] with per-channel constants, kept in build/codegen_evidence/models). For each
# model, into a cache folder of its own under build/codegen_evidence: the steps a generated kernel
# runs untuned (an empty folder) and after `wpk tune` (default budget), the ratio to ONNX Runtime
# of both (compare_ort.py, 3 rounds: ratio_median, and ratio_rounds in brackets),
# and from the tuning trials (kernel_families.py --summary) the best generated kernel against
# the best on oneDNN alone per op, and against the hand-written kernels where those won.
# About an hour on 2 cores; nothing else should run meanwhile (the timings are the evidence).
set -euo pipefail
cd "$(dirname "$0")/.."

models=("$@")
[ ${#models[@]} -gt 0 ] || models=(resnet50 mobilenet_v2 bert_base densenet121 efficientnet_b0 elementwise_chain)
scripts/setup.sh >&2  # incremental: quick when the build is current
python=$(scripts/peer_venv.sh)  # ONNX Runtime for the ratios
exported=()
for m in "${models[@]}"; do [ "$m" = elementwise_chain ] || exported+=("$m"); done
[ ${#exported[@]} -eq 0 ] || /usr/bin/python3 scripts/export_models.py build/models "${exported[@]}" >&2
out=build/codegen_evidence
rm -rf "$out/empty" && mkdir -p "$out/empty" "$out/models"
if [[ " ${models[*]} " == *" elementwise_chain "* ]]; then
  /usr/bin/python3 - "$out/models/elementwise_chain.onnx" <<'EOF'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(1)
consts = [numpy_helper.from_array(rng.uniform(lo, hi, (1, 64, 1, 1)).astype(np.float32), name)
          for name, lo, hi in (("scale", 0.5, 1.5), ("shift", -0.5, 0.5), ("floor", -0.2, 0.2))]
nodes = [helper.make_node("Mul", ["input", "scale"], ["scaled"]),
         helper.make_node("Add", ["scaled", "shift"], ["shifted"]),
         helper.make_node("Sigmoid", ["shifted"], ["gate"]),
         helper.make_node("Mul", ["gate", "input"], ["gated"]),
         helper.make_node("Sub", ["gated", "floor"], ["lowered"]),
         helper.make_node("Relu", ["lowered"], ["output"])]
shape = [1, 64, 112, 112]
graph = helper.make_graph(nodes, "elementwise_chain",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)], consts)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
EOF
fi

wpk=build/examples/wpk
# Steps of a profiled run, and how many of them ran a generated kernel (backend `gen(...)`).
gen_steps() {
  WPK_CACHE_DIR="$1" "$wpk" bench "$2" --iters 5 --profile 2>/dev/null |
    awk '/^ +ms +share/ {on = 1; next} on && NF >= 5 && $1 ~ /^[0-9.]+$/ {n++; if ($5 ~ /^gen[(:]/) g++} END {printf "%d of %d steps", g, n}'
}
ratio() {
  WPK_CACHE_DIR="$1" OMP_WAIT_POLICY=active "$python" scripts/compare_ort.py --models "$2:1" --models-dir "$3" \
    --rounds 3 2>/dev/null |
    sed -n 's/.*"ratio_median": \([0-9.]*\), "ratio_rounds": \([0-9.]*\).*/\1 (\2)/p' | tail -1
}
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; wpk $(git rev-parse --short HEAD)"
for m in "${models[@]}"; do
  dir=build/models
  [ "$m" != elementwise_chain ] || dir=$out/models
  model=$dir/$m.onnx
  tuned=$out/$m
  rm -rf "$tuned" && mkdir -p "$tuned"
  echo "== $m"
  echo "untuned: generated kernels run $(gen_steps "$out/empty" "$model"); ratio to ONNX Runtime $(ratio "$out/empty" "$m" "$dir")"
  start=$(date +%s)
  WPK_CACHE_DIR="$tuned" "$wpk" tune "$model" 2>/dev/null | grep -i "end to end" || true
  echo "wpk tune: $(($(date +%s) - start)) s"
  echo "tuned:   generated kernels run $(gen_steps "$tuned" "$model"); ratio to ONNX Runtime $(ratio "$tuned" "$m" "$dir")"
  /usr/bin/python3 scripts/kernel_families.py "$tuned" --summary --all | grep -v '^== environment' | sed '/^$/d'
done

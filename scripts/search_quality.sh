#!/usr/bin/env bash
# How well GA and RL search against the exhaustive grid and random search, on the conv and matmul
# nodes of ResNet-50, MobileNetV2 and the BERT-base-like encoder (batch 1, 2 threads):
#   scripts/search_quality.sh [MODELS...]
# For each model, `wpk tune --algo compare` measures every configuration of every node, then
# replays random, GA and RL on those measurements with 3 seeds each and 15% of the grid's
# trials; it prints per strategy the median and mean gap to the grid's best and how many
# (node, seed) runs came within 5%. Uses a fresh cache folder (no records) and leaves it behind
# in build/search_quality_cache. Slow: every configuration is compiled before it is measured
# (ResNet-50 and MobileNetV2 together took about 15 minutes on a 2-core Zen 3).
set -euo pipefail
cd "$(dirname "$0")/.."

models=("$@")
[ ${#models[@]} -gt 0 ] || models=(resnet50 mobilenet_v2 bert_base)
scripts/setup.sh >&2  # incremental: quick when the build is current
/usr/bin/python3 scripts/export_models.py build/models "${models[@]}" >&2

cache=build/search_quality_cache
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
for m in "${models[@]}"; do
  rm -rf "$cache" && mkdir -p "$cache"
  echo "== $m"
  WPK_CACHE_DIR="$cache" build/examples/wpk tune "build/models/$m.onnx" --algo compare --threads 2 --iters 5 2>/dev/null |
    sed -n '/ grid best /,/^rl /p'
done

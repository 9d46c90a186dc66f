#!/bin/bash
# On a GPU machine: the CUDA tests and the three models' device times, untuned and after `wpk
# tune`, from binaries scripts/gpu_bundle.sh packed elsewhere. Everything goes to RESULTS_DIR
# (log.txt holds the summary; one file per bench with its debug log: each region step's device
# time and the library variants measured at load).
# Usage: scripts/gpu_check.sh BUNDLE.tar.xz RESULTS_DIR [MODEL:BATCH ...]
# Environment: TUNE_RUNS (MODEL:BATCH pairs to tune, default "resnet50:1 mobilenet_v2:1 resnet50:8
# bert_base:8"; set but empty: tune nothing), TRIALS (per distinct op, default 24), TUNE_SECONDS
# (per tune, default 75), TESTS (the test filter, default the device tests' tags; set but empty:
# no tests).
set -uo pipefail
bundle=$1 results=$2
shift 2
runs=${*:-resnet50:1 resnet50:8 mobilenet_v2:1 mobilenet_v2:8 bert_base:1 bert_base:8}
mkdir -p "$results"
exec > >(tee "$results/log.txt") 2>&1
start=$(date +%s)
stage() { echo "== $(($(date +%s) - start)) s: $*"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
b=$(mktemp -d)
tar -C "$b" -xJf "$bundle"
# The bundle's libraries, then cuDNN and the toolkit where such machines keep them.
libs="$b/lib"
for l in libcudnn.so.9 libcublasLt.so.13 libnvrtc.so.13; do
  found=$(find /usr/local/cuda*/ /opt /usr/lib -name "$l" 2>/dev/null | head -1)
  [ -n "$found" ] && libs="$libs:$(dirname "$found")"
done
export LD_LIBRARY_PATH="$libs:${LD_LIBRARY_PATH:-}"
wpk="$b/bin/wpk" tests="$b/bin/wpk_unit_tests"
# The tests look for the models and sources under /work/main, as the build here put them.
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
stage export
python3 scripts/export_models.py /work/main/build/models resnet50 mobilenet_v2 bert_base 2>&1 | grep exported
test_filter=${TESTS-[cuda],[placement],[cost],[tensor]}
if [ -n "$test_filter" ]; then
  stage tests
  timeout 200 "$tests" "$test_filter" 2>&1 | tail -12
fi
export WPK_CACHE_DIR="$b/cache"
for run in $runs; do
  m=${run%:*} n=${run#*:}
  stage "$m batch $n untuned"
  WPK_LOG_LEVEL=debug timeout 60 "$wpk" bench "build/models/$m.onnx" --device cuda --batch "$n" --iters 50 \
    > "$results/untuned_${m}_b$n.txt" 2>&1
  grep -E "median|steps, |rror" "$results/untuned_${m}_b$n.txt"
  echo "library variants that won: $(grep -c " runs$" "$results/untuned_${m}_b$n.txt"), kept: $(grep -c "; kept$" "$results/untuned_${m}_b$n.txt")"
  grep -m2 "no cuDNN engine\|graph API" "$results/untuned_${m}_b$n.txt"
done
for run in ${TUNE_RUNS-resnet50:1 mobilenet_v2:1 resnet50:8 bert_base:8}; do
  m=${run%:*} n=${run#*:}
  stage "$m batch $n tune"
  WPK_LOG_LEVEL=info timeout "${TUNE_SECONDS:-75}" "$wpk" tune "build/models/$m.onnx" --device cuda --batch "$n" \
    --budget-trials "${TRIALS:-24}" > "$results/tune_${m}_b$n.txt" 2>&1
  grep -E "end to end|rror" "$results/tune_${m}_b$n.txt" | tail -3
  stage "$m batch $n tuned"
  timeout 60 "$wpk" bench "build/models/$m.onnx" --device cuda --batch "$n" --iters 50 2>&1 | grep median
done
stage done

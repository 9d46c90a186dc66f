#!/usr/bin/env bash
# wpk vs ONNX Runtime, side by side, by the protocol of ../shared/BENCHMARKS.md. One command:
#   scripts/compare_ort.sh [--no-build] [--models LIST] [--iters K] [--rounds R] [--warmup W] [--threads N] [--quick] [--fix-dims]
#                          [--peer onnxruntime|openvino] [--precision fp32|bf16]
# Each step is skipped when already done:
#   1. scripts/setup.sh builds wpk (incremental; --no-build uses build/examples/wpk as it is);
#   2. a venv in .venv (ignored by git) with onnxruntime, onnx and numpy from PyPI;
#   3. scripts/compare_ort.py exports the models it needs into build/models (the int8 ones by
#      ONNX Runtime's quantization tool, scripts/quantize_ort.py) and measures.
# Default rows: ResNet-50, MobileNetV2, BERT-base (seq 128) at batch 1, ResNet-50 at batch 8
# (fp32), and ResNet-50 (QDQ) and BERT-base (dynamic) in int8 at batch 1; 2 threads; 5 rounds of wpk then ONNX Runtime, each 3 warm-up + 20 timed runs (more
# rounds: one slow spell on this shared machine moves the median of rounds less).
# stdout: JSON lines (wpk, onnxruntime, ratio wpk/onnxruntime per row); progress on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
openvino=0
args=()
prev=""
for a in "$@"; do
  [ "$prev" = "--peer" ] && [ "$a" = "openvino" ] && openvino=1
  prev="$a"
  case "$a" in
    --no-build) build=0 ;;
    -h|--help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) args+=("$a") ;;
  esac
done

if [ "$build" = 1 ]; then
  scripts/setup.sh >&2
elif [ ! -x build/examples/wpk ]; then
  echo "compare_ort: build/examples/wpk not found; run without --no-build" >&2
  exit 1
fi

python=$(scripts/peer_venv.sh $([ "$openvino" = 1 ] && echo --openvino))
exec "$python" scripts/compare_ort.py "${args[@]+"${args[@]}"}"

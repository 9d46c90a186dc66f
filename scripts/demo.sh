#!/usr/bin/env bash
# The main job: set up, build, export ResNet-18 (fixed random weights, no download), then load,
# optimize and run it, printing latency and the top-5 classes.
#   scripts/demo.sh [MODEL.onnx]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
model=${1:-}
if [ -z "$model" ]; then
  /usr/bin/python3 scripts/export_models.py build/models resnet18
  model=build/models/resnet18.onnx
fi
build/examples/wpk_classify "$model"
build/examples/wpk bench "$model" --iters 10

#!/usr/bin/env bash
# Builds wpk and runs the whole test suite: unit tests, the ONNX conformance suite and the
# whole-model tests against PyTorch (models exported on first use into build/models), then
# builds the fuzzers and runs each for 60 s (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
/usr/bin/python3 scripts/export_models.py build/models
(cd build && ctest -j2 --output-on-failure --timeout 1500)  # two tests at a time, as the build compiles two files
scripts/fuzz.sh 60

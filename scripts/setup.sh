#!/usr/bin/env bash
# One idempotent set-up step shared by the README's commands: installs the Debian packages the
# build and the test fixtures need (only those missing), then configures and builds wpk.
#   scripts/setup.sh [BUILD_DIR]     (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}

packages=(build-essential cmake ccache pkg-config
  libdnnl-dev ocl-icd-opencl-dev libeigen3-dev libspdlog-dev catch2 libprotobuf-dev protobuf-compiler
  libonnx-dev libonnx-testdata python3-torch python3-torchvision python3-onnx python3-numpy python3-venv
  libcpp-httplib-dev nlohmann-json3-dev curl)
scripts/install_packages.sh "${packages[@]}"

cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DWPK_WERROR=ON -DWPK_BUILD_SHARED=ON \
  -DWPK_TEST_MODELS_DIR="$PWD/$build_dir/models" > "$build_dir.cmake.log" 2>&1 || { cat "$build_dir.cmake.log"; exit 1; }
cmake --build "$build_dir" -j2

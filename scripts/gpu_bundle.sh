#!/bin/bash
# Packs the built CLI and unit tests with the non-system libraries they link into one archive, for
# a GPU machine that has a driver, the CUDA libraries and PyTorch but no toolchain to build wpk.
# Usage: scripts/gpu_bundle.sh [BUILD_DIR] [OUT.tar.xz]   (defaults: build, .dev/bundle.tar.xz)
# Then, on that machine, from a copy of this repository: scripts/gpu_check.sh OUT.tar.xz RESULTS_DIR
set -euo pipefail
build=${1:-build}
out=${2:-.dev/bundle.tar.xz}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/bin" "$dir/lib" "$(dirname "$out")"
strip -o "$dir/bin/wpk" "$build/examples/wpk"
strip -o "$dir/bin/wpk_unit_tests" "$build/tests/wpk_unit_tests"
# What the binaries link beyond the C/C++ runtime a machine with PyTorch has anyway.
for lib in libdnnl.so.2 libprotobuf.so.32 libonnx_proto.so.1 libspdlog.so.1.10 libfmt.so.9 libOpenCL.so.1 libgomp.so.1; do
  path=$(ldd "$build/examples/wpk" | awk -v l="$lib" '$1 == l {print $3}')
  [ -n "$path" ] && cp -L "$path" "$dir/lib/"
done
tar -C "$dir" -cJf "$out" .
echo "$out: $(du -h "$out" | cut -f1)"

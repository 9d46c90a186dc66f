#!/usr/bin/env bash
# The Python environment of the peer runtimes and of the newer ONNX release's test suite: .venv
# (ignored by git) with onnxruntime, numpy and onnx from PyPI, made on first use. onnx is pinned
# because its node tests are a conformance suite whose pass counts the tests hold to.
#   scripts/peer_venv.sh [--openvino]     prints the venv's python on stdout
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
onnx_version=1.23.2
if ! "$venv/bin/python" -c "import onnxruntime, numpy, onnx, sys; sys.exit(onnx.__version__ != '$onnx_version')" >/dev/null 2>&1; then
  echo "peer_venv: setting up $venv with onnxruntime, numpy and onnx $onnx_version" >&2
  # The first python3 on PATH, else Debian's (python3-venv, installed by scripts/setup.sh).
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv" 2>/dev/null || { rm -rf "$venv"; /usr/bin/python3 -m venv "$venv"; }
  "$venv/bin/python" -m pip install -q onnxruntime numpy "onnx==$onnx_version" >&2
fi
if [ "${1:-}" = "--openvino" ] && ! "$venv/bin/python" -c "import openvino" >/dev/null 2>&1; then
  echo "peer_venv: adding openvino to $venv" >&2
  "$venv/bin/python" -m pip install -q openvino >&2
fi
echo "$PWD/$venv/bin/python"

#!/usr/bin/env bash
# The node tests of a newer ONNX release than Debian's libonnx-testdata, for the opsets wpk
# carries beyond it (18-22), written once into OUT (default build/onnx-node-18-22) by
# scripts/onnx_node_tests.py from the pinned onnx of scripts/peer_venv.sh.
#   scripts/onnx_node_tests.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/onnx-node-18-22}
python=$(scripts/peer_venv.sh)
stamp="$out/.generated-by"
want="$("$python" -c 'import onnx; print("onnx", onnx.__version__)') opsets 18-22"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
"$python" scripts/onnx_node_tests.py "$out" --min-opset 18 --max-opset 22
echo "$want" > "$stamp"

#!/usr/bin/env bash
# wpk_server on loopback, with real clients:
#   tests/server/check_server.sh BUILD_DIR MODELS_DIR
# curl: health, model metadata, a JSON prediction, and each kind of bad request answered with
# its 4xx and one line of JSON; wpk_load_client: 1 and then 8 concurrent clients whose every
# answer must equal the serial one byte for byte (throughput and p99 printed); /metrics counts
# them; the server's memory stays bounded under oversized bodies; SIGTERM during a load lets the
# requests in flight finish and exits 0.
set -euo pipefail
build=$(cd "$1" && pwd)
models=$(cd "$2" && pwd)
work=$(mktemp -d)
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill -9 "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; echo "--- server log:" >&2; cat "$work/server.log" >&2 || true; exit 1; }

/usr/bin/python3 - "$work/tiny.onnx" <<'PY'
import sys
from onnx import helper, TensorProto, save
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
graph = helper.make_graph([helper.make_node("Add", ["x", "one"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
                          "tiny", [x], [y], [one])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
input=$models/resnet18/test_data_set_0/input_0.pb

start_server() {
  rm -f "$work/port"
  "$build/examples/wpk_server" --model tiny="$work/tiny.onnx" --model "$models/resnet18.onnx" --threads 2 \
    --port 0 --port-file "$work/port" > "$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 600); do [ -s "$work/port" ] && break; sleep 0.1; done
  [ -s "$work/port" ] || fail "the server did not start listening"
  url=http://127.0.0.1:$(cat "$work/port")
}
start_server

# expect STATUS PATTERN CURL_ARGS...: the answer's status is STATUS and its body one line
# matching PATTERN.
expect() {
  local status=$1 pattern=$2
  shift 2
  local got
  got=$(curl -s -o "$work/body" -w '%{http_code}' "$@") || fail "curl $*"
  [ "$got" = "$status" ] || fail "curl $*: status $got, expected $status: $(head -c 300 "$work/body")"
  [ "$(wc -l < "$work/body")" -le 1 ] || fail "curl $*: the answer is not one line"
  grep -qE "$pattern" "$work/body" || fail "curl $*: '$(head -c 300 "$work/body")' does not match '$pattern'"
}
predict() { echo "$url/v1/models/$1:predict"; }
json=(-H 'Content-Type: application/json')

echo "== curl"
expect 200 '"status":"ok"' "$url/healthz"
expect 200 '"name":"x".*"shape":\["N",4\]' "$url/v1/models/tiny"
expect 200 '"data":\[2\.0,0\.0,4\.0,0\.0,6\.0,0\.0,8\.0,0\.0\].*"shape":\[2,4\]' -X POST "${json[@]}" "$(predict tiny)" \
  -d '{"inputs":{"x":{"shape":[2,4],"data":[1,-2,3,-4,5,-6,7,-8.5]}}}'
curl -s -o "$work/out.pb" -w '%{http_code}' -X POST -H 'Content-Type: application/x-protobuf' --data-binary @"$input" \
  "$(predict resnet18)" | grep -q 200 || fail "a TensorProto prediction"
[ "$(stat -c %s "$work/out.pb")" -gt 4000 ] || fail "the TensorProto answer is too small"
error_json='^\{"code":"[A-Za-z]+","error":".+"\}$'
expect 404 "$error_json" -X POST "${json[@]}" "$(predict nope)" -d '{}'
expect 413 'send JSON as Content-Type: application/json' -X POST "$(predict tiny)" --data-binary @"$input"
expect 404 "$error_json" "$url/no/such/route"
expect 400 'has no input .z.' -X POST "${json[@]}" "$(predict tiny)" -d '{"inputs":{"z":{"shape":[1,4],"data":[1,2,3,4]}}}'
expect 400 'shape \[N, 4\], got \[2, 3\]' -X POST "${json[@]}" "$(predict tiny)" -d '{"inputs":{"x":{"shape":[2,3],"data":[1,2,3,4,5,6]}}}'
expect 400 'must be float32, got int64' -X POST "${json[@]}" "$(predict tiny)" -d '{"inputs":{"x":{"shape":[1,4],"dtype":"int64","data":[1,2,3,4]}}}'
expect 400 'holds 8 values, data has 3' -X POST "${json[@]}" "$(predict tiny)" -d '{"inputs":{"x":{"shape":[2,4],"data":[1,2,3]}}}'
expect 400 'malformed JSON' -X POST "${json[@]}" "$(predict tiny)" -d '{"inputs":{"x":{"shape":[2,4],"data":[1,2,'
expect 400 "$error_json" -X POST "${json[@]}" "$(predict tiny)" -d '{"inputs":{"x":{"shape":[-1,4],"data":[]}}}'
expect 400 'nests deeper' -X POST "${json[@]}" "$(predict tiny)" -d '{"inputs":{"x":{"shape":[1,4],"data":[[[[[[[1]]]]]]]}}}'
/usr/bin/python3 -c "print('{\"inputs\":{\"x\":{\"shape\":[1,4],\"data\":[' + ','.join(['0'] * 200000) + ']}}}')" > "$work/many.json"
expect 413 'more values than' -X POST "${json[@]}" --data-binary @"$work/many.json" "$(predict tiny)"
head -c 1000 "$input" > "$work/truncated.pb"
expect 400 'not a valid ONNX protobuf' -X POST -H 'Content-Type: application/x-protobuf' --data-binary @"$work/truncated.pb" "$(predict resnet18)"
head -c 2000000 /dev/zero > "$work/large"
expect 413 'larger than model .tiny. takes' -X POST "${json[@]}" --data-binary @"$work/large" "$(predict tiny)"
head -c 64000000 /dev/zero > "$work/huge"
for _ in 1 2 3 4 5 6 7 8; do expect 413 "$error_json" -X POST "${json[@]}" --data-binary @"$work/huge" "$(predict resnet18)"; done
rss_kb=$(awk '/VmRSS/ {print $2}' "/proc/$server_pid/status")
echo "server RSS after oversized bodies: $((rss_kb / 1024)) MiB"
[ "$rss_kb" -lt $((1024 * 1024)) ] || fail "the server holds $((rss_kb / 1024)) MiB after oversized bodies"

echo "== load: every answer equals the serial one"
client=("$build/examples/wpk_load_client" --port "$(cat "$work/port")" --model resnet18 --input "$input" --duration-s 120)
"${client[@]}" --clients 1 --requests 60 | tee "$work/load1" || fail "1 client: wrong or failed answers"
"${client[@]}" --clients 8 --requests 15 | tee "$work/load8" || fail "8 clients: wrong or failed answers"
curl -s "$url/metrics" > "$work/metrics"
ok=$(sed -n 's/^wpk_requests_total{model="resnet18",status="200"} //p' "$work/metrics")
[ "${ok:-0}" -ge 180 ] || fail "/metrics counts ${ok:-0} answered resnet18 requests, expected at least 180"
grep -q '^wpk_request_errors_total [1-9]' "$work/metrics" || fail "/metrics counts no errors"
grep -q '^wpk_request_seconds_bucket{model="resnet18",le="+Inf"}' "$work/metrics" || fail "/metrics has no latency histogram"

echo "== SIGTERM under load"
"${client[@]}" --clients 8 --requests 100000 --allow-refused > "$work/load_term" &
client_pid=$!
sleep 2
kill -TERM "$server_pid"
wait "$server_pid" || fail "the server exited $? after SIGTERM"
server_pid=""
wait "$client_pid" || fail "answers during shutdown were wrong: $(cat "$work/load_term")"
cat "$work/load_term"
grep -q 'requests in flight finish first' "$work/server.log" || fail "no shutdown line"
grep -q 'stopped; [0-9]* prediction requests answered' "$work/server.log" || fail "the server did not stop cleanly"
tail -2 "$work/server.log"
echo "server check passed"

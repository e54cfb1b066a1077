#!/usr/bin/env bash
# Records the real h2load output that tests/test_load.py reads (tests/data/h2load/).
#
# Run from the repository root:  bash tests/data/tools/record_h2load.sh [OUTDIR]
# (OUTDIR defaults to tests/data). Needs h2load (Debian's nghttp2-client) and the
# repository's .venv. Traffic goes to 127.0.0.1 only: the HTTP/2 server is
# `labkit echo serve` on loopback. h2load speaks h2c (HTTP/2 without TLS) to
# it, so a POST with gRPC framing and `content-type: application/grpc` is a
# real Echo call; other requests show how h2load reports failures.
set -euo pipefail
export LC_ALL=C

OUT=${1:-tests/data}/h2load
mkdir -p "$OUT"
PY=${PY:-.venv/bin/python}
TMP=$(mktemp -d)
SERVER=

cleanup() {
    [[ -n $SERVER ]] && kill "$SERVER" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

start_server() {
    "$PY" -m labkit echo serve --bind 127.0.0.1:0 > "$TMP/ready.json" &
    SERVER=$!
    for _ in $(seq 50); do [[ -s $TMP/ready.json ]] && break; sleep 0.1; done
    PORT=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$TMP/ready.json")
    SERVER_PID=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$TMP/ready.json")
}

# A gRPC-framed EchoRequest with 64 payload bytes (1 flag byte, 4 length bytes, message).
"$PY" - "$TMP/grpc64.bin" <<'EOF'
import sys
from labkit.proto import echo_pb2
message = echo_pb2.EchoRequest(payload=b"x" * 64).SerializeToString()
open(sys.argv[1], "wb").write(b"\0" + len(message).to_bytes(4, "big") + message)
EOF
head -c 64 /dev/zero > "$TMP/raw64.bin"
GRPC=(-d "$TMP/grpc64.bin" -H "content-type: application/grpc" -H "te: trailers")

start_server
URL=http://127.0.0.1:$PORT/echo.EchoService/Echo

# Timing-based with a warm-up, paced so the per-request log stays small.
h2load -c 2 -m 2 --rps 200 -D 2 --warm-up-time 1 --log-file="$OUT/timing_warmup.log.tsv" "${GRPC[@]}" "$URL" \
    > "$OUT/timing_warmup.txt" 2>&1
# Unpaced, 4 streams per connection: the shape labkit load runs (log not kept, it is large).
h2load -c 2 -m 4 -D 1 --warm-up-time 1 "${GRPC[@]}" "$URL" > "$OUT/timing_unpaced.txt" 2>&1
# Count-based; the server resets streams that are not gRPC: every request fails (status -1 in the log).
h2load -c 1 -n 5 -d "$TMP/raw64.bin" --log-file="$OUT/count_reset.log.tsv" "http://127.0.0.1:$PORT/echo" \
    > "$OUT/count_reset.txt" 2>&1

# The server is killed 1 s into the measured 2 s: h2load simply stops getting answers.
( sleep 2; kill -9 "$SERVER_PID" ) &
h2load -c 2 -m 2 --rps 100 -D 2 --warm-up-time 1 --log-file="$OUT/server_killed.log.tsv" "${GRPC[@]}" "$URL" \
    > "$OUT/server_killed.txt" 2>&1
wait
SERVER=

# Nothing listening (port 9 on loopback), timing-based and count-based.
h2load -c 2 -D 1 --warm-up-time 1 "${GRPC[@]}" "http://127.0.0.1:9/echo" > "$OUT/refused_timing.txt" 2>&1 || true
h2load -c 2 -n 10 "${GRPC[@]}" "http://127.0.0.1:9/echo" > "$OUT/refused_count.txt" 2>&1 || true

h2load --version > "$OUT/VERSION"

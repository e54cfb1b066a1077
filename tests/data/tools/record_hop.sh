#!/usr/bin/env bash
# Records the real wrk, vegeta and labkit-go load output that tests/test_hop.py reads (tests/data/wrk/,
# tests/data/vegeta/, tests/data/goload/).
#
# Run from the repository root:  bash tests/data/tools/record_hop.sh [OUTDIR]
# (OUTDIR defaults to tests/data; PARTS="goload" records that part only, leaving the others' files as they are). Needs wrk (Debian's wrk) and the repository's .venv
# (labkit-go, vegeta, nats-server). Traffic goes to 127.0.0.1 only: `labkit-go back` and
# `labkit-go front` on loopback, relaying through a nats-server on loopback.
set -euo pipefail
export LC_ALL=C

OUT=${1:-tests/data}
PARTS=" ${PARTS:-wrk vegeta goload} "
part() { [[ $PARTS == *" $1 "* ]]; }
BIN=.venv/bin
TMP=$(mktemp -d)
PIDS=()

cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT

field() { "$BIN/python" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())[sys.argv[2]])' "$1" "$2"; }

start() {  # start NAME ARGV...: run ARGV in the background, its stdout in $TMP/NAME, wait for its ready line
    local name=$1; shift
    "$@" > "$TMP/$name" 2> "$TMP/$name.err" &
    PIDS+=($!)
    eval "${name}_PID=$!"
    for _ in $(seq 50); do [[ -s $TMP/$name ]] && return; sleep 0.1; done
    echo "$name did not start: $(cat "$TMP/$name.err")" >&2; exit 1
}

"$BIN/nats-server" -a 127.0.0.1 -p 14299 > "$TMP/nats.log" 2>&1 &
NATS_PID=$!
PIDS+=($NATS_PID)
sleep 0.5
start back "$BIN/labkit-go" back --bind 127.0.0.1:0 --nats-url nats://127.0.0.1:14299
BACK_HTTP=$(field "$TMP/back" http_port)
BACK_GRPC=$(field "$TMP/back" grpc_port)
start front "$BIN/labkit-go" front --bind 127.0.0.1:0 --back-grpc "127.0.0.1:$BACK_GRPC" \
    --back-http2 "http://127.0.0.1:$BACK_HTTP" --nats-url nats://127.0.0.1:14299 --timeout 1s
FRONT=$(field "$TMP/front" http_port)
"$BIN/python" -c 'from labkit.parsers.wrk import WRK_SCRIPT; print(WRK_SCRIPT, end="")' > "$TMP/labkit.lua"

if part wrk; then
mkdir -p "$OUT/wrk"
# The published shape: wrk's own report only (2 threads, 10 connections), straight at the back.
wrk -t 2 -c 10 -d 2s --timeout 5s --latency "http://127.0.0.1:$BACK_HTTP/products" > "$OUT/wrk/direct_plain.txt"
# With labkit's script: the same report, then the labkit-wrk lines.
wrk -t 2 -c 10 -d 2s --timeout 5s --latency -s "$TMP/labkit.lua" "http://127.0.0.1:$FRONT/via/grpc" > "$OUT/wrk/front_grpc_script.txt"
# The NATS server killed 1 s into 3 s: the front answers 502 from then on (Non-2xx responses).
wrk -t 2 -c 10 -d 3s --timeout 5s --latency -s "$TMP/labkit.lua" "http://127.0.0.1:$FRONT/via/nats" > "$OUT/wrk/nats_killed.txt" &
WRK=$!
sleep 1
kill -9 "$NATS_PID"
wait "$WRK"
# Nothing listening: wrk gives up before it starts (stdout and stderr kept).
wrk -t 1 -c 2 -d 1s --timeout 5s --latency -s "$TMP/labkit.lua" "http://127.0.0.1:1/products" > "$OUT/wrk/refused.txt" 2>&1 || true
{
    echo "wrk: $(wrk -v 2>&1 | head -1 || true)"
    echo "vegeta: $("$BIN/vegeta" --version | head -1)"
    echo "nats-server: $("$BIN/nats-server" --version)"
    echo "back body sha256: $(field "$TMP/back" body_sha256)"
} > "$OUT/wrk/versions.txt"
fi

if part vegeta; then
mkdir -p "$OUT/vegeta"

# vegeta at 100 requests/s for 2 s through the front over HTTP/2, then the same at a closed port.
echo "GET http://127.0.0.1:$FRONT/via/http2" > "$TMP/targets.txt"
"$BIN/vegeta" attack -targets "$TMP/targets.txt" -rate 100/1s -duration 2s -timeout 5s -output "$TMP/ok.bin"
"$BIN/vegeta" encode --to csv --output "$OUT/vegeta/front_http2.csv" "$TMP/ok.bin"
# Through the front over NATS with the NATS server gone: every answer a 502.
kill -9 "$NATS_PID" 2>/dev/null || true
echo "GET http://127.0.0.1:$FRONT/via/nats" > "$TMP/targets.txt"
"$BIN/vegeta" attack -targets "$TMP/targets.txt" -rate 20/1s -duration 1s -timeout 5s -output "$TMP/nats.bin"
"$BIN/vegeta" encode --to csv --output "$OUT/vegeta/nats_gone.csv" "$TMP/nats.bin"
echo "GET http://127.0.0.1:1/products" > "$TMP/targets.txt"
"$BIN/vegeta" attack -targets "$TMP/targets.txt" -rate 10/1s -duration 1s -timeout 5s -output "$TMP/refused.bin"
"$BIN/vegeta" encode --to csv --output "$OUT/vegeta/refused.csv" "$TMP/refused.bin"
fi

if part goload; then
mkdir -p "$OUT/goload"
SHA=$(field "$TMP/back" body_sha256)
# labkit-go's closed loop: 2 connections for 0.2 s through the front over gRPC, every body checked.
"$BIN/labkit-go" load -url "http://127.0.0.1:$FRONT/via/grpc" -connections 2 -duration 200ms -timeout 5s \
    -body-sha256 "$SHA" -out "$OUT/goload/front_grpc.csv"
# Through the front over NATS with the NATS server gone: every answer a 502.
kill -9 "$NATS_PID" 2>/dev/null || true
"$BIN/labkit-go" load -url "http://127.0.0.1:$FRONT/via/nats" -connections 1 -duration 50ms -timeout 5s \
    -out "$OUT/goload/nats_gone.csv" || true
# Another body than the one asked for, and nothing listening.
"$BIN/labkit-go" load -url "http://127.0.0.1:$BACK_HTTP/products" -connections 1 -duration 20ms -timeout 5s \
    -body-sha256 "$(printf '0%.0s' $(seq 64))" -out "$OUT/goload/wrong_body.csv" || true
"$BIN/labkit-go" load -url "http://127.0.0.1:1/products" -connections 1 -duration 20ms -timeout 5s \
    -out "$OUT/goload/refused.csv" || true
echo "labkit-go: $("$BIN/labkit-go" --version); back body sha256: $SHA" > "$OUT/goload/versions.txt"
fi

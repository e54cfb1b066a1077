#!/usr/bin/env bash
# Records the packet captures tests/test_capture.py reads (issue 12): labkit's own tcpdump argv on host a of a
# testbed while labkit's echo clients call labkit's echo servers on host b, with the rows the clients printed, so
# that the parser and the attribution of packets to calls are tested on what really crossed the link.
#
# Run as root from the repository root:
#     bash tests/data/tools/record_pcaps.sh TESTBED [OUTDIR]
# TESTBED is the name of a testbed this script may bring up and take down (50 ms one way, CUBIC);
# OUTDIR defaults to tests/data/pcap. Traffic goes only between the testbed's namespaces (198.18.0.0/15).
set -euo pipefail
export LC_ALL=C

NAME=${1:?usage: record_pcaps.sh TESTBED [OUTDIR]}
OUT=${2:-tests/data/pcap}
LABKIT=${LABKIT:-.venv/bin/labkit}
PYTHON=${PYTHON:-.venv/bin/python}
mkdir -p "$OUT"
WORK=$(mktemp -d)
PIDS=()

cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    "$LABKIT" testbed down --name "$NAME" > /dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

"$LABKIT" testbed up --name "$NAME" --one-way-delay 50ms > /dev/null
read -r NS_A NS_B ADDR_B < <("$LABKIT" testbed status --name "$NAME" --json --no-ping | "$PYTHON" -c '
import json, sys
hosts = json.load(sys.stdin)["hosts"]
print(hosts["a"]["netns"], hosts["b"]["netns"], hosts["b"]["data_address"])')
for ns in "$NS_A" "$NS_B"; do ip netns exec "$ns" sysctl -qw net.ipv4.tcp_slow_start_after_idle=1; done
in_a() { ip netns exec "$NS_A" "$@"; }
in_b() { ip netns exec "$NS_B" "$@"; }

# A throwaway CA and server certificate for the TLS server, as labkit upload makes them.
"$PYTHON" -c "from labkit.pki import write_throwaway_pki; write_throwaway_pki('$WORK/pki', '$ADDR_B')"

# serve PORT ARGS...: an echo server on host b, waited for until it is ready.
serve() {
    local port=$1
    shift
    in_b "$LABKIT" echo serve --bind "$ADDR_B:$port" "$@" > "$WORK/serve-$port.txt" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do grep -q '"ready"' "$WORK/serve-$port.txt" && return; sleep 0.1; done
    echo "server on port $port did not start" >&2
    exit 1
}
serve 50051
serve 50052 --impl go
serve 50053 --tls-cert "$WORK/pki/server.pem" --tls-key "$WORK/pki/server.key"

# record NAME PORT CALL-ARGS...: labkit's capture argv on host a around one `labkit echo call`, then the pcap
# and the call's rows (JSON lines) into OUT/NAME.pcap and OUT/NAME.calls.jsonl.
record() {
    local name=$1 port=$2
    shift 2
    mapfile -t argv < <("$PYTHON" -c "
from labkit.parsers.pcap import tcpdump_argv
print('\n'.join(tcpdump_argv('tcpdump', '$WORK/$name.pcap', '$ADDR_B', [$port])))")
    in_a "${argv[@]}" 2> "$WORK/$name.tcpdump.txt" &
    local capture=$!
    sleep 1
    in_a "$LABKIT" echo call --target "$ADDR_B:$port" "$@" > "$OUT/$name.calls.jsonl"
    sleep 0.5
    kill -TERM "$capture"  # a background job of a script has SIGINT ignored, and tcpdump keeps it so
    wait "$capture" || true
    cp "$WORK/$name.pcap" "$OUT/$name.pcap"
}

# Warm calls after 1 s idle (the sysctl at 1): 1000 B in one round trip, 16000 and 32000 B in two.
record grpcio-idle 50051 --sizes 1000,16000,32000 --repeats 2 --gap 1s --warmup 1 --tcp-info --seed 3
# grpc-go's cold calls: TCP handshake, HTTP/2 preface and SETTINGS, then a 16000 B request after a fresh window.
record grpcgo-cold 50052 --impl go --sizes 16000 --repeats 2 --gap 0.5s --cold --seed 3
# A cold call over TLS 1.3: one more round trip for the handshake.
record grpcio-tls-cold 50053 --tls-ca "$WORK/pki/ca.pem" --tls-server-name "$ADDR_B" --sizes 1000 --repeats 1 --cold --seed 3
# A capture cut short, as a tcpdump killed mid-write leaves it: the first 3000 bytes of the idle capture.
head -c 3000 "$OUT/grpcio-idle.pcap" > "$OUT/truncated.pcap"

#!/usr/bin/env bash
# Records the real tool output that tests/test_parsers.py reads.
#
# Run as root from the repository root:  bash tests/data/tools/record.sh [OUTDIR]
# (OUTDIR defaults to tests/data). It needs iputils ping, iperf3, ss, ip, and
# ghz (go install github.com/bojand/ghz/cmd/ghz@latest) for the ghz files.
#
# Traffic goes only to loopback and to network namespaces this script makes
# itself (names p5-*, addresses in 198.18.200.0/24); it removes them on exit.
# LC_ALL=C everywhere: the locale changes ping's decimal separator.
set -euo pipefail
export LC_ALL=C

OUT=${1:-tests/data}
mkdir -p "$OUT/ping" "$OUT/iperf3" "$OUT/ghz" "$OUT/ss" "$OUT/idle_step"
GHZ=${GHZ:-$(command -v ghz || echo "$HOME/go/bin/ghz")}
PY=${PY:-.venv/bin/python}
PIDS=()

cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for ns in p5-parse p5-b p5-c; do ip netns del "$ns" 2>/dev/null || true; done
}
trap cleanup EXIT

# --- ping on loopback (no loss) -------------------------------------------------
ping -c 20 -i 0.2 127.0.0.1 > "$OUT/ping/linux_lo.txt"
ping -D -c 20 -i 0.2 127.0.0.1 > "$OUT/ping/linux_lo_D.txt"

# --- a small lab: p5-parse pings over a bridge to p5-b and p5-c ------------------
#   p5-parse: br0 198.18.200.1/24, with veths to
#   p5-b: eth0 198.18.200.2/24      p5-c: eth0 198.18.200.3/24
ip netns add p5-parse
ip netns add p5-b
ip netns add p5-c
ip -n p5-parse link set lo up
ip -n p5-parse link add br0 type bridge
ip -n p5-parse addr add 198.18.200.1/24 dev br0
ip -n p5-parse link set br0 up
for peer in b c; do
    ip -n p5-parse link add "v$peer" type veth peer name eth0 netns "p5-$peer"
    ip -n p5-parse link set "v$peer" master br0 up
    ip -n "p5-$peer" link set lo up
    ip -n "p5-$peer" link set eth0 up
    # Both peers answer broadcast echo requests, so each broadcast ping gets
    # two replies and iputils counts the second one as a duplicate.
    ip netns exec "p5-$peer" sysctl -qw net.ipv4.icmp_echo_ignore_broadcasts=0
done
ip -n p5-b addr add 198.18.200.2/24 dev eth0
ip -n p5-c addr add 198.18.200.3/24 dev eth0
ip netns exec p5-parse ping -c 2 -i 0.2 198.18.200.2 > /dev/null  # warm ARP

# Lost replies in the middle of a run: p5-b loses its address for ~1.2 s, so
# the requests sent meanwhile vanish (the neighbour entry is still valid).
drop_b_for_a_while() {
    sleep 1.3
    ip -n p5-b addr del 198.18.200.2/24 dev eth0
    sleep 1.2
    ip -n p5-b addr add 198.18.200.2/24 dev eth0
}
for variant in "O_D:-O -D" "plain:"; do
    name=${variant%%:*}
    flags=${variant#*:}
    drop_b_for_a_while &
    # shellcheck disable=SC2086  # flags is a list of options
    ip netns exec p5-parse ping $flags -c 25 -i 0.2 198.18.200.2 > "$OUT/ping/linux_loss_$name.txt" || true
    wait
done

# Nobody at this address: ARP fails and ping reports Destination Host Unreachable.
ip netns exec p5-parse ping -O -c 8 -i 0.3 198.18.200.99 > "$OUT/ping/linux_unreachable.txt" || true

# Broadcast: two answers per request, the second one a duplicate.
# iputils prints "(DUP!)" for broadcast replies only with -v; the plain run
# shows duplicates only as repeated icmp_seq and in the "+N duplicates" total.
ip netns exec p5-parse ping -D -b -c 10 -i 0.2 198.18.200.255 > "$OUT/ping/linux_broadcast_dup.txt" 2>&1 || true
ip netns exec p5-parse ping -v -b -c 10 -i 0.2 198.18.200.255 > "$OUT/ping/linux_broadcast_dup_v.txt" 2>&1 || true

cleanup
trap - EXIT
trap cleanup EXIT

# --- iperf3 -J on loopback ------------------------------------------------------
iperf3 -s -1 -B 127.0.0.1 -p 5301 > /dev/null 2>&1 &
PIDS+=($!)
sleep 0.5
iperf3 -c 127.0.0.1 -p 5301 -t 2 -J -b 100M > "$OUT/iperf3/client_100M.json"
wait "${PIDS[-1]}" || true
# Error case: nothing listens on 5309.
iperf3 -c 127.0.0.1 -p 5309 -t 1 -J > "$OUT/iperf3/client_refused.json" || true

# --- ss -tin of a busy loopback connection (the iperf3 sender) -------------------
iperf3 -s -1 -B 127.0.0.1 -p 5302 > /dev/null 2>&1 &
PIDS+=($!)
sleep 0.5
iperf3 -c 127.0.0.1 -p 5302 -t 3 -b 200M > /dev/null &
PIDS+=($!)
sleep 1.5
ss -tin '( dport = :5302 )' > "$OUT/ss/iperf3_sender.txt"
ss -tin '( sport = :5302 )' > "$OUT/ss/iperf3_receiver.txt"
ss -tinp '( dport = :5302 )' > "$OUT/ss/iperf3_sender_p.txt"  # with the owning process
wait "${PIDS[-1]}" || true

# --- ghz --format json against a throwaway echo server on loopback ---------------
if [ -x "$GHZ" ]; then
    for spec in "ok:0" "errors:10"; do
        name=${spec%%:*}
        every=${spec#*:}
        "$PY" tests/data/tools/echo_server_stub.py 5311 --fail-every "$every" > /tmp/p5-ghz-server.log &
        PIDS+=($!)
        for _ in $(seq 50); do grep -q ready /tmp/p5-ghz-server.log 2>/dev/null && break; sleep 0.1; done
        "$GHZ" --insecure --proto proto/echo.proto --call echo.EchoService/Echo \
            -d '{"payload":"aGVsbG8gbGFia2l0"}' -n 200 -c 4 \
            --format json 127.0.0.1:5311 > "$OUT/ghz/echo_$name.json" || true
        kill "${PIDS[-1]}"
        wait "${PIDS[-1]}" || true
    done
    # Nothing listening: every call fails to connect.
    "$GHZ" --insecure --proto proto/echo.proto --call echo.EchoService/Echo \
        -d '{"payload":""}' -n 20 -c 2 --connect-timeout 1s \
        --format json 127.0.0.1:5319 > "$OUT/ghz/echo_refused.json" || true
fi

# --- the idle-step client's output format, from a stand-in Go client -----------
# (tests/data/tools/idle_step_client: the reporter's own client is not public
# here). Against the same throwaway server on loopback.
"$PY" tests/data/tools/echo_server_stub.py 5312 > /tmp/p5-idle-server.log &
PIDS+=($!)
for _ in $(seq 50); do grep -q ready /tmp/p5-idle-server.log 2>/dev/null && break; sleep 0.1; done
(cd tests/data/tools/idle_step_client && go run . -addr 127.0.0.1:5312 -sizes 1000,14000,16000,100000 -n 3 -sleep 200ms) \
    > "$OUT/idle_step/standin_loopback.txt"
kill "${PIDS[-1]}"
wait "${PIDS[-1]}" || true

# --- Go's own duration text, for the Go-duration parser ---------------------------
mkdir -p "$OUT/go"
go run tests/data/tools/go_durations.go > "$OUT/go/durations.tsv"
echo "recorded into $OUT"

#!/usr/bin/env bash
# Records the ping and iperf3 output that tests/test_import.py and tests/test_parsers.py read
# for the importers (issue 14): ping from busybox, GNU inetutils and iputils (plain, -D, -O,
# -O -D, -s) with real losses, and iperf3 -J over TCP and UDP, forward and -R, on labkit's
# own testbed.
#
# Run as root from the repository root:
#     bash tests/data/tools/record_importers.sh TESTBED [OUTDIR]
# TESTBED is the name of a testbed this script may bring up and take down
# (`labkit testbed up --name TESTBED --one-way-delay 5ms`); OUTDIR defaults to tests/data.
# INETUTILS names the root of an unpacked inetutils-ping package (default /tmp/inetutils/root):
# it conflicts with iputils-ping, which labkit needs, so it is never installed:
#     apt-get download inetutils-ping && dpkg-deb -x inetutils-ping_*.deb /tmp/inetutils/root
# busybox comes from Debian's busybox package (it does not replace ping).
#
# Traffic goes only between the testbed's two namespaces (198.18.0.0/15).
# Losses are real: the receiving namespace's data device (lkdata) is set down for a
# while, so the delay line cannot deliver into it, then up again with the route the
# testbed had (setting a device down flushes its routes, and the testbed's route carries
# congctl). LC_ALL=C everywhere: the locale changes ping's decimal separator.
set -euo pipefail
export LC_ALL=C

NAME=${1:?usage: record_importers.sh TESTBED [OUTDIR]}
OUT=${2:-tests/data}
LABKIT=${LABKIT:-.venv/bin/labkit}
INETUTILS=${INETUTILS:-/tmp/inetutils/root}
mkdir -p "$OUT/ping" "$OUT/iperf3"
SERVER_PID=

cleanup() {
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
    "$LABKIT" testbed down --name "$NAME" > /dev/null
}
trap cleanup EXIT

"$LABKIT" testbed up --name "$NAME" --one-way-delay 5ms > /dev/null
read -r NS_A ADDR_A NS_B ADDR_B < <("$LABKIT" testbed status --name "$NAME" --json --no-ping | python3 -c '
import json, sys
hosts = json.load(sys.stdin)["hosts"]
print(hosts["a"]["netns"], hosts["a"]["data_address"], hosts["b"]["netns"], hosts["b"]["data_address"])')
ROUTE_A=$(ip -n "$NS_A" route show "$ADDR_B")
ROUTE_B=$(ip -n "$NS_B" route show "$ADDR_A")

# cut NS PEER ROUTE AFTER_S FOR_S: NS's data device goes down AFTER_S from now, for FOR_S.
cut() {
    local ns=$1 peer=$2 route=$3
    sleep "$4"
    ip -n "$ns" link set lkdata down
    sleep "$5"
    ip -n "$ns" link set lkdata up
    # shellcheck disable=SC2086  # route is the words `ip route show` printed
    ip -n "$ns" route replace $route
    [ "$(ip -n "$ns" route show "$peer")" = "$route" ] || { echo "route to $peer in $ns did not come back" >&2; exit 1; }
}
in_a() { ip netns exec "$NS_A" "$@"; }

# --- ping -----------------------------------------------------------------------------------------
# record_ping FILE DOWN_AT_S DOWN_FOR_S PING... : PING's stdout into ping/FILE while b's device is
# down from DOWN_AT_S for DOWN_FOR_S (ping exits 1 when replies are missing).
record_ping() {
    local file=$1
    cut "$NS_B" "$ADDR_A" "$ROUTE_B" "$2" "$3" &
    local cutter=$!
    shift 3
    in_a "$@" > "$OUT/ping/$file" || true
    wait "$cutter"
}
# 25 probes 0.2 s apart, b down from 1.1 s to 2.6 s: about seven probes lost in the middle.
record_middle() { local file=$1; shift; record_ping "$file" 1.1 1.5 "$@"; }
record_middle busybox_loss.txt busybox ping -c 25 -i 0.2 "$ADDR_B"
record_middle busybox_loss_s.txt busybox ping -s 1200 -c 25 -i 0.2 "$ADDR_B"
record_middle inetutils_loss.txt "$INETUTILS/bin/ping" -c 25 -i 0.2 "$ADDR_B"
record_middle inetutils_loss_s.txt "$INETUTILS/bin/ping" -s 1200 -c 25 -i 0.2 "$ADDR_B"
record_middle iputils_loss.txt ping -n -c 25 -i 0.2 "$ADDR_B"
record_middle iputils_loss_D.txt ping -n -D -c 25 -i 0.2 "$ADDR_B"
record_middle iputils_loss_O.txt ping -n -O -c 25 -i 0.2 "$ADDR_B"
record_middle iputils_loss_O_D.txt ping -n -O -D -c 25 -i 0.2 "$ADDR_B"
record_middle iputils_loss_s.txt ping -n -s 1200 -c 25 -i 0.2 "$ADDR_B"
# Output labkit must refuse rather than read as losses: -q prints no reply lines at all,
# and inetutils in a German locale writes times with a decimal comma (time=10,2 ms).
# The locale is built into a directory of its own (LOCPATH), leaving the system's alone.
record_middle busybox_loss_q.txt busybox ping -q -c 25 -i 0.2 "$ADDR_B"
record_middle iputils_loss_q.txt ping -n -q -c 25 -i 0.2 "$ADDR_B"
LOCDIR=$(mktemp -d)
localedef -i de_DE -f UTF-8 "$LOCDIR/de_DE.UTF-8"
record_middle inetutils_loss_de_DE.txt env LOCPATH="$LOCDIR" LC_ALL=de_DE.UTF-8 "$INETUTILS/bin/ping" -c 25 -i 0,2 "$ADDR_B"
rm -r "$LOCDIR"

# The last probes lost: 10 probes, b down from 1.3 s until after ping gave up waiting (-W 1),
# so only the closing count of transmitted probes tells that they were sent.
record_tail() { local file=$1; shift; record_ping "$file" 1.3 2.5 "$@"; }
record_tail busybox_tail_loss.txt busybox ping -c 10 -i 0.2 -W 1 "$ADDR_B"
record_tail inetutils_tail_loss.txt "$INETUTILS/bin/ping" -c 10 -i 0.2 -W 1 "$ADDR_B"

# --- iperf3 -J: server in b on its data address, client in a, always rate-limited ----------------
# record_iperf FILE CLIENT-OPTIONS... : one test against a fresh one-test server.
record_iperf() {
    local file=$1; shift
    ip netns exec "$NS_B" iperf3 -s -1 -B "$ADDR_B" -p 5301 > /dev/null 2>&1 &
    SERVER_PID=$!
    sleep 0.5
    in_a iperf3 -c "$ADDR_B" -p 5301 -J "$@" > "$OUT/iperf3/$file" || true
    wait "$SERVER_PID" || true
    SERVER_PID=
}
record_iperf tcp_50M.json -t 3 -b 50M
record_iperf tcp_50M_R.json -t 3 -b 50M -R
# UDP with losses: the receiver's device (b's forward, a's with -R) is down for 1 s.
cut "$NS_B" "$ADDR_A" "$ROUTE_B" 1.5 1 &
CUTTER=$!
record_iperf udp_10M_loss.json -u -b 10M -t 4
wait "$CUTTER"
cut "$NS_A" "$ADDR_B" "$ROUTE_A" 1.5 1 &
CUTTER=$!
record_iperf udp_10M_R_loss.json -u -b 10M -t 4 -R
wait "$CUTTER"
# Nothing listens on 5309: iperf3 writes a report whose `error` says so.
in_a iperf3 -c "$ADDR_B" -p 5309 -t 1 -J > "$OUT/iperf3/testbed_refused.json" || true

echo "recorded into $OUT with testbed $NAME"

#!/usr/bin/env bash
# Records the single-probe ping runs that `labkit series` makes (one `ping -D -n -c 1 -W N`
# per tick), for tests/test_series.py (tests/data/ping/series/; a directory of their own, since
# tests/test_parsers.py reads every ping/*.txt as a complete ping run and no_route.txt is empty).
#
# Run as root from the repository root:  bash tests/data/tools/record_series_ping.sh [OUTDIR]
# (OUTDIR defaults to tests/data). Traffic stays on loopback and inside a network
# namespace it makes itself (`s4-rec`: a veth pair, 198.18.201.1/24 on one end and a
# permanent neighbour entry for 198.18.201.2, so requests leave and nobody answers),
# removed on exit. For each run it keeps stdout (.txt),
# stderr (.stderr) and the exit status (.status).
set -euo pipefail
export LC_ALL=C

OUT=${1:-tests/data}/ping/series
mkdir -p "$OUT"
NS=s4-rec

cleanup() { ip netns del "$NS" 2>/dev/null || true; }
trap cleanup EXIT
cleanup
ip netns add "$NS"
ip -n "$NS" link add s4v0 type veth peer name s4v1
ip -n "$NS" addr add 198.18.201.1/24 dev s4v0
ip -n "$NS" link set s4v0 up
ip -n "$NS" link set s4v1 up
ip -n "$NS" neigh add 198.18.201.2 lladdr 02:00:00:00:00:02 dev s4v0 nud permanent

record() {  # record NAME COMMAND...
    local name=$1; shift
    set +e
    "$@" > "$OUT/$name.txt" 2> "$OUT/$name.stderr"
    echo $? > "$OUT/$name.status"
    set -e
}

# A reply on loopback.
record reply ping -D -n -c 1 -W 1 127.0.0.1
# No reply: the request goes out of s4v0 to a MAC address nobody has.
record lost ip netns exec "$NS" ping -D -n -c 1 -W 1 198.18.201.2
# No route at all (the namespace's loopback is down): ping prints only to stderr.
record no_route ip netns exec "$NS" ping -D -n -c 1 -W 1 10.255.255.1

# A reply over a 200 ms round trip (labkit's own testbed s4-slow, 100 ms each way, taken down on exit): above
# 100 ms the reply line's time= has whole milliseconds only, while the summary line keeps microseconds.
trap '.venv/bin/labkit testbed down --name s4-slow >/dev/null 2>&1 || true; cleanup' EXIT
.venv/bin/labkit testbed up --name s4-slow --one-way-delay 100ms >/dev/null
b=$(ip -n labkit-s4-slow-b -4 -o addr show | awk '$4 ~ /^198\.18\./ {sub(/\/.*/, "", $4); print $4}')
record reply_200ms ip netns exec labkit-s4-slow-a ping -D -n -c 1 -W 1 "$b"

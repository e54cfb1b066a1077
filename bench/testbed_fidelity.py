#!/usr/bin/env python
"""Testbed fidelity, measured in one run: does the emulated link behave as configured?

Brings up a testbed (default 100 ms one way, 100 Mbit/s, cubic) and prints:
- the configured RTT, and ping's median / p99 / mean RTT through the link;
- the delay line's lateness (how long after its due time a packet left) p50/p99,
  idle and under an iperf3 load;
- iperf3 throughput through the rate-limited link (from iperf3 -J);
- labkit's warm gRPC echo median RTT for 64 B divided by ping's RTT on the same
  link (target: within 1 % at 200 ms RTT).

Needs root. Usage: .venv/bin/python bench/testbed_fidelity.py [--one-way-delay 100ms]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from labkit.echo.remote import echo_exchange
from labkit.hosts import LocalHost
from labkit.parsers.iperf3 import parse_iperf3_json
from labkit.parsers.ping import parse_ping
from labkit.testbed.lab import LinkConfig, Testbed
from labkit.units import parse_duration, parse_rate


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def delay_line_stats(state) -> dict:
    return json.loads((state.dir / "delayline-stats.json").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one-way-delay", default="100ms")
    parser.add_argument("--rate", default="100mbit")
    parser.add_argument("--pings", type=int, default=50)
    parser.add_argument("--echo-calls", type=int, default=50)
    parser.add_argument("--iperf-seconds", type=int, default=10)
    parser.add_argument("--name", default="bench-fid")
    args = parser.parse_args()

    link = LinkConfig(one_way_delay_s=parse_duration(args.one_way_delay), rate_bps=parse_rate(args.rate), cc="cubic")
    lab = Testbed(args.name, log=lambda message: print(message, file=sys.stderr))
    state = lab.up(link)
    try:
        a, b = state.hosts["a"], state.hosts["b"]
        client, server = LocalHost("a", netns=a.netns), LocalHost("b", netns=b.netns)
        configured_rtt_ms = 2 * link.one_way_delay_s * 1e3

        ping_out = client.run(["ping", "-n", "-c", str(args.pings), "-i", "0.2", b.data_address], timeout=args.pings + 30)
        ping = parse_ping(ping_out.stdout)
        replies = ping.rows[ping.rows["ok"] & ~ping.rows["duplicate"]]["rtt_ms"].tolist()
        ping_mean = ping.summary["rtt_avg_ms"]

        echo = [row["rtt_ns"] / 1e6 for row in echo_exchange(client, server, b.data_address, sizes=[64],
                                                          repeats=args.echo_calls, gap_s=0.2, warmup=2)]
        idle_stats = delay_line_stats(state)

        with server.start(["iperf3", "-s", "-1", "--forceflush", "-B", b.data_address, "-p", "5201"]) as iperf_server:
            iperf_server.wait_for_line(lambda line: "listening" in line.lower(), timeout=10)
            iperf_out = client.run(["iperf3", "-c", b.data_address, "-p", "5201", "-t", str(args.iperf_seconds), "-J"],
                                   timeout=args.iperf_seconds + 30)
        iperf = parse_iperf3_json(iperf_out.stdout).summary
        load_stats = delay_line_stats(state)
    finally:
        lab.down(quiet=True)

    echo_median = statistics.median(echo)
    rows = [
        ("configured RTT", f"{configured_rtt_ms:.1f} ms"),
        ("ping median RTT (iputils prints whole ms at ≥100 ms)", f"{statistics.median(replies):.1f} ms"),
        ("ping p99 RTT", f"{percentile(replies, 0.99):.1f} ms"),
        ("ping mean RTT (µs resolution)", f"{ping_mean:.3f} ms  (mdev {ping.summary['rtt_mdev_ms']:.3f} ms)"),
        ("ping mean / configured RTT", f"{ping_mean / configured_rtt_ms:.4f}"),
        ("delay line lateness p50 / p99, idle", f"{idle_stats['lateness_us_p50']:.0f} / {idle_stats['lateness_us_p99']:.0f} µs"),
        ("delay line lateness p50 / p99, under iperf3", f"{load_stats['lateness_us_p50']:.0f} / {load_stats['lateness_us_p99']:.0f} µs"),
        (f"iperf3 throughput ({args.rate} link, {args.iperf_seconds} s, cubic)",
         f"{iperf['received_bps'] / 1e6:.1f} Mbit/s, {iperf['retransmits']} retransmits"),
        ("iperf3 received / configured rate", f"{iperf['received_bps'] / link.rate_bps:.3f}" if link.rate_bps else "n/a"),
        ("labkit gRPC echo 64 B median RTT", f"{echo_median:.3f} ms"),
        ("gRPC echo median / ping mean (target ≤ 1.01)", f"{echo_median / ping_mean:.4f}"),
    ]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

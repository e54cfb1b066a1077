#!/usr/bin/env python
"""The link emulator at data-centre rates, measured in one run: issue 27's targets as ratios.

One testbed (hosts a and b, cubic, 64 MiB TCP buffers inside its namespaces as in bench/testbed_fidelity.py) is
brought to each link in turn, live:

1. the kernel's own path: two namespaces joined by a veth pair, one iperf3 stream (the yardstick);
2. no rate, 1 ms one way: one stream, its rate / the veth's (target >= 0.7), with the cores the machine kept busy
   meanwhile (from /proc/stat) and the emulator's own share of them (from /proc/PID/stat), for both paths;
3. 10 ms one way, no rate, only ping crossing it: the emulator's lateness p99 (target <= 20 µs);
4. 1 Gbit/s x 10 ms one way, a BDP queue: one cubic stream, the emulator's lateness p99 under it (target <= 50 µs);
5. 10 Gbit/s x 10 ms one way, a BDP queue: one cubic stream, then four, each its received rate / the set rate
   after slow start (target >= 0.90 each), with the emulator's drops by cause and its lateness meanwhile.

Every figure is from this one run. Needs root. Usage:
    .venv/bin/python bench/datacentre_link.py [--name bench-dc] [--seconds 15]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from labkit.hosts import LocalHost
from labkit.parsers.iperf3 import parse_iperf3_json
from labkit.testbed.lab import LinkConfig, Testbed
from testbed_fidelity import _tune, lateness, ping_rtts, tuned_testbed, veth_path


def streams(client: LocalHost, server: LocalHost, address: str, seconds: int, omit: int, parallel: int) -> dict:
    """``parallel`` iperf3 streams from client to server, the -J summary over ``seconds`` after the first ``omit``."""
    with server.start(["iperf3", "-s", "-1", "--forceflush", "-B", address, "-p", "5201"]) as proc:
        proc.wait_for_line(lambda line: "listening" in line.lower(), timeout=10)
        out = client.run(["iperf3", "-c", address, "-p", "5201", "-t", str(seconds), "-O", str(omit),
                          "-P", str(parallel), "-J"], timeout=seconds + omit + 60)
    return parse_iperf3_json(out.stdout).summary


def _busy_ticks(pid: int | None = None) -> tuple[int, int]:
    """(ticks the machine's CPUs were busy, ticks of ``pid`` in user and system time) so far."""
    fields = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    busy = sum(fields) - fields[3] - fields[4]  # all but idle and iowait
    own = 0
    if pid is not None:
        stat = Path(f"/proc/{pid}/stat").read_text()
        own = sum(int(value) for value in stat[stat.rindex(")") + 2:].split()[11:13])  # utime, stime
    return busy, own


def with_cpu(run, pid: int | None = None) -> dict:
    """``run()``'s figures, with the cores the machine was busy on meanwhile and ``pid``'s share of them."""
    ticks = os.sysconf("SC_CLK_TCK")
    busy, own, started = *_busy_ticks(pid), time.monotonic()
    figures = run()
    busy_after, own_after = _busy_ticks(pid)
    seconds = time.monotonic() - started
    return {**figures, "busy_cores": (busy_after - busy) / ticks / seconds,
            "emulator_cores": (own_after - own) / ticks / seconds if pid is not None else None}


def measure(lab: Testbed, args) -> dict:
    figures = {}
    state, defaults, client, server = tuned_testbed(lab)
    a, b = state.hosts["a"], state.hosts["b"]
    try:
        figures["unlimited"] = with_cpu(lambda: streams(client, server, b.data_address, args.seconds, 1, 1),
                                        state.forwarder_pid)
        state = lab.up(LinkConfig(one_way_delay_s=0.010, rate_bps=None, cc="cubic"))
        start = time.time_ns()
        rtts = ping_rtts(client, b.data_address, args.pings)
        figures["idle"] = {**lateness(state, start, time.time_ns()), "pings": len(rtts)}
        for key, rate_bps, parallel in (("gbit", 1e9, 1), ("ten", 10e9, 1), ("ten4", 10e9, 4)):
            state = lab.up(LinkConfig(one_way_delay_s=0.010, rate_bps=rate_bps, queue="bdp", cc="cubic"))
            start = time.time_ns()
            figures[key] = streams(client, server, b.data_address, args.seconds, args.omit, parallel)
            figures[key].update(rate_bps=rate_bps, parallel=parallel, lateness=lateness(state, start, time.time_ns()))
    finally:
        for host in (a, b):
            _tune(host.netns, defaults[host.netns])
    return figures


def _drops(figure: dict) -> str:
    return ", ".join(f"{cause} {n}" for cause, n in figure["lateness"]["drops"].items() if n) or "none"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="bench-dc", help="testbed name (its namespaces are labkit-NAME-*)")
    parser.add_argument("--seconds", type=int, default=15, help="each rate test, after slow start")
    parser.add_argument("--omit", type=int, default=3, help="seconds of slow start left out of each rate test")
    parser.add_argument("--pings", type=int, default=500)
    args = parser.parse_args()
    lab = Testbed(args.name, log=lambda message: print(message, file=sys.stderr))
    try:
        figures = {"veth": with_cpu(lambda: veth_path(args.name, args.seconds))}
        figures.update(measure(lab, args))
    finally:
        lab.down(quiet=True)
    veth, unl, idle = figures["veth"]["received_bps"], figures["unlimited"]["received_bps"], figures["idle"]
    rows = [
        ("kernel veth path, one stream", f"{veth / 1e9:.2f} Gbit/s"),
        ("  cores busy meanwhile (of the machine's)",
         f"{figures['veth']['busy_cores']:.2f} of {os.cpu_count()}"),
        ("emulator, no rate, 1 ms one way, one stream", f"{unl / 1e9:.2f} Gbit/s"),
        ("  cores busy meanwhile, the emulator's share",
         f"{figures['unlimited']['busy_cores']:.2f} of {os.cpu_count()}, {figures['unlimited']['emulator_cores']:.2f}"),
        ("  emulator / veth (target >= 0.7)", f"{unl / veth:.2f}"),
        ("emulator lateness p99 / max, 10 ms one way, ping only (target <= 20 µs)",
         f"{idle['p99_us']:.0f} / {idle['max_us']:.0f} µs over {idle['packets']} packets"),
    ]
    for key, label in (("gbit", "1 Gbit/s x 10 ms one way, BDP queue, one cubic stream"),
                       ("ten", "10 Gbit/s x 10 ms one way, BDP queue, one cubic stream"),
                       ("ten4", "10 Gbit/s x 10 ms one way, BDP queue, four cubic streams")):
        figure = figures[key]
        rows += [
            (label, f"{figure['received_bps'] / 1e9:.3f} Gbit/s, {figure['retransmits']} retransmits"),
            ("  received / set rate" + (" (target >= 0.90)" if key != "gbit" else ""),
             f"{figure['received_bps'] / figure['rate_bps']:.3f}"),
            ("  emulator lateness p99 / max meanwhile" + (" (target <= 50 µs)" if key == "gbit" else ""),
             f"{figure['lateness']['p99_us']:.0f} / {figure['lateness']['max_us']:.0f} µs over "
             f"{figure['lateness']['packets']} packets"),
            ("  the emulator's drops by cause meanwhile", _drops(figure)),
        ]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""One-way delays per direction on an asymmetric testbed link, measured in one run (issue 25's first target).

The testbed's link is 30 ms a -> b and 70 ms b -> a (no rate limit). One `labkit series` per gRPC stack (Python,
Go), a probe every 100 ms for --duration, with every probe that has a server side; the testbed's hosts share one
clock, so each probe's split is exact. Prints, per stack and probe, the median way out and way back with their
block-bootstrap intervals, the difference, and each against the issue's targets:

- gRPC one-way delays within 1 ms of 30 and 70 ms at the median, the hosts' own stacks included;
- their difference within 0.3 ms of 40 ms;
- irtt (when the series has it as a probe) within 0.5 ms of labkit's own figures on the same link.

Needs root. Run it alone on the machine: the stacks' share of a one-way delay is CPU time, and another process
on the same two cores lengthens it. Usage: .venv/bin/python bench/one_way_delays.py [--duration 30s]
"""

from __future__ import annotations

import argparse
import sys
import tempfile

from labkit.analysis.oneway import clock_offset, one_way_summary, raw_one_way, share_a_clock
from labkit.deploy import deploy
from labkit.experiments import run_command
from labkit.experiments.series import SeriesConfig
from labkit.hosts.inventory import load_inventory
from labkit.testbed.lab import LinkConfig, Testbed
from labkit.testbed.topology import Topology
from labkit.units import parse_duration

OUT_MS, BACK_MS = 30.0, 70.0
#: The probes of the series that a server stamps, and irtt where labkit runs it as a series probe.
STAMPED = ["echo-warm", "tcp-echo"]


def measure(inventory: str, impl: str, duration_s: float, runs_dir: str, probes: list[str]):
    config = SeriesConfig(inventory=inventory, client="a", server="b", duration_s=duration_s, interval_s=0.1,
                          cell_s=duration_s, probes=probes, client_impl=[impl], server_impl=[impl],
                          name=f"oneway-{impl}")
    run = run_command("series", config=config, runs_dir=runs_dir, quiet=True)
    samples = run.samples()
    offset = clock_offset(raw_one_way(samples), share_a_clock(run.manifest, "a", "b"))
    return offset, one_way_summary(samples, offset).set_index("probe")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", default="30s")
    parser.add_argument("--name", default="bench-owd")
    parser.add_argument("--no-irtt", dest="irtt", action="store_false", help="leave irtt out (a host without it)")
    args = parser.parse_args()
    duration_s = parse_duration(args.duration)
    probes = [*STAMPED, *(["irtt"] if args.irtt else [])]

    topology = Topology(links={"a>b": {"one_way_delay_s": OUT_MS / 1e3}, "b>a": {"one_way_delay_s": BACK_MS / 1e3}})
    lab = Testbed(args.name, log=lambda message: print(message, file=sys.stderr))
    state = lab.up(LinkConfig(one_way_delay_s=OUT_MS / 1e3, rate_bps=None), topology=topology)
    tables = {}
    try:
        inventory = load_inventory(state.inventory)
        if any(result.status == "failed" for result in deploy(inventory, mode="offline")):
            raise SystemExit("deploy to the testbed failed")
        with tempfile.TemporaryDirectory() as runs_dir:
            for impl in ("python", "go"):
                tables[impl] = measure(str(state.inventory), impl, duration_s, runs_dir, probes)
    finally:
        lab.down(quiet=True)

    print(f"link: {OUT_MS:.0f} ms a -> b, {BACK_MS:.0f} ms b -> a; a probe every 100 ms for {args.duration}")
    header = f"{'stack':<7} {'probe':<10} {'n':>5}  {'a -> b (median [95 %])':>28}  {'b -> a':>28}  {'back - out':>10}"
    print(header)
    for impl, (offset, table) in tables.items():
        print(f"{impl}: {offset.describe()}")
        for probe, row in table.iterrows():
            ways = [f"{row[f'{w}_ms']:.3f} [{row[f'{w}_low_ms']:.3f}, {row[f'{w}_high_ms']:.3f}]" for w in ("out", "back")]
            print(f"{impl:<7} {probe:<10} {int(row['n']):>5}  {ways[0]:>28}  {ways[1]:>28}  {row['back_minus_out_ms']:>10.3f}")
    print()
    print("targets (the warm gRPC probe; each stack):")
    for impl, (_, table) in tables.items():
        row = table.loc["echo-warm"]
        out_err, back_err = row["out_ms"] - OUT_MS, row["back_ms"] - BACK_MS
        diff_err = row["back_minus_out_ms"] - (BACK_MS - OUT_MS)
        print(f"  {impl}: out {out_err:+.3f} ms, back {back_err:+.3f} ms (|·| ≤ 1: "
              f"{'met' if max(abs(out_err), abs(back_err)) <= 1 else 'not met'}); "
              f"difference {diff_err:+.3f} ms (|·| ≤ 0.3: {'met' if abs(diff_err) <= 0.3 else 'not met'})")
        if "irtt" in table.index:
            gaps = [table.loc["irtt", f"{w}_ms"] - row[f"{w}_ms"] for w in ("out", "back")]
            print(f"  {impl}: irtt − labkit's gRPC, out {gaps[0]:+.3f} ms, back {gaps[1]:+.3f} ms (|·| ≤ 0.5: "
                  f"{'met' if max(map(abs, gaps)) <= 0.5 else 'not met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

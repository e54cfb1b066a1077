#!/usr/bin/env python
"""Latency under load on the testbed, measured in one run: the rises a deep queue and CoDel give, against targets.

100 Mbit/s, 25 ms one way (a 50 ms RTT, a BDP of 625 kB), the hosts' TCP buffers at 64 MiB so that one cubic
flow is limited by the link and its queue, not by a window. One `labkit latency-under-load` run with two cells:
a droptail queue of 10 BDP (6.25 MB: 500 ms to drain at 100 Mbit/s) and CoDel (target 5 ms) over the same
buffer, each with one iperf3 upload from a to b. Prints, for the warm gRPC probe (and the others), what the load
added to its median round trip and to each direction, against the targets:

- droptail of 10 BDP: the warm gRPC probe's median under load rises by the queue's drain time, within 15 %;
- CoDel: by at most 15 ms (every probe);
- each probe's way out by no more than the queue's peak (+5 ms), with a Holm-adjusted p under 0.01, its way back
  by under 5 ms;
- explain: the remainder under 5 % of the call for at least 75 % of the warm probes during the load;

and what the emulator saw of the queue: its peak as time at the link's rate, its drops, and the wait it gave the
packets while the load ran (its record per millisecond of arrival), against which the probes' rise is read: a
probe that says what its queue held rises by the queue's own wait, whatever that is against its limit.

Needs root. Run it alone. Usage: .venv/bin/python bench/latency_under_load.py [--load-for 30s]
"""

from __future__ import annotations

import argparse
import sys
import tempfile

import pandas as pd

from labkit.analysis.under_load import queue_table
from labkit.deploy import deploy
from labkit.experiments import run_command
from labkit.experiments.latency_under_load import UnderLoadConfig
from labkit.explain import recorded_queue_waits
from labkit.hosts.inventory import load_inventory
from labkit.results import Run
from labkit.testbed.lab import LinkConfig, Testbed
from labkit.units import parse_duration

from testbed_fidelity import _buffers, _tune


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load-for", default="30s")
    parser.add_argument("--impl", default="go", choices=["go", "python"], help="the gRPC stack of the probes")
    parser.add_argument("--name", default="bench-ull")
    args = parser.parse_args()
    load_s = parse_duration(args.load_for)

    lab = Testbed(args.name, log=lambda message: print(message, file=sys.stderr))
    state = lab.up(LinkConfig(one_way_delay_s=0.025, rate_bps=100e6, queue="bdp", cc="cubic"))
    hosts = [host.netns for host in state.hosts.values()]
    defaults = {netns: _buffers(netns) for netns in hosts}
    try:
        for netns in hosts:
            _tune(netns)
        inventory = load_inventory(state.inventory)
        if any(result.status == "failed" for result in deploy(inventory, mode="offline")):
            raise SystemExit("deploy to the testbed failed")
        with tempfile.TemporaryDirectory() as runs_dir:
            config = UnderLoadConfig(inventory=str(state.inventory), client="a", server="b",
                                     duration_s=load_s + 15, load_start_s=5, load_s=load_s, ramp_s=5,
                                     probes=["ping", "echo-warm", "tcp-echo", "irtt"], queues=["10bdp", "codel:10bdp"],
                                     loads=["tcp-up"], cc=["cubic"], client_impl=[args.impl], server_impl=[args.impl])
            run = Run.of(run_command("latency-under-load", config=config, runs_dir=runs_dir, quiet=True))
            added = run.summary()
            queues = queue_table(run.cell_events())
            waits = deep_queue_waits(run)
            remainder = explained_remainder_share(run)
    finally:
        for netns in hosts:
            _tune(netns, defaults[netns])
        lab.down(quiet=True)

    print(f"100 Mbit/s, 25 ms one way, 64 MiB buffers; one cubic upload a -> b for {args.load_for}; probes every "
          f"100 ms ({args.impl} gRPC)")
    print(f"{'queue':<12} {'probe':<10} {'measure':<8} {'n before/during':>15} {'added (median) [95 %]':>30}")
    for _, row in added.iterrows():
        print(f"{row['queue']:<12} {row['probe']:<10} {row['measure']:<8} {row['n_before']:>7}/{row['n_during']:<7} "
              f"{row['added_ms']:>+12.2f} [{row['added_low_ms']:+.2f}, {row['added_high_ms']:+.2f}]")
    print()
    for _, row in queues.iterrows():
        print(f"queue {row['queue']:<12} {row['direction']}: drain time {row['drain_ms']:.0f} ms, peak {row['peak_ms']:.1f} ms, "
              f"drops {row['drops']}, load {row['load_sent_mbps']:.1f} Mbit/s")
    print()
    indexed = added.set_index(["queue", "probe", "measure"])
    drain = queues.set_index(["queue", "direction"]).loc[("10bdp", "a>b"), "drain_ms"]
    deep = indexed.loc[("10bdp", "echo-warm", "rtt"), "added_ms"]
    codel = indexed.loc[("codel:10bdp", "echo-warm", "rtt"), "added_ms"]
    print(f"the 10 BDP queue a -> b while the load ran ({len(waits)} ms of arrivals): packets waited {waits.median():.1f} ms "
          f"at the median (mean {waits.mean():.1f}, 5th-95th percentile {waits.quantile(0.05):.1f}-"
          f"{waits.quantile(0.95):.1f}) = {waits.median() / drain:.3f} of its drain time; the warm gRPC probe's rise "
          f"/ that median wait = {deep / waits.median():.3f}")
    print(f"targets (warm gRPC probe): droptail 10 BDP added {deep:.1f} ms / drain time {drain:.0f} ms = "
          f"{deep / drain:.3f} (0.85-1.15: {'met' if abs(deep / drain - 1) <= 0.15 else 'not met'}); "
          f"CoDel added {codel:.1f} ms (<= 15: {'met' if codel <= 15 else 'not met'})")
    peak = queues.set_index(["queue", "direction"]).loc[("10bdp", "a>b"), "peak_ms"]
    for probe in ("echo-warm", "tcp-echo", "irtt"):
        out = indexed.loc[("10bdp", probe, "out"), "added_ms"]
        back = indexed.loc[("10bdp", probe, "back"), "added_ms"]
        codel_rtt = indexed.loc[("codel:10bdp", probe, "rtt"), "added_ms"]
        p_out = indexed.loc[("10bdp", probe, "out"), "p_holm"]
        print(f"targets ({probe}): 10 BDP way out {out:+.1f} ms, Holm p {p_out:.2g} < 0.01 "
              f"({'met' if p_out < 0.01 else 'not met'}), <= queue peak {peak:.1f} + 5 "
              f"({'met' if out <= peak + 5 else 'not met'}); way back {back:+.2f} ms within ±5 "
              f"({'met' if abs(back) < 5 else 'not met'}); CoDel {codel_rtt:+.1f} ms <= 15 "
              f"({'met' if codel_rtt <= 15 else 'not met'})")
    print(f"explain, 10 BDP, warm probes during the load: the remainder under 5 % of the call for {remainder:.0%} of "
          f"them (target >= 75 %; 98 % alone on the machine)")
    return 0


def explained_remainder_share(run) -> float:
    """Of the warm gRPC and TCP probes sent during the 10 BDP cell's load, the share whose remainder (what explain's
    evidence cannot place: the hosts' stacks, the emulator's reading of a packet) is under 5 % of the call."""
    from labkit.explain import component_table, explain_run

    explained = component_table(explain_run(run))
    phase = run.samples().set_index(["cell_id", "probe", "seq"])["phase"]
    during = [phase.get((c, p, s)) == "during" for c, p, s in zip(explained["cell_id"], explained["probe"], explained["seq"])]
    deep = explained[explained["cell_id"].str.contains("queue=10bdp") & pd.Series(during, index=explained.index)]
    return float(((deep["remainder"].abs() / deep["rtt_ms"]) < 0.05).mean())


def deep_queue_waits(run) -> pd.Series:
    """The longest wait (ms) in the 10 BDP queue a -> b of each millisecond of arrivals during the load (its ramp
    left out), from the emulator's record the run kept; the 'during' window is that of the cell's probes."""
    samples = run.samples()
    during = samples[(samples["queue"] == "10bdp") & (samples["phase"] == "during")]["t_utc_ns"]
    waits = recorded_queue_waits(run, "10bdp")
    inside = (waits["direction"] == "a>b") & waits["t_ms"].between(during.min() // 1_000_000, during.max() // 1_000_000)
    return waits[inside]["wait_us"] / 1e3


if __name__ == "__main__":
    sys.exit(main())

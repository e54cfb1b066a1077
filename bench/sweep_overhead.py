#!/usr/bin/env python
"""Sweep overhead, measured in one run on the local testbed.

Prints:
- the sweep's wall time in its cells divided by what its plan takes: the idle gaps, the
  measured RTTs of its calls and the warm-up calls' own time as the client timed it, a new
  connection's handshake included (target ≤ 1.02, issue 27; before, the warm-up call's gap
  was counted but not its time, and that ratio is printed too);
- the whole sweep's wall time over the same plan, and each fixed cost of the run (host facts,
  ping and iperf3 baselines) as the run's manifest times it;
- SSH sessions opened per call (target 0) and per cell (a constant), from two
  sweeps that differ only in the number of calls per cell.

Needs root. Usage: .venv/bin/python bench/sweep_overhead.py [--one-way-delay 100ms]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import datetime

from labkit.deploy import deploy
from labkit.hosts.inventory import load_inventory
from labkit.experiments import run_command
from labkit.experiments.sweep import SweepConfig
from labkit.testbed.lab import LinkConfig, Testbed
from labkit.units import parse_duration


def _utc(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def cell_seconds(run) -> float:
    """Wall time spent inside cells, from the start/complete events of cells.jsonl."""
    starts, total = {}, 0.0
    for event in run.cell_events():
        key = (event["cell"], event["attempt"])
        if event["event"] == "start":
            starts[key] = _utc(event["t_utc"])
        elif event["event"] == "complete":
            total += _utc(event["t_utc"]) - starts[key]
    return total


def planned_seconds(run, config: SweepConfig, cells: int) -> float:
    """Idle gaps the client must wait (after the warm-up call too) plus the RTTs it measured."""
    samples = run.samples()
    calls_per_cell = len(config.sizes) * config.repeats + config.warmup
    gaps = cells * (calls_per_cell - 1) * config.gaps_s[0]
    return gaps + samples["rtt_ms"].sum() / 1e3


def warmup_seconds(run) -> float:
    """The warm-up calls' own time in every cell, as the client timed it (kept in the cells' complete events)."""
    return sum(event["warmup_s"] for event in run.cell_events() if event["event"] == "complete")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one-way-delay", default="100ms")
    parser.add_argument("--name", default="bench-swp")
    args = parser.parse_args()

    lab = Testbed(args.name, log=lambda message: print(message, file=sys.stderr))
    state = lab.up(LinkConfig(one_way_delay_s=parse_duration(args.one_way_delay), rate_bps=100e6, cc="cubic"))
    try:
        inventory = load_inventory(state.inventory)
        if any(result.status == "failed" for result in deploy(inventory, mode="offline")):
            raise SystemExit("deploy to the testbed failed")
        results = {}
        with tempfile.TemporaryDirectory() as runs_dir:
            for repeats in (2, 6):
                config = SweepConfig(
                    inventory=str(state.inventory), client="a", server="b", sizes=[1000, 16000, 32000],
                    gaps_s=[1.0], repeats=repeats, slow_start_after_idle=[1, 0], cc=["cubic"],
                    name=f"overhead-{repeats}", ping_count=10, iperf_seconds=3,
                )
                run = run_command("sweep", config=config, runs_dir=runs_dir, quiet=True)
                timing = next(iter(run.manifest["timing"].values()))
                cells = 2
                results[repeats] = {
                    "calls": len(run.samples()),
                    "cells": cells,
                    "cell_wall_s": cell_seconds(run),
                    "sweep_wall_s": timing["wall_s"],
                    "planned_s": planned_seconds(run, config, cells),
                    "warmup_s": warmup_seconds(run),
                    "fixed_s": timing["fixed_s"],
                    "ssh_sessions": timing["ssh_sessions_opened"],
                }
    finally:
        lab.down(quiet=True)

    small, large = results[2], results[6]
    per_call = (large["ssh_sessions"] - small["ssh_sessions"]) / (large["calls"] - small["calls"])
    planned = large["planned_s"] + large["warmup_s"]
    fixed = large["fixed_s"]
    rows = [
        ("calls (sweep with 2 / 6 repeats)", f"{small['calls']} / {large['calls']}"),
        ("planned gaps + measured RTTs (6 repeats)", f"{large['planned_s']:.2f} s"),
        ("+ the warm-up calls' own time", f"{large['warmup_s']:.2f} s"),
        ("wall time in cells (6 repeats)", f"{large['cell_wall_s']:.2f} s"),
        ("labkit's time per cell beyond its plan", f"{(large['cell_wall_s'] - planned) / large['cells']:.2f} s"),
        ("cell wall / planned (target ≤ 1.02)", f"{large['cell_wall_s'] / planned:.3f}"),
        ("cell wall / planned without the warm-up calls' time", f"{large['cell_wall_s'] / large['planned_s']:.3f}"),
        ("whole sweep wall / planned (facts, ping, iperf3 included)", f"{large['sweep_wall_s'] / planned:.3f}"),
        *((f"  fixed cost: {what}", f"{seconds:.2f} s") for what, seconds in fixed.items()),
        ("  the rest outside cells (deploy check, servers, settings)",
         f"{large['sweep_wall_s'] - large['cell_wall_s'] - sum(fixed.values()):.2f} s"),
        ("SSH sessions opened (2 / 6 repeats)", f"{small['ssh_sessions']} / {large['ssh_sessions']}"),
        ("SSH sessions per call (target 0)", f"{per_call:.3f}"),
        ("SSH sessions per cell, whole sweep (6 repeats)", f"{large['ssh_sessions'] / large['cells']:.1f}"),
    ]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    print(json.dumps({str(k): v for k, v in results.items()}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

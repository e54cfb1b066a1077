#!/usr/bin/env python
"""Capture overhead: what `--capture` changes in the calls it records, and how large a long capture grows.

On a testbed of its own (``--one-way-delay``, default 5 ms), in one run:

1. ``labkit series`` with warm gRPC echo and ping probes, alternately without
   and with ``--capture`` (``--pairs`` pairs of ``--seconds`` each, so that a
   drift of the machine does not fall on one side), and prints the median
   warm-call RTT of each side, the ratio with / without (target: within 1 %),
   and the ratio of the pooled medians;
2. one ``labkit series`` with every probe at 1 s for ``--series-minutes``
   (default 10) with ``--capture``, and prints the bytes of its captures
   (target: under 20 MB for 10 minutes), with the packets they hold.

Needs root (namespaces, tcpdump). Usage:
    .venv/bin/python bench/capture_overhead.py [--one-way-delay 5ms] [--pairs 3] [--seconds 30] [--series-minutes 10]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

LABKIT = str(Path(sys.executable).with_name("labkit"))
NAME = "bench-cap"


def labkit(*args: str, timeout: float = 3600) -> str:
    proc = subprocess.run([LABKIT, *args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        sys.exit(f"labkit {' '.join(args[:2])} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return proc.stdout


def series(inventory: str, runs: Path, name: str, seconds: float, interval: str, probes: str, capture: bool):
    from labkit.store import Run

    labkit("series", inventory, "--client", "a", "--server", "b", "--duration", f"{seconds:g}s", "--interval", interval,
           "--probes", probes, "--name", name, "--runs-dir", str(runs), "--quiet", *(["--capture"] if capture else []))
    return Run.open(next(runs.glob(f"*-{name}")))


def warm_rtts(run) -> list[float]:
    samples = run.samples()
    return samples[(samples["probe"] == "echo-warm") & samples["ok"]]["rtt_ms"].tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one-way-delay", default="5ms")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--series-minutes", type=float, default=10.0)
    options = parser.parse_args()

    labkit("testbed", "up", "--name", NAME, "--one-way-delay", options.one_way_delay)
    try:
        inventory = str(Path.home() / ".local/state/labkit/testbeds" / NAME / "inventory.toml")
        labkit("deploy", inventory, "--offline")
        with tempfile.TemporaryDirectory(prefix="labkit-bench-") as tmp:
            runs = Path(tmp)
            pooled = {False: [], True: []}
            print(f"warm gRPC echo, {options.pairs} pairs of {options.seconds:g} s series (0.1 s ticks), "
                  f"{options.one_way_delay} one way; medians in ms:")
            for index in range(options.pairs):
                for capture in (False, True):
                    run = series(inventory, runs, f"p{index}-{int(capture)}", options.seconds, "100ms",
                                 "ping,echo-warm", capture)
                    rtts = warm_rtts(run)
                    pooled[capture] += rtts
                    print(f"  pair {index} {'with' if capture else 'without'} capture: n={len(rtts)} "
                          f"median {statistics.median(rtts):.4f}")
            without, with_ = statistics.median(pooled[False]), statistics.median(pooled[True])
            print(f"pooled: without n={len(pooled[False])} median {without:.4f}, with n={len(pooled[True])} median "
                  f"{with_:.4f}: ratio with/without {with_ / without:.4f} (target within 1 %)")

            minutes = options.series_minutes
            run = series(inventory, runs, "long", minutes * 60, "1s", "ping,echo-warm,echo-cold,tcp-echo", True)
            sizes = {capture["host"]: capture["bytes"] for capture in run.manifest["captures"]}
            total = sum(sizes.values())
            print(f"{minutes:g}-minute series with --capture (every probe, 1 s ticks): captures "
                  + ", ".join(f"{host} {size / 1e6:.2f} MB" for host, size in sizes.items())
                  + f", total {total / 1e6:.2f} MB for {len(run.samples())} samples; per 10 minutes "
                  f"{total / 1e6 * 10 / minutes:.2f} MB (target < 20 MB)")
    finally:
        labkit("testbed", "down", "--name", NAME)


if __name__ == "__main__":
    main()

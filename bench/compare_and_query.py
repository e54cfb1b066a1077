#!/usr/bin/env python
"""`labkit runs query` and `labkit compare` over the shipped samples: how long the whole command takes.

Runs the real console script as a child process, ``--repeats`` times each (default 5), and prints the median wall
time (start-up, reading every manifest, DuckDB over every samples.parquet, printing) and its ratio to the target:

- ``labkit runs query`` over data/samples (59 runs, every sample row), a query that joins samples to runs and
  aggregates: target under 2 s (issue 26);
- ``labkit compare`` of two replicate groups (the two ten-run LAN tuning groups, runs as units) and of two single
  idle-step runs (calls as units, block bootstrap): no target; what a user waits.

Needs no root and no testbed. Usage:
    .venv/bin/python bench/compare_and_query.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "data" / "samples"
LABKIT = str(Path(sys.executable).with_name("labkit"))
QUERY_TARGET_S = 2.0

QUERY = ("select r.experiment, r.labkit_version, count(*) n, median(s.rtt_ms) p50 from samples s "
         "join runs r using (run_id) group by all order by 1")
COMMANDS = {
    "runs query (59 runs, join + aggregate)": ["runs", "query", "--runs-dir", str(SAMPLES), QUERY],
    "compare, two groups of 10 runs (load)": ["compare", str(SAMPLES / "tuning-ladder-lan"),
                                              str(SAMPLES / "tuning-messages-lan")],
    "compare, two single idle-step runs": ["compare", str(SAMPLES / "idle-step-cubic"),
                                           str(SAMPLES / "idle-step-cubic-2"), "--single"],
}


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([LABKIT, *argv], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for name, argv in COMMANDS.items():
        times = [timed(argv) for _ in range(args.repeats)]
        median = statistics.median(times)
        target = f"; target {QUERY_TARGET_S:g} s: {median / QUERY_TARGET_S:.2f} of it" if "query" in name else ""
        print(f"{name}: median {median:.2f} s over {args.repeats} (min {min(times):.2f}, max {max(times):.2f}){target}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Import throughput: how fast `labkit import` reads a large log, and how much memory it takes.

Generates, in a temporary directory, a ping log and a Go echo log of ``--mb`` MB each (default 200) from the
recorded 2016 logs in data/external/orca-2016/: their lines repeated, each with its own number (icmp_seq
wrapping at 65536 as ping's does; the echo log's order and seq counting up, one second apart). Then runs the
real console script, ``labkit import KIND FILE --out ...``, ``--times`` times per log (default 5) as a child
process and prints, for each log: MB/s (file size / wall time of the whole command, start-up included) at the
median import, with the slowest and fastest, and the child's largest peak resident memory (``ru_maxrss`` from
wait4). On a VM whose disk others share, one import varies by a third: the median says what labkit does. Targets (issue 27): at least 100 MB/s, at most 500 MB for any file size.
The generated logs are flushed to disk (sync) before the imports, and so is each import's run after it, so that
no writeback of an earlier write lands inside a timed import; the import's copy of the log into its run (raw/) is
timed, as it is part of the import.

Needs no root and no testbed. Usage:
    .venv/bin/python bench/import_throughput.py [--mb 200] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ORCA = REPO / "data" / "external" / "orca-2016"
LABKIT = str(Path(sys.executable).with_name("labkit"))


def recorded(name: str) -> list[str]:
    return gzip.decompress((ORCA / name).read_bytes()).decode().splitlines()


def write_ping_log(path: Path, size: int) -> int:
    """A ping log of about ``size`` bytes: the recorded header, replies and statistics; returns the probes."""
    lines = recorded("ping.txt.gz")
    replies = [re.sub(r"icmp_seq=\d+", "icmp_seq={}", line) for line in lines if " bytes from " in line]
    written, seq = 0, 0
    with open(path, "w") as out:
        out.write(lines[0] + "\n")
        while written < size:
            block = "".join(replies[(seq + i) % len(replies)].format((seq + i) % 65536) + "\n" for i in range(10000))
            out.write(block)
            written += len(block)
            seq += 10000
        out.write(f"\n--- 128.8.126.120 ping statistics ---\n{seq} packets transmitted, {seq} packets received, "
                  "0.0% packet loss\n")
    return seq


def write_echo_log(path: Path, size: int) -> int:
    """A Go echo log of about ``size`` bytes, from the recorded calls; returns the calls."""
    calls = [line.split(" received ", 1)[1] for line in recorded("echo.txt.gz") if " received " in line]
    calls = [re.sub(r"order=\d+ seq=\d+", "order={0} seq={0}", call) for call in calls]
    written, n, start = 0, 0, 1478089496
    with open(path, "w") as out:
        out.write("go run cmd/orca.go ping -n 3600 128.8.126.120:3265\n")
        while written < size:
            block = "".join(time.strftime("%Y/%m/%d %H:%M:%S ", time.gmtime(start + n + i)) + "received "
                            + calls[(n + i) % len(calls)].format(n + i + 1) + "\n" for i in range(10000))
            out.write(block)
            written += len(block)
            n += 10000
    return n


def timed_import(kind: str, path: Path, runs: Path) -> tuple[float, float, str]:
    """(seconds, peak RSS in MB, last stdout line) of `labkit import KIND PATH` run as a child."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen([LABKIT, "import", kind, str(path), "--out", f"bench-{kind}", "--runs-dir", str(runs)],
                                stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage: its peak memory
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        if proc.returncode != 0:
            sys.exit(f"labkit import {kind} failed: {err.read().strip()}")
        return seconds, usage.ru_maxrss / 1024, out.read().strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=200.0, help="size of each generated log, MB")
    parser.add_argument("--keep", type=Path, help="generate the logs here and keep them (default: a temporary dir)")
    parser.add_argument("--times", type=int, default=5, help="imports of each log (the median is printed)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="labkit-bench-import-") as tmp:
        where = options.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        size = int(options.mb * 1e6)
        logs = {"ping": (where / "ping.txt", write_ping_log), "go-echo": (where / "echo.txt", write_echo_log)}
        counts = {kind: write(path, size) for kind, (path, write) in logs.items()}
        os.sync()
        for kind, (path, _) in logs.items():
            count = counts[kind]
            megabytes = path.stat().st_size / 1e6
            imports = []
            for _ in range(options.times):
                imports.append(timed_import(kind, path, Path(tmp) / "runs"))
                os.sync()
            seconds = sorted(seconds for seconds, _, _ in imports)
            median, peak, last = statistics.median(seconds), max(peak for _, peak, _ in imports), imports[-1][2]
            print(f"{kind}: {megabytes:.0f} MB ({count} lines of data) imported in {median:.2f} s at the median of "
                  f"{len(seconds)} ({seconds[0]:.2f}-{seconds[-1]:.2f} s): {megabytes / median:.0f} MB/s "
                  f"({megabytes / median / 100:.2f} of the 100 MB/s target; {megabytes / seconds[-1]:.0f}-"
                  f"{megabytes / seconds[0]:.0f} MB/s), peak RSS {peak:.0f} MB (target <= 500 MB)")
            print(f"  {last}")


if __name__ == "__main__":
    main()

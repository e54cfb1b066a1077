#!/usr/bin/env python
"""Load tools: labkit-go load against wrk and vegeta, closed loops of the same connections on one server.

`labkit hop` measures the cost of a hop on `labkit-go load` (each request timed
and kept) and shows wrk's numbers as the published view. This prints, for each
tool run in turn for the same seconds against one `labkit-go back` on loopback
(GET /products, the 257-byte body): req/s, mean latency, its Little's-law
ratio (req/s × mean latency ÷ connections: 1 when the latencies are the
requests' own and every connection always has one in flight, above 1 for
latencies with synthetic samples, wrk's coordinated-omission correction, below
1 for a tool that leaves connections idle between requests), and the CPU
seconds the tool took per second of load. Then the ratios of labkit-go's req/s
and CPU to wrk's and vegeta's.

Needs wrk (Debian's) and the venv's labkit-go and vegeta (scripts/bootstrap.sh).
Traffic stays on 127.0.0.1. Usage:
    .venv/bin/python bench/load_tools.py [--seconds 5] [--connections 10]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = Path(sys.executable).parent


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str]) -> tuple[str, float]:
    """Run ``argv`` to its end; (its stdout, the CPU seconds it took)."""
    before = children_cpu_s()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"{Path(argv[0]).name} failed: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout, children_cpu_s() - before


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5, help="Load per tool. [default: 5]")
    parser.add_argument("--connections", type=int, default=10, help="Connections (requests in flight). [default: 10]")
    args = parser.parse_args()

    from labkit.experiments.hop import goload_cell_stats, vegeta_cell_stats, wrk_cell_stats
    from labkit.parsers.goload import goload_argv
    from labkit.parsers.vegeta import vegeta_attack_argv, vegeta_encode_argv
    from labkit.parsers.wrk import WRK_SCRIPT, wrk_argv

    wrk = shutil.which("wrk")
    if not wrk:
        raise SystemExit("wrk is not on PATH: apt-get install wrk")
    seconds, connections = args.seconds, args.connections
    back = subprocess.Popen([str(BIN / "labkit-go"), "back", "--bind", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
    results = {}
    try:
        ready = json.loads(back.stdout.readline())
        url = f"http://127.0.0.1:{ready['http_port']}/products"
        sha = ready["body_sha256"]
        with tempfile.TemporaryDirectory(prefix="labkit-bench-") as work:
            script = Path(work) / "labkit.lua"
            script.write_text(WRK_SCRIPT)
            text, cpu = timed(wrk_argv(wrk, url, threads=2, connections=connections, seconds=seconds, timeout_s=5,
                                       script=str(script)))
            results["wrk"] = (wrk_cell_stats(text, seconds), cpu)
            out = f"{work}/goload.csv"
            _, cpu = timed(goload_argv(str(BIN / "labkit-go"), url, connections=connections, seconds=seconds,
                                       timeout_s=5, body_sha256=sha, out=out))
            results["labkit-go"] = (goload_cell_stats(Path(out).read_text(), seconds), cpu)
            targets = Path(work) / "targets.txt"
            targets.write_text(f"GET {url}\n")
            _, cpu = timed(vegeta_attack_argv(str(BIN / "vegeta"), str(targets), rate=0, seconds=seconds, timeout_s=5,
                                              out=f"{work}/v.bin", workers=connections))
            timed(vegeta_encode_argv(str(BIN / "vegeta"), f"{work}/v.bin", f"{work}/v.csv"))
            results["vegeta"] = (vegeta_cell_stats(Path(f"{work}/v.csv").read_text(), seconds, sha), cpu)
    finally:
        back.terminate()
        back.wait(10)

    print(f"closed loops of {connections} connections, {seconds} s each, against labkit-go back on loopback "
          f"(machine: {os.cpu_count()} cores)")
    header = f"{'tool':<10} {'req/s':>9} {'mean ms':>8} {'Little':>7} {'CPU s/s':>8} {'errors':>7}"
    print(header)
    print("-" * len(header))
    little, rps, cpu_per_s = {}, {}, {}
    for tool, (stats, cpu) in results.items():
        rps[tool] = stats["rps"]
        little[tool] = stats["rps"] * stats["latency_mean_ms"] / 1e3 / connections
        cpu_per_s[tool] = cpu / seconds
        print(f"{tool:<10} {rps[tool]:>9.0f} {stats['latency_mean_ms']:>8.3f} {little[tool]:>7.3f} "
              f"{cpu_per_s[tool]:>8.2f} {stats['errors']:>7}")
    print(f"labkit-go / wrk: req/s {rps['labkit-go'] / rps['wrk']:.2f}×, CPU per second {cpu_per_s['labkit-go'] / cpu_per_s['wrk']:.2f}×")
    print(f"labkit-go / vegeta: req/s {rps['labkit-go'] / rps['vegeta']:.2f}×, CPU per second "
          f"{cpu_per_s['labkit-go'] / cpu_per_s['vegeta']:.2f}×; Little's law {little['labkit-go']:.3f} vs {little['vegeta']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

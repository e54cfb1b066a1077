#!/usr/bin/env python
"""gRPC load tools: labkit-go grpc-load against ghz, and vtprotobuf against grpc-go's codec, on one server.

`labkit load --grpc-tool labkit-go` times every message with labkit-go's own
load where the published experiments used ghz. This prints, for each run in
turn for the same seconds against one `labkit-go serve` on loopback (unary
Echo calls of 1 KiB, a closed loop of --concurrency calls): calls/s, the p50
and mean latency, the Little's-law ratio (calls/s × mean latency ÷
concurrency: 1 when every worker always has a call in flight and each latency
is the call's own), and the CPU seconds the load tool took per second. Then
labkit-go's calls/s and CPU against ghz's, and labkit-go with
`--grpc-option codec=vtproto` at both ends against grpc-go's own codec: the
server's CPU per call and the calls/s.

Needs the venv's ghz and labkit-go (scripts/bootstrap.sh). Traffic stays on
127.0.0.1. Usage:
    .venv/bin/python bench/grpc_load_tools.py [--seconds 5] [--concurrency 50] [--payload-bytes 1024]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cpu_s(pid: int) -> float:
    """A running process's CPU seconds (user + system) from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(argv: list[str]) -> float:
    """Run ``argv`` to its end; the CPU seconds it took."""
    before = children_cpu_s()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"{Path(argv[0]).name} failed: {proc.stderr.strip() or proc.returncode}")
    return children_cpu_s() - before


class Server:
    """`labkit-go serve` on loopback with the given --grpc-option values, its CPU read around each load."""

    def __init__(self, *options: str):
        argv = [str(BIN / "labkit-go"), "serve", "--bind", "127.0.0.1:0"]
        for option in options:
            argv += ["--grpc-option", option]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        ready = json.loads(self.proc.stdout.readline())
        self.target, self.pid = f"127.0.0.1:{ready['port']}", ready["pid"]

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5, help="Load per run. [default: 5]")
    parser.add_argument("--concurrency", type=int, default=50, help="Calls in flight. [default: 50]")
    parser.add_argument("--payload-bytes", type=int, default=1024, help="Request payload. [default: 1024]")
    args = parser.parse_args()

    from google.protobuf import descriptor_pb2

    from labkit.experiments.load import ECHO_CALL, ghz_cell_stats, grpcload_cell_stats
    from labkit.parsers.ghz import ghz_argv
    from labkit.parsers.grpcload import grpcload_argv
    from labkit.proto import echo_pb2

    seconds, concurrency = args.seconds, args.concurrency
    body = os.urandom(args.payload_bytes)
    results = {}
    with tempfile.TemporaryDirectory(prefix="labkit-bench-") as work:
        protoset, data, payload = Path(work) / "echo.protoset", Path(work) / "data.json", Path(work) / "body.bin"
        descriptors = descriptor_pb2.FileDescriptorSet()
        echo_pb2.DESCRIPTOR.CopyToProto(descriptors.file.add())
        protoset.write_bytes(descriptors.SerializeToString())
        data.write_text(json.dumps({"payload": base64.b64encode(body).decode()}))
        payload.write_bytes(body)
        for name, codec in (("ghz", "proto"), ("labkit-go", "proto"), ("labkit-go vtproto", "vtproto")):
            server = Server(f"codec={codec}")
            try:
                out = f"{work}/{name.replace(' ', '-')}.out"
                if name == "ghz":
                    argv = ghz_argv(str(BIN / "ghz"), server.target, call=ECHO_CALL, protoset=str(protoset),
                                    data_file=str(data), concurrency=concurrency, connections=1, seconds=seconds,
                                    call_timeout_s=20, out=out)
                else:
                    argv = grpcload_argv(str(BIN / "labkit-go"), server.target, rpc="unary", concurrency=concurrency,
                                         connections=1, stream_messages=1, payload_file=str(payload), seconds=seconds,
                                         timeout_s=20, out=out, grpc_options=(f"codec={codec}",))
                server_before, wall_before = process_cpu_s(server.pid), time.monotonic()
                cpu = timed(argv)
                server_cpu, wall = process_cpu_s(server.pid) - server_before, time.monotonic() - wall_before
                text = Path(out).read_text()
                stats = (ghz_cell_stats(text, 0, seconds) if name == "ghz" else grpcload_cell_stats(text, 0, seconds))
                results[name] = (stats, cpu / wall, server_cpu / max(stats["ok"], 1) * 1e6)
            finally:
                server.close()

    print(f"closed loops of {concurrency} unary Echo calls of {args.payload_bytes} B, {seconds:g} s each, against "
          f"labkit-go serve on loopback (machine: {os.cpu_count()} cores)")
    header = f"{'tool':<18} {'calls/s':>9} {'p50 ms':>7} {'mean ms':>8} {'Little':>7} {'tool CPU s/s':>12} {'server µs/call':>14}"
    print(header)
    print("-" * len(header))
    rps, cpu, server = {}, {}, {}
    for name, (stats, tool_cpu, server_us) in results.items():
        rps[name], cpu[name], server[name] = stats["rps"], tool_cpu, server_us
        little = stats["rps"] * stats["latency_mean_ms"] / 1e3 / concurrency
        print(f"{name:<18} {stats['rps']:>9.0f} {stats['latency_p50_ms']:>7.3f} {stats['latency_mean_ms']:>8.3f} "
              f"{little:>7.3f} {tool_cpu:>12.2f} {server_us:>14.1f}")
    print(f"labkit-go / ghz: calls/s {rps['labkit-go'] / rps['ghz']:.2f}×, tool CPU per second "
          f"{cpu['labkit-go'] / cpu['ghz']:.2f}×")
    print(f"vtproto / proto (labkit-go at both ends): calls/s {rps['labkit-go vtproto'] / rps['labkit-go']:.2f}×, "
          f"server CPU per call {server['labkit-go vtproto'] / server['labkit-go']:.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Echo overhead: what a labkit gRPC echo costs above ping and above a raw TCP echo, on one path.

Prints, for loopback and for a path across the local testbed (namespace a to
b's data address), the p50 of:

- ping (ICMP echo, iputils, ``LC_ALL=C``, parsed by labkit.parsers.ping);
- labkit's gRPC ``Echo`` with a 64-byte payload on a warm channel
  (labkit.echo.client.run_calls, back to back after a warm-up);
- the raw TCP echo of labkit.echo.tcp_echo, 64 bytes, on a warm connection;
- ghz's p50 for the same call (one connection, one worker, the first calls
  skipped), when ghz is installed;

and the ratios gRPC/ping, raw TCP/ping and ghz/ping, so that the client's own
overhead is visible: on loopback it dominates, across the testbed the link
does. Every client runs in a fresh process inside the client namespace, one
after the other (never concurrently), against one ``labkit echo serve
--tcp-echo-port 0`` in the server namespace.

Needs root (namespaces). Usage:
    .venv/bin/python bench/echo_overhead.py [--one-way-delay 10ms] [--calls 400]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

PAYLOAD_BYTES = 64
PROTO = Path(__file__).resolve().parent.parent / "proto" / "echo.proto"
GHZ_HINT = "go install github.com/bojand/ghz/cmd/ghz@latest  (or scripts/bootstrap.sh, which builds it into .venv/bin)"


def find_ghz() -> str | None:
    """ghz beside this Python (the venv), on PATH, or in ~/go/bin."""
    for candidate in (Path(sys.executable).with_name("ghz"), shutil.which("ghz"), Path.home() / "go" / "bin" / "ghz"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


# -- the client side: runs inside the client's namespace, prints one JSON object ---------------


def measure(address: str, grpc_port: int, tcp_port: int, calls: int, warmup: int, ping_count: int,
            ping_interval: str, ghz: str | None) -> dict:
    from labkit.echo.client import run_calls
    from labkit.echo.tcp_echo import TcpEchoClient
    from labkit.parsers.ghz import parse_ghz_json
    from labkit.parsers.ping import parse_ping

    result: dict = {}
    ping = subprocess.run(["ping", "-n", "-c", str(ping_count), "-i", ping_interval, address],
                          capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"}, timeout=600)
    rows = parse_ping(ping.stdout).rows
    ok = rows[rows["ok"]]["rtt_ms"]
    result["ping"] = {"p50_ms": float(ok.median()) if len(ok) else None, "n": int(len(ok)), "lost": int(len(rows) - len(ok))}

    grpc_ms = [row["rtt_ns"] / 1e6 for row in run_calls(f"{address}:{grpc_port}", [PAYLOAD_BYTES], calls, 0.0,
                                                        warmup=warmup, seed=1) if row["ok"]]
    result["grpc"] = {"p50_ms": statistics.median(grpc_ms), "n": len(grpc_ms)}

    payload = os.urandom(PAYLOAD_BYTES)
    with TcpEchoClient(address, tcp_port) as client:
        for _ in range(warmup):
            client.call(payload)
        tcp_ms = [client.call(payload) / 1e6 for _ in range(calls)]
    result["tcp"] = {"p50_ms": statistics.median(tcp_ms), "n": len(tcp_ms)}

    if ghz:
        data = json.dumps({"payload": base64.b64encode(payload).decode()})
        proc = subprocess.run(
            # --proto, not reflection: ghz asks reflection for the method's symbol
            # (echo.EchoService.Echo), which grpcio's reflection service does not resolve.
            [ghz, "--insecure", "--proto", str(PROTO), "--call", "echo.EchoService/Echo", "-d", data, "-n", str(calls + warmup), "-c", "1",
             "--connections", "1", "--skipFirst", str(warmup), "--format", "json", f"{address}:{grpc_port}"],
            capture_output=True, text=True, timeout=600,
        )
        if proc.returncode != 0 and not proc.stdout.strip():
            raise SystemExit(f"ghz failed: {proc.stderr.strip() or proc.returncode}")
        report = parse_ghz_json(proc.stdout)
        latencies = report.rows[report.rows["ok"]]["latency_ms"]
        result["ghz"] = {"p50_ms": float(latencies.median()) if len(latencies) else None, "n": int(len(latencies)),
                         "errors": int((~report.rows["ok"]).sum())}
    return result


# -- the controller ------------------------------------------------------------------------------


def run_path(label: str, client_netns: str | None, server_netns: str | None, address: str, args, ghz) -> dict:
    from labkit.echo.remote import wait_until_ready
    from labkit.hosts.local import LocalHost

    server_host = LocalHost("server", netns=server_netns)
    serve = [sys.executable, "-m", "labkit", "echo", "serve", "--bind", f"{address}:0", "--tcp-echo-port", "0"]
    with server_host.start(serve) as server:
        ready = wait_until_ready(server, timeout=30)
        argv = [sys.executable, __file__, "--measure", address, str(ready["port"]), str(ready["tcp_echo_port"]),
                "--calls", str(args.calls), "--warmup", str(args.warmup), "--ping-count", str(args.ping_count),
                "--ping-interval", args.ping_interval if client_netns else "0.01"]
        if ghz:
            argv += ["--ghz", ghz]
        client = LocalHost("client", netns=client_netns)
        done = client.run(argv, timeout=1200, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["label"] = label
    return result


def print_table(results: list[dict], ghz: str | None) -> None:
    def ms(value) -> str:
        return "—" if value is None else f"{value:.3f}"

    def ratio(part, whole) -> str:
        return "—" if part is None or not whole else f"{part / whole:.2f}×"

    header = f"{'path':<28} {'ping p50':>10} {'gRPC p50':>10} {'TCP p50':>10} {'ghz p50':>10}   {'gRPC/ping':>9} {'TCP/ping':>9} {'ghz/ping':>9}"
    print(f"p50 round trip in ms, {PAYLOAD_BYTES}-byte payload, warm connections")
    print(header)
    print("-" * len(header))
    for r in results:
        ping, grpc_ms, tcp, ghz_ms = r["ping"]["p50_ms"], r["grpc"]["p50_ms"], r["tcp"]["p50_ms"], r.get("ghz", {}).get("p50_ms")
        print(f"{r['label']:<28} {ms(ping):>10} {ms(grpc_ms):>10} {ms(tcp):>10} {ms(ghz_ms):>10}   "
              f"{ratio(grpc_ms, ping):>9} {ratio(tcp, ping):>9} {ratio(ghz_ms, ping):>9}")
    for r in results:
        extra = f", ghz {r['ghz']['n']} ({r['ghz']['errors']} errors)" if "ghz" in r else ""
        print(f"  {r['label']}: samples ping {r['ping']['n']} ({r['ping']['lost']} lost), gRPC {r['grpc']['n']}, "
              f"TCP {r['tcp']['n']}{extra}")
    if not ghz:
        print(f"ghz: skipped (not in {Path(sys.executable).parent}, on PATH or in ~/go/bin); get it with: {GHZ_HINT}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", nargs=3, metavar=("ADDRESS", "GRPC_PORT", "TCP_PORT"), help=argparse.SUPPRESS)
    parser.add_argument("--one-way-delay", default="10ms", help="Testbed one-way delay. [default: 10ms]")
    parser.add_argument("--calls", type=int, default=400, help="Timed calls per client. [default: 400]")
    parser.add_argument("--warmup", type=int, default=20, help="Untimed calls first. [default: 20]")
    parser.add_argument("--ping-count", type=int, default=100, help="Pings per path. [default: 100]")
    parser.add_argument("--ping-interval", default="0.05", help="Seconds between pings on the testbed. [default: 0.05]")
    parser.add_argument("--name", default="s4-bench", help="Testbed name. [default: s4-bench]")
    parser.add_argument("--ghz", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.measure:
        address, grpc_port, tcp_port = args.measure
        print(json.dumps(measure(address, int(grpc_port), int(tcp_port), args.calls, args.warmup, args.ping_count,
                                 args.ping_interval, args.ghz)))
        return 0

    from labkit.testbed.lab import LinkConfig, Testbed
    from labkit.units import parse_duration

    ghz = find_ghz()
    results = [run_path("loopback (127.0.0.1)", None, None, "127.0.0.1", args, ghz)]
    one_way = parse_duration(args.one_way_delay)
    lab = Testbed(args.name, log=lambda message: print(message, file=sys.stderr))
    state = lab.up(LinkConfig(one_way_delay_s=one_way, rate_bps=None, cc="cubic", emulator="tun"))
    try:
        label = f"testbed a→b (RTT {2 * one_way * 1e3:g} ms)"
        results.append(run_path(label, state.hosts["a"].netns, state.hosts["b"].netns, state.hosts["b"].data_address,
                                args, ghz))
    finally:
        lab.down(quiet=True)
    print_table(results, ghz)
    return 0


if __name__ == "__main__":
    sys.exit(main())

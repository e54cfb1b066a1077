#!/usr/bin/env python
"""Where a warm gRPC call's time goes inside each stack: the client's and the server's, per direction.

Issue 25's one-way target (30 and 70 ms within 1 ms at the median, "the hosts' own stacks included") is met by
grpc-go and missed by grpcio, whose way out was 1.08 ms over the link (bench/one_way_delays.py). This bench
splits that time on loopback, where the wire takes microseconds: one echo server and one client of a stack, warm
calls of 50 bytes, a packet capture (tcpdump, nanosecond stamps, parsed by labkit.parsers.pcap) beside the
client's own stamps and the server's (its ``labkit-server-recv-utc-ns`` and ``-send-utc-ns`` trailers, taken in
the handler). Per call, on one clock:

- client: its call begins -> the request's first packet (the client stack's way out);
- server: the request's last packet -> the handler's receive stamp (the server stack's way in);
- server: the handler's send stamp -> the reply's first packet;
- client: the reply's last packet -> its call returns;

and the medians for grpcio (``labkit echo serve`` / ``labkit echo call``) and grpc-go (``labkit-go serve`` /
``labkit-go call``), with the ratio of each. Needs tcpdump and root (capture). Run it alone on the machine.

Usage:
    .venv/bin/python bench/stack_time.py [--calls 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
PAYLOAD_BYTES = 50
STAGES = ("client call -> request on the wire", "request on the wire -> handler",
          "handler's reply -> reply on the wire", "reply on the wire -> client returns")


def _stacks() -> dict[str, tuple[list[str], list[str]]]:
    """Per stack: its server's argv (before the bind address) and its client's (before the target)."""
    labkit, go = str(VENV_BIN / "labkit"), str(VENV_BIN / "labkit-go")
    return {"grpcio": ([labkit, "echo", "serve", "--bind"], [labkit, "echo", "call", "--target"]),
            "grpc-go": ([go, "serve", "--bind"], [go, "call", "--target"])}


def measure(server_argv: list[str], client_argv: list[str], calls: int, workdir: Path) -> dict[str, float]:
    """The four stages' medians (µs) of ``calls`` warm calls through one server and one client on loopback."""
    from labkit.parsers.pcap import parse_pcap, tcpdump_argv

    server = subprocess.Popen([*server_argv, "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    capture = None
    try:
        port = json.loads(server.stdout.readline())["port"]
        pcap = workdir / f"{port}.pcap"
        capture = subprocess.Popen(tcpdump_argv("tcpdump", str(pcap), "127.0.0.1", [port]), stderr=subprocess.PIPE,
                                   text=True)
        for line in capture.stderr:  # tcpdump says when it listens: no packet before that is lost
            if "listening on" in line:
                break
        out = subprocess.run([*client_argv, f"127.0.0.1:{port}", "--sizes", str(PAYLOAD_BYTES), "--repeats",
                              str(calls), "--gap", "20ms", "--warmup", "10"], capture_output=True, text=True,
                             check=True, timeout=calls + 60).stdout
    finally:
        for proc in (capture, server):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
    packets = parse_pcap(pcap.read_bytes(), {port}).rows
    data = packets[packets["length"] > 0]
    requests, replies = data[data["direction"] == "c2s"], data[data["direction"] == "s2c"]
    stages: list[list[float]] = [[] for _ in STAGES]
    for line in out.splitlines():
        call = json.loads(line)
        start, end = call["t_start_utc_ns"], call["t_start_utc_ns"] + call["rtt_ns"]
        received, sent = call.get("server_recv_utc_ns"), call.get("server_send_utc_ns")
        if not received or not sent:
            continue
        # The request's packets are those before the handler had it, the reply's those after it answered: HTTP/2's
        # own frames (a BDP ping, its ack, a window update) also travel during a call, and are not the call's.
        request = requests[(requests["t_ns"] >= start) & (requests["t_ns"] <= received)]["t_ns"]
        reply = replies[(replies["t_ns"] >= sent) & (replies["t_ns"] <= end)]["t_ns"]
        if request.empty or reply.empty:
            continue
        for values, value in zip(stages, (request.min() - start, received - request.max(), reply.min() - sent,
                                          end - reply.max())):
            values.append(value / 1e3)
    if len(stages[0]) < calls * 0.9:
        raise SystemExit(f"only {len(stages[0])} of {calls} calls had their packets in the capture")
    return {stage: statistics.median(values) for stage, values in zip(STAGES, stages)} | {"n": len(stages[0])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = {name: measure(server, client, args.calls, Path(tmp)) for name, (server, client) in _stacks().items()}
    print(f"warm {PAYLOAD_BYTES} B calls on loopback, medians in µs (n = {results['grpcio']['n']} grpcio, "
          f"{results['grpc-go']['n']} grpc-go)")
    print(f"{'stage':40s} {'grpcio':>9s} {'grpc-go':>9s} {'ratio':>7s}")
    for stage in STAGES:
        py, go = results["grpcio"][stage], results["grpc-go"][stage]
        print(f"{stage:40s} {py:9.1f} {go:9.1f} {py / go:7.2f}")
    for name, first, second in (("way out (stacks)", 0, 1), ("way back (stacks)", 2, 3)):
        py = results["grpcio"][STAGES[first]] + results["grpcio"][STAGES[second]]
        go = results["grpc-go"][STAGES[first]] + results["grpc-go"][STAGES[second]]
        print(f"{name:40s} {py:9.1f} {go:9.1f} {py / go:7.2f}")


if __name__ == "__main__":
    main()

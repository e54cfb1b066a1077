#!/usr/bin/env python
"""grpc-go against grpcio: the same echo served and called by both implementations, in one run, on loopback.

Prints, for the Python server (``labkit echo serve``) and the Go server
(``labkit echo serve --impl go``, i.e. labkit-go), each started alone:

- ghz against it: req/s, p50 and p99 at ``-c 50 --connections 4``, 64 B
  payloads, for ``--seconds`` after a warm-up (the issue's load, where the
  Python server, not gRPC, was what got measured);
- uploads of one file (``--file-mib`` MiB of random bytes) over gRPC streaming
  at 1 KiB and 1 MiB chunks, Python client → Python server and Go client → Go
  server (``labkit echo upload-agent``): median MB/s of ``--uploads`` uploads;

then the ratios Go/Python. Targets (issue 9): ghz req/s Go/Python ≥ 4, upload
MB/s at 1 KiB Go/Python ≥ 5. Servers and clients run one at a time (never two
measurements at once): the machine has two cores.

Usage:
    .venv/bin/python bench/implementations.py [--seconds 5] [--uploads 5] [--file-mib 16]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

LABKIT = str(Path(sys.executable).with_name("labkit"))


@contextmanager
def echo_server(impl: str):
    """``labkit echo serve --impl IMPL`` on loopback; yields its ready line; always stopped."""
    proc = subprocess.Popen([LABKIT, "echo", "serve", "--impl", impl, "--bind", "127.0.0.1:0", "--max-message-bytes",
                             str(4 << 20)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield json.loads(proc.stdout.readline())
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        proc.stdout.close()
        proc.stderr.close()


def ghz_load(target: str, seconds: float) -> dict:
    from labkit.hosts.layout import local_tool
    from labkit.parsers.ghz import ghz_argv, parse_ghz_json

    ghz = local_tool("ghz")
    if ghz is None:
        sys.exit("ghz is not built: run scripts/bootstrap.sh")
    from google.protobuf import descriptor_pb2

    from labkit.proto import echo_pb2

    with tempfile.TemporaryDirectory() as work:
        data, protoset = Path(work) / "data.json", Path(work) / "echo.protoset"
        data.write_text(json.dumps({"payload": base64.b64encode(os.urandom(64)).decode()}))
        descriptors = descriptor_pb2.FileDescriptorSet()
        echo_pb2.DESCRIPTOR.CopyToProto(descriptors.file.add())
        protoset.write_bytes(descriptors.SerializeToString())  # as labkit load gives ghz the service
        argv = ghz_argv(str(ghz), target, call="echo.EchoService.Echo", protoset=str(protoset), data_file=str(data),
                        concurrency=50, connections=4, seconds=1 + seconds, call_timeout_s=10,
                        out=str(Path(work) / "out.json"))
        subprocess.run(argv, check=True, capture_output=True, timeout=seconds + 60)
        report = parse_ghz_json((Path(work) / "out.json").read_text())
    from labkit.analysis import measured_window, window_stats

    rows = measured_window(report.rows, 1.0, seconds)
    return window_stats(rows["latency_ms"], rows["ok"], seconds)


def upload_mb_per_s(impl: str, port: int, path: Path, sha256: str, chunk: int, uploads: int) -> float:
    result = subprocess.run([LABKIT, "echo", "upload-agent", "--impl", impl, "--transport", "grpc", "--target",
                             f"127.0.0.1:{port}", "--file", str(path), "--sha256", sha256, "--chunk-size", str(chunk),
                             "--repeats", str(uploads)], capture_output=True, text=True, timeout=600, check=True)
    rows = [json.loads(line) for line in result.stdout.splitlines()][1:]
    bad = [row["error"] for row in rows if not row["ok"]]
    if bad:
        sys.exit(f"{impl} upload failed: {bad[0]}")
    return statistics.median(row["mb_per_s"] for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="ghz's measured window per server")
    parser.add_argument("--uploads", type=int, default=5, help="uploads per implementation and chunk size")
    parser.add_argument("--file-mib", type=int, default=16, help="size of the uploaded file")
    args = parser.parse_args()
    import hashlib

    data = os.urandom(args.file_mib << 20)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "file.bin"
        path.write_bytes(data)
        sha256 = hashlib.sha256(data).hexdigest()
        for impl in ("python", "go"):
            with echo_server(impl) as ready:
                stats = ghz_load(f"127.0.0.1:{ready['port']}", args.seconds)
                results[impl] = {"rps": stats["rps"], "p50_ms": stats["latency_p50_ms"], "p99_ms": stats["latency_p99_ms"],
                                 "errors": stats["errors"], "requests": stats["requests"]}
                for chunk in (1024, 1 << 20):
                    results[impl][f"upload_{chunk}"] = upload_mb_per_s(impl, ready["port"], path, sha256, chunk, args.uploads)
    print(f"ghz -c 50 --connections 4, 64 B, {args.seconds:g} s after 1 s warm-up; uploads of {args.file_mib} MiB "
          f"over gRPC streaming, median of {args.uploads} (client and server of the same implementation), loopback:")
    print(f"{'':>8} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'MB/s 1KiB':>10} {'MB/s 1MiB':>10}")
    for impl, r in results.items():
        print(f"{impl:>8} {r['rps']:>10.0f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {r['errors']:>7} "
              f"{r['upload_1024']:>10.1f} {r['upload_1048576']:>10.1f}")
    go, py = results["go"], results["python"]
    print(f"ratios Go/Python: ghz req/s {go['rps'] / py['rps']:.2f} (target >= 4); "
          f"upload 1 KiB {go['upload_1024'] / py['upload_1024']:.2f} (target >= 5); "
          f"upload 1 MiB {go['upload_1048576'] / py['upload_1048576']:.2f}")
    print(json.dumps({"results": results}, default=float))


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""gupload against labkit-go: MB/s of the same file uploaded over gRPC client streaming, at the same chunk sizes.

gupload (github.com/cirocosta/gupload) is the tool of the published chunked-upload
experiment (research brief §3). This builds it from its source, then uploads one
file (``--file-mib`` MiB of seeded random bytes) on 127.0.0.1, TLS off, at each
``--chunks`` size: gupload client → gupload server, then ``labkit-go upload-agent``
→ ``labkit-go serve``, one tool at a time (the machine has two cores). It prints,
per chunk size, the median MB/s (10^6 B/s) of ``--uploads`` uploads of each tool,
the ratio labkit-go/gupload and whether it is within 10 %. labkit-go is timed two
ways: *cold*, one upload per new process and connection without warm-up, as gupload
makes every upload (the ratio checked against 10 % is this one: the same pattern of
connections), and *warm*, uploads one after another on one connection after a 1-byte
warm-up, as ``labkit upload`` runs them.

The two tools stop their clocks at different points, and both of gupload's are shown:

- gupload's own figure (the one it prints, in ns, one upload per process): its timer
  starts once the stream is open (connection set up) and stops after the last
  ``Send`` returns, *before* ``CloseAndRecv``: it leaves out the server's
  acknowledgement and whatever still sits in the flow-control window. This is the
  figure the ratio and the 10 % check use, since it is how gupload reports.
- the gupload client's process wall time: start-up, dial, handshake and the
  acknowledgement included, so a lower bound on its MB/s; shown as a second ratio.
- labkit-go times from the first byte handed to gRPC to the server's UploadStatus
  (the acknowledgement included), and its server hashes what it gets (gupload's
  server discards it). gupload dials anew for every upload; one untimed gupload
  upload per chunk size warms its server and the page cache.

Then each client against each server: gupload is built a second time with its generated stubs naming
labkit's service (``echo.EchoService``, the only change; the messages are the same on the wire), so that its
client uploads to ``labkit-go serve`` and labkit-go's client to its server (whose acknowledgement carries no
byte count, which the agent's check expects). On one server the two clients' ratio is the client's share of
the gap; one client on the two servers, the server's (labkit-go's hashes what it receives; gupload's discards).

The source is ``--gupload-src DIR`` (default: env GUPLOAD_SRC), a checkout or a bare
git directory. It predates Go modules (no go.mod, no lock), so it is copied into a
temporary directory with a generated go.mod and built there (GOFLAGS=-mod=mod,
GOTOOLCHAIN=local, the module proxy); the source is never changed. Without a source
this prints one line saying how to get one and exits 0; a failed build exits 1.
gupload's server listens on every interface (``:PORT``, no flag to change it); all
traffic goes to 127.0.0.1. Usage:
    .venv/bin/python bench/gupload_crosscheck.py --gupload-src DIR [--uploads 5] [--file-mib 64]
        [--chunks 1KiB,32KiB,1MiB] [--grpc-version v1.9.0]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

LABKIT_GO = Path(sys.executable).parent / "labkit-go"
# grpc-go 1.9.0 was released on 2018-01-02, the day before gupload's last commit: the
# release its author could have used. The other pins are today's, as in labkit's go.mod.
GO_MOD = """module github.com/cirocosta/gupload

go 1.21

require (
\tgithub.com/gogo/protobuf v1.3.2
\tgithub.com/pkg/errors v0.9.1
\tgithub.com/rs/zerolog v1.35.1
\tgolang.org/x/net v0.62.0
\tgoogle.golang.org/grpc {grpc}
)

// The module proxy refuses gopkg.in/urfave/cli.v2 (the v2 branch that gupload imports);
// the same API is published as github.com/urfave/cli/v2.
replace gopkg.in/urfave/cli.v2 => github.com/urfave/cli/v2 v2.2.0
"""
# gupload refuses chunks over 4 MiB, and its server gRPC's 4 MiB messages: a chunk plus its 5-byte framing.
MAX_CHUNK = (4 << 20) - 16


def parse_size(text: str) -> int:
    units = {"kib": 1 << 10, "k": 1 << 10, "mib": 1 << 20, "m": 1 << 20, "b": 1, "": 1}
    number = text.strip().rstrip("BbIiKkMm")
    return int(number) * units[text.strip()[len(number):].lower()]


def label(size: int) -> str:
    return f"{size >> 20} MiB" if size % (1 << 20) == 0 else f"{size >> 10} KiB" if size % 1024 == 0 else f"{size} B"


#: gupload's gRPC service, and labkit's: the same Upload method with the same messages on the wire (labkit's
#: echo.proto follows gupload's field numbers), under another name.
GUPLOAD_SERVICE, LABKIT_SERVICE = "messaging.GuploadService", "echo.EchoService"


def build_gupload(src: Path, work: Path, grpc: str, service: str = GUPLOAD_SERVICE) -> tuple[Path, str]:
    """Copy (or export) the source to ``work``, build it; (the binary, the source's commit or '?').

    With ``service`` labkit's, the copy's generated stubs name labkit's service instead of gupload's (the only
    change: the method path gRPC sends, ``/echo.EchoService/Upload``), so that gupload's client uploads to
    ``labkit-go serve`` and labkit-go's client to gupload's server: each client against each server."""
    tree = work / f"gupload-src-{service}"
    is_bare = (src / "HEAD").is_file() and (src / "objects").is_dir()
    git = ["git", f"--git-dir={src}"] if is_bare else ["git", "-C", str(src)]
    head = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    commit = head.stdout.strip() if head.returncode == 0 else "?"
    if is_bare:
        tree.mkdir()
        archive = subprocess.run([*git, "archive", "HEAD"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    else:
        shutil.copytree(src, tree, ignore=shutil.ignore_patterns(".git"))
    (tree / "go.mod").write_text(GO_MOD.format(grpc=grpc))
    stubs = tree / "messaging" / "service.pb.go"
    stubs.write_text(stubs.read_text().replace(f'"{GUPLOAD_SERVICE}', f'"{service}').replace(
        f'"/{GUPLOAD_SERVICE}/', f'"/{service}/'))
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    binary = work / f"gupload-{service}"
    for argv in (["go", "mod", "tidy"], ["go", "build", "-o", str(binary), "."]):
        done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if not line.startswith("go: downloading")]
            raise SystemExit(f"cannot build gupload ({' '.join(argv)}):\n" + "\n".join(lines[-15:]))
    return binary, commit


@contextmanager
def server(argv: list[str], log: Path, stdout=None):
    """Run ``argv`` in its own process group; always stop the group (SIGTERM, then SIGKILL)."""
    with open(log, "w") as err:
        proc = subprocess.Popen(argv, stdout=stdout or err, stderr=err, text=True, start_new_session=True)
    try:
        yield proc
    finally:
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(wait)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
        if proc.stdout:
            proc.stdout.close()


def free_port() -> int:
    # gupload takes a port, not port 0, and binds every interface: ask the kernel for one free there.
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def wait_listening(proc: subprocess.Popen, port: int, log: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gupload serve exited: {log.read_text().strip()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"gupload serve did not listen on port {port} within 10 s")


def gupload_upload(binary: Path, port: int, path: Path, chunk: int) -> tuple[float, float]:
    """One upload by a new gupload client: (its own seconds, the process's wall seconds)."""
    argv = [str(binary), "upload", "--address", f"127.0.0.1:{port}", "--file", str(path), "--chunk-size", str(chunk)]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"gupload upload failed: {(done.stdout + done.stderr).strip()}")
    return int(done.stdout.split()[-1]) / 1e9, wall  # its only output: the nanoseconds between first and last Send


def labkit_rows(port: int, path: Path, chunk: int, uploads: int, warmup: int, counted: bool = True) -> list[dict]:
    """labkit-go's upload rows; ``counted`` false for gupload's server, which acknowledges no byte count: the
    agent's one complaint about that is expected, and its MB/s is the file over its seconds, as the agent's."""
    argv = [str(LABKIT_GO), "upload-agent", "-transport", "grpc", "-target", f"127.0.0.1:{port}", "-file", str(path),
            "-chunk-size", str(chunk), "-repeats", str(uploads), "-warmup", str(warmup)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 and counted:
        raise SystemExit(f"labkit-go upload-agent failed: {done.stderr.strip()}")
    rows = [row for row in map(json.loads, done.stdout.splitlines()) if row["event"] == "upload"]
    expected = "server acknowledged 0 bytes, sent "
    bad = [row.get("error") for row in rows
           if not row["ok"] and (counted or not str(row.get("error", "")).startswith(expected))]
    if bad or not rows:
        raise SystemExit(f"labkit-go upload failed: {bad[0] if bad else done.stderr.strip()}")
    for row in rows:
        if row.get("mb_per_s") is None:  # the agent gives none for a row it found a problem with
            row["mb_per_s"] = path.stat().st_size / row["seconds"] / 1e6
    return rows


def labkit_uploads(port: int, path: Path, chunk: int, uploads: int, counted: bool = True) -> tuple[float, float]:
    """Median MB/s of labkit-go's uploads two ways: (warm: ``uploads`` on one connection after a 1-byte warm-up, as
    `labkit upload` runs them; cold: one upload per new agent process and connection, without warm-up, as gupload
    makes each)."""
    warm = labkit_rows(port, path, chunk, uploads, warmup=1, counted=counted)
    cold = [labkit_rows(port, path, chunk, 1, warmup=0, counted=counted)[0] for _ in range(uploads)]
    return (statistics.median(row["mb_per_s"] for row in warm), statistics.median(row["mb_per_s"] for row in cold))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gupload-src", type=Path, default=os.environ.get("GUPLOAD_SRC"),
                        help="gupload's source: a checkout or a bare git directory. [default: $GUPLOAD_SRC]")
    parser.add_argument("--uploads", type=int, default=5, help="Timed uploads per tool and chunk size. [default: 5]")
    parser.add_argument("--file-mib", type=int, default=64, help="Size of the uploaded file. [default: 64]")
    parser.add_argument("--chunks", default="1KiB,32KiB,1MiB", help="Chunk sizes, comma-separated. [default: 1KiB,32KiB,1MiB]")
    parser.add_argument("--grpc-version", default="v1.9.0", help="grpc-go to build gupload with. [default: v1.9.0]")
    parser.add_argument("--seed", type=int, default=1, help="Seed of the file's bytes. [default: 1]")
    args = parser.parse_args()
    try:
        chunks = [parse_size(part) for part in args.chunks.split(",")]
    except (KeyError, ValueError):
        parser.error(f"--chunks {args.chunks!r}: sizes such as 1024, 1KiB, 32KiB, 1MiB")
    if any(not 1 <= chunk <= MAX_CHUNK for chunk in chunks) or args.uploads < 1 or args.file_mib < 1:
        parser.error(f"chunk sizes must be between 1 and {MAX_CHUNK} B, --uploads and --file-mib at least 1")
    src = args.gupload_src
    if src is None or not ((src / "core" / "grpc_client.go").is_file() or (src / "HEAD").is_file()):
        print(f"gupload's source not found at {src or '(no --gupload-src, GUPLOAD_SRC unset)'}: get it with "
              "`git clone https://github.com/cirocosta/gupload DIR` and rerun with --gupload-src DIR; no ratio.")
        return 0
    if not shutil.which("go"):
        raise SystemExit("go is not on PATH: gupload is built from source")
    if not LABKIT_GO.exists():
        raise SystemExit(f"{LABKIT_GO} is not built: run scripts/bootstrap.sh")
    # SIGTERM as Ctrl-C: unwind, so that every server's `finally` stops its process group.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))

    with tempfile.TemporaryDirectory(prefix="labkit-gupload-") as tmp:
        work = Path(tmp)
        binary, commit = build_gupload(src, work, args.grpc_version)
        crossed, _ = build_gupload(src, work, args.grpc_version, LABKIT_SERVICE)
        path = work / "file.bin"
        path.write_bytes(random.Random(args.seed).randbytes(args.file_mib << 20))
        size = path.stat().st_size
        own: dict[int, float] = {}
        wall: dict[int, float] = {}
        ours: dict[int, float] = {}
        ours_cold: dict[int, float] = {}
        ours_on_theirs: dict[int, float] = {}  # labkit-go's client (cold) against gupload's server
        theirs_on_ours: dict[int, float] = {}  # gupload's client (its own figure) against labkit-go's server

        def gupload_mb_per_s(client: Path, port: int, chunk: int) -> tuple[float, float]:
            gupload_upload(client, port, path, chunk)  # untimed
            runs = [gupload_upload(client, port, path, chunk) for _ in range(args.uploads)]
            return (size / statistics.median(s for s, _ in runs) / 1e6, size / statistics.median(w for _, w in runs) / 1e6)

        port = free_port()
        with server([str(binary), "serve", "--port", str(port)], work / "gupload-serve.log") as proc:
            wait_listening(proc, port, work / "gupload-serve.log")
            for chunk in chunks:
                own[chunk], wall[chunk] = gupload_mb_per_s(binary, port, chunk)
        port = free_port()
        with server([str(crossed), "serve", "--port", str(port)], work / "gupload-crossed.log") as proc:
            wait_listening(proc, port, work / "gupload-crossed.log")
            for chunk in chunks:
                ours_on_theirs[chunk] = labkit_uploads(port, path, chunk, args.uploads, counted=False)[1]
        serve = [str(LABKIT_GO), "serve", "-bind", "127.0.0.1:0", "-max-message-bytes", str(max(4 << 20, 2 * max(chunks)))]
        with server(serve, work / "labkit-serve.log", stdout=subprocess.PIPE) as proc:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit(f"labkit-go serve exited: {(work / 'labkit-serve.log').read_text().strip()}")
            ready = json.loads(line)
            for chunk in chunks:
                theirs_on_ours[chunk] = gupload_mb_per_s(crossed, ready["port"], chunk)[0]
                try:
                    ours[chunk], ours_cold[chunk] = labkit_uploads(ready["port"], path, chunk, args.uploads)
                except SystemExit as failed:  # say whether the server went away, and what it said
                    state = "still running" if proc.poll() is None else f"exited with {proc.returncode}"
                    log = (work / "labkit-serve.log").read_text().strip()[-1000:]
                    raise SystemExit(f"{failed}\nlabkit-go serve {state}; its stderr: {log or '(empty)'}") from None

    print(f"gupload {commit} (grpc-go {args.grpc_version.lstrip('v')}) against labkit-go (grpc-go "
          f"{ready['grpc_go_version']}): {args.file_mib} MiB over gRPC client streaming on 127.0.0.1, TLS off, "
          f"median of {args.uploads} uploads (machine: {os.cpu_count()} cores)")
    header = (f"{'chunk':>8} {'labkit-go':>10} {'labkit-go':>10} {'gupload':>10} {'gupload':>10} {'cold/':>9} "
              f"{'within':>7} {'warm/':>9} {'cold/':>9}")
    print(header)
    print(f"{'':>8} {'warm MB/s':>10} {'cold MB/s':>10} {'own MB/s':>10} {'wall MB/s':>10} {'own':>9} {'10 %':>7} "
          f"{'own':>9} {'wall':>9}")
    print("-" * len(header))
    for chunk in chunks:
        ratio = ours_cold[chunk] / own[chunk]
        print(f"{label(chunk):>8} {ours[chunk]:>10.1f} {ours_cold[chunk]:>10.1f} {own[chunk]:>10.1f} {wall[chunk]:>10.1f} "
              f"{ratio:>8.2f}× {'yes' if abs(ratio - 1) <= 0.10 else 'no':>7} {ours[chunk] / own[chunk]:>8.2f}× "
              f"{ours_cold[chunk] / wall[chunk]:>8.2f}×")
    print()
    print("Each client against each server (gupload's client built again with labkit's service name, nothing else "
          "changed): MB/s as each client reports it (gupload: its own figure; labkit-go: cold). The same server "
          "with the other client is the client's share of the gap; the same client with the other server, the "
          "server's.")
    header = (f"{'chunk':>8} {'gupload→':>10} {'gupload→':>10} {'labkit→':>10} {'labkit→':>10} {'clients,':>10} "
              f"{'within':>7} {'clients,':>10} {'servers,':>10} {'servers,':>10}")
    print(header)
    print(f"{'':>8} {'gupload':>10} {'labkit':>10} {'gupload':>10} {'labkit':>10} {'on gupload':>10} {'10 %':>7} "
          f"{'on labkit':>10} {'gupload c.':>10} {'labkit c.':>10}")
    print("-" * len(header))
    for chunk in chunks:
        same_server = ours_on_theirs[chunk] / own[chunk]
        print(f"{label(chunk):>8} {own[chunk]:>10.1f} {theirs_on_ours[chunk]:>10.1f} {ours_on_theirs[chunk]:>10.1f} "
              f"{ours_cold[chunk]:>10.1f} {same_server:>9.2f}× {'yes' if abs(same_server - 1) <= 0.10 else 'no':>7} "
              f"{ours_cold[chunk] / theirs_on_ours[chunk]:>9.2f}× {theirs_on_ours[chunk] / own[chunk]:>9.2f}× "
              f"{ours_cold[chunk] / ours_on_theirs[chunk]:>9.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())

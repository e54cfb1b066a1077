"""The main job: the idle-connection experiment of the research brief on a fresh local testbed.

Brings up a testbed (100 ms one way, MTU 1460, cubic), pings across it, then
for ``tcp_slow_start_after_idle`` = 1 and 0 runs a gRPC echo server on host b
and a client on host a that sends requests of several sizes with an idle gap
between calls. It writes the run under ``data/runs/`` (or ``$LABKIT_RUNS``),
prints the median RTT per size as a multiple of the ping RTT, and tears the
testbed down again.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from contextlib import contextmanager
from pathlib import Path

import click

from labkit.units import DURATION, size_list

SSAI = "net.ipv4.tcp_slow_start_after_idle"
DEFAULT_SIZES = "1000,10000,14000,16000,32000,64000"


def labkit_argv(*args: str) -> list[str]:
    """argv that runs this same labkit installation (namespaces share the filesystem)."""
    return [sys.executable, "-m", "labkit", *args]


@contextmanager
def sysctl_set(hosts, key: str, value: str):
    """Set ``key`` to ``value`` on every host for the body, then restore each original value."""
    originals = {}
    try:
        for host in hosts:
            originals[host] = host.read_sysctl(key)
            host.write_sysctl(key, value)
        yield originals
    finally:
        for host, original in originals.items():
            host.write_sysctl(key, original)


def ping_rtt_ms(host, address: str, count: int = 10, interval: float = 0.2) -> tuple[float | None, str]:
    """Mean ping RTT in ms (ping's own summary has µs resolution; replies ≥100 ms print whole ms) and the raw output."""
    from labkit.parsers.ping import parse_ping

    result = host.run(["ping", "-n", "-c", str(count), "-i", str(interval), address], timeout=count * interval + 30)
    return parse_ping(result.stdout).summary.get("rtt_avg_ms"), result.stdout


def echo_cell(client, server, server_address: str, *, sizes: list[int], repeats: int, gap_s: float, warmup: int = 1):
    """Start an echo server on ``server``, run the client on ``client``, and yield one dict per call.

    Both processes are stopped when the generator finishes, fails or is closed.
    """
    with server.start(labkit_argv("echo", "serve", "--bind", f"{server_address}:0")) as server_proc:
        ready = json.loads(server_proc.wait_for_line(lambda line: '"ready"' in line, timeout=30))
        argv = labkit_argv(
            "echo", "call", "--target", f"{server_address}:{ready['port']}",
            "--sizes", ",".join(map(str, sizes)), "--repeats", str(repeats),
            "--gap", str(gap_s), "--warmup", str(warmup),
        )
        with client.start(argv) as client_proc:
            for line in client_proc.lines(timeout=60 + 5 * gap_s):
                if line.startswith("{"):
                    yield json.loads(line)
            if client_proc.popen.wait() != 0:
                from labkit.errors import LabkitError

                detail = client_proc.stderr_lines[-1] if client_proc.stderr_lines else ""
                raise LabkitError(f"the echo client failed on {client.name}: {detail}")


def summarise(rows: list[dict], ping_ms: float) -> dict[tuple[int, int], float]:
    """Median RTT per (sysctl value, size) as a multiple of the ping RTT, over successful warm calls."""
    groups: dict[tuple[int, int], list[float]] = {}
    for row in rows:
        if row["ok"] and not row["cold"]:
            groups.setdefault((row["slow_start_after_idle"], row["payload_bytes"]), []).append(row["rtt_ns"] / 1e6)
    return {key: statistics.median(values) / ping_ms for key, values in sorted(groups.items())}


@click.command()
@click.option("--one-way-delay", "delay", type=DURATION, default="100ms", show_default=True,
              help="One-way delay of the emulated link.")
@click.option("--sizes", type=size_list(1, 4 * 2**20), default=DEFAULT_SIZES, show_default=True,
              help="Request sizes in bytes; the step is expected just above 10 segments × MSS ≈ 14 KB.")
@click.option("--repeats", type=click.IntRange(1, 1000), default=3, show_default=True, help="Calls per size.")
@click.option("--gap", type=DURATION, default="1s", show_default=True,
              help="Idle time between calls; longer than one RTO (≈ RTT + 200 ms) triggers the cwnd reset.")
@click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path),
              default=lambda: os.environ.get("LABKIT_RUNS", "data/runs"), show_default="data/runs or $LABKIT_RUNS",
              help="Where the run directory is written.")
@click.option("--keep-testbed", is_flag=True, help="Leave the testbed up afterwards (it is torn down by default).")
def demo(delay, sizes, repeats, gap, runs_dir, keep_testbed):
    """The main job: reproduce the idle-connection step on the local testbed.

    With 1 s between calls, Linux resets an idle connection's congestion
    window to 10 segments when tcp_slow_start_after_idle=1, so requests larger
    than ~14 KB take 2 RTT instead of 1; with the sysctl at 0 they take 1 RTT.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.table import Table

    from labkit.hosts import LocalHost
    from labkit.provenance import labkit_provenance, utc_now, utc_stamp
    from labkit.testbed.lab import LinkConfig, Testbed

    console = Console(stderr=True)
    lab = Testbed("demo", log=lambda message: console.print(message))
    link = LinkConfig(one_way_delay_s=delay, rate_bps=100e6, mtu=1460, cc="cubic")
    run_dir = Path(runs_dir) / f"{utc_stamp()}-demo"
    (run_dir / "raw").mkdir(parents=True)
    manifest = {
        "format_version": 1,
        "experiment": "idle-step-demo",
        "config": {"sizes": sizes, "repeats": repeats, "gap_s": gap, "slow_start_after_idle": [1, 0], "link": link.__dict__},
        "provenance": labkit_provenance(),
        "started_utc": utc_now(),
        "status": "running",
    }

    def save_manifest():
        tmp = run_dir / "manifest.json.tmp"
        tmp.write_text(json.dumps(manifest, indent=2, default=str))
        os.replace(tmp, run_dir / "manifest.json")

    save_manifest()
    rows: list[dict] = []
    try:
        console.print(f"bringing up the local testbed: {link.describe()}")
        state = lab.up(link)
        a, b = state.hosts["a"], state.hosts["b"]
        host_a, host_b = LocalHost("a", netns=a.netns), LocalHost("b", netns=b.netns)
        manifest["hosts"] = {
            host.name: {
                "kernel": host.run(["uname", "-r"]).stdout.strip(),
                "route_to_peer": host.run(["ip", "route", "get", peer]).stdout.strip(),
                SSAI: host.read_sysctl(SSAI),
            }
            for host, peer in ((host_a, b.data_address), (host_b, a.data_address))
        }
        ping_ms, raw_ping = ping_rtt_ms(host_a, b.data_address)
        (run_dir / "raw" / "ping-before.txt").write_text(raw_ping)
        if ping_ms is None:
            raise click.ClickException("no ping replies across the testbed link")
        manifest["ping_rtt_ms"] = ping_ms
        save_manifest()
        console.print(f"ping RTT across the link: {ping_ms:.2f} ms")

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=console) as progress:
            task = progress.add_task("echo calls", total=2 * len(sizes) * repeats)
            for value in (1, 0):
                progress.update(task, description=f"{SSAI.split('.')[-1]}={value}")
                journal = run_dir / "raw" / f"echo-ssai{value}.jsonl"
                with sysctl_set([host_a, host_b], SSAI, str(value)), open(journal, "a") as out:
                    for row in echo_cell(host_a, host_b, b.data_address, sizes=sizes, repeats=repeats, gap_s=gap):
                        row["slow_start_after_idle"] = value
                        rows.append(row)
                        out.write(json.dumps(row) + "\n")
                        out.flush()
                        progress.advance(task)
        manifest["status"] = "complete"
    except KeyboardInterrupt:
        manifest["status"] = "interrupted"
        raise
    except BaseException:
        manifest["status"] = "failed"
        raise
    finally:
        manifest["ended_utc"] = utc_now()
        manifest["calls_recorded"] = len(rows)
        save_manifest()
        if not keep_testbed:
            lab.down(quiet=True)

    ratios = summarise(rows, manifest["ping_rtt_ms"])
    table = Table(title=f"median RTT as a multiple of the ping RTT ({manifest['ping_rtt_ms']:.1f} ms), {gap:g} s idle between calls")
    table.add_column("request bytes", justify="right")
    table.add_column("slow_start_after_idle=1", justify="right")
    table.add_column("slow_start_after_idle=0", justify="right")
    for size in sizes:
        table.add_row(str(size), *(f"{ratios[(v, size)]:.2f}×" if (v, size) in ratios else "—" for v in (1, 0)))
    Console().print(table)
    click.echo(f"run written to {run_dir}")

"""``labkit sweep``: the idle-connection experiment (:mod:`labkit.experiments.sweep`) from the shell or a TOML file."""

from __future__ import annotations

import click

from labkit.cli.options import CAPTURE, experiment_options, print_run_footer, run_from_flags, stack_options
from labkit.limits import (AT_MOST, MAX_CALL_TIMEOUT_S, MAX_IPERF_SECONDS, MAX_KEEPALIVE_MS, MAX_PING_COUNT,
                           MAX_ECHO_PAYLOAD_BYTES, MAX_REPEATS, MAX_WARMUP, MIN_CALL_TIMEOUT_S, duration_text)
from labkit.cli.params import DURATION, IPERF3_RATE, choice_list, duration_list, int_list, size_list

CONGESTION_CONTROLS = ("cubic", "bbr", "reno")
# option (and experiment-file key) -> SweepConfig field, where the names differ
RENAMED = {"gaps": "gaps_s", "background_gap": "background_gaps_s", "call_timeout": "call_timeout_s"}


@click.command()
@click.option("--client", help="Inventory host that runs the echo client.")
@click.option("--server", help="Inventory host that runs the echo server.")
@click.option("--sizes", type=size_list(0, MAX_ECHO_PAYLOAD_BYTES),
              help=f"Request sizes in bytes, e.g. 1000,14000,16k,32000 (each at most {MAX_ECHO_PAYLOAD_BYTES}).")
@click.option("--gaps", type=duration_list(), help=f"Idle gaps between calls, e.g. 1s,100ms ({AT_MOST}).")
@click.option("--repeats", type=click.IntRange(1, MAX_REPEATS), help="Calls per size in each cell. [default: 5]")
@click.option("--background-gap", type=duration_list(allow_none=True),
              help=f"Background 1-byte calls on the same channel every ..., e.g. none,250ms ({AT_MOST}).")
@click.option("--keepalive-ms", type=int_list(1, MAX_KEEPALIVE_MS, allow_none=True),
              help="gRPC keepalive ping interval on the client channel, e.g. none,1000.")
@click.option("--slow-start-after-idle", type=int_list(0, 1, allow_none=True),
              help="net.ipv4.tcp_slow_start_after_idle on both hosts, e.g. 1,0 ('keep' leaves it). Needs root there.")
@click.option("--cc", type=choice_list(CONGESTION_CONTROLS, allow_none=True),
              help="Congestion control on the route between the hosts, e.g. cubic,bbr ('keep' leaves it).")
@click.option("--order", type=click.Choice(["sequential", "shuffled"]),
              help="Order of cells (within a server and kernel condition) and of calls, drawn with --seed: shuffled so "
                   "that drift over time and a connection's history fall on no one condition. [default: shuffled]")
@click.option("--name", help="Run name (the run directory is <UTC time>-<name>). [default: sweep]")
@click.option("--seed", type=int, help="Seed for payloads and shuffling. [default: 1]")
@click.option("--warmup", type=click.IntRange(0, MAX_WARMUP), help="Unrecorded calls before each cell's first recorded one. [default: 1]")
@click.option("--mesh", is_flag=True, default=None, help="Run every ordered pair of inventory hosts, disjoint pairs in parallel.")
@click.option("--hosts", help="With --mesh: only these inventory hosts (comma-separated).")
@click.option("--call-timeout", type=DURATION,
              help=f"Deadline of each call ({duration_text(MIN_CALL_TIMEOUT_S)} to {duration_text(MAX_CALL_TIMEOUT_S)}): "
                   "a call that waits it out means the link (or the server) "
                   "stopped answering, and fails its cell; the run ends, resumable. [default: 30s]")
@click.option("--ping-count", type=click.IntRange(1, MAX_PING_COUNT), help="Pings in each baseline before and after. [default: 10]")
@click.option("--iperf-seconds", type=click.IntRange(1, MAX_IPERF_SECONDS), help="Length of the iperf3 baseline. [default: 3]")
@click.option("--iperf-rate", type=IPERF3_RATE,
              help="iperf3 -b rate limit of the baseline, bits/s (always limited: 0 is refused). [default: 50M]")
@click.option("--iperf-port", type=click.IntRange(1, 65535), help="Port of the iperf3 baseline's server. [default: a free one, picked per run]")
@stack_options()
@CAPTURE
@experiment_options
def sweep(**flags):
    """Sweep request size × idle gap × background traffic × kernel settings between two hosts.

    Starts `labkit echo serve` on the server host, runs `labkit echo call
    --tcp-info` on the client host for every cell of the matrix (one warm
    channel per cell, the cold first call recorded and flagged), records ping
    and iperf3 baselines, host facts and each call's TCP state, and writes it
    all to a run directory. Kernel settings are restored afterwards, also on
    failure or Ctrl-C. Example on the local testbed:

    \b
      labkit testbed up
      labkit sweep ~/.local/state/labkit/testbeds/labkit/inventory.toml \\
          --client a --server b --sizes 1000,14000,16000,32000 --gaps 1s \\
          --repeats 5 --slow-start-after-idle 1,0
    """
    run_from_flags("sweep", flags, print_summary, renamed=RENAMED, adjust=_host_list, check_failures=True)


def _host_list(values: dict, options: dict) -> None:
    if isinstance(values.get("hosts"), str):
        values["hosts"] = [name.strip() for name in values["hosts"].split(",") if name.strip()]


def print_summary(run) -> None:
    """The median RTT per condition and size, as a multiple of the pair's ping RTT."""
    from rich.console import Console
    from rich.table import Table

    from labkit.analysis import thin_statistics
    from labkit.analysis.tables import SWEEP_CONDITION, condition_label

    table_data = run.summary()
    sizes = sorted(table_data["payload_bytes"].unique())
    table = Table(title="median RTT of warm calls, as a multiple of the ping RTT")
    for column in ("pair", "condition", *map(str, sizes)):
        table.add_column(column, justify="right" if column[0].isdigit() else "left")
    for key, group in table_data.groupby(SWEEP_CONDITION, dropna=False, sort=False):
        src, dst, *knobs = key
        cells = {int(row.payload_bytes): row for row in group.itertuples()}
        values = []
        for size in sizes:
            row = cells.get(int(size))
            if row is None:
                values.append("—")
            elif "rtt_multiple" in table_data and row.rtt_multiple == row.rtt_multiple:
                values.append(f"{row.rtt_multiple:.2f}×")
            else:
                values.append(f"{row.median_ms:.1f} ms")
        table.add_row(f"{src}→{dst}", condition_label(*knobs), *values)
    console = Console()
    console.print(table)
    print_run_footer(console, run, "calls", thin_statistics(table_data["count"], {"median": 50}, "warm calls"))

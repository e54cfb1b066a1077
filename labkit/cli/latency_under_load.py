"""``labkit latency-under-load``: probes before, during and after a saturating load
(:mod:`labkit.experiments.latency_under_load`) from the shell or a TOML file."""

from __future__ import annotations

import click

from labkit.cli.options import experiment_options, print_run_footer, run_from_flags, stack_options
from labkit.cli.params import DURATION, choice_list
from labkit.experiments.latency_under_load import LOADS
from labkit.experiments.series import SERIES_PROBES
from labkit.limits import MAX_SERIES_PAYLOAD_BYTES

# option (and experiment-file key) -> UnderLoadConfig field, where the names differ
RENAMED = {"duration": "duration_s", "interval": "interval_s", "timeout": "timeout_s", "load_start": "load_start_s",
           "load_for": "load_s", "ramp": "ramp_s"}


def _names(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


@click.command("latency-under-load")
@click.option("--client", help="Inventory host that sends the probes (and the load's client end).")
@click.option("--server", help="Inventory host that answers them (echo server, irtt's with irtt, and the load's server end).")
@click.option("--duration", type=DURATION, help="Each cell's timeline: probes from its start to its end. [default: 30s]")
@click.option("--interval", type=DURATION, help="Time between ticks; every probe sends once per tick. [default: 100ms]")
@click.option("--probes", type=choice_list(SERIES_PROBES),
              help=f"Comma-separated, from {','.join(SERIES_PROBES)} (irtt: Debian's irtt on both hosts, beside at "
                   "least one other). [default: ping,echo-warm,tcp-echo]")
@click.option("--load-start", type=DURATION, help="When the load starts, from the cell's first tick. [default: 5s]")
@click.option("--load-for", type=DURATION, help="How long the load runs (whole seconds). [default: 20s]")
@click.option("--ramp", type=DURATION,
              help="The load's first seconds, while the queue fills: neither before nor during. [default: 2s]")
@click.option("--loads", type=choice_list(LOADS),
              help="Comma-separated: tcp-up (iperf3 from client to server), tcp-down, tcp-both, grpc-up (the "
                   "stack's gRPC uploads of a 16 MiB file, one after another, on the hosts' own congestion "
                   "control). [default: tcp-up]")
@click.option("--queues", callback=lambda ctx, param, value: _names(value) if value else None,
              help="The testbed link's queue per cell, comma-separated: keep (as it is), a droptail size (bdp, 10bdp, "
                   "1000 packets, 1.5mb), codel:SIZE (CoDel, target 5 ms, over that buffer). Anything but keep needs "
                   "a labkit testbed. [default: keep]")
@click.option("--cc", callback=lambda ctx, param, value: _names(value) if value else None,
              help="The load's congestion control per cell, comma-separated (iperf3 -C), or 'default' for the "
                   "hosts' own. [default: cubic]")
@click.option("--payload-bytes", type=click.IntRange(0, MAX_SERIES_PAYLOAD_BYTES), help="Payload of each echo request. [default: 50]")
@click.option("--timeout", type=DURATION, help="Deadline of each call, and how long a ping waits. [default: 5s]")
@click.option("--name", help="Run name (the run directory is <UTC time>-<name>). [default: under-load]")
@stack_options(swept=False)
@experiment_options
def latency_under_load(**flags):
    """Why is my RPC slow under load: probes before, during and after a saturating TCP load.

    Each cell is one condition (the link's queue, the load's direction, its
    congestion control) and one timeline: the probes of `labkit series` (ping,
    a warm gRPC echo, a raw TCP echo, irtt, ...) every --interval for --duration,
    and one iperf3 stream (or the application's own gRPC uploads) from
    --load-start for --load-for. The summary gives
    what the load added to each probe's median, its round trip and, for probes
    the server stamps, each direction apart, with 95 % intervals (Holm over the
    table), and the responsiveness left (round trips per minute, as the IETF
    draft computes it). Example on the local testbed:

    \b
      labkit latency-under-load ~/.local/state/labkit/testbeds/labkit/inventory.toml \\
          --client a --server b --queues 10bdp,codel:10bdp --loads tcp-up,tcp-down
    """
    run_from_flags("latency-under-load", flags, print_summary, renamed=RENAMED, check_failures=True)


def print_summary(run) -> None:
    """Per condition and probe: what the load added to the round trip and each direction, and RPM."""
    from rich.console import Console
    from rich.table import Table

    from labkit.analysis.under_load import queue_table

    table_data = run.summary()
    table = Table(title="what the load added (ms: median during − median before [95 % interval]; Holm p)")
    for column in ("queue", "cc", "load", "probe", "measure", "n before/during", "before", "during", "added",
                   "p (Holm)", "RPM before → during"):
        table.add_column(column, justify="left" if column in ("queue", "cc", "load", "probe", "measure") else "right")
    for _, row in table_data.iterrows():
        rpm = (f"{row['rpm_before']:.0f} → {row['rpm_during']:.0f}" if row["measure"] == "rtt" else "")
        table.add_row(row["queue"], str(row["cc"]), row["load"], row["probe"], row["measure"],
                      f"{row['n_before']}/{row['n_during']}", f"{row['before_ms']:.2f}", f"{row['during_ms']:.2f}",
                      f"{row['added_ms']:+.2f} [{row['added_low_ms']:+.2f}, {row['added_high_ms']:+.2f}]",
                      f"{row['p_holm']:.2g}", rpm)
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # a pipe or a log file: room for every column, never cut values
    console.print(table)
    queues = queue_table(run.cell_events())
    if not queues.empty:
        link = Table(title="the link's queue while the load ran (ms at the link's rate)")
        for column in ("queue", "cc", "load", "direction", "aqm", "drain time", "peak", "drops", "load Mbit/s"):
            link.add_column(column, justify="left" if column in ("queue", "cc", "load", "direction", "aqm") else "right")
        for _, row in queues.iterrows():
            link.add_row(row["queue"], str(row["cc"]), row["load"], row["direction"].replace(">", " → "), str(row["aqm"]),
                         *(("—" if value is None or value != value else f"{value:.1f}")
                           for value in (row["drain_ms"], row["peak_ms"])), str(int(row["drops"])),
                         "—" if row["load_sent_mbps"] is None else f"{row['load_sent_mbps']:.1f}")
        console.print(link)
    if len(table_data) and table_data["clock"].iloc[0] != "one clock":
        console.print(f"one-way figures rest on the hosts' clock offset, bounded by the probes to "
                      f"± {table_data['clock_bound_ms'].iloc[0]:.1f} ms")
    print_run_footer(console, run, "rows")

"""``labkit series``: ping vs echo over time (:mod:`labkit.experiments.series`) from the shell or a TOML file."""

from __future__ import annotations

import click

from labkit.cli.options import CAPTURE, experiment_options, print_run_footer, run_from_flags, stack_options
from labkit.cli.params import DURATION, choice_list
from labkit.experiments.series import SERIES_PROBES, one_way_delays
from labkit.limits import MAX_SERIES_PAYLOAD_BYTES

# option (and experiment-file key) -> SeriesConfig field, where the names differ
RENAMED = {"duration": "duration_s", "interval": "interval_s", "cell": "cell_s", "timeout": "timeout_s"}


@click.command()
@click.option("--client", help="Inventory host that sends the probes.")
@click.option("--server", help="Inventory host that runs the echo server, and irtt's (probes go to its data address).")
@click.option("--duration", type=DURATION, help="How long the series runs, e.g. 10s, 1h. [default: 60s]")
@click.option("--interval", type=DURATION, help="Time between ticks; every probe sends once per tick. [default: 1s]")
@click.option("--probes", type=choice_list(SERIES_PROBES),
              help=f"Comma-separated, from {','.join(SERIES_PROBES)} (irtt: Debian's irtt on both hosts). "
                   "[default: ping,echo-warm,echo-cold,tcp-echo]")
@click.option("--payload-bytes", type=click.IntRange(0, MAX_SERIES_PAYLOAD_BYTES),
              help="Payload of each echo request; irtt's packet length (its header included, so at least 60). "
                   "[default: 50]")
@click.option("--cell", type=DURATION, help="Length of a cell, the unit --resume redoes. [default: 60s]")
@click.option("--timeout", type=DURATION,
              help="Deadline of each call, and how long a ping waits for its reply (irtt for its last ones). "
                   "[default: 5s]")
@click.option("--spread/--together", default=None,
              help="Spread the probes evenly over each tick (default), or send them all at the tick itself.")
@click.option("--name", help="Run name (the run directory is <UTC time>-<name>). [default: series]")
@stack_options(swept=False)
@CAPTURE
@experiment_options
def series(**flags):
    """Ping vs gRPC echo over time: every probe on one schedule, from --client to --server.

    Starts `labkit echo serve --tcp-echo-port 0` on the server host and one
    probe agent on the client host, which at every tick sends an ICMP ping,
    a gRPC echo on a warm channel, one on a new channel (cold, what the 2016
    write-up measured), a raw TCP echo on a warm connection, and optionally a
    TCP connect. With irtt among the probes, irtt's own server runs on the
    server host and its client on the client host, a UDP packet every tick,
    each round trip split by direction by the server's stamps. Every sample,
    lost and failed ones included, is a row with its UTC send time; raw ping
    and irtt output is kept. Example on the local testbed:

    \b
      labkit series ~/.local/state/labkit/testbeds/labkit/inventory.toml \\
          --client a --server b --duration 1h --interval 1s
    """
    run_from_flags("series", flags, print_summary, renamed=RENAMED, check_failures=True)


def print_summary(run) -> None:
    """Per probe: samples, failures and the RTT distribution, with the median as a multiple of ping's."""
    from rich.console import Console
    from rich.table import Table

    from labkit.analysis import thin_statistics

    table_data = run.summary()
    table = Table(title="round-trip time per probe (ms, successful samples)")
    for column in ("probe", "ticks", "ok", "failed", "p5", "median", "p95", "max", "× ping"):
        table.add_column(column, justify="left" if column == "probe" else "right")

    def ms(value) -> str:
        return "—" if value is None or value != value else f"{value:.3f}"

    for probe, row in table_data.iterrows():
        ratio = row["vs_ping"]
        table.add_row(probe, str(int(row["ticks"])), str(int(row["ok"])), str(int(row["failed"])), ms(row["p5_ms"]),
                      ms(row["median_ms"]), ms(row["p95_ms"]), ms(row["max_ms"]),
                      "—" if ratio is None or ratio != ratio else f"{ratio:.2f}×")
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)  # a pipe or a log file: room for every column, never cut values
    console.print(table)
    print_one_way(console, run)
    thin = thin_statistics(table_data["ok"], {"median": 50, "p5": 5, "p95": 95}, "ok samples")
    print_run_footer(console, run, "rows", thin)


def print_one_way(console, run) -> None:
    """Each stamped probe's way out and way back (median, 95 % interval), and what the split rests on."""
    from rich.table import Table

    offset, ways = one_way_delays(run)
    if ways.empty:
        return
    config = run.manifest.get("config") or {}
    client, server = config.get("client"), config.get("server")
    table = Table(title=f"one-way delays (ms, median [95 % interval]): {offset.describe()}")
    for column in ("probe", "n", f"{client} → {server}", f"{server} → {client}", "back − out"):
        table.add_column(column, justify="left" if column == "probe" else "right")
    bound = "" if offset.method == "one clock" else f" ± {offset.bound_ms:.1f}"
    for _, row in ways.iterrows():
        table.add_row(row["probe"], str(int(row["n"])),
                      *(f"{row[f'{name}_ms']:.3f} [{row[f'{name}_low_ms']:.3f}, {row[f'{name}_high_ms']:.3f}]{bound}"
                        for name in ("out", "back")),
                      f"{row['back_minus_out_ms']:.3f}")
    console.print(table)

"""`labkit series`: ping vs echo over time, from the shell or a TOML experiment file."""

from __future__ import annotations


import click

from labkit.echo.series_agent import PROBES
from labkit.units import DURATION, choice_list

# option / file key -> SeriesConfig field
_FILE_KEYS = {
    "inventory": "inventory", "client": "client", "server": "server", "duration": "duration_s",
    "interval": "interval_s", "probes": "probes", "payload_bytes": "payload_bytes", "name": "name",
    "cell": "cell_s", "timeout": "timeout_s", "spread": "spread",
}


@click.command()
@click.argument("inventory", required=False, type=click.Path(dir_okay=False))
@click.option("--client", help="Inventory host that sends the probes.")
@click.option("--server", help="Inventory host that runs the echo server (probes go to its data address).")
@click.option("--duration", type=DURATION, help="How long the series runs, e.g. 10s, 1h. [default: 60s]")
@click.option("--interval", type=DURATION, help="Time between ticks; every probe sends once per tick. [default: 1s]")
@click.option("--probes", type=choice_list(PROBES),
              help=f"Comma-separated, from {','.join(PROBES)}. [default: ping,echo-warm,echo-cold,tcp-echo]")
@click.option("--payload-bytes", type=click.IntRange(0, 1 << 20), help="Payload of each echo request. [default: 50]")
@click.option("--cell", type=DURATION, help="Length of a cell, the unit --resume redoes. [default: 60s]")
@click.option("--timeout", type=DURATION, help="Deadline of each call, and how long a ping waits for its reply. [default: 5s]")
@click.option("--spread/--together", default=None,
              help="Spread the probes evenly over each tick (default), or send them all at the tick itself.")
@click.option("--name", help="Run name (the run directory is <UTC time>-<name>). [default: series]")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="TOML experiment file; flags override it.")
@click.option("--runs-dir", type=click.Path(file_okay=False), help="Where runs go. [default: $LABKIT_RUNS or data/runs]")
@click.option("--resume", help="Continue an interrupted run (path or name): only missing cells run.")
@click.option("--accept-new-host-keys", is_flag=True, help="Record unknown SSH host keys in known_hosts (never silently).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def series(inventory, config_file, runs_dir, resume, accept_new_host_keys, quiet, **options):
    """Ping vs gRPC echo over time: every probe on one schedule, from --client to --server.

    Starts `labkit echo serve --tcp-echo-port 0` on the server host and one
    probe agent on the client host, which at every tick sends an ICMP ping,
    a gRPC echo on a warm channel, one on a new channel (cold, what the 2016
    write-up measured), a raw TCP echo on a warm connection, and optionally a
    TCP connect. Every sample, lost and failed ones included, is a row with
    its UTC send time; raw ping output is kept. Example on the local testbed:

    \b
      labkit series ~/.local/state/labkit/testbeds/labkit/inventory.toml \\
          --client a --server b --duration 1h --interval 1s
    """
    from labkit.experiment_cli import config_values, refuse_options_with_resume, stop_cleanly_on_sigterm
    from labkit.latency_series import SeriesConfig, run_series

    stop_cleanly_on_sigterm()
    if resume:
        refuse_options_with_resume(inventory, config_file, options)
        run = run_series(None, runs_dir=runs_dir, resume=resume, quiet=quiet, accept_new_host_keys=accept_new_host_keys)
    else:
        values = config_values(inventory, config_file, options, section="series", fields=_FILE_KEYS)
        config = SeriesConfig(**values)
        config.validate()  # bad values fail here, before any host is contacted
        run = run_series(config, runs_dir=runs_dir, quiet=quiet, accept_new_host_keys=accept_new_host_keys)
    print_summary(run)


def print_summary(run) -> None:
    """Per probe: samples, failures and the RTT distribution, with the median as a multiple of ping's."""
    from rich.console import Console
    from rich.table import Table

    from labkit.latency_series import summarise

    table_data = summarise(run.samples())
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
    for attempt, ended in sorted(run.manifest.get("server_exits", {}).items()):
        console.print(f"[yellow]the echo server exited during the series (attempt {attempt}, status {ended['status']}); "
                      "the echo probes failed from then on[/yellow]")
    counts = run.row_counts()
    console.print(f"run {run.run_id}: {counts.get('parquet_rows', counts['journal_rows'])} rows, "
                  f"{counts['cells_complete']} cells complete")
    console.print(f"written to {run.path}")

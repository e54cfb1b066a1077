"""`labkit sweep`: the idle-connection experiment from the shell or a TOML experiment file."""

from __future__ import annotations

import click

from labkit.units import choice_list, duration_list, int_list, size_list

CONGESTION_CONTROLS = ("cubic", "bbr", "reno")

# option name (and key of an experiment file) -> SweepConfig field
_FILE_KEYS = {
    "inventory": "inventory", "client": "client", "server": "server", "sizes": "sizes",
    "gaps": "gaps_s", "repeats": "repeats", "background_gap": "background_gaps_s",
    "keepalive_ms": "keepalive_ms", "slow_start_after_idle": "slow_start_after_idle", "cc": "cc",
    "order": "order", "name": "name", "seed": "seed", "warmup": "warmup", "mesh": "mesh", "hosts": "hosts",
    "ping_count": "ping_count", "iperf_seconds": "iperf_seconds", "iperf_rate": "iperf_rate",
    "iperf_port": "iperf_port",
}


@click.command()
@click.argument("inventory", required=False, type=click.Path(dir_okay=False))
@click.option("--client", help="Inventory host that runs the echo client.")
@click.option("--server", help="Inventory host that runs the echo server.")
@click.option("--sizes", type=size_list(0, 64 * 2**20), help="Request sizes in bytes, e.g. 1000,14000,16k,32000.")
@click.option("--gaps", type=duration_list(), help="Idle gaps between calls, e.g. 1s,100ms.")
@click.option("--repeats", type=click.IntRange(1, 100000), help="Calls per size in each cell. [default: 5]")
@click.option("--background-gap", type=duration_list(allow_none=True),
              help="Background 1-byte calls on the same channel every ..., e.g. none,250ms.")
@click.option("--keepalive-ms", type=int_list(1, 3_600_000, allow_none=True),
              help="gRPC keepalive ping interval on the client channel, e.g. none,1000.")
@click.option("--slow-start-after-idle", type=int_list(0, 1, allow_none=True),
              help="net.ipv4.tcp_slow_start_after_idle on both hosts, e.g. 1,0 ('keep' leaves it). Needs root there.")
@click.option("--cc", type=choice_list(CONGESTION_CONTROLS, allow_none=True),
              help="Congestion control on the route between the hosts, e.g. cubic,bbr ('keep' leaves it).")
@click.option("--order", type=click.Choice(["sequential", "shuffled"]), help="Order of cells and calls. [default: sequential]")
@click.option("--name", help="Run name (the run directory is <UTC time>-<name>). [default: sweep]")
@click.option("--seed", type=int, help="Seed for payloads and shuffling. [default: 1]")
@click.option("--warmup", type=click.IntRange(0, 1000), help="Unrecorded calls before each cell's first recorded one. [default: 1]")
@click.option("--mesh", is_flag=True, default=None, help="Run every ordered pair of inventory hosts, disjoint pairs in parallel.")
@click.option("--hosts", help="With --mesh: only these inventory hosts (comma-separated).")
@click.option("--ping-count", type=click.IntRange(1, 10000), help="Pings in each baseline before and after. [default: 10]")
@click.option("--iperf-seconds", type=click.IntRange(1, 3600), help="Length of the iperf3 baseline. [default: 3]")
@click.option("--iperf-rate", help="iperf3 -b rate limit of the baseline (always limited). [default: 50M]")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="TOML experiment file; flags override it.")
@click.option("--runs-dir", type=click.Path(file_okay=False), help="Where runs go. [default: $LABKIT_RUNS or data/runs]")
@click.option("--resume", help="Continue an interrupted run (path or name): only missing cells run.")
@click.option("--accept-new-host-keys", is_flag=True, help="Record unknown SSH host keys in known_hosts (never silently).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def sweep(inventory, config_file, runs_dir, resume, accept_new_host_keys, quiet, **options):
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
    from labkit.experiment_cli import config_values, refuse_options_with_resume, stop_cleanly_on_sigterm
    from labkit.idle_step import SweepConfig, run_sweep

    stop_cleanly_on_sigterm()
    if resume:
        refuse_options_with_resume(inventory, config_file, options)
        run = run_sweep(None, runs_dir=runs_dir, resume=resume, quiet=quiet, accept_new_host_keys=accept_new_host_keys)
    else:
        values = config_values(inventory, config_file, options, section="sweep", fields=_FILE_KEYS)
        if isinstance(values.get("hosts"), str):
            values["hosts"] = [name.strip() for name in values["hosts"].split(",") if name.strip()]
        run = run_sweep(SweepConfig(**values), runs_dir=runs_dir, quiet=quiet, accept_new_host_keys=accept_new_host_keys)
    print_summary(run)


def print_summary(run) -> None:
    """The median RTT per condition and size, as a multiple of the pair's ping RTT."""
    from rich.console import Console
    from rich.table import Table

    from labkit.idle_step import summarise

    baselines = run.manifest.get("baselines", {})
    ping = {pair: values.get("ping_before_0", {}).get("rtt_avg_ms") for pair, values in baselines.items()}
    table_data = summarise(run.samples(), ping)
    conditions = ["src", "dst", "cc", "slow_start_after_idle", "gap_s", "background_gap_s", "keepalive_ms"]
    table = Table(title="median RTT of warm calls, as a multiple of the ping RTT")
    for column in ("pair", "condition", *map(str, sorted(table_data["payload_bytes"].unique()))):
        table.add_column(column, justify="right" if column[0].isdigit() else "left")
    for key, group in table_data.groupby(conditions, dropna=False, sort=False):
        src, dst, cc, ssai, gap, background, keepalive = key
        condition = f"cc={cc if isinstance(cc, str) else 'keep'} ssai={'keep' if ssai != ssai else int(ssai)} gap={gap:g}s"
        if background == background and background is not None:
            condition += f" bg={background:g}s"
        if keepalive == keepalive and keepalive is not None:
            condition += f" ka={int(keepalive)}ms"
        cells = {int(row.payload_bytes): row for row in group.itertuples()}
        values = []
        for size in sorted(table_data["payload_bytes"].unique()):
            row = cells.get(int(size))
            if row is None:
                values.append("—")
            elif "rtt_multiple" in table_data and row.rtt_multiple == row.rtt_multiple:
                values.append(f"{row.rtt_multiple:.2f}×")
            else:
                values.append(f"{row.median_ms:.1f} ms")
        table.add_row(f"{src}→{dst}", condition, *values)
    console = Console()
    console.print(table)
    counts = run.row_counts()
    console.print(f"run {run.run_id}: {counts.get('parquet_rows', counts['journal_rows'])} calls, "
                  f"{counts['cells_complete']} cells complete, {counts['cells_skipped']} skipped")
    console.print(f"written to {run.path}")

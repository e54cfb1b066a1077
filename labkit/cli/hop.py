"""``labkit hop``: the cost of one call through a relay (:mod:`labkit.experiments.hop`) from the shell or a TOML file."""

from __future__ import annotations

import click

from labkit.cli.options import CAPTURE, experiment_options, print_run_footer, run_from_flags
from labkit.limits import (MAX_CONCURRENCY, MAX_GRPC_CHANNELS, MAX_HOP_REPEATS, MAX_LOAD_THREADS, MAX_NATS_WORKERS,
                           MAX_PING_COUNT, MAX_RATE)
from labkit.cli.params import DURATION, choice_list, int_list
from labkit.experiments.hop import TOOLS, VIAS

# option (and experiment-file key) -> HopConfig field, where the names differ
RENAMED = {"duration": "duration_s", "call_timeout": "call_timeout_s"}


@click.command()
@click.option("--load-host", help="Inventory host that runs the load tool (wrk, labkit-go, vegeta or ghz).")
@click.option("--front", help="Inventory host of the front relay (labkit-go front); may be the load host.")
@click.option("--back", help="Inventory host of the back service (labkit-go back).")
@click.option("--nats-host", help="Inventory host of nats-server. [default: the back's host]")
@click.option("--via", type=choice_list(VIAS),
              help="Transports: direct (the load on the back itself), grpc, http2 (h2c), http2-tls, nats. "
                   "[default: direct,grpc,http2,nats]")
@click.option("--tool", type=choice_list(TOOLS),
              help="Closed-loop tools, one or several, e.g. wrk,labkit-go (their cells shuffled together): wrk "
                   "(HTTP/1.1, as published; latencies corrected for coordinated omission), labkit-go (HTTP/1.1, "
                   "--connections connections, every request's own latency kept), vegeta (the same, but fewer "
                   "requests in flight than workers), ghz (gRPC BackService.Get). [default: wrk,labkit-go]")
@click.option("--threads", type=click.IntRange(1, MAX_LOAD_THREADS), help="wrk -t. [default: 2]")
@click.option("--connections", type=click.IntRange(1, MAX_CONCURRENCY),
              help="Requests in flight: wrk -c, labkit-go's connections, vegeta's workers, ghz's concurrency and "
                   "connections. [default: 10]")
@click.option("--duration", type=DURATION, help="Load per cell, whole seconds, e.g. 10s. [default: 10s]")
@click.option("--repeats", type=click.IntRange(1, MAX_HOP_REPEATS), help="Cells per transport, in shuffled order. [default: 5]")
@click.option("--rate", type=int_list(1, MAX_RATE),
              help="Open loop: vegeta at each of these request rates per second, e.g. 500,2000, for the hop's cost at "
                   "light load; alone, or beside the closed loops of --tool in one shuffled run. [default: none]")
@click.option("--grpc-channels", type=click.IntRange(1, MAX_GRPC_CHANNELS), help="gRPC channels from the front to the back. [default: 1]")
@click.option("--nats-workers", type=click.IntRange(1, MAX_NATS_WORKERS),
              help="NATS subscriptions of the back answering at once. [default: 1]")
@click.option("--body-file", type=click.Path(dir_okay=False, exists=True),
              help="The back answers this file (at most 1 MiB). [default: a 257-byte JSON product list]")
@click.option("--call-timeout", type=DURATION, help="Deadline of each relayed call (then 502). [default: 5s]")
@click.option("--name", help="Run name (the run directory is <UTC time>-<name>). [default: hop]")
@click.option("--seed", type=int, help="Seed of the shuffled cell order. [default: 1]")
@click.option("--ping-count", type=click.IntRange(1, MAX_PING_COUNT), help="Pings in the baselines before and after. [default: 10]")
@click.option("--wrk", help="wrk on the load host. [default: wrk on its PATH]")
@click.option("--ghz", help="ghz on the load host. [default: the one `labkit deploy` copied there, else PATH]")
@click.option("--vegeta", help="vegeta on the load host. [default: the one `labkit deploy` copied there, else PATH]")
@CAPTURE
@experiment_options
def hop(**flags):
    """The cost of one service-to-service call: a front relaying to a back over gRPC, HTTP/2 or NATS, vs direct.

    Starts nats-server on the NATS host, `labkit-go back` on the back host and
    `labkit-go front` on the front host, all bound to their data addresses.
    For each transport × load × repeat, in an order shuffled with --seed,
    runs wrk (closed loop, as published), labkit-go's closed loop and, with
    --rate, vegeta (open loop) on the load host against GET /via/<transport>
    on the front, or against the back itself for `direct`. Each cell is one
    row: req/s, latency mean, max and p50/p90/p99, errors, transfer/s, and the
    CPU seconds of the front, the back, nats-server and the load tool. wrk
    corrects its latencies for coordinated omission (its req/s × mean ÷
    connections exceeds 1); labkit-go keeps each request's own. wrk comes from
    Debian (`apt-get install wrk`);
    nats-server, vegeta and labkit-go come with `labkit deploy`. The published
    runs, on the local testbed:

    \b
      labkit hop ~/.local/state/labkit/testbeds/labkit/inventory.toml \\
          --load-host a --front a --back b --via direct,grpc,http2,nats \\
          --threads 2 --connections 10 --duration 10s --repeats 5

    The cost at light load (fixed request rates, well below the closed
    loops' req/s) beside the cost at capacity, in one run:

    \b
      labkit hop INVENTORY --load-host a --front a --back b \\
          --tool wrk,labkit-go --rate 500,2000
    """
    run_from_flags("hop", flags, print_summary, renamed=RENAMED, path_keys=("inventory", "body_file"),
                   check_failures=True)


def print_summary(run) -> None:
    """One line per transport (over its repeats): req/s, latency in ms, errors, CPU µs per request of each process."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    def number(value, digits: int = 2) -> str:
        return "—" if value is None or value != value else f"{value:.{digits}f}" if value < 100 else f"{value:.0f}"

    table = Table(title=f"{run.run_id}: mean over repeats (max: the largest of any repeat)", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    for column in ("via", "n", "req/s", "avg", "p99", "max", "err", "front", "back", "nats"):
        table.add_column(column, justify="left" if column == "via" else "right")
    rows = run.summary()
    for row in rows.itertuples():
        table.add_row(row.series, str(row.repeats), f"{row.rps:.0f}", number(row.latency_mean_ms),
                      number(row.latency_p99_ms), number(row.latency_max_ms), str(int(row.errors)),
                      number(row.front_cpu_us, 1), number(row.back_cpu_us, 1), number(row.nats_cpu_us, 1))
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)  # a pipe or a log file: room for every column, never cut values
    console.print(table)
    console.print("n: repeats, avg/p99/max: latency in ms, err: failed requests over all repeats, front/back/nats: "
                  "CPU µs per successful request of each process", highlight=False)
    for row in rows.itertuples():
        if isinstance(row.error, str) and row.error:
            console.print(f"[yellow]{row.series}: {int(row.errors)} of {int(row.requests)} requests failed; "
                          f"{row.error}[/yellow]", highlight=False)
    print_run_footer(console, run, "cells")

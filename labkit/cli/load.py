"""``labkit load``: the cost of a call under load (:mod:`labkit.experiments.load`) from the shell or a TOML file."""

from __future__ import annotations

import click

from labkit.cli.options import experiment_options, print_run_footer, run_from_flags, stack_options
from labkit.limits import (MAX_CONCURRENCY, MAX_ECHO_PAYLOAD_BYTES, MAX_KEEPALIVE_MS, MAX_LOAD_CONNECTIONS,
                           MAX_PING_COUNT, MAX_STREAM_MESSAGES)
from labkit.cli.params import DURATION, choice_list, int_list, size_list
from labkit.experiments.load import COMPRESSIONS, DESIGNS, GRPC_TOOLS, PAYLOAD_KINDS, RPCS, TRANSPORTS

# option (and experiment-file key) -> LoadConfig field, where the names differ
RENAMED = {"duration": "duration_s", "warmup": "warmup_s", "call_timeout": "call_timeout_s"}


@click.command()
@click.option("--client", help="Inventory host that runs the load tools (ghz, h2load).")
@click.option("--server", help="Inventory host that runs the echo server.")
@click.option("--transports", type=choice_list(TRANSPORTS),
              help="grpc (ghz, 1 connection), grpc-conns (ghz --connections N), http2 (h2load POST /echo). [default: all three]")
@click.option("--concurrency", type=int_list(1, MAX_CONCURRENCY), help="Requests in flight at once, e.g. 1,10,50. [default: 1,10,50]")
@click.option("--payload-bytes", type=size_list(0, MAX_ECHO_PAYLOAD_BYTES), help="Payload per request, e.g. 64,1024. [default: 64,1024]")
@click.option("--connections", type=int_list(1, MAX_LOAD_CONNECTIONS),
              help="Connections for grpc-conns (values above 1; with none, grpc-conns is left out) and http2, "
                   "e.g. 1,4. [default: 1,4]")
@click.option("--keepalive-ms", type=int_list(1, MAX_KEEPALIVE_MS, allow_none=True),
              help="gRPC client keepalive ping interval, e.g. none,10000 (gRPC cells only). [default: none,10000]")
@click.option("--compression", type=choice_list(COMPRESSIONS),
              help="gzip every gRPC request (ghz --enable-compression) or not, e.g. none,gzip. [default: none]")
@click.option("--rpc", type=choice_list(RPCS),
              help="unary Echo calls, or stream: one EchoStream per call sending --stream-messages requests back to "
                   "back (gRPC cells only), e.g. unary,stream. [default: unary]")
@click.option("--payload-kind", type=choice_list(PAYLOAD_KINDS),
              help="random bytes (no compressor shrinks them) or text (JSON-like records gzip shrinks several times "
                   "over), e.g. random,text. [default: random]")
@click.option("--grpc-tool", type=click.Choice(GRPC_TOOLS),
              help="Who makes the gRPC calls: ghz (the published tool; times each call), or labkit-go's own load, "
                   "which times each request message from its own send, inside a stream too, and takes the "
                   "client's side of --grpc-option (codec=vtproto must be at both ends). [default: ghz]")
@click.option("--stream-messages", type=click.IntRange(1, MAX_STREAM_MESSAGES), help="Requests per stream call. [default: 10]")
@click.option("--design", type=click.Choice(DESIGNS),
              help="full: every combination of the knobs; one-at-a-time: the first value of each knob (connections, "
                   "keepalive, compression, rpc, server, each --grpc-option), and each knob changed on its own; "
                   "ladder: the tuning article's cumulative ladder, default then each knob's second value added in "
                   "turn (keepalive, connections, options, compression, server, rpc). [default: full]")
@click.option("--duration", type=DURATION, help="Measured time of each cell, e.g. 10s. [default: 10s]")
@click.option("--warmup", type=DURATION, help="Unmeasured load before each cell's window, e.g. 2s. [default: 2s]")
@click.option("--call-timeout", type=DURATION, help="Deadline of each gRPC call. [default: 20s]")
@click.option("--name", help="Run name (the run directory is <UTC time>-<name>). [default: load]")
@click.option("--seed", type=int, help="Seed of the payload bytes. [default: 1]")
@click.option("--ping-count", type=click.IntRange(1, MAX_PING_COUNT), help="Pings in the baselines before and after. [default: 10]")
@click.option("--ghz", help="ghz on the client host. [default: the one `labkit deploy` copied there, else PATH]")
@click.option("--h2load", help="h2load on the client host. [default: h2load on its PATH]")
@stack_options(clients=())
@experiment_options
def load(**flags):
    """The cost of a call under load: gRPC (ghz) and HTTP/2 (h2load) against one echo server.

    Starts `labkit echo serve --http2-port 0` on the server host and, for every
    cell of transport × concurrency × payload × connections × keepalive ×
    compression × rpc × server stack (or, with --design one-at-a-time, a
    baseline and each knob changed on its own), runs ghz or h2load on the
    client host for warm-up + duration. Each cell is one
    row: req/s, p50/p90/p99/max latency and errors over the measured window,
    and the echo server's CPU seconds. Raw tool outputs are kept in the run's
    raw/. ghz comes with `labkit deploy`; h2load is Debian's nghttp2-client.
    Example on the local testbed:

    \b
      labkit load ~/.local/state/labkit/testbeds/labkit/inventory.toml \\
          --client a --server b --concurrency 1,10,50 --payload-bytes 64,1024 \\
          --duration 10s --warmup 2s

    The tuning article's knobs on the grpc-go server, one at a time:

    \b
      labkit load INVENTORY --client a --server b --server-impl go \\
          --transports grpc,grpc-conns --connections 1,2,4,8 \\
          --keepalive-ms none,10000 --compression none,gzip --rpc unary,stream \\
          --grpc-option static-stream-window+static-conn-window=default,32MiB \\
          --design one-at-a-time

    The article's cumulative ladder (default, + keepalive, + a pool of 4,
    + vtprotobuf, + streaming), every message timed by labkit-go's load:

    \b
      labkit load INVENTORY --client a --server b --server-impl go \\
          --grpc-tool labkit-go --transports grpc,grpc-conns --connections 1,4 \\
          --keepalive-ms none,10000 --grpc-option codec=default,vtproto \\
          --rpc unary,stream --concurrency 50 --design ladder
    """
    run_from_flags("load", flags, print_summary, renamed=RENAMED)


def print_summary(run) -> None:
    """One line per cell (fits an 80-column log): req/s, latency percentiles in ms, errors, the server's CPU."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    def missing(value) -> bool:
        return value is None or value != value

    def ms(value) -> str:
        return "—" if missing(value) else f"{value:.1f}" if value < 100 else f"{value:.0f}"

    table = Table(title=f"{run.run_id}: latency in ms over each measured window", box=box.SIMPLE_HEAD, pad_edge=False)
    rows = run.summary()
    timed = rows["message_p50_ms"].notna().any()  # labkit-go's load timed every message
    for column in ("transport", "c", "n", "ka", "B", "req/s", "p50", "p90", "p99", "max", *(["msg p50"] if timed else []),
                   "err", "cpu"):
        table.add_column(column, justify="left" if column == "transport" else "right")
    for row in rows.itertuples():
        table.add_row(f"{row.transport} {row.calls}".strip(), str(row.concurrency), str(row.connections),
                      "—" if missing(row.keepalive_ms) else str(int(row.keepalive_ms)), str(row.payload_bytes),
                      f"{row.rps:.0f}", ms(row.latency_p50_ms), ms(row.latency_p90_ms), ms(row.latency_p99_ms),
                      ms(row.latency_max_ms), *([ms(row.message_p50_ms)] if timed else []), str(row.errors),
                      "—" if missing(row.server_cpu_util) else f"{row.server_cpu_util:.0%}")
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)  # a pipe or a log file: room for every column, never cut values
    console.print(table)
    console.print("c: concurrency, n: connections, ka: keepalive ms, B: payload bytes, err: failed requests, "
                  "cpu: the echo server's CPU time over the cell's wall time (100% = one core); gz: gzip, "
                  "sN: streams of N messages (req/s and ms per stream)" + (
                      "; msg p50: each message's own median latency, from its send to its answer" if timed else ""),
                  highlight=False)
    omitted = run.manifest.get("omitted_cells") or []
    for line in omitted[:5]:
        console.print(f"left out: {line}", highlight=False, soft_wrap=True)
    if len(omitted) > 5:
        console.print(f"left out: {len(omitted) - 5} more (the manifest's omitted_cells)", highlight=False)
    for row in rows.itertuples():
        if isinstance(row.error, str) and row.error:
            console.print(f"[yellow]{row.transport} c={row.concurrency} conns={row.connections} "
                          f"{row.payload_bytes} B: {row.error}[/yellow]", highlight=False)
    print_run_footer(console, run, "cells")

"""``labkit upload``: chunked upload over gRPC streaming vs HTTP/2 (:mod:`labkit.experiments.upload`)."""

from __future__ import annotations

from pathlib import Path

import click

from labkit.cli.options import CAPTURE, experiment_options, print_run_footer, run_from_flags, stack_options
from labkit.echo.plans import UPLOAD_TRANSPORTS
from labkit.limits import AT_MOST, MAX_MESSAGE_BYTES, MAX_PING_COUNT, MAX_REPEATS, MAX_REQUEST_BYTES, MAX_WARMUP
from labkit.cli.params import BOUNDED_DURATION, SIZE, choice_list, size_list
from labkit.units import format_size

# option (and experiment-file key) -> UploadConfig field, where the names differ
RENAMED = {"timeout": "upload_timeout_s"}


@click.command()
@click.option("--client", help="Inventory host that uploads; the --server host itself: over its loopback, as published.")
@click.option("--server", help="Inventory host that runs the echo server (gRPC and HTTP/2).")
@click.option("--file-size", type=SIZE, help="Bytes of the seeded file generated on the client host, e.g. 16MiB. [default: 16MiB]")
@click.option("--file", "file", type=click.Path(exists=True, dir_okay=False),
              help="Upload this file (from this machine; copied to the client host once) instead.")
@click.option("--chunk-sizes", type=size_list(1, MAX_REQUEST_BYTES),
              help="Chunk sizes, e.g. 16,1KiB,32KiB,2MiB. [default: 2^4 … 2^21, 16 B to 2 MiB]")
@click.option("--repeats", type=click.IntRange(1, MAX_REPEATS), help="Uploads of the whole file per cell. [default: 3]")
@click.option("--tls", type=click.Choice(["both", "on", "off"]), help="With TLS, without, or both. [default: both]")
@click.option("--transports", type=choice_list(UPLOAD_TRANSPORTS),
              help="grpc, http2 or both (comma-separated). [default: grpc,http2]")
@click.option("--max-message-bytes", type=click.IntRange(1, MAX_MESSAGE_BYTES), help="The server's gRPC message bound; larger chunks are "
              "refused before the run starts. [default: 4194304]")
@click.option("--name", help="Run name (the run directory is <UTC time>-<name>). [default: upload]")
@click.option("--seed", type=int, help="Seed of the generated file's bytes. [default: 1]")
@click.option("--warmup", type=click.IntRange(0, MAX_WARMUP), help="Untimed 1-byte uploads on each cell's connection first. [default: 1]")
@click.option("--ping-count", type=click.IntRange(1, MAX_PING_COUNT), help="Pings in each baseline before and after. [default: 10]")
@click.option("--timeout", type=BOUNDED_DURATION, help=f"Deadline of each upload ({AT_MOST}). [default: 600s]")
@stack_options()
@CAPTURE
@experiment_options
def upload(**flags):
    """Upload a file in chunks over gRPC client streaming and over one HTTP/2 POST, with and without TLS.

    Starts `labkit echo serve` (gRPC and HTTP/2 in one process) on the server
    host, puts the file on the client host once, and for every transport × TLS
    × chunk size runs `labkit echo upload-agent` there: one warm connection,
    --repeats uploads of the whole file, each timed from the first byte to the
    server's acknowledgement, with the byte count and SHA-256 checked at both
    ends and the CPU seconds of both processes. Example on the local testbed:

    \b
      labkit testbed up --one-way-delay 5ms --rate none
      labkit upload ~/.local/state/labkit/testbeds/labkit/inventory.toml \\
          --client a --server b --file-size 16MiB --chunk-sizes 1KiB,32KiB,1MiB --repeats 5
    """
    if flags.get("file") and flags.get("file_size") is not None:
        raise click.UsageError("give --file or --file-size, not both")
    run_from_flags("upload", flags, print_summary, renamed=RENAMED, path_keys=("inventory", "file"), adjust=_one_file)


def _one_file(values: dict, options: dict) -> None:
    if options.get("file_size") is not None:
        values.pop("file", None)  # --file-size on the command line overrides a file named in --config
    if values.get("file"):
        values["file"] = str(Path(values["file"]).expanduser().resolve())


def print_summary(run) -> None:
    """Median MB/s per transport and TLS mode (rows) and chunk size (columns)."""
    from rich.console import Console
    from rich.table import Table

    from labkit.analysis import thin_statistics

    table_data = run.summary()
    sizes = sorted(table_data["chunk_bytes"].unique())
    table = Table(title="median MB/s [failed uploads]")
    table.add_column("transport", no_wrap=True)
    for size in sizes:
        table.add_column(format_size(int(size)), justify="right")
    for (transport, tls), group in table_data.groupby(["transport", "tls"], sort=True):
        cells = {int(row.chunk_bytes): row for row in group.itertuples()}
        values = []
        for size in sizes:
            row = cells.get(int(size))
            if row is None:
                values.append("—")
                continue
            text = f"{row.median_mb_per_s:.1f}" if row.uploads else "—"
            values.append(text + (f" [{row.failed}]" if row.failed else ""))
        table.add_row(f"{transport}{'+TLS' if tls else ''}", *values)
    console = Console()
    console.print(table)
    print_run_footer(console, run, "uploads", thin_statistics(table_data["uploads"], {"median": 50}, "uploads"))

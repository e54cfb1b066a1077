"""`labkit upload`: chunked upload over gRPC streaming vs HTTP/2, from the shell or a TOML experiment file."""

from __future__ import annotations

from pathlib import Path

import click

from labkit.units import DURATION, SIZE, choice_list, size_list

# option name -> UploadConfig field
_FILE_KEYS = {
    "inventory": "inventory", "client": "client", "server": "server", "file_size": "file_size", "file": "file",
    "chunk_sizes": "chunk_sizes", "repeats": "repeats", "tls": "tls", "transports": "transports", "name": "name",
    "seed": "seed", "warmup": "warmup", "max_message_bytes": "max_message_bytes", "ping_count": "ping_count",
    "timeout": "upload_timeout_s",
}


CHUNK_SIZES = size_list(1)
TRANSPORT_LIST = choice_list(("grpc", "http2"))


@click.command()
@click.argument("inventory", required=False, type=click.Path(dir_okay=False))
@click.option("--client", help="Inventory host that uploads.")
@click.option("--server", help="Inventory host that runs the echo server (gRPC and HTTP/2).")
@click.option("--file-size", type=SIZE, help="Bytes of the seeded file generated on the client host, e.g. 16MiB. [default: 16MiB]")
@click.option("--file", "file", type=click.Path(exists=True, dir_okay=False),
              help="Upload this file (from this machine; copied to the client host once) instead.")
@click.option("--chunk-sizes", type=CHUNK_SIZES,
              help="Chunk sizes, e.g. 16,1KiB,32KiB,2MiB. [default: 2^4 … 2^21, 16 B to 2 MiB]")
@click.option("--repeats", type=click.IntRange(1, 100000), help="Uploads of the whole file per cell. [default: 3]")
@click.option("--tls", type=click.Choice(["both", "on", "off"]), help="With TLS, without, or both. [default: both]")
@click.option("--transports", type=TRANSPORT_LIST, help="grpc, http2 or both (comma-separated). [default: grpc,http2]")
@click.option("--max-message-bytes", type=click.IntRange(1), help="The server's gRPC message bound; larger chunks are "
              "refused before the run starts. [default: 4194304]")
@click.option("--name", help="Run name (the run directory is <UTC time>-<name>). [default: upload]")
@click.option("--seed", type=int, help="Seed of the generated file's bytes. [default: 1]")
@click.option("--warmup", type=click.IntRange(0, 1000), help="Untimed 1-byte uploads on each cell's connection first. [default: 1]")
@click.option("--ping-count", type=click.IntRange(1, 10000), help="Pings in each baseline before and after. [default: 10]")
@click.option("--timeout", type=DURATION, help="Deadline of each upload. [default: 600s]")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="TOML experiment file; flags override it.")
@click.option("--runs-dir", type=click.Path(file_okay=False), help="Where runs go. [default: $LABKIT_RUNS or data/runs]")
@click.option("--resume", help="Continue an interrupted run (path or name): only missing cells run.")
@click.option("--accept-new-host-keys", is_flag=True, help="Record unknown SSH host keys in known_hosts (never silently).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def upload(inventory, config_file, runs_dir, resume, accept_new_host_keys, quiet, **options):
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
    from labkit.experiment_cli import config_values, refuse_options_with_resume, stop_cleanly_on_sigterm
    from labkit.chunked_upload import UploadConfig, run_upload

    stop_cleanly_on_sigterm()
    if resume:
        refuse_options_with_resume(inventory, config_file, options)
        run = run_upload(None, runs_dir=runs_dir, resume=resume, quiet=quiet, accept_new_host_keys=accept_new_host_keys)
    else:
        if options.get("file") and options.get("file_size") is not None:
            raise click.UsageError("give --file or --file-size, not both")
        values = config_values(inventory, config_file, options, section="upload", fields=_FILE_KEYS, path_keys=("inventory", "file"))
        if options.get("file_size") is not None:
            values.pop("file", None)  # --file-size on the command line overrides a file named in --config
        if values.get("file"):
            values["file"] = str(Path(values["file"]).expanduser().resolve())
        run = run_upload(UploadConfig(**values), runs_dir=runs_dir, quiet=quiet, accept_new_host_keys=accept_new_host_keys)
    print_summary(run)


def print_summary(run) -> None:
    """Median MB/s per transport and TLS mode (rows) and chunk size (columns)."""
    from rich.console import Console
    from rich.table import Table

    from labkit.chunked_upload import summarise

    table_data = summarise(run.samples())
    sizes = sorted(table_data["chunk_bytes"].unique())
    table = Table(title="median MB/s [failed uploads]")
    table.add_column("transport", no_wrap=True)
    for size in sizes:
        table.add_column(_human(int(size)), justify="right")
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
    counts = run.row_counts()
    console.print(f"run {run.run_id}: {counts.get('parquet_rows', counts['journal_rows'])} uploads, "
                  f"{counts['cells_complete']} cells complete")
    console.print(f"written to {run.path}")


def _human(size: int) -> str:
    for unit, factor in (("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"

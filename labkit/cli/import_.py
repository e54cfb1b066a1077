"""``labkit import KIND FILE... [KIND FILE...]... --out NAME``."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import click

from labkit.cli.options import stop_cleanly_on_sigterm
from labkit.errors import LabkitError
from labkit.importers.core import import_files
from labkit.importers.kinds import KINDS

_KIND_HELP = "\n".join(f"  {name:<10} {kind.description}" for name, kind in KINDS.items())


def split_specs(tokens: tuple[str, ...]) -> list[tuple[str, str]]:
    """``ping a b go-echo c`` -> ``[(ping, a), (ping, b), (go-echo, c)]``: a kind name starts a new group."""
    specs: list[tuple[str, str]] = []
    kind: str | None = None
    files_of_kind = 0
    for token in tokens:
        if token in KINDS:
            if Path(token).exists():
                raise click.UsageError(f"{token!r} is both a kind and a file here; write the file as ./{token}")
            if kind is not None and files_of_kind == 0:
                raise click.UsageError(f"no FILE given after {kind}")
            kind, files_of_kind = token, 0
            continue
        if kind is None:
            raise click.UsageError(f"expected a KIND before {token!r} (one of {', '.join(KINDS)})")
        specs.append((kind, token))
        files_of_kind += 1
    if kind is None:
        raise click.UsageError(f"give a KIND ({', '.join(KINDS)}) and at least one FILE")
    if files_of_kind == 0:
        raise click.UsageError(f"no FILE given after {kind}")
    return specs


@click.command(
    "import",
    epilog=f"""\b
KIND is one of:
{_KIND_HELP}

\b
Examples:
  labkit import ping ping.txt --out home-to-lab
  labkit import ping ping.txt.gz go-echo echo.txt.gz --out orca-2016 --tz America/New_York
  labkit import go-echo echo2.txt --out orca-2016 --append
""",
)
@click.argument("specs", nargs=-1, required=True, metavar="KIND FILE... [KIND FILE...]...")
@click.option("--out", "out", required=True, metavar="NAME",
              help="Name of the new run; with --append, the run to add to (a path, run id or unique part of one).")
@click.option("--runs-dir", type=click.Path(file_okay=False), help="Where runs live. [default: $LABKIT_RUNS or data/runs]")
@click.option("--append", is_flag=True, help="Add the files to the existing run --out instead of making a new run.")
@click.option("--tz", metavar="ZONE",
              help="Time zone of the local times in Go logs (go-echo, idle-step), e.g. America/New_York. [default: UTC, recorded as assumed]")
@click.option("--src", metavar="HOST", help="The host that sent the probes, when the logs do not say. [default: unknown]")
@click.option("--dst", metavar="HOST", help="The host probed, overriding what the logs say.")
def import_logs(specs, out, runs_dir, append, tz, src, dst):
    """Import logs collected elsewhere into a labkit run, one cell per FILE.

    Files may be gzip-compressed. Each file's lines are counted as parsed or
    unrecognised and printed; lost probes become ok=false rows, duplicates are
    kept and flagged; the file is copied into the run's raw/ and the manifest
    records its path, sha256 and size. Importing ping and go-echo logs into
    one run makes a ping-vs-echo run (`labkit report` then runs its notebook).
    """
    stop_cleanly_on_sigterm()  # SIGTERM stops an import as Ctrl-C does: its spool removed, exit status 143
    pairs = split_specs(specs)
    if tz is not None:
        _check_zone(tz)
    try:
        with _progress() as progress:
            result = import_files(pairs, out=out, runs_dir=runs_dir, append=append, tz=tz, src=src, dst=dst,
                                  log=click.echo, progress=progress)
    except LabkitError:
        raise
    except OSError as exc:
        raise LabkitError(f"import failed: {exc}") from None
    counts = result.run.row_counts()
    click.echo(
        f"run {result.run.run_id}: experiment {result.experiment}, {len(result.cells)} file(s) imported, "
        f"{counts.get('parquet_rows', 0)} rows in {result.parquet}"
    )


@contextmanager
def _progress():
    """On a terminal, a bar per file as it is read (a large log takes a while); elsewhere nothing, as the count
    lines say what was read."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  console=console, transient=True) as bar:
        tasks: dict[Path, Any] = {}

        def progress(path: Path, done: int) -> None:
            if path not in tasks:
                tasks[path] = bar.add_task(f"reading {path.name}", total=path.stat().st_size)
            bar.update(tasks[path], completed=done)

        yield progress


def _check_zone(tz: str) -> None:
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise click.BadParameter(f"unknown time zone {tz!r} (use an IANA name such as UTC or Europe/Paris)", param_hint="--tz") from None

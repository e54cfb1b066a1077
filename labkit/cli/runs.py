"""`labkit runs list | show | cleanup | query`: the runs in the run store."""

from __future__ import annotations

import sys

import click

from labkit.catalog import MAX_RESULT_ROWS, QUERY_MEMORY_GIB, QUERY_TIMEOUT_S, query as run_query
from labkit.cleanup import clean_up, needs_cleanup
from labkit.cli.params import duration_at_most
from labkit.experiments import spec_for_experiment
from labkit.hosts.claims import controller_alive
from labkit.hosts.kernel import ManifestRefused
from labkit.store import find_run, list_runs, runs_root
from labkit.testbed.emulator import late_messages

RUNS_DIR = click.option("--runs-dir", type=click.Path(file_okay=False), help="Where runs live. [default: $LABKIT_RUNS or data/runs]")


@click.group()
def runs():
    """List and inspect runs, and clean up after one that was killed."""


@runs.command("list")
@RUNS_DIR
def list_(runs_dir):
    """One line per run: id, experiment, status, start time, rows."""
    from rich.console import Console
    from rich.table import Table

    found = list_runs(runs_dir)
    if not found:
        click.echo(f"no runs in {runs_root(runs_dir)}")
        return
    table = Table()
    for column in ("run", "experiment", "status", "started (UTC)", "rows"):
        table.add_column(column)
    for run in found:
        counts = run.row_counts()
        table.add_row(run.run_id, run.manifest.get("experiment", "?"), run.status, run.manifest.get("started_utc", "?")[:19],
                      str(counts.get("parquet_rows", counts["journal_rows"])))
    Console().print(table)


@runs.command()
@click.argument("run")
@RUNS_DIR
def show(run, runs_dir):
    """Manifest summary and row counts of RUN (a path, a run id, or a unique part of one)."""
    from rich.console import Console

    found = find_run(run, runs_dir)
    manifest = found.manifest
    console = Console()
    console.print(f"[bold]{found.run_id}[/bold]  ({found.path})")
    console.print(f"experiment {manifest.get('experiment')}, status {manifest['status']}, format {manifest['format_version']}")
    console.print(f"started {manifest.get('started_utc')}, ended {manifest.get('ended_utc')}, resumed {len(manifest.get('resumed_utc', []))}×")
    provenance = manifest.get("provenance", {})
    git = provenance.get("git", {})
    console.print(f"labkit {provenance.get('labkit_version')}, git {git.get('commit')}{' (dirty)' if git.get('dirty') else ''}")
    for name, facts in manifest.get("hosts", {}).items():
        route = facts.get("route_to_peer") or {}
        sysctl = facts.get("sysctl", {})
        console.print(
            f"host {name}: kernel {facts.get('kernel')}, cc {sysctl.get('net.ipv4.tcp_congestion_control')} "
            f"(route: {route.get('congctl') or 'default'}), slow_start_after_idle "
            f"{sysctl.get('net.ipv4.tcp_slow_start_after_idle')}, MTU {route.get('mtu') or facts.get('interface_mtu')}"
        )
    for key, value in found.row_counts().items():
        console.print(f"{key}: {value}")
    _print_emulator(console, manifest)
    leftovers = found.processes()
    if leftovers:
        console.print(f"[yellow]{len(leftovers)} process(es) may still run on hosts; `labkit runs cleanup {found.run_id}`[/yellow]")


def _print_emulator(console, manifest: dict) -> None:
    """The testbed's link emulator during the run: per direction, drops by cause and lateness; warnings."""
    for window in (manifest.get("emulator") or {}).get("windows", []):
        for key, d in sorted(window["directions"].items()):
            drops = ", ".join(f"{n} {cause}" for cause, n in d["drops"].items() if n) or "no drops"
            console.print(f"emulator {key.replace('>', '->')}: {d['in']} packets in, {d['out']} out, {drops}; late "
                          f"p50 {d['lateness_p50_us']} µs, p99 {d['lateness_p99_us']} µs, max {d['max_us']:.0f} µs")
        for event in window.get("events", []):
            console.print(f"emulator {event['direction'].replace('>', '->')}: {event['label']}")
    for message in late_messages(manifest):
        console.print(f"[yellow]warning: {message}[/yellow]")


def resume_hint(run) -> str:
    """How to continue ``run``: the --resume of its own experiment's command (imports cannot be resumed)."""
    spec = spec_for_experiment(run.manifest.get("experiment"))
    if spec is None:
        return f"a {run.manifest.get('experiment')!r} run cannot be resumed"
    return f"continue it with `{spec.resume_command(run.run_id)}`"


@runs.command()
@click.argument("run", required=False)
@RUNS_DIR
@click.option("--accept-new-host-keys", is_flag=True, help="Record unknown SSH host keys in known_hosts.")
@click.option("--force", is_flag=True, help="Also clean up runs made on another machine (a run directory copied "
                                            "here): their hosts' processes and kernel settings are changed from here.")
def cleanup(run, runs_dir, accept_new_host_keys, force):
    """After a run was killed (SIGKILL, power loss): stop the processes it left on its hosts, keep its
    --capture files, and restore the kernel settings it changed. Without RUN, every run that needs it.

    Only what labkit itself records is acted on: a run made on another machine needs --force, and a run whose
    manifest holds anything else (a host not in its inventory, a value outside its knob's domain, a route
    labkit does not write, a process labkit does not start) is refused in one line, with nothing changed; so is a
    run whose knob is now neither as the run set it nor as it was before the run (someone else changed it since).
    Without RUN, a run still being measured, or made on another machine (without --force), is left alone.
    """
    candidates = [find_run(run, runs_dir)] if run else [r for r in list_runs(runs_dir) if needs_cleanup(r)]
    if not run:
        candidates = [found for found in candidates if _ours_to_clean(found, force)]
    if not candidates:
        click.echo("nothing to clean up")
        return
    refused = 0
    for found in candidates:
        try:
            clean_up(found, accept_new_host_keys, force, say=click.echo)
            if found.status == "running":
                found.set_status("interrupted")
                click.echo(f"{found.run_id}: marked interrupted; {resume_hint(found)}")
        except ManifestRefused as exc:  # the next run may be sound: it is cleaned up still
            refused += 1
            click.echo(f"labkit: error: {found.run_id}: refused {exc.message}; nothing of this run was changed", err=True)
    if refused:
        sys.exit(2)


def _ours_to_clean(run, force: bool) -> bool:
    """Whether `runs cleanup` without a run names ``run``: one this machine made (or any, with --force) whose
    controller is gone; the others are named, and left alone."""
    if controller_alive(run.manifest):
        click.echo(f"{run.run_id}: left alone: still being measured by pid {run.manifest['controller']['pid']}")
        return False
    if not force and not run.made_here():
        click.echo(f"{run.run_id}: left alone: made on another machine (name it, with --force, to clean it up here)")
        return False
    return True


#: The longest --timeout of a query.
MAX_QUERY_TIMEOUT_S = 3600.0


@runs.command()
@click.argument("sql")
@RUNS_DIR
@click.option("--csv", "as_csv", is_flag=True, help="Print the result as CSV (for a pipe or a file), not a table.")
@click.option("--timeout", "timeout_s", type=duration_at_most(MAX_QUERY_TIMEOUT_S), default=f"{QUERY_TIMEOUT_S:g}s",
              show_default=True, help="Stop the query after this long (at most 1h).")
def query(sql, runs_dir, as_csv, timeout_s):
    """Answer SQL over every run in the runs directory, through DuckDB.

    Three views, joined on run_id: `runs` (one row per run: run_id, name, experiment, status, started_utc,
    ended_utc, labkit_version, git_commit, git_dirty, replicate_group, replicate_index, link, kernel, cc,
    slow_start_after_idle, grpcio, grpc_go, go, path, and the manifest as JSON text), `facts` (run_id, what, value:
    each setting and version `labkit compare` diffs) and `samples` (every finished run's rows, columns united by
    name). For example, the warm gRPC echo's median per labkit version over the last 30 days:

      labkit runs query "select r.labkit_version, count(*) n, median(s.rtt_ms) from samples s join runs r
      using (run_id) where s.probe = 'echo-warm' and r.started_utc > now() - interval 30 day group by 1"

    The query only reads, within limits: one SELECT statement (no COPY, ATTACH, SET...); DuckDB reads no file
    outside the runs directory, uses at most {memory} GiB of memory, stops at --timeout, and answers at most {rows:,}
    rows. A run directory whose files are not what labkit writes is left out, named on stderr.
    """
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    if timeout_s <= 0:
        raise click.BadParameter("must be longer than 0", param_hint="--timeout")
    result = run_query(sql, runs_dir, timeout_s)
    if as_csv:
        click.echo(result.to_csv(index=False), nl=False)
        return
    table = Table()
    for column in result.columns:
        table.add_column(escape(str(column)), justify="right" if result[column].dtype.kind in "iuf" else "left")
    for row in result.itertuples(index=False):
        table.add_row(*(escape(_cell_text(value)) for value in row))
    Console().print(table)
    click.echo(f"{len(result)} row{'s' if len(result) != 1 else ''}")


query.help = query.help.format(  # the limits as catalog.py sets them
    memory=QUERY_MEMORY_GIB, rows=MAX_RESULT_ROWS)


def _cell_text(value) -> str:
    """A query result's value as the table shows it: SQL's NULL (pandas' None or NaN) as NULL, floats short."""
    if value is None or (isinstance(value, float) and value != value):
        return "NULL"
    return f"{value:.6g}" if isinstance(value, float) else str(value)

"""What every experiment command shares: INVENTORY, a TOML experiment file, flags over it, --resume, SIGTERM.

An experiment command (``labkit/cli/<command>.py``) declares its own options
and decorates itself with :func:`experiment_options`; its body is one call to
:func:`run_from_flags`, then it renders the run's summary.

An experiment file holds the same settings as the command's flags, as a
``[<command>]`` table or at the top level; lists may be TOML arrays or comma
strings, and each value is checked by the very click type of its flag, so a
file and a command line accept and refuse the same things. Flags given on the
command line override the file; paths in the file are relative to the file.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Callable

import click

from labkit.cli.params import choice_list
from labkit.errors import LabkitError
from labkit.files import parse_toml, read_text_file

#: The options every experiment command takes besides its own, in the order --help lists them.
COMMON = ("inventory", "config_file", "runs_dir", "resume", "accept_new_host_keys", "quiet", "runs", "share_hosts")


def experiment_options(command):
    """Add INVENTORY, --config, --runs-dir, --resume, --runs, --accept-new-host-keys, --quiet and --share-hosts to an
    experiment command."""
    decorators = [
        click.argument("inventory", required=False, type=click.Path(dir_okay=False)),
        click.option("--config", "config_file", type=click.Path(dir_okay=False),
                     help="TOML experiment file; flags override it."),
        click.option("--runs-dir", type=click.Path(file_okay=False),
                     help="Where runs go. [default: $LABKIT_RUNS or data/runs]"),
        click.option("--resume", help="Continue an interrupted run (path or name): only missing cells run."),
        click.option("--runs", type=click.IntRange(1, 100), default=1, show_default=True,
                     help="Independent runs of the whole matrix, one after another, each a run of its own (fresh "
                          "servers and connections, the seed advanced by one): between-run variation, which one "
                          "run cannot show. Grouped in their manifests (replicate)."),
        click.option("--accept-new-host-keys", is_flag=True,
                     help="Record unknown SSH host keys in known_hosts (never silently)."),
        click.option("--quiet", is_flag=True, help="No progress bar."),
        click.option("--share-hosts", is_flag=True,
                     help="Run even while another run measures on the same hosts (each then measures the other's "
                          "traffic too); without it such a run is refused, naming the other."),
    ]
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


#: --capture: sweep, series and upload (whose calls `labkit explain` decomposes) and hop (its packets, for reading).
CAPTURE = click.option(
    "--capture", is_flag=True, default=None,
    help="Record the experiment's packets (tcpdump, headers only, on the client and server hosts, as root or through "
         "become = \"sudo\") into the run's raw/, for `labkit explain`.")


def run_from_flags(command: str, flags: dict, show: Callable, *, renamed: dict[str, str] | None = None,
                   path_keys: tuple[str, ...] = ("inventory",), adjust: Callable[[dict, dict], None] | None = None,
                   check_failures: bool = False):
    """Run (or resume) experiment ``command`` from its command line, and ``show`` each run it makes (--runs).

    ``check_failures``: a cell in which most requests failed is a warning on stderr and exit status 1
    (:func:`warn_of_failed_cells`).

    ``flags`` are the click callback's keyword arguments; ``renamed`` maps an
    option (or experiment-file key) to its config field where the names
    differ (``gaps`` -> ``gaps_s``); ``adjust(values, options)`` may fix up
    the merged values before the config is built.
    """
    # Not at the top: `labkit echo`, the agents' command on every host, imports this module for
    # stop_cleanly_on_sigterm and needs none of the experiments, which would add 30 ms to each agent's start.
    from labkit.experiments import run_command, run_replicates, spec
    from labkit.results import Run

    stop_cleanly_on_sigterm()
    common = {key: flags[key] for key in COMMON}
    options = {key: value for key, value in flags.items() if key not in COMMON}
    run_options = dict(runs_dir=common["runs_dir"], quiet=common["quiet"],
                       accept_new_host_keys=common["accept_new_host_keys"], share_hosts=common["share_hosts"])
    if common["resume"]:
        refuse_options_with_resume(common["inventory"], common["config_file"], {**options, "runs": common["runs"]}
                                   if common["runs"] != 1 else options)
        run = Run.of(run_command(command, resume=common["resume"], **run_options))
        show(run)
        if check_failures and warn_of_failed_cells(run):
            sys.exit(1)
        return
    fields = {option: (renamed or {}).get(option, option) for option in options}
    fields["inventory"] = "inventory"
    values = config_values(common["inventory"], common["config_file"], options, section=command, fields=fields,
                           path_keys=path_keys)
    if adjust is not None:
        adjust(values, options)
    config = spec(command).config_type(**values)
    config.validate()  # bad values fail here, before any host is contacted
    mostly_failed = False
    for run in map(Run.of, run_replicates(command, config, common["runs"], **run_options)):
        show(run)
        mostly_failed |= check_failures and warn_of_failed_cells(run)
    if mostly_failed:
        sys.exit(1)


def warn_of_failed_cells(run) -> bool:
    """One warning line on stderr for each cell of ``run`` in which most requests failed (a server killed, a path
    down): the rows record it, but a summary on stdout is easy to miss and exit status 0 says all went well.
    True when there was one, and the command then exits 1 (see labkit.analysis.tables.MOSTLY_FAILED_SHARE)."""
    from labkit.analysis.tables import failures_by_cell

    table = failures_by_cell(run.samples())
    for row in table[table["mostly_failed"]].itertuples():
        click.echo(f"labkit: warning: run {run.run_id} cell {row.cell_id}: {row.failed:,} of {row.requests:,} "
                   "requests failed", err=True)
    return bool(table["mostly_failed"].any())


def _given(value) -> bool:
    """Whether a flag was given: not None, and for a repeatable flag not empty."""
    return value is not None and value != ()


def stack_options(clients: tuple[str, ...] = ("python", "go"), swept: bool = True):
    """The gRPC stack (labkit.experiments.stacks): --client-impl (when the experiment's client is labkit's own, in
    ``clients``), --server-impl and the repeatable --grpc-option; ``swept``: several values are several cells."""
    noun, how = ("implementation(s)", ", swept") if swept else ("implementation", ", one")
    values = ("each value its own cells, e.g. static-stream-window=default,32MiB (default: unset); KEY+KEY=V sets "
              "several keys as one knob" if swept
              else "one value, e.g. max-concurrent-streams=16")

    def decorate(command):
        decorators = [
            click.option("--server-impl", type=choice_list(("python", "go")),
                         help=f"gRPC {noun} of the echo server{how}: python (grpcio), go (grpc-go, labkit-go). "
                              "[default: python]"),
            click.option("--grpc-option", multiple=True, metavar="KEY=V[,V...]",
                         help=f"A gRPC knob by grpc-go's name, {values} (repeatable). A Python side is left "
                              "out where grpcio has no equivalent."),
        ]
        if clients:
            decorators.insert(0, click.option(
                "--client-impl", type=choice_list(clients),
                help=f"gRPC {noun} of the client{how}: {', '.join(clients)}. [default: python]"))
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return decorate


def print_run_footer(console, run, unit: str, thin: list[str] = ()) -> None:
    """The last lines of every experiment's summary: the statistics that rest on too few samples (``thin``, from
    labkit.analysis.thin_statistics), any echo server that died (and was restarted), rows and cells of the run, and
    where it was written."""
    for line in thin:
        console.print(f"[yellow]warning: {line}[/yellow]", highlight=False)
    for ended in run.manifest.get("server_exits", []):
        console.print(f"[yellow]the echo server on {ended['host']} (pid {ended['pid']}) exited with status "
                      f"{ended['status']} during {ended['during']}: restarted, and what it spoiled redone[/yellow]",
                      highlight=False)
    counts = run.row_counts()
    skipped = f", {counts['cells_skipped']} skipped" if counts["cells_skipped"] else ""
    console.print(f"run {run.run_id}: {counts.get('parquet_rows', counts['journal_rows'])} {unit}, "
                  f"{counts['cells_complete']} cells complete{skipped}")
    console.print(f"written to {run.path}", highlight=False, soft_wrap=True)


#: Set once SIGTERM arrived: the run stops as on Ctrl-C, but labkit then exits 143 (128 + SIGTERM), not 130.
_TERMINATED: list[bool] = []


def stop_cleanly_on_sigterm() -> None:
    """Make SIGTERM stop an experiment like Ctrl-C: processes stopped, settings restored, run marked interrupted."""
    signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signum, frame) -> None:
    _TERMINATED.append(True)
    raise KeyboardInterrupt


def interrupted_exit_status() -> int:
    """The shell's convention for a command a signal stopped: 128 + the signal, 143 for SIGTERM, 130 for SIGINT."""
    return 128 + (signal.SIGTERM if _TERMINATED else signal.SIGINT)


def read_experiment_file(path: str, *, section: str, fields: dict[str, str], path_keys=("inventory",)) -> dict:
    """Config fields from an experiment file.

    ``fields`` maps flag names (``gaps``) to config fields (``gaps_s``);
    ``path_keys`` are the flags whose values are paths.
    """
    data = read_toml(path, "experiment file")
    data = {key.replace("-", "_"): value for key, value in data.get(section, data).items()}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise LabkitError(f"{path}: unknown keys {', '.join(unknown)} (known: {', '.join(sorted(fields))})")
    for key in path_keys:
        # Paths in the file are relative to the file, not to the shell's directory.
        if isinstance(data.get(key), str) and not Path(data[key]).expanduser().is_absolute():
            data[key] = str((Path(path).parent / data[key]).resolve())
    options = {param.name: param for param in click.get_current_context().command.params}
    values = {}
    for key, value in data.items():
        param = options.get(key)
        if param is not None and param.multiple:
            # A repeatable flag: one item per list entry (an item may hold commas, e.g. KEY=V1,V2).
            value = [str(item) for item in (value if isinstance(value, list) else [value])]
        elif param is not None and not isinstance(value, bool):
            text = ",".join(str(item) for item in value) if isinstance(value, list) else str(value)
            try:
                value = param.type.convert(text, param, None)
            except click.BadParameter as exc:
                raise LabkitError(f"{path}: {key}: {exc.message}") from None
        values[fields[key]] = value
    return values


def read_toml(path: str, what: str) -> dict:
    """A TOML file a user gave (an experiment file): its table, or one line saying what is wrong with it."""
    return parse_toml(read_text_file(path, what), f"{what} {path}")


def config_values(inventory: str | None, config_file: str | None, options: dict, *, section: str,
                  fields: dict[str, str], path_keys=("inventory",)) -> dict:
    """The settings of a new run: the experiment file, then INVENTORY, then the flags given."""
    values = read_experiment_file(config_file, section=section, fields=fields, path_keys=path_keys) if config_file else {}
    if inventory:
        values["inventory"] = inventory
    for option, value in options.items():
        if _given(value):
            values[fields[option]] = list(value) if isinstance(value, tuple) else value
    if "inventory" not in values:
        raise click.UsageError("give an INVENTORY (or `inventory = ...` in --config)")
    if not Path(values["inventory"]).is_file():
        raise LabkitError(f"inventory {values['inventory']} does not exist")
    return values


def refuse_options_with_resume(inventory: str | None, config_file: str | None, options: dict) -> None:
    """--resume continues with the run's recorded settings; other settings would contradict them."""
    given = [f"--{key.replace('_', '-')}" for key, value in options.items() if _given(value)]
    given += ["INVENTORY"] if inventory else []
    given += ["--config"] if config_file else []
    if given:
        raise click.UsageError(f"--resume takes the run's own configuration; drop {', '.join(given)}")

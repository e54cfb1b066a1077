"""The experiments labkit runs, one module per command: ``labkit/experiments/<command>.py``.

Each module declares a ``SPEC`` (:class:`labkit.experiments.base.ExperimentSpec`):
its config, cells, executor, schema, summary and notebook;
:func:`labkit.experiments.base.run_experiment` runs any of them, and
``labkit.sweep()`` / ``series()`` / ``upload()`` / ``load()`` / ``hop()`` and the CLI
commands of the same names come from it. Modules are imported on first use,
so ``import labkit`` stays fast.
"""

from __future__ import annotations

import dataclasses

from labkit.experiments.registry import COMMANDS, spec, spec_for_experiment  # noqa: F401 (the package's names)
from labkit.store import find_resumable


def run_command(command: str, inventory=None, *, config=None, runs_dir=None, resume: str | None = None,
                quiet: bool = False, accept_new_host_keys: bool = False, share_hosts: bool = False, **options):
    """Run experiment ``command`` with ``options`` (its config's fields), or resume a run of it; return the run.

    ``resume`` is a run (path, id or unique part of one) to finish, or ``"auto"``: finish the newest interrupted or
    failed run of this very config if there is one, else start a new run; so a notebook cell run again after an
    interrupt picks up where it stopped.
    """
    # Not at the top: this package loads before any module in it, and base imports cleanup, which imports
    # experiments.capture: base loading with the package would go round.
    from labkit.experiments.base import run_experiment

    found = spec(command)
    if config is None and (not resume or resume == "auto"):
        config = found.config_type(inventory=str(inventory), **options)
    if resume == "auto":
        resume = _resumable(found, config, runs_dir, quiet)
        config = None if resume else config
    return run_experiment(found, config, runs_dir=runs_dir, resume=resume, quiet=quiet,
                          accept_new_host_keys=accept_new_host_keys, share_hosts=share_hosts)


def run_replicates(command: str, config, runs: int, *, runs_dir=None, quiet: bool = False,
                   accept_new_host_keys: bool = False, share_hosts: bool = False):
    """Run experiment ``command`` ``runs`` times, each an independent run of the whole cell matrix, yielding each run
    as it completes.

    Each replicate is a run of its own (fresh servers and connections, its own manifest and --resume) with the
    config's ``seed`` advanced by its index, so a shuffled order differs between replicates; its manifest's
    ``replicate`` is ``{"group": <the first replicate's run id>, "index": k, "of": runs}``, and
    :meth:`labkit.store.Run.replicates` finds the group again. Between-run variation (a connection's history, the
    moment on the path) is what one run cannot show, and what :func:`labkit.analysis.between_runs` measures.
    """
    from labkit.experiments.base import run_experiment  # not at the top: see run_command

    found, group = spec(command), None
    for index in range(1, runs + 1):
        replicate = dataclasses.replace(config, seed=config.seed + index - 1) if hasattr(config, "seed") else config
        run = run_experiment(found, replicate, runs_dir=runs_dir, quiet=quiet, accept_new_host_keys=accept_new_host_keys,
                             share_hosts=share_hosts, replicate={"group": group, "index": index, "of": runs} if runs > 1 else None)
        group = group or run.run_id
        yield run


def _resumable(found, config, runs_dir, quiet: bool) -> str | None:
    """The path of the newest unfinished run of ``config`` (see :func:`run_command`'s ``resume="auto"``), or None."""
    config.validate()  # a bad value is refused as it would be for a new run, before any run is looked at
    earlier = find_resumable(found.experiment, dataclasses.asdict(config), runs_dir)
    if earlier is None:
        return None
    if not quiet:
        done = earlier.row_counts()["cells_complete"]
        # stdout: in a notebook stderr reads as an error, and this is what the user asked for.
        print(f"resuming {earlier.run_id} ({earlier.status}, {done} cells complete)")
    return str(earlier.path)

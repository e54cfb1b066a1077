"""The experiments labkit runs, one module per command: ``labkit/experiments/<command>.py``.

Each module declares a ``SPEC`` (:class:`labkit.experiments.base.ExperimentSpec`):
its config, cells, executor, schema, summary and notebook;
:func:`labkit.experiments.base.run_experiment` runs any of them, and
``labkit.sweep()`` / ``series()`` / ``upload()`` / ``load()`` / ``hop()`` and the CLI
commands of the same names come from it. Modules are imported on first use,
so ``import labkit`` stays fast.
"""

from __future__ import annotations

import importlib

#: command -> the module that declares its SPEC.
COMMANDS = {
    "sweep": "labkit.experiments.sweep",
    "series": "labkit.experiments.series",
    "upload": "labkit.experiments.upload",
    "load": "labkit.experiments.load",
    "hop": "labkit.experiments.hop",
}


def spec(command: str):
    """The :class:`ExperimentSpec` of an experiment command."""
    return importlib.import_module(COMMANDS[command]).SPEC


def spec_for_experiment(experiment: str | None):
    """The spec whose runs have ``experiment`` as their manifest's experiment id (e.g. "idle-step"), or None."""
    for command in COMMANDS:
        found = spec(command)
        if found.experiment == experiment:
            return found
    return None


def run_command(command: str, inventory=None, *, config=None, runs_dir=None, resume: str | None = None,
                quiet: bool = False, accept_new_host_keys: bool = False, **options):
    """Run experiment ``command`` with ``options`` (its config's fields), or resume a run of it; return the run."""
    from labkit.experiments.base import run_experiment

    found = spec(command)
    if config is None and not resume:
        config = found.config_type(inventory=str(inventory), **options)
    return run_experiment(found, config, runs_dir=runs_dir, resume=resume, quiet=quiet,
                          accept_new_host_keys=accept_new_host_keys)

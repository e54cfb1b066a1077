"""Which module declares each experiment command's SPEC, found by command or by the experiment id its runs record.

A module of its own, under both :mod:`labkit.experiments` (which runs a command by name) and
:mod:`labkit.experiments.base` (whose runner names the command that resumes its run). The modules are imported on
first use, so ``import labkit`` stays fast.
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
    "latency-under-load": "labkit.experiments.latency_under_load",
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

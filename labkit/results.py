"""A run as labkit hands it out: the store's run directory, with what a person reads of it.

:class:`Run` is :class:`labkit.store.Run` (manifest, journal, cells, samples) and its summary (the table the
command prints), its report (the notebooks that apply to it) and how it shows in a notebook. These need the
experiments (each one's summary) and the report, which sit above the store; so the store writes and reads run
directories knowing nothing of them, and this module, above both, is where a run becomes the object a person uses:
``labkit.sweep(...)`` and the other Python entry points, the experiment commands, and the notebooks
(:func:`labkit.notebooks.open_run`) hand out this Run.
"""

from __future__ import annotations

import os

from labkit import store
from labkit.errors import LabkitError
from labkit.experiments.registry import spec_for_experiment
from labkit.inline import run_html, styled_summary
from labkit.report import FIGURE_FORMATS, make_report


class Run(store.Run):
    """A run directory (see :class:`labkit.store.Run`) and what a person reads of it. ``Run.open(path)`` opens one;
    ``Run.of(run)`` makes one of a run the store, the experiments or an import made."""

    def summary(self, styled: bool = False):
        """The table a person reads first for this run's experiment (a DataFrame), as the command prints it.

        ``styled=True``: the same as a pandas Styler for a notebook (:func:`labkit.inline.styled_summary`; for an
        idle-step run the step table, sizes across).
        """
        spec = spec_for_experiment(self.manifest.get("experiment"))
        if spec is None:
            raise LabkitError(f"{self.run_id} is a {self.manifest.get('experiment')!r} run, which has no summary")
        table = spec.summarize(self)
        return styled_summary(self, table) if styled else table

    def report(self, formats=FIGURE_FORMATS, **parameters):
        """``labkit report`` on this run: the notebooks that apply to it, executed into ``report/``; a
        :class:`labkit.report.Report` (in a notebook, its headline numbers). ``parameters`` go to the notebooks."""
        return make_report(self, formats, parameters=parameters or None)

    def _repr_html_(self) -> str:
        """How a notebook shows a run: experiment, hosts, cells, rows, status (:func:`labkit.inline.run_html`)."""
        return run_html(self)


def find_run(ref: str, runs_dir: str | os.PathLike | None = None) -> Run:
    """A run by path, by directory name, or by a unique part of its name (:func:`labkit.store.find_run`)."""
    return Run.of(store.find_run(ref, runs_dir))

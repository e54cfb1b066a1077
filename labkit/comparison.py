"""``labkit compare A B`` and ``labkit.compare(a, b)``: what changed between two runs (or two ``--runs`` groups), and
what it did to every statistic the experiment's notebook reports.

First the runs' provenance side by side (:func:`what_changed`): the link, each host's kernel, sysctls, congestion
control, MTU and tools, the library versions, the git commit, the experiment's config, the emulator's summary. A
difference that makes the numbers incomparable (another experiment, another link delay) refuses the comparison
unless ``force``. Then the numbers: :mod:`labkit.analysis.before_after`, cell by cell, with intervals that respect how the
values depend on each other and one correction over the table.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

from labkit.catalog import query, run_facts
from labkit.errors import LabkitError
from labkit.inline import comparison_html
from labkit.results import Run, find_run
from labkit.store import runs_root

#: Without an emulator, two links differ in delay when their ping minima differ by more than this fraction (and by
#: more than :data:`PING_FLOOR_MS`): the ping baseline moves by well under a percent between runs of one link.
PING_TOLERANCE = 0.10
PING_FLOOR_MS = 1.0


def side_runs(side: str | os.PathLike | Run | Sequence, runs_dir=None, group: bool = True) -> list[Run]:
    """The runs of one side: a run (a :class:`Run`, a path, an id or a unique part of one) with the other runs of its
    ``--runs`` group unless ``group`` is False; several, given as a list or as one string with commas; or the runs a
    filter over ``labkit runs query``'s ``runs`` view selects, ``where <condition>`` (e.g. ``where name = 'before'
    and started_utc > '2026-11-01'``), oldest first."""
    if isinstance(side, str) and side.strip().lower().startswith("where "):
        paths = query(f"select path from runs {side.strip()} order by started_utc", runs_dir)["path"]
        if paths.empty:
            raise LabkitError(f"no run in {runs_root(runs_dir)} matches {side.strip()!r}")
        return [Run.open(path) for path in paths]
    if isinstance(side, str):
        refs = [part.strip() for part in side.split(",") if part.strip()]
    elif isinstance(side, (list, tuple)):
        refs = list(side)
    else:
        refs = [side]
    if not refs:
        raise LabkitError("no run given for a side of the comparison")
    runs = [ref if isinstance(ref, Run) else Run.of(ref) if hasattr(ref, "manifest") else find_run(str(ref), runs_dir)
            for ref in refs]
    if group and len(runs) == 1:
        runs = [Run.of(run) for run in runs[0].replicates()]
    return runs


def link_delays(manifest: dict) -> dict[str, str | float]:
    """The link's delay per direction from the emulator's settings (``a>b``: ``100 ms one way``), and the ping
    baseline's minimum RTT per host pair (``ping a-b``, ms), for :func:`incomparable`: runs made before the emulator
    was recorded, or on real hosts, have only the second."""
    delays: dict[str, str | float] = {}
    for window in ((manifest.get("emulator") or {}).get("windows") or [])[:1]:
        for direction, link in (window.get("links") or {}).items():
            delays[direction] = next((part for part in link.split(", ") if "one way" in part), link)
    for pair, baselines in (manifest.get("baselines") or {}).items():
        ping = baselines.get("ping_before_0") or {}
        if ping.get("rtt_min_ms") is not None:
            delays[f"ping {pair}"] = float(ping["rtt_min_ms"])
    return delays


def _delays_differ(a: dict, b: dict) -> list[str]:
    differ = []
    for key in sorted(set(a) & set(b)):
        x, y = a[key], b[key]
        if isinstance(x, float) and isinstance(y, float):
            if abs(x - y) > max(PING_TOLERANCE * min(x, y), PING_FLOOR_MS):
                differ.append(f"{key} min RTT {x:.3g} vs {y:.3g} ms")
        elif x != y:
            differ.append(f"{key} {x} vs {y}")
    return differ


def incomparable(runs_a: list[Run], runs_b: list[Run]) -> list[str]:
    """What makes the two sides' numbers incomparable, each said in a few words: another experiment, another link
    delay (emulated, or by the ping baselines' minimum)."""
    reasons = []
    experiments = [{run.manifest.get("experiment") for run in runs} for runs in (runs_a, runs_b)]
    if experiments[0] != experiments[1] or len(experiments[0]) > 1:
        reasons.append(f"experiment {' | '.join(sorted(map(str, experiments[0])))} vs "
                       f"{' | '.join(sorted(map(str, experiments[1])))}")
    for run_a in runs_a[:1]:
        for run_b in runs_b:
            for differ in _delays_differ(link_delays(run_a.manifest), link_delays(run_b.manifest)):
                reasons.append(f"link delay {differ}")
    return list(dict.fromkeys(reasons))


def _probe_delays_differ(frames_a: list, frames_b: list) -> str | None:
    """Another link delay by the runs' own ping probe (a series', an import's), as :func:`incomparable` says it from
    the ping baselines; None when a side has no ping probe."""
    def least(frames):
        values = [frame.loc[frame["probe"].eq("ping") & frame["ok"].astype(bool), "rtt_ms"].min()
                  for frame in frames if "probe" in frame and "rtt_ms" in frame]
        values = [v for v in values if v == v]  # NaN: no ping answered in that run
        return min(values) if values else None

    a, b = least(frames_a), least(frames_b)
    if a is None or b is None:
        return None
    differ = _delays_differ({"ping probe": float(a)}, {"ping probe": float(b)})
    return f"link delay {differ[0]}" if differ else None


def comparable_with(run, other: str, runs_dir=None) -> str:
    """``other`` (what ``labkit report --compare-with`` was given) as the paths of its runs joined with commas, for a
    notebook's ``compare_with``; a :class:`LabkitError` before any notebook runs when it names no run, or runs labkit
    would refuse to compare with ``run``."""
    others = side_runs(other, runs_dir)
    reasons = incomparable(others, side_runs(run, runs_dir))
    if reasons:
        raise LabkitError("--compare-with: not comparable: " + "; ".join(reasons))
    return ",".join(str(found.path.resolve()) for found in others)


def what_changed(runs_a: list[Run], runs_b: list[Run]):
    """Every fact (:func:`labkit.catalog.run_facts`) whose value differs between the sides, or between the runs of a
    side: a DataFrame of ``what``, ``a``, ``b``, in the order the manifests hold them, a side's values joined with
    `` | `` where its runs differ (``–``: a run without the fact)."""
    import pandas as pd

    facts_a, facts_b = ([run_facts(run.manifest) for run in runs] for runs in (runs_a, runs_b))
    names = list(dict.fromkeys(what for facts in (*facts_a, *facts_b) for what in facts))
    rows = []
    for what in names:
        a, b = ([*dict.fromkeys(facts.get(what, "–") for facts in side)] for side in (facts_a, facts_b))
        if a != b or len(a) > 1 or len(b) > 1:
            rows.append({"what": what, "a": " | ".join(a), "b": " | ".join(b)})
    return pd.DataFrame(rows, columns=["what", "a", "b"])


@dataclass
class Comparison:
    """Two sides compared: their runs, what changed (:func:`what_changed`), the reasons they are not comparable
    (empty unless forced), and the numbers (:class:`labkit.analysis.before_after.Compared`; ``None`` when the sides'
    experiments differ)."""

    runs_a: list[Run]
    runs_b: list[Run]
    changes: Any
    incomparable: list[str]
    compared: Any

    @property
    def table(self):
        """One row per shared cell and measure: A, B, the difference B − A, its interval and the verdict."""
        return self.compared.table if self.compared is not None else None

    def side_names(self) -> tuple[str, str]:
        return tuple(_side_name(runs) for runs in (self.runs_a, self.runs_b))

    def caveats(self) -> list[str]:
        """What a reader must know before trusting the table."""
        lines = []
        if self.incomparable:
            lines.append("compared with --force although " + "; ".join(self.incomparable))
        if self.compared is not None and self.compared.level == "calls" and self.runs_a[0].manifest.get(
                "experiment") == "load":
            lines.append("one run a side: a load cell is one value a run, which nothing can test; make each side "
                         "with --runs 3 (or more) for runs as units")
        elif self.compared is not None and self.compared.level == "calls":
            lines.append("one run a side: the intervals hold the variation within each run only, not how much two "
                         "runs of the same settings differ; make each side with --runs 3 (or more) for runs as units")
        if self.compared is not None and self.compared.level == "runs" and min(len(self.runs_a), len(self.runs_b)) < 2:
            lines.append("one side is one run: it is judged against the other side's spread from run to run, taken "
                         "to be the same on both sides; make it with --runs too to test that")
        if self.compared is not None and self.compared.too_few:
            lines.append(f"{self.compared.too_few} statistic(s) left out: too few values for the percentile")
        return lines

    def figure(self, **kwargs):
        """Every shared cell's difference B − A as a dot with its interval, by verdict
        (:func:`labkit.plots.difference_dots`); its figure."""
        from labkit import plots

        if self.compared is None or self.table.empty:
            raise LabkitError("nothing to draw: the two sides share no cell")
        return plots.difference_dots(self.table, self.side_names(), n_unit=self.compared.level, **kwargs)

    def distributions(self, most: int = 4, **kwargs):
        """The ECDFs of both sides for the cells worth seeing (:meth:`~labkit.analysis.before_after.Compared.
        cells_to_show`; :func:`labkit.plots.before_after_cdfs`), for an experiment whose rows are calls; its
        figure."""
        from labkit import plots

        if self.compared is None or not self.compared.kind.per_sample or self.table.empty:
            raise LabkitError("no calls to draw: the two sides share no cell of calls (load and hop rows are cells)")
        return plots.before_after_cdfs(self.compared, self.compared.cells_to_show(most), self.side_names(), **kwargs)

    def _repr_html_(self) -> str:
        return comparison_html(self)


def _side_name(runs: list[Run]) -> str:
    if len(runs) == 1:
        return runs[0].run_id
    group = (runs[0].manifest.get("replicate") or {}).get("group")
    same = group and all((run.manifest.get("replicate") or {}).get("group") == group for run in runs)
    if not same:
        return f"{runs[0].run_id} +{len(runs) - 1} runs"
    indexes = [run.manifest["replicate"].get("index") for run in runs]
    whole = len(runs) == runs[0].manifest["replicate"].get("of")
    return f"{group} ({len(runs)} runs)" if whole else f"{group} (runs {', '.join(map(str, indexes))})"


def compare(a, b, *, runs_dir=None, force: bool = False, group: bool = True, seed: int = 0) -> Comparison:
    """Side B against side A (each a run, its ``--runs`` group unless ``group`` is False, or a list of runs; see
    :func:`side_runs`). Raises :class:`LabkitError` naming what makes them incomparable, unless ``force``."""
    from labkit.analysis.before_after import KINDS, compare_frames

    runs_a, runs_b = side_runs(a, runs_dir, group), side_runs(b, runs_dir, group)
    shared = {run.path.resolve() for run in runs_a} & {run.path.resolve() for run in runs_b}
    if shared:
        raise LabkitError(f"the two sides share {len(shared)} run(s) ({sorted(shared)[0].name}): compare different runs")
    reasons = incomparable(runs_a, runs_b)
    if reasons and not force:
        raise LabkitError("not comparable: " + "; ".join(reasons) + " (--force compares them anyway)")
    experiment = runs_a[0].manifest.get("experiment")
    kind = KINDS.get(experiment) if experiment == runs_b[0].manifest.get("experiment") else None
    compared = None
    if kind is not None:
        frames_a, frames_b = [run.samples() for run in runs_a], [run.samples() for run in runs_b]
        if not reasons and (differ := _probe_delays_differ(frames_a, frames_b)):
            reasons = [differ]  # a series without the emulator's record or a baseline: its own ping probe says
            if not force:
                raise LabkitError(f"not comparable: {differ} (--force compares them anyway)")
        compared = compare_frames(frames_a, frames_b, kind, seed=seed)
    elif not reasons:
        raise LabkitError(f"labkit cannot compare {experiment!r} runs")
    return Comparison(runs_a, runs_b, what_changed(runs_a, runs_b), reasons, compared)

"""Before and after: two runs, or two groups of runs, compared cell by cell (``labkit compare``).

Each experiment's rows say what a cell is (the columns of :data:`KINDS`) and which statistics its notebook reports.
For every cell the two sides share, and every such statistic, the difference B − A with an interval that respects
how the values depend on each other:

- **one run a side**: the cell's values in each run are the units, resampled in blocks when they are a time-ordered
  series of calls (a sweep's, a series', an upload's), value by value when they are repeats of a whole cell (hop);
  below ten values a side, Welch's t on the means (:func:`labkit.analysis.inference.two_sample_difference`).
- **groups of runs** (``--runs N``): the runs are the units. Each run gives the cell's statistic once, and the two
  sets of run statistics are compared (Welch's t below ten runs a side), so the interval holds the variation from
  run to run that a single run cannot show.
- **one run against a group**: the one run is judged against the group's spread from run to run
  (:func:`one_run_against_runs`), taken to be the same on both sides.

One family per comparison: Holm's correction over every row of the table, the untestable counted; a called
difference whose interval reaches within :data:`NOISE` of A's value is "within noise". A percentile is
compared only where each side (each run, for groups) has enough values to bound it
(:func:`labkit.analysis.inference.min_samples_for_percentile`); a cell present on one side only is listed, never
dropped. Pure functions on DataFrames: which runs, and what changed between them, is :mod:`labkit.comparison`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from labkit.analysis.inference import (Difference, call_differences, min_samples_for_percentile,
                                       two_sample_difference, verdict_text)
from labkit.analysis.tables import shared_words


@dataclass(frozen=True)
class Measure:
    """One statistic a notebook reports of a cell: of ``column`` (in ``unit``), its median, mean, or ``percent``-th
    percentile. For a kind whose rows are whole cells (load, hop), ``column`` already is the tool's statistic over
    the cell's requests, and ``percent`` says which, so that a row with too few requests to bound it is left out."""

    column: str
    unit: str
    label: str
    percent: float | None = None

    def statistic(self, per_sample: bool) -> Callable:
        """What a side's values are summarised with: their percentile for a series of calls; else their median (a
        cell's repeats or its runs' values; below ten :func:`two_sample_difference` takes the mean)."""
        if per_sample and self.percent is not None and self.percent != 50:
            percent = self.percent

            def percentile(values, axis=None):
                return np.percentile(values, percent, axis=axis)
            percentile.__name__ = f"p{percent:g}"
            return percentile
        return np.median


@dataclass(frozen=True)
class Kind:
    """How an experiment's rows make cells: the ``keys`` naming a cell (those a run has), the ``measures`` compared,
    whether rows are time-ordered samples of a cell (``per_sample``, in ``order``) or whole cells with their repeats,
    and which rows count (``usable``)."""

    keys: tuple[str, ...]
    measures: tuple[Measure, ...]
    per_sample: bool
    order: str
    usable: Callable[[pd.DataFrame], pd.Series] = field(default=lambda frame: pd.Series(True, index=frame.index))
    rows_are: str = "calls"  # what a row is, for a reader ("5 uploads")
    value: str = "RTT"  # what the first measure's column is, for an axis


_STACK = ("client_impl", "server_impl", "grpc_options")
_RTT = (Measure("rtt_ms", "ms", "median RTT", 50), Measure("rtt_ms", "ms", "p90 RTT", 90),
        Measure("rtt_ms", "ms", "p99 RTT", 99))
_PROBES = Kind(("src", "dst", "probe", "payload_bytes", *_STACK), _RTT, True, "t_utc_ns",
               lambda f: f["ok"].astype(bool) & ~f["duplicate"].astype(bool))
_CELLS = (Measure("rps", "req/s", "req/s"), Measure("latency_p50_ms", "ms", "p50 latency", 50),
          Measure("latency_p99_ms", "ms", "p99 latency", 99))


def _no_error(frame: pd.DataFrame) -> pd.Series:
    return frame["error"].isna() if "error" in frame else pd.Series(True, index=frame.index)


#: experiment -> how its rows are compared: the statistics its notebook reports.
KINDS: dict[str, Kind] = {
    "idle-step": Kind(("src", "dst", "cc", "slow_start_after_idle", "gap_s", "background_gap_s", "keepalive_ms",
                       *_STACK, "payload_bytes"), _RTT, True, "t_start_utc_ns",
                      lambda f: f["ok"].astype(bool) & ~f["cold"].astype(bool)),
    "series": _PROBES,
    "ping-vs-echo": _PROBES,
    "upload": Kind(("src", "dst", "transport", "tls", "file_bytes", "chunk_bytes", *_STACK),
                   (Measure("mb_per_s", "MB/s", "median MB/s", 50),), True, "t_start_utc_ns",
                   lambda f: f["ok"].astype(bool), "uploads", "throughput"),
    "load": Kind(("src", "dst", "transport", "tool", "concurrency", "connections", "streams_per_connection",
                  "keepalive_ms", "payload_bytes", "compression", "rpc", "messages_per_call", "payload_kind",
                  "ladder_step", *_STACK), _CELLS, False, "t_start_utc_ns", _no_error, "cells", "req/s"),
    "hop": Kind(("load_host", "front", "back", "via", "tool", "threads", "connections", "rate", "body_bytes",
                 "grpc_channels", "nats_workers"), _CELLS, False, "t_start_utc_ns", _no_error, "repeats", "req/s"),
}

#: A called difference whose interval reaches within this fraction of A's value is "within noise": criterion.rs'
#: noise threshold, for the same reason. Two runs of the same settings on the testbed differ by a few tenths of a
#: millisecond in 200 (0.15 %; the shipped idle-step-cubic runs), real but no change a user made.
NOISE = 0.01

#: The columns of :func:`compare_frames`' table, before the cell's own key columns.
COLUMNS = ["cell", "measure", "unit", "a", "b", "n_a", "n_b", "statistic", "difference", "low", "high", "p",
           "method", "p_holm", "verdict", "mde", "text"]


@dataclass(frozen=True)
class Compared:
    """What :func:`compare_frames` found: one ``table`` row per shared cell and measure (see :data:`COLUMNS`, then
    the key columns); the cells of one side only (``only_a``, ``only_b``, their labels); the ``level`` at which
    the units were taken ("calls" or "runs"), the runs a side, and the measures left out for too few values; and
    each side's usable rows (``side_a``, ``side_b``: their run ``_run`` and cell ``_cell``) with the ``kind``."""

    table: pd.DataFrame
    only_a: list[str]
    only_b: list[str]
    level: str
    runs_a: int
    runs_b: int
    too_few: int
    side_a: pd.DataFrame
    side_b: pd.DataFrame
    kind: Kind

    def called(self) -> pd.DataFrame:
        """The rows whose difference survived the correction."""
        return self.table[self.table["verdict"].isin(["higher", "lower"])]

    def cells_to_show(self, most: int = 4) -> list[str]:
        """The cells whose distributions are worth drawing side by side: those of the first measure's called
        differences, then the largest of the rest, relative to A; at most ``most``."""
        first = self.table[self.table["measure"] == self.kind.measures[0].label]
        if first.empty:
            return []
        called = first["verdict"].isin(["higher", "lower"])
        size = (first["difference"] / first["a"]).abs().fillna(0)
        ranked = first.assign(_called=called, _size=size).sort_values(["_called", "_size"], ascending=False)
        return ranked["cell"].head(most).tolist()


def _value_text(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def cell_labels(frame: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Each row's cell as one string, ``key=value`` for every key, so equal cells compare equal across runs whatever
    the types their columns were read with (a missing value is ``–``)."""
    if not keys:
        return pd.Series("all", index=frame.index)
    parts = [frame[key].map(_value_text).radd(f"{key}=") for key in keys]
    return pd.concat(parts, axis=1).agg(" ".join, axis=1)


def _prepared(frames: list[pd.DataFrame], kind: Kind, keys: list[str]) -> pd.DataFrame:
    """One side's usable rows with their run (``_run``, 0, 1, ...) and cell label (``_cell``), in time order."""
    parts = []
    for number, frame in enumerate(frames):
        if frame.empty:
            continue
        usable = frame[kind.usable(frame).fillna(False).astype(bool)]
        if kind.order in usable:
            usable = usable.sort_values(kind.order, kind="stable")
        parts.append(usable.assign(_run=number))
    if not parts:
        return pd.DataFrame(columns=[*keys, "_run", "_cell"])
    side = pd.concat(parts, ignore_index=True)
    return side.assign(_cell=cell_labels(side, keys))


def _enough(values: np.ndarray, measure: Measure, per_sample: bool) -> bool:
    """A percentile is taken only from as many values as bound it (calls, in a series of calls)."""
    if not per_sample or measure.percent is None or measure.percent == 50:
        return True
    return values.size >= min_samples_for_percentile(measure.percent)


def _unit_values(side: pd.DataFrame, measure: Measure, kind: Kind, by_run: bool) -> np.ndarray:
    """The values one side gives a comparison: the cell's own (calls or repeats) for one run a side, else one
    statistic per run (the runs with too few values for a percentile left out)."""
    usable = side
    if not kind.per_sample and measure.percent not in (None, 50) and "requests" in side:
        usable = side[side["requests"].fillna(0) >= min_samples_for_percentile(measure.percent)]
    if not by_run:
        values = usable[measure.column].to_numpy(dtype=float)
        return values if _enough(values[np.isfinite(values)], measure, kind.per_sample) else np.array([])
    statistic = measure.statistic(kind.per_sample) if kind.per_sample else np.mean
    per_run = []
    for _, run in usable.groupby("_run", sort=True):
        values = run[measure.column].to_numpy(dtype=float)
        values = values[np.isfinite(values)]
        if values.size and _enough(values, measure, kind.per_sample):
            per_run.append(float(statistic(values)))
    return np.asarray(per_run, dtype=float)


def _side_value(values: np.ndarray, result: Difference, measure: Measure, per_sample: bool, by_run: bool) -> float:
    """One side's statistic as the difference was taken: the mean where the rule took means, else the measure's."""
    values = values[np.isfinite(values)]
    if not values.size:
        return float("nan")
    if result.statistic == "mean":
        return float(values.mean())
    return float((np.median if by_run else measure.statistic(per_sample))(values))


def compare_frames(a: list[pd.DataFrame], b: list[pd.DataFrame], kind: Kind, *, seed: int = 0,
                   n_resamples: int = 2000, method: str = "holm", alpha: float = 0.05,
                   noise: float = NOISE) -> Compared:
    """Side A's runs (one DataFrame each, their samples) against side B's, cell by cell and measure by measure, as
    the module says. Runs are the units when either side has more than one. A difference the correction calls
    whose interval still reaches into ±``noise`` × A's value is "within noise", not "higher" or "lower"."""
    keys = [key for key in kind.keys if all(key in frame for frame in (*a, *b))]
    side_a, side_b = _prepared(a, kind, keys), _prepared(b, kind, keys)
    cells_a, cells_b = (list(dict.fromkeys(side.sort_values(keys, kind="stable")["_cell"] if keys else side["_cell"]))
                        for side in (side_a, side_b))
    shared = [cell for cell in cells_a if cell in set(cells_b)]
    by_run = len(a) > 1 or len(b) > 1
    rows, results, too_few = [], [], 0
    for number, cell in enumerate(shared):
        mine, theirs = side_a[side_a["_cell"] == cell], side_b[side_b["_cell"] == cell]
        for measure in kind.measures:
            if measure.column not in mine or measure.column not in theirs:
                continue
            values_a, values_b = (_unit_values(s, measure, kind, by_run) for s in (mine, theirs))
            if not (values_a.size and values_b.size):
                too_few += 1
                continue
            statistic = np.median if by_run else measure.statistic(kind.per_sample)
            if by_run and min(values_a.size, values_b.size) == 1 and max(values_a.size, values_b.size) > 1:
                result = one_run_against_runs(values_a, values_b)
            else:
                result = two_sample_difference(values_a, values_b, statistic,
                                               time_ordered=kind.per_sample and not by_run, seed=seed + number,
                                               n_resamples=n_resamples)
            results.append(result)
            rows.append({"cell": cell, "measure": measure.label, "unit": measure.unit,
                         "a": _side_value(values_a, result, measure, kind.per_sample, by_run),
                         "b": _side_value(values_b, result, measure, kind.per_sample, by_run),
                         "n_a": result.n_a, "n_b": result.n_b, "statistic": result.statistic,
                         "difference": result.difference, "low": result.low, "high": result.high,
                         "p": result.pvalue, "method": result.method,
                         **{key: mine[key].iat[0] for key in keys}})
    table = pd.DataFrame(rows, columns=[*COLUMNS[:13], *keys])
    if results:
        calls = call_differences(results, method, alpha)
        table["p_holm"], table["verdict"], table["mde"] = calls.adjusted, calls.verdict, calls.mde
        band = noise * table["a"].abs()
        inside = (table["low"] < band) & (table["high"] > -band)
        table.loc[table["verdict"].isin(["higher", "lower"]) & inside, "verdict"] = "within noise"
        table["text"] = [difference_text(row) for row in table.itertuples(index=False)]
    table = table.reindex(columns=[*COLUMNS, *keys])
    return Compared(table, [c for c in cells_a if c not in set(cells_b)], [c for c in cells_b if c not in set(cells_a)],
                    "runs" if by_run else "calls", len(a), len(b), too_few, side_a, side_b, kind)


def one_run_against_runs(a: np.ndarray, b: np.ndarray, confidence: float = 0.95) -> Difference:
    """One run's statistic against several runs' (either side the one): B − A, where the one run is judged against
    the others' spread from run to run, taken to be the same on both sides (one run shows none of its own). The
    interval and test are Student's t for a new observation: the others' mean, their standard deviation
    ``s × √(1 + 1/n)``, ``n − 1`` degrees of freedom."""
    from scipy import stats

    runs = b if a.size == 1 else a
    n = runs.size
    difference = float(b.mean() - a.mean())
    se = float(runs.std(ddof=1) * math.sqrt(1 + 1 / n))
    if not se > 0:
        return Difference(difference, float("nan"), float("nan"), float("nan"), a.size, b.size, "none", "mean")
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * se
    pvalue = float(2 * stats.t.sf(abs(difference) / se, n - 1))
    return Difference(difference, difference - half, difference + half, pvalue, a.size, b.size,
                      "t, one run against the others' spread", "mean", se, float(n - 1))


def distinct_parts(cells: list[str]) -> tuple[str, dict[str, str]]:
    """Cell labels said once: the ``key=value`` words every one of ``cells`` shares (for a line above a table), and
    each cell's other words (its own label, ``all`` when it has none)."""
    common = shared_words(cells)
    shared = set(common.split())
    return common, {cell: " ".join(w for w in cell.split() if w not in shared) or "all" for cell in dict.fromkeys(cells)}


def difference_text(row) -> str:
    """A row's difference as a table shows it: ``+201.3 [+195.0, +207.9] ms higher`` (B − A; the verdict after the
    family's correction, with its smallest detectable difference where unclear)."""
    digits = 3 if max(abs(row.a), abs(row.b)) < 10 else 1
    verdict = verdict_text(row.verdict, row.mde, row.unit)
    if not math.isfinite(row.difference):
        return verdict
    interval = f" [{row.low:+.{digits}f}, {row.high:+.{digits}f}]" if math.isfinite(row.low) else ""
    return f"{row.difference:+.{digits}f}{interval} {row.unit} {verdict}"


def verdict_counts(table: pd.DataFrame) -> str:
    """The family in one line: ``12 comparisons (Holm): 1 higher, 1 lower, 10 unclear``."""
    counts = table["verdict"].value_counts()
    parts = [f"{counts[v]} {v}" for v in ("higher", "lower", "within noise", "unclear", "not testable")
             if counts.get(v)]
    return f"{len(table)} comparisons (Holm): " + (", ".join(parts) if parts else "none")

"""Inference a referee accepts: intervals for time-ordered samples, runs as units, paired probes, many comparisons,
and how many samples a question needs.

Latency samples from one connection over time are autocorrelated, so an iid
bootstrap makes their intervals too narrow. :func:`block_bootstrap` resamples
blocks of consecutive samples (a circular block bootstrap, with the block
length chosen from the data by Politis and White's rule as corrected by
Patton, Politis and White, 2009: arch's ``optimal_block_length``). When a cell was measured in several
independent runs, the runs are the units: :func:`runs_t_interval` (Student's t
over one statistic per run, right for a handful of runs) or, with many runs,
:func:`runs_bootstrap` (resampling runs, not samples). Probes on one tick schedule (a series) are compared pairwise,
tick by tick (:func:`paired_block_difference`). Every family of comparisons is
corrected (:func:`adjust`, Holm or Benjamini–Hochberg, statsmodels'). And no
percentile is reported from fewer samples than can bound it
(:func:`min_samples_for_percentile`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

DEFAULT_RESAMPLES = 2000


def _finite(values) -> np.ndarray:
    array = np.asarray(values, dtype=float).ravel()
    return array[np.isfinite(array)]


def block_length(values) -> int:
    """The circular block bootstrap's block length for ``values`` (time-ordered), chosen from their autocorrelation
    (arch's ``optimal_block_length``); 1 for samples too few or too alike to tell."""
    from arch.bootstrap import optimal_block_length

    array = _finite(values)
    if array.size < 8 or np.ptp(array) == 0:
        return 1
    length = float(optimal_block_length(array)["circular"].iat[0])
    return max(1, min(int(math.ceil(length)), array.size // 2)) if math.isfinite(length) else 1


def _circular_blocks(n: int, block: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """``reps`` rows of ``n`` indices, each row blocks of ``block`` consecutive indices (wrapping around) from
    random starts: the circular block bootstrap's resampling (Politis and Romano), as arch's
    CircularBlockBootstrap draws it, done for all replicates at once (arch loops over them in Python, some 100×
    slower on the thousands of calls of a cell)."""
    blocks = -(-n // block)
    starts = rng.integers(0, n, size=(reps, blocks, 1))
    return ((starts + np.arange(block)) % n).reshape(reps, blocks * block)[:, :n]


def _over_rows(statistic: Callable, matrix: np.ndarray) -> np.ndarray:
    """``statistic`` of every row: numpy's reductions take ``axis``; anything else is applied row by row."""
    try:
        values = np.asarray(statistic(matrix, axis=-1), dtype=float)
        if values.shape == matrix.shape[:1]:
            return values
    except TypeError:
        pass
    return np.array([statistic(row) for row in matrix], dtype=float)


def block_draws(values, statistic: Callable = np.median, seed: int = 0, n_resamples: int = DEFAULT_RESAMPLES,
                rng: np.random.Generator | None = None) -> np.ndarray:
    """``n_resamples`` bootstrap draws of ``statistic`` of time-ordered ``values`` (NaN left out), resampled in
    circular blocks of :func:`block_length`; empty for fewer than two values."""
    array = _finite(values)
    if array.size < 2:
        return np.array([])
    rng = rng if rng is not None else np.random.default_rng(seed)
    return _over_rows(statistic, array[_circular_blocks(array.size, block_length(array), n_resamples, rng)])


def _interval(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    if not draws.size:
        return float("nan"), float("nan")
    tail = (1 - confidence) / 2
    return float(np.quantile(draws, tail)), float(np.quantile(draws, 1 - tail))


def block_bootstrap(values, statistic: Callable = np.median, confidence: float = 0.95, seed: int = 0,
                    n_resamples: int = DEFAULT_RESAMPLES) -> tuple[float, float]:
    """``(low, high)``: a percentile interval for ``statistic`` of time-ordered ``values`` (NaN left out), from a
    circular block bootstrap with a data-driven block length; ``(nan, nan)`` for fewer than two values."""
    return _interval(block_draws(values, statistic, seed, n_resamples), confidence)


@dataclass(frozen=True)
class Difference:
    """``statistic(b) − statistic(a)``, its bootstrap interval and the two-sided p-value of "no difference"
    (:func:`normal_pvalue`), and the samples on each side."""

    difference: float
    low: float
    high: float
    pvalue: float
    n_a: int
    n_b: int


def block_bootstrap_difference(a, b, statistic: Callable = np.median, confidence: float = 0.95, seed: int = 0,
                               n_resamples: int = DEFAULT_RESAMPLES) -> Difference:
    """Two independent time-ordered samples (two cells, each its own connection and time), each resampled in
    blocks of its own length, independently of the other."""
    a, b = _finite(a), _finite(b)
    if a.size < 2 or b.size < 2:
        return Difference(float("nan"), float("nan"), float("nan"), float("nan"), int(a.size), int(b.size))
    rng = np.random.default_rng(seed)
    draws = block_draws(b, statistic, rng=rng, n_resamples=n_resamples) - block_draws(a, statistic, rng=rng,
                                                                                         n_resamples=n_resamples)
    low, high = _interval(draws, confidence)
    observed = float(statistic(b) - statistic(a))
    return Difference(observed, low, high, normal_pvalue(observed, draws), int(a.size), int(b.size))


def normal_pvalue(observed: float, draws) -> float:
    """Two-sided p-value of "no difference" for ``observed``, its standard error the spread of its bootstrap
    ``draws`` (a bootstrap z-test). Unlike counting the draws on either side of 0, it does not stop at 1 / draws: a family of 100 comparisons under Holm's correction needs p below 0.0005, which 2000 draws could
    never show."""
    from scipy.stats import norm

    draws = _finite(draws)
    spread = float(draws.std(ddof=1)) if draws.size > 1 else float("nan")
    if not math.isfinite(observed) or not math.isfinite(spread):
        return float("nan")
    if spread == 0:
        return 1.0 if observed == 0 else 0.0
    return float(2 * norm.sf(abs(observed) / spread))


def paired_block_difference(a, b, statistic: Callable = np.median, confidence: float = 0.95, seed: int = 0,
                            n_resamples: int = DEFAULT_RESAMPLES) -> Difference:
    """``statistic(b) − statistic(a)`` of two probes on one schedule (``a[i]`` and ``b[i]`` at tick ``i``, NaN where
    a probe has no sample): the difference over each probe's own samples (so differences of medians add up along a
    chain of probes), its interval from resampling *ticks* in blocks, both probes at once, over the ticks where both
    have a sample. What the ticks share (the path's state then) moves both sides of a resample together instead of
    widening the interval, and the blocks keep the ticks' dependence. ``n_a`` = ``n_b`` = the paired ticks."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    observed = float(statistic(_finite(b)) - statistic(_finite(a))) if _finite(a).size and _finite(b).size else float("nan")
    both = np.isfinite(a) & np.isfinite(b)
    a, b = a[both], b[both]
    if a.size < 2:
        return Difference(observed, float("nan"), float("nan"), float("nan"), int(a.size), int(a.size))
    picks = _circular_blocks(a.size, block_length(b - a), n_resamples, np.random.default_rng(seed))
    draws = _over_rows(statistic, b[picks]) - _over_rows(statistic, a[picks])
    low, high = _interval(draws, confidence)
    return Difference(observed, low, high, normal_pvalue(observed, draws), int(a.size), int(a.size))


def runs_bootstrap(runs: Sequence, statistic: Callable = np.median, confidence: float = 0.95, seed: int = 0,
                   n_resamples: int = DEFAULT_RESAMPLES) -> tuple[float, float, float]:
    """``statistic`` of several independent runs' samples pooled, and its interval from resampling whole runs: the
    runs are the units (between-run variation is what a single run cannot show). NaN interval for fewer than
    two runs."""
    samples = [_finite(run) for run in runs]
    samples = [s for s in samples if s.size]
    pooled = np.concatenate(samples) if samples else np.array([])
    center = float(statistic(pooled)) if pooled.size else float("nan")
    if len(samples) < 2:
        return center, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(samples), size=(n_resamples, len(samples)))
    draws = np.array([statistic(np.concatenate([samples[i] for i in pick])) for pick in picks])
    tail = (1 - confidence) / 2
    return center, float(np.quantile(draws, tail)), float(np.quantile(draws, 1 - tail))


def runs_t_interval(statistics, confidence: float = 0.95) -> tuple[float, float, float]:
    """The mean of one statistic per run and its Student-t interval, the runs as units: ``(mean, low, high)``, NaN
    interval for fewer than two runs. With few runs this is the interval to use: resampling three runs
    (:func:`runs_bootstrap`) gives about their range, which covers the truth about 75 % of the time, while t with
    two degrees of freedom keeps its 95 % when the runs' statistics are about normal."""
    from scipy import stats

    values = _finite(statistics)
    mean = float(values.mean()) if values.size else float("nan")
    if values.size < 2:
        return mean, float("nan"), float("nan")
    half = float(stats.t.ppf((1 + confidence) / 2, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size))
    return mean, mean - half, mean + half


def between_runs(frame, value: str, by, run: str = "replicate", statistic: Callable = np.median,
                 confidence: float = 0.95):
    """The statistic of each run and of the runs pooled, one row per group of ``by``: a column per run (``run 1``,
    ...; the values of ``frame[run]`` in order), ``pooled`` (the statistic of every value), the runs' ``mean`` with
    its interval ``lo``/``hi`` (:func:`runs_t_interval`, NaN with fewer than two runs), ``runs`` (runs with the
    group) and ``n`` (values)."""
    import pandas as pd

    keys = [by] if isinstance(by, str) else list(by)
    numbers = sorted(frame[run].dropna().unique())
    rows = []
    for key, group in frame.groupby(keys, sort=True, dropna=False):
        parts = [_finite(group.loc[group[run] == number, value]) for number in numbers]
        per_run = {f"run {number}": float(statistic(part)) if part.size else float("nan")
                   for number, part in zip(numbers, parts)}
        mean, low, high = runs_t_interval(list(per_run.values()), confidence)
        pooled = np.concatenate(parts) if parts else np.array([])
        rows.append({**dict(zip(keys, key if isinstance(key, tuple) else (key,))), **per_run,
                     "pooled": float(statistic(pooled)) if pooled.size else float("nan"), "mean": mean,
                     "lo": low, "hi": high, "runs": sum(part.size > 0 for part in parts),
                     "n": int(pooled.size)})
    return pd.DataFrame(rows).set_index(keys)


def runs_interval_fields(runs_table, name: Callable) -> dict[str, float]:
    """Headline fields of a :func:`between_runs` table: ``<name>.runs_lo`` and ``.runs_hi`` for each row whose
    ``name(key)`` is not None and whose interval exists; none without a table (a run made alone)."""
    import pandas as pd

    fields: dict[str, float] = {}
    for key, row in (runs_table.iterrows() if runs_table is not None else ()):
        prefix = name(key)
        if prefix is not None and pd.notna(row["lo"]):
            fields[f"{prefix}.runs_lo"] = round(float(row["lo"]), 3)
            fields[f"{prefix}.runs_hi"] = round(float(row["hi"]), 3)
    return fields


def adjust(pvalues: Sequence[float], method: str = "holm", alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """A family's p-values corrected for its size (``holm``: family-wise error; ``fdr_bh``: false discovery rate,
    statsmodels' ``multipletests``): ``(rejected, adjusted p-values)``; NaN p-values stay NaN and are never
    rejected."""
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(pvalues, dtype=float)
    rejected, adjusted = np.zeros(p.size, dtype=bool), np.full(p.size, np.nan)
    tested = np.isfinite(p)
    if tested.any():
        rejected[tested], adjusted[tested], _, _ = multipletests(p[tested], alpha=alpha, method=method)
    return rejected, adjusted


def min_samples_for_percentile(percent: float, confidence: float = 0.95) -> int:
    """The fewest samples for which the sample's extreme lies beyond the ``percent``-th percentile with probability
    ``confidence``: below it, the reported "p99" is just the largest value seen. 5 for p50, 29 for p90, 299 for
    p99 (and the same counts for p50, p10, p1 from below)."""
    q = percent / 100 if percent >= 50 else 1 - percent / 100
    return int(math.ceil(math.log(1 - confidence) / math.log(q)))


def percentile_if_enough(values, percent: float, confidence: float = 0.95) -> float | None:
    """The ``percent``-th percentile of ``values``, or None when there are fewer than
    :func:`min_samples_for_percentile` of them."""
    array = _finite(values)
    if array.size < min_samples_for_percentile(percent, confidence):
        return None
    return float(np.percentile(array, percent))


@dataclass(frozen=True)
class SampleSize:
    """How many samples a question needs, from what a pilot run shows."""

    have: int
    need: int
    question: str

    @property
    def enough(self) -> bool:
        return self.have >= self.need


def samples_for_median(values, halfwidth: float, confidence: float = 0.95, seed: int = 0,
                       n_resamples: int = DEFAULT_RESAMPLES) -> SampleSize:
    """Samples needed to know the median within ± ``halfwidth``, from a pilot: an interval's width shrinks as
    1/√n, so n = n_pilot × (pilot half-width / wanted half-width)², the pilot's interval a block bootstrap (what
    the samples' dependence costs is in it)."""
    array = _finite(values)
    low, high = block_bootstrap(array, np.median, confidence, seed, n_resamples)
    return SampleSize(int(array.size), _samples_for_halfwidth(array.size, (high - low) / 2, halfwidth),
                      f"the median within ±{halfwidth:g}")


def _samples_for_halfwidth(have: int, pilot_halfwidth: float, halfwidth: float) -> int:
    if not math.isfinite(pilot_halfwidth) or pilot_halfwidth <= halfwidth:
        return max(have, 2)
    return max(int(math.ceil(have * (pilot_halfwidth / halfwidth) ** 2)), 2)


def samples_for_proportion(proportion: float, halfwidth: float, confidence: float = 0.95,
                           have: int = 0) -> SampleSize:
    """Independent trials needed to know a proportion (say, of calls that took two round trips) within
    ± ``halfwidth``: n = z² p (1 − p) / h², with p the pilot's proportion (0.5 when unknown: the most)."""
    from scipy.stats import norm

    p = proportion if 0 < proportion < 1 else 0.5
    z = float(norm.ppf(1 - (1 - confidence) / 2))
    need = int(math.ceil(z * z * p * (1 - p) / halfwidth ** 2))
    return SampleSize(have, need, f"a proportion within ±{halfwidth:g}")


def thin_statistics(counts, statistics: dict[str, float], unit: str = "samples",
                    confidence: float = 0.95) -> list[str]:
    """One line per statistic of a summary table that rests, in some of its rows, on fewer samples than
    :func:`min_samples_for_percentile` allows: ``counts`` is the table's samples per row, ``statistics`` maps each
    reported statistic's name to its percentile (``{"median": 50, "p95": 95}``). Empty when every row has enough."""
    counts = np.asarray(counts, dtype=float)
    lines = []
    for name, percent in statistics.items():
        need = min_samples_for_percentile(percent, confidence)
        thin = counts[counts < need]
        if thin.size:
            lines.append(f"{thin.size} of {counts.size} {name} values rest on fewer than {need} {unit} "
                         f"(fewest {int(thin.min())}), too few for a {name}: read them as rough values, or measure "
                         f"more")
    return lines


def data_needs(frame, value: str, by, halfwidth: float, percentile: float = 99, seed: int = 0,
               n_resamples: int = 500):
    """How much data each group of ``frame`` has and needs (the "how much data does this need" table of a
    notebook), one row per group of ``by``: ``n`` (finite ``value``s, in the frame's order, which should be time),
    ``median ± now`` (half-width of the block-bootstrap interval of the median), ``n for ±<halfwidth>`` (as
    :func:`samples_for_median` counts it, from that same interval), and ``n for p<percentile>`` (:func:`min_samples_for_percentile`) with
    whether the group has it."""
    import pandas as pd

    need_pct = min_samples_for_percentile(percentile)
    rows = []
    for key, group in frame.groupby(by, sort=True, dropna=False):
        values = _finite(group[value])
        low, high = block_bootstrap(values, seed=seed, n_resamples=n_resamples)
        rows.append({**dict(zip([by] if isinstance(by, str) else by, key if isinstance(key, tuple) else (key,))),
                     "n": int(values.size), "median ± now": (high - low) / 2,
                     f"n for ±{halfwidth:g}": _samples_for_halfwidth(values.size, (high - low) / 2, halfwidth),
                     f"n for p{percentile:g}": need_pct,
                     f"p{percentile:g} allowed": bool(values.size >= need_pct)})
    return pd.DataFrame(rows).set_index(by)


def data_needs_in_short(needs, halfwidth: float, percentile: float = 99) -> dict:
    """A :func:`data_needs` table in four numbers: ``groups``, ``short`` (groups with fewer samples than the
    half-width asks), ``most_wanted`` (the largest count asked for) and ``percentile_allowed`` (groups with enough
    for the percentile)."""
    wanted = needs[f"n for ±{halfwidth:g}"]
    return {"groups": int(len(needs)), "short": int((needs["n"] < wanted).sum()),
            "most_wanted": int(wanted.max()) if len(needs) else 0,
            "percentile_allowed": int(needs[f"p{percentile:g} allowed"].sum())}

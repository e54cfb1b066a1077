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
tick by tick (:func:`paired_block_difference`). Below ten values on a side a bootstrap has too little to resample:
:func:`method_for` is the rule that picks Student's or Welch's t there and the bootstrap above, for one location
(:func:`location_interval`) and for a difference (:func:`two_sample_difference`). Every family of comparisons is
corrected as a whole, the comparisons it could not test counted in it (:func:`adjust`, Holm or Benjamini–Hochberg,
statsmodels'), and each difference it does not call states the smallest one it could have
(:func:`call_family`, :func:`minimum_detectable_effect`). And no percentile is reported from fewer samples than can
bound it (:func:`min_samples_for_percentile`).
"""

from __future__ import annotations

import math
import re
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
    with np.errstate(divide="ignore", invalid="ignore"):  # arch divides by a lag's zero variance (values in steps)
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
                rng: np.random.Generator | None = None, time_ordered: bool = True) -> np.ndarray:
    """``n_resamples`` bootstrap draws of ``statistic`` of time-ordered ``values`` (NaN left out), resampled in
    circular blocks of :func:`block_length` (one value at a time when not ``time_ordered``: the iid bootstrap);
    empty for fewer than two values."""
    array = _finite(values)
    if array.size < 2:
        return np.array([])
    rng = rng if rng is not None else np.random.default_rng(seed)
    block = block_length(array) if time_ordered else 1
    return _over_rows(statistic, array[_circular_blocks(array.size, block, n_resamples, rng)])


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
    """``statistic(b) − statistic(a)``, its interval and the two-sided p-value of "no difference" (NaN: not testable),
    the samples on each side, and how they were had: ``method`` (see :func:`method_for`), ``statistic`` (``mean``,
    ``median``...), the difference's standard error ``se`` and the degrees of freedom of its test (``df``; infinite
    for the bootstrap's z-test), from which :func:`minimum_detectable_effect` works."""

    difference: float
    low: float
    high: float
    pvalue: float
    n_a: int
    n_b: int
    method: str = "bootstrap"
    statistic: str = ""
    se: float = float("nan")
    df: float = float("inf")


def block_bootstrap_difference(a, b, statistic: Callable = np.median, confidence: float = 0.95, seed: int = 0,
                               n_resamples: int = DEFAULT_RESAMPLES, time_ordered: bool = True) -> Difference:
    """Two independent time-ordered samples (two cells, each its own connection and time), each resampled in
    blocks of its own length, independently of the other (value by value when not ``time_ordered``)."""
    a, b = _finite(a), _finite(b)
    method = "block bootstrap" if time_ordered else "bootstrap"
    name = getattr(statistic, "__name__", "").strip("_")
    if a.size < 2 or b.size < 2:
        return Difference(float("nan"), float("nan"), float("nan"), float("nan"), int(a.size), int(b.size), "none", name)
    rng = np.random.default_rng(seed)
    draws = (block_draws(b, statistic, rng=rng, n_resamples=n_resamples, time_ordered=time_ordered)
             - block_draws(a, statistic, rng=rng, n_resamples=n_resamples, time_ordered=time_ordered))
    low, high = _interval(draws, confidence)
    observed = float(statistic(b) - statistic(a))
    return Difference(observed, low, high, normal_pvalue(observed, draws), int(a.size), int(b.size), method, name,
                      float(draws.std(ddof=1)))


def normal_pvalue(observed: float, draws) -> float:
    """Two-sided p-value of "no difference" for ``observed``, its standard error the spread of its bootstrap
    ``draws`` (a bootstrap z-test). Unlike counting the draws on either side of 0, it does not stop at 1 / draws: a family of 100 comparisons under Holm's correction needs p below 0.0005, which 2000 draws could
    never show. NaN when the draws do not vary (both samples constant, or req/s bins that move in whole steps and
    did not move): there is no spread to test against, and the comparison is not testable, not certain."""
    from scipy.stats import norm

    draws = _finite(draws)
    spread = float(draws.std(ddof=1)) if draws.size > 1 else float("nan")
    if not math.isfinite(observed) or not math.isfinite(spread) or spread == 0:
        return float("nan")
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
    return Difference(observed, low, high, normal_pvalue(observed, draws), int(a.size), int(a.size),
                      "paired block bootstrap", getattr(statistic, "__name__", "").strip("_"), float(draws.std(ddof=1)))


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
    values = _finite(statistics)
    if values.size > 1 and np.ptp(values) == 0:  # every run the same: an interval of no width (though not testable)
        return float(values[0]), float(values[0]), float(values[0])
    result = one_sample_t(values, confidence)
    return result.difference, result.low, result.high


def one_sample_t(values, confidence: float = 0.95) -> Difference:
    """The mean of ``values`` (one per independent unit: a run's statistic, or a run's difference between two
    cells) with its Student-t interval, and the t-test of "the mean is 0": a :class:`Difference` whose ``n_a`` and
    ``n_b`` are the values. Not testable (NaN interval and p) with fewer than two values or none that differ: with
    no spread there is nothing to test against (three runs that each gave the same req/s difference, as req/s in
    whole steps can)."""
    from scipy import stats

    values = _finite(values)
    n = int(values.size)
    mean = float(values.mean()) if n else float("nan")
    se = float(values.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
    if not se > 0:
        return Difference(mean, float("nan"), float("nan"), float("nan"), n, n, "t" if n > 1 else "none", "mean", se,
                          float(n - 1))
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * se
    pvalue = float(2 * stats.t.sf(abs(mean) / se, n - 1))
    return Difference(mean, mean - half, mean + half, pvalue, n, n, "t", "mean", se, float(n - 1))


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
    statsmodels' ``multipletests``): ``(rejected, adjusted p-values)``. A NaN p-value is a comparison the family
    has but could not test: it stays NaN and is never rejected, and it still counts in the family's size (as a
    p-value of 1 would), so that what could not be tested does not make the others easier to call."""
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(pvalues, dtype=float)
    rejected, adjusted = np.zeros(p.size, dtype=bool), np.full(p.size, np.nan)
    tested = np.isfinite(p)
    if tested.any():
        every, corrected, _, _ = multipletests(np.where(tested, p, 1.0), alpha=alpha, method=method)
        rejected[tested], adjusted[tested] = every[tested], corrected[tested]
    return rejected, adjusted


#: Fewer values than this on a side, and :func:`method_for` takes Student's or Welch's t, not a bootstrap.
SMALL_SAMPLE = 10
#: The power at which a difference a family did not call states the smallest one it could have (:func:`call_family`).
POWER = 0.8


def method_for(n_a: int, n_b: int | None = None) -> str:
    """labkit's rule for the interval of one location (``n_a`` values) or of the difference between two independent
    samples (``n_a`` and ``n_b`` values), and for its test. :func:`location_interval` and
    :func:`two_sample_difference` follow it, and through them every notebook's comparisons:

    - ``"none"``: fewer than two values on a side. No spread to go by: no interval and no test (a comparison is
      listed as not testable, and still counts in its family).
    - ``"t"``: fewer than :data:`SMALL_SAMPLE` values on a side. The mean, with Student's t interval (one sample)
      or Welch's (two; the variances are not taken as equal) and its t-test.
    - ``"bootstrap"``: otherwise. The caller's statistic (the median unless it says otherwise) with a percentile
      bootstrap interval (in blocks for time-ordered values) and the bootstrap z-test (:func:`normal_pvalue`).

    Why t below ten: a bootstrap resamples only the values it has, so with 3–5 of them its interval is about their
    range. In ``tests/test_inference.py``, over 2000 simulated pairs of normal samples with a known difference, the
    percentile bootstrap's interval of the difference of means covers it in 81, 83 and 87 % of pairs at 3, 4 and 5
    values a side instead of 95 %, Welch's in 96–97 % (97–98 % on exponential values). An exact
    permutation test needs no normality, but its p-value cannot go below 2 / C(n_a + n_b, n_a): 0.1 with 3 values a
    side, 0.008 with 5, so with 3 it never calls a difference, and with 5 none of a family of 20 after Holm's
    correction. t asks for roughly normal means: one sample of 3 exponential values has its mean inside the t
    interval about 88 % of the time, still more often than a percentile bootstrap of 3 values holds their median
    (75 %; 94 % with 5).
    """
    smallest = n_a if n_b is None else min(n_a, n_b)
    if smallest < 2:
        return "none"
    return "t" if smallest < SMALL_SAMPLE else "bootstrap"


def rule_statistic(n: int, statistic: Callable = np.median) -> Callable:
    """What :func:`method_for` summarises ``n`` values with: their mean below :data:`SMALL_SAMPLE` (what a t interval
    is about), else ``statistic``; for a table of runs or cells that should show the same statistic as their
    intervals."""
    return np.mean if method_for(n) != "bootstrap" else statistic


def statistics_named(statistics) -> str:
    """The statistics a table's rows rest on (its ``statistic`` column, in order, each once), for a sentence: a table
    of small and large cells mixes ``mean`` and ``median`` by :func:`method_for`, and says so as "mean or median"."""
    return " or ".join(dict.fromkeys(statistics))


@dataclass(frozen=True)
class Location:
    """One sample's location by :func:`method_for`: the ``statistic`` (``mean`` below :data:`SMALL_SAMPLE` values,
    else the caller's), its ``value``, interval ``low``–``high`` (NaN with fewer than two values), the values ``n``
    and the ``method``."""

    statistic: str
    value: float
    low: float
    high: float
    n: int
    method: str


def location_interval(values, statistic: Callable = np.median, *, time_ordered: bool = False,
                      confidence: float = 0.95, seed: int = 0, n_resamples: int = DEFAULT_RESAMPLES) -> Location:
    """Where ``values`` lie, with an interval, as :func:`method_for` says: their mean with Student's t interval
    below :data:`SMALL_SAMPLE` values (:func:`runs_t_interval`), else ``statistic`` with a percentile bootstrap
    interval (in blocks when ``time_ordered``)."""
    array = _finite(values)
    method = method_for(array.size)
    if method != "bootstrap":
        mean, low, high = runs_t_interval(array, confidence)
        return Location("mean", mean, low, high, int(array.size), method)
    draws = block_draws(array, statistic, seed, n_resamples, time_ordered=time_ordered)
    low, high = _interval(draws, confidence)
    return Location(getattr(statistic, "__name__", "").strip("_"), float(statistic(array)), low, high,
                    int(array.size), "block bootstrap" if time_ordered else "bootstrap")


def welch_t(a, b, confidence: float = 0.95) -> tuple[np.ndarray, ...]:
    """Welch's t for mean(b) − mean(a) along the last axis of two arrays (every row a comparison; no NaN):
    ``(difference, low, high, p-value, standard error, degrees of freedom)``, the degrees of freedom
    Welch–Satterthwaite's, as ``scipy.stats.ttest_ind(b, a, equal_var=False)`` and its ``confidence_interval``
    give them. Where neither sample varies the standard error is 0 and the rest NaN."""
    from scipy import stats

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n_a, n_b = a.shape[-1], b.shape[-1]
    share_a, share_b = a.var(axis=-1, ddof=1) / n_a, b.var(axis=-1, ddof=1) / n_b
    se = np.sqrt(share_a + share_b)
    difference = b.mean(axis=-1) - a.mean(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = (share_a + share_b) ** 2 / (share_a ** 2 / (n_a - 1) + share_b ** 2 / (n_b - 1))
        half = stats.t.ppf((1 + confidence) / 2, df) * se
        pvalue = 2 * stats.t.sf(np.abs(difference) / se, df)
    return difference, difference - half, difference + half, pvalue, se, df


def two_sample_difference(a, b, statistic: Callable = np.median, *, time_ordered: bool = False,
                          confidence: float = 0.95, seed: int = 0,
                          n_resamples: int = DEFAULT_RESAMPLES) -> Difference:
    """``b`` against ``a``, two independent samples (NaN left out), as :func:`method_for` says: below
    :data:`SMALL_SAMPLE` values on a side, mean(b) − mean(a) with Welch's interval and test (:func:`welch_t`); else
    ``statistic(b) − statistic(a)`` with a percentile bootstrap interval and z-test, each sample resampled on its
    own, in blocks when ``time_ordered`` (:func:`block_bootstrap_difference`). Not testable (NaN interval and
    p-value) with fewer than two values on a side (the difference of the means of what there is) or no spread at
    all."""
    a, b = _finite(a), _finite(b)
    method = method_for(a.size, b.size)
    if method == "none":  # the difference of what there is, nothing to test it with
        difference = float(b.mean() - a.mean()) if a.size and b.size else float("nan")
        return Difference(difference, float("nan"), float("nan"), float("nan"), int(a.size), int(b.size), "none",
                          "mean")
    if method == "bootstrap":
        return block_bootstrap_difference(a, b, statistic, confidence, seed, n_resamples, time_ordered)
    difference, low, high, pvalue, se, df = (float(x) for x in welch_t(a, b, confidence))
    return Difference(difference, low, high, pvalue, int(a.size), int(b.size), "Welch t", "mean", se, df)


def minimum_detectable_effect(se: float, df: float = math.inf, level: float = 0.05, power: float = POWER) -> float:
    """The smallest true difference that a two-sided test at ``level`` calls with probability ``power``, for a
    difference whose standard error is ``se`` (the one the data show) and whose test has ``df`` degrees of freedom
    (infinite: a z-test, as the bootstrap's): ``ncp × se``, with ``ncp`` the noncentrality at which a noncentral t
    (or normal) falls beyond the test's critical value with probability ``power``. NaN without a standard error."""
    from scipy import stats
    from scipy.optimize import brentq

    if not (math.isfinite(se) and se > 0 and 0 < level < 1):
        return float("nan")
    if math.isinf(df):
        critical = float(stats.norm.isf(level / 2))

        def power_at(ncp):
            return stats.norm.sf(critical - ncp) + stats.norm.cdf(-critical - ncp)
    else:
        critical = float(stats.t.isf(level / 2, df))

        def power_at(ncp):
            # The far tail, beyond −critical, is all but 0 once ncp > 0, and scipy's noncentral t returns NaN for
            # it at some values (ncp 35 with 2 df): counted as the 0 it is.
            return stats.nct.sf(critical, df, ncp) + np.nan_to_num(stats.nct.cdf(-critical, df, ncp))
    high = critical + 1.0
    while power_at(high) < power:
        high *= 2
    return float(brentq(lambda ncp: power_at(ncp) - power, 0.0, high) * se)


@dataclass(frozen=True)
class Calls:
    """A family of comparisons after its correction (:func:`call_family`), one entry per comparison:
    ``adjusted`` p-values (NaN: not testable); ``verdict``: "higher" or "lower" where called (the difference's
    sign), "unclear" where not, "not testable" where there was nothing to test; ``mde``, for the unclear ones only,
    the smallest difference the family could have called (:func:`minimum_detectable_effect` at ``level`` and
    :data:`POWER`). ``level`` is the p-value the next comparison needed to be called; ``size`` the comparisons
    counted, the untestable ones with them."""

    adjusted: np.ndarray
    verdict: np.ndarray
    mde: np.ndarray
    level: float
    size: int
    method: str


def call_family(differences, pvalues, ses, dfs, method: str = "holm", alpha: float = 0.05,
                power: float = POWER) -> Calls:
    """Which of a family's differences are called, after correcting for the whole family (:func:`adjust`, the
    untestable counted), each given as its ``differences``, ``pvalues`` (NaN: not testable), standard errors
    ``ses`` and test degrees of freedom ``dfs`` (infinite for a z-test).

    An "unclear" verdict says the data could not tell, not that there is no difference, so it comes with the
    smallest difference the family could have called at 80 % power: the minimum detectable effect at the level the
    next comparison had to pass, α / (m − r) under Holm and α (r + 1) / m under Benjamini–Hochberg (``fdr_bh``),
    with m the family's size and r the comparisons called."""
    differences, pvalues = np.asarray(differences, dtype=float), np.asarray(pvalues, dtype=float)
    ses, dfs = np.asarray(ses, dtype=float), np.asarray(dfs, dtype=float)
    rejected, adjusted = adjust(pvalues, method, alpha)
    size, called = int(pvalues.size), int(rejected.sum())
    level = alpha * (called + 1) / max(size, 1) if method == "fdr_bh" else alpha / max(size - called, 1)
    verdict = np.where(~np.isfinite(pvalues), "not testable",
                       np.where(~rejected, "unclear", np.where(differences > 0, "higher", "lower"))).astype(object)
    mde = np.array([minimum_detectable_effect(se, df, level, power) if v == "unclear" else float("nan")
                    for v, se, df in zip(verdict, ses, dfs)])
    return Calls(adjusted, verdict, mde, float(level), size, method)


def call_differences(differences: Sequence[Difference], method: str = "holm", alpha: float = 0.05) -> Calls:
    """:func:`call_family` of a family given as :class:`Difference` records."""
    return call_family([d.difference for d in differences], [d.pvalue for d in differences],
                       [d.se for d in differences], [d.df for d in differences], method, alpha)


def call_table(table, differences: Sequence[Difference], unit: str = "", method: str = "holm", alpha: float = 0.05):
    """``table``, one row per comparison of ``differences`` (in their order), with the family's calls
    (:func:`call_differences`): ``p_holm`` (the corrected p-value, whatever ``method``), ``verdict``, ``mde``, and
    ``cell``, the difference, its interval and its verdict as a table shows them (``+1.2 [+1.1, +1.4] higher``)."""
    called = call_differences(differences, method, alpha)
    cells = [f"{d.difference:+.1f} [{d.low:+.1f}, {d.high:+.1f}] {verdict_text(v, m, unit)}" if math.isfinite(d.low)
             else f"{d.difference:+.1f} {verdict_text(v, m, unit)}" if math.isfinite(d.difference)
             else verdict_text(v, m, unit)  # nothing to compare (a side without the samples its statistic needs)
             for d, v, m in zip(differences, called.verdict, called.mde)]
    return table.assign(p_holm=called.adjusted, verdict=called.verdict, mde=called.mde, cell=cells)


def key_part(text: str) -> str:
    """A name as one part of a headline key, which `labkit report` prints and tests index: "−" as "minus", and every
    other run of characters but letters, digits, "=" and "+" one underscore (``http2 − grpc+TLS`` ->
    ``http2_minus_grpc+TLS``)."""
    return re.sub(r"[^A-Za-z0-9=+]+", "_", text.replace("−", " minus ")).strip("_")


def verdict_text(verdict: str, mde: float, unit: str = "", digits: int = 3) -> str:
    """A verdict as a table cell or a sentence shows it: an unclear one with the smallest difference the family
    could have called (``unclear (MDE 160 ms)``), so that it does not read as "no difference"."""
    if verdict != "unclear" or not math.isfinite(mde):
        return verdict
    return f"unclear (MDE {mde:.{digits}g}{' ' + unit if unit else ''})"


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

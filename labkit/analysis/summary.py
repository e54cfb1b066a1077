"""Summary tables per group, with seeded bootstrap confidence intervals, and two-condition comparisons."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from labkit.analysis.stats import Stats

COLUMNS = ["count", "lost", "mean", "std", "min", "p5", "25%", "50%", "75%", "p95", "p99", "max"]


def _samples(df: pd.DataFrame, value: str, ok: str | None) -> np.ndarray:
    """The values of ``df`` with lost samples (``ok`` false) as NaN; duplicate replies are left out."""
    frame = df
    if "duplicate" in frame.columns:
        frame = frame[~frame["duplicate"].fillna(False).astype(bool)]
    values = pd.to_numeric(frame[value], errors="coerce").to_numpy(dtype=float).copy()
    if ok is not None and ok in frame.columns:
        values[~frame[ok].fillna(False).to_numpy(dtype=bool)] = np.nan
    return values


def _groups(df: pd.DataFrame, by):
    if by is None:
        yield "all", df
    else:
        yield from df.groupby(by, sort=True, observed=True, dropna=False)


def summarize(df: pd.DataFrame, value: str = "rtt_ms", *, by=None, ok: str | None = "ok") -> pd.DataFrame:
    """One row per group: count, lost, mean, std, min, p5, 25%, 50%, 75%, p95, p99, max.

    ``count`` counts the samples used; ``lost`` the rows whose ``ok`` is false
    or whose value is missing. Duplicate replies (a ``duplicate`` column) are
    neither. Quantiles interpolate linearly, std is the sample one (ddof=1).
    """
    rows = {key: Stats(_samples(group, value, ok)).as_row() for key, group in _groups(df, by)}
    table = pd.DataFrame.from_dict(rows, orient="index", columns=COLUMNS)
    table.index.name = by if isinstance(by, str) else None
    return table.astype({"count": "int64", "lost": "int64"})


def summarize_with_location(df: pd.DataFrame, value: str = "rtt_ms", *, by=None, ok: str | None = "ok",
                            confidence: float = 0.95, seed: int = 0, n_resamples: int = 2000,
                            time_ordered: bool = False) -> pd.DataFrame:
    """:func:`summarize` plus each group's location with its interval by labkit's small-sample rule
    (:func:`labkit.analysis.inference.location_interval`): ``statistic`` (the mean below ten values, else the
    median), ``value``, ``lo``, ``hi`` and ``method``; ``time_ordered``: each group's rows are in time order, and a
    bootstrap resamples them in blocks."""
    from labkit.analysis.inference import location_interval

    table = summarize(df, value, by=by, ok=ok)
    found = [location_interval(_samples(group, value, ok), confidence=confidence, seed=seed, n_resamples=n_resamples,
                               time_ordered=time_ordered)
             for _, group in _groups(df, by)]
    for column in ("statistic", "value", "low", "high", "method"):
        table[{"low": "lo", "high": "hi"}.get(column, column)] = [getattr(f, column) for f in found]
    if not isinstance(by, str) and by is not None:
        table.index.names = list(by)
    return table


def _p99(x, axis=-1):
    return np.quantile(x, 0.99, axis=axis)


def _median(x, axis=-1):
    return np.median(x, axis=axis)


def bootstrap_ci(
    values, statistic=_median, *, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0, method: str = "percentile"
) -> tuple[float, float]:
    """Confidence interval of ``statistic`` by scipy.stats.bootstrap with a fixed seed (same data → same interval)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size < 2:
        return (float("nan"), float("nan"))
    result = sps.bootstrap(
        (values,),
        statistic,
        confidence_level=confidence,
        n_resamples=n_resamples,
        method=method,
        vectorized=True,
        random_state=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def summarize_with_ci(
    df: pd.DataFrame,
    value: str = "rtt_ms",
    *,
    by=None,
    ok: str | None = "ok",
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    method: str = "percentile",
) -> pd.DataFrame:
    """:func:`summarize` plus bootstrap intervals: ``50%_lo``, ``50%_hi``, ``p99_lo``, ``p99_hi``."""
    table = summarize(df, value, by=by, ok=ok)
    lows_m, highs_m, lows_p, highs_p = [], [], [], []
    for _, group in _groups(df, by):
        values = _samples(group, value, ok)
        low, high = bootstrap_ci(values, _median, confidence=confidence, n_resamples=n_resamples, seed=seed, method=method)
        lows_m.append(low)
        highs_m.append(high)
        low, high = bootstrap_ci(values, _p99, confidence=confidence, n_resamples=n_resamples, seed=seed, method=method)
        lows_p.append(low)
        highs_p.append(high)
    table.insert(table.columns.get_loc("50%") + 1, "50%_lo", lows_m)
    table.insert(table.columns.get_loc("50%_lo") + 1, "50%_hi", highs_m)
    table.insert(table.columns.get_loc("p99") + 1, "p99_lo", lows_p)
    table.insert(table.columns.get_loc("p99_lo") + 1, "p99_hi", highs_p)
    return table


@dataclass
class Comparison:
    """Condition B against condition A: differences are B − A, with bootstrap intervals."""

    n_a: int
    n_b: int
    median_a: float
    median_b: float
    median_diff: float
    median_diff_ci: tuple[float, float]
    p99_a: float
    p99_b: float
    p99_diff: float
    p99_diff_ci: tuple[float, float]
    mannwhitney_u: float
    mannwhitney_p: float
    confidence: float

    def as_dict(self) -> dict:
        """Plain values for a JSON file or a table row."""
        return dict(self.__dict__)


def compare(
    a, b, *, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0, method: str = "percentile"
) -> Comparison:
    """Compare two samples: difference in medians and in p99 (B − A) with seeded bootstrap CIs, and Mann–Whitney U.

    The two samples are resampled independently. NaN (lost) values are ignored.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size < 2 or b.size < 2:
        raise ValueError("each condition needs at least two samples")

    def diff(statistic):
        def inner(x, y, axis=-1):
            return statistic(y, axis=axis) - statistic(x, axis=axis)

        return inner

    def ci(statistic):
        result = sps.bootstrap(
            (a, b),
            diff(statistic),
            confidence_level=confidence,
            n_resamples=n_resamples,
            method=method,
            vectorized=True,
            paired=False,
            random_state=np.random.default_rng(seed),
        )
        return float(result.confidence_interval.low), float(result.confidence_interval.high)

    test = sps.mannwhitneyu(a, b, alternative="two-sided")
    median_a, median_b = float(np.median(a)), float(np.median(b))
    p99_a, p99_b = float(_p99(a)), float(_p99(b))
    return Comparison(
        n_a=int(a.size),
        n_b=int(b.size),
        median_a=median_a,
        median_b=median_b,
        median_diff=median_b - median_a,
        median_diff_ci=ci(_median),
        p99_a=p99_a,
        p99_b=p99_b,
        p99_diff=p99_b - p99_a,
        p99_diff_ci=ci(_p99),
        mannwhitney_u=float(test.statistic),
        mannwhitney_p=float(test.pvalue),
        confidence=confidence,
    )


def compare_groups(df: pd.DataFrame, value: str, by: str, a, b, *, ok: str | None = "ok", **kwargs) -> Comparison:
    """:func:`compare` for the rows of ``df`` whose ``by`` column equals ``a`` and ``b``."""
    sample_a = _samples(df[df[by] == a], value, ok)
    sample_b = _samples(df[df[by] == b], value, ok)
    return compare(sample_a, sample_b, **kwargs)

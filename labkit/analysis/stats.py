"""Descriptive statistics of one sample, as a small class of cached properties.

Each property's docstring is its definition. Quantiles use linear
interpolation between order statistics (numpy's and pandas' default), and the
standard deviation is the sample one (ddof=1), as in ``DataFrame.describe``,
so labkit's tables can be set beside the 2016 write-up's.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

#: 1 / Φ⁻¹(3/4): scales a median absolute deviation to a normal σ.
MAD_TO_SIGMA = 1.482602218505602


class Stats:
    """Statistics of the finite values in ``values``; NaN marks a lost sample and is counted, not used."""

    def __init__(self, values) -> None:
        array = np.asarray(values, dtype=float).ravel()
        self._finite = np.sort(array[np.isfinite(array)])
        self._nan = int(np.isnan(array).sum())

    def _q(self, q: float) -> float:
        return float(np.quantile(self._finite, q)) if self.count else float("nan")

    @cached_property
    def count(self) -> int:
        """Number of finite values."""
        return int(self._finite.size)

    @cached_property
    def lost(self) -> int:
        """Number of NaN values (lost or failed samples)."""
        return self._nan

    @cached_property
    def mean(self) -> float:
        """Arithmetic mean."""
        return float(self._finite.mean()) if self.count else float("nan")

    @cached_property
    def std(self) -> float:
        """Sample standard deviation (ddof=1)."""
        return float(self._finite.std(ddof=1)) if self.count > 1 else float("nan")

    @cached_property
    def min(self) -> float:
        """Smallest value."""
        return float(self._finite[0]) if self.count else float("nan")

    @cached_property
    def max(self) -> float:
        """Largest value."""
        return float(self._finite[-1]) if self.count else float("nan")

    @cached_property
    def p5(self) -> float:
        """5th percentile."""
        return self._q(0.05)

    @cached_property
    def q25(self) -> float:
        """First quartile (25th percentile)."""
        return self._q(0.25)

    @cached_property
    def median(self) -> float:
        """Median (50th percentile)."""
        return self._q(0.5)

    @cached_property
    def q75(self) -> float:
        """Third quartile (75th percentile)."""
        return self._q(0.75)

    @cached_property
    def p95(self) -> float:
        """95th percentile."""
        return self._q(0.95)

    @cached_property
    def p99(self) -> float:
        """99th percentile."""
        return self._q(0.99)

    @cached_property
    def iqr(self) -> float:
        """Interquartile range, q75 − q25."""
        return self.q75 - self.q25

    @cached_property
    def mad(self) -> float:
        """Median absolute deviation from the median (unscaled)."""
        return float(np.median(np.abs(self._finite - self.median))) if self.count else float("nan")

    @cached_property
    def robust_sigma(self) -> float:
        """MAD scaled to estimate σ of a normal sample (1.4826 × MAD)."""
        return MAD_TO_SIGMA * self.mad

    def as_row(self) -> dict[str, float]:
        """The summary-table row: count, lost, mean, std, min, p5, 25%, 50%, 75%, p95, p99, max."""
        return {
            "count": self.count,
            "lost": self.lost,
            "mean": self.mean,
            "std": self.std,
            "min": self.min,
            "p5": self.p5,
            "25%": self.q25,
            "50%": self.median,
            "75%": self.q75,
            "p95": self.p95,
            "p99": self.p99,
            "max": self.max,
        }

"""Pure analysis on DataFrames: trim, summarise, compare, fit.

Nothing here knows about hosts, runs or files: every function takes a
DataFrame (or arrays) and returns new data, so notebooks and ``labkit report``
compute the same numbers and tests can check them against numpy/scipy.
"""

from labkit.analysis.fits import (
    Fit,
    fit_linear,
    fit_slow_start,
    locate_change_point,
    locate_change_points,
    slow_start_rounds,
    step_edges,
)
from labkit.analysis.stats import Stats
from labkit.analysis.summary import (
    Comparison,
    bootstrap_ci,
    compare,
    compare_groups,
    summarize,
    summarize_with_ci,
)
from labkit.analysis.trim import TrimResult, zscore_scores, zscore_trim

__all__ = [
    "Comparison",
    "Fit",
    "Stats",
    "TrimResult",
    "bootstrap_ci",
    "compare",
    "compare_groups",
    "fit_linear",
    "fit_slow_start",
    "locate_change_point",
    "locate_change_points",
    "slow_start_rounds",
    "step_edges",
    "summarize",
    "summarize_with_ci",
    "zscore_scores",
    "zscore_trim",
]

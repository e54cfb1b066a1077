"""Per-cell statistics of a load test over its measured window (``labkit load``, the load and tuning notebooks).

A load cell runs its tool for warm-up + duration. h2load leaves the warm-up
out of its per-request log itself; ghz has no timed warm-up, so the rule of
:func:`measured_window` removes it: the calls that started within
``warmup_s`` of the first call are the warm-up, and the window is the next
``duration_s``. Both tools' per-request rows then give a cell's numbers
through one function, :func:`window_stats`.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def nearest_rank(sorted_values: list[float], percent: float) -> float:
    """The nearest-rank percentile: the smallest value with at least ``percent`` % of values at or below it.

    ghz computes its latencyDistribution the same way, so the two agree on its own data.
    """
    rank = max(1, math.ceil(percent / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def measured_window(rows: pd.DataFrame, warmup_s: float, duration_s: float, time_column: str = "t_utc") -> pd.DataFrame:
    """The per-request rows of a warm-up + duration run that fall in the measured window.

    Requests that started within ``warmup_s`` of the first request are the
    warm-up; the window is the ``duration_s`` after it (start inclusive, end
    exclusive).
    """
    import pandas as pd

    if not len(rows):
        return rows
    start = window_start(rows, warmup_s, time_column)
    end = start + pd.Timedelta(seconds=duration_s)
    return rows[(rows[time_column] >= start) & (rows[time_column] < end)]


def window_start(rows: pd.DataFrame, warmup_s: float, time_column: str = "t_utc"):
    """When the measured window of :func:`measured_window` opens: ``warmup_s`` after the first request started."""
    import pandas as pd

    return rows[time_column].min() + pd.Timedelta(seconds=warmup_s)


def window_stats(latency_ms, ok, window_s: float, statuses=None, errors=None) -> dict[str, Any]:
    """Per-cell numbers from per-request rows already restricted to the measured window.

    ``latency_ms`` and ``ok`` are sequences of equal length; ``statuses``
    (status name or code per request) and ``errors`` (error text, empty when
    none) are counted when given. Latency statistics are over successful
    requests only; ``rps`` is successful requests over ``window_s``.
    """
    latency_ms, ok = list(latency_ms), [bool(flag) for flag in ok]
    good = sorted(value for value, flag in zip(latency_ms, ok) if flag)
    stats = {
        "requests": len(ok),
        "ok": len(good),
        "errors": len(ok) - len(good),
        "rps": len(good) / window_s if window_s > 0 else 0.0,
        "latency_min_ms": good[0] if good else None,
        "latency_mean_ms": sum(good) / len(good) if good else None,
        "latency_p50_ms": nearest_rank(good, 50) if good else None,
        "latency_p90_ms": nearest_rank(good, 90) if good else None,
        "latency_p99_ms": nearest_rank(good, 99) if good else None,
        "latency_max_ms": good[-1] if good else None,
    }
    stats["status_codes"] = json.dumps(dict(Counter(str(s) for s in statuses)) if statuses is not None else {}, sort_keys=True)
    kinds = Counter(text for text in errors if text) if errors is not None else Counter()
    stats["error_kinds"] = json.dumps(dict(kinds.most_common(5)))
    return stats


def h2load_errors(statuses) -> list[str]:
    """The error text of each h2load request: '' for a 2xx, 'failed stream' for -1 (no response), else 'HTTP <status>'."""
    return ["failed stream" if s == -1 else "" if 200 <= s < 300 else f"HTTP {s}" for s in statuses]

"""Outlier trimming by z-score, in passes, with the count removed always reported.

The 2016 ping-vs-gRPC notebook trimmed |z| ≥ 3 in two passes over ping and
echo samples pooled together; :func:`zscore_trim` reproduces that
(``scope="pooled"``) and also trims within each group (``scope="per-group"``)
or with a robust z based on the median and MAD (``method="robust"``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from labkit.analysis.stats import MAD_TO_SIGMA

SCOPES = ("pooled", "per-group")
METHODS = ("classic", "robust")
#: mean absolute deviation × √(π/2) estimates a normal σ; used when the MAD is 0.
_MEANAD_TO_SIGMA = 1.2533141373155001


@dataclass
class TrimResult:
    """Rows kept and removed by a trim, and how many each pass removed.

    ``removed`` has the extra column ``trim_pass`` (1 for the first pass).
    ``counts`` has one row per group (one row ``all`` without groups) and the
    columns ``eligible`` (finite values of ok rows), ``removed_pass_1`` … ,
    ``removed`` and ``kept``; rows that were not eligible (lost samples) are
    never trimmed and stay in ``kept``: ``skipped`` counts them.
    """

    kept: pd.DataFrame
    removed: pd.DataFrame
    counts: pd.DataFrame
    settings: dict[str, Any] = field(default_factory=dict)
    #: One row per pass and scope (``all`` when pooled, else each group): the values scored (``n``), the
    #: ``center`` and ``scale`` of their z, the cut-offs ``low`` and ``high`` (center ∓ threshold × scale:
    #: values at or beyond them were removed), how many were ``removed`` and how many ``kept`` (what the
    #: next pass scores). Passes after one that removed nothing are not run, so they have no rows.
    cutoffs: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def n_removed(self) -> int:
        """Total number of rows removed by all passes."""
        return len(self.removed)


def _center_and_scale(values: np.ndarray, method: str) -> tuple[float, float]:
    """The center and spread z-scores are taken against; scale NaN when no spread can be had (fewer than 2 values, or 0)."""
    if values.size < 2:
        return float("nan"), float("nan")
    if method == "classic":
        center, scale = values.mean(), values.std(ddof=0)
    elif method == "robust":
        center = np.median(values)
        scale = MAD_TO_SIGMA * np.median(np.abs(values - center))
        if scale == 0:
            scale = _MEANAD_TO_SIGMA * np.mean(np.abs(values - center))
    else:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    return float(center), float(scale) if np.isfinite(scale) and scale != 0 else float("nan")


def zscore_scores(values: np.ndarray, method: str = "classic") -> np.ndarray:
    """z-scores of ``values``: classic (x − mean)/σ with ddof=0, as scipy.stats.zscore; robust (x − median)/(1.4826·MAD).

    Returns zeros when the spread is 0 (nothing can be an outlier then).
    """
    values = np.asarray(values, dtype=float)
    center, scale = _center_and_scale(values, method)
    if not np.isfinite(scale):
        return np.zeros_like(values)
    return (values - center) / scale


def zscore_trim(
    df: pd.DataFrame,
    value: str = "rtt_ms",
    *,
    by: str | list[str] | None = None,
    threshold: float = 3.0,
    passes: int = 2,
    scope: str = "pooled",
    method: str = "classic",
    ok: str | None = "ok",
) -> TrimResult:
    """Remove rows whose |z| ≥ ``threshold``, recomputing z on the survivors for each of ``passes``.

    ``scope="pooled"`` computes z over all groups together (the 2016 notebook);
    ``"per-group"`` within each group of ``by``. Only rows with a finite
    ``value`` (and a true ``ok`` column, when there is one) are scored; a pass
    that removes nothing ends the trim early.
    """
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, not {scope!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    if passes < 1:
        raise ValueError("passes must be at least 1")
    by_list = [by] if isinstance(by, str) else list(by or [])

    values = pd.to_numeric(df[value], errors="coerce").to_numpy(dtype=float)
    eligible = np.isfinite(values)
    if ok is not None and ok in df.columns:
        eligible &= df[ok].fillna(False).to_numpy(dtype=bool)
    group_keys = _group_keys(df, by_list)
    removed_in = np.zeros(len(df), dtype=int)

    cutoffs = []
    for pass_number in range(1, passes + 1):
        alive = eligible & (removed_in == 0)
        out = np.zeros(len(df), dtype=bool)
        scopes = {"all": alive} if scope == "pooled" else {key: alive & (group_keys == key) for key in np.unique(group_keys)}
        for key, mask in scopes.items():
            positions = np.flatnonzero(mask)
            center, scale = _center_and_scale(values[positions], method)
            removed_here = positions[np.abs(zscore_scores(values[positions], method)) >= threshold]
            out[removed_here] = True
            cutoffs.append({"pass": pass_number, "scope": key, "n": positions.size, "center": center, "scale": scale,
                            "low": center - threshold * scale, "high": center + threshold * scale,
                            "removed": removed_here.size, "kept": positions.size - removed_here.size})
        if not out.any():
            break
        removed_in[out] = pass_number

    kept = df[removed_in == 0]
    removed = df[removed_in > 0].assign(trim_pass=removed_in[removed_in > 0])
    counts = _counts(group_keys, eligible, removed_in, passes, by_list)
    settings = {"value": value, "by": by_list, "threshold": threshold, "passes": passes, "scope": scope, "method": method}
    return TrimResult(kept=kept, removed=removed, counts=counts, settings=settings,
                      cutoffs=pd.DataFrame(cutoffs).set_index(["pass", "scope"]))


def _group_keys(df: pd.DataFrame, by: list[str]) -> np.ndarray:
    if not by:
        return np.full(len(df), "all", dtype=object)
    if len(by) == 1:
        return df[by[0]].astype(str).to_numpy(dtype=object)
    return df[by].astype(str).agg(" / ".join, axis=1).to_numpy(dtype=object)


def _counts(keys, eligible, removed_in, passes, by) -> pd.DataFrame:
    rows = []
    for key in pd.unique(keys):
        mask = keys == key
        row = {"group": key, "eligible": int((mask & eligible).sum()), "skipped": int((mask & ~eligible).sum())}
        for p in range(1, passes + 1):
            row[f"removed_pass_{p}"] = int((mask & (removed_in == p)).sum())
        row["removed"] = int((mask & (removed_in > 0)).sum())
        row["kept"] = int(mask.sum()) - row["removed"]
        rows.append(row)
    frame = pd.DataFrame(rows).set_index("group")
    frame.index.name = " / ".join(by) if by else None
    return frame

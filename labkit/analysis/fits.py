"""Models of latency against payload size, each returning parameters, uncertainty and residuals.

- :func:`fit_linear`: ``rtt = a + size / b``, with ``b`` the effective bandwidth.
- :func:`fit_slow_start`: the number of round trips TCP slow start needs to
  send ``size`` bytes from a congestion window of ``iw`` segments of ``mss``
  bytes, doubling every round trip, times the base RTT. ``iw`` and ``mss``
  come from the run's recorded TCP state, or are fitted (only their product,
  the initial window in bytes, shows in latency, so with neither given the
  window itself is fitted).
- :func:`locate_change_point`: where latency jumps, without assuming a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from scipy import stats as sps


@dataclass
class Fit:
    """A fitted model: ``params`` and their ``stderr`` (NaN where none is defined), ``intervals``
    (a range of values consistent with the data, or a confidence interval, per parameter),
    and the data with ``fitted`` values and ``residuals`` (observed − fitted)."""

    model: str
    params: dict[str, float]
    stderr: dict[str, float]
    intervals: dict[str, tuple[float, float]]
    x: np.ndarray
    y: np.ndarray
    fitted: np.ndarray
    residuals: np.ndarray
    notes: dict = field(default_factory=dict)
    _predict: Callable[[np.ndarray], np.ndarray] | None = field(default=None, repr=False)

    @property
    def rss(self) -> float:
        """Residual sum of squares."""
        return float(np.sum(self.residuals**2))

    def predict(self, size) -> np.ndarray:
        """Model latency (ms) at the given sizes (bytes)."""
        return self._predict(np.asarray(size, dtype=float))


def _xy(size, rtt) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(size, dtype=float).ravel()
    y = np.asarray(rtt, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError("size and rtt must have the same length")
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


# --- linear ------------------------------------------------------------------------


def fit_linear(size, rtt_ms) -> Fit:
    """Least-squares ``rtt = a + size / b``: ``intercept_ms`` a, and the bandwidth b in bytes/s and Mbit/s.

    The bandwidth's standard error comes from the slope's by the delta method.
    """
    x, y = _xy(size, rtt_ms)
    if np.unique(x).size < 2:
        raise ValueError("a linear fit needs at least two distinct sizes")
    reg = sps.linregress(x, y)
    slope, se_slope = reg.slope, reg.stderr
    bytes_per_s = 1000.0 / slope if slope != 0 else float("inf")
    se_bytes_per_s = 1000.0 * se_slope / slope**2 if slope != 0 else float("nan")
    fitted = reg.intercept + slope * x
    t = sps.t.ppf(0.975, max(x.size - 2, 1))
    return Fit(
        model="linear",
        params={
            "intercept_ms": reg.intercept,
            "slope_ms_per_byte": slope,
            "bandwidth_bytes_per_s": bytes_per_s,
            "bandwidth_mbit_s": bytes_per_s * 8 / 1e6,
            "r2": reg.rvalue**2,
        },
        stderr={
            "intercept_ms": reg.intercept_stderr,
            "slope_ms_per_byte": se_slope,
            "bandwidth_bytes_per_s": se_bytes_per_s,
            "bandwidth_mbit_s": se_bytes_per_s * 8 / 1e6,
            "r2": float("nan"),
        },
        intervals={
            "intercept_ms": (reg.intercept - t * reg.intercept_stderr, reg.intercept + t * reg.intercept_stderr),
            "slope_ms_per_byte": (slope - t * se_slope, slope + t * se_slope),
        },
        x=x,
        y=y,
        fitted=fitted,
        residuals=y - fitted,
        _predict=lambda s: reg.intercept + slope * s,
    )


# --- slow start ---------------------------------------------------------------------

_MAX_ROUNDS = 64


def slow_start_rounds(size, iw: float, mss: float = 1.0, overhead_bytes: float = 0.0) -> np.ndarray:
    """Round trips needed to send ``size`` bytes in slow start: the least k ≥ 1 with iw·(2^k − 1) ≥ ⌈(size+overhead)/mss⌉.

    With ``mss=1`` the window ``iw`` is in bytes. A call that fits in the
    initial window takes one round trip, the one every request needs.
    """
    size = np.asarray(size, dtype=float)
    segments = np.ceil((size + overhead_bytes) / mss)
    rounds = np.ones(size.shape, dtype=int)
    capacity = iw  # segments sent after k rounds: iw·(2^k − 1)
    for k in range(1, _MAX_ROUNDS):
        need_more = segments > capacity
        if not need_more.any():
            break
        rounds[need_more] = k + 1
        capacity = iw * (2 ** (k + 1) - 1)
    return rounds


def _base_fit(rounds: np.ndarray, y: np.ndarray, robust: bool) -> tuple[float, float]:
    """Base RTT minimising the loss of ``y ≈ base · rounds``, and that loss."""
    if robust:
        base = float(np.median(y / rounds))
        return base, float(np.sum(np.abs(y - base * rounds)))
    base = float(np.dot(rounds, y) / np.dot(rounds, rounds))
    return base, float(np.sum((y - base * rounds) ** 2))


def _base_uncertainty(rounds: np.ndarray, y: np.ndarray, base: float, robust: bool, given: bool,
                      n_boot: int = 500, seed: int = 0) -> tuple[float, tuple[float, float]]:
    """The base RTT's standard error and 95 % interval (the round counts held fixed). Least squares: its textbook
    formula. The robust fit's base is a median of y / rounds, for which that formula is wrong: a seeded bootstrap of
    the calls gives both. A given base has none."""
    if given:
        return 0.0, (base, base)
    if robust:
        ratios = y / rounds
        picks = np.random.default_rng(seed).integers(0, ratios.size, size=(n_boot, ratios.size))
        draws = np.median(ratios[picks], axis=1)
        return float(draws.std(ddof=1)), (float(np.quantile(draws, 0.025)), float(np.quantile(draws, 0.975)))
    dof = max(y.size - 1, 1)
    se = float(np.sqrt(np.sum((y - base * rounds) ** 2) / dof / np.dot(rounds, rounds)))
    return se, (base - 1.96 * se, base + 1.96 * se)


def _window_candidates(x: np.ndarray, unit: float) -> np.ndarray:
    """Values of the window (in units of ``unit`` bytes) at which some size changes its round count."""
    segs = np.unique(np.ceil(x / unit))
    segs = segs[segs > 0]
    ks = 2.0 ** np.arange(1, 20) - 1
    return np.unique(segs[:, None] / ks[None, :])


def _slow_start_candidates(xo: np.ndarray, iw, mss, iw_max: int, mss_bounds) -> tuple[np.ndarray, str]:
    """The values to search and which quantity they are: "none" (both given), "iw", "mss" or "window" (bytes)."""
    if iw is not None and mss is not None:
        return np.array([float(iw)]), "none"
    if mss is not None:
        return np.arange(1, iw_max + 1, dtype=float), "iw"
    if iw is not None:
        # Rounds change where ⌈size/mss⌉ crosses iw·(2^k − 1): mss = size / (iw·(2^k − 1)).
        ks = 2.0 ** np.arange(1, 20) - 1
        crit = np.ceil(xo[:, None] / (iw * ks[None, :])).ravel()
        crit = crit[(crit >= mss_bounds[0]) & (crit <= mss_bounds[1])]
        return np.unique(np.concatenate([crit, mss_bounds]).astype(float)), "mss"
    return np.unique(_window_candidates(xo, 1.0)), "window"


def _window_and_unit(value: float, fitted: str, iw, mss) -> tuple[float, float]:
    """The (window, segment size) pair a candidate value stands for."""
    if fitted == "mss":
        return float(iw), float(value)
    if fitted == "window":
        return float(value), 1.0
    return float(value), float(mss)


def _slow_start_loss(xo, y, window, unit, base_rtt_ms, robust) -> tuple[float, float, np.ndarray]:
    """Base RTT (given or fitted), the loss, and the rounds per sample, for one window."""
    rounds = slow_start_rounds(xo, window, unit)
    if base_rtt_ms is None:
        base, loss = _base_fit(rounds, y, robust)
        return base, loss, rounds
    r = y - base_rtt_ms * rounds
    return base_rtt_ms, float(np.sum(np.abs(r)) if robust else np.sum(r**2)), rounds


def _flat_optimum(candidates: np.ndarray, losses: np.ndarray, fitted: str) -> tuple[float, float, float]:
    """The best value and the range (low, high) over which the loss stays at its minimum.

    The loss is constant from the first best candidate up to (not including)
    the candidate after the last: every value in that range fits equally
    well, and the middle of it is reported.
    """
    best = int(np.argmin(losses))
    tol = 1e-9 * max(1.0, abs(losses[best]))
    lo_idx = hi_idx = best
    while lo_idx > 0 and abs(losses[lo_idx - 1] - losses[best]) <= tol:
        lo_idx -= 1
    while hi_idx + 1 < candidates.size and abs(losses[hi_idx + 1] - losses[best]) <= tol:
        hi_idx += 1
    low = float(candidates[lo_idx])
    has_next = hi_idx + 1 < candidates.size
    if fitted == "window":
        high = float(candidates[hi_idx + 1]) if has_next else float(candidates[hi_idx])
        return ((low + high) / 2 if has_next else low), low, high
    if fitted == "mss":
        high = float(candidates[hi_idx + 1] - 1) if has_next else float(candidates[hi_idx])
    else:
        high = float(candidates[hi_idx])
    return float((low + high) // 2), low, high


def fit_slow_start(
    size,
    rtt_ms,
    *,
    iw: int | None = None,
    mss: int | None = None,
    base_rtt_ms: float | None = None,
    overhead_bytes: float = 0.0,
    iw_max: int = 200,
    mss_bounds: tuple[int, int] = (500, 65535),
    robust: bool = False,
) -> Fit:
    """Fit ``rtt = base_rtt · rounds(size; iw, mss)`` (see :func:`slow_start_rounds`).

    Give ``iw`` and ``mss`` when the run recorded them (``ss -ti``: cwnd after
    idle and mss); whichever is missing is found by exhaustive search over the
    values where some size changes its number of round trips. Because only the
    window ``iw·mss`` shows in latency, ``intervals`` gives the whole range of
    the fitted quantity that fits equally well, and ``threshold_bytes`` is the
    first step, the largest request that still takes one round trip.
    ``robust=True`` minimises absolute instead of squared residuals (a few
    slow outliers then do not move the step).
    """
    x, y = _xy(size, rtt_ms)
    if x.size < 2:
        raise ValueError("a slow-start fit needs at least two samples")
    xo = x + overhead_bytes

    candidates, fitted_name = _slow_start_candidates(xo, iw, mss, iw_max, mss_bounds)

    def loss_at(value):
        return _slow_start_loss(xo, y, *_window_and_unit(value, fitted_name, iw, mss), base_rtt_ms, robust)

    losses = np.array([loss_at(value)[1] for value in candidates])
    value, low, high = _flat_optimum(candidates, losses, fitted_name)
    base, _, rounds = loss_at(value)
    window, unit = _window_and_unit(value, fitted_name, iw, mss)

    if fitted_name == "window":
        iw_fit = mss_fit = float("nan")
        window_bytes = float(value)
    else:
        iw_fit, mss_fit = window, unit
        window_bytes = iw_fit * mss_fit

    fitted = base * rounds
    residuals = y - fitted
    se_base, base_interval = _base_uncertainty(rounds, y, base, robust, given=base_rtt_ms is not None)
    intervals = {"base_rtt_ms": base_interval}
    if fitted_name != "none":
        # The fitted quantity's range, and the first step's range in request bytes.
        per_value = {"iw": mss_fit, "mss": iw_fit, "window": 1.0}[fitted_name]
        if fitted_name != "window":
            intervals[fitted_name] = (low, high)
        intervals["threshold_bytes"] = (low * per_value - overhead_bytes, high * per_value - overhead_bytes)

    def predict(s):
        return base * slow_start_rounds(np.asarray(s, dtype=float) + overhead_bytes, window, unit)

    return Fit(
        model="slow_start",
        params={
            "base_rtt_ms": base,
            "iw": iw_fit,
            "mss": mss_fit,
            "window_bytes": window_bytes,
            "threshold_bytes": window_bytes - overhead_bytes,
            "max_rounds": int(rounds.max()),
        },
        stderr={"base_rtt_ms": se_base},
        intervals=intervals,
        x=x,
        y=y,
        fitted=fitted,
        residuals=residuals,
        notes={"fitted": fitted_name, "rounds": rounds, "overhead_bytes": overhead_bytes, "robust": robust},
        _predict=predict,
    )


def step_edges(fit: Fit, max_size: float) -> list[float]:
    """Request sizes (bytes) where a slow-start fit predicts one more round trip, up to ``max_size``."""
    window = fit.params["window_bytes"]
    overhead = fit.notes.get("overhead_bytes", 0.0)
    edges = []
    k = 1
    while True:
        edge = window * (2**k - 1) - overhead
        if edge > max_size or k > _MAX_ROUNDS:
            return edges
        edges.append(edge)
        k += 1


# --- change point -------------------------------------------------------------------


def _best_split(x_sorted: np.ndarray, y_sorted: np.ndarray, robust: bool):
    """Best single split between distinct sizes: (cost, index of first right element) or None."""
    boundaries = np.flatnonzero(np.diff(x_sorted) > 0) + 1
    if boundaries.size == 0:
        return None
    if robust:
        costs = []
        for b in boundaries:
            left, right = y_sorted[:b], y_sorted[b:]
            costs.append(np.abs(left - np.median(left)).sum() + np.abs(right - np.median(right)).sum())
        costs = np.asarray(costs)
    else:
        n = y_sorted.size
        c1 = np.cumsum(y_sorted)
        c2 = np.cumsum(y_sorted**2)
        nl = boundaries.astype(float)
        nr = n - nl
        sl, sl2 = c1[boundaries - 1], c2[boundaries - 1]
        sr, sr2 = c1[-1] - sl, c2[-1] - sl2
        costs = (sl2 - sl**2 / nl) + (sr2 - sr**2 / nr)
    j = int(np.argmin(costs))
    return float(costs[j]), int(boundaries[j])


def locate_change_point(
    size, rtt_ms, *, robust: bool = False, n_boot: int = 200, seed: int = 0, confidence: float = 0.95
) -> Fit:
    """The size where latency jumps: the split between two adjacent distinct sizes that best separates two levels.

    ``location_bytes`` is the midpoint between ``last_before`` and
    ``first_after``: the data cannot place the jump more closely than that
    bracket. Its ``intervals`` entry widens the bracket by a seeded bootstrap
    over resampled rows (the lower quantile of ``last_before`` to the upper
    quantile of ``first_after``), and ``stderr`` is the bootstrap spread of
    the midpoint. ``robust=True`` uses medians and absolute deviations
    instead of means and squares.
    """
    x, y = _xy(size, rtt_ms)
    order = np.argsort(x, kind="stable")
    xs, ys = x[order], y[order]
    found = _best_split(xs, ys, robust)
    if found is None:
        raise ValueError("a change point needs at least two distinct sizes")
    _, b = found
    centre = np.median if robust else np.mean
    before, after = float(centre(ys[:b])), float(centre(ys[b:]))
    location = (xs[b - 1] + xs[b]) / 2

    rng = np.random.default_rng(seed)
    brackets = []
    for _ in range(n_boot):
        pick = rng.integers(0, x.size, x.size)
        bx, by_ = x[pick], y[pick]
        o = np.argsort(bx, kind="stable")
        res = _best_split(bx[o], by_[o], robust)
        if res is not None:
            bb = res[1]
            brackets.append((bx[o][bb - 1], bx[o][bb]))
    brackets = np.asarray(brackets, dtype=float).reshape(-1, 2)
    boots = brackets.mean(axis=1)
    alpha = (1 - confidence) / 2
    if brackets.size:
        ci = (
            float(min(np.quantile(brackets[:, 0], alpha), xs[b - 1])),
            float(max(np.quantile(brackets[:, 1], 1 - alpha), xs[b])),
        )
    else:
        ci = (float(xs[b - 1]), float(xs[b]))

    fitted = np.where(x < location, before, after)
    return Fit(
        model="change_point",
        params={
            "location_bytes": float(location),
            "last_before": float(xs[b - 1]),
            "first_after": float(xs[b]),
            "level_before_ms": before,
            "level_after_ms": after,
            "jump_ms": after - before,
        },
        stderr={"location_bytes": float(boots.std(ddof=1)) if boots.size > 1 else float("nan")},
        intervals={"location_bytes": ci},
        x=x,
        y=y,
        fitted=fitted,
        residuals=y - fitted,
        notes={"robust": robust, "n_boot": n_boot, "seed": seed},
        _predict=lambda s: np.where(np.asarray(s, dtype=float) < location, before, after),
    )


def _noise_sigma(y_sorted: np.ndarray) -> float:
    """Noise σ from successive differences (MAD-based, so level jumps barely count)."""
    d = np.diff(y_sorted)
    if d.size == 0:
        return 0.0
    return float(1.482602218505602 * np.median(np.abs(d - np.median(d))) / np.sqrt(2))


def locate_change_points(size, rtt_ms, n_changes: int = 2, *, robust: bool = False, penalty: float | None = None) -> list[float]:
    """Up to ``n_changes`` jump locations (bytes, ascending) by binary segmentation.

    Each step splits the segment whose best split lowers the cost most, and
    stops when no split lowers it by more than ``penalty``. By default the
    penalty is BIC-like, 2·σ²·ln n for squared costs (σ from successive
    differences), 2·σ·ln n for absolute ones: a heuristic that keeps noise from
    being reported as a step.
    """
    x, y = _xy(size, rtt_ms)
    order = np.argsort(x, kind="stable")
    xs, ys = x[order], y[order]
    if penalty is None:
        sigma = _noise_sigma(ys)
        penalty = 2 * (sigma if robust else sigma**2) * np.log(max(xs.size, 2))

    def cost(seg_y):
        if robust:
            return float(np.abs(seg_y - np.median(seg_y)).sum())
        return float(((seg_y - seg_y.mean()) ** 2).sum())

    segments = [(0, xs.size)]
    cuts: list[int] = []
    for _ in range(n_changes):
        best = None
        for i, (lo, hi) in enumerate(segments):
            found = _best_split(xs[lo:hi], ys[lo:hi], robust)
            if found is None:
                continue
            gain = cost(ys[lo:hi]) - found[0]
            if best is None or gain > best[0]:
                best = (gain, i, lo + found[1])
        if best is None or best[0] <= penalty:
            break
        _, i, cut = best
        lo, hi = segments.pop(i)
        segments[i:i] = [(lo, cut), (cut, hi)]
        cuts.append(cut)
    return sorted(float((xs[c - 1] + xs[c]) / 2) for c in cuts)

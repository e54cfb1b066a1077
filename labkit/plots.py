"""Figures for write-ups: one theme, ``ax=`` in, what was drawn out, reproducible files.

Every plot function takes ``ax=`` (a new themed figure when omitted) and
returns a :class:`Drawn`: the axes and the artists it added, by role, so
tests and notebooks can check structure (number of boxes, whisker ends,
labels) instead of pixels. :func:`export` writes PNG (300 dpi), SVG and PDF
(TrueType fonts) that are byte-identical for the same figure.

Heavy imports (matplotlib, seaborn) happen when this module is imported, so
import it only where figures are made.
"""

from __future__ import annotations

import contextlib
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from cycler import cycler
from matplotlib import cbook

from labkit.analysis.explain import COMPONENTS

PALETTE = sns.color_palette("colorblind")

#: The labkit theme: seaborn's whitegrid at paper scale, colour-blind palette,
#: a font every machine with matplotlib has, and export settings that make
#: files reproducible (fixed SVG id salt, TrueType fonts in PDF/PS).
THEME: dict[str, Any] = {
    **sns.axes_style("whitegrid"),
    **sns.plotting_context("paper", font_scale=1.1),
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "axes.prop_cycle": cycler(color=PALETTE),
    "axes.titleweight": "bold",
    "figure.figsize": (6.4, 4.0),
    "figure.dpi": 100,
    "figure.constrained_layout.use": True,
    "savefig.dpi": 300,
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "svg.fonttype": "path",
    "svg.hashsalt": "labkit",
    "path.simplify": True,
}

#: File metadata without dates or versions, so two exports of one figure are byte-identical.
_METADATA = {
    "png": {"Software": None},
    "svg": {"Date": None, "Creator": None},
    "pdf": {"CreationDate": None, "ModDate": None, "Creator": None, "Producer": None},
}


@dataclass
class Drawn:
    """What a plot function drew: its axes and the artists it added, keyed by role."""

    ax: plt.Axes
    artists: dict[str, list] = field(default_factory=dict)

    @property
    def figure(self) -> plt.Figure:
        return self.ax.figure


def theme() -> contextlib.AbstractContextManager:
    """A context in which matplotlib uses the labkit theme: ``with plots.theme(): ...``."""
    return mpl.rc_context(THEME)


def figure(nrows: int = 1, ncols: int = 1, **kwargs):
    """A new themed figure and its axes (as ``plt.subplots``)."""
    with theme():
        return plt.subplots(nrows, ncols, **kwargs)


def _ax(ax):
    if ax is not None:
        return ax
    _, new = figure()
    return new


def group_colors(groups: Iterable) -> dict:
    """Palette colour per group, by the groups' sorted names, so a group keeps its colour in every figure; a colour
    of its own for each of any number of groups."""
    names = sorted({g for g in groups}, key=lambda g: "" if g is None else str(g))
    # More groups than the colour-blind palette has colours: evenly spaced hues, so no two groups share one.
    palette = PALETTE if len(names) <= len(PALETTE) else sns.color_palette("husl", len(names))
    return {g: palette[i] for i, g in enumerate(names)}


def _colors(df: pd.DataFrame, by: str | None) -> dict:
    """Colours for every group present in ``df`` (not only those drawn), independent of ``order``."""
    if by is None:
        return {None: PALETTE[0]}
    return group_colors(df[by].dropna().unique())


def _groups(df: pd.DataFrame, by: str | None, order: Sequence | None):
    if by is None:
        return [(None, df)]
    keys = list(order) if order is not None else sorted(df[by].dropna().unique(), key=str)
    return [(k, df[df[by] == k]) for k in keys]


def _ok_values(frame: pd.DataFrame, value: str, ok: str | None) -> np.ndarray:
    if ok is not None and ok in frame.columns:
        frame = frame[frame[ok].fillna(False).astype(bool)]
    v = pd.to_numeric(frame[value], errors="coerce").to_numpy(dtype=float)
    return v[np.isfinite(v)]


def _new_artists(ax, before: dict[str, int]) -> dict[str, list]:
    return {
        "lines": ax.lines[before["lines"]:],
        "collections": ax.collections[before["collections"]:],
        "patches": ax.patches[before["patches"]:],
    }


def _count(ax) -> dict[str, int]:
    return {"lines": len(ax.lines), "collections": len(ax.collections), "patches": len(ax.patches)}


# --- distributions -------------------------------------------------------------------------


#: Below this many values a group is drawn as its points and its median, not as a box: quartiles and whiskers of a
#: handful of points suggest a distribution nobody measured.
FEW_FOR_A_BOX = 20


def box(
    df: pd.DataFrame,
    value: str = "rtt_ms",
    by: str | None = None,
    *,
    whiskers: str | tuple[float, float] = (5, 95),
    order: Sequence | None = None,
    ok: str | None = "ok",
    ax=None,
    ylabel: str | None = None,
    every_value: bool = False,
) -> Drawn:
    """Box plot per group; whiskers at the 5th/95th percentiles (default) or ``whiskers="iqr"`` (1.5×IQR, Tukey).

    With percentile whiskers each whisker ends exactly at that percentile and
    every value beyond it is drawn as a point. Boxes span the quartiles, the
    line is the median. Lost samples (``ok`` false, NaN) are not drawn. A group
    of fewer than :data:`FEW_FOR_A_BOX` values gets no box: its values are
    drawn as points (jittered, seeded) with a line at their median. Each tick
    label ends with the group's n. ``every_value=True`` draws every value over
    the boxes too.
    """
    ax = _ax(ax)
    groups = [(key, _ok_values(frame, value, ok)) for key, frame in _groups(df, by, order)]
    boxed = [(position, key, values) for position, (key, values) in enumerate(groups, start=1)
             if len(values) >= FEW_FOR_A_BOX]
    stats = [_box_stats(values, whiskers, key) for _, key, values in boxed]
    colors = _colors(df, by)
    with theme():
        drawn = ax.bxp(stats, positions=[position for position, _, _ in boxed], patch_artist=True, showfliers=True,
                       widths=0.55, medianprops={"color": "black", "linewidth": 1.5},
                       flierprops={"marker": "o", "markersize": 3, "markerfacecolor": "none", "alpha": 0.7}) \
            if stats else {part: [] for part in ("whiskers", "caps", "boxes", "medians", "fliers", "means")}
        for patch, (_, key, _) in zip(drawn["boxes"], boxed):
            patch.set_facecolor(colors[key])
            patch.set_alpha(0.8)
        ax.set_ylabel(ylabel or value)
        if by:
            ax.set_xlabel(by)
    jitter = np.random.default_rng(0)
    drawn["values"], drawn["few_medians"] = [], []
    for position, (key, values) in enumerate(groups, start=1):
        if len(values) < FEW_FOR_A_BOX or every_value:
            drawn["values"].append(ax.scatter(position + jitter.uniform(-0.12, 0.12, len(values)), values, s=10,
                                              color="black" if len(values) >= FEW_FOR_A_BOX else colors[key],
                                              alpha=0.7, zorder=3))
        if 0 < len(values) < FEW_FOR_A_BOX:
            drawn["few_medians"].append(ax.hlines(np.median(values), position - 0.25, position + 0.25, color="black",
                                                  linewidth=1.5, zorder=4))
    ax.set_xticks(range(1, len(groups) + 1), [("" if key is None else f"{key}\n") + f"n={len(values)}"
                                              for key, values in groups])
    ax.set_xlim(0.4, len(groups) + 0.6)
    label = "5th–95th percentile" if whiskers != "iqr" else "1.5×IQR"
    if whiskers not in ("iqr", (5, 95)):
        label = f"{whiskers[0]:g}th–{whiskers[1]:g}th percentile"
    if len(boxed) < len(groups):
        label += f"; under {FEW_FOR_A_BOX} values: points and median"
    ax.set_title(ax.get_title() or f"whiskers: {label}", fontsize="small", loc="right")
    return Drawn(ax, {**drawn, "stats": stats})


def _box_stats(values: np.ndarray, whiskers, key) -> dict:
    if whiskers == "iqr":
        (s,) = cbook.boxplot_stats(values, whis=1.5)
    else:
        low_q, high_q = whiskers
        (s,) = cbook.boxplot_stats(values, whis=(low_q, high_q))
        s["whislo"], s["whishi"] = np.percentile(values, [low_q, high_q])
        s["fliers"] = values[(values < s["whislo"]) | (values > s["whishi"])]
    s["label"] = "" if key is None else str(key)
    return s


def rtt_axis(ax, ping_ms: float):
    """A right-hand axis giving a latency axis in ms as multiples of the ping RTT ``ping_ms``."""
    secondary = ax.secondary_yaxis("right", functions=(lambda ms: ms / ping_ms, lambda m: m * ping_ms))
    secondary.set_ylabel(f"× ping RTT ({ping_ms:.1f} ms)")
    return secondary


def violin(
    df: pd.DataFrame, value: str = "rtt_ms", by: str | None = None, *, order=None, ok: str | None = "ok", ax=None
) -> Drawn:
    """Violin (a KDE per group, cut at the data's range) with the quartiles drawn inside."""
    ax = _ax(ax)
    groups = _groups(df, by, order)
    keys = [k for k, _ in groups]
    data = pd.concat(
        [pd.DataFrame({value: _ok_values(f, value, ok), "_group": "" if k is None else str(k)}) for k, f in groups],
        ignore_index=True,
    )
    before = _count(ax)
    with theme():
        sns.violinplot(
            data=data, x="_group", y=value, hue="_group", order=[str(k or "") for k in keys],
            palette={str(k or ""): _colors(df, by)[k] for k in keys}, inner="quart", cut=0,
            legend=False, ax=ax,
        )
        ax.set_xlabel(by or "")
    new = _new_artists(ax, before)
    return Drawn(ax, {"bodies": new["collections"], "quartiles": new["lines"]})


def ecdf(df: pd.DataFrame, value: str = "rtt_ms", by: str | None = None, *, order=None, ok: str | None = "ok", ax=None) -> Drawn:
    """Empirical CDF per group."""
    ax = _ax(ax)
    lines = []
    colors = _colors(df, by)
    with theme():
        for key, frame in _groups(df, by, order):
            v = np.sort(_ok_values(frame, value, ok))
            (line,) = ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", color=colors[key], label=str(key or value))
            lines.append(line)
        ax.set_xlabel(value)
        ax.set_ylabel("proportion ≤ x")
        ax.set_ylim(0, 1.01)
        if by:
            ax.legend(title=by)
    return Drawn(ax, {"lines": lines})


def kde(df: pd.DataFrame, value: str = "rtt_ms", by: str | None = None, *, order=None, ok: str | None = "ok", ax=None) -> Drawn:
    """Kernel density estimate per group (seaborn, Scott's bandwidth, cut at the data's range)."""
    ax = _ax(ax)
    groups = _groups(df, by, order)
    colors = _colors(df, by)
    before = _count(ax)
    with theme():
        for key, frame in groups:
            sns.kdeplot(x=_ok_values(frame, value, ok), color=colors[key], label=str(key or value), cut=0, ax=ax)
        ax.set_xlabel(value)
        if by:
            ax.legend(title=by)
    return Drawn(ax, {"lines": _new_artists(ax, before)["lines"]})


# --- latency against size, time and TCP state ----------------------------------------------------


def legend_below(ax):
    """The axes' legend below them, off the data (two columns, small type)."""
    return ax.legend(fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)


def latency_vs_size(
    df: pd.DataFrame,
    size: str = "payload_bytes",
    value: str = "rtt_ms",
    *,
    fits: Sequence = (),
    by: str | None = None,
    order=None,
    ok: str | None = "ok",
    step_fit=None,
    dodge: float = 0.04,
    legend_outside: bool = False,
    ax=None,
) -> Drawn:
    """Latency against request size, with fitted models (``labkit.analysis.Fit``) and the predicted steps.

    ``fits`` are drawn as lines over the size range; ``step_fit`` (a slow-start
    fit) adds a dashed vertical line at every size where it predicts one more
    round trip. With several groups, each group's points are moved apart along
    x by a factor of ``1 + dodge`` (the same distance on a log axis), so that
    conditions measured at the same sizes do not hide one another; the sizes
    themselves are the data's. ``legend_outside`` puts the legend below the axes,
    off the data.
    """
    from labkit.analysis.fits import step_edges

    ax = _ax(ax)
    artists: dict[str, list] = {"points": [], "fits": [], "steps": []}
    with theme():
        groups = list(_groups(df, by, order))
        colors = _colors(df, by)
        for i, (key, frame) in enumerate(groups):
            if ok is not None and ok in frame.columns:
                frame = frame[frame[ok].fillna(False).astype(bool)]
            shift = (1 + dodge) ** (i - (len(groups) - 1) / 2) if len(groups) > 1 else 1.0
            artists["points"].append(
                ax.scatter(pd.to_numeric(frame[size]) * shift, frame[value], s=12, alpha=0.6, color=colors[key],
                           label=str(key) if key is not None else "calls")
            )
        if len(df):
            # Models only over the sizes measured: a line beyond them would show what no call did.
            sizes = pd.to_numeric(df[size])
            grid = np.linspace(float(sizes.min()), float(sizes.max()), 800)
            for i, fit in enumerate(fits):
                (line,) = ax.plot(grid, fit.predict(grid), color="black", linestyle=["-", "--", ":", "-."][i % 4], linewidth=1.2,
                                  label=_fit_label(fit))
                artists["fits"].append(line)
            if step_fit is not None:
                for edge in step_edges(step_fit, grid[-1]):
                    artists["steps"].append(ax.axvline(edge, color="0.4", linestyle="--", linewidth=0.8))
                if artists["steps"]:
                    artists["steps"][0].set_label("predicted step")
        ax.set_xlabel(f"{size}")
        ax.set_ylabel(value)
        if legend_outside:
            legend_below(ax)
        else:
            ax.legend(fontsize="small")
    return Drawn(ax, artists)


def _fit_label(fit) -> str:
    p = fit.params
    if fit.model == "linear":
        return f"linear: {p['intercept_ms']:.1f} ms + size / {p['bandwidth_mbit_s']:.1f} Mbit/s"
    if fit.model == "slow_start":
        return f"slow start: {p['base_rtt_ms']:.1f} ms × rounds, window {p['window_bytes']:.0f} B"
    if fit.model == "change_point":
        return f"change point at {p['location_bytes']:.0f} B"
    return fit.model


def time_series(
    df: pd.DataFrame,
    time: str = "t_utc",
    value: str = "rtt_ms",
    by: str | None = None,
    *,
    window: int = 30,
    order=None,
    ok: str | None = "ok",
    ax=None,
) -> Drawn:
    """Samples over time with a centred rolling median of ``window`` samples; lost samples as ticks along the bottom."""
    ax = _ax(ax)
    artists: dict[str, list] = {"points": [], "medians": [], "lost": []}
    with theme():
        groups = _groups(df, by, order)
        colors = _colors(df, by)
        for key, frame in groups:
            frame = frame.sort_values(time)
            good = frame[frame[ok].fillna(False).astype(bool)] if ok and ok in frame.columns else frame
            good = good[np.isfinite(pd.to_numeric(good[value], errors="coerce"))]
            artists["points"].append(ax.scatter(good[time], good[value], s=4, alpha=0.35, color=colors[key]))
            rolling = good[value].rolling(window, center=True, min_periods=max(1, window // 2)).median()
            (line,) = ax.plot(good[time], rolling, color=colors[key], linewidth=1.5,
                              label=f"{key if key is not None else value} (median of {window})")
            artists["medians"].append(line)
            if ok and ok in frame.columns:
                lost = frame[~frame[ok].fillna(False).astype(bool)]
                if len(lost):
                    artists["lost"].append(
                        ax.scatter(lost[time], np.zeros(len(lost)), marker="|", s=80, color=colors[key],
                                   transform=ax.get_xaxis_transform(), clip_on=False, label=f"lost ({len(lost)})")
                    )
        ax.set_xlabel(time)
        ax.set_ylabel(value)
        ax.legend(fontsize="small")
    return Drawn(ax, artists)


def cwnd_vs_size(
    df: pd.DataFrame,
    size: str = "payload_bytes",
    cwnd: str = "cwnd_before",
    *,
    mss: float | None = None,
    iw: float | None = None,
    by: str | None = None,
    order=None,
    ax=None,
) -> Drawn:
    """Congestion window (segments) recorded before each call against the call's size.

    With ``mss``, a line shows the segments each size needs: calls below it
    could not go out in one flight. With ``iw``, a line marks the initial window.
    """
    ax = _ax(ax)
    artists: dict[str, list] = {"points": [], "needed": [], "iw": []}
    with theme():
        groups = _groups(df, by, order)
        colors = _colors(df, by)
        for key, frame in groups:
            artists["points"].append(
                ax.scatter(frame[size], frame[cwnd], s=14, alpha=0.7, color=colors[key], label=str(key) if key is not None else cwnd)
            )
        if mss and len(df):
            grid = np.linspace(0, float(pd.to_numeric(df[size]).max()) * 1.02, 400)
            (line,) = ax.plot(grid, np.ceil(grid / mss), color="black", linewidth=1, label=f"segments needed (MSS {mss:g} B)")
            artists["needed"].append(line)
        if iw:
            artists["iw"].append(ax.axhline(iw, color="0.4", linestyle="--", linewidth=0.8, label=f"initial window {iw:g}"))
        ax.set_xlabel(size)
        ax.set_ylabel(f"{cwnd} (segments)")
        ax.legend(fontsize="small")
    return Drawn(ax, artists)


# --- summaries against a knob --------------------------------------------------------------------


#: A line (and band) joins a group's points only from this many on.
FEW_FOR_A_LINE = 4


def lines_with_ci(
    table: pd.DataFrame,
    x: str,
    y: str,
    lo: str | None = None,
    hi: str | None = None,
    by: str | None = None,
    *,
    order=None,
    logx: bool = False,
    logy: bool = False,
    dodge: float = 0.04,
    ax=None,
    xlabel: str | None = None,
    ylabel: str | None = None,
) -> Drawn:
    """A summary (one row per group and ``x``: e.g. a median) as a line per group, with its interval as a band.

    ``table`` is already summarised (e.g. ``summarize_with_ci(...).reset_index()``):
    ``y`` is drawn against ``x`` with markers, sorted by ``x``; with ``lo`` and
    ``hi`` (e.g. ``50%_lo``, ``50%_hi``) the interval between them is shaded in
    the group's colour. Rows whose ``y`` is missing are not drawn. A group of fewer than :data:`FEW_FOR_A_LINE`
    points is drawn unjoined, its intervals as error bars, and such groups are moved apart along x by a factor of
    ``1 + dodge`` each, so that error bars at the same ``x`` do not hide one another.
    """
    ax = _ax(ax)
    artists: dict[str, list] = {"lines": [], "bands": []}
    with theme():
        colors = _colors(table, by)
        groups = _groups(table, by, order)
        for i, (key, frame) in enumerate(groups):
            frame = frame[np.isfinite(pd.to_numeric(frame[y], errors="coerce"))].sort_values(x)
            if frame.empty:
                continue
            label = str(key) if key is not None else y
            # Through fewer than FEW_FOR_A_LINE points a line and a band imply a trend nobody measured: points, each
            # with its interval as an error bar, instead.
            joined = len(frame) >= FEW_FOR_A_LINE
            shift = 1.0 if joined or len(groups) < 2 else (1 + dodge) ** (i - (len(groups) - 1) / 2)
            xs = pd.to_numeric(frame[x]).to_numpy(dtype=float) * shift
            (line,) = ax.plot(xs, frame[y], marker="o", markersize=4, linewidth=1.5 if joined else 0,
                              color=colors[key], label=label)
            artists["lines"].append(line)
            if lo is not None and hi is not None and joined:
                artists["bands"].append(
                    ax.fill_between(frame[x].to_numpy(dtype=float), frame[lo].to_numpy(dtype=float),
                                    frame[hi].to_numpy(dtype=float), color=colors[key], alpha=0.2, linewidth=0)
                )
            elif lo is not None and hi is not None:
                values = frame[y].to_numpy(dtype=float)
                spans = np.vstack([values - frame[lo].to_numpy(dtype=float), frame[hi].to_numpy(dtype=float) - values])
                artists["bands"].append(ax.errorbar(xs, values, yerr=np.clip(spans, 0, None), fmt="none",
                                                    ecolor=colors[key], elinewidth=1, capsize=3))
        if logx:
            ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(xlabel or x)
        ax.set_ylabel(ylabel or y)
        if by:
            ax.legend(title=by, fontsize="small")
    return Drawn(ax, artists)


def _category_ticks(ax, labels: list[str]) -> None:
    """One tick per category: a few short labels (sizes, transports) read level; more, or longer, are set at an
    angle rather than overlap (eight series of 13 characters did, side by side)."""
    level = max(map(len, labels), default=0) * len(labels) <= 30
    ax.set_xticks(np.arange(len(labels)), labels, rotation=0 if level else 30, ha="center" if level else "right")


def bars_with_ci(table: pd.DataFrame, x: str, y: str, lo: str | None = None, hi: str | None = None,
                 by: str | None = None, *, order=None, groups=None, ax=None, ylabel: str | None = None) -> Drawn:
    """One bar per ``x`` (in ``order``), side by side per ``by`` group (in ``groups``), with ``lo``–``hi`` as error bars.

    Missing bounds draw no error bar; a missing ``y`` draws no bar.
    """
    ax = _ax(ax)
    artists: dict[str, list] = {"bars": [], "errorbars": []}
    with theme():
        xs = list(order) if order is not None else list(dict.fromkeys(table[x]))
        keys = list(groups) if groups is not None else ([None] if by is None else list(dict.fromkeys(table[by])))
        colors = {None: PALETTE[0]} if by is None else group_colors(keys)
        width = 0.8 / len(keys)
        for i, key in enumerate(keys):
            frame = (table if key is None else table[table[by] == key]).set_index(x).reindex(xs)
            positions = np.arange(len(xs)) + (i - (len(keys) - 1) / 2) * width
            values = pd.to_numeric(frame[y], errors="coerce").to_numpy(dtype=float)
            drawn = np.isfinite(values)
            bars = ax.bar(positions[drawn], values[drawn], width=width, color=colors[key],
                          label=y if key is None else str(key))
            artists["bars"].extend(bars.patches)
            if lo is not None and hi is not None:
                low, high = (pd.to_numeric(frame[c], errors="coerce").to_numpy(dtype=float) for c in (lo, hi))
                bounded = drawn & np.isfinite(low) & np.isfinite(high)
                if bounded.any():
                    artists["errorbars"].append(ax.errorbar(
                        positions[bounded], values[bounded], yerr=[values[bounded] - low[bounded], high[bounded] - values[bounded]],
                        fmt="none", ecolor="0.2", capsize=3, linewidth=1))
        _category_ticks(ax, [str(v) for v in xs])
        ax.set_ylabel(ylabel or y)
        if by:
            ax.legend(title=by, fontsize="small")
    return Drawn(ax, artists)


def quantile_curves(table: pd.DataFrame, by: str, *, order=None, low: str | None = None, high: str | None = None,
                    ax=None, xlabel: str = "latency (ms)") -> Drawn:
    """Latency CDFs given as quantiles (``percent``, ``latency_ms`` per ``by`` group), log x, with an optional band
    between the ``low`` and ``high`` quantile columns (e.g. the fastest and slowest repeat)."""
    ax = _ax(ax)
    artists: dict[str, list] = {"lines": [], "bands": []}
    with theme():
        colors = _colors(table, by)
        for key, frame in _groups(table, by, order):
            frame = frame.sort_values("percent")
            (line,) = ax.plot(frame["latency_ms"], frame["percent"] / 100, color=colors[key], label=str(key))
            artists["lines"].append(line)
            if low is not None and high is not None:
                artists["bands"].append(ax.fill_betweenx(frame["percent"] / 100, frame[low], frame[high],
                                                         color=colors[key], alpha=0.2, linewidth=0))
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("proportion ≤ x")
        ax.set_ylim(0, 1.01)
        ax.legend(title=by, fontsize="small")
    return Drawn(ax, artists)


def components_stacked(table: pd.DataFrame, by: str, components: Sequence[str], *, order=None, ax=None,
                       ylabel: str = "ms (median per component)", legend: bool = True) -> Drawn:
    """One stacked bar per ``by`` group, in ``order`` (default: as they come): the median of each component column
    (``components``, in order) from the bottom up, each component in the colour it has in every such figure.
    Negative medians (a remainder below zero) are drawn below the axis; a group absent from ``table`` is a gap."""
    ax = _ax(ax)
    artists: dict[str, list] = {"bars": []}
    with theme():
        groups = list(order) if order is not None else list(dict.fromkeys(table[by]))
        medians = table.groupby(by)[list(components)].median().reindex(groups)
        colors = dict(zip(COMPONENTS, PALETTE))  # in the components' own order: neighbours in a stack stay apart
        bottom_up, bottom_down = np.zeros(len(groups)), np.zeros(len(groups))
        for name in components:
            values = medians[name].fillna(0).to_numpy(dtype=float)
            base = np.where(values >= 0, bottom_up, bottom_down)
            bars = ax.bar(np.arange(len(groups)), values, bottom=base, color=colors[name], label=name, width=0.7)
            artists["bars"].extend(bars.patches)
            bottom_up += np.clip(values, 0, None)
            bottom_down += np.clip(values, None, 0)
        _category_ticks(ax, [str(g) for g in groups])
        ax.set_ylabel(ylabel)
        if legend:
            ax.legend(fontsize="small", ncols=2)
    return Drawn(ax, artists)


def components_facets(table: pd.DataFrame, panel: str, x: str, components: Sequence[str], *, panels=None,
                      x_order=None, x_label: str = "", axes=None, ylabel: str = "ms (median per component)"
                      ) -> list[Drawn]:
    """:func:`components_stacked` once per ``panel`` value (``panels``, default sorted), on ``axes`` (one per panel,
    sharing the y axis; default a new figure of up to four columns): each panel's groups are ``x`` in ``x_order``,
    its title the panel's value; one legend, below the panels, where it hides no bar."""
    panels = list(panels) if panels is not None else sorted(table[panel].unique())
    if axes is None:
        columns = min(4, len(panels))
        rows = -(-len(panels) // columns)
        _, grid = figure(rows, columns, sharey=True, squeeze=False,
                         figsize=(max(6.4, 0.45 * len(x_order or table[x].unique()) * columns + 1.5), 3.2 * rows))
        axes = grid.ravel()
        for unused in axes[len(panels):]:
            unused.set_visible(False)
    drawn = []
    for name, ax in zip(panels, axes):
        spec = ax.get_subplotspec()  # the y label on the first panel of each row of the grid
        one = components_stacked(table[table[panel] == name], x, components, order=x_order, ax=ax,
                                 ylabel=ylabel if spec is None or spec.is_first_col() else "", legend=False)
        ax.set_title(textwrap.fill(str(name), 28), fontsize="small")  # a condition of several knobs on two lines
        ax.set_xlabel(x_label)
        drawn.append(one)
    if drawn:
        handles, labels = drawn[0].ax.get_legend_handles_labels()
        drawn[0].figure.legend(handles, labels, loc="outside lower center", ncols=min(4, len(labels)), fontsize="small")
    return drawn


def time_sequence(packets: pd.DataFrame, start_ns: int, *, flights=(), ax=None) -> Drawn:
    """A tcptrace-style time-sequence graph of one call: the client's segments as vertical bars from their first to
    their last byte (retransmissions in the palette's red), the server's acknowledgements as a step line, and each flight's start
    (``flights``: ``(start_ns, kind)``) as a labelled vertical line; time in ms from ``start_ns``."""
    ax = _ax(ax)
    artists: dict[str, list] = {"segments": [], "acks": [], "flights": []}
    with theme():
        sent = packets[(packets["direction"] == "c2s") & (packets["length"] > 0)]
        t = (sent["t_ns"] - start_ns) / 1e6
        colors = [mpl.colors.to_hex(PALETTE[3] if resent else PALETTE[0]) for resent in sent["retransmit"].astype(bool)]
        artists["segments"].append(ax.vlines(t, sent["seq"], sent["seq"] + sent["length"], colors=colors, linewidth=2,
                                             label="data sent"))
        acks = packets[(packets["direction"] == "s2c") & packets["ack"].notna()]
        if len(acks):
            (line,) = ax.step((acks["t_ns"] - start_ns) / 1e6, acks["ack"].astype(float), where="post",
                              color=PALETTE[1], linewidth=1, label="acknowledged")
            artists["acks"].append(line)
        for flight_ns, kind in flights:
            x = (flight_ns - start_ns) / 1e6
            artists["flights"].append(ax.axvline(x, color="0.5", linestyle=":", linewidth=1))
            ax.annotate(kind, (x, 1.0), xycoords=("data", "axes fraction"), rotation=90, va="top", ha="right",
                        fontsize="x-small", color="0.3")
        ax.set_xlabel("time since the call started (ms)")
        ax.set_ylabel("sequence number (bytes)")
        ax.legend(fontsize="small", loc="lower right")
    return Drawn(ax, artists)


# --- export --------------------------------------------------------------------------------------


def export(fig, path_stem, formats: Sequence[str] = ("png", "svg", "pdf")) -> list[Path]:
    """Write ``fig`` as ``<path_stem>.<fmt>`` for each format; return the paths.

    PNG at 300 dpi, SVG with text as paths, PDF with TrueType (Type 42) fonts.
    Dates and tool versions are left out of the files and SVG ids are salted
    with a constant, so exporting the same figure twice gives identical bytes.
    """
    stem = Path(path_stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    for fmt in formats:
        if fmt not in _METADATA:
            raise ValueError(f"format must be one of {sorted(_METADATA)}, not {fmt!r}")
    # Constrained layout moves axes by a hair on every draw (~1e-9 of the
    # figure), enough to change SVG clip-path ids. Lay the figure out once,
    # round the axes positions to 1e-6, save with the layout frozen, and give
    # the engine back afterwards.
    engine = fig.get_layout_engine()
    fig.draw_without_rendering()
    fig.set_layout_engine("none")
    for ax in fig.axes:
        ax.set_position(np.round(ax.get_position(original=False).bounds, 6))
    paths = []
    try:
        with mpl.rc_context({k: THEME[k] for k in ("pdf.fonttype", "ps.fonttype", "svg.fonttype", "svg.hashsalt")}):
            for fmt in formats:
                path = stem.with_name(f"{stem.name}.{fmt}")
                fig.savefig(path, format=fmt, dpi=300, metadata=_METADATA[fmt])
                paths.append(path)
    finally:
        fig.set_layout_engine(engine)
    return paths

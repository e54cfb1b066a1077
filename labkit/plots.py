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
import re
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
from labkit.analysis.tables import shared_words  # noqa: F401 (plots.shared_words: what short_labels leaves out)
from labkit.units import format_size

#: seaborn's colour-blind palette, reordered so that the first colours any figure uses are the most distinct: its
#: orange and vermilion (1 and 3) side by side read as one colour, so vermilion comes late.
PALETTE = [sns.color_palette("colorblind")[i] for i in (0, 1, 2, 4, 9, 5, 6, 8, 3, 7)]

#: Widths of a printed figure, in inches: one column of a two-column paper, and the whole text width. A figure drawn
#: at its printed width keeps its type at the size the theme sets; a wider one shrinks it when it is placed.
ONE_COLUMN = 3.5
TWO_COLUMNS = 7.0
#: The smallest type (points) a printed figure keeps legible; :func:`layout_problems` flags anything smaller.
SMALLEST_TYPE_PT = 6.0

#: The same thing in the same colour in every notebook: a probe, a transport, a stack, an upload's condition. Names
#: not listed take the palette's other colours, in sorted order, figure by figure.
NAMED_COLORS: dict[str, tuple] = {
    # the series probes (ping is the path every other probe is read against)
    "echo-cold": PALETTE[0], "echo-warm": PALETTE[1], "ping": PALETTE[2], "tcp-echo": PALETTE[3],
    "tcp-connect": PALETTE[5], "irtt": PALETTE[6],
    # transports of the hop experiment and an upload's conditions
    "direct": PALETTE[9], "grpc": PALETTE[0], "grpc+TLS": PALETTE[1], "http2": PALETTE[2], "http2+TLS": PALETTE[3],
    "nats": PALETTE[4],
    # the processes of a hop, the stacks
    "front": PALETTE[1], "back": PALETTE[0], "python": PALETTE[0], "go": PALETTE[1],
    # what every difference is taken against
    "baseline": PALETTE[9],
}

#: Each component of a call (:data:`labkit.analysis.explain.COMPONENTS`) in its colour in every figure, in the
#: components' own order through seaborn's palette, so neighbours in a stack stay apart (the remainder grey).
COMPONENT_COLORS = dict(zip(COMPONENTS, sns.color_palette("colorblind")))

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
    "figure.figsize": (TWO_COLUMNS, 3.6),
    "figure.dpi": 100,
    "figure.constrained_layout.use": True,
    # A margin a secondary axis's label keeps inside too (at the default 3 pt it touched the edge).
    "figure.constrained_layout.w_pad": 6 / 72,
    "figure.constrained_layout.h_pad": 6 / 72,
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


def figure(nrows: int = 1, ncols: int = 1, *, width: float = TWO_COLUMNS, height: float | None = None, **kwargs):
    """A new themed figure and its axes (as ``plt.subplots``), ``width`` inches wide as it will be printed
    (:data:`TWO_COLUMNS` or :data:`ONE_COLUMN`) and ``height`` high (default: 3 in a row of panels, 3.6 for one)."""
    height = height if height is not None else (3.6 if nrows == 1 else 3.0 * nrows)
    kwargs.setdefault("figsize", (width, height))
    with theme():
        return plt.subplots(nrows, ncols, **kwargs)


def _ax(ax):
    if ax is not None:
        return ax
    _, new = figure()
    return new


def group_colors(groups: Iterable) -> dict:
    """Palette colour per group: a name of :data:`NAMED_COLORS` its own colour in every figure, the others the
    palette's remaining colours by their sorted names; a colour of its own for each of any number of groups."""
    names = sorted({g for g in groups}, key=lambda g: "" if g is None else str(g))
    named = {g: NAMED_COLORS[g] for g in names if isinstance(g, str) and g in NAMED_COLORS}
    if len(set(named.values())) < len(named):  # two named groups of one colour in one figure: sorted order instead
        named = {}
    rest = [g for g in names if g not in named]
    free = [c for c in PALETTE if c not in named.values()]
    # More groups than the colour-blind palette has colours: evenly spaced hues, so no two groups share one.
    palette = free if len(rest) <= len(free) else sns.color_palette("husl", len(rest))
    return {**named, **{g: palette[i] for i, g in enumerate(rest)}}


def _human_size(text: str) -> str:
    """``131072`` -> ``128 KiB``: the CLI's size, with a space as prose has it."""
    return re.sub(r"(\d)([KM]iB|B)$", r"\1 \2", format_size(int(text)))


def _human_ms(text: str) -> str:
    ms = float(text)
    return f"{ms / 1000:g} s" if ms >= 1000 else f"{ms:g} ms"


def _say_option(option: str) -> str:
    """One gRPC option (``static-conn-window=32MiB``) as a reader says it."""
    key, _, value = option.partition("=")
    number = re.fullmatch(r"(\d+)([KM]iB)", value)
    value = f"{number[1]} {number[2]}" if number else value
    return f"{key.removeprefix('static-').replace('-', ' ')} {value}".strip()


def _say(token: str) -> str:
    """One word of an internal condition name (``conns=4``, ``ka=10000ms``, ``131072B``) as a reader says it."""
    token = token.rstrip(":")  # "conns=2: 131072B" names a cell as knob: payload
    if re.fullmatch(r"\d+B", token):
        return _human_size(token[:-1])
    key, eq, value = token.partition("=")
    if not eq:
        return {"tool→go": "go server", "tool→python": "python server"}.get(token, token)
    if key == "grpc_options" or ";" in value or key.startswith("static-"):
        options = [_say_option(o) for o in (value if key == "grpc_options" else token).split(";")]
        windows = {o.rsplit(" ", 2)[-2] + " " + o.rsplit(" ", 1)[-1] for o in options if " window " in o}
        if len(windows) == 1 and all(" window " in o for o in options):  # the same window for stream and connection
            return f"{windows.pop()} windows"
        return ", ".join(options)
    if key.endswith("_bytes") and value.isdigit():  # a compared cell's size (payload_bytes=16000)
        return _human_size(value)
    if key in ("transport", "probe", "via", "tool"):  # a compared cell's name for what it measured
        return value
    if key == "tls":
        return "TLS" if value == "True" else "no TLS"
    if key == "conns":
        return f"{value} conn{'s' if value != '1' else ''}"
    if key == "ka":
        return "no keepalive" if value == "none" else f"keepalive {_human_ms(value.removesuffix('ms'))}"
    if key == "compression":
        return value
    if key in ("rpc", "stream"):
        return "streams" if key == "rpc" and value == "stream" else (f"streams of {value}" if key == "stream" else value)
    return token


def short_labels(names: Iterable) -> dict:
    """Short human labels for conditions named the internal way (``conns=1 ka=none tool→go
    static-conn-window=32MiB;static-stream-window=32MiB``): the words every name shares dropped, as they tell no
    two apart, and each of the others said as a reader would (``32 MiB windows``, ``4 conns``, ``keepalive 10 s``,
    ``128 KiB``). A name that would lose every word keeps its own."""
    names = list(dict.fromkeys(names))
    words = {name: str(name).split() for name in names}
    shared = set(shared_words(names).split())
    labels = {}
    for name in names:
        kept = [_say(w) for w in words[name] if w not in shared]
        labels[name] = " · ".join(kept) if kept else " · ".join(_say(w) for w in words[name]) or str(name)
    return labels


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
    xlabel: str | None = None,
    every_value: bool = False,
) -> Drawn:
    """Box plot per group; whiskers at the 5th/95th percentiles (default) or ``whiskers="iqr"`` (1.5×IQR, Tukey).

    With percentile whiskers each whisker ends exactly at that percentile and
    every value beyond it is drawn as a point. Boxes span the quartiles, the
    line is the median. Lost samples (``ok`` false, NaN) are not drawn. A group
    of fewer than :data:`FEW_FOR_A_BOX` values gets no box: its values are
    drawn as points (jittered, seeded) with a line at their median. Each tick
    label ends with the group's n. ``every_value=True`` draws every value over
    the boxes too. The axis is labelled with what the groups are (``xlabel``, default ``by``; "" for nothing)
    above the whiskers' note.
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
    # The n under its group's name where the names fit level; beside it where they are set at an angle (two lines
    # turned together run into their neighbours).
    labels = [("" if key is None else f"{key}\n") + f"n={len(values)}" for key, values in groups]
    if not _fit_level(ax, labels):
        labels = [("" if key is None else f"{key} ") + f"(n={len(values)})" for key, values in groups]
    _category_ticks(ax, labels, positions=range(1, len(groups) + 1))
    ax.set_xlim(0.4, len(groups) + 0.6)
    label = "5th–95th percentile" if whiskers != "iqr" else "1.5×IQR"
    if whiskers not in ("iqr", (5, 95)):
        label = f"{whiskers[0]:g}th–{whiskers[1]:g}th percentile"
    if len(boxed) < len(groups):  # a line of its own: a panel half a page wide holds one of these, not both
        label += f"\nunder {FEW_FOR_A_BOX} values: points and median"
    # Named under the axis, not in a title: a panel's title is the notebook's to set, and two titles side by side
    # collide on a panel a column wide.
    name = by if xlabel is None else xlabel
    ax.set_xlabel(f"{name}\nwhiskers: {label}" if name else f"whiskers: {label}")
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


def shared_legend(fig, axes, labels: dict | None = None, *, ncols: int = 2):
    """One legend for panels that share their groups, below them (where it covers nothing): each entry once,
    from every panel's legend (removed), said as ``labels`` maps it."""
    entries = {}
    for ax in np.ravel(axes):
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault((labels or {}).get(label, label), handle)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    return fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncols=ncols,
                      fontsize="x-small")


def legend_right(ax):
    """The axes' legend to their right, off the data (small type, no frame): one legend for a row of panels."""
    return ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)


def time_panels(table: pd.DataFrame, panel: str, value: str, time: str = "t_utc", *, window: int = 30,
                titles: dict | None = None, xlabel: str = "", height_in: float = 1.45) -> list[Drawn]:
    """:func:`time_series` once per ``panel`` value (in the order they come), one panel above the other on a shared
    time axis, each with its own y axis: for parts of a whole that differ by orders of magnitude (a path's round
    trip and the milliseconds each layer adds), which one axis would flatten. Each panel's title is
    ``titles[value]`` (default the value) with its n."""
    names = list(dict.fromkeys(table[panel]))
    fig, axes = figure(len(names), 1, height=height_in * len(names) + 0.6, sharex=True, squeeze=False)
    drawn = []
    for ax, name in zip(axes[:, 0], names):
        rows = table[table[panel] == name]
        drawn.append(time_series(rows, time=time, value=value, window=window, ok=None, ax=ax, legend=False))
        ax.set(xlabel="", ylabel="ms")
        ax.set_title(f"{(titles or {}).get(name, name)} (n = {len(rows)})", loc="left", fontsize="small")
    axes[-1, 0].set_xlabel(xlabel or f"{time}; line: rolling median of {window}")
    return drawn


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
    legend: bool = True,
) -> Drawn:
    """Samples over time with a centred rolling median of ``window`` samples; lost samples as ticks along the bottom.
    ``legend=False`` leaves the legend to the caller (a single series whose panel title names it)."""
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
        if legend:
            ax.legend(fontsize="small")
    return Drawn(ax, artists)


def load_timeline(df: pd.DataFrame, value: str = "rtt_ms", by: str = "probe", *, load: tuple[float, float],
                  ramp_s: float = 0.0, time: str = "t_offset_s", window: int = 9, order=None, ax=None) -> Drawn:
    """flent's RRUL view of one cell: each probe's ``value`` over the cell's timeline (a point per probe, the line a
    centred rolling median of ``window``), the load's time shaded (its ramp lighter), so what the load did to each
    probe shows against the same probe before and after it."""
    ax = _ax(ax)
    drawn = time_series(df, time=time, value=value, by=by, window=window, order=order, ax=ax, legend=False)
    with theme():
        start, end = load
        drawn.artists["load"] = [ax.axvspan(start, start + ramp_s, color="0.93", zorder=0, lw=0),
                                 ax.axvspan(start + ramp_s, end, color="0.85", zorder=0, lw=0)]
        ax.set_xlabel("seconds from the cell's first tick (shaded: the load, its ramp lighter)")
        ax.set_ylabel(value)
    return drawn


def cell_timelines(frame: pd.DataFrame, value: str, by: str, *, load: tuple[float, float], ramp_s: float,
                   window: int = 9, order=None, ylabel: str = "ms", what: str = "") -> plt.Figure:
    """:func:`load_timeline` once per cell (``cell_id``, in the order they come), one panel above the other on a
    shared time axis, each titled with its queue and load (``what`` before them) and its n; one legend below."""
    cells = list(dict.fromkeys(frame["cell_id"]))
    fig, axes = figure(len(cells), 1, height=1.9 * len(cells) + 0.8, sharex=True, squeeze=False)
    for ax, cell in zip(axes[:, 0], cells):
        rows = frame[frame["cell_id"] == cell]
        load_timeline(rows, value, by=by, load=load, ramp_s=ramp_s, window=window, order=order, ax=ax)
        ax.set(xlabel="", ylabel=ylabel)
        n = int(rows["ok"].sum()) if "ok" in rows else len(rows)
        ax.set_title(f"{what}{rows['queue'].iat[0]}, {rows['load'].iat[0]} (n = {n})", loc="left", fontsize="small")
    axes[-1, 0].set_xlabel("seconds from the cell's first tick (shaded: the load, its ramp lighter)")
    shared_legend(fig, axes, ncols=3)
    return fig


def cell_cdfs(frame: pd.DataFrame, value: str = "rtt_ms", by: str = "probe", *, order=None,
              xlabel: str = "RTT (ms)") -> plt.Figure:
    """:func:`ecdf` of ``value`` per ``by``, one panel per cell side by side, each titled with its queue, load and
    n; one legend below."""
    cells = list(dict.fromkeys(frame["cell_id"]))
    fig, axes = figure(1, len(cells), height=3.2, sharey=True, squeeze=False)
    for ax, cell in zip(axes[0], cells):
        rows = frame[frame["cell_id"] == cell]
        ecdf(rows, value, by=by, order=order, ax=ax)
        ax.set_title(f"{rows['queue'].iat[0]}, {rows['load'].iat[0]}\n(n = {int(rows['ok'].sum())})", fontsize="small",
                     loc="left")
        ax.set_xlabel(xlabel)
        if ax is not axes[0, 0]:
            ax.set_ylabel("")
    shared_legend(fig, axes, ncols=3)
    return fig


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
    n: str | None = None,
    n_unit: str = "",
    labels: dict | None = None,
) -> Drawn:
    """A summary (one row per group and ``x``: e.g. a median) as a line per group, with its interval as a band.

    ``n`` names the column of how many values each point rests on: it is written into the group's legend entry
    (``grpc (5 uploads)`` with ``n_unit="uploads"``, else ``grpc (n=5)``), or the axes' note without groups, so no
    interval is drawn without its n. ``labels``
    maps a group to what the legend calls it (e.g. :func:`short_labels`).

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
            label = (labels or {}).get(key, str(key)) if key is not None else y
            if n is not None:  # "grpc (49 uploads)": the count beside the name, whatever the name says
                label += f" ({n_label(frame[n], n_unit)})"
                if key is None:
                    note_n(ax, n_label(frame[n], n_unit))
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


def n_label(counts, unit: str = "") -> str:
    """``5 uploads`` for counts that are all 5, ``3–5 uploads`` for counts from 3 to 5; ``n=5`` without a unit."""
    counts = pd.to_numeric(pd.Series(counts), errors="coerce").dropna()
    if counts.empty:
        return "n unknown"
    low, high = int(counts.min()), int(counts.max())
    span = f"{low}{'' if low == high else f'–{high}'}"
    return f"{span} {unit}" if unit else f"n={span}"


def note_n(ax, text: str) -> None:
    """The n behind a panel's intervals, as a small note at the panel's top right (where a box plot notes its
    whiskers)."""
    current = ax._right_title.get_text()
    ax.set_title(f"{current}; {text}" if current and text not in current else text, loc="right", fontsize="small",
                 fontweight="normal")


def size_ticks(ax, sizes: Sequence[int], *, inches_per_label: float = 0.55) -> None:
    """Byte sizes along a log x axis: a tick at every size measured, a label (``16KiB``) at as many of them, evenly
    spaced and always the smallest, as the panel's width holds level (``inches_per_label`` each)."""
    sizes = sorted(set(int(s) for s in sizes))
    width_in = ax.get_position().width * ax.figure.get_figwidth()
    span = np.log(sizes[-1] / sizes[0]) if len(sizes) > 1 else 1.0
    step = max(1, -(-len(sizes) // max(1, int(width_in // inches_per_label))))  # evenly, where sizes double
    labels, last = [], None
    for i, size in enumerate(sizes):
        # ...and never two labels closer than a label's width, where sizes crowd (14000 B beside 16000 B)
        apart = last is None or np.log(size / last) / span * width_in >= inches_per_label
        labels.append(format_size(size) if i % step == 0 and apart else "")
        last = size if labels[-1] else last
    ax.set_xticks(sizes, labels)
    ax.minorticks_off()


def readable_log_axis(ax, axis: str = "x", label: str | None = None) -> None:
    """A log axis labelled in plain numbers (``50``, ``200``, ``1000``; never ``5.1×10^1``): over less than a decade,
    round values at least a sixth of the range apart; over more, 1, 2 and 5 of each decade; no labels on the minor
    ticks. Call it
    once the data are drawn: the ticks are chosen for the limits the axis then has. ``label``: the axis' label."""
    from matplotlib import ticker

    scale_axis = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    low, high = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    if high / low < 10:
        # Round values, evenly spread on the log scale: at least a sixth of the range apart.
        decades = range(int(np.floor(np.log10(low))), int(np.ceil(np.log10(high))) + 1)
        candidates = sorted(m * 10.0 ** d for d in decades for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8))
        gap, values = np.log10(high / low) / 6, []
        for v in candidates:
            if low <= v <= high and (not values or np.log10(v / values[-1]) >= gap):
                values.append(v)
        if len(values) < 3:  # a range narrower than round values step (50.2 to 53.9 ms): round values within it
            values = [v for v in ticker.MaxNLocator(4).tick_values(low, high) if low <= v <= high]
        scale_axis.set_major_locator(ticker.FixedLocator(values))
    else:
        scale_axis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    scale_axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    scale_axis.set_minor_formatter(ticker.NullFormatter())
    if label is not None:
        scale_axis.set_label_text(label)


def _fit_level(ax, labels: list[str]) -> bool:
    """Whether ``labels`` fit side by side, level, under ``ax`` (about 11 characters an inch of the panel)."""
    width_in = ax.get_position().width * ax.figure.get_figwidth()
    return sum(max(map(len, label.splitlines() or [""])) + 2 for label in labels) <= width_in * 11


def _category_ticks(ax, labels: list[str], positions=None) -> None:
    """One tick per category: labels that fit the panel's width side by side (about 11 characters an inch) read
    level; more, or longer, are set at an angle, and on end where even that would not leave a line's height between
    them (eight series of 13 characters collided level; four sizes in a panel a quarter of the page wide did too)."""
    width_in = ax.get_position().width * ax.figure.get_figwidth()
    level = _fit_level(ax, labels)
    spacing_in = width_in / max(1, len(labels))
    rotation = 0 if level else (30 if spacing_in >= 0.3 else 90)
    ax.set_xticks(np.arange(len(labels)) if positions is None else positions, labels, rotation=rotation,
                  ha="right" if rotation == 30 else "center")


def bars_with_ci(table: pd.DataFrame, x: str, y: str, lo: str | None = None, hi: str | None = None,
                 by: str | None = None, *, order=None, groups=None, ax=None, ylabel: str | None = None,
                 n: str | None = None, n_unit: str = "") -> Drawn:
    """One bar per ``x`` (in ``order``), side by side per ``by`` group (in ``groups``), with ``lo``–``hi`` as error bars.

    Missing bounds draw no error bar; a missing ``y`` draws no bar. ``n`` names the column of how many values each
    bar rests on, noted at the panel's top right (``3 repeats``).
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
        if n is not None:
            note_n(ax, n_label(table[n], n_unit))
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
        colors = COMPONENT_COLORS
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
    sharing the y axis; default a new figure of the page's width, up to four columns): each panel's groups are ``x``
    in ``x_order`` (named once, under the bottom row),
    its title the panel's value; one legend, below the panels, where it hides no bar."""
    panels = list(panels) if panels is not None else sorted(table[panel].unique())
    if axes is None:
        # The page's width, shared by as many panels (up to four) as leave each bar about a third of an inch.
        bars = len(x_order or table[x].unique())
        columns = max(1, min(4, len(panels), int((TWO_COLUMNS - 0.6) // (0.22 * bars + 0.4))))
        rows = -(-len(panels) // columns)
        _, grid = figure(rows, columns, sharey=True, squeeze=False, height=2.6 * rows + 0.9)
        axes = grid.ravel()
        for unused in axes[len(panels):]:
            unused.set_visible(False)
    drawn = []
    for name, ax in zip(panels, axes):
        spec = ax.get_subplotspec()  # the y label on the first panel of each row of the grid
        one = components_stacked(table[table[panel] == name], x, components, order=x_order, ax=ax,
                                 ylabel=ylabel if spec is None or spec.is_first_col() else "", legend=False)
        # A condition of several knobs on as many lines as the panel's width needs (about 12 characters an inch).
        width_in = ax.get_position().width * ax.figure.get_figwidth()
        ax.set_title(textwrap.fill(str(name), max(12, int(width_in * 12))), fontsize="small")
        ax.set_xlabel(x_label if spec is None or spec.is_last_row() else "")
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
        colors = [mpl.colors.to_hex(PALETTE[8] if resent else PALETTE[0]) for resent in sent["retransmit"].astype(bool)]
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


@contextlib.contextmanager
def frozen_layout(fig, dpi: float = 300):
    """Lay ``fig`` out once, at ``dpi``, and keep it so inside the block, at that resolution; the layout engine
    and the figure's own resolution are given back after it.

    Text is measured with the font hinted at the figure's resolution, so a long label is longer at the 300 dpi a
    PNG is written at than at the 100 a figure is drawn at (a column of labels set on end, 20 pixels in 250): laid
    out at 100 dpi and written at 300, an axis label fell off the figure. Constrained layout also moves axes by a
    hair on every draw (~1e-9 of the figure), enough to change SVG clip-path ids: the axes positions are rounded
    to 1e-6 and held, so what is checked (:func:`layout_problems`) and every file written is the same layout.
    """
    engine, resolution = fig.get_layout_engine(), fig.dpi
    if engine is None and resolution == dpi:  # frozen already (export inside the block of a check): as it is
        yield fig
        return
    fig.set_dpi(dpi)
    fig.draw_without_rendering()
    fig.set_layout_engine("none")
    for ax in fig.axes:
        ax.set_position(np.round(ax.get_position(original=False).bounds, 6))
    try:
        yield fig
    finally:
        fig.set_layout_engine(engine if engine is not None else "none")  # None would mean the rc default
        fig.set_dpi(resolution)


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
    paths = []
    with frozen_layout(fig), mpl.rc_context({k: THEME[k] for k in ("pdf.fonttype", "ps.fonttype", "svg.fonttype",
                                                                   "svg.hashsalt")}):
        for fmt in formats:
            path = stem.with_name(f"{stem.name}.{fmt}")
            fig.savefig(path, format=fmt, dpi=300, metadata=_METADATA[fmt])
            paths.append(path)
    return paths


# --- layout checks -------------------------------------------------------------------------------


#: Boxes that overlap by less than this many points each way touch rather than collide: glyph boxes include their
#: line spacing, so neighbouring lines of one label always share a little.
_TOUCH_PT = 0.72


def _renderer(fig):
    """``fig`` drawn, and the renderer that drew it; a closed figure (whose canvas draws nothing) gets Agg's."""
    if not hasattr(fig.canvas, "get_renderer"):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    return fig.canvas.get_renderer()


def _drawn_tick_labels(axis, renderer) -> list:
    """The tick labels matplotlib actually draws: those of ticks inside the view, with their side switched on."""
    labels = []
    for tick in axis._update_ticks():  # the ticks in view; a label object outside it keeps a stale position
        for label, on in ((tick.label1, tick.label1.get_visible()), (tick.label2, tick.label2.get_visible())):
            if on and label.get_text().strip():
                labels.append(label)
    return labels


def _legends(container) -> list:
    legends = list(getattr(container, "legends", []))
    legend = container.get_legend() if hasattr(container, "get_legend") else None
    return legends + ([legend] if legend is not None else [])


def _texts(fig, renderer) -> list[tuple[str, Any]]:
    """Every piece of text the figure draws, each with a name a reader can find in the figure."""
    named, seen = [], set()

    def add(where: str, text) -> None:
        if text is not None and text.get_visible() and text.get_text().strip() and id(text) not in seen:
            seen.add(id(text))  # a suptitle is among the figure's texts as well
            named.append((f"{where} {text.get_text().strip()[:40]!r}", text))

    for number, ax in enumerate(fig.axes, start=1):
        if not ax.get_visible():
            continue
        axes = [ax, *ax.child_axes]  # secondary axes (e.g. the × ping RTT axis) draw their own ticks
        for part in axes:
            for axis in (part.xaxis, part.yaxis):
                for label in _drawn_tick_labels(axis, renderer):
                    add(f"panel {number} tick", label)
                add(f"panel {number} axis label", axis.label)
                if axis.offsetText.get_visible():
                    add(f"panel {number} offset", axis.offsetText)
        for title in (ax.title, ax._left_title, ax._right_title):
            add(f"panel {number} title", title)
        for text in ax.texts:
            add(f"panel {number} text", text)
        for legend in _legends(ax):
            add(f"panel {number} legend title", legend.get_title())
            for text in legend.get_texts():
                add(f"panel {number} legend", text)
    for text in fig.texts:
        add("figure text", text)
    for attr in ("_suptitle", "_supxlabel", "_supylabel"):
        add("figure title", getattr(fig, attr, None))
    for legend in _legends(fig):
        add("figure legend title", legend.get_title())
        for text in legend.get_texts():
            add("figure legend", text)
    return named


def _overlap(a, b, touch: float) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > touch) and (min(a.y1, b.y1) - max(a.y0, b.y0) > touch)


def _run_together(a, b, touch: float) -> bool:
    """Two pieces of text on one line with less than a space between them read as one (``echo-warmecho-cold``)."""
    return (min(a.y1, b.y1) - max(a.y0, b.y0) > touch) and (min(a.x1, b.x1) - max(a.x0, b.x0) > -2 * touch)


def _outline(text, renderer) -> np.ndarray:
    """The four corners of ``text``'s box as drawn, in display space: turned with the text, where its window extent
    would be the upright box around it (and make neighbouring labels set at an angle seem to collide)."""
    box = text.get_window_extent(renderer)
    angle = np.deg2rad(text.get_rotation() % 180)
    if np.isclose(np.sin(angle), 0):
        return np.array([[box.x0, box.y0], [box.x1, box.y0], [box.x1, box.y1], [box.x0, box.y1]])
    rotation = text.get_rotation()
    text.set_rotation(0)
    try:
        upright = text.get_window_extent(renderer)
    finally:
        text.set_rotation(rotation)
    # A rectangle's bounding box shares its centre, whatever the angle.
    half = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * [upright.width / 2, upright.height / 2]
    turn = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    return half @ turn.T + [(box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2]


def _outlines_overlap(a: np.ndarray, b: np.ndarray, touch: float) -> bool:
    """Two convex outlines overlap unless some edge's normal separates them (by more than a touch)."""
    for outline in (a, b):
        for start, end in zip(outline, np.roll(outline, -1, axis=0)):
            normal = np.array([start[1] - end[1], end[0] - start[0]])
            normal /= np.hypot(*normal) or 1.0
            pa, pb = a @ normal, b @ normal
            if min(pa.max(), pb.max()) - max(pa.min(), pb.min()) <= touch:
                return False
    return True


def _inside(bbox, xy: np.ndarray) -> np.ndarray:
    return (xy[:, 0] > bbox.x0) & (xy[:, 0] < bbox.x1) & (xy[:, 1] > bbox.y0) & (xy[:, 1] < bbox.y1)


def _densified(xy: np.ndarray, step_px: float = 2.0) -> np.ndarray:
    """Points every ``step_px`` along a polyline in display space, so a line crossing a box between two of its
    vertices is seen crossing it (vectorised: an ECDF of ten thousand calls is one line)."""
    xy = xy[np.all(np.isfinite(xy), axis=1)]
    if len(xy) < 2:
        return xy
    starts, steps = xy[:-1], np.diff(xy, axis=0)
    counts = np.clip(np.hypot(steps[:, 0], steps[:, 1]) // step_px, 1, 2000).astype(int)
    segment = np.repeat(np.arange(len(counts)), counts)
    fraction = (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts) + 1) / counts[segment]
    return np.vstack([xy[:1], starts[segment] + fraction[:, None] * steps[segment]])


def _data_points(ax, step_px: float = 2.0) -> list[tuple[str, np.ndarray, list]]:
    """What a reader reads off ``ax``, in display coordinates: lines (densified), scatter points, error bars and
    bars, each with a name; filled bands are areas under the lines they belong to and are left out."""
    out = []
    for line in ax.lines:
        if not line.get_visible() or line.get_label().startswith("_child"):
            continue
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))  # unit-converted (dates as numbers)
        drawn_line = line.get_linestyle() not in ("None", "none", "", " ") and line.get_linewidth() > 0
        out.append((f"line {line.get_label()!r}", _densified(xy, step_px) if drawn_line else xy, []))
    for collection in ax.collections:
        if not collection.get_visible() or isinstance(collection, mpl.collections.PolyCollection):
            continue
        offsets = collection.get_offsets()
        if len(offsets) and isinstance(collection, mpl.collections.PathCollection):
            out.append(("points", collection.get_offset_transform().transform(np.asarray(offsets, dtype=float)), []))
        elif isinstance(collection, mpl.collections.LineCollection):
            transform = collection.get_transform()
            segments = [_densified(transform.transform(np.asarray(s, dtype=float)), step_px)
                        for s in collection.get_segments()]
            if segments:
                out.append(("error bars or segments", np.vstack(segments), []))
    bars = [p for p in ax.patches if isinstance(p, mpl.patches.Rectangle) and p.get_visible() and p.get_height() != 0]
    if bars:
        out.append(("bars", np.empty((0, 2)), bars))
    return out


def layout_problems(fig, renderer=None) -> list[str]:
    """What a reviewer would circle on ``fig``, found from matplotlib's own extents: a figure wider than the page
    (:data:`TWO_COLUMNS`: placed, its type would shrink) or type smaller than :data:`SMALLEST_TYPE_PT`, two pieces
    of text whose boxes overlap (tick labels, titles, legends, annotations) or that sit on one line with less than
    a space between them, text cut off at the figure's edge, and
    a legend whose box covers a plotted point, line, error bar or bar of its axes. An empty list when there is none.
    ``renderer``: the one that has just drawn ``fig`` as it stands (else it is drawn again here)."""
    renderer = renderer or _renderer(fig)
    touch = _TOUCH_PT * fig.dpi / 72
    problems = []
    width_in = fig.get_figwidth()
    if width_in > TWO_COLUMNS + 0.01:
        problems.append(f"the figure is {width_in:.1f} in wide: wider than a page ({TWO_COLUMNS:g} in), "
                        f"its type would print at {TWO_COLUMNS / width_in:.0%} of its size")
    named_texts = _texts(fig, renderer)
    small = sorted({text.get_fontsize() for _, text in named_texts if text.get_fontsize() < SMALLEST_TYPE_PT - 1e-9})
    if small:
        problems.append(f"type of {small[0]:.1f} pt, smaller than {SMALLEST_TYPE_PT:g} pt")
    texts = [(name, text.get_window_extent(renderer), _outline(text, renderer)) for name, text in named_texts]
    page = fig.bbox
    for i, (name, box, outline) in enumerate(texts):
        if box.x0 < page.x0 - touch or box.y0 < page.y0 - touch or box.x1 > page.x1 + touch \
                or box.y1 > page.y1 + touch:
            problems.append(f"{name} runs off the figure")
        for other_name, other, other_outline in texts[i + 1:]:
            if _overlap(box, other, touch) and _outlines_overlap(outline, other_outline, touch):
                problems.append(f"{name} overlaps {other_name}")
            elif _run_together(box, other, touch) and _outlines_overlap(outline, other_outline, -2 * touch):
                problems.append(f"{name} runs into {other_name}")
    for number, ax in enumerate(fig.axes, start=1):
        if not ax.get_visible():
            continue
        for legend in _legends(ax):
            frame = legend.get_window_extent(renderer)
            for what, xy, patches in _data_points(ax, fig.dpi / 50):
                if len(xy) and _inside(frame, xy).any():
                    problems.append(f"panel {number} legend covers {what}")
                for patch in patches:
                    if _overlap(frame, patch.get_window_extent(renderer), touch):
                        problems.append(f"panel {number} legend covers a bar")
                        break
    return list(dict.fromkeys(problems))


#: Where :func:`settle_legends` tries a legend inside its axes, in turn, before it moves it out of them.
_INSIDE = ("upper right", "upper left", "lower right", "lower left", "center right", "center left", "upper center",
           "lower center")


def _covers(legend, points, renderer) -> bool:
    """Whether ``legend``'s box covers any of ``points`` (its axes' :func:`_data_points`)."""
    frame, touch = legend.get_window_extent(renderer), _TOUCH_PT * renderer.dpi / 72
    for _, xy, patches in points:
        if (len(xy) and _inside(frame, xy).any()) or any(_overlap(frame, p.get_window_extent(renderer), touch)
                                                          for p in patches):
            return True
    return False


def settle_legends(fig) -> list:
    """Move every axes legend that covers its data to a corner of the axes where it covers none, or, where no corner
    is free, out of the axes (to their right on a figure of one column of panels, else below them, where the layout
    makes room); return the legends moved out. Done before a figure is checked and exported, so a legend never
    hides what was measured, whatever the data's shape. Measured at 300 dpi, where the figure is checked and written
    (see :func:`frozen_layout`): a legend's text measures larger there. A legend moved out changes the layout, and a
    corner free before may not be after: the figure is looked at again until no legend moves (three times at most)."""
    resolution = fig.dpi
    fig.set_dpi(300)
    moved_out = []
    try:
        renderer = _renderer(fig)
        for _ in range(3):
            moved = False
            for ax in fig.axes:
                legend = ax.get_legend()
                if legend is None or legend in moved_out:
                    continue
                points = _data_points(ax, fig.dpi / 50)  # once an axes: the data stay where they are
                if not _covers(legend, points, renderer):
                    continue
                for loc in _INSIDE:
                    legend.set_loc(loc)
                    if not _covers(legend, points, renderer):
                        break
                else:
                    spec = ax.get_subplotspec()
                    if spec is None or spec.get_gridspec().ncols == 1:
                        legend.set_loc("upper left")
                        legend.set_bbox_to_anchor((1.01, 1.0), transform=ax.transAxes)
                    else:
                        legend.set_loc("upper center")
                        legend.set_bbox_to_anchor((0.5, -0.22), transform=ax.transAxes)
                    moved_out.append(legend)
                    moved = True
            if not moved:  # a legend moved into a corner leaves the layout as it was: nothing to look at again
                break
            renderer = _renderer(fig)
    finally:
        fig.set_dpi(resolution)
    return moved_out


# --- before and after (labkit compare) -------------------------------------------------------------------------------

#: A verdict of :mod:`labkit.analysis.before_after` in its colour: what the correction called, and what it did not.
VERDICT_COLORS = {"higher": PALETTE[3], "lower": PALETTE[0], "within noise": PALETTE[5], "unclear": PALETTE[9],
                  "not testable": PALETTE[9]}
#: A compare figure shows at most this many cells a panel (the table has every one).
MOST_COMPARED_CELLS = 40


def difference_dots(table: pd.DataFrame, sides: tuple[str, str] = ("A", "B"), *, n_unit: str = "",
                    width: float = TWO_COLUMNS):
    """:func:`labkit.analysis.before_after.compare_frames`' table drawn: a panel per measure, a row per cell (its short
    label), each difference B − A as a dot with its interval, coloured by its verdict after the family's correction
    (filled where called, hollow where not), a line at no difference. The n behind each side is in the panel's
    title (``n_unit``: "calls" or "runs", the units compared). Returns the figure."""
    measures = list(dict.fromkeys(table["measure"]))
    labels = short_labels(table["cell"])
    rows = min(MOST_COMPARED_CELLS, max(table.groupby("measure").size()))
    fig, axes = figure(1, len(measures), width=width, height=1.8 + 0.2 * rows, squeeze=False, sharey=True)
    cells = list(dict.fromkeys(table["cell"]))[:MOST_COMPARED_CELLS]
    with theme():
        for ax, measure in zip(axes[0], measures):
            part = table[(table["measure"] == measure) & table["cell"].isin(cells)]
            y = np.array([cells.index(cell) for cell in part["cell"]], dtype=float)
            for verdict, color in VERDICT_COLORS.items():
                mine = (part["verdict"] == verdict).to_numpy()
                if not mine.any():
                    continue
                d, lo, hi = (part[c].to_numpy(dtype=float)[mine] for c in ("difference", "low", "high"))
                called = verdict in ("higher", "lower")
                ax.errorbar(d, y[mine], xerr=np.clip(np.vstack([d - lo, hi - d]), 0, None), fmt="o", color=color,
                            markersize=4, capsize=2, elinewidth=1, mfc=color if called else "white", label=verdict)
            ax.axvline(0, color="0.3", linewidth=0.8)
            unit = part["unit"].iat[0] if len(part) else ""
            ax.set_xlabel(f"B − A ({unit}), 95% interval")
            shown = part["cell"].nunique()
            if shown < (table["measure"] == measure).sum():
                note_n(ax, f"first {shown} of {(table['measure'] == measure).sum()} cells")
            ax.set_title(f"{measure} ({n_label(part['n_a'], n_unit)} vs {n_label(part['n_b'], n_unit)})", loc="left",
                         fontsize="small")
        axes[0][0].set_yticks(range(len(cells)), [labels[c] for c in cells])
        axes[0][0].invert_yaxis()
        shared_legend(fig, axes, ncols=len(VERDICT_COLORS))
        fig.suptitle(f"A {sides[0]}\nB {sides[1]}", x=0.01, ha="left", fontsize="x-small", fontweight="normal")
    return fig


def before_after_cdfs(compared, cells: Sequence[str], sides: tuple[str, str] = ("A", "B"), *,
                      width: float = TWO_COLUMNS):
    """The distributions behind :func:`difference_dots`: for each of ``cells`` (at most four, e.g.
    ``compared.cells_to_show()``), the ECDF of the first measure's column on side A and on side B (every run's
    values pooled), a panel a cell titled by its short label and the n of each side; one legend below. Returns the
    figure."""
    column, unit = compared.kind.measures[0].column, compared.kind.measures[0].unit
    labels = short_labels(compared.table["cell"])
    ncols = min(2, len(cells))
    nrows = -(-len(cells) // ncols)
    fig, axes = figure(nrows, ncols, width=width, height=2.4 * nrows + 0.8, squeeze=False)
    with theme():
        for ax, cell in zip(axes.ravel(), cells):
            counts = []
            for rows, color, name in ((compared.side_a, PALETTE[9], "A"), (compared.side_b, PALETTE[0], "B")):
                values = np.sort(rows.loc[rows["_cell"] == cell, column].to_numpy(dtype=float))
                values = values[np.isfinite(values)]
                counts.append(values.size)
                ax.step(values, np.arange(1, values.size + 1) / max(values.size, 1), where="post", color=color,
                        label=f"{name} {sides['AB'.index(name)]}")
            ax.set_title(f"{labels.get(cell, cell)}\n{counts[0]} vs {n_label([counts[1]], compared.kind.rows_are)}",
                         loc="left", fontsize="small")
            ax.set_xlabel(f"{compared.kind.value} ({unit})")
            ax.set_ylabel("proportion ≤ x")
            ax.set_ylim(0, 1.01)
        for ax in axes.ravel()[len(cells):]:
            ax.set_visible(False)
        shared_legend(fig, axes[:, :1], ncols=1)
    return fig

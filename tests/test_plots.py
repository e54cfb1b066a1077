"""Plot structure (boxes, whisker ends, labels) and reproducible export, on real recorded data where it exists."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "agg")

import matplotlib  # noqa: E402

matplotlib.use("agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from labkit import plots  # noqa: E402
from labkit.analysis import fit_linear, fit_slow_start, slow_start_rounds, step_edges  # noqa: E402
from labkit.parsers import parse_go_echo_log, parse_ping  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ORCA = ROOT / "data" / "external" / "orca-2016"


@pytest.fixture(scope="module")
def orca():
    """The 2016 ping and echo samples as one tidy frame (probe, rtt_ms, ok)."""
    ping = parse_ping(gzip.open(ORCA / "ping.txt.gz", "rt").read()).rows
    echo = parse_go_echo_log(gzip.open(ORCA / "echo.txt.gz", "rt").read()).rows
    return pd.concat(
        [ping[["seq", "rtt_ms", "ok"]].assign(probe="ping"), echo[["seq", "rtt_ms", "ok", "t_utc"]].assign(probe="echo")],
        ignore_index=True,
    )


@pytest.fixture(scope="module")
def sweep():
    """A seeded idle-step sweep (no recorded testbed sweep exists yet): 200 ms RTT, iw 10, MSS 1408."""
    rng = np.random.default_rng(41)
    size = np.repeat(np.arange(2000, 60_001, 2000), 3)
    rtt = 200 * slow_start_rounds(size, 10, 1408) + rng.normal(0, 1, size.size)
    cwnd = np.where(rng.random(size.size) < 0.8, 10, rng.integers(11, 40, size.size))
    return pd.DataFrame({"payload_bytes": size, "rtt_ms": rtt, "ok": True, "cwnd_before": cwnd})


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def whisker_ends(drawn) -> list[tuple[float, float]]:
    ends = [line.get_ydata()[1] for line in drawn.artists["whiskers"]]
    return list(zip(ends[0::2], ends[1::2]))


def test_box_whiskers_at_percentiles_and_points_beyond(orca):
    drawn = plots.box(orca, by="probe", order=["ping", "echo"])
    assert len(drawn.artists["boxes"]) == 2
    counts = [int((orca["ok"] & (orca["probe"] == probe)).sum()) for probe in ["ping", "echo"]]
    assert [t.get_text() for t in drawn.ax.get_xticklabels()] == [f"ping\nn={counts[0]}", f"echo\nn={counts[1]}"]
    for (low, high), fliers, probe in zip(whisker_ends(drawn), drawn.artists["fliers"], ["ping", "echo"]):
        values = orca.loc[(orca["probe"] == probe) & orca["ok"], "rtt_ms"].to_numpy()
        p5, p95 = np.percentile(values, [5, 95])
        assert (low, high) == pytest.approx((p5, p95))
        assert len(fliers.get_ydata()) == ((values < p5) | (values > p95)).sum()
    medians = [line.get_ydata()[0] for line in drawn.artists["medians"]]
    assert medians == pytest.approx([orca[orca.probe == p].rtt_ms.median() for p in ["ping", "echo"]])
    assert drawn.ax.get_ylabel() == "rtt_ms"
    assert drawn.ax.get_xlabel() == "probe\nwhiskers: 5th–95th percentile"
    # What the groups are may be said otherwise, or not at all (their names say it): the whiskers' note stays.
    renamed = plots.box(orca, by="probe", xlabel="")
    assert renamed.ax.get_xlabel() == "whiskers: 5th–95th percentile"


def test_box_iqr_whiskers_follow_tukey(orca):
    drawn = plots.box(orca, by="probe", order=["ping", "echo"], whiskers="iqr")
    for (low, high), probe in zip(whisker_ends(drawn), ["ping", "echo"]):
        v = orca.loc[(orca["probe"] == probe) & orca["ok"], "rtt_ms"].to_numpy()
        q1, q3 = np.percentile(v, [25, 75])
        assert high == v[v <= q3 + 1.5 * (q3 - q1)].max()
        assert low == v[v >= q1 - 1.5 * (q3 - q1)].min()
    assert "IQR" in drawn.ax.get_xlabel()


def test_a_group_of_a_few_values_is_its_points_and_median_not_a_box(sweep):
    """Issue 16: a box of 3 points suggests quartiles and whiskers nobody measured."""
    small = sweep[sweep["payload_bytes"].isin([2000, 16000])]
    drawn = plots.box(small, by="payload_bytes", order=[2000, 16000])
    assert drawn.artists["boxes"] == [] and "points and median" in drawn.ax.get_xlabel()
    assert [len(points.get_offsets()) for points in drawn.artists["values"]] == [3, 3]
    medians = [segments.get_segments()[0][0][1] for segments in drawn.artists["few_medians"]]
    assert medians == pytest.approx([small[small.payload_bytes == s].rtt_ms.median() for s in (2000, 16000)])
    for position, (points, size) in enumerate(zip(drawn.artists["values"], [2000, 16000]), start=1):
        xs, ys = points.get_offsets().T
        assert sorted(ys) == pytest.approx(sorted(small[small.payload_bytes == size].rtt_ms))
        assert (abs(xs - position) <= 0.12).all()


def test_rtt_axis_reads_milliseconds_as_ping_multiples():
    fig, ax = plots.figure()
    ax.set_ylim(0, 400)
    secondary = plots.rtt_axis(ax, 200.0)
    fig.canvas.draw()  # a secondary axis takes its limits from the parent when drawn
    assert secondary.get_ylim() == pytest.approx((0, 2))
    assert "200.0 ms" in secondary.get_ylabel()


def test_violin_has_quartile_lines(orca):
    drawn = plots.violin(orca, by="probe", order=["ping", "echo"])
    assert len(drawn.artists["bodies"]) == 2
    assert len(drawn.artists["quartiles"]) == 6
    levels = sorted(line.get_ydata()[0] for line in drawn.artists["quartiles"][:3])
    ping = orca.loc[(orca.probe == "ping") & orca.ok, "rtt_ms"]
    assert levels == pytest.approx(np.percentile(ping, [25, 50, 75]), rel=1e-6)


def test_ecdf_and_kde(orca):
    drawn = plots.ecdf(orca, by="probe", order=["ping", "echo"])
    assert len(drawn.artists["lines"]) == 2
    ping_line = drawn.artists["lines"][0]
    assert ping_line.get_ydata()[-1] == 1.0
    assert len(ping_line.get_xdata()) == orca[(orca.probe == "ping") & orca.ok].shape[0] == 3593
    assert [t.get_text() for t in drawn.ax.get_legend().get_texts()] == ["ping", "echo"]
    assert len(plots.kde(orca, by="probe", order=["ping", "echo"]).artists["lines"]) == 2


def test_latency_vs_size_draws_fits_and_predicted_steps(sweep):
    linear = fit_linear(sweep.payload_bytes, sweep.rtt_ms)
    step = fit_slow_start(sweep.payload_bytes, sweep.rtt_ms, mss=1408)
    drawn = plots.latency_vs_size(sweep, fits=[linear, step], step_fit=step)
    assert len(drawn.artists["fits"]) == 2
    line = drawn.artists["fits"][1]
    assert line.get_ydata() == pytest.approx(step.predict(line.get_xdata()))
    # The models only over the sizes measured, never beyond them.
    assert (line.get_xdata().min(), line.get_xdata().max()) == (sweep.payload_bytes.min(), sweep.payload_bytes.max())
    edges = [a.get_xdata()[0] for a in drawn.artists["steps"]]
    assert edges == pytest.approx(step_edges(step, 60_000)) and edges == pytest.approx([14080, 42240])
    assert len(drawn.artists["points"][0].get_offsets()) == len(sweep)


def test_conditions_at_the_same_sizes_are_moved_apart_and_the_legend_can_go_below(sweep):
    two = pd.concat([sweep.assign(condition="a"), sweep.assign(condition="b")], ignore_index=True)
    drawn = plots.latency_vs_size(two, by="condition", order=["a", "b"], legend_outside=True)
    a, b = (points.get_offsets()[:, 0] for points in drawn.artists["points"])
    # Each group by the same factor either side of the measured sizes (one log-axis distance apart).
    sizes = sweep.payload_bytes.to_numpy(dtype=float)
    assert a.tolist() == pytest.approx((sizes / 1.04 ** 0.5).tolist())
    assert b.tolist() == pytest.approx((sizes * 1.04 ** 0.5).tolist())
    legend = drawn.ax.get_legend()
    assert legend.get_bbox_to_anchor().y1 < drawn.ax.bbox.y0  # below the axes, off the data
    one = plots.latency_vs_size(sweep)
    assert one.artists["points"][0].get_offsets()[:, 0].tolist() == pytest.approx(sizes.tolist())  # one group: unmoved


def test_time_series_marks_lost_samples():
    rows = parse_ping((ROOT / "tests/data/ping/linux_loss_O_D.txt").read_text()).rows
    drawn = plots.time_series(rows, time="seq", window=5)
    assert len(drawn.artists["medians"]) == 1
    assert drawn.artists["lost"][0].get_offsets()[:, 0].tolist() == list(range(8, 14))
    assert len(drawn.artists["points"][0].get_offsets()) == 19


def test_time_series_over_utc_time(orca):
    echo = orca[orca.probe == "echo"]
    drawn = plots.time_series(echo, window=60)
    median = drawn.artists["medians"][0].get_ydata()
    assert np.nanmedian(median) == pytest.approx(echo.rtt_ms.median(), rel=0.05)


def test_cwnd_vs_size(sweep):
    drawn = plots.cwnd_vs_size(sweep, mss=1408, iw=10)
    assert len(drawn.artists["points"][0].get_offsets()) == len(sweep)
    needed = drawn.artists["needed"][0]
    assert needed.get_ydata() == pytest.approx(np.ceil(needed.get_xdata() / 1408))
    assert drawn.artists["iw"][0].get_ydata()[0] == 10


def all_figures(orca, sweep):
    yield "box", plots.box(orca, by="probe", order=["ping", "echo"]).figure
    yield "violin", plots.violin(orca, by="probe", order=["ping", "echo"]).figure
    fig, (left, right) = plots.figure(1, 2, figsize=(9, 3.5))
    plots.ecdf(orca, by="probe", ax=left)
    plots.kde(orca, by="probe", ax=right)
    yield "ecdf_kde", fig
    step = fit_slow_start(sweep.payload_bytes, sweep.rtt_ms, mss=1408)
    yield "size", plots.latency_vs_size(sweep, fits=[step], step_fit=step).figure
    yield "series", plots.time_series(orca[orca.probe == "echo"], window=60).figure
    yield "cwnd", plots.cwnd_vs_size(sweep, mss=1408, iw=10).figure


def test_every_figure_exports_reproducibly(orca, sweep, tmp_path):
    # Each figure is drawn twice from the same data, as two runs of a notebook would.
    for (name, fig), (_, again) in zip(all_figures(orca, sweep), all_figures(orca, sweep)):
        first = plots.export(fig, tmp_path / "a" / name)
        second = plots.export(again, tmp_path / "b" / name)
        assert [p.suffix for p in first] == [".png", ".svg", ".pdf"]
        for a, b in zip(first, second):
            assert a.stat().st_size > 1000
            assert a.read_bytes() == b.read_bytes(), f"{a.name} differs between two exports"
        assert [p.read_bytes() for p in plots.export(fig, tmp_path / "c" / name)] == [p.read_bytes() for p in first]
        pdf = first[2].read_bytes()
        assert b"/FontFile2" in pdf and b"/CreationDate" not in pdf  # TrueType embedded, no date
        assert b"<dc:date>" not in first[1].read_bytes()
        png = first[0].read_bytes()
        phys = png.index(b"pHYs")
        assert int.from_bytes(png[phys + 4:phys + 8], "big") == 11811  # 300 dpi in pixels per metre
        plt.close(fig)
        plt.close(again)


def test_export_rejects_unknown_format(tmp_path):
    fig, _ = plots.figure()
    with pytest.raises(ValueError):
        plots.export(fig, tmp_path / "x", formats=("jpg",))


def test_a_group_keeps_its_colour_whatever_the_order(orca):
    from matplotlib.colors import to_rgb

    boxes = plots.box(orca, by="probe", order=["ping", "echo"]).artists["boxes"]
    lines = plots.ecdf(orca, by="probe", order=["echo", "ping"]).artists["lines"]
    assert to_rgb(boxes[0].get_facecolor()) == to_rgb(lines[1].get_color())  # ping
    assert to_rgb(boxes[1].get_facecolor()) == to_rgb(lines[0].get_color())  # echo
    assert to_rgb(boxes[0].get_facecolor()) != to_rgb(boxes[1].get_facecolor())


def test_three_points_are_not_joined_into_a_trend():
    """Issue 16: a line and a band through 2-3 points imply a trend; they are drawn as points with error bars."""
    table = pd.DataFrame({"size": [1, 2, 4], "median": [1.0, 3.0, 2.0], "lo": [0.5, 2.0, 1.0], "hi": [1.5, 4.0, 3.0]})
    drawn = plots.lines_with_ci(table, "size", "median", "lo", "hi")
    (line,) = drawn.artists["lines"]
    assert line.get_linewidth() == 0 and list(line.get_ydata()) == [1.0, 3.0, 2.0]
    (bars,) = drawn.artists["bands"]
    segments = bars.lines[2][0].get_segments()
    assert [tuple(segment[:, 1]) for segment in segments] == [(0.5, 1.5), (2.0, 4.0), (1.0, 3.0)]


def test_unjoined_groups_at_the_same_x_are_moved_apart():
    """Two groups of two points each at concurrency 10 and 50: their points and error bars sit either side of the
    measured x by the same factor, so neither hides the other."""
    table = pd.DataFrame({"c": [10, 50, 10, 50], "d": [1.0, 2.0, 1.1, 2.1], "lo": [0.0, 1.0, 0.1, 1.1],
                          "hi": [2.0, 3.0, 2.1, 3.1], "knob": ["a", "a", "b", "b"]})
    drawn = plots.lines_with_ci(table, "c", "d", "lo", "hi", by="knob", order=["a", "b"])
    a, b = (list(line.get_xdata()) for line in drawn.artists["lines"])
    assert a == pytest.approx([10 / 1.04 ** 0.5, 50 / 1.04 ** 0.5]) and b == pytest.approx([10 * 1.04 ** 0.5, 50 * 1.04 ** 0.5])
    bar_x = [segment[0, 0] for segment in drawn.artists["bands"][1].lines[2][0].get_segments()]
    assert bar_x == pytest.approx(b)


def test_lines_with_ci_draws_a_line_and_a_band_per_group():
    from matplotlib.colors import to_rgb

    table = pd.DataFrame({
        "transport": ["grpc"] * 4 + ["http2"] * 4 + ["tcp"],
        "chunk_bytes": [1024, 64, 16384, 256, 64, 1024, 16384, 256, 64],
        "median": [10.0, 1.0, 40.0, 5.0, 3.0, 30.0, 90.0, 9.0, np.nan],  # tcp has nothing to draw
        "lo": [8.0, 0.5, 30.0, 4.0, 2.0, 25.0, 80.0, 8.0, np.nan],
        "hi": [12.0, 1.5, 50.0, 6.0, 4.0, 35.0, 99.0, 10.0, np.nan],
    })
    drawn = plots.lines_with_ci(table, "chunk_bytes", "median", "lo", "hi", by="transport", logx=True)
    lines, bands = drawn.artists["lines"], drawn.artists["bands"]
    assert [line.get_label() for line in lines] == ["grpc", "http2"] and len(bands) == 2
    # Sorted by x, whatever the table's order.
    assert list(lines[0].get_xdata()) == [64, 256, 1024, 16384] and list(lines[0].get_ydata()) == [1.0, 5.0, 10.0, 40.0]
    band = bands[1].get_paths()[0].vertices
    assert band[:, 1].min() == 2.0 and band[:, 1].max() == 99.0
    assert to_rgb(bands[1].get_facecolor()[0]) == to_rgb(lines[1].get_color())
    assert drawn.ax.get_xscale() == "log" and drawn.ax.get_xlabel() == "chunk_bytes"
    # Without an interval: lines only.
    again = plots.lines_with_ci(table, "chunk_bytes", "median", by="transport", order=["http2"])
    assert len(again.artists["lines"]) == 1 and again.artists["bands"] == []
    plt.close("all")


def test_every_group_gets_a_colour_of_its_own_even_beyond_the_palette():
    """Issue 16: 16 conditions on a 10-colour palette drew two conditions in one colour."""
    colors = plots.group_colors([f"condition {i}" for i in range(16)])
    assert len({tuple(np.round(c, 6)) for c in colors.values()}) == 16
    assert plots.group_colors(["b", "a"]) == {"a": plots.PALETTE[0], "b": plots.PALETTE[1]}


def test_the_components_facets_share_their_axis_and_colours_and_keep_the_sizes_in_order():
    from labkit.analysis.explain import COMPONENTS
    from labkit.explain import component_table, explain_run, layout
    from labkit.store import Run

    explained = explain_run(Run.open(ROOT / "data" / "samples" / "idle-step-knobs"))
    placed = layout(explained, ("cell", "size"))
    wide = component_table(explained).assign(panel=placed.panel, x=placed.x)
    drawn = plots.components_facets(wide, "panel", "x", ["request-rounds", "queueing"], x_order=placed.x_order,
                                    x_label=placed.x_label)
    # 16 conditions (cc, gap, background calls, keepalive): 16 panels of 4 columns, one y axis for all.
    assert len(drawn) == 16 and len({id(d.figure) for d in drawn}) == 1
    assert [d.ax.get_title().replace("\n", " ") for d in drawn] == sorted(placed.panel.unique())
    assert len({d.ax.get_ylim() for d in drawn}) == 1
    for one in drawn:
        assert [t.get_text() for t in one.ax.get_xticklabels()] == ["1000B", "14000B", "16000B", "32000B", "100000B"]
        # request-rounds then queueing, five bars each, each component in its colour in every panel.
        colours = [bar.get_facecolor() for bar in one.artists["bars"]]
        assert colours == [plots.COMPONENT_COLORS["request-rounds"] + (1.0,)] * 5 + [
            plots.COMPONENT_COLORS["queueing"] + (1.0,)] * 5
    # The medians stack: a panel's request rounds are its calls' median, per size.
    first = wide[wide["panel"] == sorted(placed.panel.unique())[0]]
    heights = [bar.get_height() for bar in drawn[0].artists["bars"][:5]]
    assert heights == pytest.approx([first[first["x"] == x]["request-rounds"].median() for x in placed.x_order])
    legend = drawn[0].figure.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["request-rounds", "queueing"]
    plt.close(drawn[0].figure)


# --- figures ready to paste (issue 28): the layout check and what keeps figures passing it ------------------------


def test_layout_problems_names_text_over_text_and_a_legend_over_data():
    fig, ax = plots.figure()
    ax.plot([0, 1], [0, 1], label="diagonal")
    ax.text(0.5, 0.5, "first note", transform=ax.transAxes)
    ax.text(0.5, 0.5, "second note", transform=ax.transAxes)
    ax.legend(loc="center")  # over the diagonal's middle
    problems = plots.layout_problems(fig)
    assert "panel 1 text 'first note' overlaps panel 1 text 'second note'" in problems
    assert "panel 1 legend covers line 'diagonal'" in problems
    plt.close(fig)


def test_a_tidy_figure_passes_and_one_wider_than_a_page_or_in_tiny_type_does_not():
    fig, ax = plots.figure()
    ax.plot([0, 1], [0, 1], label="diagonal")
    ax.legend(loc="lower right")
    assert plots.layout_problems(fig) == []
    wide, ax = plots.figure(figsize=(10, 4))
    ax.set_title("tiny", fontsize=4)
    problems = plots.layout_problems(wide)
    assert problems[0].startswith("the figure is 10.0 in wide") and "type of 4.0 pt" in problems[1]
    plt.close("all")


def test_labels_set_at_an_angle_are_measured_as_drawn():
    """Fifteen long category names side by side collide level; set at an angle they do not, though their upright
    boxes (the window extents) still would."""
    names = [f"condition number {i}" for i in range(15)]
    table = pd.DataFrame({"name": names, "value": range(15)})
    fig, ax = plots.figure()
    plots.bars_with_ci(table, "name", "value", ax=ax)
    assert ax.get_xticklabels()[0].get_rotation() == 30
    assert plots.layout_problems(fig) == []
    ax.tick_params(axis="x", labelrotation=0)
    assert any("tick 'condition number 0' overlaps panel 1 tick 'condition number 1'" in p
               for p in plots.layout_problems(fig))
    plt.close(fig)


def test_settle_legends_moves_a_legend_off_the_data_into_a_free_corner_or_out_of_the_axes():
    x = np.linspace(0, 1, 50)
    fig, ax = plots.figure()
    ax.plot(x, 1 - x, label="falling")  # through the upper left and the lower right
    ax.legend(loc="upper left")
    assert plots.layout_problems(fig) == ["panel 1 legend covers line 'falling'"]
    assert plots.settle_legends(fig) == [] and plots.layout_problems(fig) == []
    assert ax.get_legend()._loc in (1, 3)  # upper right or lower left: the corners the line leaves free
    crowded, ax = plots.figure()
    rng = np.random.default_rng(0)
    ax.scatter(rng.uniform(size=400), rng.uniform(size=400), label="everywhere")
    ax.legend()
    assert plots.settle_legends(crowded) == [ax.get_legend()] and plots.layout_problems(crowded) == []
    plt.close("all")


def test_size_ticks_label_sizes_only_as_densely_as_they_fit():
    sizes = [2**k for k in range(4, 22)]  # 16 B to 2 MiB, as an upload sweeps them
    fig, (ax, crowded) = plots.figure(1, 2)
    for axes in (ax, crowded):
        axes.plot(sizes, np.arange(len(sizes)))
        axes.set_xscale("log", base=2)
    crowded.set_xticks(sizes, [str(s) for s in sizes])
    plots.size_ticks(ax, sizes)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[0] == "16B" and 3 <= sum(bool(t) for t in labels) < len(sizes)
    problems = plots.layout_problems(fig)
    assert problems and all(p.startswith("panel 2 tick") for p in problems)
    plt.close(fig)


def test_a_log_axis_reads_in_plain_numbers_over_a_narrow_range_too():
    fig, ax = plots.figure()
    ax.plot([50.2, 53.9], [0, 1])
    plots.readable_log_axis(ax, "x", "latency (ms)")
    fig.draw_without_rendering()
    shown = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert len(shown) >= 2 and all(float(t) for t in shown) and ax.get_xlabel() == "latency (ms)"
    assert plots.layout_problems(fig) == []
    plt.close(fig)


def test_short_labels_say_each_condition_in_a_readers_words_without_what_they_all_share():
    settings = ["conns=1 ka=10000ms tool→go", "conns=1 ka=none gzip tool→go",
                "conns=1 ka=none tool→go static-conn-window=32MiB;static-stream-window=32MiB", "conns=8 ka=none tool→go"]
    assert list(plots.short_labels(settings).values()) == [
        "1 conn · keepalive 10 s", "1 conn · no keepalive · gzip", "1 conn · no keepalive · 32 MiB windows",
        "8 conns · no keepalive"]
    assert plots.short_labels(["conns=2: 131072B", "conns=2: 64B"]) == {"conns=2: 131072B": "128 KiB",
                                                                         "conns=2: 64B": "64 B"}
    assert plots.short_labels(["baseline"]) == {"baseline": "baseline"}
    assert plots.shared_words(settings) == "tool→go" and plots.shared_words(["a b", "c"]) == ""


def test_a_named_group_keeps_its_colour_whatever_else_is_in_the_figure():
    alone = plots.group_colors(["ping", "echo-warm"])
    crowded = plots.group_colors(["ping", "tcp-echo", "another probe", "echo-cold"])
    assert alone["ping"] == crowded["ping"] == plots.NAMED_COLORS["ping"]
    assert crowded["another probe"] not in [crowded[p] for p in ("ping", "tcp-echo", "echo-cold")]


def test_export_lays_a_figure_out_at_the_resolution_it_writes():
    """Text is hinted at the figure's resolution: a column of long labels on end is longer at 300 dpi than at 100,
    and a figure laid out at 100 and written at 300 lost its axis label off the bottom edge."""
    names = [f"cubic · gap=0.1s · bg=0.25s · keepalive 250 ms {i}" for i in range(16)]
    fig, ax = plots.figure(height=4.2)
    ax.bar(range(16), range(16))
    ax.set_xticks(range(16), names, rotation=90, fontsize="x-small")
    ax.set_xlabel("whiskers: 5th–95th percentile; under 20 values: points and median")
    with plots.frozen_layout(fig):
        assert fig.dpi == 300 and plots.layout_problems(fig) == []
        assert ax.xaxis.label.get_window_extent(fig.canvas.get_renderer()).y0 >= 0
    assert fig.dpi == 100
    plt.close(fig)


def test_every_interval_drawn_states_the_n_it_rests_on():
    table = pd.DataFrame({"condition": ["grpc"] * 2 + ["http2"] * 2, "chunk": [1, 2, 1, 2], "value": [1.0, 2, 3, 4],
                          "lo": [0.5, 1.5, 2.5, 3.5], "hi": [1.5, 2.5, 3.5, 4.5], "count": [5, 5, 3, 5]})
    lines = plots.lines_with_ci(table, "chunk", "value", "lo", "hi", by="condition", n="count", n_unit="uploads")
    assert [t.get_text() for t in lines.ax.get_legend().get_texts()] == ["grpc (5 uploads)", "http2 (3–5 uploads)"]
    alone = plots.lines_with_ci(table[table["condition"] == "grpc"], "chunk", "value", "lo", "hi", n="count")
    assert alone.ax.get_title(loc="right") == "n=5"
    bars = plots.bars_with_ci(table[table["chunk"] == 1], "condition", "value", "lo", "hi", n="count", n_unit="repeats")
    assert bars.ax.get_title(loc="right") == "3–5 repeats"
    plt.close("all")

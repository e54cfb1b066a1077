"""The hop notebook's rules: the published table's layout, the hop's cost over repeats, CDFs, CPU, the ordering."""

import math
from pathlib import Path

import matplotlib

matplotlib.use("agg")

import numpy as np
import pandas as pd
import pytest

from labkit import plots
from labkit.analysis import hop
from labkit.store import Run

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "samples"


@pytest.fixture(scope="module")
def sample():
    run = Run.open(SAMPLES / "hop-small")
    return run, run.samples()


def cells(values: dict[str, list[float]], column: str = "latency_mean_ms", **extra) -> pd.DataFrame:
    """Made-up cells: per transport, one row per repeat with ``column`` as given (for rules with known answers)."""
    rows = [{"via": via, "rate": np.nan, "repeat": i, column: value, **extra}
            for via, series in values.items() for i, value in enumerate(series)]
    return pd.DataFrame(rows)


def test_the_published_runs_read_366_bytes_per_request():
    per_response = hop.bytes_per_response()
    assert list(per_response.index) == ["grpc", "http2"]
    assert per_response.to_numpy() == pytest.approx([366.0, 365.9], abs=0.1)


def test_the_sample_in_the_published_layout(sample):
    _, samples = sample
    layout = hop.published_layout(samples)
    assert list(layout.index) == ["direct", "grpc", "http2", "nats"]
    assert list(layout["method"]) == ["direct HTTP", "gRPC", "HTTP/2", "NATS"]
    assert layout["published avg_ms"].tolist() == [0.99, 1.34, 2.73, 6.14]
    assert layout["published requests"].isna().tolist() == [True, False, False, True]
    for via, row in layout.iterrows():
        mine = samples[samples["via"] == via]
        assert row["labkit avg_ms"] == pytest.approx(mine["latency_mean_ms"].mean())
        assert row["labkit max_ms"] == mine["latency_max_ms"].max() and row["labkit repeats"] == 5
        assert row["labkit transfer_mib_per_s"] == pytest.approx((mine["transfer_bytes_per_s"] / 2**20).mean())
    # A transport the post did not run keeps its own name as the method.
    tls = hop.published_layout(pd.concat([samples, samples[samples["via"] == "http2"].assign(via="http2-tls")]))
    assert tls.loc["http2-tls", "method"] == "http2-tls" and np.isnan(tls.loc["http2-tls", "published avg_ms"])


def test_the_cost_of_the_hop_resamples_repeats(sample):
    exact = hop.hop_cost(cells({"direct": [1.0, 1.0, 1.0], "grpc": [3.0, 3.0, 3.0], "nats": [2.0]}))
    assert exact.loc["grpc", ["cost", "lo", "hi", "n_via", "n_direct"]].tolist() == [2.0, 2.0, 2.0, 3, 3]
    assert exact.loc["nats", "cost"] == 1.0 and np.isnan(exact.loc["nats", "lo"])  # one repeat: no interval
    spread = hop.hop_cost(cells({"direct": [1.0, 2.0, 3.0], "grpc": [4.0, 5.0, 6.0]}), n_resamples=4000)
    row = spread.loc["grpc"]
    assert row["cost"] == 3.0 and 1.0 <= row["lo"] < 3.0 < row["hi"] <= 5.0
    # The same seed gives the same interval; the interval is over the cells, however many requests they had.
    again = hop.hop_cost(cells({"direct": [1.0, 2.0, 3.0], "grpc": [4.0, 5.0, 6.0]}, requests=10**6), n_resamples=4000)
    assert again.loc["grpc", ["lo", "hi"]].tolist() == row[["lo", "hi"]].tolist()
    _, samples = sample
    cost = hop.hop_cost(samples)
    assert list(cost.index) == ["grpc", "http2", "nats"] and (cost["n_via"] == 5).all()
    assert (cost["lo"] <= cost["cost"]).all() and (cost["cost"] <= cost["hi"]).all()


def test_cpu_per_request_is_each_process_over_the_ok_requests(sample):
    made = cells({"direct": [0.0, 0.0], "nats": [0.0, 0.0]}, ok=1000, front_cpu_s=0.1, back_cpu_s=0.05, nats_cpu_s=0.02)
    made["tool"], made["requests"] = "wrk", 1000
    cpu = hop.cpu_per_request(made).set_index(["series", "process"])
    assert cpu.loc[("nats", "front"), "cpu_us"] == pytest.approx(100.0) and cpu.loc[("nats", "nats"), "cpu_us"] == pytest.approx(20.0)
    assert cpu.loc[("nats", "back"), ["lo", "hi"]].tolist() == pytest.approx([50.0, 50.0]) and (cpu["n"] == 2).all()
    _, samples = sample
    table = hop.cpu_per_request(samples)
    assert set(table["process"]) == {"front", "back", "nats"} and len(table) == 12
    on_path = table.set_index(["series", "process"])["cpu_us"]
    assert on_path[("nats", "nats")] > 10 * on_path[("grpc", "nats")]  # the NATS server only works for nats cells


def test_cdfs_are_nearest_rank_and_averaged_over_repeats(sample):
    cdf = hop.cdf_from_requests(np.arange(1, 101, dtype=float), [0.1, 50, 99.5, 100])
    assert cdf["latency_ms"].tolist() == [1.0, 50.0, 100.0, 100.0]
    assert hop.cdf_from_requests([], [50])["latency_ms"].isna().all()
    two = pd.concat([pd.DataFrame({"percent": [50.0, 100.0], "latency_ms": [1.0, 3.0], "series": "grpc", "repeat": 0}),
                     pd.DataFrame({"percent": [50.0, 100.0], "latency_ms": [2.0, 5.0], "series": "grpc", "repeat": 1})])
    curve = hop.transport_cdf(two).set_index("percent")
    assert curve.loc[50.0, ["latency_ms", "lowest", "highest", "repeats"]].tolist() == [1.5, 1.0, 2.0, 2]
    run, samples = sample
    row = samples.iloc[0]
    rows = hop.cell_cdf(row["tool"], run.raw_text(row["raw_files"]))
    assert rows["latency_ms"].is_monotonic_increasing and rows["latency_ms"].iat[-1] == pytest.approx(row["latency_max_ms"])


def test_ordering_findings_say_only_what_the_intervals_allow():
    clear = cells({"direct": [1.0, 1.1, 0.9], "grpc": [2.0, 2.1, 1.9], "http2": [1.0, 1.1, 0.9], "nats": [1.0, 5.0]})
    findings = hop.ordering_findings(clear).set_index("later")
    assert findings["earlier"].tolist() == ["direct", "grpc", "http2"]
    assert findings["finding"].tolist() == ["same order", "reversed", "unclear"]
    assert findings.loc["nats", "n_later"] == 2 and findings.loc["nats", "n_earlier"] == 3
    sentences = [hop.ordering_sentence(row) for _, row in findings.reset_index().iterrows()]
    assert sentences[0].startswith("grpc vs direct: grpc is slower, as published (+1.00 ms")
    assert "the reverse of the published order" in sentences[1] and "n = 3 and 3 repeats" in sentences[1]
    assert "less than this run can tell" in sentences[2]
    one = hop.ordering_findings(cells({"direct": [1.0], "grpc": [2.0]}))
    assert one["finding"].tolist() == ["unclear"] and "no interval" in hop.ordering_sentence(one.iloc[0])


def test_the_summary_is_one_line_per_transport_in_the_published_order(sample):
    _, samples = sample
    summary = hop.summarize_hop(samples)
    assert summary["series"].tolist() == ["direct", "grpc", "http2", "nats"] and (summary["repeats"] == 5).all()
    assert (summary["errors"] == 0).all() and summary["error"].isna().all()
    assert summary.set_index("series").loc["nats", "nats_cpu_us"] > 0
    open_loop = samples.assign(rate=500.0, via=samples["via"])
    assert hop.summarize_hop(pd.concat([samples, open_loop]))["series"].tolist()[:2] == ["direct", "direct @500/s"]


def test_bars_and_quantile_curves_draw_what_they_are_given():
    table = pd.DataFrame({"via": ["grpc", "http2", "nats"], "cost": [1.0, 2.0, np.nan], "lo": [0.5, np.nan, 0.0],
                          "hi": [1.5, np.nan, 1.0]})
    fig, ax = plots.figure()
    drawn = plots.bars_with_ci(table, "via", "cost", "lo", "hi", ax=ax)
    assert len(drawn.artists["bars"]) == 2 and len(drawn.artists["errorbars"]) == 1  # no bar for NaN, no bar without bounds
    assert [t.get_text() for t in ax.get_xticklabels()] == ["grpc", "http2", "nats"]
    grouped = pd.DataFrame({"series": ["a", "a", "b"], "process": ["front", "back", "front"], "cpu": [1.0, 2.0, 3.0]})
    drawn = plots.bars_with_ci(grouped, "series", "cpu", by="process", groups=["front", "back"], ax=plots.figure()[1])
    assert len(drawn.artists["bars"]) == 3
    curves = pd.DataFrame({"series": ["x"] * 3 + ["y"] * 3, "percent": [50.0, 90.0, 100.0] * 2,
                           "latency_ms": [1, 2, 3, 2, 3, 4], "lowest": [1, 1, 2, 1, 2, 3], "highest": [2, 3, 4, 3, 4, 5]})
    drawn = plots.quantile_curves(curves, "series", low="lowest", high="highest", ax=plots.figure()[1])
    assert len(drawn.artists["lines"]) == 2 and len(drawn.artists["bands"]) == 2 and drawn.ax.get_xscale() == "log"
    assert drawn.artists["lines"][0].get_ydata().tolist() == [0.5, 0.9, 1.0]
    import matplotlib.pyplot as plt

    plt.close("all")


def test_the_repeats_a_hop_cost_needs_scale_with_the_square_of_the_interval():
    cost = hop.hop_cost(Run.open(SAMPLES / "hop-small").samples(), n_resamples=500)
    needs = hop.repeats_needed(cost, halfwidth=0.01)
    for via, row in needs.iterrows():
        now = (cost.at[via, "hi"] - cost.at[via, "lo"]) / 2
        assert row["repeats"] == 5 and row["cost ± now"] == pytest.approx(now)
        assert row["repeats for ±0.01"] == math.ceil(5 * (now / 0.01) ** 2) > 5
    # Already narrower than asked: the repeats it has (at least two) suffice.
    assert (hop.repeats_needed(cost, halfwidth=10.0)["repeats for ±10"] == 5).all()

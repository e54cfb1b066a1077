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
    rows = [{"via": via, "rate": np.nan, "tool": "wrk", "repeat": i, column: value, **extra}
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
    for via, row in layout.iterrows():  # wrk's cells: the published tool, the published view
        mine = samples[(samples["via"] == via) & (samples["tool"] == "wrk")]
        assert row["labkit avg_ms"] == pytest.approx(mine["latency_mean_ms"].mean())
        assert row["labkit max_ms"] == mine["latency_max_ms"].max() and row["labkit repeats"] == 5
        assert row["labkit transfer_mib_per_s"] == pytest.approx((mine["transfer_bytes_per_s"] / 2**20).mean())
    # A transport the post did not run keeps its own name as the method.
    tls = hop.published_layout(pd.concat([samples, samples[samples["via"] == "http2"].assign(via="http2-tls")]))
    assert tls.loc["http2-tls", "method"] == "http2-tls" and np.isnan(tls.loc["http2-tls", "published avg_ms"])


def test_the_cost_of_the_hop_is_over_repeats(sample):
    """The repeats are the units; with five a side the interval is Welch's t on their means (issue 29: a
    percentile bootstrap of five repeats is about their range), whatever the requests per cell."""
    from scipy import stats

    exact = hop.hop_cost(cells({"direct": [1.0, 1.0, 1.0], "grpc": [3.0, 3.0, 3.0], "nats": [2.0]}))
    assert exact.loc["grpc", ["cost", "n_via", "n_direct"]].tolist() == [2.0, 3, 3]
    # No spread on either side: nothing to test against, listed as such; one repeat: no interval either.
    assert exact.loc["grpc", "verdict"] == "not testable" and np.isnan(exact.loc["grpc", "lo"])
    assert exact.loc["nats", "cost"] == 1.0 and np.isnan(exact.loc["nats", "lo"]) and exact.loc["nats", "verdict"] == "not testable"
    assert hop.cost_repeats(exact).to_dict() == {"grpc": 3, "nats": 1}  # the thinner side: nats's one repeat
    spread = hop.hop_cost(cells({"direct": [1.0, 2.0, 3.0], "grpc": [4.0, 5.0, 6.0]}))
    row = spread.loc["grpc"]
    welch = stats.ttest_ind([4.0, 5.0, 6.0], [1.0, 2.0, 3.0], equal_var=False)
    assert row["cost"] == 3.0 and row["method"] == "Welch t" and row["p"] == pytest.approx(welch.pvalue)
    assert (row["lo"], row["hi"]) == pytest.approx(tuple(welch.confidence_interval()))
    # The interval is over the cells, however many requests they had.
    again = hop.hop_cost(cells({"direct": [1.0, 2.0, 3.0], "grpc": [4.0, 5.0, 6.0]}, requests=10**6))
    assert again.loc["grpc", ["lo", "hi"]].tolist() == row[["lo", "hi"]].tolist()
    _, samples = sample
    cost = hop.hop_cost(samples)
    assert list(cost.index) == ["grpc", "http2", "nats"] and (cost["n_via"] == 5).all()
    assert (cost["lo"] <= cost["cost"]).all() and (cost["cost"] <= cost["hi"]).all()
    # Every hop costs latency, called after Holm's correction over the three transports.
    assert (cost["verdict"] == "higher").all() and (hop.hop_cost(samples, "rps")["verdict"] == "lower").all()


def test_the_cost_at_light_load_is_per_rate_with_one_holm_family_over_every_rate():
    """Open-loop cells (vegeta at a fixed rate): a cost per rate and transport, each against direct at the same rate,
    corrected together; the closed-loop cells stay out of it, and a run without open-loop cells has no table."""
    closed = cells({"direct": [5.0, 5.1, 4.9], "grpc": [9.0, 9.1, 8.9]})
    slow = cells({"direct": [1.0, 1.1, 0.9], "grpc": [1.5, 1.6, 1.4], "nats": [1.0, 1.2, 0.8]}).assign(rate=100.0, tool="vegeta")
    fast = cells({"direct": [2.0, 2.1, 1.9], "grpc": [4.0, 4.1, 3.9]}).assign(rate=1000.0, tool="vegeta")
    light = hop.light_load_cost(pd.concat([closed, slow, fast]))
    assert list(light.index) == [(100, "grpc"), (100, "nats"), (1000, "grpc")]
    assert light["cost"].tolist() == pytest.approx([0.5, 0.0, 2.0])
    assert light.loc[(100, "grpc"), "direct_mean"] == pytest.approx(1.0)  # against direct at its own rate
    assert light["verdict"].tolist() == ["higher", "unclear", "higher"]
    # One family of three: the smallest p-value is multiplied by three (as hop_cost's over a run's transports).
    alone = hop.light_load_cost(pd.concat([closed, fast]))
    assert alone.loc[(1000, "grpc"), "p"] == pytest.approx(light.loc[(1000, "grpc"), "p"])
    assert hop.light_load_cost(closed).empty


def test_cpu_per_request_is_each_process_over_the_ok_requests(sample):
    made = cells({"direct": [0.0, 0.0], "nats": [0.0, 0.0]}, ok=1000, front_cpu_s=0.1, back_cpu_s=0.05, nats_cpu_s=0.02)
    made["tool"], made["requests"] = "wrk", 1000
    cpu = hop.cpu_per_request(made).set_index(["series", "process"])
    assert cpu.loc[("nats", "front"), "cpu_us"] == pytest.approx(100.0) and cpu.loc[("nats", "nats"), "cpu_us"] == pytest.approx(20.0)
    assert cpu.loc[("nats", "back"), ["lo", "hi"]].tolist() == pytest.approx([50.0, 50.0]) and (cpu["n"] == 2).all()
    # Five repeats: the mean's Student-t interval.
    from labkit.analysis import runs_t_interval

    _, samples_ = sample
    grpc = hop.with_series(samples_).query("series == 'grpc (vegeta)'")["front_cpu_us_per_request"]
    row = hop.cpu_per_request(samples_).set_index(["series", "process"]).loc[("grpc (vegeta)", "front")]
    assert (row["cpu_us"], row["lo"], row["hi"]) == pytest.approx(runs_t_interval(grpc))
    _, samples = sample
    table = hop.cpu_per_request(samples)
    assert set(table["process"]) == {"front", "back", "nats"} and len(table) == 60  # 4 transports × 5 loads × 3
    on_path = table.set_index(["series", "process"])["cpu_us"]
    for tool in ("wrk", "labkit-go", "vegeta"):  # the NATS server only works for nats cells
        assert on_path[(f"nats ({tool})", "nats")] > 10 * on_path[(f"grpc ({tool})", "nats")]


def test_cdfs_are_nearest_rank_and_averaged_over_repeats(sample):
    cdf = hop.cdf_from_requests(np.arange(1, 101, dtype=float), [0.1, 50, 99.5, 100])
    assert cdf["latency_ms"].tolist() == [1.0, 50.0, 100.0, 100.0]
    assert hop.cdf_from_requests([], [50])["latency_ms"].isna().all()
    two = pd.concat([pd.DataFrame({"percent": [50.0, 100.0], "latency_ms": [1.0, 3.0], "series": "grpc", "repeat": 0}),
                     pd.DataFrame({"percent": [50.0, 100.0], "latency_ms": [2.0, 5.0], "series": "grpc", "repeat": 1})])
    curve = hop.transport_cdf(two).set_index("percent")
    assert curve.loc[50.0, ["latency_ms", "lowest", "highest", "repeats"]].tolist() == [1.5, 1.0, 2.0, 2]
    run, samples = sample
    row = samples[samples["tool"] == "wrk"].iloc[0]  # the sample keeps wrk's reports (labkit-go's and vegeta's CSVs
    # are left out)
    rows = hop.cell_cdf(row["tool"], run.raw_text(row["raw_files"]))
    assert rows["latency_ms"].is_monotonic_increasing and rows["latency_ms"].iat[-1] == pytest.approx(row["latency_max_ms"])


def test_ordering_findings_say_only_what_the_family_allows():
    clear = cells({"direct": [1.0, 1.1, 0.9], "grpc": [2.0, 2.1, 1.9], "http2": [1.0, 1.1, 0.9], "nats": [1.0, 5.0]})
    findings = hop.ordering_findings(clear).set_index("later")
    assert findings["earlier"].tolist() == ["direct", "grpc", "http2"]
    assert findings["finding"].tolist() == ["same order", "reversed", "unclear"]
    assert findings.loc["nats", "n_later"] == 2 and findings.loc["nats", "n_earlier"] == 3
    # The three pairs are one family: Holm's factor for the smallest p-value is three.
    assert findings["p"].idxmin() == "grpc" and findings.loc["grpc", "p_holm"] == pytest.approx(3 * findings["p"].min())
    # One load tool: each sentence names it as the run's only one, with the interval the verdict was taken from, its
    # Holm-adjusted p-value and the family, and the repeats per tool where they differ between the sides.
    lines = hop.ordering_lines(hop.ordering_by_tool(clear))
    grpc, http2, nats = findings.loc["grpc"], findings.loc["http2"], findings.loc["nats"]
    assert lines[0].startswith("gRPC is called slower than direct, as published, on wrk, this run's only load tool: "
                               f"{grpc['difference_ms']:+.2f} ms, 95 % interval [{grpc['lo']:+.2f}, {grpc['hi']:+.2f}], "
                               "Holm-adjusted p ")
    assert lines[0].endswith(" (Holm's correction over the 3 pairs; Welch t, 3 repeats a side).")
    assert lines[1].startswith("HTTP/2 is called faster than gRPC, the reverse of the published order, on wrk, this")
    assert "3 repeats a side" in lines[1] and "n = 2 and 3 repeats" in lines[2] and "repeats a side" not in lines[2]
    # An unclear pair says how large a difference it could have called, so that it does not read as "no difference".
    assert lines[2].startswith("NATS is not told apart from HTTP/2 on wrk, this run's only load tool: ")
    assert f"only {nats['mde_ms']:.2f} ms or more could have been called" in lines[2]
    assert nats["mde_ms"] > abs(nats["difference_ms"]) and http2["finding"] == "reversed"
    # The whole order is called on no tool: one pair is reversed.
    assert lines[3] == "The whole published order, direct < gRPC < HTTP/2 < NATS, is called pair by pair on 0 of 1 load tool."
    one = hop.ordering_findings(cells({"direct": [1.0], "grpc": [2.0]}))
    # One repeat a side: nothing to test with, said as such (it used to read "unclear").
    assert one["finding"].tolist() == ["not testable"]
    assert hop.ordering_lines(hop.ordering_by_tool(cells({"direct": [1.0], "grpc": [2.0]}))) == [
        "gRPC cannot be tested against direct (fewer than two repeats on a side) on wrk, this run's only load tool: "
        "+1.00 ms, no interval (1 repeat a side)."]


def test_across_load_tools_a_finding_says_whether_they_agree_or_names_the_tool():
    """Each tool is its own Holm family, none spans the tools: where the tools reach one verdict the sentence says so
    (k of k), else it says they disagree and which tool reached which, each with its own figures."""
    wrk = cells({"direct": [1.0, 1.1, 0.9], "grpc": [2.0, 2.1, 1.9], "nats": [3.0, 3.1, 2.9]})
    go = cells({"direct": [1.0, 1.1, 0.9], "grpc": [2.0, 2.2, 1.8], "nats": [2.0, 2.6, 1.4]}).assign(tool="labkit-go")
    samples = pd.concat([wrk, go])
    ordering = hop.ordering_by_tool(samples)
    assert ordering[["tool", "later", "finding"]].values.tolist() == [
        ["labkit-go", "grpc", "same order"], ["labkit-go", "nats", "unclear"],
        ["wrk", "grpc", "same order"], ["wrk", "nats", "same order"]]
    # No family spans the tools: each tool's p-values are adjusted over its own two pairs.
    for tool, rows in ordering.groupby("tool"):
        alone = hop.ordering_findings(samples, tool=tool)
        assert rows["p_holm"].tolist() == pytest.approx(alone["p_holm"].tolist())
    agree, disagree = hop.ordering_lines(ordering)
    assert agree.startswith("gRPC is called slower than direct, as published, on every load tool, 2 of 2: labkit-go +1.00 ms")
    assert "; wrk +1.00 ms" in agree and "no family spanning the tools" in agree
    nats_go = ordering[(ordering["tool"] == "labkit-go") & (ordering["later"] == "nats")].iloc[0]
    assert disagree.startswith("The load tools disagree on NATS against gRPC. NATS is not told apart from gRPC on 1 of 2: "
                               f"labkit-go {nats_go['difference_ms']:+.2f} ms")
    assert ". NATS is called slower than gRPC, as published, on 1 of 2: wrk +1.00 ms" in disagree
    # The costs against direct: the same rule, a sentence per transport.
    costs = hop.costs_by_tool(samples)
    assert list(costs.index) == [("labkit-go", "grpc"), ("labkit-go", "nats"), ("wrk", "grpc"), ("wrk", "nats")]
    grpc, nats = hop.cost_findings(costs)
    assert grpc.startswith("The hop via gRPC costs latency against going direct, as published, on every load tool, 2 of 2")
    assert nats.startswith("The load tools disagree on the hop via NATS in latency. The hop via NATS is not told apart "
                           "from going direct on 1 of 2: labkit-go")
    assert ". The hop via NATS costs latency against going direct, as published, on 1 of 2: wrk +2.00 ms" in nats
    assert hop.cost_findings(hop.costs_by_tool(samples[samples["via"] == "direct"])) == []


def test_on_the_sample_the_tools_agree_up_to_http2_and_disagree_on_nats(sample):
    """hop-small, each closed-loop tool its own family of three pairs: gRPC above direct and HTTP/2 above gRPC on all
    three tools, as published; NATS against HTTP/2 not told apart on labkit-go's cells, and called faster, the reverse
    of the published order, on wrk's and vegeta's. The sentence says the tools disagree and names each."""
    _, samples = sample
    assert hop.measuring_tool(samples) == "labkit-go"
    ordering = hop.ordering_by_tool(samples)
    found = ordering.set_index(["tool", "later"])["finding"]
    assert found.xs("labkit-go").tolist() == ["same order", "same order", "unclear"]
    assert found.xs("vegeta").tolist() == found.xs("wrk").tolist() == ["same order", "same order", "reversed"]
    lines = hop.ordering_lines(ordering)
    assert len(lines) == 4 and "on every load tool, 3 of 3" in lines[0] and "on every load tool, 3 of 3" in lines[1]
    nats = lines[2]
    assert nats.startswith("The load tools disagree on NATS against HTTP/2. NATS is not told apart from HTTP/2 on 1 of 3: labkit-go")
    assert "NATS is called faster than HTTP/2, the reverse of the published order, on 2 of 3: vegeta" in nats
    for tool in ("labkit-go", "vegeta", "wrk"):
        row = ordering[(ordering["tool"] == tool) & (ordering["later"] == "nats")].iloc[0]
        assert (f"{tool} {row['difference_ms']:+.2f} ms, 95 % interval [{row['lo']:+.2f}, {row['hi']:+.2f}], "
                f"Holm-adjusted p {row['p_holm']:.3f}") in nats
    wrk_nats = ordering[(ordering["tool"] == "wrk") & (ordering["later"] == "nats")].iloc[0]
    assert wrk_nats["hi"] < 0 and wrk_nats["p_holm"] < 0.05  # what "called faster" was taken from
    assert lines[3].endswith("is called pair by pair on 0 of 3 load tools.")
    # Every hop costs latency and req/s on every tool, called after Holm's correction over its transports.
    for column, unit in (("latency_mean_ms", "ms"), ("rps", "req/s")):
        costs = hop.costs_by_tool(samples, column)
        assert (costs["verdict"] == ("higher" if column != "rps" else "lower")).all() and (costs["n_via"] == 5).all()
        said = hop.cost_findings(costs, column)
        assert len(said) == 3 and all("on every load tool, 3 of 3" in line and "5 repeats a side" in line for line in said)
        row = costs.loc[("wrk", "nats")]
        assert f"wrk {row['cost']:+.{2 if unit == 'ms' else 0}f} {unit}" in said[2]
    # The published costs lie within none of wrk's intervals: the sentence says so, with each.
    (published,) = hop.published_cost_findings(hop.costs_by_tool(samples))
    assert "on wrk's cells for 0 of 3 transports" in published and "NATS published +5.15 ms" in published


def test_at_light_load_the_hop_costs_latency_on_every_transport_at_each_rate(sample):
    """hop-small's open-loop cells (vegeta at 500 and 2000 req/s): every cost called after Holm's correction over all
    six, each below the closed loop's cost of the same transport on labkit-go's cells; one sentence per rate."""
    _, samples = sample
    light, capacity = hop.light_load_cost(samples), hop.hop_cost(samples)
    assert list(light.index) == [(rate, via) for rate in (500, 2000) for via in ("grpc", "http2", "nats")]
    assert (light["verdict"] == "higher").all() and (light["n_via"] == 5).all()
    assert (light["cost"].to_numpy() < capacity["cost"].reindex(light.index.get_level_values("via")).to_numpy()).all()
    lines = hop.light_load_findings(light)
    assert len(lines) == 2
    for line, rate in zip(lines, (500, 2000)):
        assert line.startswith(f"At {rate} req/s (open loop), the hop costs latency against going direct on every "
                               "transport, 3 of 3: gRPC")
        assert line.endswith("(Holm's correction over the 6 costs of every rate and transport; Welch t, 5 repeats a side).")
        row = light.loc[(rate, "nats")]
        assert f"NATS {row['cost']:+.2f} ms, 95 % interval [{row['lo']:+.2f}, {row['hi']:+.2f}]" in line
    # One transport not told apart at a rate: the sentence says the transports disagree, and names it.
    mixed = light.copy()
    mixed.loc[(500, "nats"), "verdict"] = "unclear"
    assert hop.light_load_findings(mixed)[0].startswith(
        "The transports disagree on the hop at 500 req/s (open loop). At 500 req/s (open loop), the hop costs latency "
        "against going direct on 2 of 3: gRPC")
    assert hop.light_load_findings(hop.light_load_cost(samples[samples["rate"].isna()])) == []


def test_labkit_go_keeps_littles_law_where_wrk_breaks_it_and_vegeta_keeps_fewer_in_flight(sample):
    """labkit-go's closed loop holds Little's law on every transport (req/s × its requests' own mean latency ÷ 10
    connections within 0.95-1.05: each connection always had its request in flight); wrk's histogram is corrected
    for coordinated omission, so its direct cells exceed what a closed loop allows; vegeta's ten workers kept only
    7-9 requests in flight on average. The notebook's sentences say all three, each with its tool's numbers."""
    _, samples = sample
    law = hop.littles_law(samples)
    tools = {tool: law[law["tool"] == tool] for tool in ("labkit-go", "wrk", "vegeta")}
    assert all(len(cells) == 20 for cells in tools.values())
    assert set(tools["labkit-go"]["via"]) == {"direct", "grpc", "http2", "nats"} and not tools["labkit-go"]["outside"].any()
    wrk, vegeta = tools["wrk"], tools["vegeta"]
    assert (wrk["ratio"] > 1).all() and set(wrk.loc[wrk["outside"], "via"]) == {"direct"} and wrk["outside"].sum() == 3
    assert (vegeta["ratio"] < hop.LITTLE_BAND[0]).all() and (vegeta["ratio"] > 0.7).all()
    by_tool = hop.littles_law_by_tool(law)
    lines = hop.littles_law_lines(law)
    for tool, line in zip(("labkit-go", "vegeta", "wrk"), lines):
        assert line.startswith(f"Little's law on {tool}'s closed loop: 20 cells, req/s × mean latency ÷ requests in "
                               f"flight {by_tool.at[tool, 'lowest']:.3f} to {by_tool.at[tool, 'highest']:.3f}; ")
    assert lines[0].endswith("0.996 to 0.998; all within 0.95–1.05.")
    assert "20 outside 0.95–1.05" in lines[1] and "7.3 to 9.3 of 10 requests were in flight" in lines[1]
    assert "3 outside 0.95–1.05 (direct (wrk) 3)" in lines[2]
    assert "synthetic samples" in lines[2] and not any("synthetic" in line for line in lines[:2])


def test_the_summary_is_one_line_per_transport_in_the_published_order(sample):
    _, samples = sample
    summary = hop.summarize_hop(samples)
    assert summary["series"].tolist() == [series for via in ("direct", "grpc", "http2", "nats") for series in (
        f"{via} (labkit-go)", f"{via} (vegeta)", f"{via} (wrk)", f"{via} @500/s", f"{via} @2000/s")]
    assert (summary["repeats"] == 5).all()
    assert (summary["errors"] == 0).all() and summary["error"].isna().all()
    assert summary.set_index("series").loc["nats (vegeta)", "nats_cpu_us"] > 0
    wrk = samples[samples["tool"] == "wrk"]  # one closed-loop tool: the series are the transports alone
    open_loop = wrk.assign(rate=500.0, tool="vegeta")
    assert hop.summarize_hop(pd.concat([wrk, open_loop]))["series"].tolist()[:2] == ["direct", "direct @500/s"]


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
    cost = hop.hop_cost(Run.open(SAMPLES / "hop-small").samples())
    needs = hop.repeats_needed(cost, halfwidth=0.01)
    for via, row in needs.iterrows():
        now = (cost.at[via, "hi"] - cost.at[via, "lo"]) / 2
        assert row["repeats"] == 5 and row["cost ± now"] == pytest.approx(now)
        assert row["repeats for ±0.01"] == math.ceil(5 * (now / 0.01) ** 2) > 5
    # Already narrower than asked: the repeats it has (at least two) suffice.
    assert (hop.repeats_needed(cost, halfwidth=10.0)["repeats for ±10"] == 5).all()


def test_the_load_tools_share_of_the_cores_is_its_cpu_per_second_of_load(sample):
    """The notebook's table of what the load generator took of the load host's cores (the hosts' facts name 2)."""
    run, samples = sample
    cpus = run.manifest["hosts"]["a"]["cpus_online"]
    table = hop.load_cpu_share(samples, cpus)
    assert cpus == 2 and list(table.index) == hop.series_order(hop.with_series(samples)) and (table["repeats"] == 5).all()
    for series, row in table.iterrows():
        cells = hop.with_series(samples).query("series == @series")
        assert row["load_cpu_per_s"] == pytest.approx((cells["load_cpu_s"] / cells["tool_duration_s"]).mean())
        assert row["share_of_cpus"] == pytest.approx(row["load_cpu_per_s"] / 2)
    assert (table["share_of_cpus"] > 0).all() and (table["share_of_cpus"] < 1).all()
    # labkit-go and vegeta, which time and keep every request, took about twice wrk's share or more on every
    # transport, and wrk's req/s are the highest of the three (the notebook's table shows the shares).
    rps = hop.with_series(samples).groupby("series")["rps"].mean()
    for via in ("direct", "grpc", "http2", "nats"):
        for tool in ("labkit-go", "vegeta"):
            assert table.at[f"{via} ({tool})", "share_of_cpus"] > 1.5 * table.at[f"{via} (wrk)", "share_of_cpus"]
            assert rps[f"{via} (wrk)"] > rps[f"{via} ({tool})"]
    assert hop.load_cpu_share(samples, None)["share_of_cpus"].isna().all()  # without the host's cores, no share

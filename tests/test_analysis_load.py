"""The load notebook's rules, on the shipped load sample: series, per-request windows, intervals, the wrk ratios."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from labkit.analysis import load
from labkit.store import Run

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "samples"


@pytest.fixture(scope="module")
def sample():
    run = Run.open(SAMPLES / "load-small")
    cells, order = load.label_series(load.with_call_costs(run.samples()))
    return run, cells, order


def test_series_name_transport_and_connections_in_order(sample):
    _, cells, order = sample
    assert order == ["grpc n=1", "grpc-conns n=4", "http2 n=1", "http2 n=4"]
    several = pd.concat([cells, cells.assign(payload_bytes=1024, keepalive_ms=1000.0)], ignore_index=True)
    labelled, _ = load.label_series(several)
    assert "grpc n=1 64B" in set(labelled["series"]) and "grpc n=1 ka=1000ms 1024B" in set(labelled["series"])
    stacks, order = load.label_series(pd.concat([cells, cells.assign(server_impl="go")], ignore_index=True))
    assert order[:2] == ["grpc n=1 go", "grpc n=1 python"] and stacks["series"].nunique() == 8


def test_call_costs_follow_littles_law_and_spread_cpu_over_the_whole_cell(sample):
    _, cells, _ = sample
    # The tools kept the asked concurrency in flight: req/s within a few % of in flight / mean latency.
    assert ((cells["rps"] / cells["littles_law_rps"] - 1).abs() < 0.05).all()
    made = pd.DataFrame({"server_cpu_s": [2.0], "rps": [100.0], "warmup_s": [1.0], "duration_s": [4.0],
                         "in_flight": [10], "latency_mean_ms": [20.0]})
    costs = load.with_call_costs(made)
    assert costs["server_cpu_us_per_request"].iat[0] == pytest.approx(2.0 / 500 * 1e6)
    assert costs["littles_law_rps"].iat[0] == pytest.approx(500.0)


def test_littles_law_gap_says_whether_it_is_on_one_side(sample):
    _, cells, _ = sample
    gap = load.littles_law_gap(cells)
    measured = cells["rps"] / cells["littles_law_rps"] - 1
    assert (gap["low"], gap["high"], gap["cells"]) == (measured.min(), measured.max(), len(cells))
    assert gap["systematic"] == bool((measured > 0).all() or (measured < 0).all())
    two = pd.DataFrame({"rps": [95.0, 105.0], "littles_law_rps": [100.0, 100.0]})
    assert not load.littles_law_gap(two)["systematic"] and load.littles_law_gap(two)["largest"] == pytest.approx(0.05)
    assert load.littles_law_gap(two.assign(rps=[95.0, 90.0]))["systematic"]


def test_the_per_request_file_is_the_gzipped_one():
    both = "h2load-http2-c1-a1.txt,h2load-http2-c1-a1.log.tsv.gz"
    assert load.per_request_file(both) == "h2load-http2-c1-a1.log.tsv.gz"
    assert load.per_request_file(both, "ghz") is None and load.per_request_file(None) is None
    assert load.per_request_file("ghz-grpc-c1-a1.json.gz", "ghz") == "ghz-grpc-c1-a1.json.gz"


def test_raw_requests_in_the_measured_window_match_every_recorded_cell(sample):
    run, cells, _ = sample
    for _, row in cells.iterrows():
        requests = load.cell_requests(row["tool"], run.raw_text(load.per_request_file(row["raw_files"])),
                                      row["warmup_s"], row["duration_s"])
        assert len(requests) == row["requests"], row["cell_id"]
        assert int(requests["ok"].sum()) == row["ok"]


def test_intervals_come_from_the_requests_and_fall_back_to_the_recorded_percentiles(sample):
    run, cells, _ = sample
    row = cells[cells["series"] == "grpc n=1"].iloc[0]
    requests = load.cell_requests("ghz", run.raw_text(row["raw_files"]), row["warmup_s"], row["duration_s"])
    requests = requests[["latency_ms", "ok"]].assign(series=row["series"], concurrency=row["concurrency"])
    latency = load.latency_with_ci(cells[cells["cell_id"] == row["cell_id"]], requests, n_resamples=200)
    at = latency.loc[(row["series"], row["concurrency"])]
    assert at["count"] == at["recorded_count"] and at["50%_lo"] <= at["50%"] <= at["50%_hi"]
    assert abs(at["50%"] - at["recorded_p50"]) < 0.1
    recorded = load.latency_with_ci(cells, None)
    assert recorded["50%"].tolist() == cells.set_index(["series", "concurrency"])["latency_p50_ms"].tolist()
    assert recorded["50%_lo"].isna().all()


def test_http2_over_grpc_is_the_ratio_of_the_two_single_connection_series(sample):
    _, cells, order = sample
    ratios = load.http2_over_grpc(cells, order, 10)
    at = cells[cells["concurrency"] == 10].set_index("series")
    assert ratios["rps"][2] == pytest.approx(at.at["http2 n=1", "rps"] / at.at["grpc n=1", "rps"])
    assert ratios["rps"][1] == pytest.approx(4436 / 7562) and np.isnan(ratios["server_cpu_per_request"][1])
    assert load.http2_over_grpc(cells[cells["transport"] != "http2"], order, 10) == {}


def test_series_headline_has_every_concurrency_and_the_call_cost(sample):
    run, cells, order = sample
    latency = load.latency_with_ci(cells, None)
    ping = run.ping_baseline()["rtt_avg_ms"]
    headline = load.series_headline(cells, latency, order, ping)
    grpc_c1 = cells[(cells["series"] == "grpc n=1") & (cells["concurrency"] == 1)].iloc[0]
    assert headline["call_cost_ms.grpc n=1"] == round(grpc_c1["latency_p50_ms"] - ping, 3)
    assert headline["rps.grpc n=1.c=50"] == round(cells.set_index(["series", "concurrency"]).at[("grpc n=1", 50), "rps"], 2)
    assert "server_cpu_us_per_request.grpc-conns n=4" in headline and "call_cost_ms.grpc-conns n=4" not in headline


# --- what the notebook says of a run (load.findings) ----------------------------------------------------------------


@pytest.fixture(scope="module")
def requests(sample):
    run, cells, _ = sample
    frames = [load.cell_requests(row["tool"], run.raw_text(load.per_request_file(row["raw_files"])), row["warmup_s"],
                                 row["duration_s"])[["latency_ms", "ok"]].assign(series=row["series"],
                                                                                 concurrency=int(row["concurrency"]))
              for _, row in cells.iterrows()]
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def compared(sample, requests):
    _, _, order = sample
    return load.compare_series(requests, order, n_resamples=200)


def test_the_cell_order_is_what_the_manifests_and_start_times_record(sample):
    run, _, _ = sample
    samples = run.samples()
    assert load.cell_order([(run.manifest, samples)]) == (
        "The 10 cells of this run ran one after another in the order `labkit load` plans them (its manifest records "
        "no shuffled order).")
    # A group whose runs took the cells in one order says so; one run that took them the other way round is counted.
    group = [(run.manifest, samples), (run.manifest, samples)]
    assert "the 2 runs of its group ran them in the same order" in load.cell_order(group)
    backwards = samples.assign(t_start_utc_ns=-samples["t_start_utc_ns"])
    assert "ran them in 2 different orders" in load.cell_order([(run.manifest, samples), (run.manifest, backwards)])
    # A sweep's manifest records a shuffled order and its seed.
    shuffled = [({"config": {"order": "shuffled", "seed": seed}}, samples) for seed in (1, 2)]
    assert load.cell_order(shuffled).startswith("The 10 cells of this run ran in an order shuffled from each run's "
                                                "seed (1, 2)")
    # A load, upload or under-load run records its realised order and seed in the manifest's cell_order.
    recorded = {"cell_order": {"seed": 7, "shuffled": True, "cells": list(samples["cell_id"])}, "config": {}}
    assert load.cell_order([(recorded, samples)]).startswith("The 10 cells of this run ran in an order shuffled "
                                                             "from seed 7")
    planned = {"cell_order": {"seed": 7, "shuffled": False, "cells": list(samples["cell_id"])}, "config": {}}
    assert "shuffled" not in load.cell_order([(planned, samples)])


def test_each_series_is_compared_with_the_one_a_knob_away(sample, requests, compared):
    _, _, order = sample
    assert load.series_pairs(order) == [("4 connections vs 1", "grpc n=1", "grpc-conns n=4"),
                                        ("HTTP/2 vs gRPC", "grpc n=1", "http2 n=1"),
                                        ("4 connections vs 1", "http2 n=1", "http2 n=4")]
    assert list(zip(compared["B"], compared["concurrency"])) == [
        ("grpc-conns n=4", 10), ("grpc-conns n=4", 50), ("http2 n=1", 1), ("http2 n=1", 10), ("http2 n=1", 50),
        ("http2 n=4", 10), ("http2 n=4", 50)]
    ok = requests[requests["ok"]]
    for row in compared.itertuples():
        a, b = (ok[(ok["series"] == s) & (ok["concurrency"] == row.concurrency)]["latency_ms"] for s in (row.A, row.B))
        assert row.difference == pytest.approx(b.median() - a.median()) and row.lo <= row.difference <= row.hi
        assert (row.n_a, row.n_b) == (len(a), len(b))
    # One family: Holm's correction over all seven rows, a difference called only below 0.05 after it.
    from labkit.analysis.inference import adjust

    assert np.allclose(compared["p_holm"], adjust(compared["p"].to_list(), "holm")[1])
    assert ((compared["p_holm"] < 0.05) == compared["verdict"].isin(["higher", "lower"])).all()
    assert load.compare_series(None, order).empty and load.compare_series(requests, order, n_resamples=0).empty


def test_findings_are_said_where_their_predicates_hold_with_the_runs_numbers(sample, compared):
    run, cells, order = sample
    ping = run.ping_baseline()
    latency = load.latency_with_ci(cells, None)
    held = load.claims(cells, ping["rtt_avg_ms"])
    assert held == {"rps_grows": True, "rtt_bound": True, "server_bound": False, "littles_law_systematic": True}
    said = load.findings(cells, latency, compared, order, ping)
    text = "\n".join(said)
    assert said[0].startswith("**req/s rose with every step of concurrency** in every series")
    assert "grpc n=1: 87 at c=1, 819 at c=10, 3201 at c=50" in said[0]
    assert f"1000 / {ping['rtt_avg_ms']:.2f} ms = {1000 / ping['rtt_avg_ms']:.1f} req/s" in text
    busiest = cells.sort_values("server_cpu_util").iloc[-1]
    assert f"(the most: {busiest['server_cpu_util']:.2f} in {busiest['series']} at c=50)" in text
    assert "**Measured req/s was below Little's law's**" in text and "stopped rising" not in text
    versus = compared[compared["comparison"] == "HTTP/2 vs gRPC"]
    for row in versus.itertuples():
        assert f"http2 n=1 − grpc n=1 at c={row.concurrency}: {row.difference:+.2f} ms".replace("-", "−") in text
    shown = "at none of its 3 concurrencies" if not (versus["verdict"] == "higher").any() else "concurrencies (c="
    assert shown in text
    # A run made to disagree: a server at a full core, a series whose req/s fell, Little's law on both sides.
    other = cells.copy()
    busy = (other["series"] == "http2 n=1") & (other["concurrency"] == 50)
    other.loc[busy, ["server_cpu_util", "rps"]] = [0.97, 700.0]
    other.loc[other.index[0], "littles_law_rps"] = other.loc[other.index[0], "rps"] * 0.9
    held = load.claims(other, ping["rtt_avg_ms"])
    assert held["server_bound"] and not held["rps_grows"] and not held["littles_law_systematic"]
    text = "\n".join(load.findings(other, latency, compared.iloc[:0], order, ping))
    assert "**The echo server's CPU was the limit** in 1 of 10 cells" in text and "http2 n=1 c=50 0.97" in text
    assert "**req/s stopped rising with concurrency** in 1 of 4 series" in text and "700 at c=50" in text
    assert "Little's law" not in text and "HTTP/2 vs gRPC" not in text
    # One call in flight far below 1000 / RTT: something beside the round trip held it.
    slow = cells.assign(rps=np.where(cells["concurrency"] == 1, 20.0, cells["rps"]))
    assert "**At concurrency 1 something beside the round trip held the rate**" in "\n".join(
        load.findings(slow, latency, compared, order, ping))


def test_compare_headline_keys_each_comparison(compared):
    fields = load.compare_headline(compared)
    row = compared.iloc[2]
    assert fields[f"p50_diff_ms.HTTP_2_vs_gRPC.http2 n=1.c={row.concurrency}"] == round(row.difference, 3)
    assert fields[f"p50_diff_ms.HTTP_2_vs_gRPC.http2 n=1.c={row.concurrency}.verdict"] == row.verdict
    assert len(fields) == 2 * len(compared)

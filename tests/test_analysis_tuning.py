"""The tuning notebook's rules on the shipped tuning sample: ghz windows in bins, knob pairs, the A/A control."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from labkit.analysis import tuning, tuning_report, verdict_text
from labkit.store import Run

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "samples"
TUNING_PAGE = SAMPLES.parent.parent / "docs" / "reproductions" / "tuning.md"
BIN_S = 0.25


@pytest.fixture(scope="module")
def sample():
    run = Run.open(SAMPLES / "tuning-load")
    cells, left_out = tuning.ghz_cells(run.samples())
    calls = {row["cell_id"]: tuning.binned_calls(run.raw_text(tuning.per_request_file(row["raw_files"], "ghz")), row, BIN_S)
             for _, row in cells.iterrows()}
    n_bins = int(round(run.manifest["config"]["duration_s"] / BIN_S))
    return run, cells, left_out, calls, n_bins


def test_only_ghz_cells_with_their_report_are_kept_and_labelled(sample):
    _, cells, left_out, _, _ = sample
    assert len(cells) == 16 and left_out.empty and set(cells["tool"]) == {"ghz"}
    assert sorted(set(cells["ka"])) == [0, 10000]  # keepalive off is 0 in the comparison's column
    assert cells["condition"].iloc[0] == "c=10 64B conns=1 ka=none" and cells["condition"].is_unique
    no_report = cells.head(1).assign(raw_files="")
    kept, out = tuning.ghz_cells(no_report)
    assert kept.empty and len(out) == 1


def test_binned_calls_are_the_recorded_window_and_bins_cover_it(sample):
    _, cells, _, calls, n_bins = sample
    for _, row in cells.iterrows():
        frame = calls[row["cell_id"]]
        assert len(frame) == row["requests"]
        assert frame["bin"].min() >= 0 and frame["bin"].max() < n_bins
        # req/s per bin averages to the cell's recorded req/s over the window.
        assert tuning.rps_bins(frame, n_bins, BIN_S).mean() == pytest.approx(row["rps"], rel=1e-9)


def test_empty_bins_count_as_zero_and_streams_count_their_messages():
    calls = pd.DataFrame({"bin": [0, 0, 2], "ok": [True, True, False], "messages": 1})
    assert tuning.rps_bins(calls, 4, 0.5).tolist() == [4.0, 0.0, 0.0, 0.0]
    assert tuning.rps_bins(calls.assign(messages=10), 4, 0.5).tolist() == [40.0, 0.0, 0.0, 0.0]


def test_each_pair_differs_in_its_knob_only_and_the_keepalive_pairs_are_an_aa_control(sample):
    run, cells, _, calls, n_bins = sample
    knobs = tuning.knob_range(cells)
    assert set(knobs) == {"keepalive", "pool", "payload"}
    diffs = tuning.compare_knobs(cells, calls, knobs, n_bins=n_bins, bin_s=BIN_S, n_resamples=200)
    by_id = cells.set_index("cell_id")
    for _, row in diffs.iterrows():
        column = tuning.KNOB_COLUMNS[row["knob"]]
        off, on = by_id.loc[row["off_cell"]], by_id.loc[row["on_cell"]]
        changed = [c for c in ("concurrency", "connections", "ka", "payload_bytes") if off[c] != on[c]]
        assert changed == [column] and off[column] < on[column]
        assert row["p50_lo"] <= row["p50_diff"] <= row["p50_hi"]
    assert (diffs["knob"] == "keepalive").sum() == 8
    config = run.manifest["config"]
    aa = tuning.aa_control(diffs, knobs, config["warmup_s"] + config["duration_s"])
    assert aa is not None and aa["pairs"] == 8
    null = diffs[diffs["knob"] == "keepalive"]
    assert aa["noise"]["p50"] == pytest.approx(null["p50_diff"].abs().max())
    # Beyond the null: larger than the largest A/A difference, with an interval clear of 0.
    pool = diffs[diffs["knob"] == "pool"]
    expected = (pool["p99_diff"].abs() > aa["noise"]["p99"]) & (pool["p99_verdict"] != "unclear")
    assert pool["p99_beyond_null"].astype(bool).tolist() == expected.tolist()
    # An A/A comparison it could not test is not one it called.
    assert aa["excluding"]["p50"] == int(tuning.called(null["p50_verdict"]).sum())
    table = tuning.beyond_null(diffs, ["pool", "payload"])
    assert table.loc[("pool", "p99"), "beyond, higher"] + table.loc[("pool", "p99"), "beyond, lower"] == int(expected.sum())
    # A keepalive that fires within a cell is no A/A control.
    assert tuning.aa_control(diffs, {**knobs, "keepalive": tuning.Knob("ka", 0, (1000, 20000), "")}, 10.0) is None


def test_keepalive_on_an_idle_connection_is_compared_size_by_size():
    from labkit.analysis import idle

    run = Run.open(SAMPLES / "idle-step-knobs")
    samples, _ = idle.label_conditions(run.samples())
    calls = tuning_report.idle_keepalive_calls(samples, {"a-b": run.ping_baseline("a", "b")["rtt_avg_ms"]})
    table, diffs = tuning.idle_keepalive(calls, n_resamples=200)
    assert set(diffs["keepalive"]) == {"250ms"} and diffs["payload_bytes"].is_monotonic_increasing
    at_14000 = diffs[diffs["payload_bytes"] == 14000].iloc[0]
    # The published finding of the knobs sample: keepalive made 14000 B requests a round trip slower; with 3 calls
    # a side that is Welch's t on the means, called after Holm's correction over the 5 sizes.
    assert at_14000["verdict"] == "higher" and at_14000["diff_ms"] > 150 and at_14000["statistic"] == "mean"
    assert at_14000["p_holm"] == pytest.approx(min(1.0, 5 * at_14000["p"]))
    assert np.isclose(at_14000["on_rtt"], table.at[("250ms", 14000), "value"])
    on = calls[(calls["keepalive"] == "250ms") & (calls["payload_bytes"] == 14000)]["rtt_multiple"]
    assert table.loc[("250ms", 14000), ["count", "statistic", "value"]].tolist() == [3, "mean", pytest.approx(on.mean())]
    # Every other size is unclear, and says the smallest difference its 3 calls a side could have shown.
    others = diffs[diffs["payload_bytes"] != 14000]
    assert (others["verdict"] == "unclear").all() and (others["mde_ms"] > others["diff_ms"].abs()).all()


def test_knob_table_and_verdict_headline(sample):
    _, cells, _, calls, n_bins = sample
    knobs = tuning.knob_range(cells)
    diffs = tuning.compare_knobs(cells, calls, knobs, n_bins=n_bins, bin_s=BIN_S, n_resamples=200)
    table = tuning.knob_table(diffs, "pool")
    pool = diffs[diffs["knob"] == "pool"]
    assert list(table.index) == list(pool["where"]) and len(table.columns) == 6
    first = pool.iloc[0]
    assert table.iloc[0]["p50 on − off [95 % CI]"].endswith(verdict_text(first["p50_verdict"], first["p50_mde"], "ms"))
    unclear = pool[pool["p50_verdict"] == "unclear"].iloc[0]
    assert table.loc[unclear["where"], "p50 on − off [95 % CI]"].endswith(f"unclear (MDE {unclear['p50_mde']:.3g} ms)")
    headline = tuning.verdict_headline(diffs)
    for knob in ("keepalive", "pool", "payload"):
        frame = diffs[diffs["knob"] == knob]
        assert headline[f"{knob}.compared"] == len(frame)
        assert sum(headline[f"{knob}.p99.ci_{v}"] for v in ("higher", "lower", "unclear")) == len(frame)
        assert headline[f"{knob}.rps.diff_max"] == round(float(frame["rps_diff"].max()), 2)


def test_knob_pairs_stay_within_one_server_stack(sample):
    _, cells, _, calls, n_bins = sample
    go_cells = cells.assign(server_impl="go", cell_id=cells["cell_id"] + "|server=go")
    both, _ = tuning.ghz_cells(pd.concat([cells.drop(columns=["condition", "ka", "stack"]),
                                          go_cells.drop(columns=["condition", "ka", "stack"])], ignore_index=True))
    assert both["condition"].is_unique and both["condition"].str.endswith(("tool→python", "tool→go")).all()
    both_calls = {**calls, **{cid + "|server=go": frame for cid, frame in calls.items()}}
    knobs = tuning.knob_range(both)
    assert knobs["server"] == ("server_impl", "python", ("go",), "go server vs python")
    diffs = tuning.compare_knobs(both, both_calls, knobs, n_bins=n_bins, bin_s=BIN_S, n_resamples=50)
    stack_of = both.set_index("cell_id")["stack"]
    same_stack = diffs["off_cell"].map(stack_of) == diffs["on_cell"].map(stack_of)
    # Every knob's pairs stay within one server; the server's own pairs are python against go, all else equal.
    assert same_stack[diffs["knob"] != "server"].all() and not same_stack[diffs["knob"] == "server"].any()
    assert (diffs["knob"] == "server").sum() == len(cells)
    single = tuning.compare_knobs(cells, calls, tuning.knob_range(cells), n_bins=n_bins, bin_s=BIN_S, n_resamples=50)
    assert (diffs["knob"] != "server").sum() == 2 * len(single)
    # The same calls on both sides: every server difference is exactly zero.
    assert (diffs.loc[diffs["knob"] == "server", "p50_diff"] == 0).all()


def test_options_are_a_knob_against_none():
    cells = pd.DataFrame({"ka": [0, 0], "connections": [1, 1], "payload_bytes": [64, 64], "server_impl": ["go", "go"],
                          "grpc_options": ["none", "initial-window=1MiB"], "concurrency": [10, 10]})
    assert tuning.knob_range(cells) == {"options": ("grpc_options", "none", ("initial-window=1MiB",),
                                                    "server initial-window=1MiB vs none")}
    # Two option sets and no "none": no off side to compare with, so not a knob here.
    assert tuning.knob_range(cells.assign(grpc_options=["a=1", "a=2"])) == {}


def test_a_knob_of_several_levels_compares_each_with_off(sample):
    # Pools of 1, 2, 4, 8 connections (as the tuning article's "2-4x cores"): each against 1, each pair saying which.
    _, cells, _, calls, n_bins = sample
    one = cells[(cells["connections"] == 1) & (cells["ka"] == 0) & (cells["payload_bytes"] == 64)]
    pools = pd.concat([one.assign(connections=n, cell_id=one["cell_id"] + f"|n{n}") for n in (1, 2, 4, 8)],
                      ignore_index=True)
    pool_calls = {cid + f"|n{n}": calls[cid] for cid in one["cell_id"] for n in (1, 2, 4, 8)}
    knobs = tuning.knob_range(pools)
    assert knobs == {"pool": ("connections", 1, (2, 4, 8), "2 connections vs 1, 4 connections vs 1, 8 connections vs 1")}
    diffs = tuning.compare_knobs(pools, pool_calls, knobs, n_bins=n_bins, bin_s=BIN_S, n_resamples=50)
    assert len(diffs) == 3 * len(one) and diffs["where"].is_unique
    assert sorted(set(diffs["meaning"])) == ["2 connections vs 1", "4 connections vs 1", "8 connections vs 1"]
    assert diffs["where"].str.startswith(("conns=2: c=", "conns=4: c=", "conns=8: c=")).all()
    # The same calls on every side: every difference is zero.
    assert (diffs["p50_diff"] == 0).all() and (diffs["rps_diff"] == 0).all()


# --- what the notebook reports (labkit.analysis.tuning_report) ------------------------------------

def test_keepalive_labels_and_units():
    assert [tuning_report.keepalive_label(k) for k in (float("nan"), None, 250.0, 10000)] == ["none", "none", "250ms", "10000ms"]
    assert (tuning_report.unit("rps"), tuning_report.unit("p99")) == ("req/s", "ms")


def test_a_window_that_does_not_give_back_the_row_is_named(sample):
    _, cells, _, calls, _ = sample
    assert tuning_report.window_mismatches(cells, calls) == []
    first = cells["cell_id"].iat[0]
    off_by_one = cells.assign(requests=cells["requests"] + (cells["cell_id"] == first))
    assert tuning_report.window_mismatches(off_by_one, calls) == [(first, len(calls[first]), len(calls[first]) + 1)]


def test_idle_keepalive_calls_keep_keepalive_as_the_only_knob():
    from labkit.analysis import idle

    run = Run.open(SAMPLES / "idle-step-knobs")
    samples, _ = idle.label_conditions(run.samples())
    ping = run.ping_baseline("a", "b")["rtt_avg_ms"]
    calls = tuning_report.idle_keepalive_calls(samples, {"a-b": ping})
    # The sample also has BBR, a 0.1 s gap and a background sender: all of them are left out.
    assert set(samples["cc_used"]) == {"cubic", "bbr"} and set(samples["gap_s"]) == {0.1, 1.0}
    assert set(calls["cc_used"]) == {"cubic"} and set(calls["gap_s"]) == {1.0} and calls["background_gap_s"].isna().all()
    assert calls["ok"].all() and not calls["cold"].any() and set(calls["keepalive"]) == {"none", "250ms"}
    assert np.allclose(calls["rtt_multiple"], calls["rtt_ms"] / ping)
    with pytest.raises(ValueError, match="keepalive both off and on"):
        tuning_report.idle_keepalive_calls(samples[samples["keepalive_ms"].isna()], {"a-b": ping})


def test_aa_headline_only_with_a_control():
    beyond = pd.DataFrame([{"knob": "pool", "metric": m, "beyond, higher": 1, "beyond, lower": 2} for m in tuning.METRICS]
                          ).set_index(["knob", "metric"])
    aa = {"noise": {"p50": 1.234, "p99": 10.0, "rps": 5.678}}
    headline = tuning_report.aa_headline(aa, beyond)
    assert headline["aa_keepalive.p50.max_abs_diff"] == 1.23 and headline["aa_keepalive.rps.max_abs_diff"] == 5.68
    assert (headline["pool.p99.beyond_aa_higher"], headline["pool.p99.beyond_aa_lower"]) == (1, 2)
    assert tuning_report.aa_headline(None, beyond.iloc[:0]) == {}


def test_idle_headline_per_size_off_first():
    index = pd.MultiIndex.from_tuples([("250ms", 1000), ("none", 1000), ("250ms", 16000), ("none", 16000)],
                                      names=["keepalive", "payload_bytes"])
    table = pd.DataFrame({"value": [1.01, 1.02, 2.0004, 1.9]}, index=index)
    diffs = pd.DataFrame([{"keepalive": "250ms", "payload_bytes": 16000, "diff_ms": 4.567, "verdict": "unclear",
                           "mde_ms": 7.891}])
    headline = tuning_report.idle_headline(table, diffs)
    assert list(headline) == ["idle.ka=none.rtt_multiple.1000", "idle.ka=250ms.rtt_multiple.1000",
                              "idle.ka=none.rtt_multiple.16000", "idle.ka=250ms.rtt_multiple.16000",
                              "idle.ka=250ms.diff_ms.16000", "idle.ka=250ms.diff_verdict.16000",
                              "idle.ka=250ms.diff_mde_ms.16000"]
    assert headline["idle.ka=250ms.rtt_multiple.16000"] == 2.0 and headline["idle.ka=250ms.diff_ms.16000"] == 4.57
    assert headline["idle.ka=250ms.diff_mde_ms.16000"] == 7.89


def test_untested_claims_follow_the_run():
    cells = pd.DataFrame({"connections": [4, 1], "payload_bytes": [64, 65536]})
    knobs = {"pool": tuning.Knob("connections", 1, (4,), "4 connections vs 1")}
    text = tuning_report.untested_claims(cells, knobs)
    assert "pool sizes other than 1, 4" in text and "messages above 100 KB" in text
    assert "keepalive (not varied)" in text and "pool (not varied)" not in text
    assert "rpc (not varied)" in text and "compression (not varied)" in text
    assert text.endswith("the article's absolute numbers")
    assert "messages above 100 KB" not in tuning_report.untested_claims(cells.assign(payload_bytes=[64, 200_000]), knobs)


def _pool_diffs():
    """Four pool pairs: called above and below 0, unclear with its MDE, and one that could not be tested."""
    rows = []
    for diff, verdict, mde in ((2.0, "higher", np.nan), (-1.0, "lower", np.nan), (0.5, "unclear", 1.25),
                               (0.0, "not testable", np.nan)):
        row = {"knob": "pool", "where": f"c={len(rows)}"}
        for metric in tuning.METRICS:
            row.update({f"{metric}_diff": diff, f"{metric}_verdict": verdict, f"{metric}_mde": mde})
        rows.append(row)
    return pd.DataFrame(rows)


def test_knob_sentence_counts_the_verdicts():
    diffs = _pool_diffs()
    beyond = pd.DataFrame(columns=["knob", "metric", "beyond, higher", "beyond, lower"]).set_index(["knob", "metric"])
    text = tuning_report.knob_sentence(diffs, "pool", "p50", beyond)
    # An unclear comparison says what it could have called; one that could not be tested is counted apart.
    assert text == ("p50 on − off from -1.0 to +2.0 ms (called higher in 1, lower in 1, neither in 1 (MDE 1.25 ms), "
                    "not testable in 1 of 4)")
    beyond = pd.DataFrame([{"knob": "pool", "metric": "rps", "beyond, higher": 1, "beyond, lower": 0}]).set_index(["knob", "metric"])
    text = tuning_report.knob_sentence(diffs, "pool", "rps", beyond)
    assert text.endswith("req/s (called higher in 1, lower in 1, neither in 1 (MDE 1.25 req/s), not testable in 1 of 4); "
                         "beyond the A/A differences: 1 higher, 0 lower")


def test_knob_findings_one_per_knob_with_the_family():
    diffs, beyond = _pool_diffs(), pd.DataFrame(columns=["knob", "metric"]).set_index(["knob", "metric"])
    knobs = {"pool": tuning.Knob("connections", 1, (4,), "4 connections vs 1")}
    lines = tuning_report.knob_findings(diffs, knobs, beyond)
    assert len(lines) == 1 and lines[0].startswith("**4 connections vs 1**, this run's 4 pairs: p50 on − off from −1.0")
    # The family is every pair and metric of the table: 4 × 3.
    assert lines[0].endswith("; Holm's correction over the 12 comparisons of the table.")


def test_idle_findings_are_said_where_their_predicates_hold():
    """On idle-step-knobs: keepalive every 250 ms was called slower at 14000 B, and the sizes whose calls without it
    took two round trips or more stayed so; a run made to disagree (keepalive faster at 16000 B) says that instead."""
    from labkit.analysis import idle

    run = Run.open(SAMPLES / "idle-step-knobs")
    samples, _ = idle.label_conditions(run.samples())
    calls = tuning_report.idle_keepalive_calls(samples, {"a-b": run.ping_baseline("a", "b")["rtt_avg_ms"]})
    table, diffs = tuning.idle_keepalive(calls, n_resamples=200)
    lines = tuning_report.idle_findings(table, diffs, "the run")
    slower = diffs[diffs["verdict"] == "higher"]
    assert list(slower["payload_bytes"]) == [14000] and len(lines) == 2
    row = slower.iloc[0]
    assert lines[0].startswith(f"**Keepalive every 250 ms made the idle connection slower** (the run), keepalive on − "
                               f"off: 14000 B: {row['off_rtt']:.2f} → {row['on_rtt']:.2f} ping RTTs "
                               f"(+{row['diff_ms']:.1f} ms")
    assert lines[0].endswith("called higher (Welch's t) after Holm's correction over the 5 sizes and settings.")
    stayed = diffs[diffs["off_rtt"] >= tuning_report.PENALTY_RTT]
    assert list(stayed["payload_bytes"]) == [16000, 32000, 100000]
    assert lines[1].startswith("**Keepalive every 250 ms did not remove the idle penalty**")
    assert all(f"{size} B: " in lines[1] for size in stayed["payload_bytes"]) and "14000 B" not in lines[1]
    cured = diffs.assign(verdict=np.where(diffs["payload_bytes"] == 16000, "lower", diffs["verdict"]))
    lines = tuning_report.idle_findings(table, cured, "the run")
    assert any(line.startswith("**Keepalive every 250 ms made the idle connection faster**") and "16000 B" in line
               for line in lines)
    assert "16000 B" not in next(line for line in lines if "did not remove" in line)
    assert tuning_report.idle_findings(table, diffs.iloc[:0], "the run") == []


def test_a_stream_call_keeps_its_own_latency_and_counts_as_its_messages_in_req_s():
    """Issue 29: a stream call's latency divided by its messages is a time no message waited. ghz times the
    whole EchoStream of 10 requests, and that is the latency kept; req/s counts its 10 messages."""
    from labkit.parsers import parse_ghz_json

    run = Run.open(SAMPLES / "tuning-go")
    cells, _ = tuning.ghz_cells(run.samples())
    stream = cells[cells["rpc"] == "stream"].iloc[0]
    assert stream["messages_per_call"] == 10 and stream["setting"] == "conns=1 ka=none stream=10 tool→go"
    text = run.raw_text(tuning.per_request_file(stream["raw_files"], "ghz"))
    calls = tuning.binned_calls(text, stream, BIN_S)
    raw = tuning.measured_window(parse_ghz_json(text).rows, stream["warmup_s"], stream["duration_s"])
    assert len(calls) == stream["requests"] == len(raw)
    assert np.array_equal(calls["latency_ms"].to_numpy(), raw["latency_ms"].to_numpy())
    assert calls["latency_ms"].min() > 50.0  # no stream of 10 took less than the 50.2 ms ping RTT
    n_bins = int(round(stream["duration_s"] / BIN_S))
    assert tuning.rps_bins(calls, n_bins, BIN_S).mean() == pytest.approx(10 * stream["rps"], rel=1e-9)


def test_a_difference_is_called_only_after_holms_correction_over_the_whole_table(sample):
    """Issue 16: block-bootstrap p-values, corrected over every pair and metric; no p99 from fewer than 299 calls."""
    from labkit.analysis import adjust

    run, cells, _, calls, n_bins = sample
    diffs = tuning.compare_knobs(cells, calls, tuning.knob_range(cells), n_bins=n_bins, bin_s=BIN_S, n_resamples=200)
    raw = diffs[[f"{m}_p" for m in tuning.METRICS]].to_numpy(dtype=float)
    _, by_hand = adjust(raw.ravel(), "holm")
    assert np.allclose(diffs[[f"{m}_p_holm" for m in tuning.METRICS]].to_numpy(dtype=float).ravel(), by_hand,
                       equal_nan=True)
    for metric in tuning.METRICS:
        called = tuning.called(diffs[f"{metric}_verdict"])
        assert (diffs.loc[called, f"{metric}_p_holm"] < 0.05).all()
        assert not (diffs.loc[~called, f"{metric}_p_holm"] < 0.05).any()
        assert (np.sign(diffs.loc[called, f"{metric}_diff"]) == diffs.loc[called, f"{metric}_verdict"].map(
            {"higher": 1, "lower": -1})).all()
    # Uncorrected, more comparisons would pass: the correction is doing something on this table.
    assert (raw < 0.05).sum() > sum(tuning.called(diffs[f"{m}_verdict"]).sum() for m in tuning.METRICS)
    few = diffs["p99_n"] < 299
    assert diffs.loc[few, "p99_diff"].isna().all() and diffs.loc[~few, "p99_diff"].notna().all()
    assert (diffs.loc[few, "p99_verdict"] == "not testable").all()
    # Every unclear comparison states the smallest difference the table could have called, and only those.
    for metric in tuning.METRICS:
        unclear = diffs[f"{metric}_verdict"] == "unclear"
        assert (diffs.loc[unclear, f"{metric}_mde"] > 0).all() and diffs.loc[~unclear, f"{metric}_mde"].isna().all()


def test_on_the_notebooks_sample_at_most_one_aa_comparison_in_twenty_is_called():
    """Issue 16's criterion on tuning-go, the tuning notebook's sample: keepalive off against a 10 s interval that
    never fires in a 4 s cell, every metric of every pair, after Holm's correction."""
    run = Run.open(SAMPLES / "tuning-go")
    cells, _ = tuning.ghz_cells(run.samples())
    calls = {row["cell_id"]: tuning.binned_calls(run.raw_text(tuning.per_request_file(row["raw_files"], "ghz")), row, BIN_S)
             for _, row in cells.iterrows()}
    n_bins = int(round(run.manifest["config"]["duration_s"] / BIN_S))
    diffs = tuning.compare_knobs(cells, calls, tuning.knob_range(cells), n_bins=n_bins, bin_s=BIN_S, n_resamples=500)
    null = diffs[diffs["knob"] == "keepalive"]
    compared = sum(int(null[f"{m}_p"].notna().sum()) for m in tuning.METRICS)
    called = sum(int(tuning.called(null[f"{m}_verdict"]).sum()) for m in tuning.METRICS)
    assert compared >= 8 and 20 * called <= compared, (called, compared)
    # The stream cells (one call per 10 messages) have fewer calls than a p99 needs: their 4 p99 comparisons are
    # listed as not testable and still counted in the family, so Holm's factor for the smallest p-value is every
    # comparison of the table (3 metrics × 44 pairs), not only the 128 with a p-value.
    untestable = diffs["p99_verdict"] == "not testable"
    assert untestable.sum() == 4 and set(diffs.loc[untestable, "knob"]) == {"rpc", "payload"}
    raw = diffs[[f"{m}_p" for m in tuning.METRICS]].to_numpy(dtype=float)
    adjusted = diffs[[f"{m}_p_holm" for m in tuning.METRICS]].to_numpy(dtype=float)
    assert raw.size == 132 and np.nanmin(adjusted) == pytest.approx(min(1.0, raw.size * np.nanmin(raw)))


def test_comparisons_repeated_over_runs_are_called_only_when_every_run_repeats_them():
    """Three runs of four comparisons: a pool that lowers p50 by about 10 ms in every run, three keepalive (A/A)
    pairs whose differences change sign from run to run. Only the first is called, in p50 only; its t-test is
    computed here by hand."""
    import math

    def run(pool, aa):
        rows = [{"knob": "connections", "where": "c=50", "off_cell": "c1", "on_cell": "c4", "p50_diff": pool,
                 "p99_diff": float("nan"), "rps_diff": 0.0}]
        rows += [{"knob": "keepalive", "where": f"c={c}", "off_cell": f"k{c}", "on_cell": f"K{c}", "p50_diff": d,
                  "p99_diff": float("nan"), "rps_diff": -d} for c, d in zip((10, 50, 100), aa)]
        return pd.DataFrame(rows)

    per_run = [run(-10.2, (0.4, -0.3, 0.2)), run(-9.8, (-0.5, 0.6, -0.1)), run(-10.1, (0.2, 0.1, -0.4))]
    table = tuning.diffs_between_runs(per_run)
    pool = table.iloc[0]
    values = [-10.2, -9.8, -10.1]
    mean, sd = sum(values) / 3, math.sqrt(sum((v - sum(values) / 3) ** 2 for v in values) / 2)
    assert pool["p50_mean"] == pytest.approx(mean)
    assert (pool["p50_lo"], pool["p50_hi"]) == pytest.approx((mean - 4.302653 * sd / math.sqrt(3), mean + 4.302653 * sd / math.sqrt(3)))
    t = mean / (sd / math.sqrt(3))
    assert pool["p50_p"] == pytest.approx(2 * stats.t.sf(abs(t), 2))
    assert [pool[f"p50 run {i}"] for i in (1, 2, 3)] == values
    # The pool's req/s moved by exactly 0 in every run (req/s moves in whole steps): no spread to test against, so
    # not testable rather than unclear, and like the missing p99s it still counts in the family (12, not 7).
    assert pool["p50_verdict"] == "lower" and pool["rps_verdict"] == "not testable" and pool["p99_verdict"] == "not testable"
    assert pool["p50_p_holm"] == pytest.approx(12 * pool["p50_p"])
    assert (table.loc[table["knob"] == "keepalive", ["p50_verdict", "rps_verdict"]] == "unclear").all().all()
    # The A/A comparisons are unclear, each with the smallest difference three runs could have called.
    assert (table.loc[table["knob"] == "keepalive", "p50_mde"] > 1.0).all()
    headline = tuning.runs_verdict_headline(table)
    assert headline == {"runs": 3, "runs.comparisons": 4, "runs.called.p50": 1, "runs.not_testable.p50": 0,
                        "runs.aa_called.p50": 0, "runs.called.p99": 0, "runs.not_testable.p99": 4,
                        "runs.aa_called.p99": 0, "runs.called.rps": 0, "runs.not_testable.rps": 1,
                        "runs.aa_called.rps": 0, "runs.aa_pairs": 3}


@pytest.fixture(scope="module")
def go_per_run():
    """tuning-go's three runs, every comparison made in each (few resamples: only the differences are used)."""
    from labkit import notebooks

    per_run = []
    for replicate in Run.open(SAMPLES / "tuning-go").replicates():
        cells, _ = tuning.ghz_cells(replicate.samples())
        n_bins = int(round(replicate.manifest["config"]["duration_s"] / BIN_S))
        per_run.append(tuning.compare_knobs(cells, notebooks.tuning_calls(replicate, cells, BIN_S),
                                            tuning.knob_range(cells), n_bins=n_bins, bin_s=BIN_S, n_resamples=50))
    return per_run


@pytest.fixture(scope="module")
def go_between_runs(go_per_run):
    """The three runs' comparisons tested over the runs, as the notebook's *Between runs* does."""
    return tuning.diffs_between_runs(go_per_run)


def test_streams_carry_ten_times_the_messages_at_one_round_trip_a_call_not_a_faster_message(go_per_run):
    """The notebook's streaming sentences, in every run of tuning-go: at 64 B a call of
    ten messages on one stream takes as long as a unary call (p50 within 0.2 ms) and the stream cells carry ten
    times the messages per second (ten times as many in flight); at 128 KiB the stream call is slower, and at
    concurrency 50 it carries fewer messages per second. The sentence it replaced ("per message ... p50 up to
    46 ms lower") divided a stream's latency by its messages; it must not come back."""
    for diffs in go_per_run:
        rpc = diffs[diffs["knob"] == "rpc"].set_index("where")
        assert len(rpc) == 4
        for where in ("c=10 64B", "c=50 64B"):
            assert abs(rpc.loc[where, "p50_diff"]) < 0.2
            assert 9.5 < rpc.loc[where, "rps_on"] / rpc.loc[where, "rps_off"] < 10.5
        for where in ("c=10 131072B", "c=50 131072B"):
            assert rpc.loc[where, "p50_diff"] > 50 and rpc.loc[where, "p50_verdict"] == "higher"
        assert rpc.loc["c=50 131072B", "rps_diff"] < 0
    page = " ".join(TUNING_PAGE.read_text().split())
    notebook = " ".join((Path(__file__).resolve().parent.parent / "notebooks" / "tuning.py").read_text().split())
    for text in (page, notebook):
        assert "46 ms lower" not in text and "per message, ten" not in text and "per message it pays" not in text
    # The page's first-run sentence on streams (docs/reproductions/tuning.md, what the notebook prints) gives the
    # range of the first run's differences.
    first = go_per_run[0][go_per_run[0]["knob"] == "rpc"]["p50_diff"]
    signed = lambda x: f"{'+' if x >= 0 else '−'}{abs(x):.1f}"  # noqa: E731
    assert (f"**stream vs unary (per call; req/s per message)**, this run's 4 pairs: p50 on − off from "
            f"{signed(first.min())} to {signed(first.max())} ms") in page


def test_over_the_runs_a_difference_repeated_exactly_is_not_testable_and_still_counted(go_between_runs):
    """Issue 29: req/s moves in steps, so in tuning-go 8 comparisons gave the same req/s difference in all three
    runs (0 for the 64 B pairs at c=10, −23.3 for a 2-connection pool's payload pair): no spread, so no t-test.
    They are listed as not testable, not left out, and the family Holm corrects over is all 44 × 3 comparisons."""
    between = go_between_runs
    runs = between[[f"rps run {i}" for i in (1, 2, 3)]]
    exact = runs.nunique(axis=1) == 1
    assert exact.sum() == 8 and (between.loc[exact, "rps_verdict"] == "not testable").all()
    assert (between.loc[~exact, "rps_verdict"] != "not testable").all() and len(between) == 44
    p = between[[f"{m}_p" for m in tuning.METRICS]].to_numpy(dtype=float)
    adjusted = between[[f"{m}_p_holm" for m in tuning.METRICS]].to_numpy(dtype=float)
    assert np.isnan(p).sum() == 12 and np.nanmin(adjusted) == pytest.approx(min(1.0, 132 * np.nanmin(p)))


def test_over_the_runs_unclear_is_not_no_effect(go_between_runs):
    """The issue's example, as the notebook's *Between runs* lists it: a pool at concurrency 50 with 128 KiB
    requests lowered p50 by 36–46 ms in each of the three runs, and its 95 % interval over the runs excludes 0, yet
    after Holm's correction over 132 comparisons with 2 degrees of freedom it stays unclear: its MDE (the smallest
    difference the family could have called at 80 % power) is about four times the difference. The list names
    each knob's largest unclear difference with its MDE."""
    between = go_between_runs
    pools = between[(between["knob"] == "pool") & between["where"].str.endswith("c=50 131072B")]
    assert len(pools) == 3
    for _, row in pools.iterrows():
        values = row[[f"p50 run {i}" for i in (1, 2, 3)]].to_numpy(dtype=float)
        assert (values < -30).all() and row["p50_hi"] < 0 and row["p50_verdict"] == "unclear"
        assert row["p50_mde"] > 3 * abs(row["p50_mean"])
    largest = tuning_report.largest_unclear_over_runs(between, "p50").set_index("knob")
    assert largest.loc["pool", "where"].endswith("c=50 131072B")
    lines = tuning_report.unclear_over_runs_lines(between, "p50")
    pool_line = next(line for line in lines if line.startswith("**pool, "))
    assert pool_line.endswith(f"not called after Holm's correction, MDE {largest.loc['pool', 'p50_mde']:.3g} ms.")
    assert all(not line.startswith("- ") and line for line in lines)  # sentences, as Notebook.say keeps them
    assert lines[0].startswith(f"Over the 3 runs, {(between['p50_verdict'] == 'unclear').sum()} of the 44 p50 "
                               "comparisons are unclear after Holm's correction over the table's 132 comparisons")
    table = tuning_report.runs_table(between, "p50")
    assert table.loc[("pool", largest.loc["pool", "where"]), "verdict"].startswith("unclear (MDE ")


def test_the_tuning_page_says_what_the_runs_test_gives(go_between_runs):
    """docs/reproductions/tuning.md (what the notebook prints of tuning-go, generated) against the analysis: the
    comparisons over the three runs, the called and the untestable per metric, and the pools' largest unclear p50
    difference at c=50, 128 KiB with the MDE it was not called against."""
    text = " ".join(TUNING_PAGE.read_text().split())
    headline = tuning.runs_verdict_headline(go_between_runs)
    assert (f"of its {headline['runs.comparisons']} pairs, {headline['runs.called.p50']} called in p50, "
            f"{headline['runs.called.p99']} in p99 and {headline['runs.called.rps']} in req/s "
            f"({headline['runs.not_testable.p50']}, {headline['runs.not_testable.p99']} and "
            f"{headline['runs.not_testable.rps']} not testable)") in text
    pools = go_between_runs[(go_between_runs["knob"] == "pool") & go_between_runs["where"].str.endswith("c=50 131072B")]
    assert (pools["p50_verdict"] == "unclear").all() and ((pools["p50_mde"] - 170).abs() < 15).all()
    runs = pools[[f"p50 run {i}" for i in (1, 2, 3)]].to_numpy()
    assert (runs < 0).all()  # lower in every run, and still unclear at three runs
    largest = pools.loc[pools[[f"p50 run {i}" for i in (1, 2, 3)]].mean(axis=1).abs().idxmax()]
    assert (f"**pool, its largest unclear p50 difference over the runs**, at {largest['where']}: "
            + ", ".join(f"−{-largest[f'p50 run {i}']:.1f}" for i in (1, 2, 3))) in text
    assert f"not called after Holm's correction, MDE {largest['p50_mde']:.3g} ms" in text


def test_the_tuning_page_says_what_the_first_run_gives():
    """docs/reproductions/tuning.md's first-run sentences on tuning-go's payload and pools, from the notebook's own
    comparison with the resamples the page was generated with (labkit.reproductions.SAMPLES)."""
    from labkit import notebooks, reproductions

    run = Run.open(SAMPLES / "tuning-go")
    cells, _ = tuning.ghz_cells(run.samples())
    calls = notebooks.tuning_calls(run, cells, BIN_S)
    n_bins = int(round(run.manifest["config"]["duration_s"] / BIN_S))
    n_resamples = reproductions.SAMPLES["tuning"][1]["n_resamples"]
    diffs = tuning.compare_knobs(cells, calls, tuning.knob_range(cells), n_bins=n_bins, bin_s=BIN_S,
                                 n_resamples=n_resamples)
    headline = tuning.verdict_headline(diffs)
    text = " ".join(TUNING_PAGE.read_text().split())
    payload = diffs[diffs["knob"] == "payload"]
    assert (payload["p50_diff"] > 0).all()
    assert (f"**131072 B vs 64 B**, this run's {headline['payload.compared']} pairs: p50 on − off from "
            f"+{payload['p50_diff'].min():.1f} to +{payload['p50_diff'].max():.1f} ms (called higher in "
            f"{headline['payload.p50.ci_higher']},") in text
    pool = diffs[diffs["knob"] == "pool"]
    assert (f"this run's {headline['pool.compared']} pairs: p50 on − off from −{-headline['pool.p50.diff_min']:.1f} "
            f"to +{pool['p50_diff'].max():.1f} ms (called higher in 0, lower in {headline['pool.p50.ci_lower']},") in text
    called = diffs[(diffs["knob"] == "pool") & (diffs["p50_verdict"] == "lower")]
    assert called["where"].str.endswith("c=50 131072B").all()


@pytest.fixture(scope="module")
def fair_tables():
    """The message-timed groups the notebook reads beside tuning-go: table -> (its comparisons over the runs, where
    it was measured, its cells), as :func:`labkit.notebooks.tuning_fair_section` gives them."""
    from labkit.analysis import message_load
    from labkit.notebooks import FAIR_RUNS, replicate_samples

    fair = {}
    for name, (sample, kind, _) in FAIR_RUNS.items():
        run = Run.open(SAMPLES / sample)
        replicates, every = replicate_samples(run)
        cells = message_load.message_cells(every)
        fair[name] = (message_load.over_runs(cells, message_load.KINDS[kind][0](cells)),
                      message_load.measured_on(run.manifest, len(replicates)), cells)
    return fair


def test_each_claim_is_said_from_the_runs_tables(go_per_run, go_between_runs, fair_tables):
    """The article's claims against tuning-go's first run, its group and the message-timed groups: each sentence
    where its predicate holds, with the tables' counts; runs made to disagree say otherwise."""
    run = Run.open(SAMPLES / "tuning-go")
    cells, _ = tuning.ghz_cells(run.samples())
    diffs, between = go_per_run[0].copy(), go_between_runs
    knobs = {k: v for k, v in tuning.knob_range(cells).items() if (diffs["knob"] == k).any()}
    aa = tuning.aa_control(diffs, knobs, 4.0)
    held = tuning_report.claims(diffs, between, None, fair_tables)
    keepalive = pd.concat([diffs[diffs["knob"] == "keepalive"], between[between["knob"] == "keepalive"]])
    expected = bool(keepalive[[f"{m}_verdict" for m in tuning.METRICS]].isin(["higher", "lower"]).to_numpy().any())
    assert held["keepalive_called"] == expected and not expected  # the A/A control: nothing called
    lines = tuning_report.findings(diffs, knobs, cells, run.manifest, aa=aa, between=between, idle_diffs=None,
                                   fair=fair_tables)
    said = {line.split("**")[1]: line for line in lines}
    assert said["Keepalive, the article's first claim"].endswith(
        "this run shows no effect of keepalive under continuous load.")
    assert "Keepalive on an idle connection" not in said  # no idle-step run given
    pool = diffs[diffs["knob"] == "pool"]
    counts = pool["p50_verdict"].value_counts()
    text = said["Connection pools of 2–4× cores"]
    assert f"p50 called lower in {counts.get('lower', 0)}, higher in {counts.get('higher', 0)} of 12" in text
    assert "the run's manifest records no core count, so the \"× cores\" rule is not tested" in text
    assert text.endswith("a pool was called better than one connection.") == held["pool_better"]
    assert "the threshold is not tested" in said["Messages under 100 KB"]
    assert said["Streaming beats many unary calls"].startswith(
        "**Streaming beats many unary calls**, every message timed at the same messages in flight: supported on 0 ms "
        "one way, no rate limit, 10 runs; not shown on 25 ms one way, no rate limit, 3 runs")
    article = [line for line in lines if line.startswith("**The article's ghz table")]
    assert len(article) == 2 and all("the Go server with the option codec=proto" in line for line in article)
    lan = next(line for line in article if "(0 ms one way" in line)
    whole = fair_tables["ladder_lan"][0]
    p50 = whole[(whole["comparison"] == "ladder: all steps vs default") & (whole["metric"] == "message_p50_ms")].iloc[0]
    assert f"a message's p50 {p50['A mean']:.2f} → {p50['B mean']:.2f} ms (called higher" in lan
    assert lan.count("against the article's") == 1
    # Made to disagree: a keepalive pair called, a client of two cores.
    called = diffs.copy()
    called.loc[called.index[called["knob"] == "keepalive"][0], "p50_verdict"] = "higher"
    manifest = {**run.manifest, "hosts": {"a": {"cpus_online": 2}}}
    lines = tuning_report.findings(called, knobs, cells, manifest, aa=aa, between=None, idle_diffs=None, fair={})
    said = {line.split("**")[1]: line for line in lines}
    assert said["Keepalive, the article's first claim"].endswith(
        "keepalive was called a difference, where nothing differed on the wire: cell-to-cell variation, not the knob.")
    assert ("the client has 2 cores, so the article's pool is 4–8 connections; of this run's pools (2, 4, 8) 4, 8 are "
            "in it") in said["Connection pools of 2–4× cores"]
    assert not any(key.startswith(("Streaming beats", "The article's", "A pool in the ladder")) for key in said)


def test_the_aa_control_and_the_runs_are_said_with_their_counts(go_per_run, go_between_runs):
    run = Run.open(SAMPLES / "tuning-go")
    cells, _ = tuning.ghz_cells(run.samples())
    diffs = go_per_run[0].copy()
    knobs = {k: v for k, v in tuning.knob_range(cells).items() if (diffs["knob"] == k).any()}
    aa = tuning.aa_control(diffs, knobs, 4.0)
    keepalive = diffs[diffs["knob"] == "keepalive"]
    line = tuning_report.aa_findings(aa, knobs, 4.0, diffs)[0]
    assert line.startswith("**With no change on the wire** (keepalive 10000 ms vs none, cells of 4 s: no ping due), "
                           f"the largest differences between two cells of this run were "
                           f"{keepalive['p50_diff'].abs().max():.1f} ms in p50")
    called = sum(aa["excluding"].values())
    assert f"{called} of these 12 A/A comparisons" in line and "132 comparisons of the table" in line
    assert line.endswith(": none, as it should be.") == (called == 0)
    one = {**aa, "excluding": {"p50": 1, "p99": 0, "rps": 0}}
    assert tuning_report.aa_findings(one, knobs, 4.0, diffs)[0].endswith(
        "1 of these 12 A/A comparisons was called a difference after Holm's correction over the 132 comparisons of the "
        "table: each one called is cell-to-cell variation the within-cell intervals miss.")
    assert tuning_report.aa_findings(None, knobs, 4.0, diffs) == []
    ids = [r.run_id for r in run.replicates()]
    lines = tuning_report.runs_findings(go_between_runs, ids)
    h = tuning.runs_verdict_headline(go_between_runs)
    assert lines[0].startswith(f"**Over the 3 runs of this group** (`{ids[0]}`, `{ids[1]}`, `{ids[2]}`)")
    assert (f"of its 44 pairs, {h['runs.called.p50']} called in p50, {h['runs.called.p99']} in p99 and "
            f"{h['runs.called.rps']} in req/s") in lines[0]
    # Then each knob's largest unclear difference, its negative numbers with a minus sign as the others print them.
    unclear = tuning_report.unclear_over_runs_lines(go_between_runs, "p50")
    assert [line.replace("−", "-") for line in lines[1:]] == unclear and not any("-4" in line for line in lines[1:])


def test_the_100_kb_threshold_is_tested_only_with_sizes_on_both_sides(go_per_run):
    run = Run.open(SAMPLES / "tuning-go")
    cells, _ = tuning.ghz_cells(run.samples())
    diffs = go_per_run[0].copy()
    knobs = {k: v for k, v in tuning.knob_range(cells).items() if (diffs["knob"] == k).any()}

    def said(diffs, cells):
        lines = tuning_report.findings(diffs, knobs, cells, run.manifest, aa=None, between=None, idle_diffs=None, fair={})
        return next(line for line in lines if line.startswith("**Messages under 100 KB**"))

    assert said(diffs, cells).endswith("the run's are 64 B, 131072 B: the threshold is not tested.")
    # A run made to have a size below 100 KB beside the smallest: each size's pairs are counted apart.
    payload = diffs.index[diffs["knob"] == "payload"]
    diffs.loc[payload[:8], "meaning"] = "65536 B vs 64 B"
    cells = cells.assign(payload_bytes=cells["payload_bytes"].where(cells.index > 1, 65536))
    higher = (diffs.loc[payload[:8], "p50_verdict"] == "higher").sum()
    assert f"each compared with it (65536 B vs 64 B: p50 called higher in {higher} of 8; 131072 B vs 64 B:" in said(
        diffs, cells)

"""The series notebook's rules on the shipped series samples: probes, tally, the latency split, two runs compared."""

from pathlib import Path

import pandas as pd
import pytest

from labkit.analysis import compare_groups, probes, summarize_with_ci
from labkit.store import Run

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "samples"
SPLIT_ROWS = ["echo-cold − echo-warm", "echo-warm − tcp-echo", "tcp-echo − ping",
              "echo-warm − ping", "echo-cold − ping"]


@pytest.fixture(scope="module", params=["series-wan", "series-lan"])
def samples(request):
    return Run.open(SAMPLES / request.param).samples()


@pytest.fixture(scope="module")
def wan_and_lan():
    return {name: probes.analyse_series(Run.open(SAMPLES / name).samples()) for name in ("series-wan", "series-lan")}


def test_probes_come_in_the_agents_order(samples):
    assert probes.probes_of(samples) == ["ping", "echo-warm", "echo-cold", "tcp-echo"]
    assert probes.probes_of(samples[samples["probe"].isin(["tcp-echo", "ping"])]) == ["ping", "tcp-echo"]


def test_tally_counts_duplicates_apart_from_samples_and_losses(samples):
    tally = probes.probe_tally(samples, probes.probes_of(samples))
    ping = samples[(samples["probe"] == "ping")]
    assert tally.at["ping", "duplicates"] == int(ping["duplicate"].sum())
    assert tally.at["ping", "rows"] == int((~ping["duplicate"]).sum())
    assert (tally["failed"] == tally["rows"] - tally["ok"]).all()
    made = pd.DataFrame({"probe": ["ping"] * 3, "seq": [0, 0, 1], "ok": [True, True, False], "duplicate": [False, True, False]})
    row = probes.probe_tally(made, ["ping"]).loc["ping"]
    assert (row["ticks"], row["rows"], row["ok"], row["failed"], row["duplicates"]) == (2, 2, 1, 1, 1)


def test_failure_reasons_count_failed_rows_per_probe_and_error_but_not_duplicates():
    made = pd.DataFrame({
        "probe": ["ping", "ping", "ping", "echo-cold", "echo-cold"],
        "ok": [False, False, False, False, True],
        "duplicate": [False, False, True, False, False],
        "error": ["timeout", "timeout", "timeout", "UNAVAILABLE", None],
    })
    reasons = probes.failure_reasons(made)
    assert reasons["rows"].to_dict() == {("echo-cold", "UNAVAILABLE"): 1, ("ping", "timeout"): 2}
    assert probes.failure_reasons(made[made["ok"]]).empty


def test_the_split_is_differences_of_medians_in_round_trips(samples):
    present = probes.probes_of(samples)
    rtt, split = probes.split_latency(samples, present)
    assert list(split.index) == SPLIT_ROWS
    direct = compare_groups(samples, "rtt_ms", "probe", "echo-warm", "echo-cold")
    row = split.loc["echo-cold − echo-warm"]
    assert row["median_diff_ms"] == direct.median_diff and row["in_rtts"] == pytest.approx(direct.median_diff / rtt)
    # The parts add up: (cold − warm) + (warm − tcp) + (tcp − ping) = cold − ping, in medians.
    assert split.loc[SPLIT_ROWS[:3], "median_diff_ms"].sum() == pytest.approx(split.at["echo-cold − ping", "median_diff_ms"])
    # A cold call sets up a connection first: at least one round trip more than a warm one.
    assert row["in_rtts"] >= 0.9
    # Compared tick by tick: the paired interval around the difference, from the ticks both probes answered.
    ticks = samples[samples["ok"] & ~samples["duplicate"]].pivot_table(index="seq", columns="probe", values="rtt_ms")
    assert row["pairs"] == (ticks["echo-cold"].notna() & ticks["echo-warm"].notna()).sum()
    assert row["ci_lo_ms"] <= row["median_diff_ms"] <= row["ci_hi_ms"] and 0 <= row["p"] <= 1
    _, partial = probes.split_latency(samples, ["ping", "tcp-echo"])
    assert list(partial.index) == ["tcp-echo − ping"]


def test_analyse_series_gathers_tally_summary_and_split(wan_and_lan):
    wan, lan = wan_and_lan["series-wan"], wan_and_lan["series-lan"]
    assert (wan.ticks, lan.ticks) == (120, 60)
    assert list(wan.summary.index) == wan.probes == ["ping", "echo-warm", "echo-cold", "tcp-echo"]
    expected = summarize_with_ci(wan.samples, by="probe").reindex(wan.probes)
    pd.testing.assert_frame_equal(wan.summary, expected)
    # Ping's RTT in µs (each tick's one-packet summary line), not time='s whole milliseconds above 100 ms.
    assert wan.ping_rtt == wan.summary.at["ping", "50%"] and 200 < wan.ping_rtt < 201
    pings = wan.samples.loc[(wan.samples["probe"] == "ping") & wan.samples["ok"], "rtt_ms"]
    assert (pings % 1 != 0).mean() > 0.9
    assert list(wan.differences.index) == SPLIT_ROWS
    # In round trips: ping's median is one, by definition.
    scaled = wan.in_round_trips()
    assert scaled.loc[scaled["ok"] & (scaled["probe"] == "ping"), "rtt_in_pings"].median() == 1.0


def test_findings_name_the_numbers_of_the_split(wan_and_lan):
    wan = wan_and_lan["series-wan"]
    said = probes.split_findings(wan)
    assert len(said) == 6  # set-up, a cold call, the 2016 gap's shares, and the three other splits
    cold = wan.differences.loc["echo-cold − echo-warm"]
    assert said[0].startswith(f"A new channel costs {cold['median_diff_ms']:.2f} ms more than a warm one, "
                              f"{cold['in_rtts']:.2f} round trips of ping's median ({wan.ping_rtt:.3f} ms)")
    assert f"[{cold['ci_lo_ms']:.2f}, {cold['ci_hi_ms']:.2f}] ms over the 120 ticks both answered" in said[0]
    assert "called above zero after Holm's correction over the 5 splits of this run" in said[0]
    assert "its interval lies above one round trip" in said[0]
    ratio = wan.summary.at["echo-cold", "50%"] / wan.ping_rtt
    assert f"takes {ratio:.2f} × ping's median" in said[1] and "a cold h2c call needs" in said[1] and said[1].endswith("hold.")
    share = 100 * cold["median_diff_ms"] / wan.differences.at["echo-cold − ping", "median_diff_ms"]
    assert f"connection set-up (echo-cold − echo-warm) {share:.1f} %" in said[2]
    assert said[2].endswith("most of it is connection set-up, not the RPC.")
    rpc = wan.differences.loc["echo-warm − tcp-echo"]
    assert said[3].startswith(f"On an open connection gRPC costs {rpc['median_diff_ms']:.3f} ms more than the raw TCP echo")
    assert probes.split_claims(wan) == {"setup_over_a_round_trip": True, "cold_call_three_round_trips": True,
                                        "setup_most_of_the_2016_gap": True, "rpc_stack_called": True}
    # A run with ping and the raw TCP echo only has one split, and says only that one.
    partial = probes.analyse_series(wan.samples[wan.samples["probe"].isin(["ping", "tcp-echo"])])
    (only,) = probes.split_findings(partial)
    assert only.startswith("The raw TCP echo takes") and probes.split_claims(partial) == {}


def made_to_disagree(series: probes.SeriesAnalysis) -> probes.SeriesAnalysis:
    """The run with each cold call set 1 ms above its tick's warm one, and each TCP echo at its tick's warm call give or
    take a seeded 0.3 ms: a new channel that costs less than a round trip, and an RPC stack that costs nothing."""
    import numpy as np

    samples = series.samples.copy()
    warm = samples[samples["probe"] == "echo-warm"].set_index("seq")["rtt_ms"]
    for probe, offset in (("echo-cold", 1.0), ("tcp-echo", 0.0)):
        rows = samples["probe"] == probe
        noise = np.random.default_rng(7).normal(0, 0.3, rows.sum()) if probe == "tcp-echo" else 0.0
        samples.loc[rows, "rtt_ms"] = warm.reindex(samples.loc[rows, "seq"]).to_numpy() + offset + noise
    return probes.analyse_series(samples)


@pytest.fixture(scope="module")
def disagreeing(wan_and_lan):
    return made_to_disagree(wan_and_lan["series-wan"])


def test_findings_say_what_fails_where_it_fails(disagreeing):
    said = probes.split_findings(disagreeing)
    assert probes.split_claims(disagreeing) == {"setup_over_a_round_trip": False, "cold_call_three_round_trips": False,
                                                "setup_most_of_the_2016_gap": False, "rpc_stack_called": False}
    assert said[0].endswith("its interval lies below one round trip, less than a TCP handshake takes.")
    assert "fewer than the 3 round trips a cold h2c call needs" in said[1]
    assert said[2].endswith("connection set-up is less than half of it.")
    rpc = disagreeing.differences.loc["echo-warm − tcp-echo"]
    assert rpc["p_holm"] >= probes.ALPHA
    assert f"not called after Holm's correction over the 5 splits of this run (Holm-adjusted p = {rpc['p_holm']:.2g})" in said[3]


def test_a_verdict_names_its_direction_its_correction_and_its_family():
    row = pd.Series({"median_diff_ms": -2.0, "p_holm": 0.01})
    assert probes.verdict(row, 4) == ("called below zero after Holm's correction over the 4 splits of this run "
                                      "(Holm-adjusted p = 0.01)")
    assert probes.verdict(row.copy().replace({0.01: float("nan")}), 4).startswith("not testable, counted in Holm's")
    assert probes.verdict(pd.Series({"median_diff_ms": 2.0, "p_holm": 1e-9}), 2).endswith("(Holm-adjusted p < 0.0001)")


def test_the_splits_p_values_are_corrected_over_the_run_as_one_family(wan_and_lan):
    from labkit.analysis.inference import adjust

    lan = wan_and_lan["series-lan"]
    assert list(lan.differences["p_holm"]) == pytest.approx(list(adjust(lan.differences["p"].to_list(), "holm")[1]))
    assert (lan.differences["p_holm"] >= lan.differences["p"]).all()


def test_run_labels_are_the_names_unless_they_are_the_same():
    assert probes.run_labels("wan", "r1", "lan", "r2") == ("wan", "lan")
    assert probes.run_labels("series", "r1", "series", "r2") == ("r1", "r2")


def test_two_runs_side_by_side(wan_and_lan):
    wan, lan = wan_and_lan["series-wan"], wan_and_lan["series-lan"]
    lan_without_cold = probes.analyse_series(lan.samples[lan.samples["probe"] != "echo-cold"])
    runs = {"wan": wan, "lan": lan_without_cold}
    assert probes.shared_probes(runs) == ["ping", "echo-warm", "tcp-echo"]
    medians = probes.medians_side_by_side(runs)
    assert list(medians.columns) == ["wan median (ms)", "wan × ping", "lan median (ms)", "lan × ping"]
    assert list(medians.index) == ["ping", "echo-warm", "tcp-echo"]
    assert medians.at["echo-warm", "lan × ping"] == pytest.approx(lan.summary.at["echo-warm", "50%"] / lan.ping_rtt)
    splits = probes.splits_side_by_side({"wan": wan, "lan": lan})
    assert list(splits.columns.get_level_values(0).unique()) == ["wan", "lan"]
    assert list(splits["wan"].columns) == probes.SPLIT_COLUMNS
    assert splits.at["echo-warm − tcp-echo", ("lan", "median_diff_ms")] == lan.differences.at["echo-warm − tcp-echo",
                                                                                             "median_diff_ms"]
    setup, rpc = probes.compare_findings({"wan": wan, "lan": lan})
    x, y = wan.differences.loc["echo-cold − echo-warm"], lan.differences.loc["echo-cold − echo-warm"]
    assert setup.startswith(f"Connection set-up (cold − warm) is {x['median_diff_ms']:.2f} ms, {x['in_rtts']:.2f} round "
                            f"trips, on `wan` (120 ticks) and {y['median_diff_ms']:.2f} ms, {y['in_rtts']:.2f} round trips, "
                            "on `lan` (60 ticks)")
    assert setup.endswith("on both: it scales with the round trip.")
    assert "the intervals overlap, about the same cost in ms on both links" in rpc
    # Without echo-cold on one side, only the RPC stack's cost can be compared.
    (only,) = probes.compare_findings(runs)
    assert only.startswith("The RPC stack (warm − tcp-echo) costs")


def test_two_runs_that_disagree_are_said_to(wan_and_lan, disagreeing):
    wan = wan_and_lan["series-wan"]
    setup, rpc = probes.compare_findings({"wan": wan, "made": disagreeing})
    assert setup.endswith("above one round trip of the run's own ping median on `wan` only.")
    assert rpc.endswith("the intervals do not overlap; it costs more on `wan`.")


def test_over_runs_each_split_is_said_with_the_runs_it_holds_in(wan_and_lan, disagreeing):
    wan = wan_and_lan["series-wan"]
    group = [wan, *(probes.analyse_series(Run.open(SAMPLES / name).samples()) for name in ("series-wan-2", "series-wan-3"))]
    splits = probes.splits_between_runs(group)
    said = probes.runs_findings(group, splits)
    assert [s.split(" over the ")[0] for s in said] == SPLIT_ROWS
    row = splits.loc["echo-cold − echo-warm"]
    assert said[0].startswith(f"echo-cold − echo-warm over the 3 runs: mean {row['mean']:.3f} ms, 95 % Student-t interval "
                              f"over the runs [{row['lo']:.3f}, {row['hi']:.3f}] ms (the runs as units); called above zero "
                              "in 3 of 3 runs")
    assert said[0].endswith("above one round trip of its run's ping median in 3 of 3 runs.")
    assert said[-1].endswith("a cold call at 3 round trips or more in 3 of 3 runs.")
    mixed = [wan, disagreeing]
    said = probes.runs_findings(mixed, probes.splits_between_runs(mixed))
    assert said[0].endswith("above one round trip of its run's ping median in 1 of 2 runs.")
    assert "called above zero in 1 of 2 runs" in said[1]  # the RPC stack: the made run's is not called
    assert probes.runs_findings([wan], probes.splits_between_runs([wan])) == []


def test_headline_of_a_run_and_of_its_comparison(wan_and_lan):
    wan = wan_and_lan["series-wan"]
    headline = probes.series_headline(wan)
    assert list(headline)[0] == "ping_rtt_ms" and headline["ping_rtt_ms"] == round(wan.ping_rtt, 3)
    assert headline["count.ping"] == 120 and headline["lost.ping"] == 0
    assert headline["cold_minus_warm_rtts"] == round(float(wan.differences.at["echo-cold − echo-warm", "in_rtts"]), 3)
    assert headline["cold_minus_warm_ci_lo_ms"] <= headline["cold_minus_warm_ms"] <= headline["cold_minus_warm_ci_hi_ms"]
    assert {f"{short}_ms" for *_, short in probes.SPLITS} <= set(headline)
    compared = probes.series_headline(wan, ["ping", "tcp-echo"], prefix="compare.")
    assert sorted(k for k in compared if k.startswith("compare.median_ms.")) == ["compare.median_ms.ping",
                                                                                  "compare.median_ms.tcp-echo"]
    assert "compare.ping_rtt_ms" in compared and "compare.cold_minus_warm_ms" in compared
    assert not any(key.startswith("compare.count") or key.endswith("_rtts") or "_ci_" in key for key in compared)


def test_detail_drops_the_tally_for_a_comparison_run(wan_and_lan):
    lan = wan_and_lan["series-lan"]
    assert list(lan.as_dict()) == ["probes", "tally", "summary", "differences"]
    detail = lan.as_dict(tally=False)
    assert list(detail) == ["probes", "summary", "differences"]
    assert detail["differences"]["echo-warm − tcp-echo"]["meaning"] == "RPC stack"


def test_the_splits_of_several_runs_side_by_side_with_an_interval_over_runs(wan_and_lan):
    """Two runs of different links stand in for runs of one: each column is that run's own split, the mean is
    theirs, and the interval is Student's t over the two (12.706 standard errors either side)."""
    wan, lan = wan_and_lan["series-wan"], wan_and_lan["series-lan"]
    table = probes.splits_between_runs([wan, lan])
    assert list(table.columns) == ["run 1", "run 2", "mean", "lo", "hi"]
    row = table.loc["echo-cold − echo-warm"]
    a, b = wan.differences.at["echo-cold − echo-warm", "median_diff_ms"], lan.differences.at["echo-cold − echo-warm", "median_diff_ms"]
    assert (row["run 1"], row["run 2"]) == (a, b) and row["mean"] == pytest.approx((a + b) / 2)
    half = 12.706204736174698 * abs(a - b) / 2  # t(0.975, 1 df) × sd / √2, sd of two values = |a − b| / √2
    assert (row["lo"], row["hi"]) == pytest.approx(((a + b) / 2 - half, (a + b) / 2 + half))
    alone = probes.splits_between_runs([wan])
    assert alone["lo"].isna().all() and (alone["mean"] == alone["run 1"]).all()
    headline = probes.runs_headline(table)
    assert headline["runs"] == 2 and headline["cold_minus_warm_runs_lo_ms"] == round(row["lo"], 3)
    assert probes.runs_headline(alone) == {"runs": 1}


def test_the_answered_samples_leave_out_failures_and_duplicate_replies(samples):
    rows = probes.answered(samples)
    assert rows["ok"].all() and not rows["duplicate"].any()
    assert len(rows) == int((samples["ok"] & ~samples["duplicate"]).sum())
    marked = samples.assign(duplicate=samples.index == samples.index[0], ok=True)
    assert len(probes.answered(marked)) == len(samples) - 1


def test_the_split_tick_by_tick_adds_up_to_each_ticks_cold_call(samples):
    """The series figure's panels: ping, then each step up to a cold call, at the same tick; their sum at a tick
    is that tick's cold call, and their medians are the split's (the differences of medians, to a tick's noise)."""
    found = probes.probes_of(samples)
    parts = probes.per_tick_splits(samples, found)
    assert list(dict.fromkeys(parts["part"])) == ["ping", "tcp-echo − ping", "echo-warm − tcp-echo",
                                                  "echo-cold − echo-warm"]
    wide = parts.pivot_table(index="seq", columns="part", values="ms").dropna()
    answered = probes.answered(samples)
    cold = answered[answered["probe"] == "echo-cold"].set_index("seq")["rtt_ms"]
    assert len(wide) > 0.9 * samples["seq"].nunique()
    pd.testing.assert_series_equal(wide.sum(axis=1), cold.reindex(wide.index), check_names=False, atol=1e-9)
    assert parts.groupby("seq")["t_utc"].nunique().max() == 1  # one send time a tick, for every part
    _, split = probes.split_latency(samples, found)
    for part in ["tcp-echo − ping", "echo-warm − tcp-echo", "echo-cold − echo-warm"]:
        assert wide[part].median() == pytest.approx(split.at[part, "median_diff_ms"], abs=0.5)

"""The 2016 re-reading on the shipped orca-2016 logs: the strict patterns, what they lost, per-pass cut-offs."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from labkit.analysis import compare_groups, ping_vs_echo, zscore_trim
from labkit.importers import read_source
from labkit.store import Run

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "samples" / "orca-2016"


@pytest.fixture(scope="module")
def orca():
    run = Run.open(SAMPLE)
    imports = run.manifest["imports"]
    texts = {i["cell_id"]: read_source(run.path / i["raw"])[1] for i in imports if i["kind"] in ping_vs_echo.STRICT_2016}
    return run.samples(), imports, texts


def test_the_strict_reading_finds_what_the_2016_notebook_parsed(orca):
    _, imports, texts = orca
    original = ping_vs_echo.original_samples(imports, texts)
    assert original.groupby("probe").size().to_dict() == {"echo-cold": 3597, "ping": 3593}


def test_strict_patterns_take_only_times_in_milliseconds():
    lines = ("64 bytes from 10.0.0.1: icmp_seq=7 ttl=64 time=12.5 ms\n"
             "64 bytes from 10.0.0.1: icmp_seq=8 ttl=64 time=1.2 s\n")
    assert ping_vs_echo.read_like_2016("ping", lines) == [{"seq": 7, "rtt_ms": 12.5}]
    assert ping_vs_echo.read_like_2016("iperf3", lines) == []


def test_every_lost_sample_is_named_with_its_reason_and_line(orca):
    samples, imports, texts = orca
    original = ping_vs_echo.original_samples(imports, texts)
    lost = ping_vs_echo.lost_by_2016(samples, original, texts)
    assert len(original) + len(lost) == int(samples["ok"].sum())
    assert set(lost["reason"]) <= {"line does not match the strict pattern"} | {f"time written in {u}" for u in lost["unit"]}
    assert all(f"seq={s}" in line or f"seq {s}" in line for s, line in zip(lost["seq"], lost["raw_line"]))
    # A strict sample labkit did not read the same way is refused: the corrected reading must include the original.
    wrong = original.copy()
    wrong.loc[wrong.index[0], "rtt_ms"] += 1
    with pytest.raises(ValueError, match="read it differently"):
        ping_vs_echo.lost_by_2016(samples, wrong, texts)


def test_first_line_by_seq_keeps_the_first_mention():
    text = "reply seq=3 time=1ms\nlate reply seq=3 time=9ms\nseq 4 lost\n"
    assert ping_vs_echo.first_line_by_seq(text) == {3: "reply seq=3 time=1ms", 4: "seq 4 lost"}


def test_the_original_variant_reproduces_the_published_counts(orca):
    samples, imports, texts = orca
    original = ping_vs_echo.original_samples(imports, texts)
    variants = ping_vs_echo.trim_variants(original, samples, ["ping", "echo-cold"], scope="per-group", threshold=3, passes=2)
    assert list(variants) == ["original", "corrected_pooled", "corrected_per_group"]
    table = variants["original"]["table"]
    assert (table.at["count", "ping"], table.at["count", "echo-cold"]) == (3567, 3538)
    assert list(table.index) == ping_vs_echo.ORIGINAL_LAYOUT
    assert variants["corrected_per_group"]["trim"].settings["scope"] == "per-group"


def test_cutoffs_are_mean_plus_minus_threshold_sigma_of_what_the_previous_pass_kept():
    values = np.r_[np.random.default_rng(3).normal(10, 1, 200), [40.0, 25.0]]
    frame = pd.DataFrame({"rtt_ms": values, "ok": True, "probe": "a"})
    result = zscore_trim(frame, threshold=3, passes=3)
    first = result.cutoffs.loc[(1, "all")]
    assert (first["n"], first["center"], first["scale"]) == (202, pytest.approx(values.mean()), pytest.approx(values.std()))
    assert first["high"] == pytest.approx(values.mean() + 3 * values.std())
    assert first["removed"] == int((values >= first["high"]).sum() + (values <= first["low"]).sum())
    survivors = values[(values < first["high"]) & (values > first["low"])]
    second = result.cutoffs.loc[(2, "all")]
    assert (second["n"], second["center"]) == (len(survivors), pytest.approx(survivors.mean()))
    assert result.cutoffs["removed"].sum() == result.n_removed


def test_per_group_cutoffs_have_one_row_per_group_and_pass():
    frame = pd.DataFrame({"rtt_ms": [1.0, 1.1, 0.9, 50.0, 100.0, 101.0, 99.0, 100.5], "ok": True,
                          "probe": ["a"] * 4 + ["b"] * 4})
    result = zscore_trim(frame, by="probe", scope="per-group", threshold=1.5, passes=1)
    assert sorted(result.cutoffs.index) == [(1, "a"), (1, "b")]
    assert result.cutoffs.loc[(1, "a"), "removed"] == 1


def test_each_pass_keeps_what_it_scored_less_what_it_removed_and_the_next_pass_scores_that():
    values = np.r_[np.random.default_rng(5).normal(20, 2, 300), [90.0, 60.0, 45.0]]
    cutoffs = zscore_trim(pd.DataFrame({"rtt_ms": values, "ok": True}), threshold=3, passes=3).cutoffs
    assert (cutoffs["kept"] == cutoffs["n"] - cutoffs["removed"]).all()
    assert list(cutoffs["n"].iloc[1:]) == list(cutoffs["kept"].iloc[:-1])


@pytest.fixture(scope="module")
def reread(orca):
    samples, imports, texts = orca
    probes = ping_vs_echo.probe_order(samples)
    original = ping_vs_echo.original_samples(imports, texts)
    variants = ping_vs_echo.trim_variants(original, samples, probes, scope="per-group", threshold=3, passes=2)
    return samples, probes, original, variants


def test_ping_comes_first_and_the_echo_is_the_probe_compared_with_it():
    made = pd.DataFrame({"probe": ["tcp-echo", "echo-cold", "ping"]})
    assert ping_vs_echo.probe_order(made) == ["ping", "echo-cold", "tcp-echo"]
    assert ping_vs_echo.echo_probe(["ping", "echo-cold", "tcp-echo"]) == "echo-cold"
    assert ping_vs_echo.echo_probe(["ping"]) is None


def test_tallies_of_the_imported_logs(orca):
    samples, imports, _ = orca
    table = ping_vs_echo.imports_table(imports)
    assert table.at["go-echo:echo.txt.gz", "units"] == "ms ×3598, s ×2"
    assert table.at["ping:ping.txt.gz", "probe"] == "ping"
    tally = ping_vs_echo.sample_tally(samples, ["ping", "echo-cold"])
    assert tally.loc["ping"].to_dict() == {"rows": 3600, "samples": 3593, "duplicates": 0, "lost": 7}
    # A duplicate reply is a row (not ok, as the ping parser writes it) but no loss: lost rows are neither ok nor duplicate.
    made = pd.DataFrame({"probe": ["ping"] * 5, "ok": [True, True, False, False, False],
                         "duplicate": [False, False, True, False, False]})
    assert ping_vs_echo.sample_tally(made, ["ping"]).loc["ping"].to_dict() == {"rows": 5, "samples": 2, "duplicates": 1,
                                                                              "lost": 2}


def test_the_samples_in_seconds_are_the_two_slow_echo_calls(orca):
    samples, *_ = orca
    seconds = ping_vs_echo.seconds_valued(samples)
    assert list(seconds["seq"]) == [2786, 3021] and set(seconds["unit"]) == {"s"}


def test_the_slowest_samples_are_removed_by_the_first_pass_of_each_corrected_variant(reread):
    samples, _, _, variants = reread
    fate = ping_vs_echo.fate_of_slow_samples(samples, variants, over_ms=1000)
    assert list(zip(fate["probe"], fate["seq"])) == [("ping", 3119), ("echo-cold", 2786), ("echo-cold", 3021)]
    assert list(fate.columns[-2:]) == ["removed in pass: corrected_pooled", "removed in pass: corrected_per_group"]
    assert (fate.iloc[:, -2:] == 1).all().all()
    # Above a threshold no sample reaches, there is nothing to follow.
    assert ping_vs_echo.fate_of_slow_samples(samples, variants, over_ms=1e6).empty


def test_cutoffs_side_by_side_are_each_variants_own(reread):
    *_, variants = reread
    table = ping_vs_echo.cutoffs_side_by_side(variants, ["original", "corrected_per_group"])
    original = variants["original"]["trim"].cutoffs
    assert table.loc[("original", 1, "all"), "high cut-off (ms)"] == original.at[(1, "all"), "high"]
    assert sorted(table.loc["corrected_per_group"].index) == [(1, "echo-cold"), (1, "ping"), (2, "echo-cold"), (2, "ping")]
    # The original's passes removed what its counts say: 26 ping and 59 echo samples in all.
    assert table.loc["original", "removed"].sum() == 26 + 59


def test_variants_side_by_side_and_the_headline(reread, orca):
    samples, probes, original, variants = reread
    _, _, texts = orca
    side = ping_vs_echo.variants_side_by_side(variants)
    assert side.at["count", ("original", "ping")] == 3567 and list(side.index) == ["count", "50%", "max"]
    dropped = ping_vs_echo.lost_by_2016(samples, original, texts)
    comparison = ping_vs_echo.median_gap(samples, "echo-cold", n_resamples=200)
    headline = ping_vs_echo.headline(probes, variants, tally=ping_vs_echo.sample_tally(samples, probes), original=original,
                                     dropped=dropped, seconds=ping_vs_echo.seconds_valued(samples), comparison=comparison)
    assert (headline["original.ping.count"], headline["original.echo-cold.count"]) == (3567, 3538)
    assert headline["original.ping.median_ms"] == 12.747
    assert (headline["parsed_by_original.echo-cold"], headline["dropped_by_original.echo-cold"]) == (3597, 3)
    assert (headline["samples.ping"], headline["lost.ping"], headline["seconds_valued.echo-cold"]) == (3593, 7, 2)
    assert headline["median_diff_ms"] == round(comparison.difference, 3)
    assert headline["median_diff_ci_lo_ms"] <= headline["median_diff_ms"] <= headline["median_diff_ci_hi_ms"]
    assert comparison.n_a == headline["samples.ping"] and comparison.n_b == headline["samples.echo-cold"]
    without_echo = ping_vs_echo.headline(["ping"], {}, tally=ping_vs_echo.sample_tally(samples, ["ping"]), original=original,
                                         dropped=dropped, seconds=samples.iloc[:0], comparison=None)
    assert "median_diff_ms" not in without_echo and without_echo["seconds_valued.ping"] == 0
    detail = ping_vs_echo.variants_detail(variants)
    assert detail["original"]["trim_counts"]["echo-cold"]["kept"] == 3538 and detail["original"]["scope"] == "pooled"


def test_the_2016_trim_does_not_converge_with_more_passes(reread):
    """Issue 16: the per-group trim of the 2016 echo keeps 3554, 3511, 3476, 3471 after 2, 3, 5, 10 passes."""
    samples, probes, _, _ = reread
    table = ping_vs_echo.kept_by_passes(samples, probes, scope="per-group", threshold=3.0)
    assert list(table.index) == [2, 3, 5, 10]
    assert table["echo-cold"].tolist() == [3554, 3511, 3476, 3471]
    assert not ping_vs_echo.trim_converged(table)  # 3476 after 5 passes, 3471 after 10
    settled = pd.DataFrame({"ping": [3580, 3575, 3575], "echo-cold": [3554, 3511, 3511]}, index=[2, 5, 10])
    assert ping_vs_echo.trim_converged(settled) and not ping_vs_echo.trim_converged(settled.iloc[:1])


def test_answered_samples_come_in_the_order_they_were_taken(reread):
    samples = reread[0]
    ordered = ping_vs_echo.answered_in_time_order(samples.sample(frac=1.0, random_state=1))
    assert ordered["ok"].all() and len(ordered) == samples["ok"].sum()
    assert ordered["t_utc_ns"].dropna().is_monotonic_increasing  # samples without a time come last


# --- the sentences: each where its predicate holds, with this run's numbers --------------------------------------


def test_the_lost_probes_are_said_with_their_counts(orca):
    samples, *_ = orca
    tally = ping_vs_echo.sample_tally(samples, ["ping", "echo-cold"])
    (said,) = ping_vs_echo.lost_findings(tally, ["ping", "echo-cold"])
    assert "ping 7 of its 3600 rows" in said and "echo-cold" not in said
    answered = samples[samples["ok"]]
    assert ping_vs_echo.lost_findings(ping_vs_echo.sample_tally(answered, ["ping", "echo-cold"]), ["ping", "echo-cold"]) == []


def test_the_strict_reading_is_said_to_lose_what_it_loses(orca):
    samples, imports, texts = orca
    original = ping_vs_echo.original_samples(imports, texts)
    dropped = ping_vs_echo.lost_by_2016(samples, original, texts)
    lost, slowest = ping_vs_echo.strict_reading_findings(samples, original, dropped, len(texts))
    assert lost.startswith(f"The strict 2016 reading finds {len(original)} of the {int(samples['ok'].sum())} samples")
    assert "loses 3 without a count" in lost and "seq 2786, 3021; 1868.984 ms, 2079.864 ms" in lost
    assert "line does not match the strict pattern: seq 17; 28.978 ms" in lost
    assert slowest.startswith("The 2 echo-cold samples it loses for their unit are that probe's 2 slowest of 3600")
    # A slower call written in ms: the ones lost for their unit are no longer the slowest, and nothing says they are.
    slower = samples.copy()
    slower.loc[(slower["probe"] == "echo-cold") & (slower["seq"] == 100), "rtt_ms"] = 5000.0
    assert len(ping_vs_echo.strict_reading_findings(slower, original, dropped, len(texts))) == 1
    # Nothing lost: said so, with the count; no log the patterns apply to: nothing said.
    kept = samples.drop(index=dropped.index)
    (none,) = ping_vs_echo.strict_reading_findings(kept, original, dropped.iloc[:0], len(texts))
    assert f"finds all {len(original)} samples" in none
    assert ping_vs_echo.strict_reading_findings(samples, original.iloc[:0], dropped.iloc[:0], 0) == []


def test_the_published_table_is_reproduced_cell_by_cell(reread):
    _, probes, _, variants = reread
    cells = ping_vs_echo.against_published(variants["original"]["table"], "echo-cold")
    assert len(cells) == 16 and cells["reproduced"].all()
    # The published figures are cut to three decimals: 28.989888 is 28.989, std 1.877744 is 1.877.
    median = cells[(cells["probe"] == "echo-cold") & (cells["statistic"] == "50%")].iloc[0]
    assert (median["published"], round(median["this_run"], 6)) == (28.989, 28.989888)
    (said,) = ping_vs_echo.published_findings(variants, probes, "echo-cold", threshold=3, passes=2)
    assert "reproduces 16 of its 16 cells" in said and "ping n = 3567, median 12.7470 ms" in said
    assert "differs" not in said and "write-up's trim" not in said
    assert ping_vs_echo.claims(variants, "echo-cold", dropped=pd.DataFrame())["published_table"]


def test_a_table_that_differs_is_said_to_differ_where_it_does(reread):
    samples, probes, original, _ = reread
    # Without the strict reading's first 40 echo samples the echo column moves (count and more); ping's does not.
    fewer = original.drop(index=original[original["probe"] == "echo-cold"].index[:40])
    variants = ping_vs_echo.trim_variants(fewer, samples, probes, scope="per-group", threshold=3, passes=2)
    cells = ping_vs_echo.against_published(variants["original"]["table"], "echo-cold")
    (said,) = ping_vs_echo.published_findings(variants, probes, "echo-cold", threshold=3, passes=2)
    assert f"reproduces {int(cells['reproduced'].sum())} of its 16 cells" in said
    assert cells.loc[cells["column"] == "ping", "reproduced"].all() and not cells["reproduced"].all()
    count = int(variants["original"]["table"].at["count", "echo-cold"])
    assert f"it differs in echo-cold count {count} against 3538" in said
    assert not ping_vs_echo.claims(variants, "echo-cold", dropped=pd.DataFrame())["published_table"]
    # Another trim than the write-up's is named beside it; a run without an echo has no echo column to set against.
    (other,) = ping_vs_echo.published_findings(variants, probes, "echo-cold", threshold=2.5, passes=3)
    assert "trimmed pooled at |z| < 2.5 in 3 passes (the write-up's trim: |z| < 3, 2 passes)" in other
    (ping_only,) = ping_vs_echo.published_findings(variants, ["ping"], None, threshold=3, passes=2)
    assert "reproduces 8 of its 16 cells" in ping_only and "no probe for its echo column" in ping_only
    # Trimmed alone, ping is scored against its own spread: not the published trim, and its table shows it.
    alone = ping_vs_echo.trim_variants(original[original["probe"] == "ping"], samples[samples["probe"] == "ping"], ["ping"],
                                       scope="per-group", threshold=3, passes=2)
    (ping_alone,) = ping_vs_echo.published_findings(alone, ["ping"], None, threshold=3, passes=2)
    assert "reproduces 1 of its 16 cells" in ping_alone and "ping count 3551 against 3567" in ping_alone


def test_the_pooled_trim_is_said_to_move_with_the_samples_the_original_lost(reread):
    samples, probes, original, variants = reread
    moves, fast = ping_vs_echo.pooled_trim_findings(variants, probes, threshold=3, passes=2)
    pooled, first = variants["corrected_pooled"]["table"], variants["corrected_pooled"]["trim"].cutoffs.iloc[0]
    assert f"echo-cold n 3538 → {int(pooled.at['count', 'echo-cold'])}, max 49.040 → {pooled.at['max', 'echo-cold']:.3f} ms" in moves
    assert f"high cut-off goes from 127.95 to {first['high']:.2f} ms" in moves
    assert fast.startswith("No pass of the pooled trim can remove a fast sample") and "(10.616 ms)" in fast
    # The strict reading's samples as the run's own: nothing lost, so the table keeps its counts and max.
    same = ping_vs_echo.trim_variants(original, original, probes, scope="per-group", threshold=3, passes=2)
    kept, _ = ping_vs_echo.pooled_trim_findings(same, probes, threshold=3, passes=2)
    assert kept.endswith("keeps the count and the max of every probe: ping n = 3567, echo-cold n = 3538.")
    # One probe: nothing pooled over two distributions.
    alone = ping_vs_echo.trim_variants(original.iloc[:0], samples[samples["probe"] == "ping"], ["ping"], scope="per-group",
                                       threshold=3, passes=2)
    assert not any("No pass" in s for s in ping_vs_echo.pooled_trim_findings(alone, ["ping"], threshold=3, passes=2))


def test_the_trim_within_each_probe_and_whether_it_converges(reread):
    samples, probes, _, variants = reread
    by_passes = ping_vs_echo.kept_by_passes(samples, probes, scope="per-group", threshold=3.0)
    own, converges = ping_vs_echo.own_trim_findings(variants, probes, threshold=3, passes=2, by_passes=by_passes)
    table = variants["corrected_per_group"]["table"]
    assert f"ping keeps {int(table.at['count', 'ping'])} of its 3593 samples, max {table.at['max', 'ping']:.3f} ms (pooled:" in own
    assert converges.startswith("The per-group trim (|z| < 3) does not converge") and "echo-cold 3554, 3511, 3476, 3471" in converges
    # Lost probes are no samples: ping's count after 2 passes is the table's.
    assert by_passes.at[2, "ping"] == table.at["count", "ping"]
    settled = pd.DataFrame({"ping": [3580, 3575, 3575], "echo-cold": [3554, 3511, 3511]}, index=[2, 5, 10])
    (_, said) = ping_vs_echo.own_trim_findings(variants, probes, threshold=3, passes=2, by_passes=settled)
    assert said.startswith("The per-group trim (|z| < 3) converges: it keeps ping 3580, 3575, 3575")


def test_the_gap_against_the_published_one_and_a_round_trip(reread):
    from labkit.analysis.inference import Difference

    samples = reread[0]
    gap = ping_vs_echo.median_gap(samples, "echo-cold", n_resamples=300)
    ping = float(samples.loc[samples["ok"] & (samples["probe"] == "ping"), "rtt_ms"].median())
    inside, cold = ping_vs_echo.gap_findings(gap, "echo-cold", ping, cold=True)
    assert f"{gap.difference:.2f} ms (95 % block-bootstrap interval [{gap.low:.2f}, {gap.high:.2f}] ms; n = 3593 ping, " \
           "3600 echo-cold)" in inside
    assert (gap.low <= 16.242 <= gap.high) and inside.endswith("= 16.242 ms (after the pooled trim), lies inside it.")
    assert f"the gap is {gap.difference / ping:.2f} times ping's median round trip ({ping:.2f} ms)" in cold
    assert ping_vs_echo.claims(reread[3], "echo-cold", dropped=pd.DataFrame(), comparison=gap, ping_median=ping) == {
        "published_table": True, "strict_reading_loses": False, "published_gap_inside": True, "gap_over_a_round_trip": True}
    # A gap whose interval misses the published one, and reaches below a round trip; an echo on an open connection.
    made = Difference(5.0, 4.0, 6.0, 0.0, 100, 100)
    outside, short = ping_vs_echo.gap_findings(made, "echo-cold", 12.0, cold=True)
    assert outside.endswith("lies outside it.") and "yet the gap's interval reaches below one of ping's median" in short
    assert "[4.00, 6.00] ms" in outside and "(4.00 against 12.00 ms; 0.42 round trips)" in short
    assert len(ping_vs_echo.gap_findings(made, "echo-warm", 12.0, cold=False)) == 1

"""labkit.analysis.inference against answers known without it: synthetic series with a known median, closed forms,
and corrections computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from labkit.analysis import (adjust, between_runs, block_bootstrap, block_bootstrap_difference, block_draws, block_length,
                             bootstrap_ci, call_differences, call_family, call_table, data_needs, data_needs_in_short,
                             location_interval, method_for, min_samples_for_percentile,
                             minimum_detectable_effect, normal_pvalue, one_sample_t, paired_block_difference,
                             percentile_if_enough, runs_bootstrap, runs_t_interval, samples_for_median,
                             samples_for_proportion, statistics_named, thin_statistics, two_sample_difference,
                             verdict_text, welch_t)


def ar1(n: int, phi: float, rng: np.random.Generator) -> np.ndarray:
    """A stationary AR(1) series with standard normal innovations: its median is 0 (symmetric, mean 0)."""
    values = np.empty(n)
    values[0] = rng.normal() / math.sqrt(1 - phi * phi)  # drawn from the stationary distribution
    for i in range(1, n):
        values[i] = phi * values[i - 1] + rng.normal()
    return values


def test_the_block_interval_covers_an_ar1_median_as_promised_and_the_iid_one_does_not():
    """The issue's criterion: φ = 0.9, 200 seeded trials; the block bootstrap covers the true median (0) in 90–99 %
    of them, the iid bootstrap of the same samples far less often (its interval is too narrow)."""
    rng = np.random.default_rng(2026)
    trials, block_hits, iid_hits = 200, 0, 0
    for trial in range(trials):
        series = ar1(1000, 0.9, rng)
        low, high = block_bootstrap(series, seed=trial, n_resamples=500)
        block_hits += low <= 0 <= high
        low, high = bootstrap_ci(series, seed=trial, n_resamples=500)  # every sample on its own
        iid_hits += low <= 0 <= high
    assert 0.90 <= block_hits / trials <= 0.99, block_hits
    assert iid_hits / trials < 0.6, iid_hits


def test_the_block_length_follows_the_dependence():
    rng = np.random.default_rng(7)
    assert block_length(rng.normal(size=2000)) <= 3
    assert block_length(ar1(2000, 0.9, rng)) >= 10
    assert block_length([5.0] * 100) == 1 and block_length([1.0, 2.0]) == 1


def test_an_interval_needs_two_values_and_leaves_out_nan():
    assert all(math.isnan(v) for v in block_bootstrap([1.0]))
    low, high = block_bootstrap([1.0, np.nan, 2.0, 3.0, np.nan, 4.0] * 5, seed=1)
    assert 1.0 <= low <= high <= 4.0
    # Seeded: the same interval twice.
    assert block_bootstrap(np.arange(50.0), seed=3) == block_bootstrap(np.arange(50.0), seed=3)


def test_probes_on_one_schedule_compared_pairwise_see_through_what_the_ticks_share():
    """Two probes riding the same slowly wandering path, one 0.5 above the other: tick by tick the difference is
    0.5 plus small noise; unpaired, the path's wander is counted as noise and the interval is many times wider."""
    rng = np.random.default_rng(11)
    path = 20 + 3 * ar1(600, 0.95, rng)
    a = path + rng.normal(scale=0.1, size=path.size)
    b = path + 0.5 + rng.normal(scale=0.1, size=path.size)
    b[[10, 20, 30]] = np.nan  # ticks where one probe failed are left out, pairs and all
    paired = paired_block_difference(a, b, seed=0)
    assert paired.n_a == paired.n_b == 597 and paired.low <= 0.5 <= paired.high
    assert paired.difference == pytest.approx(np.nanmedian(b) - np.median(a)) and abs(paired.difference - 0.5) < 0.05
    unpaired = block_bootstrap_difference(a, b, seed=0)
    assert unpaired.n_a == 600 and unpaired.n_b == 597
    assert (unpaired.high - unpaired.low) > 5 * (paired.high - paired.low)


def test_an_aa_comparison_of_time_ordered_samples_is_rarely_significant_and_mann_whitney_often():
    """Two cells with no difference, each an AR(1) series (φ = 0.9) of 1000 calls, in 100 seeded trials: the block
    bootstrap's p-value is below 0.05 in about 5–10 % of them (a percentile bootstrap is a little liberal on
    dependent samples); Mann–Whitney, which takes the calls as independent,
    in far more."""
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(17)
    trials, block_rejects, mw_rejects = 100, 0, 0
    for trial in range(trials):
        a, b = ar1(1000, 0.9, rng), ar1(1000, 0.9, rng)
        block_rejects += block_bootstrap_difference(a, b, seed=trial, n_resamples=1000).pvalue < 0.05
        mw_rejects += mannwhitneyu(a, b).pvalue < 0.05
    assert block_rejects / trials <= 0.12 and mw_rejects / trials >= 0.3, (block_rejects, mw_rejects)


def test_runs_are_the_units_when_a_cell_has_several():
    """Each run has an offset of its own (a connection, a moment of the path): 8 runs of 200 samples. Resampling
    whole runs covers the true median (0) in most of 100 trials; pooling the samples as if independent almost
    never does."""
    rng = np.random.default_rng(5)
    trials, run_hits, pooled_hits = 100, 0, 0
    for trial in range(trials):
        runs = [rng.normal() + rng.normal(scale=0.1, size=200) for _ in range(8)]
        center, low, high = runs_bootstrap(runs, seed=trial, n_resamples=500)
        run_hits += low <= 0 <= high
        low, high = bootstrap_ci(np.concatenate(runs), seed=trial, n_resamples=500)
        pooled_hits += low <= 0 <= high
    assert run_hits / trials >= 0.8 and pooled_hits / trials <= 0.3, (run_hits, pooled_hits)
    center, low, high = runs_bootstrap([[1.0, 2.0, 3.0]])
    assert center == 2.0 and math.isnan(low) and math.isnan(high)


def test_between_runs_gives_each_runs_statistic_and_a_t_interval_over_runs():
    """Three runs whose levels differ (1, 2, 6) and a second group only two runs have: each run's median is its
    own, the pooled median is that of every value, and the interval is Student's t over the three runs' medians,
    computed here by hand."""
    rng = np.random.default_rng(7)
    parts = []
    for number, level in ((1, 1.0), (2, 2.0), (3, 6.0)):
        parts.append(pd.DataFrame({"size": 10, "v": level + rng.normal(scale=0.01, size=30), "replicate": number}))
    parts.append(pd.DataFrame({"size": 20, "v": [5.0, 7.0], "replicate": [1, 3]}))
    frame = pd.concat(parts, ignore_index=True)
    table = between_runs(frame, "v", "size")
    row = table.loc[10]
    medians = [row[f"run {k}"] for k in (1, 2, 3)]
    assert [round(m) for m in medians] == [1, 2, 6] and (row["runs"], row["n"]) == (3, 90)
    assert row["pooled"] == np.median(frame.loc[frame["size"] == 10, "v"])
    half = 4.302652729911275 * np.std(medians, ddof=1) / math.sqrt(3)  # t(0.975, 2 df)
    assert row["mean"] == pytest.approx(np.mean(medians))
    assert (row["lo"], row["hi"]) == pytest.approx((np.mean(medians) - half, np.mean(medians) + half))
    other = table.loc[20]
    assert math.isnan(other["run 2"]) and (other["runs"], other["n"], other["pooled"]) == (2, 2, 6.0)


def test_the_t_interval_over_few_runs_keeps_its_coverage_where_resampling_runs_does_not():
    """Three runs, each with its own level (between-run sd 1) and 200 samples around it: over 200 seeded trials the
    t interval over the runs' medians covers the true median (0) in about 95 %, resampling the three runs in
    about 75 % (it spans little more than their range)."""
    rng = np.random.default_rng(11)
    trials, t_hits, boot_hits = 200, 0, 0
    for trial in range(trials):
        runs = [rng.normal() + rng.normal(scale=0.1, size=200) for _ in range(3)]
        _, low, high = runs_t_interval([np.median(r) for r in runs])
        t_hits += low <= 0 <= high
        _, low, high = runs_bootstrap(runs, seed=trial, n_resamples=300)
        boot_hits += low <= 0 <= high
    assert 0.9 <= t_hits / trials <= 0.99 and boot_hits / trials < 0.85, (t_hits, boot_hits)
    assert all(math.isnan(x) for x in runs_t_interval([1.0])[1:])


def test_below_ten_values_a_side_welchs_interval_keeps_its_coverage_where_the_percentile_bootstrap_falls_short():
    """Issue 29: 2000 seeded pairs of samples of 3, 4 and 5 values a side, b shifted by exactly 1 from a. Welch's
    95 % interval (what :func:`two_sample_difference` gives at these sizes) holds 1 in 93.5–98.5 % of them, normal
    or exponential values alike (measured: 96.5, 96.1, 95.6 % normal; 97.3, 97.5, 97.0 % exponential); the
    percentile bootstrap of the same difference of means on the normal pairs (what the hop, upload and
    idle-keepalive comparisons used to give) in at most 90 % (measured: 81, 83, 87 %), since with so few values its
    resamples span little more than their range. With 2000 pairs the binomial error of a coverage is 0.5 %
    (√(0.95 × 0.05 / 2000)), so each bound is at least 3 errors from where it is measured; Welch's interval is a
    little wide at 3 a side, as its Satterthwaite degrees of freedom are cautious there."""
    rng = np.random.default_rng(29)
    trials, shift = 2000, 1.0
    for n in (3, 4, 5):
        assert method_for(n, n) == "t" and two_sample_difference(np.arange(n), np.arange(n) + 1.0).method == "Welch t"
        a, b = rng.normal(size=(trials, n)), rng.normal(size=(trials, n)) + shift
        _, low, high, *_ = welch_t(a, b)
        assert 0.935 <= np.mean((low <= shift) & (shift <= high)) <= 0.985, n
        bootstrap = [block_bootstrap_difference(x, y, np.mean, seed=i, n_resamples=400, time_ordered=False)
                     for i, (x, y) in enumerate(zip(a, b))]
        percentile = np.mean([d.low <= shift <= d.high for d in bootstrap])
        assert percentile <= 0.90, (n, percentile)
        skewed_a, skewed_b = rng.exponential(size=(trials, n)), rng.exponential(size=(trials, n)) + shift
        _, low, high, *_ = welch_t(skewed_a, skewed_b)
        assert 0.935 <= np.mean((low <= shift) & (shift <= high)) <= 0.985, n


def test_one_sample_of_three_the_t_interval_holds_the_mean_where_a_bootstrap_holds_the_median_three_times_in_four():
    """2000 seeded normal samples of 3 values (mean and median 0): the t interval of
    :func:`location_interval` covers 0 in about 95 % of them; a percentile bootstrap of their median in about
    1 − 2 × (1/2)³ = 75 %, the chance that 0 lies between the smallest and largest of three values (what the
    bootstrap's interval is with three). Binomial error 0.5 %, as above."""
    rng = np.random.default_rng(3)
    samples = rng.normal(size=(2000, 3))
    found = [location_interval(row) for row in samples]
    assert {(f.statistic, f.method) for f in found} == {("mean", "t")}
    assert 0.93 <= np.mean([f.low <= 0 <= f.high for f in found]) <= 0.97
    held = [np.quantile(block_draws(row, seed=i, n_resamples=400, time_ordered=False), 0.025) <= 0
            <= np.quantile(block_draws(row, seed=i, n_resamples=400, time_ordered=False), 0.975)
            for i, row in enumerate(samples)]
    assert 0.72 <= np.mean(held) <= 0.78
    # t's limit, stated with the rule: on skewed values (exponential, mean 1) three values cover their mean only
    # about 88 % of the time (measured 87.7 %), short of 95 % but still well above the bootstrap's 75 %.
    skewed = [location_interval(row) for row in rng.exponential(size=(2000, 3))]
    assert 0.85 <= np.mean([f.low <= 1 <= f.high for f in skewed]) <= 0.92


def test_the_rule_takes_t_below_ten_values_a_side_and_the_bootstrap_from_ten():
    assert [method_for(n) for n in (0, 1, 2, 9, 10)] == ["none", "none", "t", "t", "bootstrap"]
    assert method_for(50, 9) == "t" and method_for(10, 10) == "bootstrap" and method_for(1, 50) == "none"
    a, b = [1.0, 2.0, 4.0], [4.0, 5.0, 7.0, 9.0]
    found = two_sample_difference(a, b)
    # Welch's t as scipy gives it, for b − a.
    from scipy import stats

    direct = stats.ttest_ind(b, a, equal_var=False)
    interval = direct.confidence_interval()
    assert (found.difference, found.low, found.high, found.pvalue, found.df) == pytest.approx(
        (np.mean(b) - np.mean(a), interval.low, interval.high, direct.pvalue, direct.df))
    assert (found.n_a, found.n_b, found.statistic) == (3, 4, "mean")
    # From ten a side: the caller's statistic with a percentile bootstrap, value by value or in blocks.
    ten = two_sample_difference(np.arange(10.0), np.arange(10.0) + 5, np.median)
    assert (ten.method, ten.statistic, ten.difference, ten.df) == ("bootstrap", "median", 5.0, math.inf)
    noise = np.random.default_rng(1).normal(size=(2, 30))
    assert two_sample_difference(*noise, time_ordered=True).method == "block bootstrap"
    # Nothing to test: too few values, or none that vary on either side (one side constant is still testable).
    alone = two_sample_difference([1.0], [2.0, 3.0])
    assert math.isnan(alone.pvalue) and math.isnan(alone.low) and (alone.difference, alone.method) == (1.5, "none")
    flat = two_sample_difference([2.0, 2.0, 2.0], [3.0, 3.0, 3.0])
    assert flat.difference == 1.0 and math.isnan(flat.pvalue) and math.isnan(flat.low)
    assert np.isfinite(two_sample_difference([2.0, 2.0, 2.0], [3.0, 3.5, 4.0]).pvalue)
    assert math.isnan(two_sample_difference([5.0] * 12, [6.0] * 12).pvalue)  # the bootstrap's draws do not vary


def test_one_location_per_group_follows_the_rule():
    from labkit.analysis import summarize_with_location

    frame = pd.DataFrame({"cell": ["small"] * 3 + ["large"] * 12, "v": [1.0, 2.0, 6.0] + list(range(12)), "ok": True})
    table = summarize_with_location(frame, "v", by="cell")
    small, large = table.loc["small"], table.loc["large"]
    assert (small["count"], small["statistic"], small["value"], small["method"]) == (3, "mean", 3.0, "t")
    assert (small["lo"], small["hi"]) == pytest.approx(runs_t_interval([1.0, 2.0, 6.0])[1:])
    assert (large["statistic"], large["value"], large["method"], large["50%"]) == ("median", 5.5, "bootstrap", 5.5)
    # The table's sentence names both statistics, in the table's order, each once.
    assert statistics_named(table.sort_index(ascending=False)["statistic"]) == "mean or median"
    assert statistics_named(table.loc[["large"]]["statistic"]) == "median"
    # A lost sample (ok false) is counted as lost and left out of the location, as summarize leaves it out.
    lost = summarize_with_location(frame.assign(ok=[False] + [True] * 14), "v", by="cell").loc["small"]
    assert (lost["count"], lost["lost"], lost["value"]) == (2, 1, 4.0)


def test_the_minimum_detectable_effect_is_called_four_times_in_five():
    """The smallest difference a test calls with 80 % power: for a z-test (z₀.₀₂₅ + z₀.₂) standard errors; for a
    t-test on three values at a family's level (0.05 / 10), checked by 4000 seeded trials whose true mean is that
    difference: 80 % of them are called, within 2.5 % (4 binomial errors of √(0.8 × 0.2 / 4000))."""
    from scipy import stats

    assert minimum_detectable_effect(2.0) == pytest.approx(2.0 * (1.959964 + 0.841621), rel=1e-4)
    sigma, n, level = 1.0, 3, 0.005
    mde = minimum_detectable_effect(sigma / math.sqrt(n), n - 1, level)
    samples = np.random.default_rng(8).normal(mde, sigma, size=(4000, n))
    called = stats.ttest_1samp(samples, 0, axis=1).pvalue < level
    assert abs(called.mean() - 0.8) <= 0.025, called.mean()
    assert math.isnan(minimum_detectable_effect(0.0)) and math.isnan(minimum_detectable_effect(float("nan")))


def test_a_family_counts_what_it_could_not_test_and_says_what_it_could_have_called():
    """Two comparisons, one not testable: Holm divides by two. p = 0.02 is called (0.04), 0.03 is not (0.06), though
    alone it would be; the unclear one states its minimum detectable effect at α / (m − r) = 0.05 / 2."""
    calls = call_family([1.5, 0.0], [0.02, float("nan")], [0.5, 0.0], [math.inf, 4.0])
    assert list(calls.verdict) == ["higher", "not testable"] and (calls.size, calls.level) == (2, 0.05)
    calls = call_family([-1.5, 0.0], [0.03, float("nan")], [0.5, 0.0], [math.inf, 4.0])
    assert list(calls.verdict) == ["unclear", "not testable"] and calls.level == 0.025
    assert calls.mde[0] == pytest.approx(minimum_detectable_effect(0.5, math.inf, 0.025)) and math.isnan(calls.mde[1])
    assert calls.adjusted[0] == pytest.approx(0.06) and math.isnan(calls.adjusted[1])
    # Benjamini–Hochberg: the next comparison's level is α (r + 1) / m.
    bh = call_family([1.0, -1.0, 2.0], [0.001, 0.04, 0.5], [0.3, 0.5, 3.0], [math.inf] * 3, method="fdr_bh")
    assert list(bh.verdict) == ["higher", "unclear", "unclear"] and bh.level == pytest.approx(0.05 * 2 / 3)
    # From Difference records, as the notebooks' comparisons come.
    records = [two_sample_difference([1.0, 2.0, 3.0], [9.0, 10.0, 11.5]), one_sample_t([4.0, 4.0, 4.0])]
    assert list(call_differences(records).verdict) == ["higher", "not testable"]
    assert verdict_text("unclear", 177.4, "ms") == "unclear (MDE 177 ms)" and verdict_text("lower", 3.0) == "lower"
    # A table of those records gets the family's calls and the cell a person reads.
    table = call_table(pd.DataFrame({"pair": ["a", "b"]}), records, "ms")
    assert list(table["verdict"]) == ["higher", "not testable"] and table["p_holm"][0] == pytest.approx(2 * records[0].pvalue)
    assert table["cell"][0] == f"+8.2 [{records[0].low:+.1f}, {records[0].high:+.1f}] higher"
    assert table["cell"][1] == "+4.0 not testable"


def test_one_sample_t_is_the_runs_test_and_has_nothing_to_test_without_spread():
    from scipy import stats

    values = [-42.2, -35.6, -45.6]  # the tuning sample's pool effect at c=50, 128 KiB, in three runs (ms)
    found = one_sample_t(values)
    assert found.pvalue == pytest.approx(stats.ttest_1samp(values, 0).pvalue) and found.df == 2
    assert (found.difference, found.low, found.high) == pytest.approx(runs_t_interval(values))
    flat = one_sample_t([-23.3, -23.3, -23.3])
    assert math.isnan(flat.pvalue) and flat.difference == pytest.approx(-23.3)
    assert runs_t_interval([-23.3, -23.3, -23.3]) == pytest.approx((-23.3, -23.3, -23.3))


def _holm_by_hand(p: list[float]) -> list[float]:
    order = sorted(range(len(p)), key=lambda i: p[i])
    adjusted, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def _bh_by_hand(p: list[float]) -> list[float]:
    order = sorted(range(len(p)), key=lambda i: p[i], reverse=True)
    adjusted, running = [0.0] * len(p), 1.0
    for position, i in enumerate(order):
        rank = len(p) - position
        running = min(running, p[i] * len(p) / rank)
        adjusted[i] = running
    return adjusted


def test_corrections_match_holm_and_benjamini_hochberg_by_hand():
    p = [0.01, 0.04, 0.03, 0.005, 0.2, 0.049]
    rejected, adjusted = adjust(p, "holm")
    assert np.allclose(adjusted, _holm_by_hand(p)) and list(rejected) == [a <= 0.05 for a in _holm_by_hand(p)]
    rejected, adjusted = adjust(p, "fdr_bh")
    assert np.allclose(adjusted, _bh_by_hand(p)) and list(rejected) == [a <= 0.05 for a in _bh_by_hand(p)]
    # Six comparisons at 0.049 each: one would pass alone, none after Holm's correction.
    assert not adjust([0.049] * 6)[0].any()
    rejected, adjusted = adjust([0.001, float("nan")])
    assert list(rejected) == [True, False] and math.isnan(adjusted[1])
    # A comparison that could not be tested still counts in the family: 0.03 alone passes, one of two does not.
    assert adjust([0.03])[0].all() and not adjust([0.03, float("nan")])[0].any()
    assert adjust([0.03, float("nan")])[1][0] == pytest.approx(0.06)


def test_a_pvalue_is_the_normal_tail_beyond_the_observed_difference_in_draws_standard_errors():
    draws = np.random.default_rng(2).normal(0, 2.0, 20000)  # the spread of a difference: a standard error of 2
    assert normal_pvalue(2 * 1.959964, draws) == pytest.approx(0.05, abs=0.002)
    assert normal_pvalue(-2 * 1.959964, draws) == normal_pvalue(2 * 1.959964, draws)
    assert normal_pvalue(0.0, draws) == 1.0 and math.isnan(normal_pvalue(1.0, [3.0]))
    # Draws that do not vary leave nothing to test against: not testable, neither certain nor null.
    assert math.isnan(normal_pvalue(1.0, [2.0] * 100)) and math.isnan(normal_pvalue(0.0, [0.0] * 100))
    # Far below 1 / draws, which counting draws across 0 could never say.
    assert normal_pvalue(20.0, draws[:2000]) < 1e-10


@pytest.mark.parametrize("percent, fewest", [(50, 5), (90, 29), (99, 299), (1, 299), (99.9, 2995)])
def test_the_fewest_samples_for_a_percentile_are_those_whose_extreme_passes_it(percent, fewest):
    """With n samples, the largest exceeds the true p-th percentile with probability 1 − q^n (q = p / 100):
    the rule is the smallest n for which that reaches 95 %."""
    q = max(percent, 100 - percent) / 100
    assert min_samples_for_percentile(percent) == fewest
    assert 1 - q ** fewest >= 0.95 > 1 - q ** (fewest - 1)


def test_a_percentile_from_too_few_samples_is_not_given():
    assert percentile_if_enough(np.arange(298.0), 99) is None
    assert percentile_if_enough(np.arange(299.0), 99) == pytest.approx(np.percentile(np.arange(299.0), 99))
    assert percentile_if_enough([1.0, 2.0, 3.0, 4.0], 50) is None


def test_samples_for_a_proportion_is_the_textbook_count():
    assert samples_for_proportion(0.5, 0.05).need == 385  # z = 1.96: 1.96² × 0.25 / 0.05² = 384.2
    assert samples_for_proportion(0.1, 0.05, have=40).need == 139
    assert not samples_for_proportion(0.1, 0.05, have=40).enough


def test_samples_for_a_median_gives_an_interval_of_the_asked_width():
    """From a pilot of 200 iid samples, ask for half the pilot's half-width: about four times the samples; a fresh
    sample of that size then has an interval of about the asked width."""
    rng = np.random.default_rng(3)
    pilot = rng.normal(size=200)
    low, high = block_bootstrap(pilot)
    wanted = (high - low) / 4
    size = samples_for_median(pilot, wanted)
    assert not size.enough and 3 * 200 <= size.need <= 5 * 200
    low, high = block_bootstrap(rng.normal(size=size.need))
    assert 0.75 * wanted <= (high - low) / 2 <= 1.25 * wanted
    assert samples_for_median(pilot, 10.0).enough


def test_a_summary_names_the_statistics_that_rest_on_too_few_samples():
    lines = thin_statistics([3, 40, 4, 300], {"median": 50, "p95": 95}, "calls")
    assert lines == [
        "2 of 4 median values rest on fewer than 5 calls (fewest 3), too few for a median: read them as rough "
        "values, or measure more",
        "3 of 4 p95 values rest on fewer than 59 calls (fewest 3), too few for a p95: read them as rough values, "
        "or measure more",
    ]
    assert thin_statistics([59, 300], {"median": 50, "p95": 95}) == [] and thin_statistics([5], {"median": 50}) == []


def test_the_data_needs_table_counts_each_group_and_what_it_lacks():
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"probe": ["a"] * 400 + ["b"] * 20, "rtt_ms": np.r_[rng.normal(10, 1, 400), rng.normal(10, 1, 20)]})
    table = data_needs(frame, "rtt_ms", "probe", halfwidth=0.05)
    assert table.loc["a", "n"] == 400 and table.loc["b", "n"] == 20
    assert table.loc["a", "n for p99"] == 299 and table.loc["a", "p99 allowed"] and not table.loc["b", "p99 allowed"]
    # The narrower interval of the larger group, and each group's count for ±0.05 from its own spread.
    assert table.loc["a", "median ± now"] < table.loc["b", "median ± now"]
    assert table.loc["a", "n for ±0.05"] == samples_for_median(frame["rtt_ms"][:400], 0.05, n_resamples=500).need > 400


def test_a_data_needs_table_in_short():
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"probe": ["a"] * 400 + ["b"] * 20, "rtt_ms": np.r_[rng.normal(10, 1, 400), rng.normal(10, 1, 20)]})
    table = data_needs(frame, "rtt_ms", "probe", halfwidth=0.05)
    short = data_needs_in_short(table, halfwidth=0.05)
    assert short == {"groups": 2, "short": 2, "most_wanted": int(table["n for ±0.05"].max()), "percentile_allowed": 1}
    assert data_needs_in_short(data_needs(frame, "rtt_ms", "probe", halfwidth=10.0), halfwidth=10.0)["short"] == 0

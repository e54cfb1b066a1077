"""The series notebook's rules on the shipped series samples: probes, tally, and latency split into its parts."""

from pathlib import Path

import pandas as pd
import pytest

from labkit.analysis import compare_groups, probes, summarize_with_ci
from labkit.store import Run

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "samples"


@pytest.fixture(scope="module", params=["series-wan", "series-lan"])
def samples(request):
    return Run.open(SAMPLES / request.param).samples()


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


def test_the_split_is_differences_of_medians_in_round_trips(samples):
    present = probes.probes_of(samples)
    rtt, split = probes.split_latency(samples, present)
    assert list(split.index) == ["echo-cold − echo-warm", "echo-warm − tcp-echo", "tcp-echo − ping",
                                 "echo-warm − ping", "echo-cold − ping"]
    direct = compare_groups(samples, "rtt_ms", "probe", "echo-warm", "echo-cold")
    row = split.loc["echo-cold − echo-warm"]
    assert row["median_diff_ms"] == direct.median_diff and row["in_rtts"] == pytest.approx(direct.median_diff / rtt)
    # The parts add up: (cold − warm) + (warm − tcp) + (tcp − ping) = cold − ping, in medians.
    assert split.loc[["echo-cold − echo-warm", "echo-warm − tcp-echo", "tcp-echo − ping"], "median_diff_ms"].sum() == \
        pytest.approx(split.at["echo-cold − ping", "median_diff_ms"])
    # A cold call sets up a connection first: at least one round trip more than a warm one.
    assert row["in_rtts"] >= 0.9
    _, partial = probes.split_latency(samples, ["ping", "tcp-echo"])
    assert list(partial.index) == ["tcp-echo − ping"]


def test_headline_of_a_run_and_of_its_comparison(samples):
    present = probes.probes_of(samples)
    summary = summarize_with_ci(samples, by="probe").reindex(present)
    _, split = probes.split_latency(samples, present)
    headline = probes.series_headline(summary, split, present)
    assert headline["count.ping"] == int(summary.at["ping", "count"])
    assert headline["cold_minus_warm_rtts"] == round(float(split.at["echo-cold − echo-warm", "in_rtts"]), 3)
    compared = probes.series_headline(summary, split, present, prefix="compare.")
    assert "compare.median_ms.ping" in compared and "compare.cold_minus_warm_ms" in compared
    assert not any(key.startswith(("count.", "compare.count")) or key.endswith("_rtts") for key in compared)

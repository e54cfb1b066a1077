"""The 2016 re-reading on the shipped orca-2016 logs: the strict patterns, what they lost, per-pass cut-offs."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from labkit.analysis import ping_vs_echo, zscore_trim
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

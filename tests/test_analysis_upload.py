"""The upload notebook's rules on the shipped upload sample: conditions, CPU per MB, spread, the pairs compared."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from labkit.analysis import upload, upload_report
from labkit.store import Run

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "samples"


@pytest.fixture(scope="module")
def uploads():
    samples, conditions = upload.label_uploads(Run.open(SAMPLES / "upload-small").samples())
    return upload.with_cpu_costs(samples[samples["ok"]], int(samples["file_bytes"].iloc[0])), conditions


def test_conditions_are_transport_and_tls_in_reading_order(uploads):
    frame, conditions = uploads
    assert conditions == ["grpc", "grpc+TLS", "http2", "http2+TLS"]
    assert set(frame.loc[frame["tls"] & (frame["transport"] == "http2"), "condition"]) == {"http2+TLS"}
    made = pd.DataFrame({"transport": ["http2", "grpc"], "tls": [False, False]})
    assert upload.label_uploads(made)[1] == ["grpc", "http2"]


def test_cpu_per_mb_and_utilisation():
    made = pd.DataFrame({"client_cpu_s": [0.5], "server_cpu_s": [0.25], "seconds": [2.0]})
    costs = upload.with_cpu_costs(made, 2_000_000)
    assert (costs["client_cpu_s_per_mb"].iat[0], costs["server_cpu_s_per_mb"].iat[0]) == (0.25, 0.125)
    assert (costs["client_cpu_util"].iat[0], costs["server_cpu_util"].iat[0]) == (0.25, 0.125)


def test_cell_summary_has_one_row_per_condition_and_chunk_with_an_interval(uploads):
    """Five uploads a cell: the small-sample rule's location, their mean with Student's t interval (issue 29: a
    percentile bootstrap of their median is about their range), beside the cell's median."""
    from labkit.analysis import runs_t_interval

    frame, conditions = uploads
    table = upload.cell_summary(frame, "mb_per_s")
    assert len(table) == frame.groupby(["condition", "chunk_bytes"]).ngroups == 20
    assert set(table["statistic"]) == {"mean"} and set(table["method"]) == {"t"}
    assert (table["lo"] <= table["value"]).all() and (table["value"] <= table["hi"]).all()
    one = table[(table["condition"] == "grpc") & (table["chunk_bytes"] == 1024)].iloc[0]
    values = frame[(frame["condition"] == "grpc") & (frame["chunk_bytes"] == 1024)]["mb_per_s"]
    assert one["50%"] == pytest.approx(values.median())
    assert (one["value"], one["lo"], one["hi"]) == pytest.approx(runs_t_interval(values))


def test_spread_and_first_against_later(uploads):
    frame, _ = uploads
    table = upload.spread(frame)
    row = table.loc[("http2", 64)]
    values = frame[(frame["condition"] == "http2") & (frame["chunk_bytes"] == 64)]["mb_per_s"]
    assert row["cv"] == pytest.approx(values.std() / values.mean())
    assert row["fastest / slowest"] == pytest.approx(values.max() / values.min())
    first = upload.first_vs_later(frame)
    assert list(first.columns) == ["first", "later", "later / first", "n first", "n later"]
    at_64 = frame[frame["chunk_bytes"] == 64]
    assert first.loc[64, "n first"] == (at_64["seq"] == 0).sum() and first.loc[64, "n later"] == (at_64["seq"] != 0).sum()
    assert first.loc[64, "first"] == pytest.approx(frame[(frame["chunk_bytes"] == 64) & (frame["seq"] == 0)]["mb_per_s"].median())


def test_pairs_compare_tls_and_transport_chunk_by_chunk(uploads):
    frame, conditions = uploads
    tls, transport = upload.condition_pairs(conditions)
    assert tls == {"TLS on − off, grpc": ("grpc", "grpc+TLS"), "TLS on − off, http2": ("http2", "http2+TLS")}
    assert transport == {"http2 − grpc": ("grpc", "http2"), "http2 − grpc+TLS": ("grpc+TLS", "http2+TLS")}
    assert upload.condition_pairs(["grpc", "http2+TLS"]) == ({}, {})
    table = upload.compare_pairs(frame, transport)
    assert sorted(set(table["chunk_bytes"])) == sorted(frame["chunk_bytes"].unique())
    row = table[(table["comparison"] == "http2 − grpc") & (table["chunk_bytes"] == 1024)].iloc[0]
    at = frame[frame["chunk_bytes"] == 1024]
    http2, grpc = (at[at["condition"] == c]["mb_per_s"] for c in ("http2", "grpc"))
    # Five uploads a side: the difference of the means, Welch's t.
    assert (row["statistic"], row["method"], row["n"]) == ("mean", "Welch t", "5/5")
    assert row["B / A"] == pytest.approx(http2.mean() / grpc.mean())
    assert row["difference"] == pytest.approx(http2.mean() - grpc.mean())
    assert set(table["comparison"]) == set(transport)


def test_headline_names_each_condition_at_both_ends(uploads):
    frame, conditions = uploads
    cpu = {side: upload.cell_summary(frame, f"{side}_cpu_s_per_mb") for side in ("client", "server")}
    utilisation = frame.groupby(["condition", "chunk_bytes"])[["client_cpu_util"]].median()
    headline = upload.upload_headline(conditions, upload.cell_summary(frame, "mb_per_s"), cpu, utilisation, (64, 1048576))
    assert {f"mb_per_s.{c}.{s}{x}" for c in conditions for s in (64, 1048576) for x in ("", "_lo", "_hi")} <= set(headline)
    assert headline["client_cpu_util.grpc.64"] == round(float(utilisation.loc[("grpc", 64), "client_cpu_util"]), 3)


def test_pairs_headline_at_both_ends(uploads):
    frame, conditions = uploads
    tls_pairs, transport_pairs = upload.condition_pairs(conditions)
    pairs = {**tls_pairs, **transport_pairs}
    compared = upload.compare_pairs(frame, pairs).set_index(["comparison", "chunk_bytes"])
    headline = upload.pairs_headline(compared.reset_index(), pairs, (64, 1048576))
    assert headline["tls_effect.grpc.64"] == round(compared.loc[("TLS on − off, grpc", 64), "difference"], 3)
    assert headline["http2_vs_grpc.plain.1048576"] == round(compared.loc[("http2 − grpc", 1048576), "B / A"], 3)
    assert headline["http2_vs_grpc.plain.64.verdict"] == "higher" and headline["tls_effect.http2.1048576.verdict"] == "unclear"
    assert (headline["comparisons"], headline["comparisons.called"], headline["comparisons.not_testable"]) == (20, 4, 0)
    assert "http2_vs_grpc.tls.64" in headline and not any(".1024" in key for key in headline)


def test_several_stacks_are_conditions_of_their_own():
    samples = Run.open(SAMPLES / "upload-small").samples()
    both = pd.concat([samples, samples.assign(client_impl="go", server_impl="go")], ignore_index=True)
    labelled, conditions = upload.label_uploads(both)
    assert conditions[:2] == ["grpc python→python", "grpc+TLS python→python"] and conditions[4] == "grpc go→go"
    assert len(conditions) == 8 and labelled.groupby("condition").size().nunique() == 1


# --- what the notebook reports (labkit.analysis.upload_report) ------------------------------------

def test_location_grid_reads_location_and_interval_in_condition_order():
    summary = pd.DataFrame({"condition": ["http2", "grpc", "grpc"], "chunk_bytes": [64, 64, 1024],
                            "value": [2.0, 1.04, 3.0], "lo": [1.5, 0.5, 2.94], "hi": [2.5, 1.5, 3.06]})
    grid = upload_report.location_grid(summary, ["grpc", "http2"])
    assert list(grid.index) == ["grpc", "http2"] and list(grid.columns) == [64, 1024]
    assert (grid.at["grpc", 64], grid.at["grpc", 1024]) == ("1.0 [0.5, 1.5]", "3.0 [2.9, 3.1]")
    assert pd.isna(grid.at["http2", 1024])  # a cell the run does not have stays empty


def test_cpu_table_in_milliseconds_and_microseconds(uploads):
    frame, conditions = uploads
    cpu = {side: upload.cell_summary(frame, f"{side}_cpu_s_per_mb") for side in ("client", "server")}
    utilisation = frame.groupby(["condition", "chunk_bytes"])[["client_cpu_util", "server_cpu_util"]].median()
    table = upload_report.cpu_table(frame, cpu, utilisation, conditions)
    assert list(table.index.unique("condition")) == conditions and len(table) == 20
    cell = frame[(frame["condition"] == "grpc+TLS") & (frame["chunk_bytes"] == 64)]
    row = table.loc[("grpc+TLS", 64)]
    assert row["client ms CPU / MB"] == pytest.approx(cell["client_cpu_s_per_mb"].median() * 1e3)
    assert row["client µs CPU / chunk"] == pytest.approx((cell["client_cpu_s"] / cell["chunks"]).median() * 1e6)
    assert row["server util"] == pytest.approx(cell["server_cpu_util"].median())


def test_rtt_share_is_one_ping_over_the_median_upload_time():
    made = pd.DataFrame({"condition": ["grpc"] * 3 + ["http2"], "chunk_bytes": [64, 64, 64, 64], "seconds": [1.0, 3.0, 2.0, 0.5]})
    share = upload_report.rtt_share(made, 10.0, ["http2", "grpc"])
    assert list(share.index) == ["http2", "grpc"]
    assert share.at["grpc", 64] == pytest.approx(0.005) and share.at["http2", 64] == pytest.approx(0.02)


def test_cell_details_one_record_per_cell(uploads):
    frame, conditions = uploads
    throughput = upload.cell_summary(frame, "mb_per_s")
    cpu = {side: upload.cell_summary(frame, f"{side}_cpu_s_per_mb") for side in ("client", "server")}
    utilisation = frame.groupby(["condition", "chunk_bytes"])[["client_cpu_util", "server_cpu_util"]].median()
    shares = upload_report.rtt_share(frame, 10.0, conditions)
    records = upload_report.cell_details(throughput, cpu, utilisation, upload.spread(frame), shares, conditions)
    assert len(records) == 20 and [r["condition"] for r in records[::5]] == conditions
    assert [r["chunk_bytes"] for r in records[:5]] == sorted(frame["chunk_bytes"].unique())
    first = records[0]
    cell = frame[(frame["condition"] == "grpc") & (frame["chunk_bytes"] == 64)]
    assert first["uploads"] == len(cell) and first["mb_per_s"]["50%"] == pytest.approx(cell["mb_per_s"].median())
    assert first["cv"] == pytest.approx(cell["mb_per_s"].std() / cell["mb_per_s"].mean())
    assert first["rtt_share_of_upload"] == pytest.approx(0.01 / cell["seconds"].median())


def test_the_interval_over_runs_goes_into_the_headline_at_the_smallest_and_largest_chunk():
    from labkit import notebooks
    from labkit.analysis import between_runs

    replicates, recorded = notebooks.replicate_samples(Run.open(SAMPLES / "upload-small"))
    every_run, _ = upload.label_uploads(recorded)
    table = between_runs(every_run[every_run["ok"]], "mb_per_s", ["condition", "chunk_bytes"])
    headline = upload.runs_headline(table, (64, 1048576))
    assert len(replicates) == 3 and set(table["runs"]) == {3}
    assert len(headline) == 2 * 4 * 2  # lo and hi, four conditions, two chunk sizes
    row = table.loc[("grpc", 64)]
    assert headline["mb_per_s.grpc.64.runs_lo"] == round(row["lo"], 3) <= round(row["pooled"], 3) <= headline["mb_per_s.grpc.64.runs_hi"]
    assert not any(".1024." in key for key in headline)


def test_the_uploads_kept_are_the_acknowledged_ones_and_without_the_first_only_when_asked(uploads):
    samples, _ = uploads
    broken = samples.assign(ok=samples["seq"] != 2)  # one upload per cell failed
    kept, later = upload.kept_uploads(broken), upload.kept_uploads(broken, drop_first_upload=True)
    assert len(kept) == (broken["seq"] != 2).sum() and set(kept["seq"]) == {0, 1, 3, 4}
    assert set(later["seq"]) == {1, 3, 4} and len(later) == len(kept) - samples["cell_id"].nunique()


# --- what the notebook says of a run: each of the original's findings a predicate on its numbers ----------------------

@pytest.fixture(scope="module")
def every_run():
    from labkit import notebooks

    recorded = notebooks.replicate_samples(Run.open(SAMPLES / "upload-small"))[1]
    labelled = upload.label_uploads(recorded)[0]
    return labelled[labelled["ok"]]


def test_the_twenty_comparisons_are_one_family_and_four_survive_it(uploads):
    """The 20 comparisons (TLS on − off per transport, HTTP/2 − gRPC with TLS and without, at 5 chunk sizes) are one
    family: with 5 uploads a side no Mann–Whitney test could survive Holm's (its least p is 2/252 × 20 = 0.16).
    Welch's t, one family of 20, every upload of the first run: HTTP/2 is called faster than gRPC at 64 B and 1 KiB,
    with TLS and without, and nothing else; every other comparison states its MDE."""
    from scipy.stats import mannwhitneyu

    frame, conditions = uploads
    tls_pairs, transport_pairs = upload.condition_pairs(conditions)
    compared = upload.compare_pairs(frame, {**tls_pairs, **transport_pairs})
    assert len(compared) == 20 and compared["p_holm"].to_numpy() == pytest.approx(
        np.minimum(1, np.maximum.accumulate(np.sort(compared["p"].to_numpy()) * np.arange(20, 0, -1)))[
            np.argsort(np.argsort(compared["p"].to_numpy()))])
    called = compared[compared["verdict"] != "unclear"]
    assert set(called["verdict"]) == {"higher"} and not called["comparison"].str.startswith("TLS").any()
    assert sorted(zip(called["comparison"], called["chunk_bytes"])) == [
        ("http2 − grpc", 64), ("http2 − grpc", 1024), ("http2 − grpc+TLS", 64), ("http2 − grpc+TLS", 1024)]
    unclear = compared[compared["verdict"] == "unclear"]
    assert (unclear["mde"] > unclear["difference"].abs()).all()
    least_mw = min(mannwhitneyu(a, b).pvalue for a, b in (
        (frame[(frame["condition"] == x) & (frame["chunk_bytes"] == s)]["mb_per_s"],
         frame[(frame["condition"] == y) & (frame["chunk_bytes"] == s)]["mb_per_s"])
        for x, y in {**tls_pairs, **transport_pairs}.values() for s in frame["chunk_bytes"].unique()))
    assert least_mw * 20 > 0.05


def test_from_16_kib_the_first_upload_of_a_cell_is_its_slowest_whatever_the_condition(every_run):
    """From 16 KiB, in every run and cell, the first upload is slower than every later one, and the first uploads of
    all conditions and chunk sizes lie within a factor of 1.5 of each other: what the sign test of
    :func:`labkit.analysis.upload_report.beyond_the_original` calls there."""
    large = every_run[every_run["chunk_bytes"] >= 16384]
    for _, cell in large.groupby(["replicate", "cell_id"]):
        assert cell.loc[cell["seq"] == 0, "mb_per_s"].max() < cell.loc[cell["seq"] > 0, "mb_per_s"].min()
    first = large.loc[large["seq"] == 0, "mb_per_s"]
    assert first.max() / first.min() < 1.5 and first.max() < large.loc[large["seq"] > 0, "mb_per_s"].min()
    table = upload.first_against_later(every_run)
    assert table.loc[table.index.get_level_values("chunk_bytes") >= 16384, "slower"].all()
    said = upload_report.beyond_the_original(upload.run_cells(every_run), upload.compare_by_run(every_run, {}),
                                             table, 1, 10.0)
    assert ("over the 3 runs × 4 conditions (two-sided sign test at each chunk size, Holm's correction over the 5 "
            "chunk sizes): called slower at 16 KiB–1 MiB (slower in 12 of 12 cells); not called at the other 2 sizes "
            "(64 B–1 KiB)") in said[0]


@pytest.fixture(scope="module")
def grpcio(every_run):
    """The notebook's tables for upload-small as its notebook test reads it: every upload kept."""
    conditions = upload.label_uploads(Run.open(SAMPLES / "upload-small").samples())[1]
    tls, transport = upload.condition_pairs(conditions)
    pairs = {**tls, **transport}
    return (upload.run_cells(every_run), upload.compare_by_run(every_run, pairs),
            upload.pairs_over_runs(every_run, pairs), pairs)


def test_claims_on_the_grpcio_runs_are_the_predicates_on_their_numbers(every_run, grpcio):
    cells, compared, _, _ = grpcio
    held = upload_report.claims(cells, compared)
    utilisation = every_run.assign(util=every_run["client_cpu_s"] / every_run["seconds"])
    at_64 = utilisation[utilisation["chunk_bytes"] == 64].groupby(["replicate", "condition"])["util"].median()
    assert at_64.max() < 0.9 and held["cpu_bound"] == {1: False, 2: False, 3: False}
    called = compared[compared["verdict"].isin(("higher", "lower"))]
    assert not called["comparison"].str.startswith("TLS").any() and held["tls_variance_only"] == {1: True, 2: True, 3: True}
    assert set(called["verdict"]) == {"higher"} and held["http2_beats_grpc"] == {1: True, 2: True, 3: True}
    assert held["decent_at_1kib"] == {1: False, 2: False, 3: False}
    assert "variance_at_32kib" not in held  # no 32 KiB chunks in this design


def test_the_sentences_say_where_each_finding_holds_with_this_runs_numbers(grpcio):
    """Run 1 with its warm-up kept: HTTP/2 called faster at 64 B and 1 KiB only; TLS called nowhere, which does not
    show it costs nothing (the MDEs are said); 32 KiB not in the design."""
    cells, compared, over_runs, _ = grpcio
    said = upload_report.findings(cells, compared, over_runs, 1)
    run_1 = compared[compared["replicate"] == 1]
    transport = [s for s in said if s.startswith("**Raw HTTP/2 beat gRPC**")][0]
    ratio = run_1[(run_1["comparison"] == "http2 − grpc") & run_1["chunk_bytes"].isin([64, 1024])]["B / A"]
    assert (f"holds in this run: HTTP/2 was called without TLS faster at 64 B–1 KiB (HTTP/2 ÷ gRPC "
            f"{ratio.min():.2f}–{ratio.max():.2f}×)") in transport
    assert ("the difference of the means with Welch's 95 % interval and t-test, 5 uploads a side; Holm's correction "
            "over the 20 comparisons of this run") in transport
    tls = [s for s in said if s.startswith("**TLS shifted the variance only**")][0]
    mde = run_1.loc[run_1["comparison"].str.startswith("TLS"), "mde"]
    assert tls.startswith("**TLS shifted the variance only** (the original) is not contradicted in this run: TLS on "
                          "against off was called at none of the 5 chunk sizes over grpc")
    assert f"its MDEs, {upload_report.number(mde.min())}–{upload_report.number(mde.max())} MB/s" in tls
    assert "**32 KiB had a large variance** (the original): not tested, this run has no 32 KiB chunks." in said
    # Run 2 called HTTP/2 faster at 64 B only without TLS: its sentence says so, not run 1's.
    second = [s for s in upload_report.findings(cells, compared, over_runs, 2) if s.startswith("**Raw HTTP/2")][0]
    assert "without TLS faster at 64 B (" in second and second != transport


def test_a_run_made_cpu_bound_and_slowed_by_tls_is_said_to_be_so(every_run, grpcio):
    """The same uploads with the client's CPU raised to a whole core at 64 B and TLS's MB/s halved: the sentences turn
    with the predicates."""
    _, _, _, pairs = grpcio
    one = every_run[every_run["replicate"] == 1]
    busy = one["chunk_bytes"] == 64
    tls = one["tls"].to_numpy()
    made = one.assign(client_cpu_s=np.where(busy, one["seconds"], one["client_cpu_s"]),
                      mb_per_s=np.where(tls, one["mb_per_s"] / 2, one["mb_per_s"]))
    cells, compared = upload.run_cells(made), upload.compare_by_run(made, pairs)
    held = upload_report.claims(cells, compared)
    assert held["cpu_bound"] == {1: True} and held["tls_variance_only"] == {1: False}
    said = upload_report.findings(cells, compared, None, 1)
    cpu = [s for s in said if s.startswith("**Tiny chunks are CPU-bound**")][0]
    assert "holds in this run: at 64 B the client or the server kept at least 0.9 of a core busy in every condition" in cpu
    assert "grpc 1.00 and " in cpu and "no process used more than 1.00 of a core, short of the original's 200 %" in cpu
    tls_said = [s for s in said if s.startswith("**TLS shifted the variance only**")][0]
    lower = compared[compared["comparison"].str.startswith("TLS") & (compared["verdict"] == "lower")]
    assert len(lower) and "does not hold in this run: TLS on against off was called slower" in tls_said
    # A run made alone says nothing of other runs.
    assert not any(s.startswith(("Over the", "Each of the")) for s in said)


def test_sizes_are_written_as_ranges_of_the_runs_consecutive_sizes():
    sizes = [2**n for n in range(4, 22)]
    assert upload_report.sizes_text([16, 32, 64, 8192, 16384, 1048576], sizes) == "16 B–64 B, 8 KiB–16 KiB, 1 MiB"
    assert upload_report.sizes_text([1024, 1048576], [64, 1024, 16384, 1048576]) == "1 KiB, 1 MiB"
    assert upload_report.size_text(2048) == "2 KiB" and upload_report.size_text(1000) == "1000 B"
    assert upload_report.percent(0.4567) == "46 %" and upload_report.percent(0.000021) == "0.0021 %"

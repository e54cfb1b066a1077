"""The upload notebook's rules on the shipped upload sample: conditions, CPU per MB, spread, the pairs compared."""

from pathlib import Path

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
    frame, conditions = uploads
    table = upload.cell_summary(frame, "mb_per_s")
    assert len(table) == frame.groupby(["condition", "chunk_bytes"]).ngroups == 20
    assert (table["50%_lo"] <= table["50%"]).all() and (table["50%"] <= table["50%_hi"]).all()
    one = table[(table["condition"] == "grpc") & (table["chunk_bytes"] == 1024)].iloc[0]
    assert one["50%"] == pytest.approx(frame[(frame["condition"] == "grpc") & (frame["chunk_bytes"] == 1024)]["mb_per_s"].median())


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
    table, results = upload.compare_pairs(frame, transport)
    assert sorted({size for _, size in results}) == sorted(frame["chunk_bytes"].unique())
    result = results[("http2 − grpc", 1024)]
    at = frame[frame["chunk_bytes"] == 1024]
    assert result.median_b / result.median_a == pytest.approx(
        at[at["condition"] == "http2"]["mb_per_s"].median() / at[at["condition"] == "grpc"]["mb_per_s"].median())
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
    _, tls = upload.compare_pairs(frame, tls_pairs)
    _, transport = upload.compare_pairs(frame, transport_pairs)
    headline = upload.pairs_headline(tls, transport, {**tls_pairs, **transport_pairs}, (64, 1048576))
    assert headline["tls_effect.grpc.64"] == round(tls[("TLS on − off, grpc", 64)].median_diff, 3)
    plain = transport[("http2 − grpc", 1048576)]
    assert headline["http2_vs_grpc.plain.1048576"] == round(plain.median_b / plain.median_a, 3)
    assert "http2_vs_grpc.tls.64" in headline and not any(".1024" in key for key in headline)


def test_several_stacks_are_conditions_of_their_own():
    samples = Run.open(SAMPLES / "upload-small").samples()
    both = pd.concat([samples, samples.assign(client_impl="go", server_impl="go")], ignore_index=True)
    labelled, conditions = upload.label_uploads(both)
    assert conditions[:2] == ["grpc python→python", "grpc+TLS python→python"] and conditions[4] == "grpc go→go"
    assert len(conditions) == 8 and labelled.groupby("condition").size().nunique() == 1


# --- what the notebook reports (labkit.analysis.upload_report) ------------------------------------

def test_median_ci_grid_reads_median_and_interval_in_condition_order():
    summary = pd.DataFrame({"condition": ["http2", "grpc", "grpc"], "chunk_bytes": [64, 64, 1024],
                            "50%": [2.0, 1.04, 3.0], "50%_lo": [1.5, 0.5, 2.94], "50%_hi": [2.5, 1.5, 3.06]})
    grid = upload_report.median_ci_grid(summary, ["grpc", "http2"])
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


def test_summary_lines_name_each_condition_and_the_comparisons_at_both_ends(uploads):
    frame, conditions = uploads
    tls_pairs, transport_pairs = upload.condition_pairs(conditions)
    comparisons = {**upload.compare_pairs(frame, tls_pairs)[1], **upload.compare_pairs(frame, transport_pairs)[1]}
    lines = upload_report.summary_lines(frame, conditions, comparisons)
    # One line per condition, then the 4 pairs at 64 B and at 1 MiB (not at the sizes in between).
    assert len(lines) == len(conditions) + 4 * 2
    grpc_64 = frame[(frame["condition"] == "grpc") & (frame["chunk_bytes"] == 64)]["mb_per_s"].median()
    assert lines[0].startswith(f"- **grpc**: {grpc_64:.1f} MB/s at 64B, ") and " at 1KiB, " in lines[0] and "at 1MiB;" in lines[0]
    assert not any(" at 1KiB: " in line for line in lines[len(conditions):])
    plain = comparisons[("http2 − grpc", 64)]
    assert any(line.startswith(f"- http2 − grpc at 64B: {plain.median_diff:+.1f} MB/s") for line in lines)


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

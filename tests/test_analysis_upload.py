"""The upload notebook's rules on the shipped upload sample: conditions, CPU per MB, spread, the pairs compared."""

from pathlib import Path

import pandas as pd
import pytest

from labkit.analysis import upload
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
    assert list(first.columns) == ["first", "later", "later / first"]
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

"""The tuning notebook's *Every message timed* on its shipped samples (``labkit load --grpc-tool labkit-go``).

Each qualitative sentence the notebook prints or its remarks make about these samples is a predicate here, so a
sentence that stops being true fails a test instead of shipping (issue 29, items 3 and 5).
"""

from pathlib import Path

import numpy as np
import pytest

from labkit.analysis import message_load
from labkit.analysis.load import cell_messages, per_request_file
from labkit.notebooks import FAIR_RUNS, replicate_samples
from labkit.store import Run

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "samples"


def group(sample: str):
    run = Run.open(SAMPLES / sample)
    replicates, every = replicate_samples(run)
    return run, replicates, message_load.message_cells(every)


@pytest.fixture(scope="module")
def tables():
    found = {}
    for name, (sample, kind, _) in FAIR_RUNS.items():
        run, replicates, cells = group(sample)
        found[name] = (run, replicates, cells, message_load.over_runs(cells, message_load.KINDS[kind][0](cells)))
    return found


def rows(table, comparison: str, metric: str, where: str | None = None):
    picked = table[(table["comparison"] == comparison) & (table["metric"] == metric)]
    return picked if where is None else picked[picked["where"] == where]


def test_every_shipped_group_is_labkit_gos_load_over_its_runs(tables):
    for name, (run, replicates, cells, table) in tables.items():
        assert run.manifest["config"]["grpc_tool"] == "labkit-go" and len(replicates) >= 3, name
        assert set(cells["replicate"]) == set(range(1, len(replicates) + 1)), name
        assert cells["error"].isna().all() and (cells["errors"] == 0).all(), name
        # Every request of every call in a window was timed (one per unary call, its messages per stream call).
        assert (cells["messages"] == cells["requests"] * cells["messages_per_call"]).all(), name
        # Every sentence names where it was measured and its n, from the run's own record.
        assert message_load.measured_on(run.manifest, len(replicates)).endswith(f", {len(replicates)} runs"), name
        # Every comparison has each run, but where a side lacked the 299 messages of a p99 (then not testable).
        full = table["runs"] == len(replicates)
        assert (full | ((table["metric"] == "message_p99_ms") & (table["verdict"] == "not testable"))).all(), name


def test_the_first_runs_raw_messages_are_the_rows_numbers(tables):
    for name, (run, _, cells, _) in tables.items():
        for _, row in cells[cells["replicate"] == 1].iterrows():
            messages = cell_messages(run.raw_text(per_request_file(row["raw_files"], "labkit-go")), row["warmup_s"],
                                     row["duration_s"])
            assert len(messages) == row["messages"] and int(messages["ok"].sum()) == row["messages_ok"], name
            assert messages["latency_ms"].median() == pytest.approx(row["message_p50_ms"], abs=0.5), name


def test_a_p99_needs_299_messages_and_what_cannot_be_tested_is_listed(tables):
    _, _, cells, table = tables["compression_100m"]
    few = cells[cells["messages_ok"] < 299]
    assert len(few) and few["message_p99_ms"].isna().all()
    untestable = table[table["verdict"] == "not testable"]
    assert len(untestable) and set(untestable["metric"]) <= {"message_p99_ms", "messages_per_s"}
    assert (untestable["cell"] == "not testable").any()  # a side without its 299 messages: no number, no verdict


def test_streams_and_unary_at_the_same_messages_in_flight_are_the_same_load(tables):
    table = tables["streams"][3]
    same = rows(table, "stream vs unary, same messages in flight", "message_p50_ms")
    assert len(same) == 2 and (same["A in flight"] == same["B in flight"]).all()
    assert not same["verdict"].isin(["higher", "lower"]).any() and same["difference"].abs().max() < 1.0
    rate = rows(table, "stream vs unary, same messages in flight", "messages_per_s")
    assert not rate["verdict"].isin(["higher", "lower"]).any() and rate["B / A"].between(0.95, 1.05).all()
    line = message_load.stream_lines(table, "25 ms")[0]
    assert "(unclear in 2 of 2)" in line and "called" not in line


def test_at_the_same_calls_a_stream_carries_its_extra_messages_and_overfilled_waits(tables):
    table = tables["streams"][3]
    rate = rows(table, "stream vs unary, same calls in flight", "messages_per_s")
    assert (rate["B in flight"] == 10 * rate["A in flight"]).all()
    assert rate["B / A"].max() == pytest.approx(10, rel=0.02) and rate["B / A"].min() > 2
    p50 = rows(table, "stream vs unary, same calls in flight", "message_p50_ms")
    # Only 16 KiB at 1000 messages in flight (16 MB outstanding) makes a message inside the stream wait longer.
    assert list(p50.loc[p50["verdict"] == "higher", "where"]) == ["16 KiB, stream c=100"]
    assert p50.loc[p50["verdict"] == "higher", "B mean"].iloc[0] > 2 * p50.loc[p50["verdict"] == "higher", "A mean"].iloc[0]
    assert "a message waited" in message_load.stream_lines(table, "25 ms")[1]


def test_gzip_only_costs_without_a_rate_limit_and_saves_text_on_100_mbit(tables):
    free = tables["compression"][3]
    assert not (rows(free, "gzip vs none", "message_p50_ms")["difference"] < 0).any()
    assert not (rows(free, "gzip vs none", "message_p50_ms")["verdict"] == "lower").any()
    limited = tables["compression_100m"][3]
    text = rows(limited, "gzip vs none", "message_p50_ms", "text 128 KiB, c=10").iloc[0]
    noise = rows(limited, "gzip vs none", "message_p50_ms", "random 128 KiB, c=10").iloc[0]
    assert text["verdict"] == "lower" and text["B mean"] < 0.6 * text["A mean"]
    assert noise["verdict"] == "unclear"
    lines = message_load.compression_lines(limited, "100 Mbit/s")
    assert any(line.startswith("- **gzip on text payloads") and "(lower)" in line for line in lines)


def test_on_the_25_ms_link_only_streaming_moves_the_ladder(tables):
    run, replicates, _, table = tables["ladder"]
    assert message_load.measured_on(run.manifest, len(replicates)) == "25 ms one way, no rate limit, 3 runs"
    steps = table[table["comparison"].str.startswith("ladder +")]
    moved = steps[steps["verdict"].isin(["higher", "lower"])]
    assert list(moved[["comparison", "metric"]].itertuples(index=False, name=None)) == [("ladder +rpc=stream",
                                                                                        "messages_per_s")]
    whole = rows(table, "ladder: all steps vs default", "message_p50_ms").iloc[0]
    assert whole["verdict"] == "unclear" and abs(whole["difference"]) < 1.0
    assert rows(table, "ladder: all steps vs default", "messages_per_s").iloc[0]["B / A"] == pytest.approx(10, rel=0.03)


def test_headline_fields_are_the_tables_numbers(tables):
    fields = message_load.headline({name: found[3] for name, found in tables.items()})
    for name, (_, _, _, table) in tables.items():
        assert fields[f"fair.{name}.rows"] == len(table)
        assert fields[f"fair.{name}.called"] == int(table["verdict"].isin(["higher", "lower"]).sum())
    key = "fair.ladder.ladder_all_steps_vs_default.1_KiB_c=50.messages_per_s"
    assert fields[key] == pytest.approx(float(rows(tables["ladder"][3], "ladder: all steps vs default",
                                                   "messages_per_s")["difference"].iloc[0]), abs=1e-3)
    assert all(" " not in key for key in fields)


def test_pairs_compare_cells_of_the_same_run():
    _, _, cells = group("tuning-messages")
    pairs = message_load.stream_pairs(cells)
    table = message_load.over_runs(cells, pairs)
    first = rows(table, "stream vs unary, same messages in flight", "message_p50_ms").iloc[0]
    per_run = [first[f"run {r}"] for r in (1, 2, 3)]
    a = cells[(cells["rpc"] == "unary") & (cells["concurrency"] == 100) & (cells["payload_bytes"] == 64)]
    b = cells[(cells["rpc"] == "stream") & (cells["concurrency"] == 10) & (cells["payload_bytes"] == 64)]
    expected = b.set_index("replicate")["message_p50_ms"] - a.set_index("replicate")["message_p50_ms"]
    assert np.allclose(per_run, expected.sort_index().to_numpy())


def test_where_the_cores_are_the_bottleneck_the_ladder_goes_the_other_way(tables):
    table = tables["ladder_lan"][3]
    assert tables["ladder_lan"][3]["runs"].min() == 10
    pool = {metric: rows(table, "ladder +connections=4", metric).iloc[0] for metric in message_load.METRICS}
    assert pool["messages_per_s"]["verdict"] == "lower" and pool["message_p50_ms"]["verdict"] == "higher"
    vtproto = rows(table, "ladder +codec=vtproto", "message_p50_ms").iloc[0], rows(
        table, "ladder +codec=vtproto", "messages_per_s").iloc[0]
    assert all(row["verdict"] == "unclear" for row in vtproto)
    whole = {metric: rows(table, "ladder: all steps vs default", metric).iloc[0] for metric in message_load.METRICS}
    assert 4.5 <= whole["messages_per_s"]["B / A"] <= 5.5 and whole["messages_per_s"]["verdict"] == "higher"
    assert whole["message_p50_ms"]["verdict"] == whole["message_p99_ms"]["verdict"] == "higher"
    # The article: three times the QPS at about a quarter of the p50.
    article = message_load.ARTICLE_LADDER
    assert article["qps"][1] / article["qps"][0] == pytest.approx(3.1, abs=0.05)
    assert article["p50_ms"][1] / article["p50_ms"][0] == pytest.approx(0.27, abs=0.01)
    assert "(higher)" in message_load.ladder_lines(table, "0 ms")[1]


def test_the_notebooks_remarks_are_the_tables_directions():
    text = (Path(__file__).resolve().parent.parent / "notebooks" / "tuning.py").read_text()
    assert "on the 100 Mbit/s link it cut\n#   a 128 KiB text request's latency" in text
    assert "the pool of 4 lowered the messages per\n#   second and raised a message's latency" in text
    assert "saves on compressible data (**not tested**)" not in text


def test_where_the_cores_are_the_bottleneck_a_stream_carries_the_same_messages_faster(tables):
    table = tables["streams_lan"][3]
    assert table["runs"].min() == 10
    p50 = rows(table, "stream vs unary, same messages in flight", "message_p50_ms").iloc[0]
    rate = rows(table, "stream vs unary, same messages in flight", "messages_per_s").iloc[0]
    assert p50["A in flight"] == p50["B in flight"] == 500
    assert rate["verdict"] == "higher" and round(rate["B / A"], 1) == 3.7  # data/samples/README.md says 3.7×
    assert p50["verdict"] == "lower" and p50["B mean"] < 0.3 * p50["A mean"]
    # The remark's other half: on the 25 ms link nothing is called at the same messages in flight.
    assert "where the cost of a call, not the path, sets\n#   the pace" in (
        Path(__file__).resolve().parent.parent / "notebooks" / "tuning.py").read_text()


def test_the_load_summary_names_each_step_and_shows_each_messages_own_p50():
    from labkit.analysis.tables import summarize_load

    ladder = summarize_load(Run.open(SAMPLES / "tuning-ladder-lan").samples())
    assert list(ladder["calls"]) == ["default", "+keepalive_ms=10000", "+connections=4", "+codec=vtproto",
                                     "s10 +rpc=stream"]
    assert ladder["message_p50_ms"].notna().all()
    # A stream's call holds ten messages, none of which waits longer than the call.
    assert (ladder["message_p50_ms"] <= ladder["latency_p50_ms"] + 1e-9).all()
    text = summarize_load(Run.open(SAMPLES / "tuning-compression").samples())
    assert {"text", "gz text", "", "gz"} == set(text["calls"])
    ghz = summarize_load(Run.open(SAMPLES / "tuning-go").samples())
    assert ghz["message_p50_ms"].isna().all()


def test_the_ladder_figure_draws_each_steps_mean_over_the_runs(tables):
    _, replicates, cells, _ = tables["ladder_lan"]
    means = message_load.ladder_means(cells)
    assert list(dict.fromkeys(means["step"])) == ["default", "+ keepalive", "+ pool 4", "+ vtproto", "+ streams"]
    rate = means[means["metric"] == "messages_per_s"].set_index("step")
    by_step = cells.groupby("ladder_step")["messages_per_s"].mean()
    assert rate.loc["default", "mean"] == pytest.approx(by_step["default"])
    assert (rate["lo"] < rate["mean"]).all() and (rate["mean"] < rate["hi"]).all() and (rate["runs"] == 10).all()

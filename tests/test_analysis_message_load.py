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
    lines = message_load.stream_lines(table, "25 ms")
    # One sentence per payload at the same messages in flight, neither metric called, each with its runs.
    assert len([line for line in lines if "at the same messages in flight" in line]) == 2
    for line in lines[:2]:
        assert "called" not in line.replace("not called", "") and " of 3 runs" in line
    first = same.iloc[0]
    runs = [first[f"run {r}"] for r in (1, 2, 3)]
    assert f"{'higher' if first['difference'] > 0 else 'lower'} in {sum(np.sign(runs) == np.sign(first['difference']))} of 3 runs" in lines[0]


def test_at_the_same_calls_a_stream_carries_its_extra_messages_and_overfilled_waits(tables):
    table = tables["streams"][3]
    rate = rows(table, "stream vs unary, same calls in flight", "messages_per_s")
    assert (rate["B in flight"] == 10 * rate["A in flight"]).all()
    assert rate["B / A"].max() == pytest.approx(10, rel=0.02) and rate["B / A"].min() > 2
    p50 = rows(table, "stream vs unary, same calls in flight", "message_p50_ms")
    # Only 16 KiB at 1000 messages in flight (16 MB outstanding) makes a message inside the stream wait longer.
    assert list(p50.loc[p50["verdict"] == "higher", "where"]) == ["16 KiB, stream c=100"]
    assert p50.loc[p50["verdict"] == "higher", "B mean"].iloc[0] > 2 * p50.loc[p50["verdict"] == "higher", "A mean"].iloc[0]
    assert "a message waited" in message_load.stream_lines(table, "25 ms")[-1]


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
    text_line = next(line for line in lines if line.startswith("**gzip against none on text payloads"))
    assert "128 KiB: 114.0 → 58.9 ms" in text_line and "called lower, lower in 3 of 3 runs" in text_line


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
    assert "(called higher, higher in 10 of 10 runs)" in message_load.ladder_lines(table, "0 ms")[1]


def test_the_ladders_default_is_said_with_its_settings_and_beside_the_same_load_without_its_option(tables):
    """The ladder's first step is the first value of every knob the run lists, the server's codec=proto among
    them: a sentence says so. On the link without added delay the same load ran without that option in
    tuning-messages-lan, and the two groups are set side by side (Welch's t over their 10 and 10 runs)."""
    _, _, ladder, _ = tables["ladder_lan"]
    _, _, streams, _ = tables["streams_lan"]
    line = message_load.ladder_default_lines(ladder, "0 ms")[0]
    assert line.startswith('**The ladder\'s "default" step**, 0 ms, is the first value of every knob the run lists: '
                           "1 connection, no keepalive, unary calls, compression none, the Go server with the option "
                           "codec=proto, 1 KiB random requests at c=50")
    compared = message_load.same_load_elsewhere(ladder, streams)
    rate = compared[compared["metric"] == "messages_per_s"].iloc[0]
    default = ladder[ladder["ladder_step"] == "default"]["messages_per_s"]
    plain = streams[(streams["rpc"] == "unary") & (streams["concurrency"] == 50)]["messages_per_s"]
    assert (rate["A"], rate["B"], rate["A runs"], rate["B runs"]) == ("codec=proto", "none", 10, 10)
    assert rate["A mean"] == pytest.approx(default.mean()) and rate["B mean"] == pytest.approx(plain.mean())
    assert rate["verdict"] == "higher" and rate["lo"] > 0
    said = message_load.same_load_lines(compared, "0 ms", "x", ladder)[0]
    assert f"with codec=proto (the ladder, 10 runs) {default.mean():.0f} messages/s, without a server option" in said
    # On the 25 ms link no group ran the ladder's load without the option: nothing to set beside it.
    _, _, ladder_25, _ = tables["ladder"]
    _, _, streams_25, _ = tables["streams"]
    assert message_load.same_load_elsewhere(ladder_25, streams_25).empty
    assert message_load.ladder_default_lines(streams, "0 ms") == []


def test_where_the_cores_are_the_bottleneck_a_stream_carries_the_same_messages_faster(tables):
    table = tables["streams_lan"][3]
    assert table["runs"].min() == 10
    p50 = rows(table, "stream vs unary, same messages in flight", "message_p50_ms").iloc[0]
    rate = rows(table, "stream vs unary, same messages in flight", "messages_per_s").iloc[0]
    assert p50["A in flight"] == p50["B in flight"] == 500
    assert rate["verdict"] == "higher" and round(rate["B / A"], 1) == 3.7  # docs/reproductions/tuning.md: ×3.74
    assert p50["verdict"] == "lower" and p50["B mean"] < 0.3 * p50["A mean"]
    line = message_load.stream_lines(table, "0 ms")[0]
    assert "called lower, lower in 10 of 10 runs" in line and "called higher, higher in 10 of 10 runs" in line


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

"""`labkit load`: h2load's parsers on recorded output, and ghz/h2load cells on a testbed of its own (real parts)."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import tomli_w
import tomllib

import labkit
from conftest import (DATA, LABKIT, deployed_inventory, labkit as run_labkit, leftover_processes, own_testbed,
                      running_labkit, wait_for_cell_start)
from labkit.analysis.windows import nearest_rank, window_stats
from labkit.experiments.load import LoadConfig, grpcload_cell_stats, plan_cells, text_payload
from labkit.schemas import LOAD_SCHEMA
from labkit.parsers import ParseError, parse_ghz_json
from labkit.parsers.grpcload import parse_grpcload_csv
from labkit.parsers.h2load import parse_h2load, parse_h2load_log
from labkit.errors import LabkitError
from labkit.store import Run

ONE_WAY_S = 0.005
RTT_MS = 2 * ONE_WAY_S * 1e3


def read(name: str) -> str:
    return (DATA / name).read_text()


# --- h2load's report and --log-file, recorded against `labkit echo serve` on loopback ------------


@pytest.mark.parametrize("name", ["timing_warmup", "timing_unpaced", "server_killed", "count_reset", "refused_timing",
                                  "refused_count"])
def test_every_line_of_an_h2load_report_is_accounted_for(name):
    result = parse_h2load(read(f"h2load/{name}.txt"))
    counts = result.counts
    assert counts["unrecognised"] == 0 and counts["lines"] == counts["blank"] + counts["parsed"]
    summary = result.summary
    requests = summary["requests"]
    assert requests["done"] == requests["succeeded"] + requests["failed"] or requests["started"] == 0
    assert set(summary["status_codes"]) == {"2xx", "3xx", "4xx", "5xx"}


def test_h2load_timing_report_with_warmup():
    summary = parse_h2load(read("h2load/timing_warmup.txt")).summary
    assert summary["mode"] == "timing" and summary["warmup_s"] == 1.0 and summary["duration_s"] == 2.0
    assert summary["clients"] == 2 and summary["threads"] == 1 and summary["protocol"] == "h2c"
    # Four streams were still open at the end: started, never done, and not counted as failed.
    assert summary["requests"] == {"total": 800, "started": 804, "done": 800, "succeeded": 800, "failed": 0,
                                   "errored": 0, "timeout": 0}
    assert summary["status_codes"]["2xx"] == 800
    assert summary["finished_s"] == 3.0 and summary["rps"] == 400.0  # succeeded over the 2 s measured, not the 3 s run
    assert summary["request_ms"] == {"min": pytest.approx(0.327), "max": pytest.approx(4.30), "mean": pytest.approx(0.937),
                                     "sd": pytest.approx(0.484), "within_sd_pct": 85.0}
    assert summary["traffic_bytes"] == {"total": 47736, "headers": 3744, "data": 8386}
    assert summary["client_rps"]["mean"] == pytest.approx(199.90)


@pytest.mark.parametrize("name", ["timing_warmup", "server_killed"])
def test_the_h2load_log_holds_the_measured_requests_and_agrees_with_the_report(name):
    summary = parse_h2load(read(f"h2load/{name}.txt")).summary
    log = parse_h2load_log(read(f"h2load/{name}.log.tsv"))
    rows = log.rows
    assert log.counts["unrecognised"] == 0 and len(rows) == summary["requests"]["total"]
    assert rows["ok"].all() and (rows["status"] == 200).all()
    # h2load prints three significant digits; the log has microseconds.
    printed = summary["request_ms"]
    assert rows["latency_ms"].min() == pytest.approx(printed["min"], abs=0.0005)
    assert rows["latency_ms"].max() == pytest.approx(printed["max"], abs=0.005)
    assert rows["latency_ms"].mean() == pytest.approx(printed["mean"], abs=0.0005)
    # The warm-up's requests are not in the log: every logged start lies within the measured 2 s.
    span_s = (rows["start_us"].max() - rows["start_us"].min()) / 1e6
    assert span_s < summary["duration_s"]
    stats = window_stats(rows["latency_ms"], rows["ok"], summary["duration_s"])
    assert stats["rps"] == pytest.approx(summary["rps"])


def test_requests_across_the_end_of_the_warm_up_have_no_status_and_are_not_errors():
    """Recorded by the suite (grpc-go's HTTP/2 server, 4 streams, 1 s warm-up, 2 s measured): h2load logged 2 of 750
    requests with status 0, both started in the window's first microseconds, while it counted all 750 succeeded. They
    are left out of the rows and counted, not taken for failed requests (a CI run had called them 2 errors)."""
    summary = parse_h2load(read("h2load/timing_cut_at_stop.txt")).summary
    log = parse_h2load_log(read("h2load/timing_cut_at_stop.log.tsv"))
    assert summary["requests"]["total"] == summary["requests"]["succeeded"] == 750
    assert summary["status_codes"]["2xx"] == 748
    assert log.counts["status_unrecorded"] == 2 and len(log.rows) == 748 and log.rows["ok"].all()
    stats = window_stats(log.rows["latency_ms"], log.rows["ok"], summary["duration_s"], log.rows["status"])
    assert stats["errors"] == 0 and stats["requests"] == 748


def test_a_server_killed_under_h2load_shows_only_as_silence():
    """What h2load reports when the server dies 1 s into 2 s: nothing failed, just no answers after the kill."""
    summary = parse_h2load(read("h2load/server_killed.txt")).summary
    rows = parse_h2load_log(read("h2load/server_killed.log.tsv")).rows
    assert summary["requests"]["failed"] == 0 and summary["requests"]["errored"] == 0
    span_s = (rows["start_us"].max() - rows["start_us"].min()) / 1e6
    assert span_s < 1.1  # 200 paced requests answered in the first second, none after


def test_h2load_failed_streams_and_refused_connections():
    reset = parse_h2load(read("h2load/count_reset.txt")).summary
    assert reset["mode"] == "count" and reset["planned_requests"] == 5
    assert reset["requests"]["failed"] == 5 and reset["requests"]["succeeded"] == 0
    log = parse_h2load_log(read("h2load/count_reset.log.tsv"))
    assert log.counts["failed_streams"] == 5 and log.counts["ok"] == 0 and (log.rows["status"] == -1).all()
    stats = window_stats(log.rows["latency_ms"], log.rows["ok"], 1.0, log.rows["status"])
    assert stats["errors"] == 5 and stats["latency_p50_ms"] is None and json.loads(stats["status_codes"]) == {"-1": 5}

    refused = parse_h2load(read("h2load/refused_timing.txt")).summary
    # Refused in a timing-based run: no request, no failure, no protocol negotiated.
    assert refused["requests"]["total"] == 0 and refused["requests"]["failed"] == 0 and "protocol" not in refused
    counted = parse_h2load(read("h2load/refused_count.txt")).summary
    assert counted["requests"]["failed"] == 10 and counted["requests"]["started"] == 0
    assert counted["finished_s"] == pytest.approx(211e-6)


def test_h2load_parsers_refuse_other_text():
    with pytest.raises(ParseError, match="not h2load output"):
        parse_h2load(read("ghz/echo_ok.json"))
    with pytest.raises(ParseError, match="not an h2load --log-file"):
        parse_h2load_log(read("h2load/timing_warmup.txt"))


@pytest.mark.parametrize("name", ["echo_ok.json", "echo_errors.json"])
def test_window_stats_percentiles_match_ghz_on_its_own_report(name):
    parsed = parse_ghz_json(read(f"ghz/{name}"))
    rows = parsed.rows
    stats = window_stats(rows["latency_ms"], rows["ok"], 1.0, rows["status"], rows["error"])
    ghz = parsed.summary["percentiles_ms"]
    for p in (50, 90, 99):
        assert stats[f"latency_p{p}_ms"] == pytest.approx(ghz[p], abs=1e-6)
    assert stats["latency_max_ms"] == pytest.approx(parsed.summary["slowest_ms"], abs=1e-6)
    assert json.loads(stats["status_codes"]) == parsed.summary["status_codes"]
    assert stats["errors"] == parsed.counts["failed"]


# --- labkit-go grpc-load's CSV, recorded against `labkit-go serve` on loopback (tests/data/grpcload/) ------


def test_every_request_of_a_grpcload_csv_is_a_row():
    for name, rpc_messages in (("unary.csv", 1), ("stream_gzip.csv", 10)):
        text = read(f"grpcload/{name}")
        result = parse_grpcload_csv(text)
        rows = result.rows
        assert result.counts["unrecognised"] == 0 and len(rows) == len(text.strip().splitlines()) - 1
        assert rows["ok"].all() and (rows["code"] == "OK").all()
        calls = rows.groupby(["worker", "call"])
        assert result.counts["calls"] == calls.ngroups and (calls.size() == rpc_messages).all()
        assert (calls["message"].apply(list) == [list(range(rpc_messages))] * calls.ngroups).all()
        # Every answer came after its own request left, and before its call ended.
        assert (rows["t_utc"] >= rows["call_t_utc"]).all() and (rows["latency_ms"] > 0).all()
        sent_ms = (rows["t_utc"] - rows["call_t_utc"]).dt.total_seconds() * 1e3
        assert (sent_ms + rows["latency_ms"] <= rows["call_latency_ms"] + 1e-6).all()
    stream = parse_grpcload_csv(read("grpcload/stream_gzip.csv")).rows
    # Inside a stream the later requests leave after the call began: their latency is not the call's.
    assert (stream.loc[stream["message"] == 9, "t_utc"] > stream.loc[stream["message"] == 9, "call_t_utc"]).all()


def test_a_streamed_message_is_also_timed_from_when_the_closed_loop_meant_to_send_it():
    text = read("grpcload/stream_intended.csv")
    result = parse_grpcload_csv(text)
    rows = result.rows.sort_values(["worker", "call", "message"])
    assert result.counts["unrecognised"] == 0 and rows["ok"].all() and len(rows) == 460
    # labkit-go's column: never shorter than from the request's own send, and longer where the request waited.
    assert (rows["intended_latency_ms"] >= rows["latency_ms"]).all()
    last = rows[rows["message"] == 9]
    sent_after_start_ms = (last["t_utc"] - last["call_t_utc"]).dt.total_seconds() * 1e3
    assert (last["intended_latency_ms"] - last["latency_ms"] >= sent_after_start_ms - 1e-6).all()
    assert last["intended_latency_ms"].median() > last["latency_ms"].median()
    # Its rule, read back from the other columns: every request of a call was due when the worker's call before
    # ended (call_t + call_latency, in integer ns), a worker's first call as it began.
    raw = pd.read_csv(__import__("io").StringIO(text)).sort_values(["worker", "call", "message"])
    ends = raw.dropna(subset=["call_latency_ns"]).set_index(["worker", "call"])
    due = [raw_row.call_t_ns if raw_row.call == 0 else
           int(ends.loc[(raw_row.worker, raw_row.call - 1), "call_t_ns"]) +
           int(ends.loc[(raw_row.worker, raw_row.call - 1), "call_latency_ns"]) for raw_row in raw.itertuples()]
    expected = (raw["t_ns"] - pd.Series(due, index=raw.index)) + raw["latency_ns"]
    assert (raw["intended_latency_ns"] == expected).all()
    # A CSV of a labkit-go before the column: the parser computes it by the same rule, to the nanosecond.
    older = "\n".join(",".join(line.split(",")[:10]) for line in text.splitlines()) + "\n"
    computed = parse_grpcload_csv(older).rows.sort_values(["worker", "call", "message"])
    assert (computed["intended_latency_ms"] * 1e6).round().astype("int64").tolist() == \
        (rows["intended_latency_ms"] * 1e6).round().astype("int64").tolist()
    assert parse_grpcload_csv(read("grpcload/stream_gzip.csv")).rows["intended_latency_ms"].notna().all()
    # A row whose intended latency is shorter than its own latency is not labkit-go's: counted, not read.
    header, first, *rest = text.splitlines()
    fields = first.split(",")
    torn = "\n".join([header, ",".join(fields[:10] + [str(int(fields[6]) - 1)]), *rest]) + "\n"
    assert parse_grpcload_csv(torn).counts["unrecognised"] == 1
    # The cell's row keeps both: the messages' own latencies, and beside them those from the intended send.
    stats = grpcload_cell_stats(text, 0.0, 1.0)
    assert stats["message_p50_ms"] == nearest_rank(sorted(rows["latency_ms"]), 50)
    assert stats["message_intended_p50_ms"] == nearest_rank(sorted(rows["intended_latency_ms"]), 50)
    assert stats["message_intended_p99_ms"] >= stats["message_p99_ms"]
    assert {"message_intended_p50_ms", "message_intended_mean_ms"} <= set(LOAD_SCHEMA.names)


def test_a_refused_grpcload_keeps_each_unanswered_request_with_its_status():
    result = parse_grpcload_csv(read("grpcload/refused.csv"))
    rows = result.rows
    assert result.counts["ok"] == 0 and result.counts["unrecognised"] == 0 and len(rows) == result.counts["calls"] * 3
    assert (rows["code"] == "UNAVAILABLE").all() and rows["latency_ms"].isna().all()
    assert rows["error"].str.contains("connection refused").all()
    stats = grpcload_cell_stats(read("grpcload/refused.csv"), 0.0, 1.0)
    assert stats["ok"] == 0 and stats["errors"] == stats["requests"] == result.counts["calls"]
    assert stats["messages"] == len(rows) and stats["messages_ok"] == 0 and stats["message_p50_ms"] is None
    assert json.loads(stats["status_codes"]) == {"UNAVAILABLE": stats["requests"]}


def test_grpcload_cell_stats_are_calls_like_ghz_and_messages_beside():
    text = read("grpcload/stream_gzip.csv")
    rows = parse_grpcload_csv(text).rows
    stats = grpcload_cell_stats(text, 0.0, 1.0)
    calls = rows.groupby(["worker", "call"])["call_latency_ms"].first().sort_values().tolist()
    assert stats["requests"] == len(calls) and stats["rps"] == len(calls)
    assert stats["latency_p50_ms"] == nearest_rank(calls, 50)
    assert stats["messages"] == stats["messages_ok"] == len(rows)
    assert stats["message_p50_ms"] == nearest_rank(sorted(rows["latency_ms"]), 50)
    # No message waits longer than its call, so neither does the median message.
    assert stats["message_p50_ms"] <= stats["latency_p50_ms"]


def test_grpcload_parser_refuses_other_text_and_counts_torn_lines():
    with pytest.raises(ParseError):
        parse_grpcload_csv(read("goload/front_grpc.csv"))
    torn = read("grpcload/unary.csv") + "1795861428875714851,1,1,0\n"
    assert parse_grpcload_csv(torn).counts["unrecognised"] == 1


def test_the_plan_names_the_tools_each_host_runs_for_the_run_to_send():
    from labkit.experiments.load import plan

    def tools(**options):
        config = LoadConfig(inventory="x", client="a", server="b", concurrency=[1], payload_bytes=[64], connections=[1],
                            keepalive_ms=[None], **options)
        config.validate()
        return plan(config, None).tools

    assert tools(transports=["grpc", "http2"]) == {"a": {"ghz"}}  # h2load is Debian's; a Python server needs none
    assert tools(transports=["grpc"], server_impl=["go"], grpc_tool="labkit-go") == {"a": {"labkit-go"}, "b": {"labkit-go"}}
    assert tools(transports=["grpc"], ghz="/opt/ghz") == {} and tools(transports=["http2"]) == {}  # the host's own ghz


def test_the_ladder_adds_each_knob_to_the_steps_before_in_the_articles_order():
    config = LoadConfig(inventory="x", client="a", server="b", transports=["grpc", "grpc-conns"], concurrency=[8],
                        payload_bytes=[64], connections=[1, 4], keepalive_ms=[None, 10000], rpc=["unary", "stream"],
                        server_impl=["go"], grpc_tool="labkit-go", grpc_option=["codec=default,vtproto"], design="ladder")
    config.validate()
    cells, omitted = plan_cells(config)
    steps = [(c.ladder_step, c.keepalive_ms, c.connections, c.stack.grpc_options, c.rpc) for c in cells]
    assert sorted(steps, key=lambda step: ["default", "+keepalive_ms=10000", "+connections=4", "+codec=vtproto",
                                           "+rpc=stream"].index(step[0])) == [
        ("default", None, 1, (), "unary"),
        ("+keepalive_ms=10000", 10000, 1, (), "unary"),
        ("+connections=4", 10000, 4, (), "unary"),
        ("+codec=vtproto", 10000, 4, ("codec=vtproto",), "unary"),
        ("+rpc=stream", 10000, 4, ("codec=vtproto",), "stream"),
    ]
    assert all(c.tool == "labkit-go" and c.stack.client_impl == "go" for c in cells)
    assert len(omitted) == 1 and omitted[0].startswith("ladder design: 11 cells off the ladder")
    with pytest.raises(LabkitError, match="at most two values of a knob"):
        LoadConfig(inventory="x", client="a", server="b", connections=[1, 2, 4], design="ladder").validate()


def test_the_text_payload_is_compressible_and_the_random_one_is_not():
    import random
    import zlib

    text = text_payload(65536, random.Random("1-text"))
    noise = random.Random(1).randbytes(65536)
    assert len(text) == 65536 and text.startswith(b'{"id":')
    assert len(zlib.compress(text)) < len(text) / 3 and len(zlib.compress(noise)) > len(noise) * 0.99


def test_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert [nearest_rank(values, p) for p in (1, 50, 90, 99, 100)] == [1.0, 50.0, 90.0, 99.0, 100.0]
    assert nearest_rank([7.0], 99) == 7.0


def test_the_matrix_leaves_out_impossible_cells_and_says_why():
    config = LoadConfig(inventory="x", client="a", server="b", concurrency=[1, 8], payload_bytes=[64],
                        connections=[1, 4], keepalive_ms=[None, 10000], order="planned")
    cells, omitted = plan_cells(config)
    described = [(c.transport, c.concurrency, c.connections, c.keepalive_ms) for c in cells]
    assert described == [
        ("grpc", 1, 1, None), ("grpc", 1, 1, 10000), ("grpc", 8, 1, None), ("grpc", 8, 1, 10000),
        ("grpc-conns", 8, 4, None), ("grpc-conns", 8, 4, 10000),
        ("http2", 1, 1, None), ("http2", 8, 1, None), ("http2", 8, 4, None),
    ]
    assert len(omitted) == 3 and all("need a concurrency of at least 4" in reason for reason in omitted)
    http2 = [c for c in cells if c.transport == "http2" and c.connections == 4][0]
    assert http2.streams_per_connection == 2 and http2.in_flight == 8


def test_one_connection_leaves_out_only_grpc_conns_in_one_line():
    config = LoadConfig(inventory="x", client="a", server="b", concurrency=[1, 8], payload_bytes=[64],
                        connections=[1], keepalive_ms=[None], order="planned")
    config.validate()
    cells, omitted = plan_cells(config)
    assert [(c.transport, c.concurrency, c.connections) for c in cells] == [
        ("grpc", 1, 1), ("grpc", 8, 1), ("http2", 1, 1), ("http2", 8, 1)]
    assert len(omitted) == 1 and omitted[0].startswith("grpc-conns: ") and "no --connections value is above 1" in omitted[0]


def test_one_knob_at_a_time_keeps_a_baseline_and_each_knob_changed_alone():
    config = LoadConfig(inventory="x", client="a", server="b", transports=["grpc", "grpc-conns", "http2"], concurrency=[8],
                        payload_bytes=[64], connections=[1, 2, 4, 8], keepalive_ms=[None, 10000],
                        compression=["none", "gzip"], rpc=["unary", "stream"], stream_messages=5, server_impl=["go"],
                        grpc_option=["static-stream-window=default,32MiB"], design="one-at-a-time",
                        order="planned")  # the matrix as built; tests/test_order.py shuffles it
    config.validate()
    cells, omitted = plan_cells(config)
    grpc = [c.id.removeprefix("a->b|") for c in cells if c.tool == "ghz"]
    assert grpc == [
        "grpc|c=8|p=64|conns=1|ka=none|server=go",  # the baseline: every knob at its first value
        "grpc|c=8|p=64|conns=1|ka=none|stream=5|server=go",
        "grpc|c=8|p=64|conns=1|ka=none|gzip|server=go",
        "grpc|c=8|p=64|conns=1|ka=10000|server=go",
        "grpc-conns|c=8|p=64|conns=2|ka=none|server=go",
        "grpc-conns|c=8|p=64|conns=4|ka=none|server=go",
        "grpc-conns|c=8|p=64|conns=8|ka=none|server=go",
        "grpc|c=8|p=64|conns=1|ka=none|server=go|opt=static-stream-window=32MiB",
    ]
    # h2load has no keepalive, compression or streams: its connections are its only knob here.
    assert [c.connections for c in cells if c.tool == "h2load"] == [1, 2, 4, 8]
    assert any("one-at-a-time design" in line and "change more than one knob" in line for line in omitted)
    stream = next(c for c in cells if c.rpc == "stream")
    assert (stream.messages_per_call, stream.columns()["rpc"], stream.slug(1)) == (5, "stream", "grpc-c8-p64-n1-kanone-s5-go-a1")
    gzip_cell = next(c for c in cells if c.compression == "gzip")
    assert gzip_cell.slug(2) == "grpc-c8-p64-n1-kanone-gz-go-a2"
    from labkit.parsers.ghz import ghz_argv

    argv = ghz_argv("ghz", "h:1", call="c", protoset="p", data_file="d", concurrency=8, connections=1, seconds=1,
                    call_timeout_s=1, out="o", stream_messages=5, gzip=True)
    assert argv[-4:] == ["--stream-call-count", "5", "--enable-compression", "h:1"]
    # The full design of the same lists multiplies every knob.
    config.design = "full"
    assert len([c for c in plan_cells(config)[0] if c.tool == "ghz"]) == 4 * 2 * 2 * 2 * 2


def test_the_http2_echo_route_answers_the_body_length_and_leaves_upload_alone():
    from labkit.echo.http2 import Http2Client, running_http2_server

    with running_http2_server() as server:
        client = Http2Client(f"127.0.0.1:{server.port}")
        try:
            for size in (0, 1, 70000):  # empty, one byte, several DATA frames
                reply = client.post("/echo", [b"x" * size], length=size)
                assert (reply.status, reply.json()) == (200, {"payload_length": size})
            upload = client.post("/upload", [b"abc"], length=3)
            assert upload.status == 200 and upload.json()["sha256"] == hashlib.sha256(b"abc").hexdigest()
            assert client.post("/nothing", [b"x"], length=1).status == 404
        finally:
            client.close()


# --- on the testbed ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab():
    with own_testbed("l4-load", ONE_WAY_S) as state:
        yield state


@pytest.fixture(scope="module")
def wheel():
    """This tree's wheel, built once: every deploy here sends exactly it, whatever changes in the tree meanwhile."""
    from labkit.deploy import build_wheel

    return build_wheel()


@pytest.fixture(scope="module")
def inventory(lab, wheel, tmp_path_factory):
    """The testbed's inventory, with labkit (and ghz) deployed offline into directories of this module."""
    assert (Path(LABKIT).parent / "ghz").exists(), "no ghz in .venv/bin: scripts/bootstrap.sh builds it when Go is installed"
    return deployed_inventory(lab, tmp_path_factory.mktemp("load"), "--wheel", str(wheel.path))


def host_dir(inventory: Path, host: str) -> Path:
    return Path(tomllib.loads(inventory.read_text())["hosts"][host]["labkit_dir"])


def lab_processes(lab) -> list[str]:
    """Command lines of echo servers and load tools still running in the testbed's namespaces."""
    return leftover_processes(lab, ("echo serve", "labkit-go", "ghz", "h2load"))


def test_deploy_sent_ghz_and_sends_it_only_once(lab, inventory, wheel):
    local = hashlib.sha256((Path(LABKIT).parent / "ghz").read_bytes()).hexdigest()
    for host in ("a", "b"):
        assert hashlib.sha256((host_dir(inventory, host) / "bin" / "ghz").read_bytes()).hexdigest() == local
    again = run_labkit("deploy", str(inventory), "a", "--wheel", str(wheel.path), timeout=120)
    assert again.returncode == 0 and "a: skipped: " in again.stderr and "ghz" not in again.stderr, again.stderr


def test_ghz_and_h2load_cells_parse_into_the_store(lab, inventory, tmp_path):
    run = labkit.load(inventory, client="a", server="b", transports=["grpc", "grpc-conns", "http2"], concurrency=[4],
                      payload_bytes=[64], connections=[2], keepalive_ms=[None], duration_s=2.0, warmup_s=1.0,
                      ping_count=2, name="quick", runs_dir=tmp_path, quiet=True)
    assert run.status == "complete"
    table = pq.read_table(run.path / "samples.parquet")
    assert table.schema.equals(LOAD_SCHEMA, check_metadata=False)
    rows = table.to_pandas().set_index("transport")
    assert sorted(rows.index) == ["grpc", "grpc-conns", "http2"]
    assert list(rows["tool"]) == [{"grpc": "ghz", "grpc-conns": "ghz", "http2": "h2load"}[t] for t in rows.index]
    assert rows.loc["grpc-conns", "connections"] == 2 and rows.loc["http2", "streams_per_connection"] == 2
    for transport, row in rows.iterrows():
        assert pd.isna(row["error"]), (transport, row["error"])
        assert row["ok"] > 20 and row["errors"] == 0 and row["requests"] == row["ok"]
        assert row["rps"] == pytest.approx(row["ok"] / 2.0)
        # Every call crosses the 10 ms RTT; 4 in flight can never beat 4 per RTT.
        assert RTT_MS <= row["latency_min_ms"] <= row["latency_p50_ms"] <= row["latency_p90_ms"] <= row["latency_p99_ms"]
        assert row["latency_p99_ms"] <= row["latency_max_ms"]
        assert row["rps"] <= 4 / (RTT_MS / 1e3)
        assert row["server_alive_after"] and row["server_cpu_s"] > 0 and 0 < row["server_cpu_util"] < 2.5
        assert json.loads(row["status_codes"]) == ({"OK": row["ok"]} if row["tool"] == "ghz" else {"200": row["ok"]})
        for name in row["raw_files"].split(","):
            assert (run.raw_dir / name).stat().st_size > 0
    # ghz ran for warm-up + duration; its own count includes the warm-up the row leaves out.
    for transport in ("grpc", "grpc-conns"):
        assert rows.loc[transport, "tool_requests"] > rows.loc[transport, "requests"]
        report = json.loads(gzip.decompress((run.raw_dir / rows.loc[transport, "raw_files"]).read_bytes()))
        assert report["count"] == rows.loc[transport, "tool_requests"]
    # h2load's own req/s is the same count over the same window.
    assert rows.loc["http2", "rps"] == pytest.approx(rows.loc["http2", "tool_rps"], rel=0.02)
    assert "nghttp2" in rows.loc["http2", "tool_version"]
    assert set(run.manifest["tools"]) == {"ghz", "h2load"}
    assert run.ping_baseline()["received"] == 2 and run.ping_baseline(when="after")["received"] == 2
    assert lab_processes(lab) == []
    # Its private work directory on the client host is gone (others' may exist: modules run side by side).
    assert run.manifest["client_workdir"].startswith("/tmp/labkit-load.")
    assert not Path(run.manifest["client_workdir"]).exists()


def test_connections_1_runs_the_other_transports_and_says_grpc_conns_was_left_out(lab, inventory, tmp_path):
    proc = run_labkit("load", str(inventory), "--client", "a", "--server", "b", "--connections", "1",
                      "--concurrency", "2", "--payload-bytes", "64", "--keepalive-ms", "none", "--duration", "0.5s",
                      "--warmup", "0.2s", "--ping-count", "1", "--name", "oneconn", "--runs-dir", str(tmp_path),
                      "--quiet", timeout=180)
    assert proc.returncode == 0, proc.stderr
    run = Run.open(next(tmp_path.glob("*-oneconn")))
    assert sorted(run.samples()["transport"]) == ["grpc", "http2"]
    left_out = [line for line in proc.stdout.splitlines() if line.startswith("left out: ")]
    assert len(left_out) == 1 and "grpc-conns" in left_out[0], proc.stdout
    assert run.manifest["omitted_cells"] == [left_out[0].removeprefix("left out: ")]


def _echo_server_pid(lab) -> int:
    pids = subprocess.run(["ip", "netns", "pids", lab.hosts["b"].netns], capture_output=True, text=True).stdout.split()
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"echo" in cmdline and b"serve" in cmdline and cmdline[0].endswith(b"python"):
            return int(pid)
    raise AssertionError("no echo server in host b's namespace")


def test_a_server_killed_mid_load_is_restarted_and_its_cell_redone(lab, inventory, tmp_path):
    experiment = tmp_path / "killed.toml"
    experiment.write_text(tomli_w.dumps({"load": {
        "inventory": str(inventory), "client": "a", "server": "b", "transports": ["grpc"], "concurrency": [2],
        "payload_bytes": [64, 100], "keepalive_ms": "none", "duration": "3s", "warmup": "1s", "name": "killed",
    }}))
    with running_labkit("load", "--config", str(experiment), "--ping-count", "1", "--runs-dir", str(tmp_path),
                        "--quiet") as proc:
        wait_for_cell_start(tmp_path, "killed")
        time.sleep(1.0 + 1.5)  # the warm-up, then half of the measured window
        spoiled_pid = _echo_server_pid(lab)
        subprocess.run(["kill", "-9", str(spoiled_pid)], check=True)
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    run = Run.open(next(tmp_path.glob("*-killed")))
    # The spoiled cell's row stays in the journal, saying what happened; the dataset holds its redo.
    journal = pd.DataFrame(run.journal_rows())
    spoiled = journal[journal["server_alive_after"] == False].iloc[0]  # noqa: E712 - a column of bools
    assert "died during the cell" in spoiled["error"] and spoiled["errors"] > 0
    assert set(json.loads(spoiled["status_codes"])) == {"OK", "Unavailable"}
    rows = run.samples()
    assert len(rows) == 2 and rows["server_alive_after"].all() and (rows["errors"] == 0).all()
    assert (rows["ok"] > 10).all() and rows["error"].isna().all()
    assert rows.loc[rows["cell_id"] == spoiled["cell_id"], "attempt"].iat[0] > spoiled["attempt"]
    assert len(run.manifest["servers"]) == 2 and len(run.manifest["server_exits"]) == 1
    assert f"(pid {spoiled_pid}) exited with status" in stdout and f"during {spoiled['cell_id']}: restarted" in stdout
    assert lab_processes(lab) == []


def test_sigterm_stops_everything_and_resume_runs_only_the_missing_cell(lab, inventory, tmp_path):
    argv = ["load", str(inventory), "--client", "a", "--server", "b", "--transports", "grpc", "--concurrency", "2",
            "--payload-bytes", "64", "--keepalive-ms", "none,1000", "--duration", "2s", "--warmup", "0.5s",
            "--ping-count", "1", "--name", "resumed", "--runs-dir", str(tmp_path), "--quiet"]
    with running_labkit(*argv) as proc:
        run_path = wait_for_cell_start(tmp_path, "resumed")
        deadline = time.monotonic() + 60
        while '"complete"' not in (run_path / "cells.jsonl").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # into the second cell
        proc.terminate()
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert lab_processes(lab) == []
    assert Run.open(run_path).status == "interrupted"

    resumed = run_labkit("load", "--resume", run_path.name, "--runs-dir", str(tmp_path), "--quiet", timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    run = Run.open(run_path)
    rows = run.samples()
    assert run.status == "complete" and len(rows) == 2
    assert sorted(rows["keepalive_ms"].fillna(0).astype(int)) == [0, 1000]
    # The first cell ran once; the interrupted one ran again as attempt 2.
    assert sorted(rows["attempt"]) == [1, 2]
    # Keepalive pings every second are allowed by the server: no call failed over it.
    assert (rows["errors"] == 0).all() and (rows["ok"] > 10).all()
    assert lab_processes(lab) == []


@pytest.mark.parametrize(
    "transport, option, expected",
    [
        ("grpc", "--ghz", "ghz is not on a (looked for /nonexistent/ghz); run `labkit deploy "),
        ("http2", "--h2load", "h2load is not on a (looked for /nonexistent/h2load); install Debian's nghttp2-client there"),
    ],
)
def test_a_missing_tool_is_one_line_exit_2(lab, inventory, tmp_path, transport, option, expected):
    proc = run_labkit("load", str(inventory), "--client", "a", "--server", "b", "--transports", transport,
                      "--concurrency", "1", "--payload-bytes", "64", option, f"/nonexistent/{option[2:]}",
                      "--runs-dir", str(tmp_path), "--quiet", timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert lines[0].startswith(f"labkit: error: {expected}"), lines[0]
    assert lab_processes(lab) == []


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--transports", "grpc,quic"], "'quic' is not one of grpc, grpc-conns, http2"),
        (["--transports", "grpc-conns", "--connections", "1"], "no cell to run: grpc-conns: it spreads calls over "
                                                               "several connections, and no --connections value is above 1"),
        (["--concurrency", "0"], "0 is not between 1 and 10000"),
        (["--payload-bytes", "9MiB"], "out of range"),
        (["--transports", "http2", "--concurrency", "1", "--connections", "2"], "no cell to run"),
    ],
)
def test_bad_load_input_is_one_line_exit_2(inventory, tmp_path, args, expected):
    proc = run_labkit("load", str(inventory), "--client", "a", "--server", "b", *args, "--runs-dir", str(tmp_path), "--quiet")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in proc.stderr


def test_streams_and_gzip_under_load_on_the_go_server(lab, inventory, tmp_path):
    run = labkit.load(inventory, client="a", server="b", transports=["grpc"], concurrency=[4], payload_bytes=[1024],
                      connections=[1], keepalive_ms=[None], compression=["none", "gzip"], rpc=["unary", "stream"],
                      stream_messages=10, design="one-at-a-time", duration_s=2.0, warmup_s=0.5, ping_count=2,
                      server_impl=["go"], name="calls", runs_dir=tmp_path, quiet=True)
    assert run.status == "complete"
    rows = run.samples().set_index(["compression", "rpc"])
    assert sorted(rows.index) == [("gzip", "unary"), ("none", "stream"), ("none", "unary")]
    assert rows["error"].isna().all() and (rows["errors"] == 0).all() and (rows["requests"] > 10).all()
    assert rows.loc[("none", "stream"), "messages_per_call"] == 10 and rows.loc[("none", "unary"), "messages_per_call"] == 1
    # ghz ran the stream cell on EchoStream, as its own report says (it does not record compression or stream counts).
    from labkit.analysis.load import per_request_file
    from labkit.parsers import parse_ghz_json

    def ghz_options(key):
        return json.loads(run.raw_text(per_request_file(rows.loc[key, "raw_files"], "ghz")))["options"]

    assert ghz_options(("none", "stream"))["call"] == "echo.EchoService/EchoStream"
    # The 1 KiB request body ghz copies into its report is left out of what the run keeps.
    assert ghz_options(("none", "unary"))["data"] == {"omitted_by_labkit": "the request body: payload_bytes random "
                                                                           "bytes of the run's seed 1"}
    assert ghz_options(("gzip", "unary"))["call"] == ghz_options(("none", "unary"))["call"] == "echo.EchoService/Echo"
    # Per message, a stream of ten back-to-back requests beats ten unary calls at the same concurrency.
    stream = parse_ghz_json(run.raw_text(per_request_file(rows.loc[("none", "stream"), "raw_files"], "ghz"))).rows
    unary = parse_ghz_json(run.raw_text(per_request_file(rows.loc[("none", "unary"), "raw_files"], "ghz"))).rows
    assert stream["latency_ms"].median() / 10 < unary["latency_ms"].median()
    assert lab_processes(lab) == []


def test_labkit_gos_load_climbs_the_ladder_timing_every_message(lab, inventory, tmp_path):
    run = labkit.load(inventory, client="a", server="b", transports=["grpc", "grpc-conns"], concurrency=[4],
                      payload_bytes=[1024], payload_kind=["text"], connections=[1, 2], keepalive_ms=[None, 10000],
                      rpc=["unary", "stream"], stream_messages=5, grpc_option=["codec=default,vtproto"],
                      server_impl=["go"], grpc_tool="labkit-go", design="ladder", duration_s=1.0, warmup_s=0.3,
                      ping_count=2, name="ladder", runs_dir=tmp_path, quiet=True, seed=3)
    assert run.status == "complete"
    steps = ["default", "+keepalive_ms=10000", "+connections=2", "+codec=vtproto", "+rpc=stream"]
    # The steps ran in the order shuffled from seed 3, which the manifest records, and each names its settings.
    order = run.manifest["cell_order"]
    assert order["seed"] == 3 and order["shuffled"] and order["cells"] == list(
        run.samples().sort_values("t_start_utc_ns")["cell_id"])
    assert [step["step"] for step in run.manifest["ladder"]] == steps
    assert run.manifest["ladder"][0]["settings"]["option:codec"] is None
    rows = run.samples().set_index("ladder_step")
    assert sorted(rows.index, key=steps.index) == steps and list(rows.index) != steps
    assert (rows["tool"] == "labkit-go").all() and (rows["client_impl"] == "go").all()
    assert rows["error"].isna().all() and (rows["errors"] == 0).all() and (rows["payload_kind"] == "text").all()
    # Every request of every call in the window was timed: five per stream call, one per unary call.
    assert (rows["messages"] == rows["requests"] * rows["messages_per_call"]).all()
    assert (rows["messages_ok"] == rows["messages"]).all()
    unary = rows.drop(index="+rpc=stream")
    assert (unary["messages"] == unary["requests"]).all()
    # No message inside a stream waits longer than its call, and the later ones leave after it began.
    stream = rows.loc["+rpc=stream"]
    assert stream["message_p50_ms"] <= stream["latency_p50_ms"]
    from labkit.analysis.load import cell_messages, per_request_file

    messages = cell_messages(run.raw_text(per_request_file(stream["raw_files"], "labkit-go")), 0.3, 1.0)
    assert len(messages) == stream["messages"] and (messages["t_utc"] > messages["call_t_utc"]).any()
    # The server ran with each codec the steps asked for: none set for the plain steps, vtproto for its own.
    assert {server.get("grpc_options", {}).get("codec") for server in run.manifest["servers"]} == {None, "vtproto"}
    assert lab_processes(lab) == []


def test_the_go_server_under_the_same_load_as_the_python_one(lab, inventory, tmp_path):
    run = labkit.load(inventory, client="a", server="b", transports=["grpc", "http2"], concurrency=[4], payload_bytes=[64],
                      connections=[1], keepalive_ms=[None], duration_s=2.0, warmup_s=1.0, ping_count=2,
                      server_impl=["python", "go"], name="stacks", runs_dir=tmp_path, quiet=True)
    assert run.status == "complete"
    rows = run.samples()
    assert sorted(zip(rows["server_impl"], rows["transport"])) == [("go", "grpc"), ("go", "http2"), ("python", "grpc"),
                                                                    ("python", "http2")]
    assert rows["client_impl"].isna().all() and rows["error"].isna().all() and (rows["errors"] == 0).all()
    # Each stack's server ran on its own: the Go one's CPU was read from its own process.
    assert (rows["server_cpu_s"] > 0).all() and rows["server_alive_after"].all()
    # Cells run shuffled, so a server starts again each time the next cell's stack differs: both stacks, each its own.
    assert set(server["impl"] for server in run.manifest["servers"]) == {"python", "go"}
    assert lab_processes(lab) == []
    # Both notebooks read a run of two stacks: load names each server's series, tuning compares the servers.
    report = run_labkit("report", str(run.path), "--formats", "png", timeout=300)
    assert report.returncode == 0, report.stderr
    load_json = json.loads((run.path / "report" / "load.json").read_text())
    load_headline = load_json["headline"]
    assert {"rps.grpc n=1 go.c=4", "rps.grpc n=1 python.c=4"} <= set(load_headline)
    tuning = json.loads((run.path / "report" / "tuning.json").read_text())
    assert tuning["headline"]["server.compared"] == 1
    assert sum(tuning["headline"][f"server.p50.ci_{v}"] for v in ("higher", "lower", "unclear")) == 1
    assert tuning["comparisons"][0]["meaning"] == "go server vs python"
    # A fresh run, not a shipped sample: each notebook says what this run shows, with its numbers, and nothing it
    # says of its sample (docs/reproductions/); tuning reads no shipped run beside it.
    from conftest import assert_speaks_of_its_own_run

    said = " ".join(assert_speaks_of_its_own_run("load", load_json, run.path / "report" / "load.ipynb"))
    for stack in ("go", "python"):
        key = f"p50_diff_ms.HTTP_2_vs_gRPC.http2 n=1 {stack}.c=4"
        assert f"http2 n=1 {stack} − grpc n=1 {stack} at c=4: {load_headline[key]:+.2f} ms".replace("-", "−") in said
    said = assert_speaks_of_its_own_run("tuning", tuning, run.path / "report" / "tuning.ipynb")
    server = next(text for text in said if text.startswith("**go server vs python**"))
    diff = tuning["comparisons"][0]["p50_diff"]
    assert f"p50 on − off from {diff:+.1f} to {diff:+.1f} ms".replace("-", "−") in server
    assert tuning["idle_run_path"] is None and not any(text.startswith("`") for text in said)

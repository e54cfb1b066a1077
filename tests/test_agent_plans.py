"""Issue 24, item 2: one contract per agent, its plan and argv builder in labkit/echo/plans.py.

Each builder's command line is read back by the agent's own parser: the real click command of ``labkit echo``
(whose parameters are the plan's fields) must give the very plan, at typical values and at the bounds of
labkit/limits.py; the real labkit-go twin, run against real servers on 127.0.0.1, must do what the plan says
(its ready and start lines, the calls and uploads it makes). And no experiment writes an agent's flags itself.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
import socket
import subprocess
from dataclasses import fields, replace
from pathlib import Path

import pytest

from test_echo import _write_test_pki, summary_counts

from labkit.cli.echo import echo
from labkit.echo.client import call_schedule
from labkit.echo.plans import (DEFAULT_PROBES, BackPlan, CallPlan, FrontPlan, SeriesPlan, ServePlan, UploadFilePlan,
                               UploadPlan, back_argv, call_argv, front_argv, serve_argv, series_argv, upload_argv,
                               upload_file_argv)
from labkit.echo.remote import local_labkit_argv, wait_until_ready
from labkit.echo.tcpinfo import TCP_COLUMNS
from labkit.errors import LabkitError
from labkit.hosts.layout import local_tool
from labkit.hosts.local import LocalHost, Silent, command_name
from labkit.limits import (MAX_DURATION_S, MAX_ECHO_PAYLOAD_BYTES, MAX_FILE_BYTES, MAX_GRPC_CHANNELS,
                           MAX_KEEPALIVE_MS, MAX_MESSAGE_BYTES, MAX_NATS_WORKERS, MAX_REPEATS, MAX_REQUEST_BYTES, MAX_SERIES_INTERVAL_S,
                           MAX_SERIES_PAYLOAD_BYTES, MAX_TICKS, MAX_WARMUP)

REPO = Path(__file__).resolve().parent.parent
GO_BINARY = local_tool("labkit-go")
HOST = LocalHost()
#: The plan type each ``labkit echo`` agent command fills from its flags.
PLAN_OF = {"serve": ServePlan, "call": CallPlan, "series-agent": SeriesPlan, "upload-agent": UploadPlan,
           "upload-file": UploadFilePlan}
BUILDER_OF = {ServePlan: serve_argv, CallPlan: call_argv, SeriesPlan: series_argv, UploadPlan: upload_argv,
              UploadFilePlan: upload_file_argv}


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, str]:
    ca, cert, key = _write_test_pki(tmp_path_factory.mktemp("pki"))
    return {"ca": str(ca), "cert": str(cert), "key": str(key)}


def parsed(argv: list[str]):
    """The plan the agent's click command makes of ``argv`` (``["echo", COMMAND, *flags]``), parsing as it does."""
    assert argv[0] == "echo"
    command = echo.commands[argv[1]]
    with command.make_context(argv[1], list(argv[2:])) as ctx:
        plan_type = PLAN_OF[argv[1]]
        # The command's parameters are the plan's fields, so the command's `Plan(**flags)` is the whole reading.
        assert set(ctx.params) == {field.name for field in fields(plan_type)}
        return plan_type(**ctx.params)


def python_plans(pki: dict[str, str]) -> list:
    """Each Python agent's plans: typical ones, and ones at the upper and lower bounds of labkit.limits."""
    call = CallPlan(target="10.0.0.2:5001", sizes=(1000, 14000, 16000), repeats=5, gap_s=0.25, warmup=1, seed=7,
                    order="shuffled", keepalive_ms=1000, tcp_info=True, grpc_options=("compression=gzip", "pool=2"))
    serve = ServePlan(bind="10.0.0.2:0", max_message_bytes=5 * 2**20, reflection=False, grace_s=0.5,
                      permit_keepalive_ms=1000, tcp_echo_port=0, http2_port=0, max_upload_bytes=16 * 2**20,
                      stream_idle_s=30.0, grpc_options=("max-concurrent-streams=8",))
    series = SeriesPlan(address="10.0.0.2", grpc_port=5001, tcp_echo_port=5002, probes=DEFAULT_PROBES, first_tick=60,
                        ticks=60, interval_s=1.0, payload_bytes=50, timeout_s=5.0)
    upload = UploadPlan(transport="grpc", target="10.0.0.2:5001", file="/home/lab/upload/file.bin", sha256="ab" * 32,
                        chunk_size=65536, repeats=3, timeout_s=600.0, grpc_options=("initial-window=1MiB",))
    return [
        call,
        replace(call, target="[::1]:5001", cold=True, gap_s=1e-05, seed=None, order="sequential", keepalive_ms=None,
                tls_ca=pki["ca"], tls_server_name="echo.test", grpc_options=()),
        replace(call, sizes=(0, MAX_REQUEST_BYTES), repeats=MAX_REPEATS, gap_s=MAX_DURATION_S,
                background_gap_s=MAX_DURATION_S, warmup=MAX_WARMUP, keepalive_ms=MAX_KEEPALIVE_MS,
                timeout_s=MAX_DURATION_S),
        replace(call, sizes=(0,), repeats=1, gap_s=0.0, background_gap_s=1e-09, warmup=0, keepalive_ms=1,
                timeout_s=1e-09),
        serve,
        replace(serve, bind="[::1]:5001", tls_cert=pki["cert"], tls_key=pki["key"], reflection=True,
                max_upload_bytes=None, http2_port=None, stream_idle_s=None, grpc_options=()),
        replace(serve, max_message_bytes=MAX_MESSAGE_BYTES, grace_s=MAX_DURATION_S,
                permit_keepalive_ms=MAX_KEEPALIVE_MS, tcp_echo_port=65535, http2_port=65535,
                max_upload_bytes=MAX_FILE_BYTES, stream_idle_s=MAX_DURATION_S),
        replace(serve, max_message_bytes=1, grace_s=0.0, permit_keepalive_ms=1, max_upload_bytes=0,
                stream_idle_s=1e-09),
        series,
        replace(series, probes=("ping",), grpc_port=None, tcp_echo_port=None, spread=False, first_tick=0),
        replace(series, first_tick=MAX_TICKS, ticks=MAX_TICKS, interval_s=MAX_SERIES_INTERVAL_S,
                timeout_s=MAX_SERIES_INTERVAL_S, payload_bytes=MAX_REQUEST_BYTES, grpc_port=65535, tcp_echo_port=65535),
        replace(series, ticks=1, interval_s=1e-09, timeout_s=1e-09, payload_bytes=0, grpc_port=1, tcp_echo_port=1),
        upload,
        replace(upload, transport="http2", sha256=None, tls_ca=pki["ca"], tls_server_name="echo.test",
                declare_length=10, grpc_options=()),
        replace(upload, chunk_size=MAX_REQUEST_BYTES, repeats=MAX_REPEATS, warmup=MAX_WARMUP, timeout_s=MAX_DURATION_S),
        replace(upload, chunk_size=1, repeats=1, warmup=0, timeout_s=1e-09, declare_length=0),
        UploadFilePlan(path="/home/lab/upload/generated.bin", size=16 * 2**20, seed=3),
        UploadFilePlan(path="/home/lab/upload/file.bin"),
        UploadFilePlan(path="/home/lab/upload/generated.bin", size=MAX_FILE_BYTES, seed=-1),
    ]


def test_each_python_agent_reads_its_builders_command_line_back_into_the_same_plan(pki):
    for plan in python_plans(pki):
        argv = BUILDER_OF[type(plan)](plan)
        assert parsed(argv) == plan, argv


def test_a_duration_a_float_would_print_with_an_exponent_is_written_so_both_twins_read_it():
    # f"{1e-05!r}s" is "1e-05s", which neither labkit's nor labkit-go's duration parser reads.
    argv = call_argv(CallPlan(target="10.0.0.2:5001", sizes=(1,), gap_s=1e-05, timeout_s=1e-09))
    assert argv[argv.index("--gap") + 1] == "0.00001s" and argv[argv.index("--timeout") + 1] == "0.000000001s"


def test_an_agents_flag_defaults_are_its_plans_defaults():
    """Flags an experiment leaves out mean what the plan's defaults say: the click defaults are read from the plan."""
    required = {
        "call": (["--target", "h:1", "--sizes", "1"], CallPlan(target="h:1", sizes=(1,))),
        "serve": (["--bind", "h:0"], ServePlan(bind="h:0")),
        "series-agent": (["--address", "h", "--probes", "ping", "--ticks", "2", "--interval", "1s"],
                         SeriesPlan(address="h", probes=("ping",), ticks=2, interval_s=1.0)),
        "upload-agent": (["--transport", "grpc", "--target", "h:1", "--file", "f", "--chunk-size", "10"],
                         UploadPlan(transport="grpc", target="h:1", file="f", chunk_size=10)),
        "upload-file": (["--path", "p"], UploadFilePlan(path="p")),
    }
    assert set(required) == set(PLAN_OF)
    for command, (flags, plan) in required.items():
        assert parsed(["echo", command, *flags]) == plan, command


@pytest.mark.parametrize("plan, message", [
    (CallPlan(target="h:1", sizes=(MAX_REQUEST_BYTES + 1,)), "request sizes"),
    (CallPlan(target="h:1", sizes=(1,), repeats=MAX_REPEATS + 1), "--repeats"),
    (CallPlan(target="h:1", sizes=(1,), gap_s=MAX_DURATION_S + 1), "--gap"),
    (CallPlan(target="h:1", sizes=(1,), cold=True, background_gap_s=1.0), "one shared channel"),
    (ServePlan(bind="h:0", max_upload_bytes=10), "--http2-port"),
    (SeriesPlan(address="h", probes=("ping",), ticks=1, interval_s=MAX_SERIES_INTERVAL_S + 1), "--interval"),
    (UploadPlan(transport="http2", target="h:1", file="f", chunk_size=1, grpc_options=("pool=2",)), "grpc only"),
    (FrontPlan(bind="h:0"), "at least one of"),
    (BackPlan(bind="h:0", nats_workers=MAX_NATS_WORKERS + 1), "--nats-workers"),
])
def test_a_builder_refuses_a_plan_its_agent_would_refuse(plan, message):
    builder = {**BUILDER_OF, BackPlan: back_argv, FrontPlan: front_argv}[type(plan)]
    with pytest.raises(LabkitError, match=message):
        builder(plan)


# -- the Go twins, run on real sockets --------------------------------------------------------------
def json_events(proc, timeout: float = 60):
    for line in proc.lines(timeout=timeout):
        if line.startswith("{"):
            yield json.loads(line)


def started_server(plan: ServePlan, impl: str):
    """``labkit echo serve`` of the plan, started; (process, ready line)."""
    proc = HOST.start(local_labkit_argv(*serve_argv(plan, impl)))
    try:
        return proc, wait_until_ready(proc, timeout=30)
    except BaseException:
        proc.stop()
        raise


@pytest.fixture(scope="module")
def go_server():
    proc, ready = started_server(ServePlan(bind="127.0.0.1:0", tcp_echo_port=0, http2_port=0, permit_keepalive_ms=1000),
                                 "go")
    with proc:
        yield ready


@pytest.mark.parametrize("impl", ["python", "go"])
@pytest.mark.parametrize("bounds", ["typical", "upper", "lower"])
def test_each_servers_ready_line_says_what_its_plan_asked(impl, bounds, pki):
    plan = ServePlan(bind="127.0.0.1:0", max_message_bytes=5 * 2**20, reflection=False, grace_s=0.5,
                     permit_keepalive_ms=1000, tcp_echo_port=0, http2_port=0,
                     grpc_options=("max-concurrent-streams=8",))
    if bounds == "upper":
        plan = replace(plan, max_message_bytes=MAX_MESSAGE_BYTES, grace_s=MAX_DURATION_S,
                       permit_keepalive_ms=MAX_KEEPALIVE_MS, max_upload_bytes=MAX_FILE_BYTES, grpc_options=())
    elif bounds == "lower":
        plan = replace(plan, max_message_bytes=1, grace_s=0.0, permit_keepalive_ms=1, max_upload_bytes=0,
                       tls_cert=pki["cert"], tls_key=pki["key"], reflection=True)
    proc, ready = started_server(plan, impl)
    with proc:
        assert ready["impl"] == impl and ready["bind"] == plan.bind
        assert (ready["tls"], ready["reflection"]) == (plan.tls_cert is not None, plan.reflection)
        assert ready["max_message_bytes"] == plan.max_message_bytes
        assert ready["grpc_options"] == ({"max-concurrent-streams": 8} if plan.grpc_options else {})
        assert ready["tcp_echo_port"] > 0 and ready["http2_port"] > 0
        if impl == "go" and plan.max_upload_bytes is not None:
            assert ready["max_upload_bytes"] == plan.max_upload_bytes
    with pytest.raises(LabkitError, match="grpcio"):
        serve_argv(replace(plan, stream_idle_s=5.0), "go")  # labkit-go has no such flag: refused, not dropped


@pytest.mark.parametrize("impl", ["python", "go"])
def test_each_echo_client_makes_the_calls_its_plan_says(impl, go_server):
    plan = CallPlan(target=f"127.0.0.1:{go_server['port']}", sizes=(10, 2000, 30000), repeats=3, gap_s=0.0, warmup=2,
                    seed=7, order="shuffled", keepalive_ms=1000, tcp_info=True, timeout_s=10.0,
                    grpc_options=("compression=gzip",))
    with HOST.start(local_labkit_argv(*call_argv(plan, impl))) as proc:
        rows = list(json_events(proc))
        assert proc.wait() == 0, proc.last_words()
    expected = [size for recorded, size in call_schedule(plan.sizes, plan.repeats, plan.warmup, shuffle=True,
                                                         seed=plan.seed) if recorded]
    assert [row["payload_bytes"] for row in rows] == expected and sorted(expected) != expected
    assert [row["seq"] for row in rows] == list(range(9)) and all(row["ok"] for row in rows)
    assert not any(row["cold"] for row in rows)  # the warm-up calls opened the channel
    assert all(row["background"] is None and set(TCP_COLUMNS) <= set(row) for row in rows)
    assert summary_counts(" ".join(proc.stderr_lines)) == {"recorded": 9, "warmup": 2, "background": 0}


@pytest.mark.parametrize("impl", ["python", "go"])
def test_the_largest_payload_a_sweep_allows_is_echoed_and_the_next_kibibyte_is_refused(impl, go_server):
    """A sweep's, load's and the demo's sizes stop at MAX_ECHO_PAYLOAD_BYTES: the echo server and clients keep gRPC's
    default 4 MiB bound (a sweep allowed 64 MiB, whose every call above 4 MiB failed)."""
    plan = CallPlan(target=f"127.0.0.1:{go_server['port']}",
                    sizes=(MAX_ECHO_PAYLOAD_BYTES, MAX_ECHO_PAYLOAD_BYTES + 1024), repeats=1, gap_s=0.0, timeout_s=30.0)
    with HOST.start(local_labkit_argv(*call_argv(plan, impl))) as proc:
        rows = list(json_events(proc))
        proc.wait()
    assert [(row["payload_bytes"], row["ok"]) for row in rows] == [(MAX_ECHO_PAYLOAD_BYTES, True),
                                                                   (MAX_ECHO_PAYLOAD_BYTES + 1024, False)]
    assert rows[1]["grpc_code"] == "RESOURCE_EXHAUSTED"


def test_the_go_client_takes_its_plan_at_the_bounds(go_server):
    target = f"127.0.0.1:{go_server['port']}"
    # Every duration and the repeats at their upper bound: the first call comes at once, its row names the
    # background gap; the run would last for weeks, so it is stopped there.
    longest = CallPlan(target=target, sizes=(0, 1000), repeats=MAX_REPEATS, gap_s=MAX_DURATION_S,
                       background_gap_s=MAX_DURATION_S, keepalive_ms=MAX_KEEPALIVE_MS, timeout_s=MAX_DURATION_S)
    with HOST.start(local_labkit_argv(*call_argv(longest, "go"))) as proc:
        first = next(json_events(proc))
    assert (first["seq"], first["payload_bytes"], first["ok"], first["background"]) == (0, 0, True, MAX_DURATION_S)
    # The shortest gap and background gap (1 ns, written without an exponent), and the shortest keepalive.
    shortest = CallPlan(target=target, sizes=(1,), repeats=2, gap_s=1e-09, background_gap_s=1e-09, keepalive_ms=1,
                        timeout_s=10.0)
    with HOST.start(local_labkit_argv(*call_argv(shortest, "go"))) as proc:
        rows = list(json_events(proc))
        assert proc.wait() == 0, proc.last_words()
    assert [(row["seq"], row["background"]) for row in rows] == [(0, 1e-09), (1, 1e-09)]
    # The warm-up at its bound.
    warmed = CallPlan(target=target, sizes=(1,), repeats=1, gap_s=0.0, warmup=MAX_WARMUP, timeout_s=10.0)
    with HOST.start(local_labkit_argv(*call_argv(warmed, "go"))) as proc:
        assert len(list(json_events(proc, timeout=120))) == 1
        assert proc.wait() == 0, proc.last_words()
    assert summary_counts(" ".join(proc.stderr_lines))["warmup"] == MAX_WARMUP


@pytest.mark.parametrize("impl", ["python", "go"])
def test_each_series_agent_runs_the_ticks_its_plan_says(impl, go_server):
    plan = SeriesPlan(address="127.0.0.1", grpc_port=go_server["port"], tcp_echo_port=go_server["tcp_echo_port"],
                      probes=("echo-warm", "tcp-echo", "tcp-connect"), first_tick=5, ticks=2, interval_s=0.05,
                      payload_bytes=100, timeout_s=2.0, spread=False)
    with HOST.start(local_labkit_argv(*series_argv(plan, impl))) as proc:
        events = list(json_events(proc))
        assert proc.wait() == 0, proc.last_words()
    start = next(event for event in events if event["event"] == "start")
    assert ({key: start[key] for key in ("first_tick", "ticks", "interval_s", "probes", "offsets_s", "payload_bytes")}
            == {"first_tick": 5, "ticks": 2, "interval_s": 0.05, "probes": list(plan.probes),
                "offsets_s": dict.fromkeys(plan.probes, 0.0), "payload_bytes": 100})
    samples = sorted((e["probe"], e["tick"]) for e in events if e["event"] == "sample")
    assert samples == sorted((probe, tick) for probe in plan.probes for tick in (5, 6))


@pytest.mark.parametrize("impl", ["python", "go"])
def test_each_series_agent_takes_its_plan_at_the_bounds(impl, go_server):
    plan = SeriesPlan(address="127.0.0.1", grpc_port=go_server["port"], tcp_echo_port=go_server["tcp_echo_port"],
                      probes=("echo-warm", "tcp-connect"), first_tick=MAX_TICKS, ticks=MAX_TICKS,
                      interval_s=MAX_SERIES_INTERVAL_S, timeout_s=MAX_SERIES_INTERVAL_S,
                      payload_bytes=MAX_SERIES_PAYLOAD_BYTES)
    with HOST.start(local_labkit_argv(*series_argv(plan, impl))) as proc:
        start = next(event for event in json_events(proc) if event["event"] == "start")
    assert ({key: start[key] for key in ("first_tick", "ticks", "interval_s", "offsets_s", "payload_bytes")}
            == {"first_tick": MAX_TICKS, "ticks": MAX_TICKS, "interval_s": MAX_SERIES_INTERVAL_S,
                "offsets_s": {"echo-warm": 0.0, "tcp-connect": MAX_SERIES_INTERVAL_S / 2},
                "payload_bytes": MAX_SERIES_PAYLOAD_BYTES})


@pytest.fixture(scope="module")
def upload_file(tmp_path_factory) -> dict:
    """The upload's file, generated by ``upload-file`` of labkit, and the same plan's file from labkit-go."""
    directory = tmp_path_factory.mktemp("upload")
    plan = UploadFilePlan(path=str(directory / "generated.bin"), size=10_500, seed=3)
    made = subprocess.run(local_labkit_argv(*upload_file_argv(plan)), capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    facts = json.loads(made.stdout)
    # labkit-go's twin reads the same flags: hashing the file, and generating the same bytes elsewhere.
    go_plans = (replace(plan, size=None), replace(plan, path=str(directory / "by-go.bin")))
    for go_plan in go_plans:
        argv = upload_file_argv(go_plan)
        go = subprocess.run([str(GO_BINARY), *argv[1:]], capture_output=True, text=True, timeout=60)
        assert go.returncode == 0, go.stderr
        assert {k: json.loads(go.stdout)[k] for k in ("bytes", "sha256")} == {k: facts[k] for k in ("bytes", "sha256")}
    assert hashlib.sha256(Path(plan.path).read_bytes()).hexdigest() == facts["sha256"]
    return facts


@pytest.mark.parametrize("impl", ["python", "go"])
@pytest.mark.parametrize("transport", ["grpc", "http2"])
def test_each_upload_agent_makes_the_uploads_its_plan_says(impl, transport, go_server, upload_file):
    port = go_server["port"] if transport == "grpc" else go_server["http2_port"]
    plan = UploadPlan(transport=transport, target=f"127.0.0.1:{port}", file=upload_file["path"],
                      sha256=upload_file["sha256"], chunk_size=1000, repeats=2, warmup=1, timeout_s=30.0,
                      grpc_options=("initial-window=1MiB",) if transport == "grpc" else ())
    with HOST.start(local_labkit_argv(*upload_argv(plan, impl))) as proc:
        events = list(json_events(proc))
        assert proc.wait() == 0, proc.last_words()
    ready, *uploads = events
    assert (ready["event"], ready["transport"], ready["target"]) == ("ready", transport, plan.target)
    assert [(u["seq"], u["ok"], u["bytes_sent"], u["chunks"]) for u in uploads] == [
        (seq, True, upload_file["bytes"], math.ceil(upload_file["bytes"] / plan.chunk_size)) for seq in range(2)]


@pytest.mark.parametrize("impl", ["python", "go"])
def test_an_upload_agent_refuses_a_file_without_an_end_in_one_line(impl, go_server):
    """--file /dev/zero: the Python agent read it whole (without end, growing); both refuse it before a byte."""
    plan = UploadPlan(transport="grpc", target=f"127.0.0.1:{go_server['port']}", file="/dev/zero", chunk_size=1000,
                      repeats=1, timeout_s=30.0)
    with HOST.start(local_labkit_argv(*upload_argv(plan, impl))) as proc:
        assert list(json_events(proc)) == [] and proc.wait(timeout=30) == 2
    assert len(proc.stderr_lines) == 1 and "/dev/zero is not a regular file" in proc.stderr_lines[0], proc.stderr_lines


def test_an_agent_that_says_nothing_is_named_by_its_command_not_its_last_flag(upload_file):
    """The watchdog's line names the agent (it named the argv's last word, a deadline's ``3.0s``): an upload agent
    whose server's port takes the connection but never speaks HTTP/2 prints nothing while it waits for it."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        plan = UploadPlan(transport="grpc", target=f"127.0.0.1:{listener.getsockname()[1]}", file=upload_file["path"],
                          sha256=upload_file["sha256"], chunk_size=1000, repeats=1, timeout_s=60.0)
        with HOST.start(local_labkit_argv(*upload_argv(plan, "python"))) as proc:
            with pytest.raises(Silent) as silent:
                next(proc.lines(timeout=0.5))
    assert str(silent.value) == "no output from `labkit echo upload-agent` for 0.5 s"
    assert command_name(["/opt/labkit/bin/labkit-go", "upload", "-target", "h:1", "-timeout", "3s"]) == "labkit-go upload"


def test_the_go_upload_agent_takes_its_plan_at_the_bounds(go_server, upload_file):
    plan = UploadPlan(transport="grpc", target=f"127.0.0.1:{go_server['port']}", file=upload_file["path"],
                      chunk_size=MAX_REQUEST_BYTES, repeats=MAX_REPEATS, warmup=MAX_WARMUP, timeout_s=MAX_DURATION_S,
                      declare_length=upload_file["bytes"] + 1)
    with HOST.start(local_labkit_argv(*upload_argv(plan, "go"))) as proc:
        events = json_events(proc, timeout=120)
        assert next(events)["event"] == "ready"  # after the warm-up's uploads
        first = next(events)
    # One chunk (the whole file), and the declared length the server checks against what came.
    assert (first["seq"], first["chunks"], first["bytes_sent"], first["ok"]) == (0, 1, upload_file["bytes"], False)
    assert f"expected {plan.declare_length} bytes" in first["error"]


def test_the_hop_services_run_as_their_plans_say(tmp_path, pki):
    body = tmp_path / "body.json"
    body.write_bytes(b'{"products": ["plans"]}')
    back_plan = BackPlan(bind="127.0.0.1:0", body_file=str(body), tls_cert=pki["cert"], tls_key=pki["key"],
                         nats_workers=MAX_NATS_WORKERS, grace_s=MAX_DURATION_S)
    with HOST.start([str(GO_BINARY), *back_argv(back_plan)]) as back_proc:
        back = wait_until_ready(back_proc, timeout=30)
        assert (back["role"], back["bind"], back["body_bytes"]) == ("back", back_plan.bind, body.stat().st_size)
        assert back["body_sha256"] == hashlib.sha256(body.read_bytes()).hexdigest()
        assert back["grpc_port"] > 0 and back["tls_port"] > 0
        front_plan = FrontPlan(bind="127.0.0.1:0", back_grpc=f"127.0.0.1:{back['grpc_port']}",
                               grpc_channels=MAX_GRPC_CHANNELS, back_http2=f"http://127.0.0.1:{back['http_port']}",
                               back_http2_tls=f"https://127.0.0.1:{back['tls_port']}", back_ca=pki["ca"],
                               timeout_s=MAX_DURATION_S, grace_s=0.5)
        with HOST.start([str(GO_BINARY), *front_argv(front_plan)]) as front_proc:
            front = wait_until_ready(front_proc, timeout=60)
    assert (front["role"], front["bind"], front["grpc_channels"]) == ("front", front_plan.bind, MAX_GRPC_CHANNELS)
    assert front["body_sha256"] == dict.fromkeys(["grpc", "http2", "http2-tls"], back["body_sha256"])


# -- no experiment writes an agent's command line itself --------------------------------------------
#: Calls that take a command line word by word (a host's or a session's starters, labkit's argv) or grow one.
ARGV_CALLS = {"start", "run", "start_labkit", "run_labkit", "agent", "start_echo_server", "labkit_argv",
              "local_labkit_argv", "append", "extend", "insert"}


def agent_flags() -> set[str]:
    """Every flag of every agent: the ``labkit echo`` commands' (click), and labkit-go's back, front and dead-peer
    (their -h)."""
    flags = {opt for command in PLAN_OF for param in echo.commands[command].params
             for opt in (*param.opts, *param.secondary_opts) if opt.startswith("--") and opt != "--help"}
    for service in ("back", "front", "dead-peer"):
        usage = subprocess.run([str(GO_BINARY), service, "-h"], capture_output=True, text=True, timeout=30).stderr
        flags |= {f"--{name}" for name in re.findall(r"^\s+-([a-z0-9-]+)", usage, re.MULTILINE)}
    return flags


def hand_written_flags(source: str, flags: set[str]) -> list[tuple[int, str]]:
    """(line, flag) of each agent flag written into a command line: a list or tuple of words, or an argument of a
    call that starts or grows one. (A flag named in a message or a file's label is neither.)"""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.List, ast.Tuple)):
            words = node.elts
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in ARGV_CALLS:
            words = node.args
        else:
            continue
        found += [(word.lineno, word.value) for word in words
                  if isinstance(word, ast.Constant) and word.value in flags]
    return found


def test_no_experiment_assembles_an_agents_command_line_by_hand():
    flags = agent_flags()
    assert {"--target", "--sizes", "--bind", "--address", "--transport", "--path", "--back-grpc"} <= flags
    # The check finds a command line written the old way (experiments/sweep.py's, before its builder).
    assert hand_written_flags('args = ["echo", "call", "--target", target, "--tcp-info"]', flags) == [
        (1, "--target"), (1, "--tcp-info")]
    assert hand_written_flags('session.run_labkit(src, "echo", "upload-file", "--path", remote)', flags) == [
        (1, "--path")]
    modules = [*sorted((REPO / "labkit" / "experiments").glob("*.py")), REPO / "labkit" / "echo" / "remote.py"]
    written = {str(path.relative_to(REPO)): found for path in modules
               if (found := hand_written_flags(path.read_text(), flags))}
    assert written == {}, "build these with the agent's builder in labkit/echo/plans.py"

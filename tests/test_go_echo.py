"""labkit-go, the grpc-go twin of `labkit echo`, against the Python echo: every RPC both ways, on real sockets.

Servers and clients are the real console scripts: ``labkit echo serve|call
--impl go`` execs ``labkit-go`` (built by scripts/bootstrap.sh into the venv).
Interop is checked in both directions for Echo, EchoStream, Upload, the
HTTP/2 endpoint and the raw TCP echo; reflection, health and ghz against the
Go server; and the same one-line errors, signals and bounds as the Python echo.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import time

import grpc
import pytest

from conftest import wait_for
from test_echo import ServerProcess, _write_test_pki, call, labkit, start_echo_server, summary_counts  # noqa: F401

from labkit.echo.http2 import Http2Client
from labkit.echo.tcp_echo import TcpEchoClient
from labkit.echo.plans import warmup_seconds
from labkit.echo.tcpinfo import TCP_COLUMNS
from labkit.hosts.layout import local_tool
from labkit.proto import echo_pb2, echo_pb2_grpc

GO_BINARY = local_tool("labkit-go")


@pytest.fixture(scope="module", autouse=True)
def _labkit_go_is_built():
    assert GO_BINARY is not None, "labkit-go is not built: run scripts/bootstrap.sh"


@pytest.fixture
def start_server(start_echo_server):
    """Factory: a server of the given implementation with extra flags; every one is stopped at teardown."""
    return lambda impl, *args: start_echo_server("--impl", impl, *args)


@pytest.fixture(scope="module")
def go_server():
    process = ServerProcess("--impl", "go", "--tcp-echo-port", "0", "--http2-port", "0")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def python_server():
    process = ServerProcess("--tcp-echo-port", "0", "--http2-port", "0")
    try:
        yield process
    finally:
        process.stop()


def test_the_go_server_says_what_it_is_in_the_same_ready_line(go_server, python_server):
    go, python = go_server.ready, python_server.ready
    assert go["impl"] == "go" and python["impl"] == "python"
    assert go["grpc_go_version"].startswith("1.") and go["go_version"].startswith("go")
    shared = {"event", "port", "bind", "pid", "tls", "reflection", "max_message_bytes", "labkit_version", "impl",
              "grpc_options", "tcp_echo_port", "http2_port", "max_upload_bytes", "http2_window_bytes"}
    assert shared <= set(go) and shared <= set(python)
    assert go["labkit_version"] == python["labkit_version"]
    assert (go["max_message_bytes"], go["max_upload_bytes"]) == (python["max_message_bytes"], python["max_upload_bytes"])


@pytest.mark.parametrize("client_impl, server", [("python", "go_server"), ("go", "python_server"), ("go", "go_server"),
                                                 ("python", "python_server")])
def test_echo_calls_across_implementations(client_impl, server, request):
    target = request.getfixturevalue(server).target
    rows, stderr = call(target, "--impl", client_impl, "--sizes", "0,1000,70000", "--repeats", "2", "--gap", "0",
                        "--warmup", "1")
    assert [(r["seq"], r["payload_bytes"], r["ok"], r["grpc_code"]) for r in rows] == [
        (i, size, True, "OK") for i, size in enumerate([0, 0, 1000, 1000, 70000, 70000])]
    assert all(r["cold"] is False and r["background"] is None and r["rtt_ns"] > 0 for r in rows)
    # Each server's own time on the call came back in its trailer: part of the call's time, never all of it.
    assert all(isinstance(r["server_ns"], int) and 0 <= r["server_ns"] < r["rtt_ns"] for r in rows)
    # And its wall clock when the request was in and when the reply left: on loopback's one clock, inside the call's
    # window on the client's (to the µs that the client's reading of its two clocks at the start may be off).
    slack = 1_000_000
    for r in rows:
        start, end = r["t_start_utc_ns"], r["t_start_utc_ns"] + r["rtt_ns"]
        assert start - slack <= r["server_recv_utc_ns"] <= r["server_send_utc_ns"] <= end + slack, r
        assert r["server_send_utc_ns"] - r["server_recv_utc_ns"] == r["server_ns"]
    assert summary_counts(stderr) == {"recorded": 6, "warmup": 1, "background": 0}
    # The warm-up call's own time (its connection set up in it), as a sweep reads it back from either client.
    assert 0 < warmup_seconds(stderr.splitlines()) < 30


def test_the_go_client_reads_tcp_info_of_its_own_connection(python_server):
    rows, _ = call(python_server.target, "--impl", "go", "--sizes", "20000", "--repeats", "3", "--gap", "0", "--tcp-info")
    assert set(TCP_COLUMNS) <= set(rows[0])
    first, later = rows[0], rows[1:]
    # The first call opened the connection: nothing to read before it.
    assert first["cold"] is True and first["cwnd_before"] is None and first["cwnd_after"] > 0
    for row in later:
        assert row["cwnd_before"] > 0 and row["mss"] > 0 and row["tcp_cc"]
        assert row["srtt_ms_before"] > 0 and row["rto_ms_before"] >= 200
        # 20000 B went out and came back acknowledged within the call.
        assert row["bytes_acked_after"] - row["bytes_acked_before"] > 20000


def test_cold_go_calls_open_a_connection_each(python_server):
    rows, _ = call(python_server.target, "--impl", "go", "--sizes", "10", "--repeats", "3", "--gap", "0", "--cold",
                   "--tcp-info")
    assert [r["cold"] for r in rows] == [True, True, True]
    assert all(r["cwnd_before"] is None and r["cwnd_after"] > 0 for r in rows)


def test_the_go_background_sender_runs_during_gaps(python_server):
    rows, stderr = call(python_server.target, "--impl", "go", "--sizes", "10", "--repeats", "3", "--gap", "0.3s",
                        "--background-gap", "50ms")
    assert [r["background"] for r in rows] == [0.05] * 3
    assert summary_counts(stderr)["background"] >= 5


def test_a_pool_spreads_go_calls_over_its_connections(python_server):
    rows, _ = call(python_server.target, "--impl", "go", "--sizes", "10", "--repeats", "6", "--gap", "0",
                   "--grpc-option", "pool=3")
    # Each of the three connections is new on its first call, then warm.
    assert [r["cold"] for r in rows] == [True, True, True, False, False, False]


@pytest.mark.parametrize("server", ["go_server", "python_server"])
def test_stream_and_upload_with_grpcio_against_both_servers(server, request):
    target = request.getfixturevalue(server).target
    chunks = [os.urandom(size) for size in (16, 1024, 32 * 1024, 0, 7)]
    data = b"".join(chunks)
    with grpc.insecure_channel(target) as channel:
        stub = echo_pb2_grpc.EchoServiceStub(channel)
        lengths = [r.payload_length for r in stub.EchoStream(iter(echo_pb2.EchoRequest(payload=b"x" * n) for n in (0, 5, 14000)),
                                                             timeout=10)]
        status, upload = stub.Upload.with_call(iter(echo_pb2.Chunk(content=c) for c in chunks), timeout=10,
                                              metadata=[("labkit-expected-length", str(len(data))),
                                                        ("labkit-expected-sha256", hashlib.sha256(data).hexdigest())])
        wrong = stub.Upload(iter([echo_pb2.Chunk(content=b"abc")]), timeout=10, metadata=[("labkit-expected-length", "4")])
    assert lengths == [0, 5, 14000]
    assert (status.code, status.bytes_received, status.sha256) == (echo_pb2.OK, len(data), hashlib.sha256(data).hexdigest())
    trailer = dict(upload.trailing_metadata())
    assert float(trailer["labkit-server-cpu-s"]) >= 0 and "labkit-server-cpu-user-s" in trailer
    assert wrong.code == echo_pb2.FAILED and wrong.message == "expected 4 bytes, received 3"


@pytest.mark.parametrize("server", ["go_server", "python_server"])
def test_both_servers_serve_standard_health(server, request):
    # Reflection is checked for both implementations in test_echo.py.
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(request.getfixturevalue(server).target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "echo.EchoService"):
            health = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert health.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as unknown:
            stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=5)
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


def test_ghz_finds_and_loads_the_go_server_by_reflection(go_server):
    ghz = local_tool("ghz")
    assert ghz is not None, "ghz is not built: run scripts/bootstrap.sh"
    result = subprocess.run([str(ghz), "--insecure", "--call", "echo.EchoService.Echo", "-d", '{"payload": "aGVsbG8="}',
                             "-n", "200", "-c", "4", "--format", "json", go_server.target],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["count"] == 200 and report["statusCodeDistribution"] == {"OK": 200}


@pytest.mark.parametrize("server", ["go_server", "python_server"])
def test_grpcurl_lists_describes_and_calls_by_reflection(server, request):
    grpcurl = local_tool("grpcurl")
    assert grpcurl is not None, "grpcurl is not built: run scripts/bootstrap.sh"
    target = request.getfixturevalue(server).target

    def grpcurl_run(*args: str) -> str:
        result = subprocess.run([str(grpcurl), "-plaintext", *args], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout

    assert {"echo.EchoService", "grpc.health.v1.Health"} <= set(grpcurl_run(target, "list").split())
    described = grpcurl_run(target, "describe", "echo.EchoService")
    assert "rpc Echo ( .echo.EchoRequest ) returns ( .echo.EchoResponse );" in described
    assert "rpc Upload ( stream .echo.Chunk ) returns ( .echo.UploadStatus );" in described
    # protobuf's JSON mapping: bytes as base64, an int64 as a string. The field's name is its JSON name where the
    # server's reflection carries one (grpc-go's generated descriptors do), else its proto name (grpcio's do not).
    reply = grpcurl_run("-d", '{"payload": "aGVsbG8="}', target, "echo.EchoService/Echo")
    name = "payloadLength" if server == "go_server" else "payload_length"
    assert json.loads(reply) == {name: "5"}


@pytest.mark.parametrize("server", ["go_server", "python_server"])
def test_http2_echo_and_upload_with_labkits_client(server, request):
    ready = request.getfixturevalue(server).ready
    data = os.urandom(300_000)
    with Http2Client(f"127.0.0.1:{ready['http2_port']}") as client:
        echoed = client.post("/echo", [b"x" * 1234], length=1234)
        good = client.upload([data[:100_000], data[100_000:]], length=len(data),
                             expected_sha256=hashlib.sha256(data).hexdigest())
        bad = client.upload([data[:10]], length=10, declared_length=11)
    assert (echoed.status, echoed.json()) == (200, {"payload_length": 1234})
    body = good.json()
    assert good.status == 200 and (body["bytes_received"], body["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
    assert body["server_cpu_s"] >= 0
    assert bad.status == 422 and bad.json()["error"] == "expected 11 bytes, received 10"


def test_go_http2_refuses_an_upload_over_its_bound(start_server):
    server = start_server("go", "--http2-port", "0", "--max-upload-bytes", "1000")
    with Http2Client(f"127.0.0.1:{server.ready['http2_port']}") as client:
        reply = client.upload([b"y" * 5000], length=5000)
        after = client.post("/echo", [b"z"], length=1)
    assert reply.status == 413 and reply.json()["max_upload_bytes"] == 1000
    assert after.status == 200  # and it goes on serving


def test_the_go_tcp_echo_answers_lengths_and_refuses_oversize(start_server):
    server = start_server("go", "--tcp-echo-port", "0", "--max-message-bytes", "2000")
    with TcpEchoClient("127.0.0.1", server.ready["tcp_echo_port"]) as client:
        before = time.time_ns()
        replies = [client.call(b"a" * 1000), client.call(b"")]
        after = time.time_ns()
    # Its reply carries the server's wall clock as the Python server's does: received, then sent, in order.
    stamps = [stamp for reply in replies for stamp in (reply.server.recv_utc_ns, reply.server.send_utc_ns)]
    assert before <= stamps[0] and stamps == sorted(stamps) and stamps[-1] <= after, stamps
    with socket.create_connection(("127.0.0.1", server.ready["tcp_echo_port"]), timeout=5) as sock:
        sock.sendall((5000).to_bytes(4, "big"))
        assert sock.recv(4) == b""  # closed without an answer
    assert server.proc.poll() is None


def test_oversize_grpc_message_is_refused_by_the_go_server(start_server):
    server = start_server("go", "--max-message-bytes", "2000")
    rows, _ = call(server.target, "--sizes", "1000,5000,1000", "--repeats", "1", "--gap", "0")
    assert [(r["ok"], r["grpc_code"]) for r in rows] == [(True, "OK"), (False, "RESOURCE_EXHAUSTED"), (True, "OK")]


def test_tls_between_implementations(start_server, tmp_path):
    ca, cert, key = _write_test_pki(tmp_path)
    server = start_server("go", "--tls-cert", str(cert), "--tls-key", str(key))
    assert server.ready["tls"] is True
    for impl in ("python", "go"):
        rows, _ = call(server.target, "--impl", impl, "--sizes", "1000", "--repeats", "2", "--gap", "0", "--tls-ca", str(ca))
        assert [r["ok"] for r in rows] == [True, True], impl
    rows, _ = call(server.target, "--impl", "go", "--sizes", "10", "--repeats", "1", "--timeout", "5s", status=1)
    assert rows[0]["ok"] is False and rows[0]["grpc_code"] == "UNAVAILABLE"


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_signals_stop_the_go_server_also_when_sigint_was_ignored(stop_signal):
    # A script's background job starts with SIGINT ignored: the server must install its own handler.
    server = ServerProcess("--impl", "go", preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        server.proc.send_signal(stop_signal)
        assert server.proc.wait(timeout=10) == 0
        assert f"stopped on {stop_signal.name}" in server.proc.stderr.read()
        with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", server.port), timeout=5):
            pass
    finally:
        server.stop()


def test_grpc_options_reach_the_go_server_and_client(start_server, python_server):
    server = start_server("go", "--grpc-option", "static-stream-window=32MiB", "--grpc-option", "keepalive-min-time=1s")
    assert server.ready["grpc_options"] == {"static-stream-window": 32 * 2**20, "keepalive-min-time": 1000}
    rows, _ = call(server.target, "--impl", "go", "--sizes", "100000", "--repeats", "2", "--gap", "0",
                   "--grpc-option", "static-stream-window=32MiB", "--grpc-option", "compression=gzip")
    assert all(r["ok"] for r in rows)
    # grpcio has no static windows: the Python server refuses what it cannot set, with one line.
    refused = labkit("echo", "serve", "--bind", "127.0.0.1:0", "--grpc-option", "static-stream-window=32MiB")
    assert refused.returncode == 2 and "use --impl go" in refused.stderr


def test_codec_vtproto_talks_to_grpcio_on_either_side(start_server, python_server):
    """codec=vtproto changes only how grpc-go makes the bytes (vtprotobuf's generated code), not the bytes nor the
    content-type: a Go server given it answers the Python client, and a Go client given it calls the Python server."""
    sizes = [0, 1, 64, 128 * 1024]
    server = start_server("go", "--grpc-option", "codec=vtproto")
    assert server.ready["grpc_options"] == {"codec": "vtproto"}
    for target, impl in ((server.target, "python"), (python_server.target, "go")):
        extra = ("--grpc-option", "codec=vtproto") if impl == "go" else ()
        rows, stderr = call(target, "--impl", impl, "--sizes", ",".join(map(str, sizes)), "--repeats", "1",
                            "--gap", "0", *extra)
        assert sorted((row["payload_bytes"], row["ok"]) for row in rows) == [(size, True) for size in sizes], stderr


@pytest.mark.parametrize("args, message", [
    (["serve", "--bind", "127.0.0.1:0", "--grpc-option", "pool=2"], "is a client option, not a server one"),
    (["serve", "--bind", "127.0.0.1:0", "--grpc-option", "bogus=1"], "unknown; known:"),
    (["call", "--target", "127.0.0.1:1", "--sizes", "10", "--grpc-option", "max-concurrent-streams=4"], "not a client one"),
    (["call", "--target", "127.0.0.1:1", "--sizes", "10,abc"], "--sizes"),
    (["call", "--target", "127.0.0.1:1", "--sizes", "10", "--cold", "--background-gap", "1s"], "one shared channel"),
    (["serve", "--bind", "nope"], "not HOST:PORT"),
    (["serve", "--bind", "192.0.2.1:0"], "cannot listen on 192.0.2.1:0"),
    (["serve", "--bind", "127.0.0.1:0", "--tls-cert", "x.pem"], "go together"),
    (["serve", "--bogus"], "flag provided but not defined"),
    (["serve", "--bind", ":0"], "not HOST:PORT"),
    (["serve", "--bind", "127.0.0.1:0", "--tcp-echo-port", "70000"], "out of range"),
    (["serve", "--bind", "127.0.0.1:0", "--grpc-option", "read-buffer=4096MiB"], "larger than grpc-go takes"),
    (["call", "--target", "127.0.0.1:0", "--sizes", "10"], "out of range [1, 65535]"),
    (["call", "--target", "127.0.0.1:1", "--sizes", "10", "--grpc-option", "keepalive-time=1s"], "client minimum of 10s"),
    (["serve", "--bind", "127.0.0.1:0", "--grpc-option", "initial-window=1000"], "which grpc-go ignores"),
    (["call", "--target", "127.0.0.1:1", "--sizes", "10", "--keepalive-ms", "0"], "must be between 1 and 3600000"),
    (["call", "--target", "127.0.0.1:1", "--sizes", "10", "--timeout", "9999999999999h"], "too long"),
    (["series-agent", "--address", "127.0.0.1", "--probes", "tcp-echo", "--tcp-echo-port", "1", "--ticks", "1",
      "--interval", "1s", "--payload-bytes", "-1"], "--payload-bytes -1 is out of range"),
    (["upload-file", "--path", "/nonexistent/labkit/file"], "cannot read /nonexistent/labkit/file"),
    (["grpc-load", "--target", "x:y:z"], "is not HOST:PORT"),
    (["grpc-load", "--target", "127.0.0.1:1", "--payload-file", "/nonexistent/labkit/payload"],
     "grpc-load: --payload-file: cannot read /nonexistent/labkit/payload"),
], ids=["server-takes-no-pool", "unknown-option", "client-takes-no-streams-limit", "bad-size", "cold-with-background",
        "bind-no-port", "bind-not-local", "cert-without-key", "unknown-flag", "bind-no-host", "side-port-range",
        "buffer-beyond-int32", "target-port-zero", "keepalive-below-floor", "window-below-floor", "keepalive-zero",
        "duration-overflow", "negative-payload", "missing-file", "grpcload-target-not-host-port", "grpcload-missing-payload"])
def test_bad_input_to_labkit_go_is_one_line_and_exit_2(args, message):
    result = subprocess.run([str(GO_BINARY), *args], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.stderr


def test_grpc_load_keeps_the_answers_of_streams_cut_short_by_sigterm(go_server, tmp_path):
    from labkit.experiments.load import grpcload_cell_stats
    from labkit.parsers.grpcload import parse_grpcload_csv

    # Streams far longer than the test: SIGTERM comes while every call is still in flight.
    out = tmp_path / "load.csv"
    load = subprocess.Popen([str(GO_BINARY), "grpc-load", "-target", go_server.target, "-rpc", "stream",
                             "-stream-messages", "100000", "-concurrency", "4", "-duration", "10m", "-timeout", "10m",
                             "-out", str(out)], stderr=subprocess.PIPE, text=True)
    try:
        # Rows reach the file as answers arrive, past its 64 KiB write buffer.
        wait_for(lambda: out.exists() and out.stat().st_size > 0, 60, "grpc-load's rows in its CSV")
        load.send_signal(signal.SIGTERM)
        _, stderr = load.communicate(timeout=30)
    finally:
        if load.poll() is None:
            load.kill()
            load.communicate()
    assert load.returncode == 128 + signal.SIGTERM, stderr
    result = parse_grpcload_csv(out.read_text())
    rows = result.rows
    assert result.counts["unrecognised"] == 0 and len(rows) > 0
    summary = stderr.strip().splitlines()[-1]
    assert summary.startswith("labkit-go grpc-load: interrupted by SIGTERM after ")
    assert f" {len(rows)} messages, {len(rows)} ok," in summary, summary
    # The calls SIGTERM cut short kept every answer they had, in order, without an end they never had.
    cut_short = rows[rows["call_latency_ms"].isna()]
    assert len(cut_short) > 0 and cut_short["ok"].all() and cut_short["code"].isna().all()
    for _, call in cut_short.groupby(["worker", "call"]):
        assert call["message"].tolist() == list(range(len(call)))
    # A cell's numbers from it: its answers are messages, but a call without an end is no call's latency.
    stats = grpcload_cell_stats(out.read_text(), 0.0, 600.0)
    ended = rows.loc[rows["call_latency_ms"].notna()].groupby(["worker", "call"]).ngroups
    assert stats["messages"] == stats["messages_ok"] == len(rows) and stats["requests"] == ended
    assert stats["message_p50_ms"] > 0 and "None" not in stats["status_codes"]


@pytest.mark.parametrize("transport", ["grpc", "http2"])
@pytest.mark.parametrize("agent, server", [("go", "python_server"), ("python", "go_server"), ("go", "go_server")])
def test_uploads_across_implementations(agent, server, transport, request, tmp_path):
    ready = request.getfixturevalue(server).ready
    data = os.urandom(300_000)
    path = tmp_path / "file.bin"
    path.write_bytes(data)
    port = ready["port"] if transport == "grpc" else ready["http2_port"]
    result = labkit("echo", "upload-agent", "--impl", agent, "--transport", transport, "--target", f"127.0.0.1:{port}",
                    "--file", str(path), "--sha256", hashlib.sha256(data).hexdigest(), "--chunk-size", "1024",
                    "--repeats", "2", timeout_s=60)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[0]["event"] == "ready" and lines[0]["transport"] == transport
    uploads = lines[1:]
    assert [(u["seq"], u["ok"], u["bytes_acked"], u["chunks"]) for u in uploads] == [(0, True, 300_000, 293), (1, True, 300_000, 293)]
    assert all(u["mb_per_s"] > 0 and u["server_cpu_s"] >= 0 and u["client_cpu_s"] >= 0 for u in uploads)
    # A length declared wrong is caught by the server, and the row says so.
    wrong = labkit("echo", "upload-agent", "--impl", agent, "--transport", transport, "--target", f"127.0.0.1:{port}",
                   "--file", str(path), "--chunk-size", "65536", "--declare-length", "5", timeout_s=60)
    row = json.loads(wrong.stdout.splitlines()[-1])
    assert row["ok"] is False and "expected 5 bytes, received 300000" in row["error"]


def test_subcommands_without_a_go_twin_refuse_impl_go(tmp_path):
    result = labkit("echo", "upload-file", "--impl", "go", "--path", str(tmp_path / "f"), "--size", "10")
    assert result.returncode == 2 and "--impl" in result.stderr


@pytest.mark.parametrize("server", ["go_server", "python_server"])
def test_the_go_series_agent_reports_every_tick_of_every_probe(server, request):
    from labkit.echo.plans import PROBES
    from labkit.experiments.series import ping_rows

    ready = request.getfixturevalue(server).ready
    result = labkit("echo", "series-agent", "--impl", "go", "--address", "127.0.0.1", "--grpc-port", str(ready["port"]),
                    "--tcp-echo-port", str(ready["tcp_echo_port"]), "--probes", ",".join(PROBES), "--first-tick", "20",
                    "--ticks", "3", "--interval", "0.2s", "--payload-bytes", "100", "--timeout", "2s")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    start, end = events[0], events[-1]
    assert start["event"] == "start" and start["warmup"] == {"echo-warm": "", "tcp-echo": ""}
    assert end == {"event": "end", "samples": 12, "pings": 3}
    assert start["offsets_s"] == pytest.approx({"ping": 0, "echo-warm": 0.04, "echo-cold": 0.08, "tcp-echo": 0.12,
                                                "tcp-connect": 0.16})
    samples = [e for e in events if e["event"] == "sample"]
    assert sorted((e["probe"], e["tick"]) for e in samples) == sorted(
        (probe, tick) for probe in PROBES if probe != "ping" for tick in (20, 21, 22))
    assert all(e["ok"] and e["rtt_ns"] > 0 and e["error"] == "" for e in samples)
    assert {e["probe"]: e["cold"] for e in samples} == {"echo-warm": False, "echo-cold": True, "tcp-echo": False,
                                                        "tcp-connect": True}
    assert {e["payload_bytes"] for e in samples if e["probe"] != "tcp-connect"} == {100}
    pings = sorted((e for e in events if e["event"] == "ping"), key=lambda e: e["tick"])
    assert [e["tick"] for e in pings] == [20, 21, 22] and all(ping_rows(e)[0]["ok"] for e in pings)


@pytest.mark.parametrize("agent", ["python", "go"])
def test_upload_agents_take_grpc_options_for_grpc_only(agent, go_server, tmp_path):
    path = tmp_path / "file.bin"
    path.write_bytes(os.urandom(10_000))
    common = ["echo", "upload-agent", "--impl", agent, "--file", str(path), "--chunk-size", "1000",
              "--grpc-option", "initial-window=1MiB"]
    ok = labkit(*common, "--transport", "grpc", "--target", go_server.target)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout.splitlines()[-1])["ok"] is True
    refused = labkit(*common, "--transport", "http2", "--target", f"127.0.0.1:{go_server.ready['http2_port']}")
    assert refused.returncode == 2 and "--grpc-option applies to --transport grpc only" in refused.stderr
    assert len([line for line in refused.stderr.splitlines() if line.strip()]) == 1


def test_seeded_calls_are_the_same_calls_in_both_implementations(python_server):
    # CPython's generator in Go: the same seed shuffles the calls (and fills their payloads) alike.
    args = ("--sizes", "10,20,30,40", "--repeats", "3", "--gap", "0", "--order", "shuffled", "--seed", "5")
    orders = {impl: [r["payload_bytes"] for r in call(python_server.target, "--impl", impl, *args)[0]]
              for impl in ("python", "go")}
    assert orders["go"] == orders["python"] and orders["go"] != sorted(orders["go"])


def test_labkit_go_upload_file_writes_the_python_bytes(tmp_path):
    from labkit.echo.upload_agent import make_file

    python = make_file(str(tmp_path / "py.bin"), 3 * 2**20 + 3, 11)  # a last block of a partial 32-bit word
    result = subprocess.run([str(GO_BINARY), "upload-file", "--path", str(tmp_path / "go" / "go.bin"),
                             "--size", str(3 * 2**20 + 3), "--seed", "11"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    made = json.loads(result.stdout)
    assert (made["event"], made["generated"], made["bytes"], made["sha256"]) == ("file", True, python["bytes"], python["sha256"])
    again = subprocess.run([str(GO_BINARY), "upload-file", "--path", made["path"]], capture_output=True, text=True,
                           timeout=60)
    assert json.loads(again.stdout) == {"event": "file", "path": made["path"], "bytes": python["bytes"],
                                        "sha256": python["sha256"]}


@pytest.mark.parametrize("server", ["go_server", "python_server"])
def test_the_http2_endpoints_speak_http2_alike(server, request):
    port = request.getfixturevalue(server).ready["http2_port"]
    # The frame size gRPC uses too, so both transports cut a chunk into the same frames.
    with Http2Client(f"127.0.0.1:{port}") as client:
        assert client.conn.max_outbound_frame_size == 16384
        assert client.post("/nowhere", [b"x"], length=1).status == 404
    # HTTP/1.1 (an h2c upgrade included) gets 505 and a reason, not an upgrade.
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                     b"HTTP2-Settings: AAMAAABkAAQAAP__\r\nContent-Length: 0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 505") and b"speaks HTTP/2 only" in answer


@pytest.mark.parametrize("server_impl", ["go", "python"])
def test_tls_uploads_across_implementations(server_impl, start_server, tmp_path):
    ca, cert, key = _write_test_pki(tmp_path)
    server = start_server(server_impl, "--tls-cert", str(cert), "--tls-key", str(key), "--http2-port", "0")
    path = tmp_path / "file.bin"
    path.write_bytes(os.urandom(50_000))
    for agent, transport in [(a, t) for a in ("python", "go") for t in ("grpc", "http2")]:
        port = server.ready["port"] if transport == "grpc" else server.ready["http2_port"]
        result = labkit("echo", "upload-agent", "--impl", agent, "--transport", transport, "--target", f"127.0.0.1:{port}",
                        "--file", str(path), "--chunk-size", "4096", "--tls-ca", str(ca), "--warmup", "0", timeout_s=60)
        assert result.returncode == 0, (agent, transport, result.stderr)
        row = json.loads(result.stdout.splitlines()[-1])
        assert (row["ok"], row["status"], row["bytes_acked"]) == (True, "OK" if transport == "grpc" else "200", 50_000)


@pytest.mark.parametrize("transport", ["grpc", "http2"])
@pytest.mark.parametrize("agent", ["python", "go"])
def test_upload_agents_connect_before_any_upload_or_fail_in_one_line(agent, transport, tmp_path):
    path = tmp_path / "file.bin"
    path.write_bytes(b"abc")
    with socket.socket() as placeholder:  # a port nothing listens on
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    result = labkit("echo", "upload-agent", "--impl", agent, "--transport", transport, "--target", f"127.0.0.1:{port}",
                    "--file", str(path), "--chunk-size", "1", "--warmup", "0", "--timeout", "2s")
    assert result.returncode == 2 and result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot connect" in lines[0], result.stderr


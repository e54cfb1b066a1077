"""The echo service end to end: the real ``labkit`` console script, real sockets on 127.0.0.1.

Servers run as subprocesses of ``labkit echo serve --bind 127.0.0.1:0`` and are
always stopped by the fixtures, whatever the test does. Timing assertions are
lower bounds only (a slow CI machine may add time, never remove it).
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from labkit.echo import client, server
from labkit.echo.options import OPTIONS
from labkit.echo.plans import warmup_seconds
from labkit.proto import echo_pb2, echo_pb2_grpc

# The console script of the environment running the tests (.venv/bin/labkit).
_VENV_LABKIT = Path(sys.executable).with_name("labkit")
LABKIT = str(_VENV_LABKIT) if _VENV_LABKIT.exists() else shutil.which("labkit")
READY_TIMEOUT_S = 15
ROW_KEYS = set(client.ROW_FIELDS)


class ServerProcess:
    """A running ``labkit echo serve`` and what its ready line said."""

    def __init__(self, *args: str, preexec_fn=None):
        self.proc = subprocess.Popen(
            [LABKIT, "echo", "serve", "--bind", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=preexec_fn,
        )
        try:
            self.ready = json.loads(self._read_line(READY_TIMEOUT_S))
        except BaseException:
            self.stop()
            raise
        self.port = self.ready["port"]
        self.target = f"127.0.0.1:{self.port}"

    def _read_line(self, timeout_s: float) -> str:
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            if not selector.select(timeout_s):
                raise TimeoutError(f"no ready line within {timeout_s} s")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"server exited before it was ready: {self.proc.stderr.read()}")
        return line

    def stop(self) -> None:
        """Stop the server if it still runs; never leaves a process behind."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture
def start_echo_server():
    """Factory: start a server with extra ``serve`` flags; all are stopped at teardown."""
    started: list[ServerProcess] = []

    def start(*args: str) -> ServerProcess:
        started.append(ServerProcess(*args))
        return started[-1]

    try:
        yield start
    finally:
        for process in started:
            process.stop()


@pytest.fixture(scope="module")
def echo_server():
    """One default server shared by the tests that only call it."""
    process = ServerProcess()
    try:
        yield process
    finally:
        process.stop()


def labkit(*args: str, timeout_s: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([LABKIT, *args], capture_output=True, text=True, timeout=timeout_s)


def call(target: str, *args: str, status: int = 0) -> tuple[list[dict], str]:
    """Run ``labkit echo call`` to completion; return its rows and its stderr. ``status`` 1: every call fails."""
    result = labkit("echo", "call", "--target", target, *args)
    assert result.returncode == status, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()], result.stderr


def summary_counts(stderr: str) -> dict[str, int]:
    """Totals from the summary line, e.g. {'recorded': 9, 'warmup': 0, 'background': 12}."""
    return {kind: int(number) for number, kind in re.findall(r"(\d+) (recorded|warmup|background)", stderr)}


# --- calling ---------------------------------------------------------------


def test_call_sends_each_size_repeatedly_on_one_warm_channel(echo_server):
    gap_s = 0.05
    rows, stderr = call(echo_server.target, "--sizes", "1000,14000,16000", "--repeats", "3", "--gap", f"{gap_s}")

    assert [row["payload_bytes"] for row in rows] == [1000] * 3 + [14000] * 3 + [16000] * 3
    assert [row["seq"] for row in rows] == list(range(9))
    assert all(set(row) == ROW_KEYS for row in rows), rows[0]
    assert all(row["ok"] and row["grpc_code"] == "OK" and row["rtt_ns"] > 0 for row in rows)
    assert [row["cold"] for row in rows] == [True] + [False] * 8
    assert all(row["background"] is None for row in rows)
    # Idle time is at least the gap: the next call starts no earlier than gap after this one ended.
    for previous, following in zip(rows, rows[1:]):
        assert following["t_start_utc_ns"] - previous["t_start_utc_ns"] >= previous["rtt_ns"] + gap_s * 1e9 * 0.99
    assert summary_counts(stderr) == {"recorded": 9, "warmup": 0, "background": 0}
    assert warmup_seconds(stderr.splitlines()) == 0.0  # no warm-up call, no warm-up time


def test_cold_opens_a_connection_per_call(echo_server):
    rows, _ = call(echo_server.target, "--sizes", "100", "--repeats", "3", "--gap", "0", "--cold")
    assert [row["cold"] for row in rows] == [True, True, True]
    assert all(row["ok"] for row in rows)


def test_warmup_calls_are_not_recorded_and_leave_no_cold_call(echo_server):
    rows, stderr = call(echo_server.target, "--sizes", "100,200", "--repeats", "2", "--gap", "0", "--warmup", "2")
    assert [row["payload_bytes"] for row in rows] == [100, 100, 200, 200]
    assert not any(row["cold"] for row in rows)
    assert summary_counts(stderr)["warmup"] == 2


def test_background_sender_runs_during_gaps_and_is_not_recorded(echo_server):
    rows, stderr = call(
        echo_server.target, "--sizes", "100", "--repeats", "3", "--gap", "0.2", "--background-gap", "20ms"
    )
    assert len(rows) == 3
    assert all(row["background"] == pytest.approx(0.02) for row in rows)
    # 0.4 s of gaps at one call per 20 ms: expect about 20; a loaded machine may manage fewer.
    assert summary_counts(stderr)["background"] >= 3
    assert "background (0 failed)" in stderr


def test_seeded_payloads_and_calls_from_python(echo_server):
    class RecordingHook:
        """Adds a field before and after each recorded call, as --tcp-info will."""

        def __init__(self):
            self.seen = []

        def before_call(self, row):
            assert row["t_start_utc_ns"] is None  # the call has not started yet
            row["before"] = row["seq"]

        def after_call(self, row):
            self.seen.append(row["seq"])
            row["after"] = row["rtt_ns"] > 0

    hook = RecordingHook()
    summary = client.CallSummary()
    rows = list(
        client.run_calls(
            echo_server.target, [10, 20], 2, 0.0, warmup=1, seed=7, hooks=[hook], summary=summary
        )
    )
    assert [row["payload_bytes"] for row in rows] == [10, 10, 20, 20]
    assert hook.seen == [0, 1, 2, 3]  # recorded calls only, not the warmup
    assert all(row["before"] == row["seq"] and row["after"] for row in rows)
    assert (summary.recorded_ok, summary.warmup_ok) == (4, 1)


@pytest.mark.parametrize("impl", ["python", "go"])
def test_unreachable_target_gives_failed_rows_not_a_crash(impl):
    with socket.socket() as placeholder:  # a port nothing listens on
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    # Every row kept, with its failure; exit status 1: nothing was measured.
    rows, stderr = call(f"127.0.0.1:{port}", "--impl", impl, "--sizes", "10", "--repeats", "2", "--gap", "0",
                        "--timeout", "5s", status=1)
    assert [(row["ok"], row["grpc_code"]) for row in rows] == [(False, "UNAVAILABLE")] * 2
    assert all(row["error"] for row in rows)
    assert "(2 failed)" in stderr


def test_length_mismatch_is_recorded_as_an_error():
    class MiscountingServicer(server.EchoServicer):
        def Echo(self, request, context):
            return echo_pb2.EchoResponse(payload_length=len(request.payload) + 1)

    broken = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    echo_pb2_grpc.add_EchoServiceServicer_to_server(MiscountingServicer(), broken)
    port = broken.add_insecure_port("127.0.0.1:0")
    broken.start()
    try:
        (row,) = client.run_calls(f"127.0.0.1:{port}", [50], 1, 0.0)
    finally:
        broken.stop(0).wait()
    assert (row["ok"], row["grpc_code"]) == (False, "OK")
    assert "51" in row["error"] and "50" in row["error"]


# --- serving ---------------------------------------------------------------


def test_ready_line_describes_the_server(echo_server):
    ready = echo_server.ready
    assert ready["event"] == "ready"
    assert isinstance(ready["port"], int) and ready["port"] > 0
    assert ready["pid"] == echo_server.proc.pid
    assert (ready["tls"], ready["reflection"]) == (False, True)


def test_oversize_message_is_refused_and_the_server_keeps_serving(start_echo_server):
    echo = start_echo_server("--max-message-bytes", "2000")
    rows, _ = call(echo.target, "--sizes", "1000,5000,1000", "--repeats", "1", "--gap", "0")
    assert [(row["payload_bytes"], row["ok"], row["grpc_code"]) for row in rows] == [
        (1000, True, "OK"),
        (5000, False, "RESOURCE_EXHAUSTED"),
        (1000, True, "OK"),
    ]
    # And a new connection is served too, so the server process is fine.
    rows, _ = call(echo.target, "--sizes", "10", "--repeats", "1")
    assert rows[0]["ok"]
    assert echo.proc.poll() is None


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_the_server_gracefully(start_echo_server, stop_signal):
    echo = start_echo_server()
    call(echo.target, "--sizes", "10", "--repeats", "1")
    echo.proc.send_signal(stop_signal)
    assert echo.proc.wait(timeout=10) == 0
    assert "stopped on " + stop_signal.name in echo.proc.stderr.read()
    with pytest.raises(ProcessLookupError):
        os.kill(echo.ready["pid"], 0)
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", echo.port), timeout=5):
        pass


@pytest.mark.parametrize("impl", ["python", "go"])
def test_reflection_lists_the_echo_service(start_echo_server, impl):
    from google.protobuf import descriptor_pool
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

    with grpc.insecure_channel(start_echo_server("--impl", impl).target) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        assert "echo.EchoService" in set(database.get_services())
        service = descriptor_pool.DescriptorPool(database).FindServiceByName("echo.EchoService")
        assert [method.name for method in service.methods] == ["Echo", "EchoStream", "Upload"]

    hidden = start_echo_server("--impl", impl, "--no-reflection")
    assert hidden.ready["reflection"] is False
    with grpc.insecure_channel(hidden.target) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            list(ProtoReflectionDescriptorDatabase(channel).get_services())
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_upload_counts_and_hashes_every_byte(echo_server):
    chunks = [os.urandom(size) for size in (16, 1024, 32 * 1024, 0, 7)]
    with grpc.insecure_channel(echo_server.target) as channel:
        status = echo_pb2_grpc.EchoServiceStub(channel).Upload(
            iter(echo_pb2.Chunk(content=chunk) for chunk in chunks), timeout=10
        )
    assert status.code == echo_pb2.OK
    assert status.bytes_received == sum(map(len, chunks))
    assert status.sha256 == hashlib.sha256(b"".join(chunks)).hexdigest()


def test_echo_stream_answers_each_request(echo_server):
    with grpc.insecure_channel(echo_server.target) as channel:
        responses = echo_pb2_grpc.EchoServiceStub(channel).EchoStream(
            iter(echo_pb2.EchoRequest(payload=b"x" * size) for size in (0, 5, 14000)), timeout=10
        )
        assert [response.payload_length for response in responses] == [0, 5, 14000]


def _write_test_pki(directory: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 signed by it; returns (ca, cert, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    valid = {"not_valid_before": now - datetime.timedelta(minutes=5), "not_valid_after": now + datetime.timedelta(hours=1)}

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "labkit test CA")])
    ca_cert = (
        x509.CertificateBuilder(subject_name=ca_name, issuer_name=ca_name, public_key=ca_key.public_key(),
                                serial_number=x509.random_serial_number(), **valid)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder(
            subject_name=x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "labkit echo test")]),
            issuer_name=ca_name, public_key=server_key.public_key(),
            serial_number=x509.random_serial_number(), **valid,
        )
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    paths[0].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


def test_tls_server_is_verified_by_the_client(start_echo_server, tmp_path):
    ca, cert, key = _write_test_pki(tmp_path)
    echo = start_echo_server("--tls-cert", str(cert), "--tls-key", str(key))
    assert echo.ready["tls"] is True

    rows, _ = call(echo.target, "--sizes", "1000", "--repeats", "2", "--gap", "0", "--tls-ca", str(ca))
    assert [(row["ok"], row["cold"]) for row in rows] == [(True, True), (True, False)]

    # A plaintext client gets no answer from a TLS-only server.
    rows, _ = call(echo.target, "--sizes", "10", "--repeats", "1", "--timeout", "5s", status=1)
    assert rows[0]["ok"] is False and rows[0]["grpc_code"] == "UNAVAILABLE"

    # A client trusting another CA refuses the server's certificate.
    (tmp_path / "other").mkdir()
    other_ca, _, _ = _write_test_pki(tmp_path / "other")
    rows, _ = call(echo.target, "--sizes", "10", "--repeats", "1", "--timeout", "5s", "--tls-ca", str(other_ca), status=1)
    assert rows[0]["ok"] is False and rows[0]["grpc_code"] == "UNAVAILABLE"


# --- errors ----------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["echo", "call", "--target", "127.0.0.1:1", "--sizes", "10,abc"],
        ["echo", "call", "--target", "127.0.0.1:1", "--sizes", "10", "--gap", "-1"],
        ["echo", "call", "--target", "127.0.0.1:1", "--sizes", "10", "--bogus"],
        ["echo", "call", "--target", "127.0.0.1:1", "--sizes", "10", "--repeats", "0"],
        ["echo", "call", "--target", "127.0.0.1:0", "--sizes", "10"],
        ["echo", "call", "--target", "127.0.0.1:1", "--sizes", "10", "--cold", "--background-gap", "1s"],
        ["echo", "serve", "--bind", "nope"],
        ["echo", "serve", "--bind", "::1:80"],
        ["echo", "serve", "--bind", "127.0.0.1:70000"],
        ["echo", "serve", "--bind", "192.0.2.1:0"],  # TEST-NET address: never on this host
        ["echo", "serve", "--bind", "127.0.0.1:0", "--tls-cert", __file__],
    ],
    ids=["bad-size", "negative-gap", "unknown-flag", "zero-repeats", "target-port-0", "cold-with-background",
         "bind-no-port", "bind-ipv6-no-brackets", "bind-port-range", "bind-not-local", "cert-without-key"],
)
def test_bad_input_is_one_line_and_exit_2(args):
    result = labkit(*args)
    assert result.returncode == 2, result
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith("labkit: error: ")
    assert result.stdout == ""


def test_bind_to_a_port_in_use_is_one_line_and_exit_2(echo_server):
    result = labkit("echo", "serve", "--bind", echo_server.target)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"labkit: error: cannot listen on {echo_server.target}: Address already in use"]


# --- gRPC options, by grpc-go's names ----------------------------------------


def test_grpc_options_override_the_servers_defaults(start_echo_server):
    """max-recv-msg-size below the default message bound: the option, not the default, decides."""
    echo = start_echo_server("--grpc-option", "max-recv-msg-size=4KiB")
    assert echo.ready["grpc_options"] == {"max-recv-msg-size": 4096} and echo.ready["impl"] == "python"
    rows, _ = call(echo.target, "--sizes", "4000,5000", "--repeats", "1", "--gap", "0")
    assert [(row["payload_bytes"], row["grpc_code"]) for row in rows] == [(4000, "OK"), (5000, "RESOURCE_EXHAUSTED")]


def test_client_grpc_options_apply_to_its_channel(echo_server):
    """A client max-recv-msg-size is not needed for echo (the response is a length), but gzip changes the bytes sent."""
    rows, stderr = call(echo_server.target, "--sizes", "1000", "--repeats", "2", "--gap", "0",
                        "--grpc-option", "compression=gzip", "--grpc-option", "keepalive-time=30s")
    assert [row["ok"] for row in rows] == [True, True], stderr


@pytest.mark.parametrize("args, message", [
    (("serve", "--bind", "127.0.0.1:0", "--grpc-option", "window=1"), "--grpc-option window: unknown; known: "),
    (("serve", "--bind", "127.0.0.1:0", "--grpc-option", "pool=2"), "pool is a client option, not a server one"),
    (("serve", "--bind", "127.0.0.1:0", "--grpc-option", "static-stream-window=32MiB"),
     "grpcio has no equivalent of --grpc-option static-stream-window; use --impl go"),
    (("call", "--target", "127.0.0.1:9", "--sizes", "1", "--grpc-option", "max-connection-idle=1s"),
     "max-connection-idle is a server option, not a client one"),
    (("call", "--target", "127.0.0.1:9", "--sizes", "1", "--grpc-option", "keepalive-time=soon"),
     "--grpc-option keepalive-time: 'soon' is not a duration"),
    (("call", "--target", "127.0.0.1:9", "--sizes", "1", "--grpc-option", "compression"), "is not KEY=VALUE"),
    # vtprotobuf is generated Go: grpcio has no such marshalling, and says so rather than use its own.
    (("serve", "--bind", "127.0.0.1:0", "--grpc-option", "codec=vtproto"),
     "grpcio has no equivalent of --grpc-option codec=vtproto; use --impl go"),
    (("call", "--target", "127.0.0.1:9", "--sizes", "1", "--grpc-option", "codec=vtproto"),
     "grpcio has no equivalent of --grpc-option codec=vtproto; use --impl go"),
    (("call", "--target", "127.0.0.1:9", "--sizes", "1", "--grpc-option", "codec=json"),
     "--grpc-option codec: 'json' is not proto or vtproto"),
])
def test_bad_grpc_options_are_one_line_and_exit_2(args, message):
    result = labkit("echo", *args)
    assert result.returncode == 2 and message in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_codec_proto_is_grpcios_own_and_changes_nothing(start_echo_server):
    """codec=proto names what grpcio always does: both ends take it, report it, and call as without it."""
    echo = start_echo_server("--grpc-option", "codec=proto")
    assert echo.ready["grpc_options"] == {"codec": "proto"}
    rows, stderr = call(echo.target, "--sizes", "0,1000", "--repeats", "1", "--gap", "0",
                        "--grpc-option", "codec=proto")
    assert [(row["payload_bytes"], row["ok"]) for row in rows] == [(0, True), (1000, True)], stderr


def test_both_implementations_know_the_same_options():
    """labkit/echo/options.py OPTIONS and labkit-go's options.Known (go/internal/options/options.go): the same
    names, each taken by the same sides, so a stack's options mean the same to either implementation."""
    text = (Path(__file__).resolve().parent.parent / "go" / "internal" / "options" / "options.go").read_text()
    known = re.findall(r'^\s*\{"([a-z-]+)", \w+, (true|false), (true|false), "', text, re.MULTILINE)
    go = {name: tuple(side for side, takes in (("client", client_), ("server", server_)) if takes == "true")
          for name, client_, server_ in known}
    assert len(go) == len(known) > 0
    assert go == {name: option.sides for name, option in OPTIONS.items()}


def test_streams_that_never_send_leave_unary_calls_served_and_are_cancelled_when_idle():
    """Issue 15 item 5: 40 EchoStream calls that never send used to take all 32 pool threads, and every unary Echo
    timed out until they closed. Streams now take at most 24 threads (the 25th and later are refused at once with
    RESOURCE_EXHAUSTED), a unary call is answered meanwhile, and an idle stream is cancelled after the timeout."""
    import threading
    import time

    srv = ServerProcess("--stream-idle-timeout", "2s")
    channel = grpc.insecure_channel(srv.target)
    stub = echo_pb2_grpc.EchoServiceStub(channel)
    never = threading.Event()

    def silent():  # a request stream that sends nothing until the test ends
        never.wait(30)
        return
        yield  # noqa: unreachable: makes this a generator

    try:
        streams = [stub.EchoStream(silent(), timeout=30) for _ in range(40)]
        time.sleep(1.0)  # every stream has reached the server (or been refused by it)
        started = time.monotonic()
        answer = stub.Echo(echo_pb2.EchoRequest(payload=b"x" * 10), timeout=5)
        assert answer.payload_length == 10 and time.monotonic() - started < 5
        codes = []
        for stream in streams:
            try:
                list(stream)
                codes.append(grpc.StatusCode.OK)
            except grpc.RpcError as error:
                codes.append(error.code())
        refused = [c for c in codes if c == grpc.StatusCode.RESOURCE_EXHAUSTED]
        cancelled = [c for c in codes if c == grpc.StatusCode.CANCELLED]
        # 24 admitted, each cancelled by the server once idle for 2 s (well before the streams' own 30 s); 16 refused.
        assert (len(refused), len(cancelled)) == (16, 24), codes
        assert time.monotonic() - started < 15
    finally:
        never.set()
        channel.close()
        srv.stop()


def test_a_calls_wall_clock_start_is_read_where_its_timer_starts():
    # Packets are matched to a call by [t_start_utc_ns, + rtt_ns]: the wall reading must be the timer's instant,
    # inside the span of the readings around it on both clocks, also with another thread busy on the GIL (as the
    # series agent's probes and ping readers are).
    import threading
    import time

    from labkit.echo.client import clock_pair

    stop = threading.Event()
    busy = threading.Thread(target=lambda: [sum(range(1000)) for _ in iter(stop.is_set, True)], daemon=True)
    busy.start()
    try:
        for _ in range(200):
            wall_before, perf_before = time.time_ns(), time.perf_counter_ns()
            wall, perf = clock_pair()
            perf_after, wall_after = time.perf_counter_ns(), time.time_ns()
            assert wall_before <= wall <= wall_after and perf_before <= perf <= perf_after
    finally:
        stop.set()
        busy.join()

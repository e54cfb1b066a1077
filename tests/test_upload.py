"""`labkit upload` and the HTTP/2 upload endpoint: real sockets, real processes, no mocks.

The endpoint tests run on 127.0.0.1 (in-process servers, and `labkit echo
serve` through the console script). The experiment tests run on a testbed of
their own (u4-upload: 5 ms one way, no rate limit) with labkit deployed offline
into directories of this module, like tests/test_sweep.py.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import selectors
import signal
import socket
import ssl
import subprocess
import time

import grpc
import pyarrow.parquet as pq
import pytest
import tomli_w

import labkit
from conftest import LABKIT, deployed_inventory, labkit as run_labkit, own_testbed, leftover_processes, wait_for
from labkit.echo.http2 import Http2Client, Http2Error, running_http2_server
from labkit.echo.server import EXPECTED_LENGTH_METADATA, EXPECTED_SHA256_METADATA, running_server
from labkit.echo.upload_agent import chunk_message_bytes
from labkit.pki import write_throwaway_pki
from labkit.proto import echo_pb2, echo_pb2_grpc
from labkit.store import Run
from labkit.schemas import UPLOAD_SCHEMA

ONE_WAY_S = 0.005
FILE_BYTES = 2 * 2**20
CHUNKS = "1KiB,2MiB"


def _chunks(data: bytes, size: int):
    view = memoryview(data)
    return (view[offset:offset + size] for offset in range(0, len(data), size))


# -- the HTTP/2 endpoint on loopback ------------------------------------------------------------


@pytest.fixture(scope="module")
def payload() -> bytes:
    return random.Random(7).randbytes(3 * 2**20 + 17)  # not a multiple of any chunk size


def test_h2c_upload_streams_counts_and_hashes_on_one_connection(payload):
    sha = hashlib.sha256(payload).hexdigest()
    with running_http2_server() as server, Http2Client(f"127.0.0.1:{server.port}") as client:
        for chunk in (100, 16384, 1 << 20):
            reply = client.upload(_chunks(payload, chunk), length=len(payload), expected_sha256=sha)
            body = reply.json()
            assert reply.status == 200, body
            assert body["bytes_received"] == len(payload) and body["sha256"] == sha
            assert body["server_cpu_s"] > 0
        # Without content-length the body is still counted as it streams.
        reply = client.upload(_chunks(payload, 4096))
        assert reply.status == 200 and reply.json()["bytes_received"] == len(payload)


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether the other end closed ``sock`` and nothing is left to read (without waiting or reading anything)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def test_idle_http2_connections_are_bounded_and_closed_when_idle():
    """Issue 15 item 5: 500 idle connections used to make 542 server threads. At most max_connections are served
    (a thread each; the others are closed as they come), an idle one is closed after idle_s, and then an upload is
    served again."""
    import threading

    def connection_threads() -> int:
        return sum(1 for thread in threading.enumerate() if thread.name == "http2-conn" and thread.is_alive())

    with running_http2_server(max_connections=20, idle_s=1.5) as server:
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(60)]
        try:
            # Those beyond the bound are closed by the server as it accepts them: end of file, waited for (a busy
            # machine accepts late). A served one has the server's SETTINGS to read first, so never counts here.
            wait_for(lambda: sum(map(_closed_by_peer, idle)) >= 40, 60, "40 connections closed by the server")
            assert connection_threads() <= 20
            # Past idle_s the 20 served ones are closed too (waited for: a busy machine may close them late).
            wait_for(lambda: connection_threads() == 0, 60, "the idle connections' threads to end")
            with Http2Client(f"127.0.0.1:{server.port}") as client:
                assert client.upload([b"x" * 1000], length=1000).status == 200
        finally:
            for sock in idle:
                sock.close()


def test_server_checks_what_the_client_declares(payload):
    sha = hashlib.sha256(payload).hexdigest()
    with running_http2_server() as server, Http2Client(f"127.0.0.1:{server.port}") as client:
        wrong_sha = client.upload(_chunks(payload, 65536), length=len(payload), expected_sha256="0" * 64)
        assert wrong_sha.status == 422
        assert wrong_sha.json()["error"] == f"expected sha256 {'0' * 64}, received {sha}"
        wrong_length = client.upload(_chunks(payload, 65536), length=len(payload), declared_length=len(payload) - 1)
        assert wrong_length.status == 422 and "expected 3145744 bytes, received 3145745" in wrong_length.json()["error"]
        assert client.upload([b"x"], length=1).status == 200  # the connection goes on


def test_oversize_bodies_get_413_and_the_server_goes_on(payload):
    bound = 1 << 20
    with running_http2_server(max_upload_bytes=bound) as server, Http2Client(f"127.0.0.1:{server.port}") as client:
        announced = client.upload(_chunks(payload, 65536), length=len(payload))
        assert announced.status == 413 and announced.json()["max_upload_bytes"] == bound
        assert announced.json()["bytes_received"] == 0  # refused on content-length, before any data
        streamed = client.upload(_chunks(payload, 65536))  # no content-length: found while counting
        assert streamed.status == 413 and bound < streamed.json()["bytes_received"] <= bound + 65536
        exact = client.upload([payload[:bound]], length=bound)
        assert exact.status == 200 and exact.json()["bytes_received"] == bound
    # A new connection after the refusals is served too.
    with running_http2_server(max_upload_bytes=10) as server, Http2Client(f"127.0.0.1:{server.port}") as client:
        assert client.upload([b"0123456789"], length=10).status == 200
        assert client.upload([b"0123456789", b"!"]).status == 413


def test_other_paths_methods_and_http1_are_refused_clearly():
    with running_http2_server() as server, Http2Client(f"127.0.0.1:{server.port}") as client:
        assert client.post("/elsewhere", [b"x"]).status == 404
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as plain:
            plain.sendall(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx")
            answer = plain.recv(4096)
        assert answer.startswith(b"HTTP/1.1 505") and b"HTTP/2 only" in answer
        assert client.upload([b"x"], length=1).status == 200


def test_tls_with_alpn_h2_is_verified_against_the_ca(payload, tmp_path):
    pki = write_throwaway_pki(tmp_path / "tls", "127.0.0.1")
    assert os.stat(pki.server_key).st_mode & 0o777 == 0o600
    other = write_throwaway_pki(tmp_path / "other", "127.0.0.1")
    sha = hashlib.sha256(payload).hexdigest()
    with running_http2_server(tls_cert_pem=pki.server_cert.read_bytes(), tls_key_pem=pki.server_key.read_bytes()) as server:
        target = f"127.0.0.1:{server.port}"
        with Http2Client(target, tls_root_pem=pki.ca_cert.read_bytes()) as client:
            assert client.sock.version() in ("TLSv1.2", "TLSv1.3") and client.sock.selected_alpn_protocol() == "h2"
            reply = client.upload(_chunks(payload, 32768), length=len(payload), expected_sha256=sha)
            assert reply.status == 200 and reply.json()["sha256"] == sha
        with pytest.raises(Http2Error, match="certificate verify failed"):
            Http2Client(target, tls_root_pem=other.ca_cert.read_bytes()).connect()
        with pytest.raises(Http2Error, match="certificate verify failed|IP address mismatch|hostname mismatch"):
            Http2Client(target, tls_root_pem=pki.ca_cert.read_bytes(), tls_server_name="elsewhere.example").connect()
        # A TLS client that offers only HTTP/1.1 in ALPN gets no HTTP/2 and no data.
        context = ssl.create_default_context(cadata=pki.ca_cert.read_text())
        context.set_alpn_protocols(["http/1.1"])
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                assert tls.selected_alpn_protocol() is None
                assert tls.recv(100) == b""


def _read_ready(proc: subprocess.Popen, timeout_s: float = 15) -> dict:
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        assert selector.select(timeout_s), "no ready line"
    return json.loads(proc.stdout.readline())


def test_echo_serve_reports_the_http2_port_and_stops_cleanly(payload, tmp_path):
    pki = write_throwaway_pki(tmp_path, "127.0.0.1")
    proc = subprocess.Popen(
        [LABKIT, "echo", "serve", "--bind", "127.0.0.1:0", "--http2-port", "0", "--max-upload-bytes", "1000000",
         "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        ready = _read_ready(proc)
        assert ready["tls"] is True and ready["max_upload_bytes"] == 1000000 and ready["http2_port"] != ready["port"]
        with Http2Client(f"127.0.0.1:{ready['http2_port']}", tls_root_pem=pki.ca_cert.read_bytes()) as client:
            assert client.upload([payload[:1000]], length=1000).status == 200
            assert client.upload([payload[:1000001]], length=1000001).status == 413
        # The gRPC side of the same process, with the same TLS.
        credentials = grpc.ssl_channel_credentials(root_certificates=pki.ca_cert.read_bytes())
        with grpc.secure_channel(f"127.0.0.1:{ready['port']}", credentials) as channel:
            status = echo_pb2_grpc.EchoServiceStub(channel).Upload(iter([echo_pb2.Chunk(content=b"abc")]), timeout=10)
            assert status.code == echo_pb2.OK and status.bytes_received == 3
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        assert "stopped on SIGTERM" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_grpc_upload_checks_declared_length_and_checksum_and_reports_server_cpu(payload):
    sha = hashlib.sha256(payload).hexdigest()
    messages = [echo_pb2.Chunk(content=bytes(chunk)) for chunk in _chunks(payload, 65536)]
    with running_server() as port, grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        upload = echo_pb2_grpc.EchoServiceStub(channel).Upload
        status, call = upload.with_call(iter(messages), timeout=10, metadata=(
            (EXPECTED_LENGTH_METADATA, str(len(payload))), (EXPECTED_SHA256_METADATA, sha)))
        assert status.code == echo_pb2.OK and status.sha256 == sha
        trailing = dict(call.trailing_metadata())
        assert float(trailing["labkit-server-cpu-s"]) > 0 and "labkit-server-cpu-sys-s" in trailing
        wrong = upload(iter(messages), timeout=10, metadata=((EXPECTED_SHA256_METADATA, "f" * 64),
                                                             (EXPECTED_LENGTH_METADATA, "12")))
        assert wrong.code == echo_pb2.FAILED and wrong.bytes_received == len(payload)
        assert wrong.message == f"expected 12 bytes, received {len(payload)}; expected sha256 {'f' * 64}, received {sha}"
        # A gupload-style client declares nothing and gets a plain OK.
        assert upload(iter(messages[:2]), timeout=10).code == echo_pb2.OK


def test_chunk_message_size_is_what_grpc_compares_with_its_bound():
    assert [chunk_message_bytes(n) for n in (16, 127, 128, 16383, 16384, 2**21)] == [18, 129, 131, 16386, 16388, 2**21 + 5]
    # The boundary, checked against a real server: the largest chunk the bound admits passes, one more byte fails.
    bound = 20000
    largest = max(n for n in range(bound) if chunk_message_bytes(n) <= bound)
    with running_server(max_message_bytes=bound) as port, grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        upload = echo_pb2_grpc.EchoServiceStub(channel).Upload
        assert upload(iter([echo_pb2.Chunk(content=b"x" * largest)]), timeout=10).code == echo_pb2.OK
        with pytest.raises(grpc.RpcError) as refused:
            upload(iter([echo_pb2.Chunk(content=b"x" * (largest + 1))]), timeout=10)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


# -- the experiment on the testbed ----------------------------------------------------------------


@pytest.fixture(scope="module")
def lab():
    with own_testbed("u4-upload", ONE_WAY_S, cc="cubic") as state:
        yield state


@pytest.fixture(scope="module")
def inventory(lab, tmp_path_factory):
    """The testbed's inventory, with labkit deployed (offline) into directories of this test module."""
    return deployed_inventory(lab, tmp_path_factory.mktemp("upload"))


def upload_processes(lab) -> list[str]:
    return leftover_processes(lab, ("echo serve", "upload-agent", "labkit-go"))


def _seeded(size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < size:
        out += rng.randbytes(min(1 << 20, size - len(out)))
    return bytes(out)


@pytest.mark.testbed
def test_every_transport_and_tls_mode_uploads_with_matching_checksums(lab, inventory, tmp_path):
    proc = run_labkit("upload", str(inventory), "--client", "a", "--server", "b", "--file-size", "2MiB",
                      "--chunk-sizes", CHUNKS, "--repeats", "2", "--ping-count", "2", "--name", "all",
                      "--runs-dir", str(tmp_path), "--quiet", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "http2+TLS" in proc.stdout and "grpc " in proc.stdout
    run = Run.open(next(tmp_path.glob("*-all")))
    assert run.status == "complete"
    table = pq.read_table(run.path / "samples.parquet")
    assert table.schema.equals(UPLOAD_SCHEMA, check_metadata=False)
    samples = table.to_pandas()
    assert len(samples) == 4 * 2 * 2
    assert samples.groupby(["transport", "tls", "chunk_bytes"]).size().tolist() == [2] * 8
    assert samples["ok"].all(), samples[~samples["ok"]][["cell_id", "error"]]
    assert (samples["bytes_acked"] == FILE_BYTES).all() and (samples["file_bytes"] == FILE_BYTES).all()
    assert (samples["chunks"] == [math.ceil(FILE_BYTES / size) for size in samples["chunk_bytes"]]).all()
    assert set(samples["status"]) == {"OK", "200"}
    # Physics: no upload is acknowledged in less than one round trip of the link.
    assert (samples["seconds"] > 2 * ONE_WAY_S).all()
    assert ((samples["mb_per_s"] - FILE_BYTES / samples["seconds"] / 1e6).abs() < 1e-6).all()
    assert (samples["client_cpu_s"] > 0).all() and (samples["server_cpu_s"] > 0).all()
    # Smaller chunks cost the client more CPU for the same bytes, on both transports.
    cpu = samples.groupby(["transport", "chunk_bytes"])["client_cpu_s"].median()
    assert cpu[("grpc", 1024)] > cpu[("grpc", 2**21)] and cpu[("http2", 1024)] > cpu[("http2", 2**21)]

    manifest = run.manifest
    # The file on host a is exactly the seeded bytes, and the run names its digest.
    assert manifest["file"]["sha256"] == hashlib.sha256(_seeded(FILE_BYTES, 1)).hexdigest()
    # The cells ran shuffled (the manifest keeps the order): a server of the next cell's TLS mode wherever it changed.
    started = samples.groupby("cell_id")["t_start_utc_ns"].min().sort_values().index.tolist()
    assert manifest["cell_order"]["shuffled"] and manifest["cell_order"]["cells"] == started
    assert {server["tls"] for server in manifest["servers"]} == {False, True}
    assert all(server["max_upload_bytes"] == FILE_BYTES for server in manifest["servers"])
    assert manifest["tls"]["server_name"] == lab.hosts["b"].data_address
    assert os.stat(run.path / "tls" / "server.key").st_mode & 0o777 == 0o600
    assert manifest["baselines"]["a-b"]["ping_before_0"]["received"] == 2
    # Nothing left behind: no processes, no keys on the hosts.
    assert upload_processes(lab) == []
    hosts_dir = inventory.parent / "hosts"
    assert list(hosts_dir.glob("*/upload/tls-*")) == []


@pytest.mark.testbed
def test_a_wrong_declared_length_is_an_error_row_on_both_transports(lab, inventory):
    from labkit.hosts.layout import remote_labkit_argv
    from labkit.hosts.inventory import load_inventory, open_host

    inv = load_inventory(inventory)
    address = lab.hosts["b"].data_address
    with open_host(inv, "a") as client, open_host(inv, "b") as server:
        labkit_a, labkit_b = remote_labkit_argv(inv.host("a")), remote_labkit_argv(inv.host("b"))
        path = f"{inv.host('a').labkit_dir}/declared.bin"
        facts = json.loads(client.run([*labkit_a, "echo", "upload-file", "--path", path, "--size", "100000"],
                                      check=True).stdout)
        with server.start([*labkit_b, "echo", "serve", "--bind", f"{address}:0", "--http2-port", "0"]) as serve:
            ready = json.loads(serve.wait_for_line(lambda line: '"ready"' in line, timeout=30))
            for transport, port in (("grpc", ready["port"]), ("http2", ready["http2_port"])):
                result = client.run([*labkit_a, "echo", "upload-agent", "--transport", transport,
                                     "--target", f"{address}:{port}", "--file", path, "--sha256", facts["sha256"],
                                     "--chunk-size", "16384", "--repeats", "2", "--declare-length", "100001"],
                                    timeout=60)
                assert result.returncode == 0, result.stderr
                lines = [json.loads(line) for line in result.stdout.splitlines()]
                assert lines[0]["event"] == "ready"
                rows = lines[1:]
                assert [row["seq"] for row in rows] == [0, 1]
                for row in rows:
                    assert row["ok"] is False and row["mb_per_s"] is None
                    # The server received every byte, and said what it had been told to expect.
                    assert row["bytes_acked"] == 100000
                    assert "expected 100001 bytes, received 100000" in row["error"]
                assert {row["status"] for row in rows} == ({"OK"} if transport == "grpc" else {"422"})
    assert upload_processes(lab) == []


@pytest.mark.testbed
@pytest.mark.parametrize("args, expected", [
    (["--chunk-sizes", "1KiB,4MiB"], "chunk size 4194304 is above the server's message bound: a 4194304-byte chunk is a "
                                     "4194309-byte gRPC message and the server accepts at most 4194304"),
    (["--chunk-sizes", "16,65536,65532,65533", "--max-message-bytes", "65536"], "chunk sizes 65536, 65533 are above"),
])
def test_chunk_sizes_above_the_bound_are_refused_before_anything_runs(lab, inventory, tmp_path, args, expected):
    proc = run_labkit("upload", str(inventory), "--client", "a", "--server", "b", *args,
                      "--runs-dir", str(tmp_path / "runs"), "--quiet")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "runs").exists()  # no run was created, so nothing was started
    assert upload_processes(lab) == []


@pytest.mark.testbed
def test_experiment_file_is_read_relative_to_itself_and_flags_override_it(inventory, tmp_path):
    experiment = tmp_path / "upload.toml"
    experiment.write_text(tomli_w.dumps({"upload": {
        "inventory": os.path.relpath(inventory, tmp_path), "client": "a", "server": "zz",
        "chunk_sizes": [16, "4MiB"], "file_size": "2MiB", "tls": "off"}}))
    runs = tmp_path / "runs"
    refused = run_labkit("upload", "--config", str(experiment), "--runs-dir", str(runs), "--quiet")
    assert refused.returncode == 2 and "chunk size 4194304 is above" in refused.stderr, refused.stderr
    # With the chunk sizes overridden, the file's inventory (relative to the file) is what names no host zz.
    overridden = run_labkit("upload", "--config", str(experiment), "--chunk-sizes", "16", "--runs-dir", str(runs), "--quiet")
    assert overridden.returncode == 2 and "no host 'zz'" in overridden.stderr, overridden.stderr
    assert overridden.stderr.count("\n") == 1
    experiment.write_text('[upload]\nchunk_size = 16\n')
    unknown = run_labkit("upload", "--config", str(experiment), "--runs-dir", str(runs))
    assert unknown.returncode == 2 and "unknown keys chunk_size" in unknown.stderr
    assert not runs.exists()


def test_only_grpc_has_a_message_bound():
    from labkit.errors import LabkitError
    from labkit.experiments.upload import UploadConfig

    config = UploadConfig(inventory="unused.toml", client="a", server="b", chunk_sizes=[4 * 2**20], transports=["http2"])
    config.validate()
    config.transports = ["http2", "grpc"]
    with pytest.raises(LabkitError, match="above the server's message bound"):
        config.validate()


@pytest.mark.testbed
def test_python_api_uploads_a_local_file(lab, inventory, tmp_path):
    local = tmp_path / "payload.bin"
    local.write_bytes(random.Random(3).randbytes(300_001))
    run = labkit.upload(inventory, client="a", server="b", file=str(local), chunk_sizes=[65536],
                        tls="off", repeats=1, ping_count=1, name="api", runs_dir=tmp_path / "runs", quiet=True)
    assert run.status == "complete"
    samples = run.samples()
    assert len(samples) == 2 and samples["ok"].all() and set(samples["transport"]) == {"grpc", "http2"}
    assert not samples["tls"].any() and (samples["bytes_acked"] == 300_001).all()
    assert run.manifest["file"]["sha256"] == hashlib.sha256(local.read_bytes()).hexdigest()
    assert run.manifest["file"]["path"].endswith(f"file-{run.manifest['file']['sha256'][:16]}.bin")


@pytest.mark.testbed
def test_sigint_stops_everything_and_resume_runs_only_the_missing_cells(lab, inventory, tmp_path):
    upload = subprocess.Popen(
        [LABKIT, "upload", str(inventory), "--client", "a", "--server", "b", "--file-size", "1MiB",
         "--chunk-sizes", "64KiB,256", "--repeats", "3", "--tls", "on", "--ping-count", "1",
         "--name", "resume", "--runs-dir", str(tmp_path), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 90
    journal = None
    while time.monotonic() < deadline and upload.poll() is None:
        found = list(tmp_path.glob("*-resume/samples.jsonl"))
        if found and len(found[0].read_text().splitlines()) >= 4:
            journal = found[0]
            break
        time.sleep(0.05)
    assert journal is not None, upload.communicate(timeout=30)
    upload.send_signal(signal.SIGINT)
    _, stderr = upload.communicate(timeout=60)
    assert upload.returncode == 130, stderr
    assert upload_processes(lab) == []
    assert list((inventory.parent / "hosts").glob("*/upload/tls-*")) == []  # the keys left the hosts on Ctrl-C too
    run = Run.open(journal.parent)
    assert run.status == "interrupted"
    done_before = {event["cell"] for event in run.cell_events() if event["event"] == "complete"}
    assert 1 <= len(done_before) < 4

    resumed = run_labkit("upload", "--resume", run.run_id, "--runs-dir", str(tmp_path), "--quiet", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    run = Run.open(journal.parent)
    assert run.status == "complete"
    samples = run.samples()
    per_cell = samples.groupby("cell_id").agg(rows=("seq", "size"), seqs=("seq", "nunique"), attempts=("attempt", "nunique"))
    assert len(per_cell) == 4 and (per_cell["rows"] == 3).all() and (per_cell["seqs"] == 3).all()
    assert (per_cell["attempts"] == 1).all() and samples["ok"].all() and samples["tls"].all()
    # Cells finished before the interruption were not run again.
    starts = [event["cell"] for event in run.cell_events() if event["event"] == "start"]
    assert all(starts.count(cell) == 1 for cell in done_before)
    assert upload_processes(lab) == []


@pytest.mark.testbed
def test_client_and_server_on_one_host_upload_over_its_loopback(lab, inventory, tmp_path):
    """The published design: both ends on one host, over loopback. The server binds 127.0.0.1 there (never the
    data address), every agent's target is 127.0.0.1, and TLS is verified for it."""
    proc = run_labkit("upload", str(inventory), "--client", "a", "--server", "a", "--file-size", "2MiB",
                      "--chunk-sizes", "64KiB", "--repeats", "3", "--ping-count", "2", "--client-impl", "go",
                      "--server-impl", "go", "--name", "loop", "--runs-dir", str(tmp_path), "--quiet", timeout=300)
    assert proc.returncode == 0, proc.stderr
    run = Run.open(next(tmp_path.glob("*-loop")))
    samples = run.samples()
    assert len(samples) == 4 * 3 and samples["ok"].all(), samples[~samples["ok"]][["cell_id", "error"]]
    assert set(samples["cell_id"].str.split("|").str[0]) == {"a->a"}
    assert {(server["bind"].rsplit(":", 1)[0], server["tls"]) for server in run.manifest["servers"]} == {
        ("127.0.0.1", False), ("127.0.0.1", True)}
    assert run.manifest["tls"]["server_name"] == "127.0.0.1"
    # Every agent sent to the loopback address (its ready line names its target), never across the link.
    targets = {connection["target"].rsplit(":", 1)[0] for connection in run.manifest["connections"].values()}
    assert targets == {"127.0.0.1"}
    assert upload_processes(lab) == []
    capture = run_labkit("upload", str(inventory), "--client", "a", "--server", "a", "--capture",
                         "--runs-dir", str(tmp_path), timeout=60)
    assert capture.returncode == 2 and "loopback" in capture.stderr and "Traceback" not in capture.stderr


@pytest.mark.testbed
def test_go_and_python_stacks_upload_the_same_file_side_by_side(lab, inventory, tmp_path):
    proc = run_labkit("upload", str(inventory), "--client", "a", "--server", "b", "--file-size", "2MiB",
                      "--chunk-sizes", "1024,65536", "--repeats", "1", "--tls", "on", "--ping-count", "2",
                      "--client-impl", "python,go", "--server-impl", "go",
                      "--grpc-option", "initial-window=1MiB", "--name", "stacks", "--runs-dir", str(tmp_path), "--quiet",
                      timeout=300)
    assert proc.returncode == 0, proc.stderr
    run = Run.open(next(tmp_path.glob("*-stacks")))
    samples = run.samples()
    assert samples["ok"].all(), samples[~samples["ok"]][["cell_id", "error"]]
    # Both clients against the Go server over TLS; gRPC options do not apply to HTTP/2 POSTs, so those cells are
    # gRPC only, and the plan says why it left the HTTP/2 ones out.
    assert sorted(set(zip(samples["client_impl"], samples["server_impl"], samples["transport"]))) == [
        ("go", "go", "grpc"), ("python", "go", "grpc")]
    assert set(samples["grpc_options"]) == {"initial-window=1MiB"}
    assert any("gRPC options do not apply to an HTTP/2 POST" in line for line in run.manifest["omitted_cells"])
    assert (samples["bytes_acked"] == FILE_BYTES).all() and (samples["server_cpu_s"] > 0).all()
    assert {server["impl"] for server in run.manifest["servers"]} == {"go"}
    # The wire and its system calls are counted where labkit-go runs: the Go agent's frames, writes and calls, and
    # the Go server's calls whichever client asked; a Python agent's stay null (grpcio's sendmsg/recvmsg are not
    # in /proc/self/io).
    go, python = (samples[samples["client_impl"] == impl].set_index("chunk_bytes") for impl in ("go", "python"))
    assert (go["client_data_frames"] >= go["chunks"]).all() and (go["client_frames"] >= go["client_data_frames"]).all()
    assert go.loc[1024, "client_data_frames"] > 10 * go.loc[65536, "client_data_frames"]
    assert (go["client_writes"] > 0).all() and (go["client_rw_syscalls"] >= go["client_writes"]).all()
    assert samples["server_rw_syscalls"].gt(0).all()
    assert python[["client_data_frames", "client_writes", "client_rw_syscalls"]].isna().all().all()
    assert upload_processes(lab) == []

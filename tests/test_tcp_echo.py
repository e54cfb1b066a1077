"""The raw TCP echo on loopback: in process (TcpEchoServer/TcpEchoClient) and served by `labkit echo serve`."""

from __future__ import annotations

import io
import json
import socket
import struct
import subprocess
import time

import pytest

from conftest import LABKIT
from labkit.echo.tcp_echo import TcpEchoClient, TcpEchoError, TcpEchoServer, time_connect
from labkit.errors import LabkitError


@pytest.fixture
def echo_server():
    log = io.StringIO()
    server = TcpEchoServer("127.0.0.1", 0, max_message_bytes=100_000, log=log)
    server.start()
    try:
        yield server, log
    finally:
        server.stop()


def test_calls_on_one_connection_get_the_length_back(echo_server):
    server, _ = echo_server
    with TcpEchoClient("127.0.0.1", server.port) as client:
        replies = [client.call(bytes(size)) for size in (0, 1, 64, 14000, 100_000)]
    assert server.requests == 5
    # One clock on loopback: the server's stamps fall inside each call's window on the client's wall clock (to the
    # few µs by which clock_pair places the window's start), the reply after the request.
    slack = 1_000_000
    for reply in replies:
        assert reply.rtt_ns > 0
        recv, send = reply.server.recv_utc_ns, reply.server.send_utc_ns
        assert reply.started_utc_ns - slack <= recv <= send <= reply.started_utc_ns + reply.rtt_ns + slack, reply


def test_the_wire_format_is_a_length_and_the_servers_two_stamps(echo_server):
    server, _ = echo_server
    before = time.time_ns()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        # Two requests in one write: the server frames them, it does not rely on reads lining up.
        sock.sendall(struct.pack(">I", 3) + b"abc" + struct.pack(">I", 70000) + bytes(70000))
        reply = b""
        while len(reply) < 40:
            reply += sock.recv(40 - len(reply))
    after = time.time_ns()
    (n1, recv1, send1), (n2, recv2, send2) = struct.iter_unpack(">Iqq", reply)
    assert (n1, n2) == (3, 70000)
    # Wall-clock ns since the epoch, in the order things happened: the second request was read after the
    # first reply was written.
    assert before <= recv1 <= send1 <= recv2 <= send2 <= after


def test_an_oversize_request_closes_that_connection_only_and_is_logged(echo_server):
    server, log = echo_server
    client = TcpEchoClient("127.0.0.1", server.port, timeout_s=5)
    client.connect()
    # The server closes with the payload unread: Linux then answers with a reset, which the client meets as a
    # reset or, when the close came before the rest of its bytes, as the end of the stream; both are the refusal.
    with pytest.raises(TcpEchoError, match="closed by the server|reset by peer"):
        client.call(bytes(100_001))
    assert not client.connected
    assert "100001 bytes exceeds --max-message-bytes 100000" in log.getvalue()
    assert server.refused == 1
    # The server goes on serving, the bound itself included.
    client.connect()
    assert client.call(bytes(100_000)).rtt_ns > 0
    client.close()


def test_a_stopped_server_gives_errors_not_hangs(echo_server):
    server, _ = echo_server
    client = TcpEchoClient("127.0.0.1", server.port, timeout_s=5)
    client.connect()
    client.call(b"x")
    server.stop()
    started = time.monotonic()
    with pytest.raises(TcpEchoError):
        client.call(b"x")
    with pytest.raises(TcpEchoError, match="refused"):
        client.connect()
    with pytest.raises(TcpEchoError, match="refused"):
        time_connect("127.0.0.1", server.port, timeout_s=5)
    assert time.monotonic() - started < 2


def test_time_connect_times_a_handshake(echo_server):
    server, _ = echo_server
    assert 0 < time_connect("127.0.0.1", server.port) < 1e9


def test_a_port_in_use_is_one_clear_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(LabkitError, match="cannot listen for the TCP echo on 127.0.0.1:\\d+: Address already in use"):
            TcpEchoServer("127.0.0.1", taken.getsockname()[1], max_message_bytes=10).start()


def test_labkit_echo_serve_serves_it_on_a_second_port_and_stops_it():
    proc = subprocess.Popen([LABKIT, "echo", "serve", "--bind", "127.0.0.1:0", "--tcp-echo-port", "0",
                             "--max-message-bytes", "1000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = json.loads(proc.stdout.readline())
        port = ready["tcp_echo_port"]
        assert port not in (0, ready["port"])
        with TcpEchoClient("127.0.0.1", port) as client:
            client.call(bytes(1000))
            with pytest.raises(TcpEchoError):
                client.call(bytes(1001))  # the gRPC service's bound applies here too
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=15)
    assert proc.returncode == 0, stderr
    assert "1001 bytes exceeds --max-message-bytes 1000" in stderr and "Traceback" not in stderr
    with pytest.raises(TcpEchoError, match="refused"):
        time_connect("127.0.0.1", port, timeout_s=5)


def test_a_call_is_bounded_by_its_timeout_as_a_whole_not_per_step():
    """Issue 15: sending and waiting for the reply each stayed under the timeout, so a call of 1.5 timeouts was ok."""
    payload = bytes(32 * 2**20)  # far more than loopback's socket buffers hold: sending waits for the server to read

    with socket.create_server(("127.0.0.1", 0)) as listener:

        def slow_server():
            conn, _ = listener.accept()
            with conn:
                time.sleep(0.7)  # the sender blocks meanwhile
                (length,) = struct.unpack(">I", _read(conn, 4))
                _read(conn, length)
                time.sleep(0.7)  # then the reply takes its time
                conn.sendall(struct.pack(">I", length))
                _read(conn, 1)  # until the client closes

        import threading

        thread = threading.Thread(target=slow_server, daemon=True)
        thread.start()
        client = TcpEchoClient("127.0.0.1", listener.getsockname()[1], timeout_s=1.0)
        client.connect()
        with pytest.raises(TcpEchoError, match="timed out"):
            client.call(payload)
        client.close()
        thread.join(5)


def _read(conn: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(min(size - len(data), 2**20))
        if not chunk:
            break
        data += chunk
    return bytes(data)

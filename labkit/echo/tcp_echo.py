"""A raw TCP echo: the floor under "an application-level round trip", beside the gRPC echo.

``labkit echo serve --tcp-echo-port PORT`` serves it from the same process as
the gRPC service, on the same host as ``--bind``, so both probes of a series
reach the same process over the same path.

Framing (both directions)::

    request:  4-byte big-endian length N, then N bytes of payload
    reply:    4-byte big-endian N (the length received), then the server's wall
              clock (8-byte big-endian ns since the epoch) when the request's
              last byte was read and when the reply was written

The reply carries the length, as the gRPC ``Echo`` does
(``EchoResponse{payload_length}``), and the stamps the gRPC servers send as
trailers (:mod:`labkit.echo.stamps`), so the two probes move the same payload
one way and 20 bytes back, and differ only in what gRPC and HTTP/2 add.
A connection carries any number of requests, one at a time.

A request longer than the server's ``max_message_bytes`` (the same bound as
the gRPC service's) is refused before any of its payload is read: the server
logs one line on stderr and closes that connection; it goes on serving.

:class:`TcpEchoServer` runs the asyncio server in a thread of its own, so it
can live beside grpc's thread pool; :class:`TcpEchoClient` times calls on one
open (warm) connection with blocking sockets, which keeps the timed window to
one ``sendall`` and the reads of the reply. Nothing here imports grpc.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import sys
import threading
import time
from typing import NamedTuple, TextIO

from labkit.echo.stamps import ServerStamps, clock_pair
from labkit.errors import LabkitError

_LENGTH = struct.Struct(">I")
#: The reply: the length received, the server's wall clock at the request's end and at the reply.
_REPLY = struct.Struct(">Iqq")
#: Largest length the 4-byte prefix can carry.
MAX_FRAME_BYTES = 2**32 - 1


def _split_host(host: str) -> str:
    """``[::1]`` -> ``::1``: socket calls take IPv6 literals without brackets."""
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


class TcpEchoServer:
    """The raw TCP echo, served by an asyncio loop in a background thread.

    ``start()`` returns once the port listens (or raises :class:`LabkitError`
    with the operating system's reason); ``stop()`` closes the listener and
    every open connection and ends the thread.
    """

    def __init__(self, host: str, port: int = 0, *, max_message_bytes: int, log: TextIO | None = None):
        if max_message_bytes < 1:
            raise LabkitError(f"max message size must be at least 1 byte, not {max_message_bytes}")
        self.host = _split_host(host)
        self.requested_port = port
        self.max_message_bytes = max_message_bytes
        self.port: int | None = None
        self._log = log if log is not None else sys.stderr
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._started = threading.Event()
        self._error: BaseException | None = None
        self.requests = 0
        self.refused = 0

    def start(self) -> int:
        """Listen and serve; return the port (a free one when asked for port 0)."""
        self._thread = threading.Thread(target=self._run, name="tcp-echo", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            self._thread.join()
            raise LabkitError(f"cannot listen for the TCP echo on {self.host}:{self.requested_port}: {self._error}")
        return self.port

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._handle, self.host, self.requested_port, reuse_address=True)
                )
            except OSError as exc:
                # asyncio wraps the reason in a long sentence; the operating system's words are enough.
                self._error = os.strerror(exc.errno) if exc.errno else exc
                return
            self.port = self._server.sockets[0].getsockname()[1]
            self._started.set()
            loop.run_forever()
        finally:
            self._started.set()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            # Replies are a few bytes: send them at once, never wait for Nagle.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = writer.get_extra_info("peername")
        try:
            while True:
                try:
                    header = await reader.readexactly(_LENGTH.size)
                except asyncio.IncompleteReadError:
                    return  # the client closed the connection between requests
                (length,) = _LENGTH.unpack(header)
                if length > self.max_message_bytes:
                    self.refused += 1
                    print(
                        f"labkit echo serve: TCP echo from {peer}: request of {length} bytes exceeds "
                        f"--max-message-bytes {self.max_message_bytes}; connection closed",
                        file=self._log, flush=True,
                    )
                    return
                remaining = length
                while remaining:  # read in pieces: the payload is only counted, never kept whole
                    chunk = await reader.read(min(remaining, 1 << 16))
                    if not chunk:
                        return
                    remaining -= len(chunk)
                received_utc_ns, started_ns = clock_pair()
                self.requests += 1
                writer.write(_REPLY.pack(length, received_utc_ns,
                                         received_utc_ns + time.perf_counter_ns() - started_ns))
                await writer.drain()
        except (ConnectionError, OSError):
            return
        finally:
            self._writers.discard(writer)
            writer.close()

    def stop(self) -> None:
        """Stop listening, close every connection, end the thread (idempotent)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            # Closing a connection ends its handler at its next read; cancelling
            # the handler instead makes asyncio's stream callback log a traceback.
            for writer in list(self._writers):
                writer.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if tasks:
                _, stuck = await asyncio.wait(tasks, timeout=1.0)
                for task in stuck:
                    task.cancel()
            loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), loop)
        thread.join(timeout=5)

    def __enter__(self) -> "TcpEchoServer":
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


class TcpEchoError(LabkitError):
    """A TCP echo call failed: refused, reset, timed out, or a wrong reply."""


class TcpEchoReply(NamedTuple):
    """One timed TCP echo: ns from just before the send to the reply's last byte, the wall clock at its start,
    and the server's stamps."""

    rtt_ns: int
    started_utc_ns: int
    server: ServerStamps


class TcpEchoClient:
    """Timed echo calls on one open TCP connection to a :class:`TcpEchoServer`.

    :meth:`connect` opens the connection (outside any timed window);
    :meth:`call` sends one request and returns the nanoseconds from just
    before the send to the last byte of the reply, with the server's stamps. A failed call closes the
    connection and raises :class:`TcpEchoError`; :attr:`connected` then says
    that the next call needs :meth:`connect` first.
    """

    def __init__(self, host: str, port: int, *, timeout_s: float = 10.0):
        self.host = _split_host(host)
        self.port = port
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def connect(self) -> None:
        self.close()
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
        except OSError as exc:
            raise TcpEchoError(f"connect to {self.host}:{self.port}: {_reason(exc)}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock

    def call(self, payload: bytes) -> "TcpEchoReply":
        """One round trip with ``payload``: its duration, its start on the wall clock, the server's stamps."""
        if self._sock is None:
            raise TcpEchoError("not connected")
        if len(payload) > MAX_FRAME_BYTES:
            raise TcpEchoError(f"payload of {len(payload)} bytes does not fit the 4-byte length prefix")
        request = _LENGTH.pack(len(payload)) + payload
        sock = self._sock
        sock.settimeout(self.timeout_s)
        started_utc_ns, started = clock_pair()
        try:
            sock.sendall(request)
            # The timeout bounds the call, not each step: waiting for the reply gets what sending left of it.
            sock.settimeout(max(1e-6, self.timeout_s - (time.perf_counter_ns() - started) / 1e9))
            reply = _recv_exactly(sock, _REPLY.size)
        except (OSError, TcpEchoError) as exc:
            self.close()
            raise TcpEchoError(_reason(exc) if isinstance(exc, OSError) else str(exc)) from None
        elapsed = time.perf_counter_ns() - started
        length, received_utc_ns, sent_utc_ns = _REPLY.unpack(reply)
        if length != len(payload):
            self.close()
            raise TcpEchoError(f"server reported {length} bytes, sent {len(payload)}")
        return TcpEchoReply(elapsed, started_utc_ns, ServerStamps(None, received_utc_ns, sent_utc_ns))

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> "TcpEchoClient":
        self.connect()
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise TcpEchoError("connection closed by the server")
        data += chunk
    return bytes(data)


def _reason(exc: OSError) -> str:
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    return exc.strerror or str(exc) or type(exc).__name__


def time_connect(host: str, port: int, *, timeout_s: float = 10.0) -> int:
    """Nanoseconds to open a TCP connection (SYN to SYN-ACK, one RTT); the connection is then closed."""
    address = (_split_host(host), port)
    started = time.perf_counter_ns()
    try:
        sock = socket.create_connection(address, timeout=timeout_s)
    except OSError as exc:
        raise TcpEchoError(f"connect to {address[0]}:{port}: {_reason(exc)}") from None
    elapsed = time.perf_counter_ns() - started
    sock.close()
    return elapsed

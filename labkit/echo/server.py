"""The gRPC echo server: ``Echo``, ``EchoStream`` and ``Upload`` of ``proto/echo.proto``.

:func:`start_server` builds and starts a server for use from Python (tests, the
testbed, benchmarks); :func:`serve_until_signalled` is what ``labkit echo serve``
adds on top: a ready line for the parent process and a graceful stop on
SIGTERM/SIGINT.

The handlers do as little as possible so that what a client measures is the
network and the gRPC stack, not the server's work: ``Echo`` returns only the
length it received.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from contextlib import ExitStack, contextmanager

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from labkit.echo.cputime import cpu_now
from labkit.echo.options import grpcio_arguments, merged
from labkit.version import __version__
from labkit.echo.address import parse_host_port
from labkit.echo.stamps import clock_pair, server_trailer
from labkit.errors import LabkitError
from labkit.limits import GRPC_DEFAULT_MESSAGE_BYTES
from labkit.proto import echo_pb2, echo_pb2_grpc

# Streams (EchoStream, Upload) hold a worker thread for their whole life, so
# the pool must be larger than the number of concurrent streams a load test opens.
DEFAULT_MAX_WORKERS = 32
#: Threads of the pool streams may never take: a unary call always finds one, however many streams are open.
THREADS_KEPT_FOR_UNARY = 8
#: A stream that sends nothing for this long is cancelled, and its thread freed.
DEFAULT_STREAM_IDLE_S = 60.0

DEFAULT_GRACE_S = 2.0

SERVICE_NAME = echo_pb2.DESCRIPTOR.services_by_name["EchoService"].full_name


class StreamGate:
    """At most ``limit`` streams at once (a stream beyond it is refused with RESOURCE_EXHAUSTED, at once), and each
    cancelled once it has sent nothing for ``idle_s``: streams hold a pool thread each, and without both, 32 streams
    that never send would leave no thread for any other call."""

    def __init__(self, limit: int, idle_s: float):
        self.limit, self.idle_s = limit, idle_s
        self._free = threading.BoundedSemaphore(limit)
        self._last: dict = {}  # context of each open stream -> monotonic time of its last message
        self._lock = threading.Lock()
        self._watchdog: threading.Thread | None = None

    def messages(self, request_iterator, context):
        """``request_iterator`` while admitted: refused when ``limit`` streams are open, its idle time watched."""
        if not self._free.acquire(blocking=False):
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"this server serves at most {self.limit} streams at once; try again later")
        try:
            self._touch(context)
            for message in request_iterator:
                self._touch(context)
                yield message
        finally:
            with self._lock:
                self._last.pop(context, None)
            self._free.release()

    def _touch(self, context) -> None:
        with self._lock:
            self._last[context] = time.monotonic()
            if self._watchdog is None:
                self._watchdog = threading.Thread(target=self._watch, name="echo-stream-idle", daemon=True)
                self._watchdog.start()

    def _watch(self) -> None:
        while True:
            time.sleep(min(1.0, self.idle_s / 4))
            now = time.monotonic()
            with self._lock:
                idle = [context for context, last in self._last.items() if now - last > self.idle_s]
            for context in idle:
                context.cancel()


class EchoServicer(echo_pb2_grpc.EchoServiceServicer):
    """Answers every request with its length; counts and hashes uploads (streams through a :class:`StreamGate`)."""

    def __init__(self, gate: StreamGate | None = None):
        self.gate = gate or StreamGate(DEFAULT_MAX_WORKERS - THREADS_KEPT_FOR_UNARY, DEFAULT_STREAM_IDLE_S)

    def Echo(self, request, context):
        # The handler's own time (the request already read and decoded) and its wall clock at both ends go back
        # in trailers, so that a client can tell server time from network time, and the way out from the way
        # back; grpc-go's echo sends the same.
        received_utc_ns, started_ns = clock_pair()
        response = echo_pb2.EchoResponse(payload_length=len(request.payload))
        context.set_trailing_metadata(server_trailer(received_utc_ns, started_ns))
        return response

    def EchoStream(self, request_iterator, context):
        for request in self.gate.messages(request_iterator, context):
            yield echo_pb2.EchoResponse(payload_length=len(request.payload))

    def Upload(self, request_iterator, context):
        cpu_start = cpu_now()
        # What the client says it sends (optional metadata; gupload-style clients send none).
        expected = dict(context.invocation_metadata())
        # Hash while receiving so the answer costs no extra pass over the data
        # and the server never holds more than one chunk.
        digest = hashlib.sha256()
        received = 0
        chunks = 0
        for chunk in self.gate.messages(request_iterator, context):
            digest.update(chunk.content)
            received += len(chunk.content)
            chunks += 1
        sha256 = digest.hexdigest()
        problems = upload_mismatches(expected.get(EXPECTED_LENGTH_METADATA), expected.get(EXPECTED_SHA256_METADATA),
                                     received, sha256)
        # The process's CPU from the call's start to its answer, for uploaders that time both ends.
        context.set_trailing_metadata(
            [(f"labkit-server-{key.replace('_', '-')}", "" if value is None else repr(value))
             for key, value in cpu_now().since(cpu_start).items()]
        )
        return echo_pb2.UploadStatus(
            message="; ".join(problems) if problems else f"received {chunks} chunks",
            code=echo_pb2.FAILED if problems else echo_pb2.OK,
            bytes_received=received,
            sha256=sha256,
        )


# Optional Upload metadata: the length and SHA-256 the client sends, checked by the server.
EXPECTED_LENGTH_METADATA = "labkit-expected-length"
EXPECTED_SHA256_METADATA = "labkit-expected-sha256"


def upload_mismatches(expected_length: str | None, expected_sha256: str | None, received: int, sha256: str) -> list[str]:
    """How an upload differs from what its client declared (nothing declared: nothing to differ)."""
    problems = []
    if expected_length is not None and expected_length != str(received):
        problems.append(f"expected {expected_length} bytes, received {received}")
    if expected_sha256 is not None and expected_sha256.lower() != sha256:
        problems.append(f"expected sha256 {expected_sha256}, received {sha256}")
    return problems


def start_server(
    bind: str,
    *,
    max_message_bytes: int = GRPC_DEFAULT_MESSAGE_BYTES,
    tls_cert_pem: bytes | None = None,
    tls_key_pem: bytes | None = None,
    reflection_enabled: bool = True,
    max_workers: int = DEFAULT_MAX_WORKERS,
    permit_keepalive_ms: int | None = None,
    grpc_options: dict | None = None,
    stream_idle_s: float = DEFAULT_STREAM_IDLE_S,
) -> tuple[grpc.Server, int]:
    """Start an echo server listening on ``bind`` (``HOST:PORT``, port 0 = any free port).

    Returns the started server and the port it listens on. With both
    ``tls_cert_pem`` and ``tls_key_pem`` (PEM bytes) it serves TLS only.
    Messages larger than ``max_message_bytes`` are refused with
    RESOURCE_EXHAUSTED; the server goes on serving. ``permit_keepalive_ms``
    accepts client keepalive pings that often, even between calls (gRPC's
    default policy answers frequent pings with GOAWAY). ``grpc_options`` are
    parsed ``--grpc-option`` values (:mod:`labkit.echo.options`); they come last,
    so they override the defaults above. Streams take at most ``max_workers`` − :data:`THREADS_KEPT_FOR_UNARY`
    of the pool's threads and are cancelled after ``stream_idle_s`` without a message (:class:`StreamGate`).
    Stop it with ``server.stop(grace)``.
    """
    if (tls_cert_pem is None) != (tls_key_pem is None):
        raise LabkitError("TLS needs both a certificate and its private key")
    if max_message_bytes < 1:
        raise LabkitError(f"max message size must be at least 1 byte, not {max_message_bytes}")

    _check_bindable(bind)
    options = [
        # gRPC checks each incoming message against this before the handler
        # runs and fails that call alone with RESOURCE_EXHAUSTED.
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        # gRPC sets SO_REUSEPORT by default, which lets a second server bind a
        # port that is already in use and silently share its traffic. Binding
        # must fail loudly instead, so two experiments never mix.
        ("grpc.so_reuseport", 0),
    ]
    if permit_keepalive_ms is not None:
        options += [
            ("grpc.http2.min_ping_interval_without_data_ms", permit_keepalive_ms),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_ping_strikes", 0),
        ]
    if grpc_options:
        options = merged(options, grpcio_arguments(grpc_options))
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="echo-rpc"),
        options=options,
    )
    if max_workers <= THREADS_KEPT_FOR_UNARY:
        raise LabkitError(f"the server needs more than {THREADS_KEPT_FOR_UNARY} worker threads, not {max_workers}")
    _add_services(server, StreamGate(max_workers - THREADS_KEPT_FOR_UNARY, stream_idle_s), reflection_enabled)
    try:
        if tls_cert_pem is not None:
            credentials = grpc.ssl_server_credentials([(tls_key_pem, tls_cert_pem)])
            port = server.add_secure_port(bind, credentials)
        else:
            port = server.add_insecure_port(bind)
    except RuntimeError as exc:  # grpcio raises on failure to bind
        raise LabkitError(f"cannot listen on {bind}: {exc}") from None
    if port == 0:  # older grpcio reports failure as port 0 instead
        raise LabkitError(f"cannot listen on {bind} (address in use or not on this host?)")
    server.start()
    return server, port


def _add_services(server: grpc.Server, gate: StreamGate, reflection_enabled: bool) -> None:
    """The echo service, the standard health service and (``reflection_enabled``) server reflection."""
    echo_pb2_grpc.add_EchoServiceServicer_to_server(EchoServicer(gate), server)
    # The standard health service, as grpc-go's echo serves it: SERVING for the server ("") and the echo service,
    # so load balancers, grpcurl and grpc_health_probe see the same answer from either implementation.
    health_servicer = health.HealthServicer()
    for service in ("", SERVICE_NAME):
        health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if reflection_enabled:
        # Lets grpcurl and ghz discover the schema without the .proto file.
        reflection.enable_server_reflection((SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server)


def _check_bindable(bind: str) -> None:
    """Fail with one clear line if ``bind`` cannot be listened on (not local, in use, unknown).

    grpcio reports a failed bind only as "Failed to bind" and logs the reason
    (e.g. "Address already in use") on stderr from its C core; trying a
    throwaway socket first gives the user the operating system's reason in
    one line. grpc binds every address a host name resolves to and succeeds
    if any one works, so this check does the same.
    """
    try:
        host, port = parse_host_port(bind, allow_port_zero=True)
    except ValueError as exc:
        raise LabkitError(str(exc)) from None
    try:
        candidates = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise LabkitError(f"cannot listen on {bind}: {exc.strerror}") from None
    reasons = []
    for family, kind, proto, _, address in candidates:
        with socket.socket(family, kind, proto) as probe:
            # Same option grpc sets, so a port left in TIME_WAIT is not reported as busy.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
                return
            except OSError as exc:
                reasons.append(exc.strerror)
    raise LabkitError(f"cannot listen on {bind}: {'; '.join(sorted(set(reasons)))}")


@contextmanager
def running_server(bind: str = "127.0.0.1:0", *, grace_s: float = 0.5, **kwargs) -> Iterator[int]:
    """Run an echo server for the duration of a ``with`` block; yields its port."""
    server, port = start_server(bind, **kwargs)
    try:
        yield port
    finally:
        server.stop(grace_s).wait()


def serve_until_signalled(
    bind: str,
    *,
    grace_s: float = DEFAULT_GRACE_S,
    out=None,
    tcp_echo_port: int | None = None,
    http2_port: int | None = None,
    max_upload_bytes: int | None = None,
    **kwargs,
) -> None:
    """Start a server, write the ready line, and stop gracefully on SIGTERM or SIGINT.

    The ready line is one JSON object on ``out`` (stdout by default), written
    only once the port is listening, so a parent process can read it and
    connect at once.

    With ``tcp_echo_port`` (0 = a free port) the same process also serves the
    raw TCP echo of :mod:`labkit.echo.tcp_echo` on the host of ``bind``, with
    the same message bound; the ready line then has ``tcp_echo_port``.

    With ``http2_port`` (0 = a free port) it also serves ``POST /upload`` over
    HTTP/2 (:mod:`labkit.echo.http2`; h2c, or TLS with ALPN h2 when the gRPC
    server has TLS), bounded to ``max_upload_bytes`` per request body; the
    ready line then has ``http2_port`` and ``max_upload_bytes``.
    """
    out = out or sys.stdout
    stop_requested = threading.Event()
    received: list[str] = []

    def request_stop(signum, _frame):
        received.append(signal.Signals(signum).name)
        stop_requested.set()

    # Install handlers before listening: a parent may signal as soon as it has
    # read the ready line, and the default SIGTERM action would skip the
    # graceful stop. Installing them also undoes an inherited SIG_IGN.
    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with ExitStack() as endpoints:
            # Each endpoint's stop is registered as it starts: a later one failing stops the earlier ones,
            # and at the end they stop in reverse order, in-flight calls getting grace_s.
            server, port = start_server(bind, **kwargs)
            endpoints.callback(lambda: server.stop(grace_s).wait())
            ready = _ready_line(bind, port, kwargs)
            host = parse_host_port(bind, allow_port_zero=True)[0]
            if tcp_echo_port is not None:
                ready["tcp_echo_port"] = _start_tcp_echo(endpoints, host, tcp_echo_port, kwargs)
            if http2_port is not None:
                ready.update(_start_http2(endpoints, host, http2_port, max_upload_bytes, grace_s, kwargs))
            started = time.monotonic()
            out.write(json.dumps(ready) + "\n")
            out.flush()
            # Wait with a timeout so the signal handler always gets a chance to run
            # promptly, whatever the platform does with blocking waits.
            while not stop_requested.wait(0.5):
                pass
        print(f"labkit echo serve: stopped on {received[0]} after {time.monotonic() - started:.1f} s", file=sys.stderr)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _ready_line(bind: str, port: int, options: dict) -> dict:
    """What a parent process learns from the ready line: where the server listens and how it is set up."""
    return {
        "event": "ready",
        "port": port,
        "bind": bind,
        "pid": os.getpid(),
        "tls": options.get("tls_cert_pem") is not None,
        "reflection": options.get("reflection_enabled", True),
        "max_message_bytes": options.get("max_message_bytes", GRPC_DEFAULT_MESSAGE_BYTES),
        "labkit_version": __version__,
        "grpcio_version": grpc.__version__,
        "impl": "python",
        "grpc_options": {key: value for key, value in (options.get("grpc_options") or {}).items()},
    }


def _start_tcp_echo(endpoints: ExitStack, host: str, port: int, options: dict) -> int:
    """Start the raw TCP echo beside the gRPC server, with the same message bound; its port."""
    from labkit.echo.tcp_echo import TcpEchoServer

    tcp_echo = TcpEchoServer(host, port, max_message_bytes=options.get("max_message_bytes", GRPC_DEFAULT_MESSAGE_BYTES))
    tcp_echo.start()
    endpoints.callback(tcp_echo.stop)
    return tcp_echo.port


def _start_http2(endpoints: ExitStack, host: str, port: int, max_upload_bytes: int | None, grace_s: float,
                 options: dict) -> dict:
    """Start the HTTP/2 endpoint (TLS when the gRPC server has it); its fields of the ready line."""
    from labkit.echo.http2 import DEFAULT_MAX_UPLOAD_BYTES, Http2Server

    http2 = Http2Server(
        f"{host}:{port}",
        max_upload_bytes=DEFAULT_MAX_UPLOAD_BYTES if max_upload_bytes is None else max_upload_bytes,
        tls_cert_pem=options.get("tls_cert_pem"), tls_key_pem=options.get("tls_key_pem"),
    )
    http2.start()
    endpoints.callback(lambda: http2.stop(grace_s))
    return {"http2_port": http2.port, "max_upload_bytes": http2.max_upload_bytes, "http2_window_bytes": http2.window_bytes}

"""The HTTP/2 side of the echo server: ``POST /upload`` next to gRPC's ``Upload``, and its client.

Experiment 3 of the research brief compares a client-streaming gRPC upload
with "a plain HTTP/2 POST of the same bytes". ``labkit echo serve
--http2-port`` serves that POST from the same process as the gRPC service:

- plain text as h2c with prior knowledge (the client starts with the HTTP/2
  preface; there is no HTTP/1.1 upgrade dance), or TLS with ALPN ``h2`` using
  the server's ``--tls-cert``/``--tls-key``;
- ``POST /upload`` hashes the body as it streams in (never holding more than
  one DATA frame), checks it against ``labkit-expected-length`` and
  ``labkit-expected-sha256`` request headers when the client sends them, and
  answers with JSON ``{"bytes_received", "sha256", "server_cpu_s", ...}``:
  200 when it matches, 422 when it does not;
- a body larger than ``max_upload_bytes`` (announced by content-length or
  found while counting) gets 413 at once and the rest of its stream is
  refused with RST_STREAM(NO_ERROR), as RFC 9113 §8.1 allows; the server goes
  on serving.
- ``POST /echo``, the HTTP/2 baseline of ``labkit load``, answers
  ``{"payload_length": N}`` like gRPC's ``Echo``: the body is counted, not
  hashed, and no CPU time is read, so under load both stacks do the same work.

Why the ``h2`` library directly rather than hypercorn: the endpoint is one
route whose whole point is to be measured. With h2 the server's per-frame work
is visible here (hash, count, hand back flow-control credit), the flow-control
windows are set explicitly (:data:`DEFAULT_WINDOW_BYTES`) instead of being a
server framework's default, and the 413 is sent at the exact byte that crosses
the bound. It also keeps the deployed agent small: h2, hpack and hyperframe
are three pure-Python wheels, where hypercorn adds an ASGI stack (h11,
wsproto, priority, taskgroup). The same library drives the client
(:class:`Http2Client`), so client and server speak the same HTTP/2 and the
client's per-chunk cost is one DATA frame per chunk and one socket write, with
no event loop in between, which is what makes its CPU comparable to gRPC's.

Connections are served one thread each (blocking sockets), like gRPC's own
thread pool; the upload experiment uses one connection at a time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from labkit.echo.address import parse_host_port
from labkit.echo.cputime import cpu_now
from labkit.errors import LabkitError

UPLOAD_PATH = "/upload"
# labkit load's HTTP/2 baseline: like gRPC's Echo, the answer is only the body's length.
ECHO_PATH = "/echo"
EXPECTED_LENGTH_HEADER = "labkit-expected-length"
EXPECTED_SHA256_HEADER = "labkit-expected-sha256"

# Big enough for any experiment in the brief (a 143 MB file), small enough that
# a runaway client is refused rather than hashed forever.
DEFAULT_MAX_UPLOAD_BYTES = 1 << 30

# The receive window the server grants each stream and the connection. HTTP/2's
# default (65,535 bytes) caps a single stream at one window per round trip,
# 6.5 MB/s on a 10 ms path, which would measure the default, not the protocol.
# gRPC grows its windows by BDP probing; a fixed 16 MiB covers 1.3 Gbit/s at a
# 100 ms RTT, so on the paths labkit measures the window never limits the POST.
# The server hands credit back as soon as it has hashed a frame.
DEFAULT_WINDOW_BYTES = 16 * 2**20

# The largest DATA frame the server accepts: HTTP/2's default and gRPC's, so
# both transports cut a chunk into the same frames.
MAX_FRAME_BYTES = 16384

_SOCKET_READ_BYTES = 256 * 1024
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_HTTP1_REFUSAL_TEXT = b"this endpoint speaks HTTP/2 only (h2c with prior knowledge, or TLS with ALPN h2)\n"
_HTTP1_REFUSAL = (
    b"HTTP/1.1 505 HTTP Version Not Supported\r\nContent-Type: text/plain\r\nConnection: close\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_HTTP1_REFUSAL_TEXT), _HTTP1_REFUSAL_TEXT)
)


def _read_pem_pair(cert_pem: bytes, key_pem: bytes, context: ssl.SSLContext) -> None:
    """Load a certificate and key given as PEM bytes (ssl only reads files: a private temporary one)."""
    with tempfile.TemporaryDirectory(prefix="labkit-h2-") as directory:  # mode 0700
        cert_path, key_path = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
        with open(cert_path, "wb") as cert_file:
            cert_file.write(cert_pem)
        with open(os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as key_file:
            key_file.write(key_pem)
        try:
            context.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as exc:
            raise LabkitError(f"cannot use the TLS certificate and key: {exc.reason or exc}") from None


# -- the server ------------------------------------------------------------------------------


@dataclass
class _Upload:
    """One ``POST /upload`` stream in progress."""

    cpu_start: Any
    expected_length: int | None
    expected_sha256: str | None
    digest: Any = field(default_factory=hashlib.sha256)
    received: int = 0
    done: bool = False  # answered (an early 413, or the final reply)
    echo: bool = False  # a POST /echo: counted, not hashed, answered with its length


_HTTP1_REQUEST_LINE = re.compile(rb"^[A-Z]+ \S+ HTTP/1\.[01]\r?\n")


class _ServerConnection(h2.connection.H2Connection):
    """h2's connection, with the response bodies still to send: each is sent as far as the peer's flow-control
    windows allow, and the rest when a WINDOW_UPDATE or a larger initial window arrives (RFC 9113 §6.9)."""

    def __init__(self, config):
        super().__init__(config=config)
        self.pending: dict[int, tuple[bytes, bool]] = {}  # stream -> (body left, reset with NO_ERROR once sent)

    def send_body(self, stream_id: int, body: bytes, reset_after: bool) -> None:
        self.pending[stream_id] = (body, reset_after)
        self.flush(stream_id)

    def flush(self, stream_id: int | None = None) -> None:
        for sid in [stream_id] if stream_id is not None else list(self.pending):
            if sid not in self.pending:
                continue
            body, reset_after = self.pending.pop(sid)
            try:
                while body:
                    room = min(self.local_flow_control_window(sid), self.max_outbound_frame_size)
                    if room <= 0:
                        self.pending[sid] = (body, reset_after)
                        break
                    chunk, body = body[:room], body[room:]
                    self.send_data(sid, chunk, end_stream=not body)
                if not body and reset_after:
                    # Answered before the request ended: ask the client to stop sending (no error).
                    self.reset_stream(sid, error_code=h2.errors.ErrorCodes.NO_ERROR)
            except h2.exceptions.StreamClosedError:
                self.pending.pop(sid, None)  # the client reset it, or it ended: nothing more to send there


#: Connections served at once (one thread each); a connection beyond them is closed as it is accepted.
DEFAULT_MAX_CONNECTIONS = 128
#: A connection that sends nothing this long is closed, and its thread freed.
DEFAULT_IDLE_S = 60.0


class Http2Server:
    """The HTTP/2 upload endpoint on ``bind`` (``HOST:PORT``, port 0 = any free port).

    :meth:`start` listens and returns the port; :meth:`stop` ends it. At most ``max_connections`` connections
    are served at once (a thread each: 500 idle connections used to make 542 threads), and one that sends nothing
    for ``idle_s`` is closed.
    """

    def __init__(
        self,
        bind: str,
        *,
        max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
        tls_cert_pem: bytes | None = None,
        tls_key_pem: bytes | None = None,
        window_bytes: int = DEFAULT_WINDOW_BYTES,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        idle_s: float = DEFAULT_IDLE_S,
    ):
        if (tls_cert_pem is None) != (tls_key_pem is None):
            raise LabkitError("TLS needs both a certificate and its private key")
        if max_upload_bytes < 0:
            raise LabkitError(f"max upload size must not be negative, not {max_upload_bytes}")
        if not 65535 <= window_bytes <= 2**31 - 1:
            raise LabkitError(f"HTTP/2 window must be between 65535 and 2^31-1 bytes, not {window_bytes}")
        self.bind = bind
        self.max_connections, self.idle_s = max_connections, idle_s
        self.max_upload_bytes = max_upload_bytes
        self.window_bytes = window_bytes
        self.tls = tls_cert_pem is not None
        self._ssl: ssl.SSLContext | None = None
        if self.tls:
            self._ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._ssl.minimum_version = ssl.TLSVersion.TLSv1_2  # RFC 9113 §9.2
            self._ssl.set_alpn_protocols(["h2"])
            _read_pem_pair(tls_cert_pem, tls_key_pem, self._ssl)
        self._listener: socket.socket | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._connections: dict[socket.socket, set[int]] = {}  # socket -> ids of streams in progress
        self._threads: list[threading.Thread] = []
        self.port: int | None = None

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> int:
        try:
            host, port = parse_host_port(self.bind, allow_port_zero=True)
        except ValueError as exc:
            raise LabkitError(str(exc)) from None
        try:
            family, kind, proto, _, address = socket.getaddrinfo(
                host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0]
        except socket.gaierror as exc:
            raise LabkitError(f"cannot listen on {self.bind}: {exc.strerror}") from None
        listener = socket.socket(family, kind, proto)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(address)
        except OSError as exc:
            listener.close()
            raise LabkitError(f"cannot listen on {self.bind}: {exc.strerror}") from None
        listener.listen(128)
        # accept() wakes every 0.2 s to notice stop(): closing a socket does not wake a blocked accept.
        listener.settimeout(0.2)
        self._listener = listener
        self.port = listener.getsockname()[1]
        thread = threading.Thread(target=self._accept_loop, name="http2-accept", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self.port

    def stop(self, grace_s: float = 0.0) -> None:
        """Stop accepting; uploads in progress get ``grace_s`` to finish, then every connection is closed."""
        self._stopping.set()
        deadline = threading.Event()
        waited = 0.0
        while waited < grace_s:
            with self._lock:
                busy = any(self._connections.values())
            if not busy:
                break
            deadline.wait(0.05)
            waited += 0.05
        with self._lock:
            connections = list(self._connections)
        for sock in connections:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in list(self._threads):
            thread.join(timeout=2)
        if self._listener is not None:
            self._listener.close()

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                full = len(self._connections) >= self.max_connections
            if full:
                sock.close()  # the client sees the connection end; those being served keep their threads
                continue
            sock.settimeout(self.idle_s)  # a recv (or send) that waits this long ends the connection
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._connections[sock] = set()
                self._threads = [thread for thread in self._threads if thread.is_alive()]
                thread = threading.Thread(target=self._serve, args=(sock,), name="http2-conn", daemon=True)
                self._threads.append(thread)
            thread.start()

    # -- one connection -----------------------------------------------------------------
    def _serve(self, raw: socket.socket) -> None:
        sock = raw
        try:
            if self._ssl is not None:
                raw.settimeout(10)  # a client that never finishes the handshake does not hold a thread
                sock = self._ssl.wrap_socket(raw, server_side=True)
                if sock.selected_alpn_protocol() != "h2":
                    return  # TLS without h2 in ALPN: nothing here it could talk to
                sock.settimeout(self.idle_s)
            self._serve_h2(sock, raw)
        except (OSError, ssl.SSLError, h2.exceptions.H2Error):
            pass  # the client went away or broke the protocol: that connection ends, the server goes on
        finally:
            with self._lock:
                self._connections.pop(raw, None)
            _close_gracefully(sock)

    def _serve_h2(self, sock, raw: socket.socket) -> None:
        config = h2.config.H2Configuration(client_side=False, header_encoding=None)
        conn = _ServerConnection(config)
        conn.local_settings = h2.settings.Settings(
            client=False,
            initial_values={
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: self.window_bytes,
                h2.settings.SettingCodes.MAX_FRAME_SIZE: MAX_FRAME_BYTES,
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 100,
                h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 65536,
            },
        )
        first = sock.recv(_SOCKET_READ_BYTES)
        if first and not _HTTP2_PREFACE.startswith(first[: len(_HTTP2_PREFACE)]):
            if _HTTP1_REQUEST_LINE.match(first):  # an HTTP/1.x request: say why, in a language it reads
                sock.sendall(_HTTP1_REFUSAL)
            return
        conn.initiate_connection()
        conn.increment_flow_control_window(self.window_bytes - 65535)  # the connection's window, too
        uploads: dict[int, _Upload] = {}
        data = first
        while data:
            terminated = False
            try:
                events = conn.receive_data(data)
            except h2.exceptions.ProtocolError as error:  # a connection error: GOAWAY with its code, then close
                conn.close_connection(error_code=getattr(error, "error_code", h2.errors.ErrorCodes.PROTOCOL_ERROR))
                sock.sendall(conn.data_to_send())
                return
            for event in events:
                try:
                    self._handle(conn, event, uploads)
                except h2.exceptions.StreamClosedError:
                    pass  # the client closed or reset that stream meanwhile: nothing to answer there
                terminated = terminated or isinstance(event, h2.events.ConnectionTerminated)
            with self._lock:
                self._connections[raw] = set(uploads)
            outgoing = conn.data_to_send()
            if outgoing:
                sock.sendall(outgoing)
            if terminated:  # the client sent GOAWAY: it is done with this connection
                return
            data = sock.recv(_SOCKET_READ_BYTES)

    def _handle(self, conn, event, uploads: dict[int, _Upload]) -> None:
        if isinstance(event, h2.events.RequestReceived):
            self._request(conn, event, uploads)
        elif isinstance(event, h2.events.DataReceived):
            # Credit goes back whatever happens to the data, so other streams keep flowing.
            conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            upload = uploads.get(event.stream_id)
            if upload is None or upload.done:
                return
            upload.received += len(event.data)
            if upload.received > self.max_upload_bytes:
                self._too_large(conn, event.stream_id, upload, f"more than {self.max_upload_bytes} bytes")
                return
            if not upload.echo:
                upload.digest.update(event.data)
        elif isinstance(event, h2.events.StreamEnded):
            upload = uploads.pop(event.stream_id, None)
            if upload is not None and not upload.done:
                self._finish(conn, event.stream_id, upload)
        elif isinstance(event, h2.events.StreamReset):
            uploads.pop(event.stream_id, None)
            conn.pending.pop(event.stream_id, None)
        elif isinstance(event, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            conn.flush()  # more room: send what the windows held back

    def _request(self, conn, event, uploads: dict[int, _Upload]) -> None:
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in event.headers}
        stream_id = event.stream_id
        path = headers.get(":path", "").split("?", 1)[0]
        if path == ECHO_PATH and headers.get(":method") == "POST":
            # As little work as gRPC's Echo does (no CPU reading, no hash), so a load test compares the stacks.
            upload = _Upload(None, None, None, echo=True)
            uploads[stream_id] = upload
            if event.stream_ended is not None:  # an empty body
                uploads.pop(stream_id)
                self._finish(conn, stream_id, upload)
            return
        cpu_start = cpu_now()
        if path != UPLOAD_PATH:
            self._reply(conn, stream_id, 404, {"error": f"no such path {path!r}; POST {UPLOAD_PATH}"})
            return
        if headers.get(":method") != "POST":
            self._reply(conn, stream_id, 405, {"error": f"{UPLOAD_PATH} takes POST"})
            return
        try:
            length = int(headers["content-length"]) if "content-length" in headers else None
            expected_length = int(headers[EXPECTED_LENGTH_HEADER]) if EXPECTED_LENGTH_HEADER in headers else None
        except ValueError:
            self._reply(conn, stream_id, 400, {"error": "content-length and labkit-expected-length are integers"})
            return
        upload = _Upload(cpu_start, expected_length, headers.get(EXPECTED_SHA256_HEADER, "").lower() or None)
        uploads[stream_id] = upload
        if length is not None and length > self.max_upload_bytes:
            self._too_large(conn, stream_id, upload, f"content-length {length}")
        elif event.stream_ended is not None:  # an empty body: headers carried END_STREAM
            uploads.pop(stream_id)
            self._finish(conn, stream_id, upload)

    def _too_large(self, conn, stream_id: int, upload: _Upload, what: str) -> None:
        upload.done = True
        body = {"error": f"upload too large: {what}, the server's bound is {self.max_upload_bytes} bytes",
                "max_upload_bytes": self.max_upload_bytes, "bytes_received": upload.received}
        self._reply(conn, stream_id, 413, body, early=True)

    def _finish(self, conn, stream_id: int, upload: _Upload) -> None:
        if upload.echo:
            self._reply(conn, stream_id, 200, {"payload_length": upload.received})
            return
        sha256 = upload.digest.hexdigest()
        problems = []
        if upload.expected_length is not None and upload.expected_length != upload.received:
            problems.append(f"expected {upload.expected_length} bytes, received {upload.received}")
        if upload.expected_sha256 is not None and upload.expected_sha256 != sha256:
            problems.append(f"expected sha256 {upload.expected_sha256}, received {sha256}")
        body = {"bytes_received": upload.received, "sha256": sha256}
        if problems:
            body["error"] = "; ".join(problems)
        # Measured last, so the server's CPU covers the whole upload up to its answer.
        body.update({f"server_{key}": value for key, value in cpu_now().since(upload.cpu_start).items()})
        self._reply(conn, stream_id, 422 if problems else 200, body)

    def _reply(self, conn, stream_id: int, status: int, body: dict, early: bool = False) -> None:
        payload = json.dumps(body).encode()
        conn.send_headers(stream_id, [(b":status", str(status).encode()), (b"content-type", b"application/json"),
                                      (b"content-length", str(len(payload)).encode())])
        # Early (an upload refused as too large before it ended): once the answer is out, the client is asked to stop
        # sending. Other refusals (404, 405, 400) leave the client's half open, as RFC 9113 allows: a reset there
        # would pre-empt a stream error the client's next frames may call for.
        conn.send_body(stream_id, payload, reset_after=early)


def _close_gracefully(sock, linger_s: float = 1.0) -> None:
    """Close a connection with a FIN, not a reset: closing a socket with unread data makes the kernel send RST, and
    the client may then lose the GOAWAY (or the answer) sent just before. So: stop sending, read what is left for up
    to ``linger_s``, then close."""
    try:
        sock.settimeout(linger_s)
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + linger_s
        while time.monotonic() < deadline and sock.recv(_SOCKET_READ_BYTES):
            pass
    except (OSError, ValueError):
        pass  # already closed or reset by the client: nothing left to be graceful about
    finally:
        try:
            sock.close()
        except OSError:
            pass


@contextmanager
def running_http2_server(bind: str = "127.0.0.1:0", **kwargs) -> Iterator[Http2Server]:
    """An :class:`Http2Server` for the duration of a ``with`` block."""
    server = Http2Server(bind, **kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# -- the client ------------------------------------------------------------------------------


@dataclass
class Http2Reply:
    """What the server answered to one request."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)
    ended: bool = False
    reset_code: int | None = None  # RST_STREAM's error code, when the server reset the stream

    def json(self) -> dict[str, Any]:
        try:
            value = json.loads(bytes(self.body) or b"{}")
        except ValueError:
            return {"error": bytes(self.body[:200]).decode(errors="replace")}
        return value if isinstance(value, dict) else {"error": f"unexpected reply {value!r}"}


class Http2Error(LabkitError):
    """The HTTP/2 connection failed (refused, reset, closed, TLS, protocol)."""


class Http2Client:
    """One HTTP/2 connection to an upload endpoint: h2c with prior knowledge, or TLS with ALPN h2.

    ``target`` is ``HOST:PORT``; ``tls_root_pem`` (PEM bytes) turns on TLS and
    is the only root trusted; the certificate must name ``tls_server_name``
    (default: HOST, which may be an IP address, checked against IP SANs).
    Requests go one at a time, each on a new stream of the same connection.
    """

    def __init__(self, target: str, *, tls_root_pem: bytes | None = None, tls_server_name: str | None = None,
                 timeout_s: float = 30.0):
        try:
            self.host, self.port = parse_host_port(target, allow_port_zero=False)
        except ValueError as exc:
            raise LabkitError(str(exc)) from None
        self.target = target
        self.tls_root_pem = tls_root_pem
        self.tls_server_name = tls_server_name
        self.timeout_s = timeout_s
        self.sock = None
        self.conn: h2.connection.H2Connection | None = None
        self._replies: dict[int, Http2Reply] = {}
        self._settings_received = False

    def connect(self) -> "Http2Client":
        """Open the connection and wait for the server's SETTINGS (so windows and frame size are known)."""
        host = self.host.strip("[]")
        try:
            raw = socket.create_connection((host, self.port), timeout=self.timeout_s)
        except OSError as exc:
            raise Http2Error(f"cannot connect to {self.target}: {exc.strerror or exc}") from None
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as gRPC sets it
        self.sock = raw
        if self.tls_root_pem is not None:
            context = ssl.create_default_context(cadata=self.tls_root_pem.decode())
            context.set_alpn_protocols(["h2"])
            try:
                self.sock = context.wrap_socket(raw, server_hostname=self.tls_server_name or host)
            except ssl.SSLCertVerificationError as exc:
                raw.close()
                raise Http2Error(f"TLS with {self.target} failed: certificate verify failed ({exc.verify_message})") from None
            except (ssl.SSLError, OSError) as exc:
                raw.close()
                raise Http2Error(f"TLS with {self.target} failed: {exc}") from None
            if self.sock.selected_alpn_protocol() != "h2":
                self.close()
                raise Http2Error(f"{self.target} did not agree to HTTP/2 in TLS ALPN")
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
        self.conn.initiate_connection()
        self._flush()
        while not self._settings_received:
            self._receive()
        return self

    def close(self) -> None:
        if self.conn is not None and self.sock is not None:
            try:
                self.conn.close_connection()
                self._flush()
            except (OSError, h2.exceptions.H2Error, Http2Error):
                pass
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = self.conn = None

    def __enter__(self) -> "Http2Client":
        return self.connect() if self.conn is None else self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- wire ----------------------------------------------------------------------------
    def _flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            try:
                self.sock.sendall(data)
            except OSError as exc:
                raise Http2Error(f"sending to {self.target} failed: {exc.strerror or exc}") from None

    def _receive(self) -> None:
        """Read once from the socket and apply what arrived (raises if the connection is gone)."""
        try:
            data = self.sock.recv(_SOCKET_READ_BYTES)
        except TimeoutError:
            raise Http2Error(f"no answer from {self.target} for {self.timeout_s:g} s") from None
        except OSError as exc:
            raise Http2Error(f"receiving from {self.target} failed: {exc.strerror or exc}") from None
        if not data:
            raise Http2Error(f"{self.target} closed the connection")
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            raise Http2Error(f"HTTP/2 protocol error from {self.target}: {exc}") from None
        for event in events:
            if isinstance(event, h2.events.RemoteSettingsChanged):
                self._settings_received = True
            elif isinstance(event, h2.events.ResponseReceived):
                reply = self._replies.setdefault(event.stream_id, Http2Reply())
                headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in event.headers}
                reply.status = int(headers.get(":status", 0))
                reply.headers = headers
            elif isinstance(event, h2.events.DataReceived):
                self._replies.setdefault(event.stream_id, Http2Reply()).body += event.data
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self._replies.setdefault(event.stream_id, Http2Reply()).ended = True
            elif isinstance(event, h2.events.StreamReset):
                self._replies.setdefault(event.stream_id, Http2Reply()).reset_code = int(event.error_code)
            elif isinstance(event, h2.events.ConnectionTerminated):
                raise Http2Error(f"{self.target} ended the connection (GOAWAY {event.error_code!s})")
        self._flush()  # SETTINGS and PING acknowledgements, WINDOW_UPDATEs

    # -- requests ----------------------------------------------------------------------------
    def post(self, path: str, chunks: Iterable[bytes | memoryview], *, length: int | None = None,
             headers: Iterable[tuple[str, str]] = ()) -> Http2Reply:
        """POST ``chunks`` to ``path`` on a new stream and return the reply once the server has answered.

        Each chunk leaves in one socket write as DATA frames of at most the
        server's frame size, as far as flow control allows (a chunk larger
        than the window waits for WINDOW_UPDATE). When the server answers
        before the body is complete (413), sending stops and that answer is
        returned.
        """
        if self.conn is None:
            self.connect()
        conn = self.conn
        stream_id = conn.get_next_available_stream_id()
        scheme = b"https" if self.tls_root_pem is not None else b"http"
        request = [(b":method", b"POST"), (b":scheme", scheme), (b":authority", self.target.encode()),
                   (b":path", path.encode())]
        if length is not None:
            request.append((b"content-length", str(length).encode()))
        request += [(name.lower().encode(), value.encode()) for name, value in headers]
        reply = self._replies[stream_id] = Http2Reply()
        try:
            conn.send_headers(stream_id, request)
            self._flush()
            answered = False
            for chunk in chunks:
                view = memoryview(chunk)
                while view.nbytes and not answered:
                    window = conn.local_flow_control_window(stream_id)
                    if window <= 0:
                        self._receive()
                        answered = reply.status is not None or reply.reset_code is not None
                        continue
                    size = min(view.nbytes, window, conn.max_outbound_frame_size)
                    conn.send_data(stream_id, view[:size])
                    view = view[size:]
                self._flush()
                if answered:
                    break
            if not answered:
                conn.end_stream(stream_id)
                self._flush()
            while not (reply.ended or reply.reset_code is not None):
                self._receive()
        except h2.exceptions.StreamClosedError:
            # The server reset the stream while we were still sending: its answer (if any) is in the reply.
            while reply.status is None and reply.reset_code is None:
                self._receive()
        finally:
            self._replies.pop(stream_id, None)
        if reply.status is None:
            raise Http2Error(f"{self.target} reset the stream without an answer (error code {reply.reset_code})")
        return reply

    def upload(self, chunks: Iterable[bytes | memoryview], *, length: int | None = None,
               expected_sha256: str | None = None, declared_length: int | None = None) -> Http2Reply:
        """POST /upload; ``length`` becomes content-length and the expected length the server checks.

        ``declared_length`` declares a different expected length than the body
        has (tests use it to exercise the server's check).
        """
        headers = []
        expected_length = declared_length if declared_length is not None else length
        if expected_length is not None:
            headers.append((EXPECTED_LENGTH_HEADER, str(expected_length)))
        if expected_sha256 is not None:
            headers.append((EXPECTED_SHA256_HEADER, expected_sha256))
        return self.post(UPLOAD_PATH, chunks, length=length, headers=headers)

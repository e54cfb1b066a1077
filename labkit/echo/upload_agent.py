"""The client side of the upload experiment, run on the client host: one cell, JSON lines out.

``labkit upload`` (:mod:`labkit.experiments.upload`) starts ``labkit echo upload-agent``
on the client host once per cell, and this module does the cell's work there,
so a cell costs one SSH channel however many uploads it makes. It imports
neither pandas nor paramiko: the deployed agent has only grpcio, protobuf and
h2.

What an upload is, on either transport:

* The file is read into memory and hashed before anything is timed, so disk
  reads are not part of the measurement.
* The timer (``perf_counter_ns``) starts right before the first byte is
  handed to the transport and stops when the server's acknowledgement has
  arrived: gRPC's ``UploadStatus`` (the call has returned with its status), or
  HTTP/2's complete response with the byte count. Slicing each chunk and
  building its message or DATA frames are inside the window: that is the
  per-chunk cost the experiment is about.
* Both run on a connection opened (and, with TLS, handshaken) before the
  cell's first timed upload, with one small untimed upload to warm it; every
  upload of the cell reuses it.
* The client declares the length and SHA-256 it sends (metadata / headers)
  and the server checks them; the client also checks the server's count and
  digest. Any difference makes the row ``ok=false`` with the reason.
* CPU: the client process's CPU time around the timed window
  (:mod:`labkit.echo.cputime`), and the server's own, which the server measures
  from the request's start to its answer and returns in the acknowledgement
  (gRPC trailing metadata ``labkit-server-cpu-*``, fields of the HTTP/2 JSON).

Protocol on stdout, one JSON object a line: first ``{"event": "ready", ...}``
(connection and warm-up times), then one ``{"event": "upload", ...}`` per
upload with the fields of :data:`ROW_FIELDS`; failed uploads are rows too.
Exit status 0 once every upload has a row; a connection that cannot be made
at all is one line on stderr and exit status 2.
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from collections.abc import Iterator
from typing import Any

from labkit.echo.cputime import cpu_now
from labkit.echo.plans import UploadPlan
from labkit.errors import LabkitError
from labkit.files import open_regular, read_errors, read_file
from labkit.limits import MAX_FILE_BYTES

ROW_FIELDS = (
    "seq", "t_start_utc_ns", "seconds", "mb_per_s", "bytes_sent", "chunks", "bytes_acked",
    "client_cpu_s", "client_cpu_user_s", "client_cpu_sys_s",
    "server_cpu_s", "server_cpu_user_s", "server_cpu_sys_s",
    # Counted by labkit-go's agent and server only (null here): see UPLOAD_SCHEMA.
    "client_rw_syscalls", "server_rw_syscalls", "client_frames", "client_data_frames", "client_writes",
    "ok", "error", "status",
)

#: What a server reports of an upload: its CPU seconds, and (labkit-go's) its read/write system calls.
SERVER_KEYS = ("cpu_s", "cpu_user_s", "cpu_sys_s", "rw_syscalls")

# Generated files are written in blocks of this many bytes from one seeded
# generator, so the same (size, seed) gives the same bytes on every host.
_BLOCK = 1 << 20


def chunk_message_bytes(chunk_bytes: int) -> int:
    """Size on the wire of a ``Chunk{bytes content}`` message with ``chunk_bytes`` of content.

    One tag byte, the length as a varint, then the bytes: what the server's
    ``--max-message-bytes`` is compared with.
    """
    varint = 1
    value = chunk_bytes
    while value >= 0x80:
        value >>= 7
        varint += 1
    return 1 + varint + chunk_bytes


def make_file(path: str, size: int, seed: int) -> dict[str, Any]:
    """Write ``size`` seeded random bytes to ``path`` unless it is already there; return its facts.

    The bytes depend only on (size, seed), and the file is written to a
    temporary name and renamed, so an existing file of the right size is the
    right file (the caller names files by size and seed).
    """
    if size < 1:
        raise LabkitError(f"file size must be at least 1 byte, not {size}")
    generated = False
    if not (os.path.isfile(path) and os.path.getsize(path) == size):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        rng = random.Random(seed)
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "wb") as out:
            left = size
            while left:
                block = rng.randbytes(min(_BLOCK, left))
                out.write(block)
                left -= len(block)
        os.replace(tmp, path)
        generated = True
    return {**file_facts(path), "generated": generated}


def file_facts(path: str) -> dict[str, Any]:
    """Path, size and SHA-256 of a file: a regular file of at most :data:`MAX_FILE_BYTES` (one clear line if it is
    missing, a device such as /dev/zero, or larger), hashed no further than that."""
    digest = hashlib.sha256()
    size = 0
    with open_regular(path, "--file") as source, read_errors(f"--file {path}", missing=f"--file {path} does not exist"):
        while size <= MAX_FILE_BYTES and (block := source.read(_BLOCK)):
            digest.update(block)
            size += len(block)
    if size > MAX_FILE_BYTES:
        raise LabkitError(f"--file {path} is larger than an upload may be ({MAX_FILE_BYTES} bytes)")
    return {"path": path, "bytes": size, "sha256": digest.hexdigest()}


def load_file(path: str, sha256: str | None) -> bytes:
    """The file's bytes (a regular file of at most :data:`MAX_FILE_BYTES`: a device such as /dev/zero is refused
    before a byte is read), checked against ``sha256`` when given (a file changed on the host fails here)."""
    data = read_file(path, "--file", max_bytes=MAX_FILE_BYTES)
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256.lower():
        raise LabkitError(f"{path} does not have sha256 {sha256}: the file changed on this host")
    return data


def _row(seq: int) -> dict[str, Any]:
    return {"event": "upload", **dict.fromkeys(ROW_FIELDS), "seq": seq}


def _finish(row: dict[str, Any], data_len: int, sha256: str, elapsed_ns: int, cpu_start, cpu_end,
            acked: int | None, acked_sha256: str | None, server_cpu: dict, problems: list[str]) -> dict[str, Any]:
    row["seconds"] = elapsed_ns / 1e9
    row.update({f"client_{key}": value for key, value in cpu_end.since(cpu_start).items()})
    row.update({f"server_{key}": server_cpu.get(key) for key in ("cpu_s", "cpu_user_s", "cpu_sys_s")})
    if server_cpu.get("rw_syscalls") is not None:  # a labkit-go server counts them
        row["server_rw_syscalls"] = int(server_cpu["rw_syscalls"])
    row["bytes_acked"] = acked
    if acked is not None and acked != data_len:
        problems.append(f"server acknowledged {acked} bytes, sent {data_len}")
    if acked_sha256 is not None and acked_sha256 != sha256:
        problems.append(f"server computed sha256 {acked_sha256}, sent {sha256}")
    row["ok"] = not problems
    row["error"] = "; ".join(problems) or None
    if row["ok"] and elapsed_ns > 0:
        row["mb_per_s"] = data_len / (elapsed_ns / 1e9) / 1e6
    return row


def _float_or_none(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "", "None") else None
    except ValueError:
        return None


# -- gRPC --------------------------------------------------------------------------------------


def _grpc_uploads(target, data, sha256, chunk_bytes, repeats, *, tls_root_pem, tls_server_name, timeout_s,
                  declared_length, warmup, ready, channel_options=()) -> Iterator[dict[str, Any]]:
    import grpc

    from labkit.echo.client import open_channel
    from labkit.echo.server import EXPECTED_LENGTH_METADATA, EXPECTED_SHA256_METADATA
    from labkit.proto import echo_pb2, echo_pb2_grpc

    started = time.perf_counter()
    channel = open_channel(target, tls_root_pem=tls_root_pem, tls_server_name=tls_server_name, options=channel_options)
    try:
        try:
            grpc.channel_ready_future(channel).result(timeout=timeout_s)
        except grpc.FutureTimeoutError:
            raise LabkitError(f"cannot connect to the gRPC server at {target} within {timeout_s:g} s") from None
        stub = echo_pb2_grpc.EchoServiceStub(channel)
        connected = time.perf_counter()
        for _ in range(warmup):
            try:
                stub.Upload(iter([echo_pb2.Chunk(content=b"\0")]), timeout=timeout_s)
            except grpc.RpcError as exc:
                raise LabkitError(f"the warm-up upload to {target} failed: {exc.code().name} {exc.details()}") from None
        ready(connect_s=connected - started, warmup_s=time.perf_counter() - connected)
        length = len(data)
        metadata = ((EXPECTED_LENGTH_METADATA, str(length if declared_length is None else declared_length)),
                    (EXPECTED_SHA256_METADATA, sha256))
        for seq in range(repeats):
            row = _row(seq)
            row["chunks"] = -(-length // chunk_bytes)
            row["bytes_sent"] = length

            def chunks():
                for offset in range(0, length, chunk_bytes):
                    yield echo_pb2.Chunk(content=data[offset:offset + chunk_bytes])

            problems: list[str] = []
            acked = acked_sha256 = None
            server_cpu: dict = {}
            cpu_start = cpu_now()
            row["t_start_utc_ns"] = time.time_ns()
            start_ns = time.perf_counter_ns()
            try:
                status, call = stub.Upload.with_call(chunks(), timeout=timeout_s, metadata=metadata)
                end_ns = time.perf_counter_ns()
                cpu_end = cpu_now()
                row["status"] = grpc.StatusCode.OK.name
                acked, acked_sha256 = status.bytes_received, status.sha256
                if status.code != echo_pb2.OK:
                    problems.append(f"server: {status.message or echo_pb2.UploadStatusCode.Name(status.code)}")
                trailing = dict(call.trailing_metadata() or ())
                server_cpu = {key: _float_or_none(trailing.get(f"labkit-server-{key.replace('_', '-')}"))
                              for key in SERVER_KEYS}
            except grpc.RpcError as exc:
                end_ns = time.perf_counter_ns()
                cpu_end = cpu_now()
                row["status"] = exc.code().name
                problems.append(f"{exc.code().name}: {exc.details()}")
            yield _finish(row, length, sha256, end_ns - start_ns, cpu_start, cpu_end, acked, acked_sha256,
                          server_cpu, problems)
    finally:
        channel.close()


# -- HTTP/2 ------------------------------------------------------------------------------------


def _http2_uploads(target, data, sha256, chunk_bytes, repeats, *, tls_root_pem, tls_server_name, timeout_s,
                   declared_length, warmup, ready) -> Iterator[dict[str, Any]]:
    from labkit.echo.http2 import Http2Client, Http2Error

    started = time.perf_counter()
    client = Http2Client(target, tls_root_pem=tls_root_pem, tls_server_name=tls_server_name, timeout_s=timeout_s)
    try:
        client.connect()
        connected = time.perf_counter()
        for _ in range(warmup):
            reply = client.upload([b"\0"], length=1)
            if reply.status != 200:
                raise LabkitError(f"the warm-up upload to {target} failed: HTTP {reply.status} {reply.json().get('error')}")
        ready(connect_s=connected - started, warmup_s=time.perf_counter() - connected)
        length = len(data)
        view = memoryview(data)
        for seq in range(repeats):
            row = _row(seq)
            row["chunks"] = -(-length // chunk_bytes)
            row["bytes_sent"] = length
            problems: list[str] = []
            acked = acked_sha256 = None
            server_cpu: dict = {}
            if client.conn is None:  # the previous upload lost the connection: a new one, outside the timer
                try:
                    client.connect()
                except Http2Error as exc:
                    row.update(ok=False, error=str(exc.message), status="connect failed", seconds=None)
                    yield row
                    continue
            chunks = (view[offset:offset + chunk_bytes] for offset in range(0, length, chunk_bytes))
            cpu_start = cpu_now()
            row["t_start_utc_ns"] = time.time_ns()
            start_ns = time.perf_counter_ns()
            try:
                reply = client.upload(chunks, length=length, expected_sha256=sha256, declared_length=declared_length)
                end_ns = time.perf_counter_ns()
                cpu_end = cpu_now()
                body = reply.json()
                row["status"] = str(reply.status)
                acked, acked_sha256 = body.get("bytes_received"), body.get("sha256")
                if reply.status != 200:
                    problems.append(f"HTTP {reply.status}: {body.get('error', 'no reason given')}")
                server_cpu = {key: body.get(f"server_{key}") for key in SERVER_KEYS}
            except Http2Error as exc:
                end_ns = time.perf_counter_ns()
                cpu_end = cpu_now()
                row["status"] = "connection failed"
                problems.append(exc.message)
                client.close()
            yield _finish(row, length, sha256, end_ns - start_ns, cpu_start, cpu_end, acked, acked_sha256,
                          server_cpu, problems)
    finally:
        client.close()


def run_uploads(plan: UploadPlan, data: bytes, *, tls_root_pem: bytes | None = None, channel_options=(),
                ready=lambda **facts: None) -> Iterator[dict[str, Any]]:
    """Upload ``data`` (the plan's file, read) ``plan.repeats`` times in chunks of ``plan.chunk_size`` and yield one
    row per upload.

    ``ready(connect_s=..., warmup_s=...)`` is called once the connection is
    open and warmed, before the first timed upload. ``channel_options`` are the
    grpcio arguments of the plan's gRPC options. Raises :class:`LabkitError`
    when no connection can be made.
    """
    plan.check()
    sha256 = plan.sha256 or hashlib.sha256(data).hexdigest()
    if plan.transport == "http2" and channel_options:
        raise LabkitError("gRPC channel options do not apply to an HTTP/2 upload")
    common = dict(tls_root_pem=tls_root_pem, tls_server_name=plan.tls_server_name, timeout_s=plan.timeout_s,
                  declared_length=plan.declare_length, warmup=plan.warmup, ready=ready)
    if plan.transport == "grpc":
        yield from _grpc_uploads(plan.target, data, sha256.lower(), plan.chunk_size, plan.repeats,
                                 channel_options=channel_options, **common)
    else:
        yield from _http2_uploads(plan.target, data, sha256.lower(), plan.chunk_size, plan.repeats, **common)

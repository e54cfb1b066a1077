"""The echo client: timed ``Echo`` calls, one JSON-ready dict per call.

This is the probe of the idle-connection experiment (research brief, experiment
1): request size, repeats, idle gap between calls, and an optional background
sender of 1-byte calls on the same channel are its knobs. :func:`run_calls` is
the reusable core (sweeps drive it directly); ``labkit echo call`` only prints
what it yields.

What is timed, and why:

* ``rtt_ns`` is ``time.perf_counter_ns`` around the blocking stub call only:
  payload generation, hooks and JSON output all happen outside that window.
  ``t_start_utc_ns`` (``time.time_ns``) is read at the same instant as the
  timer's start (:func:`clock_pair`), to line calls up with packet captures
  and ``ss`` samples from other tools.
* The gap is idle time measured from the *end* of one call to the *start* of
  the next, since the effect under study (cwnd restart after idle) depends on
  how long the connection was silent, not on the call rate.
* The first call on a channel also opens the connection (TCP, HTTP/2, maybe
  TLS), so it is marked ``cold``; with ``cold=True`` every call gets a fresh
  channel and all are cold. Nothing is dropped: failed calls are rows too.
"""

from __future__ import annotations

import array
import os
import random
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import grpc

from labkit.echo.stamps import ServerStamps, clock_pair
from labkit.echo.options import merged
from labkit.echo.plans import CallPlan
from labkit.errors import LabkitError
from labkit.proto import echo_pb2, echo_pb2_grpc

DEFAULT_TIMEOUT_S = CallPlan.timeout_s

# The fields of every row, in output order. ``error`` is added only when ok is false.
ROW_FIELDS = ("seq", "payload_bytes", "t_start_utc_ns", "rtt_ns", "ok", "grpc_code", "cold", "background", "server_ns",
              "server_recv_utc_ns", "server_send_utc_ns")

# The background sender's payload: the brief's "1-byte calls".
_BACKGROUND_PAYLOAD = b"\x00"


class CallHook(Protocol):
    """Something to do around each recorded call, outside the timed window.

    ``before_call`` gets the row with ``seq``, ``payload_bytes``, ``cold`` and
    ``background`` filled in, right before the call starts (after the idle gap);
    ``after_call`` gets the completed row. Both may add keys to the row, e.g.
    a TCP_INFO sample of the connection before and after.
    """

    def before_call(self, row: dict[str, Any]) -> None: ...

    def after_call(self, row: dict[str, Any]) -> None: ...


@dataclass
class CallSummary:
    """Counts for one run, including the calls that are not written as rows."""

    recorded_ok: int = 0
    recorded_failed: int = 0
    warmup_ok: int = 0
    warmup_failed: int = 0
    background_ok: int = 0
    background_failed: int = 0
    warmup_ns: int = 0  # the warm-up calls' own time, connecting included: part of a run's plan, not overhead

    def count(self, recorded: bool, ok: bool, rtt_ns: int = 0) -> None:
        """Count one call: recorded or warm-up (its time added up), ok or failed."""
        kind = "recorded" if recorded else "warmup"
        field = f"{kind}_{'ok' if ok else 'failed'}"
        setattr(self, field, getattr(self, field) + 1)
        if not recorded:
            self.warmup_ns += rtt_ns

    def describe(self) -> str:
        """One human line for stderr (:func:`labkit.echo.plans.warmup_seconds` reads the warm-up's time back)."""
        return (
            f"{self.recorded_ok + self.recorded_failed} recorded calls ({self.recorded_failed} failed), "
            f"{self.warmup_ok + self.warmup_failed} warmup ({self.warmup_failed} failed, {self.warmup_ns / 1e9:.6f} s), "
            f"{self.background_ok + self.background_failed} background ({self.background_failed} failed)"
        )


def open_channel(
    target: str,
    *,
    tls_root_pem: bytes | None = None,
    tls_server_name: str | None = None,
    options: Sequence[tuple[str, Any]] = (),
) -> grpc.Channel:
    """A channel to ``target`` with its own connection; TLS when ``tls_root_pem`` is given.

    ``tls_server_name`` overrides the name checked against the server's
    certificate, for servers reached by an address their certificate does not name.
    """
    channel_options = merged([
        # By default grpc shares connections between channels to the same
        # target through a process-wide subchannel pool, so a "new" channel may
        # reuse a warm connection. A local pool gives each channel its own
        # connection, which is what makes a cold call cold.
        ("grpc.use_local_subchannel_pool", 1),
    ], options)
    if tls_root_pem is None:
        return grpc.insecure_channel(target, options=channel_options)
    if tls_server_name:
        channel_options.append(("grpc.ssl_target_name_override", tls_server_name))
    credentials = grpc.ssl_channel_credentials(root_certificates=tls_root_pem)
    return grpc.secure_channel(target, credentials, options=channel_options)


def keepalive_options(interval_ms: int) -> list[tuple[str, Any]]:
    """Channel options for HTTP/2 keepalive pings every ``interval_ms``, also while no call is active.

    This is the knob the tuning claims of the brief recommend against idle
    penalties; a ping is a few bytes, so whether it keeps cwnd open is exactly
    what an experiment should show.
    """
    return [
        ("grpc.keepalive_time_ms", interval_ms),
        ("grpc.keepalive_timeout_ms", max(interval_ms, 20_000)),
        ("grpc.keepalive_permit_without_calls", 1),
        # 0 = no limit on pings sent while there is no data to send.
        ("grpc.http2.max_pings_without_data", 0),
        # grpc core also spaces pings without data at least this far apart
        # (5 min by default), which silently overrides a shorter keepalive time.
        ("grpc.http2.min_time_between_pings_ms", interval_ms),
    ]


class BackgroundSender:
    """Sends a 1-byte ``Echo`` on a channel every ``interval_s`` until stopped.

    Calls start on a fixed schedule (a tick every interval) rather than an
    interval after the previous call ended, so the connection is never silent
    for much longer than ``interval_s``. A tick missed because a call was still
    running is skipped: at most one background call is in flight.
    """

    def __init__(self, channel: grpc.Channel, interval_s: float, timeout_s: float | None):
        if interval_s <= 0:
            raise LabkitError(f"background gap must be positive, not {interval_s}")
        self._stub = echo_pb2_grpc.EchoServiceStub(channel)
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="echo-background", daemon=True)
        self.ok = 0
        self.failed = 0

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        request = echo_pb2.EchoRequest(payload=_BACKGROUND_PAYLOAD)
        next_tick = time.monotonic() + self._interval_s
        while not self._stop.wait(max(0.0, next_tick - time.monotonic())):
            try:
                self._stub.Echo(request, timeout=self._timeout_s)
                self.ok += 1
            except grpc.RpcError:
                # Calls cut short because we are shutting down are not failures.
                if not self._stop.is_set():
                    self.failed += 1
            now = time.monotonic()
            next_tick += self._interval_s
            if next_tick < now:  # skip the ticks that passed during a slow call
                next_tick += ((now - next_tick) // self._interval_s + 1) * self._interval_s

    def stop(self) -> None:
        """Ask the thread to stop; returns at once. Call :meth:`join` after closing the channel."""
        self._stop.set()

    def join(self, timeout_s: float | None = None) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout_s)


def _sleep_until(deadline_ns: int) -> None:
    """Sleep until ``time.perf_counter_ns()`` reaches ``deadline_ns``."""
    while True:
        remaining_ns = deadline_ns - time.perf_counter_ns()
        if remaining_ns <= 0:
            return
        time.sleep(remaining_ns / 1e9)


@dataclass
class EchoOutcome:
    """One timed ``Echo``: its latency, and what came back."""

    rtt_ns: int
    ok: bool
    grpc_code: str
    details: str = ""  # why it failed: the gRPC details, or a length mismatch; "" when ok
    server: ServerStamps = ServerStamps()  # what the server's trailers said (None where it sent nothing)
    started_utc_ns: int | None = None  # the wall clock when rtt_ns began (clock_pair): the call's window on it

    @property
    def server_ns(self) -> int | None:
        return self.server.server_ns

    def error_text(self) -> str:
        """``CODE: details`` (or the code alone) for a failed call; "" when ok."""
        if self.ok:
            return ""
        return f"{self.grpc_code}: {self.details}" if self.details and self.grpc_code != "OK" else self.details or self.grpc_code


def timed_echo(stub, request, timeout_s: float | None) -> EchoOutcome:
    """Call ``Echo`` once, timed with ``perf_counter_ns`` around the blocking call alone.

    The one timed call of every labkit echo client (``echo call``, the series
    agent's warm and cold probes): building the request, hooks and output all
    happen outside this window. A failed call is an outcome, not an exception.
    """
    size = len(request.payload)
    started_utc_ns, started_ns = clock_pair()
    try:
        response, call = stub.Echo.with_call(request, timeout=timeout_s)
    except grpc.RpcError as exc:
        rtt_ns = time.perf_counter_ns() - started_ns
        code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
        details = exc.details() if hasattr(exc, "details") else str(exc)
        return EchoOutcome(rtt_ns, False, code.name, details or "", server_stamps(exc), started_utc_ns)
    rtt_ns = time.perf_counter_ns() - started_ns
    if response.payload_length != size:
        return EchoOutcome(rtt_ns, False, grpc.StatusCode.OK.name,
                           f"server reported payload_length {response.payload_length}, sent {size} bytes",
                           server_stamps(call), started_utc_ns)
    return EchoOutcome(rtt_ns, True, grpc.StatusCode.OK.name, server=server_stamps(call),
                       started_utc_ns=started_utc_ns)


def server_stamps(call) -> ServerStamps:
    """What the server's trailers said of a call (ServerStamps of Nones when it sent none)."""
    return ServerStamps.from_metadata(call.trailing_metadata() if hasattr(call, "trailing_metadata") else None)


def call_schedule(sizes: Sequence[int], repeats: int, warmup: int = 0, *, shuffle: bool = False,
                  seed: int | None = None) -> Iterator[tuple[bool, int]]:
    """The calls to make, in order, as (recorded, size): ``warmup`` unrecorded calls (sizes in turn), then
    ``repeats`` of each size, size by size or (``shuffle``) in a seeded random order, so that a drift over
    time does not masquerade as a size effect.

    Generated lazily: in order, nothing is held per call; shuffled, one byte-sized index per call (the order
    must exist whole to be shuffled), never a row or a tuple, so a large ``repeats`` costs little memory."""
    for i in range(warmup):
        yield False, sizes[i % len(sizes)]
    if not shuffle:
        for size in sizes:
            for _ in range(repeats):
                yield True, size
        return
    # random.shuffle only swaps elements, so shuffling indices gives the order it gives the (recorded, size)
    # tuples, the order labkit-go's call draws with the same seed.
    typecode = _index_type(len(sizes))
    order = array.array(typecode)
    for index in range(len(sizes)):
        order.extend(array.array(typecode, [index]) * repeats)
    random.Random(seed).shuffle(order)
    for index in order:
        yield True, sizes[index]


def _index_type(count: int) -> str:
    """The smallest array typecode that holds the indices ``0 .. count - 1``."""
    return "B" if count <= 1 << 8 else "H" if count <= 1 << 16 else "I"


class _Connection:
    """The channel calls go over: opened on first use, per call when ``cold``, with its background sender."""

    def __init__(self, target: str, *, cold: bool, background_gap_s: float | None, timeout_s: float | None,
                 tls_root_pem: bytes | None, tls_server_name: str | None, options: Sequence[tuple[str, Any]]):
        self._open = lambda: open_channel(target, tls_root_pem=tls_root_pem, tls_server_name=tls_server_name,
                                          options=options)
        self.cold = cold
        self.background_gap_s = background_gap_s
        self.timeout_s = timeout_s
        self.channel: grpc.Channel | None = None
        self.stub = None
        self.calls_on_channel = 0
        self.background: BackgroundSender | None = None

    def ready(self):
        """The stub to call, opening a channel if there is none."""
        if self.channel is None:
            self.channel = self._open()
            self.stub = echo_pb2_grpc.EchoServiceStub(self.channel)
            self.calls_on_channel = 0
        return self.stub

    def after_call(self) -> None:
        self.calls_on_channel += 1
        if self.cold:
            self.channel.close()
            self.channel = None
        elif self.background_gap_s is not None and self.background is None:
            # Start only now, so that the first call alone opened the connection.
            self.background = BackgroundSender(self.channel, self.background_gap_s, self.timeout_s)
            self.background.start()

    def close(self, summary: CallSummary) -> None:
        if self.background is not None:
            self.background.stop()
        if self.channel is not None:
            # Closing cancels a background call still in flight, so the join is quick.
            self.channel.close()
        if self.background is not None:
            self.background.join(self.timeout_s)
            summary.background_ok = self.background.ok
            summary.background_failed = self.background.failed


def run_calls(
    target: str,
    sizes: Sequence[int],
    repeats: int,
    gap_s: float,
    *,
    background_gap_s: float | None = None,
    cold: bool = False,
    warmup: int = 0,
    seed: int | None = None,
    shuffle: bool = False,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    tls_root_pem: bytes | None = None,
    tls_server_name: str | None = None,
    channel_options: Sequence[tuple[str, Any]] = (),
    hooks: Sequence[CallHook] = (),
    summary: CallSummary | None = None,
) -> Iterator[dict[str, Any]]:
    """Call ``Echo`` on ``target`` and yield one row per recorded call.

    For each size in ``sizes``, ``repeats`` calls with a random payload of that
    many bytes (``seed`` makes the payloads reproducible), with at least
    ``gap_s`` seconds between the end of one call and the start of the next.
    ``warmup`` calls (sizes taken in turn from ``sizes``) go first and are not
    yielded; ``shuffle`` orders the recorded calls at random (see
    :func:`call_schedule`). ``background_gap_s`` starts a 1-byte sender on the
    same channel after its first call. ``cold=True`` opens a new channel for every call.

    Each row has the keys of :data:`ROW_FIELDS`, plus ``error`` when ``ok`` is
    false, plus whatever ``hooks`` add. Failed calls are yielded, not raised.
    ``summary``, if given, is updated with counts of every call made, the
    unrecorded ones included. Closing the generator (or an exception such as
    KeyboardInterrupt) stops the background sender and closes the channel.
    """
    sizes = list(sizes)
    # The rules of `labkit echo call` (the same plan): a library caller gets them too.
    CallPlan(target=target, sizes=sizes, repeats=repeats, gap_s=gap_s, background_gap_s=background_gap_s, cold=cold,
             warmup=warmup, seed=seed, order="shuffled" if shuffle else "sequential", timeout_s=timeout_s).check()
    summary = summary if summary is not None else CallSummary()
    rng = random.Random(seed) if seed is not None else None
    connection = _Connection(target, cold=cold, background_gap_s=background_gap_s, timeout_s=timeout_s,
                             tls_root_pem=tls_root_pem, tls_server_name=tls_server_name, options=channel_options)
    gap_ns = round(gap_s * 1e9)
    previous_end_ns: int | None = None
    seq = 0
    try:
        for recorded, size in call_schedule(sizes, repeats, warmup, shuffle=shuffle, seed=seed):
            stub = connection.ready()
            # Random bytes so that no layer can compress the request.
            request = echo_pb2.EchoRequest(payload=rng.randbytes(size) if rng is not None else os.urandom(size))
            row: dict[str, Any] = dict.fromkeys(ROW_FIELDS)
            row.update(seq=seq, payload_bytes=size, cold=connection.calls_on_channel == 0, background=background_gap_s)
            if previous_end_ns is not None:
                _sleep_until(previous_end_ns + gap_ns)
            for hook in hooks if recorded else ():
                hook.before_call(row)
            outcome = timed_echo(stub, request, timeout_s)
            previous_end_ns = time.perf_counter_ns()
            connection.after_call()
            row.update(t_start_utc_ns=outcome.started_utc_ns, rtt_ns=outcome.rtt_ns, ok=outcome.ok,
                       grpc_code=outcome.grpc_code, server_ns=outcome.server_ns,
                       server_recv_utc_ns=outcome.server.recv_utc_ns, server_send_utc_ns=outcome.server.send_utc_ns)
            if not outcome.ok:
                row["error"] = outcome.details or outcome.grpc_code
            summary.count(recorded, outcome.ok, outcome.rtt_ns)
            if recorded:
                for hook in hooks:
                    hook.after_call(row)
                seq += 1
                yield row
    finally:
        connection.close(summary)

"""The client-host side of ``labkit series``: every probe on one schedule, one JSON line per result.

``labkit series`` starts this once per contiguous range of cells, as the
hidden ``labkit echo series-agent`` on the client host, and reads its stdout
over the one SSH channel; nothing here imports pandas (the deployed agent has
only grpcio, protobuf, click, rich and tomli-w).

The schedule: tick ``k`` of the range is due at ``t0 + (k - first_tick) ×
interval``, where ``t0`` is a moment just after the warm connections are
open. At every tick each probe sends once. With ``spread`` (the default) the
``n`` probes are spread evenly over the tick, probe ``i`` (in the order
given) at ``i × interval / n`` after it, so that no probe's timing includes
the CPU work of another (a cold channel's set-up, a ping fork) on the client
or the server; without it they all send at the tick itself. Either way every
probe keeps the same period and each sample belongs to one tick:

``ping``
    its own ``LC_ALL=C ping -D -n -c 1 -W TIMEOUT ADDRESS`` run. One run per
    tick, because iputils' ``-i`` is a minimum, not a period: a long ``ping
    -i 1`` drifts by about 24 ms per probe on Linux 6.x, a whole tick every
    40 s, so its probes would leave the shared schedule. Runs overlap when a
    reply is slow. Its raw output is sent back whole and parsed by the
    controller with :func:`labkit.parsers.ping.parse_ping`.
``echo-warm``
    a gRPC ``Echo`` on one channel opened (and used once, unrecorded) before
    ``t0``; ``cold`` is true when that channel was not READY when the call
    started (it had lost its connection and the call pays for a new one).
``echo-cold``
    a gRPC ``Echo`` on a new channel (its own connection) per call: TCP and
    HTTP/2 set-up plus the call, which is what the 2016 Go client measured.
``tcp-echo``
    the raw TCP echo of :mod:`labkit.echo.tcp_echo` on one open connection;
    a lost connection is re-opened before the next timed call, outside it.
``tcp-connect``
    the time to open a TCP connection to the TCP echo port (one RTT).

Each probe has at most one call in flight. A tick that comes while the
previous call of the same probe still runs is reported as a sample with
``ok: false`` and ``error: "skipped: previous call still in flight"``; no
tick of any probe goes unreported.

Output, one JSON object per line, flushed as it happens (the protocol the
controller reads)::

    {"event": "start", "t0_utc_ns": N, "first_tick": F, "ticks": N, "interval_s": S,
     "probes": [...], "offsets_s": {"ping": 0.0, ...}, "payload_bytes": P, "pid": PID,
     "warmup": {"echo-warm": "", "tcp-echo": ""}}
    {"event": "sample", "probe": "echo-warm", "tick": K, "t_utc_ns": N, "rtt_ns": N|null,
     "ok": true, "error": "", "cold": false, "payload_bytes": P,
     "server_ns": N|null, "server_recv_utc_ns": N|null, "server_send_utc_ns": N|null}
    {"event": "ping", "tick": K, "t_utc_ns": N, "argv": [...], "status": 0, "stdout": "...", "stderr": "..."}
    {"event": "end", "samples": N, "pings": N}

``t_utc_ns`` of a sample is the UTC time just before the send (for a skipped
tick, the time it was due); ``rtt_ns`` is ``perf_counter_ns`` around the call
alone (for a failed call, the time until it failed; null when nothing was
sent). ``warmup`` maps the warm probes to the error of their unrecorded first
call ("" when it worked). ``t_utc_ns`` of a ping event is when its run started.
The ``server_*`` fields are what the echo server stamped (:mod:`labkit.echo.stamps`; gRPC and TCP echo probes):
its own time on the call, and its wall clock when the request was in and when the reply left.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, NamedTuple

from labkit.echo.plans import SeriesPlan
from labkit.echo.stamps import ServerStamps
from labkit.parsers.ping import tick_ping_argv

SKIPPED = "skipped: previous call still in flight"
# Time between the warm-up and the first tick, so every probe's thread is waiting when it comes.
LEAD_S = 0.2


class _Output:
    """Writes protocol lines; a broken pipe (the controller went away) stops the agent."""

    def __init__(self, stream, stop: threading.Event):
        self._stream = stream
        self._stop = stop
        self._lock = threading.Lock()
        self.samples = 0
        self.pings = 0

    def emit(self, event: dict[str, Any]) -> None:
        line = json.dumps(event) + "\n"
        with self._lock:
            if event["event"] == "sample":
                self.samples += 1
            elif event["event"] == "ping":
                self.pings += 1
            try:
                self._stream.write(line)
                self._stream.flush()
            except (BrokenPipeError, OSError, ValueError):
                self._stop.set()


def _sleep_until(deadline_ns: int, stop: threading.Event) -> bool:
    """Sleep until ``perf_counter_ns()`` reaches ``deadline_ns``; False if asked to stop first."""
    while True:
        remaining = deadline_ns - time.perf_counter_ns()
        if remaining <= 0:
            return not stop.is_set()
        # Wake up early and sleep the last stretch: Event.wait overshoots by up to a millisecond.
        if remaining > 2_000_000:
            if stop.wait((remaining - 1_000_000) / 1e9):
                return False
        else:
            time.sleep(remaining / 1e9)


class _Schedule:
    """Tick ``i`` of the range is due at ``t0 + i × interval`` (perf_counter and UTC clocks)."""

    def __init__(self, plan: SeriesPlan):
        self.plan = plan
        self.interval_ns = round(plan.interval_s * 1e9)
        # One instant on both clocks, as each sample's start is read (clock_pair): read one after the other, a
        # preempted agent put t0 on the wall clock late, and its samples' stamps before their ticks' (by 54 µs).
        from labkit.echo.stamps import clock_pair

        utc_ns, perf_ns = clock_pair()
        self.t0_perf_ns = perf_ns + round(LEAD_S * 1e9)
        self.t0_utc_ns = utc_ns + round(LEAD_S * 1e9)

    def due_perf(self, index: int, offset_s: float = 0.0) -> int:
        return self.t0_perf_ns + index * self.interval_ns + round(offset_s * 1e9)

    def due_utc(self, index: int, offset_s: float = 0.0) -> int:
        return self.t0_utc_ns + index * self.interval_ns + round(offset_s * 1e9)


# -- the probes ----------------------------------------------------------------------------
# Each probe is a callable returning a ProbeResult, timed around the call alone.


class ProbeResult(NamedTuple):
    """One probe: its time (None when it has none), whether it succeeded, why not, whether it opened a connection,
    and what the echo server stamped on the call (its own time, its wall clock at the request and the reply)."""

    rtt_ns: int | None
    ok: bool
    error: str
    cold: bool
    server: ServerStamps = ServerStamps()  # what the server stamped (gRPC and TCP echo)
    started_utc_ns: int | None = None  # when rtt_ns began on the wall clock, where the probe knows it


class _WarmEcho:
    def __init__(self, plan: SeriesPlan, payload: bytes):
        import grpc

        from labkit.echo.client import open_channel
        from labkit.proto import echo_pb2, echo_pb2_grpc

        self._grpc = grpc
        self._timeout = plan.timeout_s
        self._request = echo_pb2.EchoRequest(payload=payload)
        self.channel = open_channel(plan.grpc_target)
        self._stub = echo_pb2_grpc.EchoServiceStub(self.channel)
        self._state = None
        self.channel.subscribe(self._on_state, try_to_connect=True)

    def _on_state(self, state) -> None:
        self._state = state

    def warm_up(self) -> str:
        result = self()
        return "" if result.ok else result.error

    def __call__(self) -> ProbeResult:
        cold = self._state != self._grpc.ChannelConnectivity.READY
        return _echo_call(self._stub, self._request, self._timeout, cold)

    def close(self) -> None:
        self.channel.unsubscribe(self._on_state)
        self.channel.close()


class _ColdEcho:
    def __init__(self, plan: SeriesPlan, payload: bytes):
        from labkit.echo.client import open_channel
        from labkit.proto import echo_pb2, echo_pb2_grpc

        self._open = lambda: open_channel(plan.grpc_target)
        self._stub_class = echo_pb2_grpc.EchoServiceStub
        self._timeout = plan.timeout_s
        self._request = echo_pb2.EchoRequest(payload=payload)

    def __call__(self):
        # The channel object is made outside the timed window; its connection
        # is opened by the call itself, inside it (as in labkit.echo.client).
        channel = self._open()
        try:
            return _echo_call(self._stub_class(channel), self._request, self._timeout, True)
        finally:
            channel.close()


def _echo_call(stub, request, timeout_s: float, cold: bool) -> ProbeResult:
    """One timed Echo; the error reads ``CODE: details``."""
    from labkit.echo.client import timed_echo

    outcome = timed_echo(stub, request, timeout_s)
    return ProbeResult(outcome.rtt_ns, outcome.ok, outcome.error_text(), cold, outcome.server, outcome.started_utc_ns)


class _TcpEcho:
    def __init__(self, plan: SeriesPlan, payload: bytes):
        from labkit.echo.tcp_echo import TcpEchoClient

        self._client = TcpEchoClient(plan.address, plan.tcp_echo_port, timeout_s=plan.timeout_s)
        self._payload = payload

    def warm_up(self) -> str:
        result = self()
        return "" if result.ok else result.error

    def __call__(self) -> ProbeResult:
        from labkit.echo.tcp_echo import TcpEchoError

        if not self._client.connected:
            try:
                self._client.connect()  # outside the timed window: this probe times warm calls
            except TcpEchoError as exc:
                return ProbeResult(None, False, str(exc), False)
        try:
            reply = self._client.call(self._payload)
        except TcpEchoError as exc:
            return ProbeResult(None, False, str(exc), False)
        return ProbeResult(reply.rtt_ns, True, "", False, reply.server, reply.started_utc_ns)

    def close(self) -> None:
        self._client.close()


class _TcpConnect:
    def __init__(self, plan: SeriesPlan, payload: bytes):
        self._address = plan.address
        self._port = plan.tcp_echo_port
        self._timeout = plan.timeout_s

    def __call__(self):
        from labkit.echo.tcp_echo import TcpEchoError, time_connect

        try:
            return ProbeResult(time_connect(self._address, self._port, timeout_s=self._timeout), True, "", True)
        except TcpEchoError as exc:
            return ProbeResult(None, False, str(exc), True)


_PROBE_CLASSES = {"echo-warm": _WarmEcho, "echo-cold": _ColdEcho, "tcp-echo": _TcpEcho, "tcp-connect": _TcpConnect}


def _probe_loop(name: str, probe: Callable, plan: SeriesPlan, schedule: _Schedule, out: _Output,
                stop: threading.Event) -> None:
    payload_bytes = 0 if name == "tcp-connect" else plan.payload_bytes
    offset = plan.offset_s(name)
    index = 0
    while index < plan.ticks:
        if not _sleep_until(schedule.due_perf(index, offset), stop):
            return
        t_utc_ns = time.time_ns()
        try:
            result = probe()
        except Exception as exc:  # a probe bug must still leave a row, and the others go on
            result = ProbeResult(None, False, f"{type(exc).__name__}: {exc}", False)
        ended = time.perf_counter_ns()
        if stop.is_set():  # the agent was stopped during the call (and may have cancelled it): it measured nothing
            return
        # A gRPC probe's time starts after it set up its channel: its window on the wall clock starts there too.
        t_utc_ns = result.started_utc_ns or t_utc_ns
        out.emit({"event": "sample", "probe": name, "tick": plan.first_tick + index, "t_utc_ns": t_utc_ns,
                  "rtt_ns": result.rtt_ns, "ok": result.ok, "error": result.error, "cold": result.cold,
                  "payload_bytes": payload_bytes, "server_ns": result.server.server_ns,
                  "server_recv_utc_ns": result.server.recv_utc_ns, "server_send_utc_ns": result.server.send_utc_ns})
        index += 1
        while index < plan.ticks and schedule.due_perf(index, offset) < ended:
            out.emit({"event": "sample", "probe": name, "tick": plan.first_tick + index,
                      "t_utc_ns": schedule.due_utc(index, offset), "rtt_ns": None, "ok": False, "error": SKIPPED,
                      "cold": False, "payload_bytes": payload_bytes})
            index += 1


def _ping_loop(plan: SeriesPlan, schedule: _Schedule, out: _Output, stop: threading.Event,
               running: set[subprocess.Popen], lock: threading.Lock) -> None:
    argv = tick_ping_argv(plan.address, plan.timeout_s)
    # LC_ALL=C: some locales print "time=0,045", which no parser should have to guess.
    env = {**os.environ, "LC_ALL": "C"}
    waiters = []
    offset = plan.offset_s("ping")
    for index in range(plan.ticks):
        if not _sleep_until(schedule.due_perf(index, offset), stop):
            break
        tick = plan.first_tick + index
        started_utc = time.time_ns()
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        except OSError as exc:
            out.emit({"event": "ping", "tick": tick, "t_utc_ns": started_utc, "argv": argv, "status": 127,
                      "stdout": "", "stderr": f"cannot run ping: {exc.strerror or exc}"})
            continue
        with lock:
            running.add(proc)
        waiter = threading.Thread(target=_reap_ping, args=(proc, tick, started_utc, argv, out, running, lock),
                                  name=f"ping-{tick}", daemon=True)
        waiter.start()
        waiters.append(waiter)
        waiters = [w for w in waiters if w.is_alive()]
    for waiter in waiters:
        waiter.join()


def _reap_ping(proc, tick, started_utc, argv, out: _Output, running, lock) -> None:
    stdout, stderr = proc.communicate()
    with lock:
        running.discard(proc)
    out.emit({"event": "ping", "tick": tick, "t_utc_ns": started_utc, "argv": argv, "status": proc.returncode,
              "stdout": stdout, "stderr": stderr})


def run_agent(plan: SeriesPlan, out=None, stop: threading.Event | None = None) -> int:
    """Measure every tick of ``plan`` and write the protocol lines to ``out``; return the exit status."""
    plan.check()
    stop = stop or threading.Event()
    output = _Output(out or sys.stdout, stop)
    # Random bytes, so that no layer can compress the request; the same for every call.
    payload = random.Random(plan.first_tick).randbytes(plan.payload_bytes)
    probes = {name: _PROBE_CLASSES[name](plan, payload) for name in plan.probes if name != "ping"}
    pings: set[subprocess.Popen] = set()
    pings_lock = threading.Lock()
    try:
        warmup = {name: probe.warm_up() for name, probe in probes.items() if hasattr(probe, "warm_up")}
        schedule = _Schedule(plan)
        output.emit({"event": "start", "t0_utc_ns": schedule.t0_utc_ns, "first_tick": plan.first_tick,
                     "ticks": plan.ticks, "interval_s": plan.interval_s, "probes": list(plan.probes),
                     "offsets_s": {name: plan.offset_s(name) for name in plan.probes},
                     "payload_bytes": plan.payload_bytes, "pid": os.getpid(), "warmup": warmup})
        threads = [threading.Thread(target=_probe_loop, args=(name, probe, plan, schedule, output, stop),
                                    name=name, daemon=True) for name, probe in probes.items()]
        if "ping" in plan.probes:
            threads.append(threading.Thread(target=_ping_loop, args=(plan, schedule, output, stop, pings, pings_lock),
                                            name="ping", daemon=True))
        for thread in threads:
            thread.start()
        for thread in threads:
            # Short joins keep the main thread responsive to signals; once asked to stop it does not wait for a call in
            # flight (up to its timeout): closing the probes below cancels it.
            while thread.is_alive() and not stop.is_set():
                thread.join(0.2)
        if stop.is_set():
            return 1
        output.emit({"event": "end", "samples": output.samples, "pings": output.pings})
        return 0
    finally:
        stop.set()
        with pings_lock:
            for proc in list(pings):
                proc.kill()
        for probe in probes.values():
            close = getattr(probe, "close", None)
            if close:
                close()


def main(plan: SeriesPlan) -> int:
    """The command's body: SIGTERM/SIGINT stop the schedule and every ping run, then exit."""
    stop = threading.Event()

    def request_stop(signum, _frame):
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, request_stop)
    status = run_agent(plan, stop=stop)
    return 143 if status and stop.is_set() else status

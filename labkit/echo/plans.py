"""What each agent labkit starts on a host is asked to do (its plan), and the one command line that asks it.

One plan type and one argv builder per agent: the echo server (``labkit echo serve``), the echo client
(``labkit echo call``), the series agent (``labkit echo series-agent``), the upload agent and its file
(``labkit echo upload-agent``, ``upload-file``), the two services of ``labkit hop`` (``labkit-go back``,
``labkit-go front``), and ``labkit-go dead-peer`` (how long a client takes to notice a server silently gone). An
experiment fills a plan and asks the builder for the argv; the agent's own command (``labkit/cli/echo.py``, whose
parameters are named as the plan's fields, or its labkit-go twin, which takes the same flags) parses that argv back
into the same plan: tests/test_agent_plans.py checks it, at typical values and at the bounds of
:mod:`labkit.limits`. An agent's flag names are written here and in its command, nowhere else.

Each plan's ``check()`` holds the agent's own rules, its bounds read from :mod:`labkit.limits`; a builder checks
the plan first, so an experiment never starts an agent with a command line the agent would refuse.

Builders of the echo agents return the words after labkit's own argv (the host's ``python -m labkit`` or deployed
``labkit``); with ``impl="go"`` labkit execs the agent's labkit-go twin with the same flags (``EchoGroup`` in
``cli/echo.py``). The hop services and dead-peer are labkit-go's alone: their builders return the words after its
path.

Nothing here imports grpc: the controller builds command lines and never speaks gRPC itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields

from labkit.errors import LabkitError
from labkit.limits import (MAX_CALLS, MAX_DURATION_S, MAX_FILE_BYTES, MAX_GRPC_CHANNELS, MAX_KEEPALIVE_MS,
                           MAX_MESSAGE_BYTES, MAX_NATS_WORKERS, MAX_REPEATS, MAX_REQUEST_BYTES, MAX_SERIES_INTERVAL_S,
                           MAX_TICKS, MAX_WARMUP, check_within)
from labkit.units import format_duration

PYTHON, GO = "python", "go"
#: The probes of the series agent, in the order it reports them (see :mod:`labkit.echo.series_agent`).
PROBES = ("ping", "echo-warm", "echo-cold", "tcp-echo", "tcp-connect")
DEFAULT_PROBES = ("ping", "echo-warm", "echo-cold", "tcp-echo")
#: The transports of the upload agent.
UPLOAD_TRANSPORTS = ("grpc", "http2")
CALL_ORDERS = ("sequential", "shuffled")


class _Plan:
    """What every plan shares: sequences kept as tuples (a plan from click's lists equals one from Python's)."""

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, list):
                object.__setattr__(self, field.name, tuple(value))


# -- the words of a command line -------------------------------------------------------------------
def _value(flag: str, value) -> list[str]:
    """``[flag, value]``, or nothing when the value is None (the agent's own default applies)."""
    return [] if value is None else [flag, str(value)]


def _duration(flag: str, seconds: float | None) -> list[str]:
    return [] if seconds is None else [flag, format_duration(seconds)]


def _switch(flag: str, on: bool) -> list[str]:
    return [flag] if on else []


def _repeated(flag: str, items) -> list[str]:
    return [word for item in items for word in (flag, item)]


def _implementation(impl: str) -> list[str]:
    """What makes labkit exec an agent's labkit-go twin (Python is the default)."""
    if impl not in (PYTHON, GO):
        raise LabkitError(f"an agent runs as {PYTHON} or {GO}, not {impl!r}")
    return ["--impl", GO] if impl == GO else []


# -- labkit echo serve ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ServePlan(_Plan):
    """The echo server: where it listens, its bounds, TLS and the side endpoints (``None``: the server's default).

    ``tcp_echo_port`` and ``http2_port`` serve those endpoints when given (0 picks a free port)."""

    bind: str
    max_message_bytes: int | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    reflection: bool = True
    grace_s: float = 2.0
    permit_keepalive_ms: int | None = None
    tcp_echo_port: int | None = None
    http2_port: int | None = None
    max_upload_bytes: int | None = None
    stream_idle_s: float | None = None  # grpcio's alone: labkit-go's streams hold no pool thread
    grpc_options: tuple[str, ...] = ()

    def check(self) -> None:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise LabkitError("--tls-cert and --tls-key go together")
        if self.max_upload_bytes is not None and self.http2_port is None:
            raise LabkitError("--max-upload-bytes bounds the HTTP/2 endpoint; give --http2-port too")
        if self.stream_idle_s is not None:
            check_within("--stream-idle-timeout", self.stream_idle_s, None, MAX_DURATION_S, "s")
        if self.max_message_bytes is not None:
            check_within("--max-message-bytes", self.max_message_bytes, 1, MAX_MESSAGE_BYTES)
        if self.max_upload_bytes is not None:
            check_within("--max-upload-bytes", self.max_upload_bytes, 0, MAX_FILE_BYTES)
        if self.permit_keepalive_ms is not None:
            check_within("--permit-keepalive-ms", self.permit_keepalive_ms, 1, MAX_KEEPALIVE_MS)
        check_within("--grace", self.grace_s, 0, MAX_DURATION_S, "s")


#: The ``labkit echo`` subcommands that have a Go twin in ``labkit-go`` (same flags, same output). ``upload-file``
#: needs none (making the file is not measured, and its seeded bytes are Python's), so it takes no ``--impl``.
GO_TWINS = ("serve", "call", "upload-agent", "series-agent")


def go_twin_args(args: Sequence[str]) -> list[str] | None:
    """The arguments `labkit echo ARGS` execs the ``labkit-go`` binary with, where ``ARGS`` asks for a Go twin with
    ``--impl go`` (the subcommand, then every argument but ``--impl``); None where the subcommand runs in Python.
    The pid a run records for `labkit echo serve --impl go` runs this command line once it has exec'd, which is how
    `labkit runs cleanup` still knows it for labkit's."""
    args = list(args)
    if not args or args[0] not in GO_TWINS or {"--help", "-h"} & set(args):
        return None
    rest = args[1:]
    if not any(arg == "--impl=go" or (arg == "--impl" and following == "go")
               for arg, following in zip(rest, [*rest[1:], None])):
        return None
    kept, skip = [], False
    for arg in rest:
        if skip:
            skip = False
        elif arg == "--impl":
            skip = True
        elif not arg.startswith("--impl="):
            kept.append(arg)
    return [args[0], *kept]


def serve_argv(plan: ServePlan, impl: str = PYTHON) -> list[str]:
    """``echo serve`` with the plan's flags."""
    plan.check()
    if impl == GO and plan.stream_idle_s is not None:
        raise LabkitError("--stream-idle-timeout is grpcio's: the Go server has no stream pool to protect")
    return ["echo", "serve", "--bind", plan.bind, *_value("--max-message-bytes", plan.max_message_bytes),
            *_value("--tls-cert", plan.tls_cert), *_value("--tls-key", plan.tls_key),
            *_switch("--no-reflection", not plan.reflection), *_duration("--grace", plan.grace_s),
            *_value("--permit-keepalive-ms", plan.permit_keepalive_ms), *_value("--tcp-echo-port", plan.tcp_echo_port),
            *_value("--http2-port", plan.http2_port), *_value("--max-upload-bytes", plan.max_upload_bytes),
            *_duration("--stream-idle-timeout", plan.stream_idle_s), *_repeated("--grpc-option", plan.grpc_options),
            *_implementation(impl)]


# -- labkit echo call -------------------------------------------------------------------------------
@dataclass(frozen=True)
class CallPlan(_Plan):
    """The echo client's calls: ``repeats`` of each size after ``warmup`` unrecorded ones, ``gap_s`` apart."""

    target: str
    sizes: tuple[int, ...]
    repeats: int = 10
    gap_s: float = 1.0
    background_gap_s: float | None = None
    cold: bool = False
    warmup: int = 0
    seed: int | None = None
    order: str = "sequential"
    keepalive_ms: int | None = None
    tcp_info: bool = False
    timeout_s: float | None = 30.0  # None: no deadline, for run_calls alone (a command line's call has one)
    tls_ca: str | None = None
    tls_server_name: str | None = None
    grpc_options: tuple[str, ...] = ()

    def check(self) -> None:
        """Refuse, with one clear line, calls that cannot run or would not end."""
        if not self.sizes:
            raise LabkitError("no request sizes given")
        if any(not 0 <= size <= MAX_REQUEST_BYTES for size in self.sizes):
            raise LabkitError(f"request sizes must be between 0 and {MAX_REQUEST_BYTES} bytes: {list(self.sizes)}")
        check_within("--repeats", self.repeats, 1, MAX_REPEATS)
        if len(self.sizes) * self.repeats > MAX_CALLS:
            raise LabkitError(f"{len(self.sizes)} sizes × {self.repeats} repeats is more than {MAX_CALLS} calls")
        check_within("--warmup", self.warmup, 0, MAX_WARMUP)
        check_within("--gap", self.gap_s, 0, MAX_DURATION_S, "s")
        if self.timeout_s is not None:
            check_within("--timeout", self.timeout_s, 0, MAX_DURATION_S, "s")
        if self.background_gap_s is not None:
            check_within("--background-gap", self.background_gap_s, None, MAX_DURATION_S, "s")
            if self.cold:
                # The background sender keeps one connection busy; with a new channel per call there is none.
                raise LabkitError("--background-gap needs one shared channel; it cannot be combined with --cold")
        if self.keepalive_ms is not None:
            check_within("--keepalive-ms", self.keepalive_ms, 1, MAX_KEEPALIVE_MS)
        if self.order not in CALL_ORDERS:
            raise LabkitError(f"--order is {' or '.join(CALL_ORDERS)}, not {self.order!r}")
        if self.tls_server_name and not self.tls_ca:
            raise LabkitError("--tls-server-name needs --tls-ca")


_WARMUP_TIME = re.compile(r"\d+ warmup \(\d+ failed, (\d+\.\d+) s\)")


def warmup_seconds(stderr_lines: Sequence[str]) -> float | None:
    """The warm-up calls' time from an echo client's summary line on stderr (either stack's), or None without one."""
    for line in reversed(stderr_lines):
        if match := _WARMUP_TIME.search(line):
            return float(match.group(1))
    return None


def call_argv(plan: CallPlan, impl: str = PYTHON) -> list[str]:
    """``echo call`` with the plan's flags."""
    plan.check()
    if plan.timeout_s is None:
        raise LabkitError("echo call has a deadline on every call: give the plan a timeout")
    return ["echo", "call", "--target", plan.target, "--sizes", ",".join(map(str, plan.sizes)),
            "--repeats", str(plan.repeats), *_duration("--gap", plan.gap_s),
            *_duration("--background-gap", plan.background_gap_s), *_switch("--cold", plan.cold),
            "--warmup", str(plan.warmup), *_value("--seed", plan.seed), "--order", plan.order,
            *_value("--keepalive-ms", plan.keepalive_ms), *_switch("--tcp-info", plan.tcp_info),
            *_duration("--timeout", plan.timeout_s), *_value("--tls-ca", plan.tls_ca),
            *_value("--tls-server-name", plan.tls_server_name), *_repeated("--grpc-option", plan.grpc_options),
            *_implementation(impl)]


# -- labkit echo series-agent -----------------------------------------------------------------------
@dataclass(frozen=True)
class SeriesPlan(_Plan):
    """What one series agent run measures: ticks ``first_tick .. first_tick + ticks - 1`` of a series."""

    address: str
    probes: tuple[str, ...]
    ticks: int
    interval_s: float
    first_tick: int = 0
    payload_bytes: int = 50
    timeout_s: float = 5.0
    grpc_port: int | None = None
    tcp_echo_port: int | None = None
    spread: bool = True

    def offset_s(self, probe: str) -> float:
        """When ``probe`` sends, in seconds after each tick."""
        return self.probes.index(probe) * self.interval_s / len(self.probes) if self.spread else 0.0

    def check(self) -> None:
        unknown = [p for p in self.probes if p not in PROBES]
        if unknown or not self.probes:
            raise LabkitError(f"probes must be some of {', '.join(PROBES)}, not {', '.join(unknown) or 'none'}")
        if {"echo-warm", "echo-cold"} & set(self.probes) and not self.grpc_port:
            raise LabkitError("the echo probes need the gRPC port (--grpc-port)")
        if {"tcp-echo", "tcp-connect"} & set(self.probes) and not self.tcp_echo_port:
            raise LabkitError("the tcp probes need the TCP echo port (--tcp-echo-port)")
        if not 1 <= self.ticks <= MAX_TICKS or not 0 <= self.first_tick <= MAX_TICKS:
            raise LabkitError(f"ticks must be between 1 and {MAX_TICKS} and the first tick between 0 and {MAX_TICKS}")
        check_within("--interval", self.interval_s, None, MAX_SERIES_INTERVAL_S, "s")
        check_within("--timeout", self.timeout_s, None, MAX_SERIES_INTERVAL_S, "s")
        check_within("--payload-bytes", self.payload_bytes, 0, MAX_REQUEST_BYTES)

    @property
    def grpc_target(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.grpc_port}"


def series_argv(plan: SeriesPlan, impl: str = PYTHON) -> list[str]:
    """``echo series-agent`` with the plan's flags."""
    plan.check()
    return ["echo", "series-agent", "--address", plan.address, *_value("--grpc-port", plan.grpc_port),
            *_value("--tcp-echo-port", plan.tcp_echo_port), "--probes", ",".join(plan.probes),
            "--first-tick", str(plan.first_tick), "--ticks", str(plan.ticks), *_duration("--interval", plan.interval_s),
            "--payload-bytes", str(plan.payload_bytes), *_duration("--timeout", plan.timeout_s),
            "--spread" if plan.spread else "--together", *_implementation(impl)]


# -- labkit echo upload-agent and upload-file -------------------------------------------------------
@dataclass(frozen=True)
class UploadPlan(_Plan):
    """One cell of uploads: ``file`` (on the agent's host) sent ``repeats`` times in chunks of ``chunk_size``."""

    transport: str
    target: str
    file: str
    chunk_size: int
    sha256: str | None = None
    repeats: int = 1
    warmup: int = 1
    timeout_s: float = 600.0
    tls_ca: str | None = None
    tls_server_name: str | None = None
    declare_length: int | None = None  # declared to the server instead of the file's length (tests its check)
    grpc_options: tuple[str, ...] = ()

    def check(self) -> None:
        if self.transport not in UPLOAD_TRANSPORTS:
            raise LabkitError(f"--transport is one of {', '.join(UPLOAD_TRANSPORTS)}, not {self.transport!r}")
        check_within("--chunk-size", self.chunk_size, 1, MAX_REQUEST_BYTES, " bytes")
        check_within("--repeats", self.repeats, 1, MAX_REPEATS)
        check_within("--warmup", self.warmup, 0, MAX_WARMUP)
        check_within("--timeout", self.timeout_s, None, MAX_DURATION_S, "s")
        if self.grpc_options and self.transport != "grpc":
            raise LabkitError("--grpc-option applies to --transport grpc only")


def upload_argv(plan: UploadPlan, impl: str = PYTHON) -> list[str]:
    """``echo upload-agent`` with the plan's flags."""
    plan.check()
    return ["echo", "upload-agent", "--transport", plan.transport, "--target", plan.target, "--file", plan.file,
            *_value("--sha256", plan.sha256), "--chunk-size", str(plan.chunk_size), "--repeats", str(plan.repeats),
            "--warmup", str(plan.warmup), *_duration("--timeout", plan.timeout_s), *_value("--tls-ca", plan.tls_ca),
            *_value("--tls-server-name", plan.tls_server_name), *_value("--declare-length", plan.declare_length),
            *_repeated("--grpc-option", plan.grpc_options), *_implementation(impl)]


@dataclass(frozen=True)
class UploadFilePlan(_Plan):
    """The upload's file on the agent's host: generated from ``seed`` when ``size`` is given, else only hashed."""

    path: str
    size: int | None = None
    seed: int = 1

    def check(self) -> None:
        if self.size is not None:
            check_within("--size", self.size, 1, MAX_FILE_BYTES, " bytes")


def upload_file_argv(plan: UploadFilePlan) -> list[str]:
    """``echo upload-file`` with the plan's flags (Python's alone: the seeded bytes are Python's generator's)."""
    plan.check()
    return ["echo", "upload-file", "--path", plan.path, *_value("--size", plan.size), "--seed", str(plan.seed)]


# -- labkit-go back and front (labkit hop) ----------------------------------------------------------
@dataclass(frozen=True)
class BackPlan(_Plan):
    """The back service: one body over HTTP/1.1 and h2c on ``bind``, gRPC, TLS (given a pair) and NATS (given a URL).

    Ports 0 pick free ones; ``nats_subject`` None is labkit-go's own subject."""

    bind: str
    grpc_port: int = 0
    body_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_port: int = 0
    nats_url: str | None = None
    nats_subject: str | None = None
    nats_workers: int = 1
    grace_s: float = 2.0

    def check(self) -> None:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise LabkitError("--tls-cert and --tls-key go together")
        if self.nats_subject is not None and self.nats_url is None:
            raise LabkitError("--nats-subject needs --nats-url")
        check_within("--nats-workers", self.nats_workers, 1, MAX_NATS_WORKERS)
        check_within("--grace", self.grace_s, 0, MAX_DURATION_S, "s")


def back_argv(plan: BackPlan) -> list[str]:
    """``back`` with the plan's flags."""
    plan.check()
    return ["back", "--bind", plan.bind, "--grpc-port", str(plan.grpc_port), *_value("--body-file", plan.body_file),
            *_value("--tls-cert", plan.tls_cert), *_value("--tls-key", plan.tls_key), "--tls-port", str(plan.tls_port),
            *_value("--nats-url", plan.nats_url), *_value("--nats-subject", plan.nats_subject),
            "--nats-workers", str(plan.nats_workers), *_duration("--grace", plan.grace_s)]


@dataclass(frozen=True)
class FrontPlan(_Plan):
    """The front relay: ``GET /via/<transport>`` on ``bind``, each answered by one call to the back over it."""

    bind: str
    grpc_port: int = 0
    back_grpc: str | None = None  # HOST:PORT of the back's gRPC endpoint
    grpc_channels: int = 1
    back_http2: str | None = None  # http://HOST:PORT
    back_http2_tls: str | None = None  # https://HOST:PORT, with back_ca
    back_ca: str | None = None
    nats_url: str | None = None
    nats_subject: str | None = None
    timeout_s: float = 5.0
    grace_s: float = 2.0

    def check(self) -> None:
        if not (self.back_grpc or self.back_http2 or self.back_http2_tls or self.nats_url):
            raise LabkitError("give at least one of --back-grpc, --back-http2, --back-http2-tls, --nats-url")
        if (self.back_http2_tls is None) != (self.back_ca is None):
            raise LabkitError("--back-http2-tls and --back-ca go together")
        check_within("--grpc-channels", self.grpc_channels, 1, MAX_GRPC_CHANNELS)
        check_within("--timeout", self.timeout_s, None, MAX_DURATION_S, "s")
        check_within("--grace", self.grace_s, 0, MAX_DURATION_S, "s")


def front_argv(plan: FrontPlan) -> list[str]:
    """``front`` with the plan's flags."""
    plan.check()
    return ["front", "--bind", plan.bind, "--grpc-port", str(plan.grpc_port), *_value("--back-grpc", plan.back_grpc),
            "--grpc-channels", str(plan.grpc_channels), *_value("--back-http2", plan.back_http2),
            *_value("--back-http2-tls", plan.back_http2_tls), *_value("--back-ca", plan.back_ca),
            *_value("--nats-url", plan.nats_url), *_value("--nats-subject", plan.nats_subject),
            *_duration("--timeout", plan.timeout_s), *_duration("--grace", plan.grace_s)]


# -- labkit-go dead-peer --------------------------------------------------------------------------
@dataclass(frozen=True)
class DeadPeerPlan(_Plan):
    """A client that holds an EchoStream open to ``target`` and says when it notices the server gone, waiting at
    most ``wait_s`` after its ready line; ``grpc_options`` its knobs (keepalive-time=10s, ...); ``probe_every_s``
    also one Echo that often (None: none), each, like the first Echo, with deadline ``timeout_s``."""

    target: str
    wait_s: float = 60.0
    timeout_s: float = 20.0
    probe_every_s: float | None = None
    grpc_options: tuple[str, ...] = ()

    def check(self) -> None:
        if not self.target:
            raise LabkitError("--target: give HOST:PORT")
        check_within("--wait", self.wait_s, None, MAX_DURATION_S, "s")
        check_within("--timeout", self.timeout_s, None, MAX_DURATION_S, "s")
        if self.probe_every_s is not None:
            check_within("--probe-every", self.probe_every_s, None, MAX_DURATION_S, "s")


def dead_peer_argv(plan: DeadPeerPlan) -> list[str]:
    """``dead-peer`` with the plan's flags."""
    plan.check()
    return ["dead-peer", "--target", plan.target, *_duration("--wait", plan.wait_s),
            *_duration("--timeout", plan.timeout_s), *_duration("--probe-every", plan.probe_every_s),
            *_repeated("--grpc-option", plan.grpc_options)]

"""gRPC knobs by one name for both implementations: ``--grpc-option KEY=VALUE`` on echo serve and call.

The names are grpc-go's options (the stack the published experiments used);
the Go echo (``labkit-go``) takes every one of them. The Python echo maps a
key to its grpcio channel argument where grpcio has an exact equivalent and
refuses the others with one line, so an experiment never believes it set a
knob that was silently ignored.

Values: sizes as ``65536``, ``64KiB`` or ``32MiB``; durations as ``10s`` or
``100ms``; booleans as ``true``/``false``; counts as integers.

``codec`` is how messages are marshalled: ``proto``, each implementation's
own protobuf runtime (the default), or ``vtproto``, planetscale's vtprotobuf
generated code (``go/echopb/echo_vtproto.pb.go``), which only grpc-go can use:
a Python end given ``codec=vtproto`` refuses it, and ``codec=proto`` changes
nothing there. Both send the same bytes with the same content-type, so a vtproto
end talks to a standard one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from labkit.errors import LabkitError
from labkit.units import parse_duration, parse_size

IMPLEMENTATIONS = ("python", "go")


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not true or false")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise ValueError(f"{value} must be at least 1")
    return value


def _duration_ms(text: str) -> int:
    return max(1, round(parse_duration(text) * 1000))


def _compression(text: str) -> str:
    if text not in ("gzip", "none"):
        raise ValueError(f"{text!r} is not gzip or none")
    return text


def _codec(text: str) -> str:
    if text not in ("proto", "vtproto"):
        raise ValueError(f"{text!r} is not proto or vtproto")
    return text


@dataclass(frozen=True)
class GrpcOption:
    """One knob: what it means, how its value reads, who takes it, and its grpcio channel argument."""

    name: str
    meaning: str
    parse: Callable[[str], Any]
    sides: tuple[str, ...]  # "client", "server", or both
    grpcio: str | None = None  # the grpcio channel argument, when grpcio has an exact equivalent
    grpcio_value: Callable[[Any], Any] = lambda value: value
    # Without a channel argument: the values grpcio already has, so taking them sets nothing (codec=proto).
    grpcio_is: tuple[Any, ...] = ()


_GZIP = 2  # grpc_compression_algorithm GRPC_COMPRESS_GZIP

#: Every option, by name (grpc-go's names: see the grpc-go DialOption and ServerOption of the same meaning).
OPTIONS: dict[str, GrpcOption] = {option.name: option for option in (
    GrpcOption("initial-window", "HTTP/2 initial stream flow-control window, bytes (BDP estimation may grow it)",
               parse_size, ("client", "server"), "grpc.http2.lookahead_bytes"),
    GrpcOption("initial-conn-window", "HTTP/2 initial connection flow-control window, bytes", parse_size,
               ("client", "server")),
    GrpcOption("static-stream-window", "HTTP/2 stream window fixed at this size, BDP estimation off", parse_size,
               ("client", "server")),
    GrpcOption("static-conn-window", "HTTP/2 connection window fixed at this size, BDP estimation off", parse_size,
               ("client", "server")),
    GrpcOption("read-buffer", "bytes read from the socket at a time", parse_size, ("client", "server"),
               "grpc.experimental.tcp_read_chunk_size"),
    GrpcOption("write-buffer", "bytes gathered before writing to the socket", parse_size, ("client", "server"),
               "grpc.http2.write_buffer_size"),
    GrpcOption("keepalive-time", "send an HTTP/2 PING after this long without activity", _duration_ms, ("client", "server"),
               "grpc.keepalive_time_ms"),
    GrpcOption("keepalive-timeout", "close the connection when a keepalive PING is not answered within this",
               _duration_ms, ("client", "server"), "grpc.keepalive_timeout_ms"),
    GrpcOption("keepalive-permit-without-stream", "keepalive PINGs also while no call is active", _boolean,
               ("client", "server"), "grpc.keepalive_permit_without_calls", int),
    GrpcOption("max-connection-idle", "the server closes a connection without calls for this long", _duration_ms,
               ("server",), "grpc.max_connection_idle_ms"),
    GrpcOption("max-connection-age", "the server closes any connection this old (gracefully)", _duration_ms,
               ("server",), "grpc.max_connection_age_ms"),
    GrpcOption("keepalive-min-time", "the server's enforcement: the shortest PING interval it accepts from a client",
               _duration_ms, ("server",), "grpc.http2.min_ping_interval_without_data_ms"),
    GrpcOption("max-concurrent-streams", "streams the server allows at once on one connection", _count, ("server",),
               "grpc.max_concurrent_streams"),
    GrpcOption("max-recv-msg-size", "largest message accepted, bytes", parse_size, ("client", "server"),
               "grpc.max_receive_message_length"),
    GrpcOption("max-send-msg-size", "largest message sent, bytes", parse_size, ("client", "server"),
               "grpc.max_send_message_length"),
    GrpcOption("pool", "connections (channels) the client spreads its calls over, round robin", _count, ("client",)),
    GrpcOption("compression", "message compression: gzip or none", _compression, ("client", "server"),
               "grpc.default_compression_algorithm", lambda value: _GZIP if value == "gzip" else 0),
    GrpcOption("codec", "message marshalling: proto (each implementation's own) or vtproto (vtprotobuf's generated "
               "code, grpc-go only)", _codec, ("client", "server"), grpcio_is=("proto",)),
)}


def parse_grpc_options(items, side: str) -> dict[str, Any]:
    """``["static-stream-window=32MiB", ...]`` -> ``{"static-stream-window": 33554432}`` for ``side``.

    Unknown keys, bad values and keys the other side takes are one-line errors.
    """
    values: dict[str, Any] = {}
    for item in items:
        key, sep, text = str(item).partition("=")
        key = key.strip()
        if not sep or not text.strip():
            raise LabkitError(f"--grpc-option {item!r} is not KEY=VALUE")
        option = OPTIONS.get(key)
        if option is None:
            raise LabkitError(f"--grpc-option {key}: unknown; known: {', '.join(OPTIONS)}")
        if side not in option.sides:
            raise LabkitError(f"--grpc-option {key} is a {' and '.join(option.sides)} option, not a {side} one")
        try:
            values[key] = option.parse(text.strip())
        except ValueError as exc:
            raise LabkitError(f"--grpc-option {key}: {exc}") from None
    return values


def grpcio_arguments(options: dict[str, Any], impl_hint: str = "use --impl go") -> list[tuple[str, Any]]:
    """The grpcio channel (or server) arguments of parsed options; refuse those grpcio cannot set exactly.

    An option without a channel argument is taken only at a value grpcio already has (``codec=proto``), and
    sets nothing.
    """
    missing = [key if not OPTIONS[key].grpcio_is else f"{key}={value}"
               for key, value in options.items() if OPTIONS[key].grpcio is None and value not in OPTIONS[key].grpcio_is]
    if missing:
        raise LabkitError(f"grpcio has no equivalent of --grpc-option {', '.join(missing)}; {impl_hint}")
    return [(OPTIONS[key].grpcio, OPTIONS[key].grpcio_value(value)) for key, value in options.items()
            if OPTIONS[key].grpcio is not None]


def merged(*argument_lists) -> list[tuple[str, Any]]:
    """Channel arguments with later lists overriding earlier ones key by key.

    grpc core keeps the first of two arguments with the same key, so an option
    given by the user must replace a default, not follow it.
    """
    result: dict[str, Any] = {}
    for arguments in argument_lists:
        result.update(arguments)
    return list(result.items())


def options_text(options: dict[str, Any]) -> str:
    """Options as one sortable label, ``key=value;key=value`` (sorted; "" when none), for rows and cell ids."""
    return ";".join(f"{key}={value}" for key, value in sorted(options.items()))

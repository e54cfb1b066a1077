"""``labkit-go grpc-load``: the gRPC load of ``labkit load --grpc-tool labkit-go``, one CSV row per request message.

ghz times a call. Inside a stream call of ten requests it cannot say when each
answer came, and the call's latency divided by ten is a time no message waited.
labkit-go's load times each request from its own send to its own answer's
arrival, so a message inside a stream and a unary call can be compared at the
same number of messages in flight. The CSV has a header line (the columns of
``go/internal/grpcload`` ``Columns``)::

    call_t_ns,worker,connection,call,message,t_ns,latency_ns,call_latency_ns,code,error
    1796000000123456789,3,1,41,0,1796000000123460000,101834211,102011022,OK,

``call_t_ns`` is the call's start and ``t_ns`` the request's send (ns since the
epoch), ``message`` the request's place in its call (0 for a unary call),
``latency_ns`` empty when the request got no answer, ``call_latency_ns`` the
whole call's (a stream's: to the server's end of stream), ``code`` the call's
status as grpcio names it, ``error`` empty unless this request failed. Rows
are written as their messages complete: a stream's answers before its last
are written before the call's end is known, so ``call_latency_ns`` and
``code`` are on a call's last row and empty before it (and on every row of a
call a signal cut short).

:func:`parse_grpcload_csv` gives one row per request: ``call_t_utc``,
``worker``, ``connection``, ``call``, ``message``, ``t_utc``, ``latency_ms``
(NaN without an answer), ``call_latency_ms`` (NaN before the call's end),
``code`` (None before the call's end), ``error`` and ``ok``.
"""

from __future__ import annotations

from labkit.parsers.base import ParseResult, csv_records

HEADER = ["call_t_ns", "worker", "connection", "call", "message", "t_ns", "latency_ns", "call_latency_ns", "code",
          "error"]


def grpcload_argv(labkit_go: str, target: str, *, rpc: str, concurrency: int, connections: int, stream_messages: int,
                  payload_file: str, seconds: float, timeout_s: float, out: str, keepalive_ms: int | None = None,
                  grpc_options: tuple[str, ...] = ()) -> list[str]:
    """labkit-go's closed loop of ``concurrency`` calls on ``connections`` to ``target`` for ``seconds``, its CSV in
    ``out``; ``grpc_options`` are the client's ``KEY=VALUE`` knobs (compression=gzip, codec=vtproto, ...)."""
    argv = [labkit_go, "grpc-load", "-target", target, "-rpc", rpc, "-concurrency", str(concurrency),
            "-connections", str(connections), "-stream-messages", str(stream_messages), "-payload-file", payload_file,
            "-duration", f"{seconds:g}s", "-timeout", f"{timeout_s:g}s", "-out", out]
    if keepalive_ms is not None:
        argv += ["-keepalive-ms", str(keepalive_ms)]
    for option in grpc_options:
        argv += ["-grpc-option", option]
    return argv


def _record(row: list[str]) -> tuple | None:
    """A row as a tuple; None when a number does not read, or when an answered request (a latency) has an error or
    an unanswered one has none."""
    try:
        integers = [int(row[i]) for i in range(6)]
        latency = int(row[6]) if row[6] else None
        call_latency = int(row[7]) if row[7] else None
        record = (*integers, latency, call_latency, row[8] or None, row[9])
    except ValueError:
        return None
    return None if (latency is None) == (row[9] == "") else record


def parse_grpcload_csv(text: str) -> ParseResult:
    """Parse ``labkit-go grpc-load``'s CSV; see the module docstring."""
    import pandas as pd

    records, tally = csv_records(text, HEADER, _record, "labkit-go grpc-load")
    frame = pd.DataFrame.from_records(records, columns=HEADER).astype(
        {"call_t_ns": "int64", "worker": "int64", "connection": "int64", "call": "int64", "message": "int64",
         "t_ns": "int64", "latency_ns": "float64", "call_latency_ns": "float64"})
    frame.insert(0, "call_t_utc", pd.to_datetime(frame.pop("call_t_ns"), unit="ns", utc=True))
    frame.insert(5, "t_utc", pd.to_datetime(frame.pop("t_ns"), unit="ns", utc=True))
    frame["latency_ms"] = frame.pop("latency_ns") / 1e6
    frame["call_latency_ms"] = frame.pop("call_latency_ns") / 1e6
    frame["ok"] = frame["error"] == ""
    calls = frame.groupby(["worker", "call"]).ngroups if len(frame) else 0
    counts = {**tally.counts(), "messages": len(frame), "ok": int(frame["ok"].sum()), "calls": calls}
    return ParseResult(rows=frame, counts=counts, unrecognised_lines=tally.unrecognised)

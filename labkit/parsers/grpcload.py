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
``code`` (None before the call's end), ``error`` and ``ok``; and
``intended_latency_ms``, the same answer timed from when the closed loop meant
to send the request: when the worker's call before ended (its reply came), or
for a worker's first call its start. A stream sends its requests back to back,
so each is due then; a request a full window held back waited, and
``latency_ms`` leaves that wait out. labkit-go writes it
(``intended_latency_ns``, the CSV's last column); a CSV of a labkit-go before
it has the ten columns above, and the column is computed here from them by the
same rule.
"""

from __future__ import annotations

from labkit.parsers.base import ParseError, ParseResult, csv_records

HEADER = ["call_t_ns", "worker", "connection", "call", "message", "t_ns", "latency_ns", "call_latency_ns", "code",
          "error", "intended_latency_ns"]
#: The header of a labkit-go that did not yet write ``intended_latency_ns``.
HEADER_WITHOUT_INTENDED = HEADER[:-1]


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
    """A row as a tuple; None when a number does not read, when an answered request (a latency) has an error or
    an unanswered one has none, or when its intended latency (if the row has one) is given without its latency, or
    is shorter than it (a request cannot leave before it was meant to)."""
    try:
        integers = [int(row[i]) for i in range(6)]
        latency = int(row[6]) if row[6] else None
        call_latency = int(row[7]) if row[7] else None
        intended = (int(row[10]) if row[10] else None) if len(row) > 10 else None
        record = (*integers, latency, call_latency, row[8] or None, row[9], intended)
    except ValueError:
        return None
    if len(row) > 10 and ((intended is None) != (latency is None) or (intended is not None and intended < latency)):
        return None
    return None if (latency is None) == (row[9] == "") else record


def _intended_latency_ns(frame) -> "pd.Series":
    """``intended_latency_ns`` of rows that lack it (a CSV of an older labkit-go), by labkit-go's rule: every request
    of a call is meant to leave when the worker's call before it ended (its first call: as it began), so the latency
    plus how long after that the request left. The call before's end is its start plus its latency, as labkit-go
    wrote them; one without an end (a signal cut it short) leaves the call's own start. Differences of epoch stamps
    are taken in integers: a float64 near 1.8e18 ns keeps only 256 ns."""
    import numpy as np
    import pandas as pd

    calls = frame.groupby(["worker", "call"], sort=False).agg(call_t_ns=("call_t_ns", "first"),
                                                              call_latency_ns=("call_latency_ns", "max"))
    calls = calls.sort_index()
    by_worker = calls.groupby(level="worker")
    before_start = by_worker["call_t_ns"].shift(1, fill_value=0)  # kept in int64: a NaN would make it float
    before_latency = by_worker["call_latency_ns"].shift(1)
    follows = np.r_[False, np.diff(calls.index.get_level_values("call")) == 1] & np.r_[
        False, np.diff(calls.index.get_level_values("worker")) == 0]
    wait = (calls["call_t_ns"] - before_start) - before_latency
    wait = pd.Series(np.where(follows & wait.notna().to_numpy(), wait.to_numpy(), 0.0), index=calls.index)
    intended_wait = wait.reindex(pd.MultiIndex.from_frame(frame[["worker", "call"]])).to_numpy()
    # From the call's intended start to this request's send: the call's own lag, then the request's after the start.
    return frame["latency_ns"] + intended_wait + (frame["t_ns"] - frame["call_t_ns"]).to_numpy()


def parse_grpcload_csv(text: str) -> ParseResult:
    """Parse ``labkit-go grpc-load``'s CSV; see the module docstring."""
    import pandas as pd

    try:
        records, tally = csv_records(text, HEADER, _record, "labkit-go grpc-load")
        written = True
    except ParseError:
        records, tally = csv_records(text, HEADER_WITHOUT_INTENDED, _record, "labkit-go grpc-load")
        written = False
    frame = pd.DataFrame.from_records(records, columns=HEADER).astype(
        {"call_t_ns": "int64", "worker": "int64", "connection": "int64", "call": "int64", "message": "int64",
         "t_ns": "int64", "latency_ns": "float64", "call_latency_ns": "float64", "intended_latency_ns": "float64"})
    if not written and len(frame):  # an older labkit-go: computed by its rule
        frame["intended_latency_ns"] = _intended_latency_ns(frame)
    intended = frame.pop("intended_latency_ns")
    frame.insert(0, "call_t_utc", pd.to_datetime(frame.pop("call_t_ns"), unit="ns", utc=True))
    frame.insert(5, "t_utc", pd.to_datetime(frame.pop("t_ns"), unit="ns", utc=True))
    frame["latency_ms"] = frame.pop("latency_ns") / 1e6
    frame["call_latency_ms"] = frame.pop("call_latency_ns") / 1e6
    frame["intended_latency_ms"] = intended / 1e6
    frame["ok"] = frame["error"] == ""
    calls = frame.groupby(["worker", "call"]).ngroups if len(frame) else 0
    counts = {**tally.counts(), "messages": len(frame), "ok": int(frame["ok"].sum()), "calls": calls}
    return ParseResult(rows=frame, counts=counts, unrecognised_lines=tally.unrecognised)

"""What each kind of imported log becomes: a parser, and a conversion of its rows to a declared table.

A :class:`Kind` reads one file's text with the tested parser of
:mod:`labkit.parsers` and turns the parser's rows into rows of
:data:`labkit.schemas.SERIES_SCHEMA` (round trips) or
:data:`labkit.schemas.IPERF3_SCHEMA` (iperf3 intervals). The conversion is
pure: it knows nothing of runs, so it can be used on a log without importing it
(:func:`labkit.importers.read_log`).

Every row the parser returns becomes a row of the table: lost probes and failed
calls as ``ok=False`` rows, duplicate replies flagged ``duplicate=True``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from labkit.parsers.base import ParseResult
from labkit.parsers.ghz import parse_ghz_json
from labkit.parsers.goclient import GoEchoParser, IdleStepParser
from labkit.parsers.ping import PingParser

UNKNOWN = "unknown"


@dataclass(frozen=True)
class Options:
    """Per-import settings: the zone of local log times, and the hosts when the log does not name them."""

    tz: str | None = None
    src: str | None = None
    dst: str | None = None


@dataclass(frozen=True)
class Kind:
    """One importable format.

    A log (``parser``: a streaming parser for the options) is read a chunk at a time; a report (``parse``: text
    to a :class:`ParseResult`) is read whole. ``rows`` turns one batch of the parser's rows (an Arrow table)
    into the columns of the kind's table (column -> values, or one value for every row), knowing the file's
    whole result (its summary) and ``first`` (each string column's first value in the file).
    """

    name: str
    table: str  # "series" or "iperf3": which schema its rows follow
    probe: str | None  # the probe its rows measure (series kinds)
    description: str
    rows: Callable[..., dict[str, Any]]
    parser: Callable[[Options], Any] | None = None
    parse: Callable[[str, Options], ParseResult] | None = None
    # Why a file that parsed must still not be imported (its rows would be wrong), or None.
    refusal: Callable[[ParseResult], str | None] = lambda result: None
    # The columns of every row that the file's result gives as one value (``rows`` has them too): rows read
    # before the file's end are kept with the values known then, and given the final ones when those differ.
    summary_columns: Callable[[ParseResult, Options], dict[str, Any]] = lambda result, options: {}

    @property
    def line_oriented(self) -> bool:
        return self.parser is not None


def _either(condition, yes, no):
    import pyarrow.compute as pc

    return pc.if_else(condition, yes, no)


def _nan_to_null(values):
    """Floats with NaN (a parser's "no value") as nulls, as the table stores a missing time."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.if_else(pc.is_nan(values), pa.scalar(None, pa.float64()), values)


def _ns(stamps):
    """Integer ns since the epoch of timestamps (null stays null)."""
    import pyarrow as pa

    return stamps.cast(pa.timestamp("ns", tz="UTC")).cast(pa.int64())


# --- ping ----------------------------------------------------------------------------------------


def _ping_rows(t, result: ParseResult, opts: Options, first: dict) -> dict[str, Any]:
    import pyarrow.compute as pc

    if pc.all(t["ok"]).as_py() and not pc.any(t["duplicate"]).as_py():  # every probe answered once, as mostly
        error, unit = "", "ms"
    else:
        reason = pc.if_else(pc.equal(t["error"], ""), "no reply", t["error"])
        error = _either(t["duplicate"], "duplicate", _either(t["ok"], "", reason))
        unit = _either(pc.is_nan(t["rtt_ms"]), None, "ms")
    return {
        "probe": "ping", "src": opts.src or UNKNOWN, **_ping_summary_columns(result, opts),
        "seq": t["seq"], "t_utc_ns": t["t_utc_ns"], "rtt_ms": _nan_to_null(t["rtt_ms"]), "ok": t["ok"],
        "error": error, "cold": False, "duplicate": t["duplicate"], "unit": unit, "line_number": None,
    }


def _ping_summary_columns(result: ParseResult, opts: Options) -> dict[str, Any]:
    """What ping's header says of every probe: where it went and its size."""
    summary = result.summary
    return {"dst": opts.dst or summary.get("target_address") or summary.get("target") or UNKNOWN,
            "payload_bytes": summary.get("payload_bytes")}


def _ping_refusal(result: ParseResult) -> str | None:
    """A probe not known to be lost (a line that may be its reply went unread, or ping counted replies it did not
    print, as with -q) must not be imported as a loss: the reason, or None."""
    return result.doubt


def _ping_parser(options: Options):
    return PingParser()


# --- the 2016 Go echo client -----------------------------------------------------------------------


def _go_echo_rows(t, result: ParseResult, opts: Options, first: dict) -> dict[str, Any]:
    import pyarrow.compute as pc

    # The 2016 client dialled a new connection for every call (research brief, experiment 2): each
    # sample is a cold call.
    dst = opts.dst or pc.fill_null(t["peer"], first.get("peer") or UNKNOWN)
    if not isinstance(dst, str) and pc.all(pc.equal(dst, dst[0])).as_py():  # one peer, as mostly: one value
        dst = dst[0].as_py()
    return {
        "probe": "echo-cold", "src": opts.src or UNKNOWN, "dst": dst, "seq": t["seq"],
        "t_utc_ns": _ns(t["t_utc"]), "rtt_ms": _nan_to_null(t["rtt_ms"]), "ok": t["ok"],
        "error": "" if pc.all(t["ok"]).as_py() else _either(t["ok"], "", "missing from log"), "cold": True,
        "duplicate": False, "payload_bytes": t["bytes"], "unit": t["unit"], "line_number": None,
    }


def _go_echo_parser(options: Options):
    return GoEchoParser(options.tz)


# --- the idle-step Go client -------------------------------------------------------------------------


def _idle_step_rows(t, result: ParseResult, opts: Options, first: dict) -> dict[str, Any]:
    import pyarrow.compute as pc

    return {
        "probe": "echo", "src": opts.src or UNKNOWN, "dst": opts.dst or UNKNOWN, "seq": t["call"],
        "t_utc_ns": _ns(t["t_utc"]), "rtt_ms": t["rtt_ms"], "ok": t["ok"], "error": "",
        # The client opens one channel and dials it on the first call.
        "cold": pc.equal(t["call"], 0), "duplicate": False, "payload_bytes": t["payload_bytes"], "unit": t["unit"],
        "line_number": None,
    }


def _idle_step_parser(options: Options):
    return IdleStepParser(options.tz)


# --- ghz -------------------------------------------------------------------------------------------


def _ghz_rows(t, result: ParseResult, opts: Options, first: dict) -> dict[str, Any]:
    import numpy as np

    frame = t.to_pandas()
    status, error = frame["status"].fillna("").astype(str), frame["error"].fillna("").astype(str)
    joined = np.where((status != "") & (error != ""), status + ": " + error, status + error)
    joined = np.where(joined == "", "failed", joined)
    return {
        "probe": "ghz", "src": opts.src or UNKNOWN,
        "dst": opts.dst or result.summary.get("options", {}).get("host") or UNKNOWN,
        "seq": np.arange(len(frame)), "t_utc_ns": _ns(t["t_utc"]), "rtt_ms": t["latency_ms"], "ok": t["ok"],
        "error": np.where(frame["ok"], "", joined), "cold": False, "duplicate": False, "payload_bytes": None,
        "unit": "ns",  # ghz writes every duration in integer nanoseconds
        "line_number": None,
    }


# --- iperf3 ----------------------------------------------------------------------------------------

_IPERF3_COLUMNS = {"interval": "interval", "socket": "socket", "start_s": "start", "end_s": "end", "bytes": "bytes",
                   "bits_per_second": "bits_per_second", "retransmits": "retransmits", "snd_cwnd_bytes": "snd_cwnd",
                   "snd_wnd_bytes": "snd_wnd", "rtt_ms": "rtt_ms", "rttvar_ms": "rttvar_ms", "pmtu": "pmtu",
                   "jitter_ms": "jitter_ms", "lost_packets": "lost_packets", "packets": "packets",
                   "lost_percent": "lost_percent", "omitted": "omitted", "sender": "sender"}


def _iperf3_rows(t, result: ParseResult, opts: Options, first: dict) -> dict[str, Any]:
    connected = result.summary.get("connected") or []
    remote = connected[0].get("remote_host") if connected and isinstance(connected[0], dict) else None
    return {"src": opts.src or UNKNOWN, "dst": opts.dst or remote or UNKNOWN,
            **{column: t[name] for column, name in _IPERF3_COLUMNS.items()}}


def _parse_iperf3(text: str, options: Options) -> ParseResult:
    from labkit.parsers.iperf3 import parse_iperf3_json  # pandas: only for the kinds that need it

    return parse_iperf3_json(text)


def _parse_ghz(text: str, options: Options) -> ParseResult:
    return parse_ghz_json(text)


def _iperf3_refusal(result: ParseResult) -> str | None:
    """A report with an error measured nothing (or was cut short): importing it would make an empty, successful run."""
    error = result.summary.get("error")
    return f"iperf3 reported an error: {error}" if error else None


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("ping", "series", "ping", "ping text output (Linux iputils, with or without -D/-O; busybox; GNU inetutils; macOS/BSD)",
             _ping_rows, parser=_ping_parser, refusal=_ping_refusal, summary_columns=_ping_summary_columns),
        Kind("go-echo", "series", "echo-cold", "the 2016 Go gRPC echo client log (bbengfort/orca: 'received N bytes ... time=<Go duration>')",
             _go_echo_rows, parser=_go_echo_parser),
        Kind("idle-step", "series", "echo", "the idle-step Go client output ('Payload size: N bytes', 'Round trip time: <Go duration>')",
             _idle_step_rows, parser=_idle_step_parser),
        Kind("iperf3", "iperf3", None, "iperf3 -J JSON", _iperf3_rows, parse=_parse_iperf3,
             refusal=_iperf3_refusal),
        Kind("ghz", "series", "ghz", "ghz --format json report", _ghz_rows, parse=_parse_ghz),
    )
}


def guess_kind(text: str) -> str | None:
    """The kind a file's text looks like, for hints when a file was given as the wrong kind."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if isinstance(data, dict) and "statusCodeDistribution" in data:
            return "ghz"
        if isinstance(data, dict) and {"start", "end", "intervals"} & set(data):
            return "iperf3"
        return None
    head = "\n".join(text.splitlines()[:200])
    if re.search(r"icmp_seq[= ]\d+|^\d+ bytes from \S+: seq=\d+", head, re.M):  # busybox writes seq=
        return "ping"
    if re.search(r"received \d+ bytes from .* seq=\d+ time=\S+", head):
        return "go-echo"
    if re.search(r"Round trip time: \S+", head):
        return "idle-step"
    return None

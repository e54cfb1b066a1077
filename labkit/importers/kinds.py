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

import pandas as pd

from labkit.parsers import (
    ParseResult,
    parse_ghz_json,
    parse_go_echo_log,
    parse_idle_step_output,
    parse_iperf3_json,
    parse_ping,
)

UNKNOWN = "unknown"


@dataclass(frozen=True)
class Options:
    """Per-import settings: the zone of local log times, and the hosts when the log does not name them."""

    tz: str | None = None
    src: str | None = None
    dst: str | None = None


@dataclass(frozen=True)
class Kind:
    """One importable format."""

    name: str
    table: str  # "series" or "iperf3": which schema its rows follow
    probe: str | None  # the probe its rows measure (series kinds)
    description: str
    parse: Callable[[str, Options], ParseResult]
    rows: Callable[[ParseResult, Options], list[dict[str, Any]]]
    line_oriented: bool = True
    # Why a file that parsed must still not be imported (its rows would be wrong), or None.
    refusal: Callable[[ParseResult], str | None] = lambda result: None


def plain(value: Any) -> Any:
    """A value fit for the JSON journal: None for NaN/NA/NaT, Python scalars for numpy ones."""
    if value is None:
        return None
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    if hasattr(value, "item"):
        return value.item()
    return value


def _ns(stamp: Any) -> int | None:
    """Integer ns since the epoch of a tz-aware timestamp (None for NaT)."""
    if stamp is None or pd.isna(stamp):
        return None
    return int(pd.Timestamp(stamp).value)


def _line(row: pd.Series) -> int | None:
    # Parsers that report the line a row came from name the column ``line``.
    return plain(row.get("line")) if "line" in row else None


# --- ping ----------------------------------------------------------------------------------------


def _ping_rows(result: ParseResult, opts: Options) -> list[dict[str, Any]]:
    summary = result.summary
    dst = opts.dst or summary.get("target_address") or summary.get("target") or UNKNOWN
    payload = summary.get("payload_bytes")
    rows = []
    for _, r in result.rows.iterrows():
        rtt = plain(r["rtt_ms"])
        if bool(r["duplicate"]):
            error = "duplicate"
        elif bool(r["ok"]):
            error = ""
        else:
            error = plain(r["error"]) or "no reply"
        rows.append(
            {
                "probe": "ping",
                "src": opts.src or UNKNOWN,
                "dst": dst,
                "seq": int(r["seq"]),
                "t_utc_ns": plain(r["t_utc_ns"]),
                "rtt_ms": rtt,
                "ok": bool(r["ok"]),
                "error": error,
                "cold": False,
                "duplicate": bool(r["duplicate"]),
                "payload_bytes": payload,
                "unit": "ms" if rtt is not None else None,
                "line_number": _line(r),
            }
        )
    return rows


def _ping_refusal(result: ParseResult) -> str | None:
    """A probe not known to be lost (a line that may be its reply went unread, or ping counted replies it did not
    print, as with -q) must not be imported as a loss: the first such reason, or None."""
    rows = result.rows
    unknown = rows.loc[rows["status"] == "unknown", "error"] if len(rows) else []
    return str(unknown.iloc[0]) if len(unknown) else None


# --- the 2016 Go echo client -----------------------------------------------------------------------


def _go_echo_rows(result: ParseResult, opts: Options) -> list[dict[str, Any]]:
    rows = []
    for _, r in result.rows.iterrows():
        ok = bool(r["ok"])
        rows.append(
            {
                # The 2016 client dialled a new connection for every call
                # (research brief, experiment 2): each sample is a cold call.
                "probe": "echo-cold",
                "src": opts.src or UNKNOWN,
                "dst": opts.dst or plain(r["peer"]) or _first_peer(result) or UNKNOWN,
                "seq": int(r["seq"]),
                "t_utc_ns": _ns(r["t_utc"]),
                "rtt_ms": plain(r["rtt_ms"]),
                "ok": ok,
                "error": "" if ok else "missing from log",
                "cold": True,
                "duplicate": False,
                "payload_bytes": plain(r["bytes"]),
                "unit": plain(r["unit"]),
                "line_number": _line(r),
            }
        )
    return rows


def _first_peer(result: ParseResult) -> str | None:
    peers = result.rows["peer"].dropna() if "peer" in result.rows else []
    return str(peers.iloc[0]) if len(peers) else None


# --- the idle-step Go client -------------------------------------------------------------------------


def _idle_step_rows(result: ParseResult, opts: Options) -> list[dict[str, Any]]:
    rows = []
    for _, r in result.rows.iterrows():
        rows.append(
            {
                "probe": "echo",
                "src": opts.src or UNKNOWN,
                "dst": opts.dst or UNKNOWN,
                "seq": int(r["call"]),
                "t_utc_ns": _ns(r["t_utc"]),
                "rtt_ms": plain(r["rtt_ms"]),
                "ok": bool(r["ok"]),
                "error": "",
                # The client opens one channel and dials it on the first call.
                "cold": int(r["call"]) == 0,
                "duplicate": False,
                "payload_bytes": plain(r["payload_bytes"]),
                "unit": plain(r["unit"]),
                "line_number": _line(r),
            }
        )
    return rows


# --- ghz -------------------------------------------------------------------------------------------


def _ghz_rows(result: ParseResult, opts: Options) -> list[dict[str, Any]]:
    dst = opts.dst or result.summary.get("options", {}).get("host") or UNKNOWN
    rows = []
    for index, r in result.rows.iterrows():
        ok = bool(r["ok"])
        error = "" if ok else ": ".join(part for part in (plain(r["status"]), plain(r["error"])) if part) or "failed"
        rows.append(
            {
                "probe": "ghz",
                "src": opts.src or UNKNOWN,
                "dst": dst,
                "seq": int(index),
                "t_utc_ns": _ns(r["t_utc"]),
                "rtt_ms": plain(r["latency_ms"]),
                "ok": ok,
                "error": error,
                "cold": False,
                "duplicate": False,
                "payload_bytes": None,
                "unit": "ns",  # ghz writes every duration in integer nanoseconds
                "line_number": None,
            }
        )
    return rows


# --- iperf3 ----------------------------------------------------------------------------------------


def _iperf3_rows(result: ParseResult, opts: Options) -> list[dict[str, Any]]:
    connected = result.summary.get("connected") or []
    remote = connected[0].get("remote_host") if connected and isinstance(connected[0], dict) else None
    rows = []
    for _, r in result.rows.iterrows():
        rows.append(
            {
                "src": opts.src or UNKNOWN,
                "dst": opts.dst or remote or UNKNOWN,
                "interval": int(r["interval"]),
                "socket": plain(r["socket"]),
                "start_s": plain(r["start"]),
                "end_s": plain(r["end"]),
                "bytes": plain(r["bytes"]),
                "bits_per_second": plain(r["bits_per_second"]),
                "retransmits": plain(r["retransmits"]),
                "snd_cwnd_bytes": plain(r["snd_cwnd"]),
                "snd_wnd_bytes": plain(r["snd_wnd"]),
                "rtt_ms": plain(r["rtt_ms"]),
                "rttvar_ms": plain(r["rttvar_ms"]),
                "pmtu": plain(r["pmtu"]),
                "jitter_ms": plain(r["jitter_ms"]),
                "lost_packets": plain(r["lost_packets"]),
                "packets": plain(r["packets"]),
                "lost_percent": plain(r["lost_percent"]),
                "omitted": plain(r["omitted"]),
                "sender": plain(r["sender"]),
            }
        )
    return rows


def _iperf3_refusal(result: ParseResult) -> str | None:
    """A report with an error measured nothing (or was cut short): importing it would make an empty, successful run."""
    error = result.summary.get("error")
    return f"iperf3 reported an error: {error}" if error else None


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("ping", "series", "ping", "ping text output (Linux iputils, with or without -D/-O; busybox; GNU inetutils; macOS/BSD)",
             lambda text, o: parse_ping(text), _ping_rows, refusal=_ping_refusal),
        Kind("go-echo", "series", "echo-cold", "the 2016 Go gRPC echo client log (bbengfort/orca: 'received N bytes ... time=<Go duration>')",
             lambda text, o: parse_go_echo_log(text, tz=o.tz), _go_echo_rows),
        Kind("idle-step", "series", "echo", "the idle-step Go client output ('Payload size: N bytes', 'Round trip time: <Go duration>')",
             lambda text, o: parse_idle_step_output(text, tz=o.tz), _idle_step_rows),
        Kind("iperf3", "iperf3", None, "iperf3 -J JSON", lambda text, o: parse_iperf3_json(text), _iperf3_rows,
             line_oriented=False, refusal=_iperf3_refusal),
        Kind("ghz", "series", "ghz", "ghz --format json report", lambda text, o: parse_ghz_json(text), _ghz_rows,
             line_oriented=False),
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

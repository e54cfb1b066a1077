"""iperf3 ``-J`` JSON: per-interval rows and the end-of-test summary.

Rows (one per stream per interval): ``interval`` (0-based), ``socket``,
``start``, ``end``, ``seconds``, ``bytes``, ``bits_per_second``,
``retransmits``, ``snd_cwnd``, ``snd_wnd``, ``rtt_ms``, ``rttvar_ms``,
``pmtu`` (the TCP fields are present on Linux senders only, else NA),
``jitter_ms``, ``lost_packets``, ``packets`` (UDP), ``omitted``, ``sender``.

``summary`` flattens the ``end`` object and the start information:
``version``, ``system_info``, ``timestamp_utc``, ``protocol``,
``num_streams``, ``duration``, ``target_bitrate``, ``sent_bps``,
``received_bps``, ``sent_bytes``, ``received_bytes``, ``retransmits``,
``max_rtt_ms``/``min_rtt_ms``/``mean_rtt_ms`` (first stream, sender side),
``sender_tcp_congestion``, ``receiver_tcp_congestion``, the CPU figures, and
``error`` (iperf3's own error text, or None).
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from labkit.parsers.base import ParseError, ParseResult


def iperf3_server_argv(bind: str, port: int) -> list[str]:
    """An iperf3 server for exactly one test (-1), bound to ``bind``; --forceflush so its 'listening' line arrives."""
    return ["iperf3", "-s", "-1", "--forceflush", "-B", bind, "-p", str(port)]


def iperf3_client_argv(address: str, port: int, seconds: int, rate: str) -> list[str]:
    """An iperf3 test of ``seconds`` to ``address``, limited to ``rate`` (iperf3 -b units), with -J output."""
    return ["iperf3", "-c", address, "-p", str(port), "-t", str(seconds), "-b", rate, "-J"]

_INTERVAL_COLUMNS = [
    "interval", "socket", "start", "end", "seconds", "bytes", "bits_per_second", "retransmits",
    "snd_cwnd", "snd_wnd", "rtt_ms", "rttvar_ms", "pmtu", "jitter_ms", "lost_packets", "packets",
    "omitted", "sender",
]


def _load(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"not iperf3 -J output: invalid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or not {"start", "end"} & set(data):
        raise ParseError("not iperf3 -J output: no 'start' or 'end' object")
    return data


def parse_iperf3_json(text: str) -> ParseResult:
    """Parse the JSON iperf3 writes with ``-J`` (client or server side)."""
    data = _load(text)
    rows = []
    for index, interval in enumerate(data.get("intervals") or []):
        for stream in interval.get("streams") or []:
            rows.append(
                {
                    "interval": index,
                    "socket": stream.get("socket"),
                    "start": stream.get("start"),
                    "end": stream.get("end"),
                    "seconds": stream.get("seconds"),
                    "bytes": stream.get("bytes"),
                    "bits_per_second": stream.get("bits_per_second"),
                    "retransmits": stream.get("retransmits"),
                    "snd_cwnd": stream.get("snd_cwnd"),
                    "snd_wnd": stream.get("snd_wnd"),
                    # iperf3 reports TCP rtt/rttvar in microseconds.
                    "rtt_ms": stream["rtt"] / 1000 if "rtt" in stream else None,
                    "rttvar_ms": stream["rttvar"] / 1000 if "rttvar" in stream else None,
                    "pmtu": stream.get("pmtu"),
                    "jitter_ms": stream.get("jitter_ms"),
                    "lost_packets": stream.get("lost_packets"),
                    "packets": stream.get("packets"),
                    "omitted": stream.get("omitted"),
                    "sender": stream.get("sender"),
                }
            )
    frame = pd.DataFrame(rows, columns=_INTERVAL_COLUMNS).astype(
        {
            "interval": "int64", "socket": "Int64", "start": "float64", "end": "float64", "seconds": "float64",
            "bytes": "Int64", "bits_per_second": "float64", "retransmits": "Int64", "snd_cwnd": "Int64",
            "snd_wnd": "Int64", "rtt_ms": "float64", "rttvar_ms": "float64", "pmtu": "Int64",
            "jitter_ms": "float64", "lost_packets": "Int64", "packets": "Int64", "omitted": "boolean",
            "sender": "boolean",
        }
    )
    summary = _summary(data)
    counts = {
        "lines": len(text.splitlines()),
        "intervals": len(data.get("intervals") or []),
        "rows": len(frame),
        "streams": len((data.get("end") or {}).get("streams") or []),
        "error": int(summary["error"] is not None),
    }
    return ParseResult(rows=frame, counts=counts, summary=summary)


def _summary(data: dict[str, Any]) -> dict[str, Any]:
    start = data.get("start") or {}
    end = data.get("end") or {}
    test = start.get("test_start") or {}
    summary: dict[str, Any] = {
        "version": start.get("version"),
        "system_info": start.get("system_info"),
        "timestamp_utc": (start.get("timestamp") or {}).get("timesecs"),
        "protocol": test.get("protocol"),
        "num_streams": test.get("num_streams"),
        "duration": test.get("duration"),
        "reverse": test.get("reverse"),
        "target_bitrate": test.get("target_bitrate", start.get("target_bitrate")),
        "connected": start.get("connected") or [],
        "error": data.get("error"),
    }
    sent = end.get("sum_sent") or end.get("sum") or {}
    received = end.get("sum_received") or {}
    summary.update(
        sent_bps=sent.get("bits_per_second"),
        sent_bytes=sent.get("bytes"),
        received_bps=received.get("bits_per_second"),
        received_bytes=received.get("bytes"),
        retransmits=sent.get("retransmits"),
        jitter_ms=sent.get("jitter_ms"),
        lost_percent=sent.get("lost_percent"),
        sender_tcp_congestion=end.get("sender_tcp_congestion"),
        receiver_tcp_congestion=end.get("receiver_tcp_congestion"),
    )
    streams = end.get("streams") or []
    if streams:
        sender = streams[0].get("sender") or {}
        for key in ("max_rtt", "min_rtt", "mean_rtt"):
            summary[f"{key}_ms"] = sender[key] / 1000 if key in sender else None
        summary["max_snd_cwnd"] = sender.get("max_snd_cwnd")
    for key, value in (end.get("cpu_utilization_percent") or {}).items():
        summary[f"cpu_{key}_percent"] = value
    return summary

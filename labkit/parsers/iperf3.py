"""iperf3 ``-J`` JSON: per-interval rows and the end-of-test summary.

Rows (one per stream per interval): ``interval`` (0-based), ``socket``,
``start``, ``end``, ``seconds``, ``bytes``, ``bits_per_second``,
``retransmits``, ``snd_cwnd``, ``snd_wnd``, ``rtt_ms``, ``rttvar_ms``,
``pmtu`` (the TCP fields are present on Linux senders only, else NA),
``jitter_ms``, ``lost_packets``, ``packets``, ``lost_percent`` (UDP: a
sender's intervals have ``packets`` only, a receiver's, with ``-R``, all
four), ``omitted``, ``sender`` (whether the numbers are the sending side's).

``summary`` flattens the start information and the ``end`` object:
``version``, ``system_info``, ``timestamp_utc``, ``protocol``,
``num_streams``, ``duration``, ``reverse``, ``target_bitrate``,
``connected``; ``sum_sent`` and ``sum_received`` as iperf3 wrote them (bytes,
bits_per_second, seconds, and retransmits for TCP or jitter_ms,
lost_packets, packets, lost_percent for UDP) and ``end_streams``, the
per-stream end summaries; flat from those ``sent_bps``, ``sent_bytes``,
``received_bps``, ``received_bytes``, ``retransmits`` (the sender's) and
``jitter_ms``, ``lost_packets``, ``packets``, ``lost_percent`` (the
receiver's: a UDP sender reports zeros); ``max_rtt_ms``/``min_rtt_ms``/
``mean_rtt_ms`` and ``max_snd_cwnd`` (first stream, when this side sent);
``sender_tcp_congestion``, ``receiver_tcp_congestion``;
``sender_cpu_percent`` and ``receiver_cpu_percent`` (``total``, ``user``,
``system``: iperf3's host is the client, the sender unless ``-R``), and the
same as iperf3 names them (``cpu_host_total_percent``, ...); and ``error``
(iperf3's own error text, or None).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pandas as pd

from labkit.parsers.base import ParseError, ParseResult


def iperf3_server_argv(bind: str, port: int) -> list[str]:
    """An iperf3 server for exactly one test (-1), bound to ``bind``; --forceflush so its 'listening' line arrives."""
    return ["iperf3", "-s", "-1", "--forceflush", "-B", bind, "-p", str(port)]


def iperf3_client_argv(address: str, port: int, seconds: int, rate: str) -> list[str]:
    """An iperf3 test of ``seconds`` to ``address``, limited to ``rate`` (iperf3 -b units), with -J output."""
    return ["iperf3", "-c", address, "-p", str(port), "-t", str(seconds), "-b", iperf3_rate(rate), "-J"]


#: A saturating load's direction, from the client host's side: iperf3's flags for it (the client sends by default).
LOAD_DIRECTIONS = {"tcp-up": [], "tcp-down": ["-R"], "tcp-both": ["--bidir"]}


def iperf3_load_argv(address: str, port: int, seconds: int, load: str, cc: str | None) -> list[str]:
    """A saturating TCP load of ``seconds`` to ``address``: one stream, no rate limit (iperf3's default for TCP),
    ``load`` one of :data:`LOAD_DIRECTIONS`, with congestion control ``cc`` (-C: the sender's, at either end) unless
    None, and -J output. Unlike a baseline, this one is meant to fill the path's queue."""
    return ["iperf3", "-c", address, "-p", str(port), "-t", str(seconds), *LOAD_DIRECTIONS[load],
            *(["-C", cc] if cc else []), "-J"]


# iperf3 -b: a number, an optional k/m/g/t (bits, ×1000), an optional /burst in packets.
_RATE = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)([kKmMgGtT]?)(?:/[1-9]\d*)?$")


def iperf3_rate(text: str) -> str:
    """``text`` if iperf3 -b reads it as a positive rate (``50M``, ``1.5G``, ``100k``, ``10M/100``); ValueError else.

    iperf3 reads a rate it cannot parse (``zzz``, ``1M;x`` up to the number) without complaint, and 0 means
    unlimited: a typo would run the baseline unlimited, which through the delay line measures the emulator.
    """
    match = _RATE.match(str(text).strip())
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a positive iperf3 rate (examples: 50M, 1.5G, 100k; bits per second)")
    return str(text).strip()

_INTERVAL_COLUMNS = [
    "interval", "socket", "start", "end", "seconds", "bytes", "bits_per_second", "retransmits",
    "snd_cwnd", "snd_wnd", "rtt_ms", "rttvar_ms", "pmtu", "jitter_ms", "lost_packets", "packets",
    "lost_percent", "omitted", "sender",
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
                    "lost_percent": stream.get("lost_percent"),
                    "omitted": stream.get("omitted"),
                    "sender": stream.get("sender"),
                }
            )
    frame = pd.DataFrame(rows, columns=_INTERVAL_COLUMNS).astype(
        {
            "interval": "int64", "socket": "Int64", "start": "float64", "end": "float64", "seconds": "float64",
            "bytes": "Int64", "bits_per_second": "float64", "retransmits": "Int64", "snd_cwnd": "Int64",
            "snd_wnd": "Int64", "rtt_ms": "float64", "rttvar_ms": "float64", "pmtu": "Int64",
            "jitter_ms": "float64", "lost_packets": "Int64", "packets": "Int64", "lost_percent": "float64",
            "omitted": "boolean",
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
    summary.update(_end_sums(end))
    summary.update(_cpu(end, bool(test.get("reverse"))))
    return summary


def _end_sums(end: dict[str, Any]) -> dict[str, Any]:
    """The end summary: both sums as iperf3 wrote them, the per-stream ones, and flat figures from them."""
    # iperf3 before 3.10 wrote UDP results only as `sum`; a UDP sender's sum_sent has zero
    # jitter and loss, which only the receiver measures.
    sent = end.get("sum_sent") or end.get("sum") or {}
    received = end.get("sum_received") or end.get("sum") or {}
    sums: dict[str, Any] = {
        "sum_sent": end.get("sum_sent"),
        "sum_received": end.get("sum_received"),
        "end_streams": end.get("streams") or [],
        "sent_bps": sent.get("bits_per_second"),
        "sent_bytes": sent.get("bytes"),
        "received_bps": received.get("bits_per_second") if "sum_received" in end else None,
        "received_bytes": received.get("bytes") if "sum_received" in end else None,
        "retransmits": sent.get("retransmits"),
        "sender_tcp_congestion": end.get("sender_tcp_congestion"),
        "receiver_tcp_congestion": end.get("receiver_tcp_congestion"),
    }
    for key in ("jitter_ms", "lost_packets", "packets", "lost_percent"):
        sums[key] = received.get(key)
    streams = end.get("streams") or []
    sender = (streams[0].get("sender") or {}) if streams else {}
    # With -R the client's end summary has a `sender` entry whose rtt and cwnd are zeros it never measured.
    measured = bool(sender.get("sender"))
    for key in ("max_rtt", "min_rtt", "mean_rtt"):
        sums[f"{key}_ms"] = sender[key] / 1000 if measured and key in sender else None
    sums["max_snd_cwnd"] = sender.get("max_snd_cwnd") if measured else None
    return sums


def _cpu(end: dict[str, Any], reverse: bool) -> dict[str, Any]:
    """CPU use as iperf3 names it (host = the client) and by role: the client sends unless -R."""
    cpu = end.get("cpu_utilization_percent") or {}
    figures: dict[str, Any] = {f"cpu_{key}_percent": value for key, value in cpu.items()}
    sides = {"host": cpu and {k[len("host_"):]: v for k, v in cpu.items() if k.startswith("host_")},
             "remote": cpu and {k[len("remote_"):]: v for k, v in cpu.items() if k.startswith("remote_")}}
    figures["sender_cpu_percent"] = (sides["remote"] if reverse else sides["host"]) or None
    figures["receiver_cpu_percent"] = (sides["host"] if reverse else sides["remote"]) or None
    return figures

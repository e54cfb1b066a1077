"""Logs written by Go gRPC echo clients of the published experiments.

Two formats:

- :func:`parse_go_echo_log`, the 2016 ping-vs-gRPC client (bbengfort/orca)::

      2016/11/02 08:24:56 received 50 bytes from orca (128.8.126.120:3265) order=1 seq=1 time=27.355185ms

  ``time=`` is a Go duration in whatever unit Go chose (``1.868983839s`` for
  a slow call): every unit is read, none dropped.

- :func:`parse_idle_step_output`, the client of the idle-connection report
  (grpc-go #5599/#8436): ``Payload size: N bytes`` lines, each giving the
  request size of the ``Round trip time: <Go duration>`` lines that follow.
  A Go ``log`` timestamp in front of either line is accepted.
"""

from __future__ import annotations

import re

import pandas as pd

from labkit.parsers.base import LineTally, ParseResult, split_lines
from labkit.parsers.godur import go_duration_unit, parse_go_duration_ns

_GO_LOG_STAMP = r"(?P<stamp>\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?)"
_ECHO = re.compile(
    rf"^{_GO_LOG_STAMP} received (?P<bytes>\d+) bytes from (?P<peer>\S+) \((?P<addr>[^)]*)\) "
    r"order=(?P<order>\d+) seq=(?P<seq>\d+) time=(?P<time>\S+)$"
)
_ECHO_STATS_HEADER = re.compile(r"^--- (\S+) statistics ---$")
_ECHO_STATS_RTT = re.compile(r"^round-trip min/avg/max/stddev = ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms$")


def _to_utc(stamps: pd.Series, tz: str | None) -> pd.Series:
    """Go's log writes local time without a zone: localise it in ``tz`` (UTC if unknown)."""
    parsed = pd.to_datetime(stamps, format="mixed")
    return parsed.dt.tz_localize(tz or "UTC").dt.tz_convert("UTC")


def parse_go_echo_log(text: str, *, tz: str | None = None) -> ParseResult:
    """Parse the 2016 Go echo client log: one row per ``received`` line, plus rows for missing seqs.

    Row columns: ``seq``, ``order``, ``rtt_ms`` (float, NaN when missing),
    ``unit`` (the unit Go wrote the duration in: ns, µs, ms, s, m or h),
    ``t_utc`` (the log timestamp, read in ``tz``, which defaults to UTC because
    Go's log does not say its zone), ``bytes``, ``peer``, ``ok`` (False for
    a seq missing between the first and last one seen).

    Counts: ``samples`` (received lines), ``missing`` (seqs absent in the
    range seen), and ``unit_<u>`` for every unit met (``unit_s`` is the number
    of samples written in seconds). ``summary`` has the client's closing
    ``round-trip min/avg/max/stddev`` line when present.
    """
    tally = LineTally()
    records: list[dict] = []
    summary: dict = {}
    for number, raw in enumerate(split_lines(text), start=1):
        line = tally.prepare(raw)
        if line is None:
            continue
        if m := _ECHO.match(line):
            try:
                ns = parse_go_duration_ns(m["time"])
            except ValueError:
                tally.unknown(number, raw)
                continue
            records.append(
                {
                    "seq": int(m["seq"]),
                    "order": int(m["order"]),
                    "rtt_ms": ns / 1e6,
                    "unit": go_duration_unit(m["time"]),
                    "stamp": m["stamp"],
                    "bytes": int(m["bytes"]),
                    "peer": m["addr"],
                    "ok": True,
                }
            )
        elif m := _ECHO_STATS_HEADER.match(line):
            summary["name"] = m.group(1)
        elif m := _ECHO_STATS_RTT.match(line):
            summary.update(
                zip(("rtt_min_ms", "rtt_avg_ms", "rtt_max_ms", "rtt_stddev_ms"), map(float, m.groups()))
            )
        else:
            tally.unknown(number, raw)
            continue
        tally.recognised()

    columns = ["seq", "order", "rtt_ms", "unit", "t_utc", "bytes", "peer", "ok"]
    frame = pd.DataFrame(records, columns=[*columns[:4], "stamp", *columns[5:]])
    frame["t_utc"] = _to_utc(frame["stamp"], tz) if len(frame) else pd.Series(dtype="datetime64[ns, UTC]")
    frame = frame.drop(columns="stamp")
    missing: list[int] = []
    if len(frame):
        present = set(frame["seq"])
        missing = [s for s in range(min(present), max(present) + 1) if s not in present]
    if missing:
        gap_rows = pd.DataFrame({"seq": missing, "rtt_ms": float("nan"), "ok": False})
        frame = pd.concat([frame, gap_rows], ignore_index=True)
    frame = frame[columns].astype(
        {"seq": "int64", "order": "Int64", "rtt_ms": "float64", "unit": "string", "bytes": "Int64", "peer": "string", "ok": "bool"}
    )
    frame = frame.sort_values(["seq", "order"], kind="stable").reset_index(drop=True)

    counts = tally.counts()
    counts["samples"] = len(records)
    counts["missing"] = len(missing)
    for unit, n in sorted(pd.Series([r["unit"] for r in records], dtype="object").value_counts().items()):
        counts[f"unit_{unit}"] = int(n)
    return ParseResult(rows=frame, counts=counts, summary=summary, unrecognised_lines=tally.unrecognised)


_PAYLOAD = re.compile(rf"^(?:{_GO_LOG_STAMP} )?Payload size: (?P<size>\d+) bytes?$")
_ROUND_TRIP = re.compile(rf"^(?:{_GO_LOG_STAMP} )?Round trip time: (?P<time>\S+)$")


def parse_idle_step_output(text: str, *, tz: str | None = None) -> ParseResult:
    """Parse the idle-step client's output: one row per ``Round trip time`` line.

    Row columns: ``call`` (0-based, in output order), ``payload_bytes`` (from
    the latest ``Payload size`` line, NA before any), ``index_in_size`` (0 for
    the first call after a ``Payload size`` line), ``rtt_ms``, ``unit``,
    ``t_utc`` (when the line has a Go log timestamp, read in ``tz``), ``ok``.

    Counts: ``calls``, ``sizes`` (``Payload size`` lines), ``calls_without_size``.
    """
    tally = LineTally()
    records: list[dict] = []
    size: int | None = None
    index_in_size = 0
    sizes = 0
    for number, raw in enumerate(split_lines(text), start=1):
        line = tally.prepare(raw)
        if line is None:
            continue
        if m := _PAYLOAD.match(line):
            size = int(m["size"])
            index_in_size = 0
            sizes += 1
        elif (m := _ROUND_TRIP.match(line)) and _is_duration(m["time"]):
            records.append(
                {
                    "call": len(records),
                    "payload_bytes": size,
                    "index_in_size": index_in_size,
                    "rtt_ms": parse_go_duration_ns(m["time"]) / 1e6,
                    "unit": go_duration_unit(m["time"]),
                    "stamp": m["stamp"],
                    "ok": True,
                }
            )
            index_in_size += 1
        else:
            tally.unknown(number, raw)
            continue
        tally.recognised()
    frame = pd.DataFrame(records, columns=["call", "payload_bytes", "index_in_size", "rtt_ms", "unit", "stamp", "ok"])
    stamps = frame["stamp"]
    if stamps.notna().any():
        frame["t_utc"] = _to_utc(stamps, tz)
    else:
        frame["t_utc"] = pd.Series(pd.NaT, index=frame.index, dtype="datetime64[ns, UTC]")
    frame = frame.drop(columns="stamp").astype(
        {"call": "int64", "payload_bytes": "Int64", "index_in_size": "int64", "rtt_ms": "float64", "unit": "string", "ok": "bool"}
    )
    counts = tally.counts()
    counts.update(
        calls=len(records),
        sizes=sizes,
        calls_without_size=int(frame["payload_bytes"].isna().sum()),
    )
    return ParseResult(rows=frame, counts=counts, unrecognised_lines=tally.unrecognised)


def _is_duration(text: str) -> bool:
    try:
        parse_go_duration_ns(text)
    except ValueError:
        return False
    return True

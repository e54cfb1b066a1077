"""irtt (https://github.com/heistp/irtt, Debian's ``irtt`` 0.9): its server's and client's argv, and the client's JSON.

irtt sends UDP packets on a fixed period to its own server, which stamps each one on its wall and monotonic
clocks when it arrives and when the reply leaves. With the client's own stamps at the send and at the reply's
arrival, each round trip splits into a one-way delay out and one back, the same arithmetic labkit does on its
echo servers' stamps (:mod:`labkit.analysis.oneway`): so the two can be compared on one link.

:func:`parse_irtt` reads ``irtt client -o -`` (JSON format 1). One row per round trip, in
:data:`labkit.schemas.SERIES_FIELDS`' columns:

- ``probe`` ``irtt``; ``seq`` irtt's seqno (0-based, one per packet sent); ``slot`` the interval it was sent in
  (0-based: its send time on the client's monotonic clock, from the first packet's, in whole intervals), which is
  the seqno plus the intervals irtt skipped before it (its send loop skips one whenever a send comes more than half
  an interval off its time: late, or early, as irtt's default compensating timer sometimes wakes);
- ``t_utc_ns`` the client's wall clock at the send;
- ``rtt_ms`` the whole round trip as the client saw it (its monotonic clock at the reply's arrival less at the
  send), server time included: what ping measures. irtt's own ``rtt`` takes the server's time out;
- ``server_recv_utc_ns`` and ``server_send_utc_ns`` the server's wall clock when the request arrived and when the
  reply left, so ``server_recv_utc_ns - t_utc_ns`` is irtt's ``send_delay`` and ``t_utc_ns + rtt -
  server_send_utc_ns`` its ``receive_delay`` (to the ns where the client's wall and monotonic clocks ran at one
  rate over the round trip);
- ``ok`` False for a packet irtt marked lost, with ``error`` ``no reply`` (``summary["lost"]`` says in which
  direction irtt thinks it was lost); ``duplicate`` is always False: irtt keeps one round trip per seqno and only
  counts duplicates (``summary["duplicates"]``);
- ``payload_bytes`` the packet length irtt used (its UDP payload: irtt's own header included, which irtt grows
  the length to when asked for less); ``unit`` ``ns`` (irtt's stamps), null for a lost packet.

``summary``: irtt's version, JSON format, system info, addresses and negotiated parameters (``interval_ns``,
``duration_ns``, ``length``, ``stamp_at``, ``clock``: which server stamps on which clocks), its start time,
packets sent and received (``packets_sent``, ``packets_received``, ``server_packets_received``, ``duplicates``,
``late_packets``, ``timer_misses``, the loss percentages, each direction's), ``lost`` (counts of irtt's lost
kinds: ``up``, ``down``, ``unknown``) and ``lost_seqnos`` (seqno -> that kind), and its own statistics of the
round trips as it wrote them, in ns (``rtt``, ``send_delay``, ``receive_delay``, ``server_processing_time``,
``ipdv_send``, ``ipdv_receive``, ``ipdv_round_trip``): ``send_delay`` is the way out, ``receive_delay`` the way
back, both on the two hosts' wall clocks (their offset included).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from labkit.parsers.base import ParseError, ParseResult

#: The JSON format this parser reads (irtt's ``version.json_format``; an increment means an incompatible change).
JSON_FORMAT = 1
#: What ``lost`` says of a lost packet -> its direction here (irtt knows it only from the server's receive window).
LOST_KINDS = {"true": "unknown", "true_up": "up", "true_down": "down"}
#: Addresses that would open a server to every network the host is on.
_UNSPECIFIED = {"", "0.0.0.0", "::", "[::]", "*"}
#: The line irtt's server prints once a listener is up: ``[ListenerStart] starting IPv4 listener on ADDR:PORT``.
_LISTENING = re.compile(r"^\[ListenerStart\] starting IPv[46] listener on (?P<address>\S+):(?P<port>\d{1,5})$")


def go_duration(seconds: float) -> str:
    """``seconds`` as a Go duration irtt reads, in whole ns so nothing is rounded (``0.1`` -> ``100000000ns``)."""
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{seconds!r} is not a duration irtt takes")
    return f"{round(seconds * 1e9)}ns"


def _host_port(address: str, port: int) -> str:
    """``ADDRESS:PORT`` as irtt reads it: an IPv6 address in brackets."""
    if not 0 <= port <= 65535:
        raise ValueError(f"{port} is not a UDP port")
    host = f"[{address}]" if ":" in address and not address.startswith("[") else address
    return f"{host}:{port}"


def irtt_server_argv(address: str, port: int = 0, *, max_duration_s: float, min_interval_s: float,
                     max_length: int, idle_timeout_s: float = 60.0) -> list[str]:
    """An irtt server bound to ``address`` alone (port 0: one the kernel picks, which its listening line names:
    :func:`parse_irtt_listening`), bounded: a test may last at most ``max_duration_s``, send no more often than every
    ``min_interval_s`` and no packet longer than ``max_length``; a client silent for ``idle_timeout_s`` is dropped
    (irtt then caps a client's interval at a quarter of it). No fills but its own (``--allow-fills=``).

    An unspecified address (``0.0.0.0``, ``::``) or an interface (``%eth0``) would answer on every network the host is
    on, anyone's packets: refused, as a ValueError."""
    if address.strip() in _UNSPECIFIED or address.startswith("%"):
        raise ValueError(f"irtt's server binds to one address, not {address!r} (every network the host is on)")
    return ["irtt", "server", "-b", _host_port(address, port), "-d", go_duration(max_duration_s),
            "-i", go_duration(min_interval_s), "-l", str(max_length), f"--timeout={go_duration(idle_timeout_s)}",
            "--allow-fills="]


def irtt_client_argv(address: str, port: int, interval_s: float, duration_s: float, payload_bytes: int, *,
                     wait_s: float = 5.0, timer: str = "simple") -> list[str]:
    """An irtt client of ``duration_s`` to the server at ``address:port``: a packet every ``interval_s`` of
    ``payload_bytes`` (irtt's length, its header included; irtt makes it longer when the header needs more), filled
    at random, its JSON on stdout (``-o -``) and nothing else (``-Q``: errors only, on stderr).

    The server stamps both the request's arrival and the reply's departure (``--tstamp=both``) on both its clocks
    (``--clock=both``): the wall clock's stamps give the one-way delays, and reports which packets it received
    (``--stats=both``), so a loss is known to be out or back. After the last send the client waits ``wait_s`` for
    the replies still due, then reports the rest lost.

    ``timer`` ``simple``: Go's plain timer, only ever late (~0.6 ms on a busy 2-core VM), so a packet goes every
    interval. irtt's default (``comp``) aims at the time by waking early by its average error, and a send that comes
    early looks to irtt's send loop like one past half-way to the next interval, which it then skips: 2 of 100
    packets on that VM (``tests/data/irtt/loopback_comp.json``)."""
    if payload_bytes < 0:
        raise ValueError(f"{payload_bytes} is not a packet length")
    return ["irtt", "client", "-Q", "-o", "-", "-i", go_duration(interval_s), "-d", go_duration(duration_s),
            "-l", str(payload_bytes), "--fill=rand", f"--timer={timer}", "--tstamp=both", "--clock=both",
            "--stats=both", f"--wait={go_duration(wait_s)}", _host_port(address, port)]


def irtt_version_argv() -> list[str]:
    """What labkit runs to learn whether irtt is on a host, and its version (the first line)."""
    return ["irtt", "version"]


def parse_irtt_listening(line: str) -> tuple[str, int] | None:
    """(address, port) of an irtt server's listening line, or None for any other line."""
    match = _LISTENING.match(line.strip())
    return (match["address"].strip("[]"), int(match["port"])) if match else None


# -- the client's JSON --------------------------------------------------------------------------------------------

_COLUMNS = ["probe", "seq", "slot", "t_utc_ns", "rtt_ms", "server_recv_utc_ns", "server_send_utc_ns", "ok", "error",
            "duplicate", "payload_bytes", "unit"]
_STATS = ("rtt", "send_delay", "receive_delay", "server_processing_time", "ipdv_send", "ipdv_receive",
          "ipdv_round_trip")
_COUNTS = ("packets_sent", "packets_received", "server_packets_received", "duplicates", "late_packets",
           "timer_misses", "packet_loss_percent", "upstream_loss_percent", "downstream_loss_percent")


def _load(text: str) -> dict[str, Any]:
    if not text.strip():
        raise ParseError("not irtt's JSON output: it is empty (irtt writes its errors on stderr)")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"not irtt's JSON output: invalid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("round_trips"), list) or not isinstance(
            data.get("version"), dict):
        raise ParseError("not irtt's JSON output: no 'version' object and 'round_trips' list")
    found = data["version"].get("json_format")
    if found != JSON_FORMAT:
        raise ParseError(f"irtt's JSON format {found!r} is not the one labkit reads ({JSON_FORMAT}); irtt "
                         f"{data['version'].get('irtt')!r}")
    return data


def _stamp(stamps: dict, side: str, when: str, clock: str) -> int | None:
    value = ((stamps.get(side) or {}).get(when) or {}).get(clock)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _lost_kind(value: Any, seqno: Any) -> str | None:
    """None for a round trip that came back; irtt's kind of loss (up, down, unknown) for one that did not."""
    if value in (False, "false"):
        return None
    if value is True:
        return "unknown"
    if value in LOST_KINDS:
        return LOST_KINDS[value]
    raise ParseError(f"irtt's round trip {seqno!r} has a 'lost' of {value!r}, not one irtt writes")


def _slot(stamps: dict, first: dict[str, int], interval: Any, seqno: int) -> int:
    """The interval a packet was sent in: its send stamp from the first packet's, in whole intervals (rounded: irtt
    aims each send at the start of one), on the monotonic clock where it has one; the seqno where irtt gave no
    interval."""
    if not isinstance(interval, int) or interval <= 0:
        return seqno
    for clock in ("monotonic", "wall"):
        stamp = _stamp(stamps, "client", "send", clock)
        if stamp is not None:
            return max(0, int((stamp - first.setdefault(clock, stamp)) / interval + 0.5))
    return seqno


def parse_irtt(text: str) -> ParseResult:
    """Rows and summary of ``irtt client -o -`` output (see the module docstring)."""
    import pandas as pd  # here: labkit series, which builds the argv, starts without pandas

    data = _load(text)
    params = ((data.get("config") or {}).get("params") or {})
    length, interval = params.get("length"), params.get("interval")
    rows, lost_seqnos = [], {}
    first: dict[str, int] = {}  # clock -> the first packet's send stamp, which starts interval 0
    for trip in data["round_trips"]:
        seqno = trip.get("seqno") if isinstance(trip, dict) else None
        if not isinstance(seqno, int) or isinstance(seqno, bool) or seqno < 0:
            raise ParseError(f"irtt's round trip {trip!r:.60} has no seqno")
        stamps = trip.get("timestamps") or {}
        lost = _lost_kind(trip.get("lost"), seqno)
        sent = _stamp(stamps, "client", "send", "wall")
        if sent is None:
            raise ParseError(f"irtt's round trip {seqno} has no wall-clock send stamp")
        slot = _slot(stamps, first, interval, seqno)
        rtt_ns = None
        if lost is None:
            # The monotonic clock, as the agents time their probes: a step of the wall clock never lands in it.
            for clock in ("monotonic", "wall"):
                start, end = _stamp(stamps, "client", "send", clock), _stamp(stamps, "client", "receive", clock)
                if start is not None and end is not None:
                    rtt_ns = end - start
                    break
            if rtt_ns is None:
                raise ParseError(f"irtt's round trip {seqno} came back but has no receive stamp")
        else:
            lost_seqnos[seqno] = lost
        rows.append({
            "probe": "irtt", "seq": seqno, "slot": slot, "t_utc_ns": sent,
            "rtt_ms": rtt_ns / 1e6 if rtt_ns is not None else math.nan,
            "server_recv_utc_ns": _stamp(stamps, "server", "receive", "wall"),
            "server_send_utc_ns": _stamp(stamps, "server", "send", "wall"),
            "ok": lost is None, "error": "" if lost is None else "no reply", "duplicate": False,
            "payload_bytes": length, "unit": "ns" if lost is None else None,
        })
    # Column by column, each in its type: a row of dicts with None in it would pass the stamps through float64,
    # whose 53 bits round an epoch in ns by up to 128 ns.
    types = {"probe": "string", "seq": "int64", "slot": "int64", "t_utc_ns": "int64", "rtt_ms": "float64",
             "server_recv_utc_ns": "Int64", "server_send_utc_ns": "Int64", "ok": "bool", "error": "string",
             "duplicate": "bool", "payload_bytes": "Int64", "unit": "string"}
    frame = pd.DataFrame({name: pd.array([row[name] for row in rows], dtype=types[name]) for name in _COLUMNS})
    if frame["slot"].duplicated().any() or (frame["slot"] < frame["seq"]).any():
        raise ParseError("irtt's round trips are not one per send interval, in order (a clock stepped?)")
    if frame["seq"].duplicated().any():
        raise ParseError(f"irtt's round trips repeat seqno {int(frame.loc[frame['seq'].duplicated(), 'seq'].iat[0])}")
    summary = _summary(data, params, lost_seqnos)
    counts = {"lines": len(text.splitlines()), "round_trips": len(frame), "replies": int(frame["ok"].sum()),
              "lost": len(lost_seqnos)}
    return ParseResult(rows=frame, counts=counts, summary=summary)


def _summary(data: dict[str, Any], params: dict[str, Any], lost_seqnos: dict[int, str]) -> dict[str, Any]:
    config, stats = data.get("config") or {}, data.get("stats") or {}
    summary: dict[str, Any] = {
        "version": data["version"].get("irtt"),
        "json_format": data["version"].get("json_format"),
        "system_info": data.get("system_info"),
        "local_address": config.get("local_address"),
        "remote_address": config.get("remote_address"),
        "interval_ns": params.get("interval"),
        "duration_ns": params.get("duration"),
        "length": params.get("length"),
        "stamp_at": params.get("stamp_at"),
        "clock": params.get("clock"),
        "start_time": stats.get("start_time"),
        **{key: stats.get(key) for key in _COUNTS},
        "lost": {kind: sum(1 for found in lost_seqnos.values() if found == kind) for kind in ("up", "down", "unknown")},
        "lost_seqnos": lost_seqnos,
        **{key: stats.get(key) for key in _STATS},
    }
    return summary

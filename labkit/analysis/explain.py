"""Every call explained in round trips: its latency cut into named components, and one cause for what it took beyond one.

A call's latency is cut into:

- ``handshake``, ``tls``, ``http2-setup``: the round trips a cold call spends
  opening its connection (TCP, TLS, HTTP/2's preface and SETTINGS, which both
  grpcio and grpc-go wait for before the request);
- ``request-rounds``: one base RTT per round trip the request needed
  (``rounds``; one is what every call needs);
- ``server``: the server's own time on the call (its ``labkit-server-ns``
  trailer, ``server_ns``);
- ``retransmission``: what the rounds that resent data took beyond a base RTT;
- ``queueing``: what the other rounds took beyond a base RTT (the path's
  queues, the time to put the bytes on the wire); where the call's wait in each
  direction is known (below), that wait, and ``queue_direction`` says where
  (``a->b``, the request's way; ``b->a``, the reply's; ``both``);
- ``remainder``: what is left, the client's own time before the first packet
  and after the last (its gRPC stack), or a misprediction.

With a packet capture (``--capture``) the round trips are counted from the
client's own packets: its segments fall into *flights*, a flight ending where
the client waited at least half a base RTT for the server. Without one they
come from the kernel's rules applied to the TCP state recorded around the call
(``cwnd``, idle time, RTO, MSS; :func:`labkit.analysis.idle.restart_window`)
and from the protocols' rules for a cold call; with neither (an upload), from
the latency alone. ``evidence`` says which: ``capture``, ``tcp-state`` or
``latency``. A warm call whose waits in the path's queues are known, each
direction apart, has one request round and that wait as its ``queueing``:
``emulator`` (the testbed's link emulator recorded every packet's wait in its
queue, read at the call's own packets) or ``one-way`` (the server's stamps: each
way's delay beyond its least in the run, which needs no common clock, since
the clocks' offset is the same in both).

Each call gets one ``cause`` for its time beyond one base RTT, from
:data:`CAUSES`: the component that took the most of it, extra request rounds
named for why they were needed (a window restarted after idle, a congestion
window too small, the peer's receive window), or ``none`` when nothing took
more than :data:`NONE_FRACTION` of a base RTT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from labkit.analysis.fits import slow_start_rounds
from labkit.analysis.idle import restart_window

COMPONENTS = ("handshake", "tls", "http2-setup", "request-rounds", "server", "retransmission", "queueing", "remainder")
CAUSES = ("handshake", "tls", "http2-setup", "cwnd-restart-after-idle", "cwnd-limited", "receive-window-limited",
          "server", "retransmission", "queueing", "none")
#: A call whose named components take no more than this fraction of a base RTT beyond the one round trip has cause "none".
NONE_FRACTION = 0.2
#: A client that waits this fraction of a base RTT between two of its segments waited for the server: a new flight.
FLIGHT_GAP_FRACTION = 0.5
#: Linux's initial congestion window (RFC 6928), what a new connection starts with.
INITIAL_WINDOW = 10
#: A flight this small, before the request, carries only connection set-up (HTTP/2's preface and SETTINGS).
SETUP_MAX_BYTES = 1024


@dataclass
class Flight:
    """Client segments sent without waiting for the server: when, how many bytes, and what they carried."""

    start_ns: int
    bytes: int = 0
    syn: bool = False
    preface: bool = False
    tls: bool = False
    retransmit: bool = False
    kind: str = "request"
    segments: list[int] = field(default_factory=list)  # row labels of the packets


def flights(packets: pd.DataFrame, base_rtt_ms: float) -> list[Flight]:
    """The client's flights among one call's packets (one connection, in time order), each with its kind.

    Kinds: ``handshake`` (the SYN), ``tls`` (a TLS record right after the
    handshake: the ClientHello), ``http2-setup`` (a small flight that opens
    HTTP/2, followed by another), ``request``. What the client sends after
    the last data from the server (the response) is not on the call's path
    (gRPC's WINDOW_UPDATE and PING after a response) and makes no flight.
    """
    gap_ns = FLIGHT_GAP_FRACTION * base_rtt_ms * 1e6
    received = packets.loc[(packets["direction"] == "s2c") & (packets["length"] > 0), "t_ns"]
    response_ns = received.max() if len(received) else np.inf
    result: list[Flight] = []
    last_ns = None
    for label, row in packets[(packets["direction"] == "c2s") & (packets["t_ns"] < response_ns)].iterrows():
        syn = "S" in row["flags"]
        if row["length"] == 0 and not syn:
            continue  # a bare ACK carries nothing the call waits on
        if last_ns is None or row["t_ns"] - last_ns >= gap_ns or syn:
            result.append(Flight(int(row["t_ns"])))
        flight = result[-1]
        last_ns = row["t_ns"]
        flight.bytes += int(row["length"])
        flight.syn |= syn
        flight.preface |= row["kind"] == "h2-preface"
        flight.tls |= row["kind"] == "tls"
        flight.retransmit |= bool(row["retransmit"])
        flight.segments.append(label)
    _name_flights(result)
    return result


def _name_flights(result: list[Flight]) -> None:
    data = [f for f in result if not f.syn]
    for index, flight in enumerate(result):
        if flight.syn:
            flight.kind = "handshake"
    cold = any(f.syn for f in result)
    for index, flight in enumerate(data):
        if not cold or index == len(data) - 1:
            continue  # a warm call has no set-up; the last flight carries the request
        after_tls = index > 0 and data[index - 1].kind == "tls"
        if index == 0 and flight.tls and not flight.preface:
            flight.kind = "tls"
        elif (flight.preface or after_tls) and flight.bytes <= SETUP_MAX_BYTES:
            flight.kind = "http2-setup"


@dataclass
class Context:
    """What explaining one call needs besides its own row: the base RTT and the kernel's setting."""

    base_rtt_ms: float
    ssai: int | None = None  # net.ipv4.tcp_slow_start_after_idle on the client (None: unknown)
    overhead_bytes: float = 0.0  # gRPC and HTTP/2 framing per request (request_framing), for the no-capture path


@dataclass(frozen=True)
class QueueWait:
    """What a call waited in the path's queues, each way (ms), and how that is known: ``emulator`` or ``one-way``."""

    out_ms: float
    back_ms: float
    evidence: str


def explain_call(call: dict[str, Any], packets: pd.DataFrame | None, context: Context,
                 queue: QueueWait | None = None) -> dict[str, Any]:
    """One call's decomposition: ``rtt_ms``, ``base_rtt_ms``, ``rounds``, ``components`` ([{name, ms}]), ``cause``,
    ``evidence`` (``capture``, ``tcp-state``, ``emulator``, ``one-way`` or ``latency``), ``reason`` (why extra request
    rounds were needed), and where it queued: ``queue_direction`` (``out``, ``back``, ``both`` or None),
    ``queueing_out_ms`` and ``queueing_back_ms`` (None where unknown).

    ``call`` holds ``t_start_utc_ns``, ``rtt_ns``, ``cold``, ``payload_bytes``, ``server_ns`` and, for the
    no-capture path, the TCP state columns; ``packets`` are the call's own (:func:`attribute_packets`), or None;
    ``queue`` what it waited in the path's queues each way, where known.
    """
    base = context.base_rtt_ms
    rtt_ms = call["rtt_ns"] / 1e6
    server_ms = _number(call.get("server_ns")) / 1e6
    if packets is not None and len(packets) and (packets["direction"] == "c2s").any():
        parts, rounds, reason = _from_capture(call, packets, context, server_ms)
        evidence = "capture"
    elif queue is not None and not call.get("cold"):
        parts, rounds, reason = _from_queues(call, context, server_ms, queue)
        evidence = queue.evidence
    elif call.get("cold") or pd.notna(call.get("cwnd_before")):
        parts, rounds, reason = _from_tcp_state(call, context, server_ms)
        evidence = "tcp-state"
    else:
        parts, rounds, reason = _from_latency(call, context, server_ms)
        evidence = "latency"
    parts["server"] = server_ms
    named = {k: v for k, v in parts.items() if k != "remainder"}
    parts["remainder"] = rtt_ms - sum(named.values()) if evidence in ("capture", "emulator", "one-way") \
        else parts["remainder"]
    components = [{"name": name, "ms": round(float(parts.get(name, 0.0)), 3)} for name in COMPONENTS]
    return {"rtt_ms": rtt_ms, "base_rtt_ms": base, "rounds": rounds, "components": components,
            "cause": _cause(parts, rounds, reason, base, rtt_ms), "evidence": evidence, "reason": reason,
            "queue_direction": queue_direction(queue, base),
            "queueing_out_ms": queue.out_ms if queue is not None else None,
            "queueing_back_ms": queue.back_ms if queue is not None else None}


def queue_direction(queue: QueueWait | None, base_rtt_ms: float) -> str | None:
    """Where a call queued: ``out`` (the request's way) or ``back`` (the reply's) when that way waited more than
    twice the other, ``both`` when neither did, None when it waited no more than :data:`NONE_FRACTION` of a base
    RTT in all, or where unknown."""
    if queue is None or queue.out_ms + queue.back_ms <= NONE_FRACTION * base_rtt_ms:
        return None
    if queue.out_ms > 2 * queue.back_ms:
        return "out"
    return "back" if queue.back_ms > 2 * queue.out_ms else "both"


def _from_queues(call, context: Context, server_ms: float, queue: QueueWait) -> tuple[dict, int, str | None]:
    """A warm call whose wait in the path's queues is known: one request round (a probe's request fits a window),
    that wait, and what is left (the hosts' stacks, and what the evidence cannot see)."""
    parts = dict.fromkeys(COMPONENTS, 0.0)
    parts["request-rounds"] = context.base_rtt_ms
    parts["queueing"] = max(0.0, queue.out_ms) + max(0.0, queue.back_ms)
    return parts, 1, None


def _number(value) -> float:
    return 0.0 if value is None or (isinstance(value, float) and np.isnan(value)) or pd.isna(value) else float(value)


def _from_capture(call, packets: pd.DataFrame, context: Context, server_ms: float) -> tuple[dict, int, str | None]:
    base = context.base_rtt_ms
    t0, t1 = int(call["t_start_utc_ns"]), int(call["t_start_utc_ns"] + call["rtt_ns"])
    found = _request_flights(flights(packets, base), _number(call.get("payload_bytes")))
    parts = dict.fromkeys(COMPONENTS, 0.0)
    starts = [f.start_ns for f in found] + [t1]
    request = [f for f in found if f.kind == "request"]
    for flight, end in zip(found, starts[1:]):
        duration = (end - flight.start_ns) / 1e6
        if flight.kind != "request":
            parts[flight.kind] += duration
            continue
        excess = duration - base - (server_ms if flight is request[-1] else 0.0)
        parts["retransmission" if flight.retransmit else "queueing"] += max(0.0, excess)
    rounds = len(request)
    parts["request-rounds"] = rounds * base
    reason = _capture_reason(call, packets, request, context) if rounds > 1 else None
    return parts, rounds, reason


def _request_flights(found: list[Flight], payload_bytes: float) -> list[Flight]:
    """The flights on the call's path: set-up, then request flights until the payload's bytes are sent. Later ones
    answer the server (an HTTP/2 PING's acknowledgement) while the client waits for the response: they are part of
    that wait, not a round of the request."""
    kept, sent = [], 0
    for flight in found:
        if flight.kind == "request":
            if kept and kept[-1].kind == "request" and sent >= payload_bytes:
                continue
            sent += flight.bytes
        kept.append(flight)
    return kept


def _capture_reason(call, packets: pd.DataFrame, request: list[Flight], context: Context) -> str:
    """Why the request needed more than one round trip, from what the capture shows before its first flight."""
    first = request[0]
    before = packets[packets["t_ns"] < first.start_ns]
    window = before.loc[before["direction"] == "s2c", "window"]
    if len(window) and first.bytes >= 0.9 * window.iloc[-1]:
        return "receive-window-limited"
    if call.get("cold"):
        return "cwnd-limited"  # a new connection starts from the initial window
    sent = before[(before["direction"] == "c2s") & ((before["length"] > 0) | before["flags"].str.contains("S"))]
    idle_ms = (first.start_ns - sent["t_ns"].iloc[-1]) / 1e6 if len(sent) else _number(call.get("lastsnd_ms_before"))
    return _idle_reason(call, idle_ms, context)


def _idle_reason(call, idle_ms: float, context: Context) -> str:
    """cwnd-restart-after-idle when Linux restarts the window: the sysctl at 1, not BBR, and either no send for
    longer than one RTO before the call, or a window smaller than the previous call left after a gap longer than one
    RTO (the restart already happened at a small send in the gap, such as gRPC's PING, before ``ss`` looked)."""
    rto_ms = _number(call.get("rto_ms_before")) or 200.0 + context.base_rtt_ms  # Linux: RTO >= srtt + 200 ms
    shrank = (_number(call.get("cwnd_before")) < _number(call.get("cwnd_after_previous"))
              and _number(call.get("gap_ms")) > rto_ms)
    restarts = context.ssai == 1 and call.get("tcp_cc") != "bbr" and (idle_ms > rto_ms or shrank)
    return "cwnd-restart-after-idle" if restarts else "cwnd-limited"


def _from_tcp_state(call, context: Context, server_ms: float) -> tuple[dict, int, str | None]:
    """Round trips from the kernel's rules on the recorded TCP state; a cold call pays one per set-up exchange."""
    base = context.base_rtt_ms
    parts = dict.fromkeys(COMPONENTS, 0.0)
    mss = _number(call.get("mss")) or 1448.0
    if call.get("cold"):
        parts["handshake"] = parts["http2-setup"] = base
        parts["tls"] = base if call.get("tls") else 0.0
        window, reason = INITIAL_WINDOW, "cwnd-limited"
    else:
        cwnd, idle, rto = (_number(call.get(k)) for k in ("cwnd_before", "lastsnd_ms_before", "rto_ms_before"))
        reason = _idle_reason(call, idle, context)
        window = restart_window(int(cwnd or INITIAL_WINDOW), idle, rto, INITIAL_WINDOW) if reason != "cwnd-limited" \
            else int(cwnd or INITIAL_WINDOW)
    rounds = int(slow_start_rounds([_number(call.get("payload_bytes")) + context.overhead_bytes], window, mss)[0])
    parts["request-rounds"] = rounds * base
    leftover = call["rtt_ns"] / 1e6 - sum(parts.values()) - server_ms
    # Without packets, time above the rounds the rules predict is the path's (queueing); too little, a misprediction.
    parts["queueing" if leftover >= 0 else "remainder"] = leftover
    return parts, rounds, reason if rounds > 1 else None


def _from_latency(call, context: Context, server_ms: float) -> tuple[dict, int, str | None]:
    """Neither packets nor TCP state (an upload): the round trips the latency holds, each request round beyond the
    first taken as the window's (what makes a sender with the whole request ready wait a round); a guess, and
    ``evidence`` says so."""
    base = context.base_rtt_ms
    parts = dict.fromkeys(COMPONENTS, 0.0)
    rounds = max(1, int((call["rtt_ns"] / 1e6 - server_ms) / base + 0.5))
    parts["request-rounds"] = rounds * base
    parts["remainder"] = call["rtt_ns"] / 1e6 - parts["request-rounds"] - server_ms
    return parts, rounds, "cwnd-limited" if rounds > 1 else None


def _cause(parts: dict[str, float], rounds: int, reason: str | None, base: float, rtt_ms: float) -> str:
    """The one cause of a call's time beyond one base RTT (see the module docstring): ``none`` when the call took
    little more than one, else the named component that took the most (ties: the earlier in a call's order)."""
    if rtt_ms - base <= NONE_FRACTION * base:
        return "none"
    excess = {name: parts.get(name, 0.0) for name in ("handshake", "tls", "http2-setup", "server", "retransmission",
                                                      "queueing")}
    if rounds > 1 and reason:
        excess[reason] = (rounds - 1) * base
    name, value = max(excess.items(), key=lambda item: item[1])
    return name if value > NONE_FRACTION * base else "none"


def server_port(conns: pd.Series) -> pd.Series:
    """The server's port of each ``CLIENT:PORT>SERVER:PORT`` connection name."""
    return conns.str.rsplit(":", n=1).str[-1].astype("int64")


def attribute_packets(packets: pd.DataFrame, calls: pd.DataFrame) -> pd.Series:
    """For each packet, the label (in ``calls``) of the call it belongs to, or -1.

    ``calls`` need ``t_start_utc_ns``, ``rtt_ns``, ``cold`` and ``server_port``
    (where the call went); ``packets`` are one host's capture (the client's:
    the same clock as the calls' times). A packet belongs to a call when it
    lies in the call's time window on the call's connection: for a cold call
    the connection whose SYN the window holds, for a warm one the connection
    to its server port that sent the most payload in the window.
    """
    order = packets.sort_values("t_ns", kind="stable")
    times, ports = order["t_ns"].to_numpy(), server_port(order["conn"]).to_numpy()
    owner = pd.Series(-1, index=packets.index, dtype="int64")
    for label, call in calls.iterrows():
        t0 = int(call["t_start_utc_ns"])
        t1 = t0 + int(call["rtt_ns"])
        lo, hi = np.searchsorted(times, t0, side="left"), np.searchsorted(times, t1, side="right")
        window = order.iloc[lo:hi][ports[lo:hi] == int(call["server_port"])]
        conn = _call_connection(window, bool(call["cold"]))
        if conn is not None:
            owner.loc[window.index[window["conn"] == conn]] = label
    return owner


def _call_connection(window: pd.DataFrame, cold: bool) -> str | None:
    opened = window[(window["direction"] == "c2s") & (window["flags"] == "S")]["conn"]
    if cold:
        return opened.iloc[0] if len(opened) else None
    sent = window[(window["direction"] == "c2s") & ~window["conn"].isin(set(opened))]
    if not len(sent):
        return None
    totals = sent.groupby("conn")["length"].sum()
    return totals.idxmax() if totals.max() > 0 else None


def remainder_share(explained: pd.DataFrame) -> pd.Series:
    """Each call's remainder (what the named components leave unexplained) as a share of its latency."""
    remainder = [next(c["ms"] for c in components if c["name"] == "remainder") for components in explained["components"]]
    return pd.Series(remainder, index=explained.index).abs() / explained["rtt_ms"]


def explain_headline(explained: pd.DataFrame) -> dict[str, Any]:
    """What a notebook reports of its run's explained calls: how many, on what evidence, how many each cause, and the
    share whose named components add up to the latency within 5 %."""
    headline: dict[str, Any] = {"explain.calls": int(len(explained))}
    if explained.empty:
        return headline
    for evidence, count in explained["evidence"].value_counts().items():
        headline[f"explain.evidence.{evidence}"] = int(count)
    for cause, count in explained["cause"].value_counts().items():
        headline[f"explain.cause.{cause}"] = int(count)
    headline["explain.within_5pct"] = round(float((remainder_share(explained) <= 0.05).mean()), 4)
    return headline


def showcase_call(explained: pd.DataFrame) -> pd.Series | None:
    """The call a notebook draws in time and sequence: of those explained from packets, the first with the most
    request rounds; None without such a call."""
    captured = explained[explained["evidence"] == "capture"]
    if captured.empty:
        return None
    return captured.loc[captured["rounds"].idxmax()]

"""``ss -tin`` output: the kernel's TCP state (TCP_INFO) of each connection.

``ss -ti`` prints one line per socket (state, queues, addresses) followed by a
tab-indented line of ``key:value`` tokens. :func:`parse_ss_tcp_info` reads
that second line (or a whole one-connection block) into a flat dict;
:func:`parse_ss` reads a full listing into one row per connection.

Field names follow ss, with the unit appended where ss implies one:
``cwnd``, ``ssthresh``, ``mss``, ``pmtu``, ``rcvmss``, ``advmss``,
``rto_ms``, ``ato_ms``, ``rtt_ms``, ``rttvar_ms``, ``minrtt_ms``,
``rcv_rtt_ms``, ``lastsnd_ms``, ``lastrcv_ms``, ``lastack_ms``, ``busy_ms``,
``bytes_sent``, ``bytes_acked``, ``bytes_received``, ``bytes_retrans``,
``segs_out``, ``segs_in``, ``data_segs_out``, ``data_segs_in``,
``retrans`` and ``retrans_total`` (from ``retrans:cur/total``), ``lost``,
``unacked``, ``delivered``, ``snd_wnd``, ``rcv_space``, ``rcv_ssthresh``,
``send_bps``, ``pacing_rate_bps``, ``delivery_rate_bps``, ``snd_wscale``,
``rcv_wscale``, ``congestion_control``, ``app_limited`` (bool), ``flags``
(other bare words such as ``ts sack ecn``), and ``bbr_bw_bps``,
``bbr_mrtt_ms``, ``bbr_pacing_gain``, ``bbr_cwnd_gain`` for BBR. Tokens it
does not know are kept under ``unparsed`` (a list), never dropped.
"""

from __future__ import annotations

import re
from typing import Any

from labkit.parsers.base import LineTally, ParseResult, split_lines


def ss_argv(address: str, port: int) -> list[str]:
    """The ss command listing established TCP connections to ``address:port``, with TCP info and processes."""
    destination = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    return ["ss", "-H", "-t", "-i", "-n", "-p", "state", "established", "dst", destination]

_MS_FIELDS = {"rto", "ato", "rcv_rtt", "minrtt", "lastsnd", "lastrcv", "lastack", "busy", "rwnd_limited", "sndbuf_limited"}
_FLAGS = {"ts", "sack", "ecn", "ecnseen", "fastopen", "app_limited", "cwnd_limited", "nodelay"}
_RATE_WORDS = {"send": "send_bps", "pacing_rate": "pacing_rate_bps", "delivery_rate": "delivery_rate_bps"}
_RATE = re.compile(r"^([\d.]+)([kKMGT]?)bps$")
_RATE_SCALE = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_NUMBER = re.compile(r"^(-?\d+(?:\.\d+)?)(ms|s|us)?(?:\(([\d.]+)%\))?$")
_STATES = {
    "ESTAB", "SYN-SENT", "SYN-RECV", "FIN-WAIT-1", "FIN-WAIT-2", "TIME-WAIT", "CLOSE-WAIT",
    "LAST-ACK", "LISTEN", "CLOSING", "UNCONN", "CLOSED",
}


def _rate(token: str) -> float | None:
    match = _RATE.match(token)
    return float(match.group(1)) * _RATE_SCALE[match.group(2)] if match else None


def _number(text: str) -> int | float | None:
    match = _NUMBER.match(text)
    if not match:
        return None
    value = float(match.group(1))
    unit = match.group(2)
    if unit == "s":
        value *= 1000
    elif unit == "us":
        value /= 1000
    if unit is None and "." not in match.group(1):
        return int(value)
    return value


def parse_ss_tcp_info(text: str) -> dict[str, Any]:
    """Parse the TCP-info tokens of one connection (the indented line of ``ss -ti``) into a dict.

    A block that also holds the connection line is accepted: only the
    indented/info part is read here (see :func:`parse_ss` for the addresses).
    """
    info: dict[str, Any] = {"flags": [], "unparsed": []}
    tokens = text.split()
    if tokens and tokens[0] in _STATES:
        # A whole block: skip state, queues and addresses (and any users:(...)).
        tokens = tokens[5:]
        while tokens and tokens[0].startswith("users:("):
            tokens = tokens[1:]
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token in _RATE_WORDS and i < len(tokens) and (rate := _rate(tokens[i])) is not None:
            info[_RATE_WORDS[token]] = rate
            i += 1
            continue
        key, sep, value = token.partition(":")
        if not sep:
            if token == "app_limited":
                info["app_limited"] = True
            elif token in _FLAGS:
                info["flags"].append(token)
            elif "congestion_control" not in info and re.fullmatch(r"[a-z][a-z0-9_]*", token):
                info["congestion_control"] = token
            else:
                info["unparsed"].append(token)
            continue
        if not _parse_pair(info, key, value):
            info["unparsed"].append(token)
    info.setdefault("app_limited", False)
    return info


def _parse_pair(info: dict[str, Any], key: str, value: str) -> bool:
    """Store one ``key:value`` token; return False if its form is not understood."""
    if key == "rtt" and "/" in value:
        rtt, rttvar = value.split("/", 1)
        info["rtt_ms"], info["rttvar_ms"] = float(rtt), float(rttvar)
        return True
    if key == "retrans" and "/" in value:
        current, total = value.split("/", 1)
        info["retrans"], info["retrans_total"] = int(current), int(total)
        return True
    if key == "wscale" and "," in value:
        snd, rcv = value.split(",", 1)
        info["snd_wscale"], info["rcv_wscale"] = int(snd), int(rcv)
        return True
    if key == "bbr" and value.startswith("(") and value.endswith(")"):
        for part in value[1:-1].split(","):
            name, _, val = part.partition(":")
            if name == "bw" and (rate := _rate(val)) is not None:
                info["bbr_bw_bps"] = rate
            elif name == "mrtt":
                info["bbr_mrtt_ms"] = float(val)
            elif name in ("pacing_gain", "cwnd_gain"):
                info[f"bbr_{name}"] = float(val)
            else:
                info["unparsed"].append(f"bbr:{part}")
        return True
    if key == "timer" and value.startswith("("):
        parts = value.strip("()").split(",")
        info["timer"] = parts[0]
        if len(parts) > 1 and (ms := _number(parts[1])) is not None:
            info["timer_ms"] = float(ms)
        if len(parts) > 2 and parts[2].isdigit():
            info["timer_retrans"] = int(parts[2])
        return True
    if key in ("skmem", "tcp-ulp-tls") or value.startswith("("):
        info[key] = value
        return True
    match = _NUMBER.match(value)
    if not match:
        return False
    number = _number(value)
    if key in _MS_FIELDS:
        info[f"{key}_ms"] = float(number)
        if match.group(3):
            info[f"{key}_percent"] = float(match.group(3))
    else:
        info[key] = number
    return True


def ss_connections(text: str) -> tuple[list[dict[str, Any]], LineTally]:
    """The connections of a ``ss -tin`` listing as plain dicts, and the tally of its lines.

    Needs no pandas, so the echo client can read its own connection's state on
    hosts where only labkit's slim agent is installed.
    """
    tally = LineTally()
    connections: list[dict[str, Any]] = []
    for number, raw in enumerate(split_lines(text), start=1):
        line = tally.prepare(raw)
        if line is None:
            continue
        fields = line.split()
        if fields[0] in ("State", "Recv-Q", "Netid"):
            tally.recognised()
            continue
        if raw[:1].isspace() and connections:
            info = parse_ss_tcp_info(line)
            connections[-1].update(info)
            tally.recognised()
            continue
        conn = _connection_line(fields)
        if conn is None:
            tally.unknown(number, raw)
            continue
        connections.append(conn)
        tally.recognised()
    return connections, tally


def parse_ss(text: str) -> ParseResult:
    """Parse a full ``ss -tin`` listing into one row per connection (addresses plus TCP info)."""
    import pandas as pd

    connections, tally = ss_connections(text)
    frame = pd.DataFrame(connections)
    counts = tally.counts()
    counts["connections"] = len(connections)
    counts["unparsed_tokens"] = int(sum(len(c.get("unparsed", [])) for c in connections))
    return ParseResult(rows=frame, counts=counts, unrecognised_lines=tally.unrecognised)


def _connection_line(fields: list[str]) -> dict[str, Any] | None:
    """``STATE RECVQ SENDQ LOCAL PEER [users:(...)]``; the state is absent when ss filtered by state."""
    state = None
    if fields and fields[0] in _STATES:
        state, fields = fields[0], fields[1:]
    if len(fields) < 4 or not (fields[0].isdigit() and fields[1].isdigit()):
        return None
    conn: dict[str, Any] = {
        "state": state,
        "recv_q": int(fields[0]),
        "send_q": int(fields[1]),
        "local": fields[2],
        "peer": fields[3],
    }
    if len(fields) > 4:
        conn["process"] = " ".join(fields[4:])
    return conn

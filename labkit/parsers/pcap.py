"""tcpdump captures: the argv that records headers only, and a pure parser of the pcap bytes into packet rows.

labkit captures the experiment's own TCP traffic (``labkit sweep|series|upload
--capture``) with Debian's tcpdump, headers only (``-s 128``: IP and TCP
headers plus the first bytes of payload, enough to tell an HTTP/2 preface or a
TLS record), nanosecond timestamps, packet-buffered (``-U``) so that a capture
stopped hard still holds what it saw. :func:`parse_pcap` reads the file with
dpkt into one row per TCP packet:

``t_ns`` (capture time, ns since the epoch, the capturing host's clock),
``conn`` (``CLIENT_IP:PORT>SERVER_IP:PORT``: the side that sent the SYN, or
whose peer's port is among ``server_ports``, is the client), ``direction``
(``c2s`` or ``s2c``), ``flags`` (``S``, ``SA``, ``A``, ``PA``, ``FA``, ``R``
...), ``seq`` and ``ack`` relative to each side's initial sequence number
(``ack`` null without the ACK flag), ``length`` (TCP payload bytes, from the
IP header, whatever the snap length kept), ``window`` (advertised receive
window in bytes, scaled when the handshake was captured), ``retransmit``
(a data segment that sends no byte beyond the highest already sent that way)
and ``kind`` (``h2-preface`` for a segment opening with HTTP/2's client
preface, ``tls`` for one opening with a TLS record header, else empty).
"""

from __future__ import annotations

import io
import socket
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from labkit.parsers.base import ParseError, ParseResult

#: What labkit keeps of each packet: every header, and 128 - 40 - (options) bytes of payload at most.
SNAPLEN = 128
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_TLS_CONTENT_TYPES = {20, 21, 22, 23}  # change_cipher_spec, alert, handshake, application_data
_FLAG_LETTERS = (("S", 0x02), ("F", 0x01), ("R", 0x04), ("P", 0x08), ("A", 0x10))
COLUMNS = ("t_ns", "conn", "direction", "flags", "seq", "ack", "length", "window", "retransmit", "kind")


def tcpdump_argv(tcpdump: str, path: str, peer: str, ports: list[int]) -> list[str]:
    """tcpdump writing the TCP packets between this host and ``peer`` on ``ports`` to ``path``.

    ``-i any``: the capturing host need not know which interface reaches the
    peer. ``--immediate-mode``: without it libpcap hands packets over in
    blocks, and the packets of the last block are lost when tcpdump is stopped
    (a whole cold call of a test recording was). ``-Z root`` keeps root (or sudo's root) able to write into the run's
    private directory, where Debian's default would drop to user tcpdump.
    The filter is separate argv words (tcpdump joins them), never a shell string.
    """
    if not ports:
        raise ValueError("a capture needs the experiment's ports")
    port_filter = " or ".join(f"port {int(port)}" for port in ports)
    return [tcpdump, "-i", "any", "-n", "-s", str(SNAPLEN), "-U", "--immediate-mode", "-Z", "root",
            "--time-stamp-precision=nano", "-w", path, "tcp", "and", "host", peer, "and", f"({port_filter})"]


@dataclass
class _Side:
    """What the parser tracks of one direction of a connection."""

    isn: int | None = None
    highest_end: int = 0  # relative seq just past the last byte sent so far
    wscale: int = 0


@dataclass
class _Connection:
    client: tuple[str, int]
    server: tuple[str, int]
    sides: dict[str, _Side] = field(default_factory=lambda: {"c2s": _Side(), "s2c": _Side()})
    scaled: bool = False  # both SYNs seen: windows after them are scaled

    @property
    def name(self) -> str:
        return f"{self.client[0]}:{self.client[1]}>{self.server[0]}:{self.server[1]}"


def parse_pcap(data: bytes, server_ports: frozenset[int] | set[int] = frozenset()) -> ParseResult:
    """Parse one pcap (or pcap-ns) file's bytes into a row per TCP packet; see the module docstring.

    Non-TCP packets are counted and left out. Raises :class:`ParseError` on
    bytes that are not a pcap file.
    """
    import dpkt
    import pandas as pd

    try:
        reader = dpkt.pcap.Reader(io.BytesIO(data))
    except (ValueError, dpkt.NeedData) as exc:
        raise ParseError(f"not a pcap file: {exc}") from None
    decode = _link_decoder(reader.datalink())
    connections: dict[frozenset, _Connection] = {}
    rows: list[dict[str, Any]] = []
    counts = {"packets": 0, "tcp": 0, "other": 0, "truncated": 0}
    for timestamp, frame in _records(reader, counts):
        try:
            ip = decode(frame)
        except (dpkt.UnpackError, ValueError):  # the last record of a capture stopped mid-write
            counts["truncated"] += 1
            continue
        counts["packets"] += 1
        tcp = getattr(ip, "data", None)
        if not isinstance(tcp, dpkt.tcp.TCP):
            counts["other"] += 1
            continue
        counts["tcp"] += 1
        rows.append(_packet_row(timestamp, ip, tcp, connections, server_ports))
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    frame = frame.astype({"t_ns": "int64", "seq": "int64", "ack": "Int64", "length": "int64", "window": "int64",
                          "retransmit": "bool"})
    counts["connections"] = len(connections)
    return ParseResult(rows=frame, counts=counts)


def _records(reader, counts: dict[str, int]):
    """(timestamp in ns, frame bytes) of each record; a file cut short ends the records, counted as truncated."""
    import dpkt

    try:
        for timestamp, frame in reader:
            # dpkt gives pcap-ns times as exact Decimals and µs pcap times as floats (exact to well under a µs).
            if isinstance(timestamp, Decimal):
                yield int(timestamp * 1_000_000_000), frame
            else:
                yield round(timestamp * 1_000_000) * 1000, frame
    except (dpkt.NeedData, ValueError):
        counts["truncated"] += 1


def _link_decoder(datalink: int):
    """frame bytes -> the IP packet, for the link types tcpdump writes on Linux."""
    import dpkt

    decoders = {
        dpkt.pcap.DLT_EN10MB: lambda frame: dpkt.ethernet.Ethernet(frame).data,
        dpkt.pcap.DLT_LINUX_SLL: lambda frame: dpkt.sll.SLL(frame).data,
        276: lambda frame: dpkt.sll2.SLL2(frame).data,  # DLT_LINUX_SLL2: tcpdump -i any since libpcap 1.10
        dpkt.pcap.DLT_RAW: _raw_ip,
        101: _raw_ip,  # LINKTYPE_RAW as written to files
        12: _raw_ip,
    }
    if datalink not in decoders:
        raise ParseError(f"pcap link type {datalink} is not one labkit reads (Ethernet, Linux cooked, raw IP)")
    return decoders[datalink]


def _raw_ip(frame: bytes):
    import dpkt

    return dpkt.ip6.IP6(frame) if frame and frame[0] >> 4 == 6 else dpkt.ip.IP(frame)


def _address(ip) -> str:
    family = socket.AF_INET6 if len(ip.src) == 16 else socket.AF_INET
    return socket.inet_ntop(family, ip.src)


def _packet_row(t_ns: int, ip, tcp, connections: dict, server_ports) -> dict[str, Any]:
    src = (_address(ip), tcp.sport)
    dst = (socket.inet_ntop(socket.AF_INET6 if len(ip.dst) == 16 else socket.AF_INET, ip.dst), tcp.dport)
    key = frozenset((src, dst))
    syn, ack_flag = bool(tcp.flags & 0x02), bool(tcp.flags & 0x10)
    if key not in connections:
        # The SYN's sender is the client; without the handshake, the side talking to a server port.
        client_first = (syn and not ack_flag) or dst[1] in server_ports or (src[1] not in server_ports and src[1] > dst[1])
        connections[key] = _Connection(src, dst) if client_first else _Connection(dst, src)
    conn = connections[key]
    direction = "c2s" if src == conn.client else "s2c"
    side, peer = conn.sides[direction], conn.sides["s2c" if direction == "c2s" else "c2s"]
    if side.isn is None or syn:
        side.isn = tcp.seq
        if syn:
            side.wscale = _window_scale(tcp)
            conn.scaled = conn.sides["c2s"].isn is not None and conn.sides["s2c"].isn is not None and ack_flag
    payload = _payload_length(ip, tcp)
    seq = (tcp.seq - side.isn) % 2**32
    end = seq + payload + int(syn) + int(bool(tcp.flags & 0x01))
    retransmit = payload > 0 and end <= side.highest_end
    side.highest_end = max(side.highest_end, end)
    ack = (tcp.ack - peer.isn) % 2**32 if ack_flag and peer.isn is not None else None
    return {
        "t_ns": t_ns, "conn": conn.name, "direction": direction, "flags": _flags(tcp.flags), "seq": seq, "ack": ack,
        "length": payload, "window": tcp.win << (side.wscale if conn.scaled and not syn else 0),
        "retransmit": retransmit, "kind": _kind(bytes(tcp.data)),
    }


def _payload_length(ip, tcp) -> int:
    """TCP payload bytes from the IP header's length, which a snap length does not cut."""
    total = getattr(ip, "len", None)
    if total is None:  # IPv6: payload length excludes the fixed header
        total = ip.plen + 40
        header = 40
    else:
        header = ip.hl * 4
    return max(0, total - header - tcp.off * 4)


def _window_scale(tcp) -> int:
    import dpkt

    for kind, value in dpkt.tcp.parse_opts(tcp.opts):
        if kind == dpkt.tcp.TCP_OPT_WSCALE and value:
            return value[0]
    return 0


def _flags(bits: int) -> str:
    return "".join(letter for letter, bit in _FLAG_LETTERS if bits & bit)


def _kind(payload: bytes) -> str:
    """What the first captured bytes of a segment show: HTTP/2's client preface, a TLS record, or nothing known."""
    if payload.startswith(HTTP2_PREFACE[: min(len(payload), len(HTTP2_PREFACE))]) and payload:
        return "h2-preface"
    if len(payload) >= 3 and payload[0] in _TLS_CONTENT_TYPES and payload[1] == 3 and payload[2] <= 4:
        return "tls"
    return ""

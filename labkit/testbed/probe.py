"""One-way UDP probes across the testbed's links: what the emulator did to each packet, measured.

Every testbed host shares this machine's clock, so a packet's one-way delay is its arrival
time minus its send time, both taken by the kernel (CLOCK_REALTIME): the send time when the
packet reaches the source's TUN device (SO_TIMESTAMPING, software transmit stamps), the
arrival when the destination's stack receives it (SO_TIMESTAMPNS). So the probes time the
link emulator alone: however late this process runs on a busy machine, it only reads
timestamps taken on time. One process opens a sender socket in the source host's namespace and a
receiver in the destination's (sockets stay in the namespace they were made in), and probes
several directions at once, each at its own interval, so a fidelity check of thousands of
packets takes seconds. The checks themselves are in tests/test_link_fidelity.py and
bench/testbed_fidelity.py.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field

from labkit.testbed.netns import inside_netns

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)
# <linux/net_tstamp.h>: software stamps at transmit, reported (payload left out) with a
# per-socket counter of sends, on the socket's error queue.
SOF_TX_FLAGS = (1 << 1) | (1 << 4) | (1 << 7) | (1 << 11)  # TX_SOFTWARE | SOFTWARE | OPT_ID | OPT_TSONLY
IP_RECVERR = 11
_EXTENDED_ERR = struct.Struct("@IBBBBII")  # struct sock_extended_err; ee_data is the OPT_ID counter
_SCM_TIMESTAMPING = struct.Struct("@qqqqqq")
_PAYLOAD = struct.Struct("!IIq")  # flow, seq, send time (ns, CLOCK_REALTIME)
_TIMESPEC = struct.Struct("@qq")


@dataclass
class Flow:
    """Probes from one host to another: ``count`` packets ``interval_s`` apart."""

    src_netns: str
    src_address: str
    dst_netns: str
    dst_address: str
    count: int
    interval_s: float
    sent_ns: list[int] = field(default_factory=list)
    # seq -> the receive time of every copy that arrived, in arrival order
    received_ns: dict[int, list[int]] = field(default_factory=dict)
    arrival_order: list[int] = field(default_factory=list)
    skipped: set[int] = field(default_factory=set)  # never sent (see run's skip)
    kernel_stamped: int = 0  # send times the kernel stamped (the others are this process's clock reading)

    def delays_s(self) -> list[float]:
        """The one-way delay of each probe that arrived (its first copy), in send order."""
        return [(self.received_ns[seq][0] - self.sent_ns[seq]) / 1e9 for seq in range(len(self.sent_ns))
                if seq in self.received_ns]

    def lost(self) -> list[int]:
        return [seq for seq in range(len(self.sent_ns)) if seq not in self.received_ns and seq not in self.skipped]


def _socket(netns: str, address: str, receiver: bool) -> socket.socket:
    with inside_netns(netns):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((address, 0))
    sock.setblocking(False)
    if receiver:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    else:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, SOF_TX_FLAGS)
    return sock


def _drain_send_stamps(senders: list[socket.socket], flows: list[Flow], sends: list[list[int]]) -> None:
    """Replace each flow's user-space send times with the kernel's transmit stamps as they come in."""
    for sock, flow, seqs in zip(senders, flows, sends):
        while True:
            try:
                _, ancillary, _, _ = sock.recvmsg(0, 512, socket.MSG_ERRQUEUE)
            except BlockingIOError:
                break
            stamp = counter = None
            for level, kind, data in ancillary:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING:
                    sec, nsec = _SCM_TIMESTAMPING.unpack(data[:_SCM_TIMESTAMPING.size])[:2]
                    stamp = sec * 1_000_000_000 + nsec
                elif level == socket.IPPROTO_IP and kind == IP_RECVERR:
                    counter = _EXTENDED_ERR.unpack(data[:_EXTENDED_ERR.size])[6]
            if stamp and counter is not None and counter < len(seqs):
                flow.sent_ns[seqs[counter]] = stamp
                flow.kernel_stamped += 1


def _drain(receivers: list[tuple[socket.socket, list[Flow]]]) -> int:
    got = 0
    for sock, flows in receivers:
        while True:
            try:
                data, ancillary, _, _ = sock.recvmsg(64, socket.CMSG_SPACE(_TIMESPEC.size))
            except BlockingIOError:
                break
            stamp = next((_TIMESPEC.unpack(d[:_TIMESPEC.size]) for level, kind, d in ancillary
                          if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS), None)
            received = stamp[0] * 1_000_000_000 + stamp[1] if stamp else time.time_ns()
            index, seq, _ = _PAYLOAD.unpack(data[:_PAYLOAD.size])
            flow = flows[index]
            flow.received_ns.setdefault(seq, []).append(received)
            flow.arrival_order.append(seq)
            got += 1
    return got


def run(flows: list[Flow], *, settle_s: float = 0.5, skip=None) -> list[Flow]:
    """Send every flow's probes on schedule (all flows at once), then wait ``settle_s`` for the last ones.

    ``skip(flow_index, t_utc_ns)``: when it returns True no probe of that flow is sent at
    that moment (the seq is kept, as if it were lost on the way); a check uses it to keep
    probes off moments it cannot judge.
    """
    senders = [_socket(f.src_netns, f.src_address, receiver=False) for f in flows]
    receivers = [(_socket(f.dst_netns, f.dst_address, receiver=True), [f]) for f in flows]
    ports = [sock.getsockname()[1] for sock, _ in receivers]
    sends: list[list[int]] = [[] for _ in flows]  # the seqs each sender sent, in order (OPT_ID counts them)
    try:
        # Each flow starts a fraction of its interval after the one before: probes of several flows
        # are not sent (and do not reach the emulator) at the same instant.
        start = time.monotonic() + 0.05
        plan = sorted((start + (seq + i / len(flows)) * f.interval_s, i, seq)
                      for i, f in enumerate(flows) for seq in range(f.count))
        for at, index, seq in plan:
            while (ahead := at - time.monotonic()) > 0:
                if ahead > 0.0003:
                    time.sleep(ahead - 0.0002)
                _drain(receivers)
                _drain_send_stamps(senders, flows, sends)
            flow = flows[index]
            now = time.time_ns()
            flow.sent_ns.append(now)
            if skip is not None and skip(index, now):
                flow.skipped.add(seq)
                continue
            # index 0: each receiver holds one flow (receivers[i] is flow i's)
            senders[index].sendto(_PAYLOAD.pack(0, seq, now), (flow.dst_address, ports[index]))
            sends[index].append(seq)
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline:
            _drain_send_stamps(senders, flows, sends)
            if not _drain(receivers):
                time.sleep(0.001)
    finally:
        for sock in senders + [sock for sock, _ in receivers]:
            sock.close()
    return flows

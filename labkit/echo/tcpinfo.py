"""TCP state of the client's own connection around each call, from ``ss -tin``.

The idle-connection step is a congestion-window effect, so each recorded call
carries the kernel's view of its connection just before and just after it:
cwnd, ssthresh, RTO, smoothed RTT, MSS, bytes acked, retransmissions. The
client samples ``ss`` on its own host, which costs no SSH round trip; the
samples are taken outside the timed window.
"""

from __future__ import annotations

import os
import socket
import subprocess
from typing import Any

from labkit.parsers.ss import ss_argv, ss_connections

# ss field -> row column suffix; each is recorded as <column>_before and <column>_after.
SAMPLED_FIELDS = {
    "cwnd": "cwnd",
    "ssthresh": "ssthresh",
    "rto_ms": "rto_ms",
    "rtt_ms": "srtt_ms",
    "bytes_acked": "bytes_acked",
    "retrans_total": "retrans",
    "lastsnd_ms": "lastsnd_ms",
}
# Columns a row gets once (they do not change within a call).
CONSTANT_FIELDS = {"mss": "mss", "congestion_control": "tcp_cc"}

TCP_COLUMNS = tuple(
    [f"{column}_{when}" for column in SAMPLED_FIELDS.values() for when in ("before", "after")]
    + list(CONSTANT_FIELDS.values())
)


def pick_connection(ss_text: str, pid: int) -> dict[str, Any] | None:
    """The connection in ``ss -tinp`` output that belongs to process ``pid`` (None if there is none).

    gRPC opens one connection per channel; with the background sender both
    share it, so at most one of this process's connections goes to the target.
    """
    marker = f"pid={pid},"
    for connection in ss_connections(ss_text)[0]:
        if marker in (connection.get("process") or ""):
            return connection
    return None


class TcpInfoSampler:
    """A call hook (see :class:`labkit.echo.client.CallHook`) adding TCP state columns to each row."""

    def __init__(self, target: str):
        host, _, port = target.rpartition(":")
        host = host.strip("[]")
        # ss filters on addresses, so a host name is resolved once, the way grpc would.
        self.address = socket.getaddrinfo(host, int(port), proto=socket.IPPROTO_TCP)[0][4][0]
        self.port = int(port)
        self.pid = os.getpid()
        self.env = {**os.environ, "LC_ALL": "C"}

    def sample(self) -> dict[str, Any] | None:
        proc = subprocess.run(ss_argv(self.address, self.port), capture_output=True, text=True, env=self.env)
        return pick_connection(proc.stdout, self.pid) if proc.returncode == 0 else None

    def _record(self, row: dict[str, Any], when: str) -> None:
        info = self.sample() or {}
        for field, column in SAMPLED_FIELDS.items():
            row[f"{column}_{when}"] = info.get(field)
        for field, column in CONSTANT_FIELDS.items():
            if row.get(column) is None:
                row[column] = info.get(field)

    def before_call(self, row: dict[str, Any]) -> None:
        # A cold call has no connection yet: its "before" columns stay empty.
        self._record(row, "before")

    def after_call(self, row: dict[str, Any]) -> None:
        self._record(row, "after")



"""What a labkit echo server stamps on each call, and the client's own clocks, so a round trip splits by direction.

A round trip says nothing of its direction. Every labkit echo server (gRPC in Python and Go, the raw TCP echo)
stamps, on its own wall clock, when it received a request and when it handed back the reply. With the client's
wall-clock time of the send and of the reply's arrival, a call splits into its way out and its way back, up to
the offset between the two hosts' clocks (:mod:`labkit.analysis.oneway` estimates it, with its bound, where the
clocks are not one). The gRPC servers send the stamps as trailers, the TCP echo in its reply (:mod:`.tcp_echo`).

Nothing here imports grpc: the TCP echo and the agents' plans use it too.
"""

from __future__ import annotations

import time
from typing import Iterable, NamedTuple

#: The trailer in which labkit's echo servers (Python and Go) send their own time on a call, integer ns.
SERVER_TIME_KEY = "labkit-server-ns"
#: The trailers with the server's wall clock, integer ns since the epoch: the request received (the handler
#: started, the request decoded), and the response handed back to gRPC.
SERVER_RECV_KEY = "labkit-server-recv-utc-ns"
SERVER_SEND_KEY = "labkit-server-send-utc-ns"


class ServerStamps(NamedTuple):
    """A server's stamps on one call; None where it sent none."""

    server_ns: int | None = None  # its own time on the call (monotonic clock)
    recv_utc_ns: int | None = None  # its wall clock when the request was in
    send_utc_ns: int | None = None  # its wall clock when the reply went back

    @classmethod
    def from_metadata(cls, metadata: Iterable[tuple[str, str]] | None) -> "ServerStamps":
        values = {}
        for key, value in metadata or ():
            if key in _FIELD_OF_KEY:
                try:
                    values[_FIELD_OF_KEY[key]] = int(value)
                except ValueError:
                    pass  # a server that sends garbage sent no stamp
        return cls(**values)


_FIELD_OF_KEY = {SERVER_TIME_KEY: "server_ns", SERVER_RECV_KEY: "recv_utc_ns", SERVER_SEND_KEY: "send_utc_ns"}


def server_trailer(received_utc_ns: int, started_perf_ns: int) -> tuple[tuple[str, str], ...]:
    """The trailers of a call whose handler started at ``started_perf_ns`` (its wall clock then
    ``received_utc_ns``), read now that its response is ready."""
    elapsed_ns = time.perf_counter_ns() - started_perf_ns
    return ((SERVER_TIME_KEY, str(elapsed_ns)), (SERVER_RECV_KEY, str(received_utc_ns)),
            (SERVER_SEND_KEY, str(received_utc_ns + elapsed_ns)))


def clock_pair(tries: int = 3) -> tuple[int, int]:
    """``(time.time_ns(), time.perf_counter_ns())`` as one instant. A call's packets are matched to it by its
    window on the wall clock, ``[start, start + rtt_ns]``, and its one-way delays are its stamps against that
    window, so the wall clock must be read where the timer starts: read apart, another thread or a busy CPU can
    come in between (a cold call's channel set-up did, by a millisecond under load, and its response fell outside
    the window). The perf reading is bracketed by two wall readings and the tightest of ``tries`` brackets kept,
    its midpoint taken."""
    best = None
    for _ in range(tries):
        before = time.time_ns()
        perf = time.perf_counter_ns()
        after = time.time_ns()
        if best is None or after - before < best[0]:
            best = (after - before, (before + after) // 2, perf)
        if after - before < 20_000:
            break
    return best[1], best[2]

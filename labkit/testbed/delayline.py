"""The testbed's emulated WAN link: a user-space delay line between two TUN devices.

This kernel has no netem qdisc, so packets are carried by this process: it
reads each IP packet from one namespace's TUN device and writes it into the
other's once the one-way delay (plus, with a rate limit, the serialisation
time of the queue ahead of it) has passed. One FIFO per direction keeps
packets in order.

Run as ``python -m labkit.testbed.delayline --state-dir DIR``. The link
parameters are read from ``DIR/link.json`` at start and again on SIGHUP, so
``labkit testbed up`` can change a running link without dropping it. Every
second with traffic, counters and the lateness of deliveries (how long after
its due time each packet was written) go to ``DIR/delayline-stats.json``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import select
import signal
import sys
import time
from array import array
from dataclasses import dataclass
from pathlib import Path

# Sleep in select() until this close to the next due time, then spin: select's
# wake-up jitter (~50-100 µs, more under load) would otherwise add to every RTT.
SPIN_WINDOW_S = 0.0005
# Read at most this many packets from one device before serving due writes, so
# a burst in one direction cannot starve the other.
READ_BATCH = 16
MAX_PACKET = 65535
LATENESS_WINDOW = 20000


@dataclass
class LinkParams:
    """What the emulated link does to every packet, in one direction."""

    one_way_delay_s: float
    rate_bps: float | None = None
    queue_limit_packets: int = 1000

    @classmethod
    def from_file(cls, path: Path) -> "LinkParams":
        data = json.loads(path.read_text())
        return cls(
            one_way_delay_s=float(data["one_way_delay_s"]),
            rate_bps=data.get("rate_bps"),
            queue_limit_packets=int(data.get("queue_limit_packets", 1000)),
        )


class Direction:
    """The schedule of one direction of the link (pure: time is passed in).

    With a rate limit the link is a single server: a packet starts
    transmitting when the one before it has finished, takes size*8/rate
    seconds, then propagates for the one-way delay. Packets that would wait
    behind more than ``queue_limit_packets`` full-size packets are dropped
    (tail drop), like a router queue.
    """

    def __init__(self, params: LinkParams):
        self.params = params
        self.link_free_at = 0.0
        self.last_due = 0.0
        self.forwarded = 0
        self.dropped = 0

    def admit(self, now: float, size: int) -> float | None:
        """Return when a packet of ``size`` bytes arriving at ``now`` is due out, or None if dropped."""
        params = self.params
        if params.rate_bps:
            start = max(now, self.link_free_at)
            max_backlog_s = params.queue_limit_packets * 1500 * 8 / params.rate_bps
            if start - now > max_backlog_s:
                self.dropped += 1
                return None
            self.link_free_at = start + size * 8 / params.rate_bps
            due = self.link_free_at + params.one_way_delay_s
        else:
            due = now + params.one_way_delay_s
        # A delay lowered on a live link must not let new packets overtake old ones.
        due = max(due, self.last_due)
        self.last_due = due
        return due


class DelayLine:
    """Forward packets between two TUN fds, each direction through its own :class:`Direction`."""

    def __init__(self, fd_a: int, fd_b: int, params: LinkParams, stats_path: Path | None = None):
        self.fds = (fd_a, fd_b)
        self.directions = (Direction(params), Direction(params))  # [0]: a→b, [1]: b→a
        self.queues = (collections.deque(), collections.deque())
        self.lateness_us = array("d")
        self.lateness_next = 0
        self.stats_path = stats_path
        self.running = True
        self.reload_requested = False
        # Signals write a byte here (signal.set_wakeup_fd), so select() returns at
        # once on SIGHUP/SIGTERM instead of after its timeout.
        self.wakeup_r, self.wakeup_w = os.pipe()
        os.set_blocking(self.wakeup_r, False)
        os.set_blocking(self.wakeup_w, False)

    def set_params(self, params: LinkParams) -> None:
        for direction in self.directions:
            direction.params = params

    def _record_lateness(self, seconds: float) -> None:
        value = seconds * 1e6
        if len(self.lateness_us) < LATENESS_WINDOW:
            self.lateness_us.append(value)
        else:
            self.lateness_us[self.lateness_next] = value
            self.lateness_next = (self.lateness_next + 1) % LATENESS_WINDOW

    def _deliver_due(self, now: float) -> None:
        for index, queue in enumerate(self.queues):
            out_fd = self.fds[1 - index]
            while queue and queue[0][0] <= now:
                due, packet = queue.popleft()
                try:
                    os.write(out_fd, packet)
                    self.directions[index].forwarded += 1
                except OSError:
                    # The receiving device is gone or full; count it like a loss on the wire.
                    self.directions[index].dropped += 1
                self._record_lateness(time.monotonic() - due)

    def _read_from(self, index: int) -> None:
        fd, queue, direction = self.fds[index], self.queues[index], self.directions[index]
        for _ in range(READ_BATCH):
            try:
                packet = os.read(fd, MAX_PACKET)
            except BlockingIOError:
                return
            due = direction.admit(time.monotonic(), len(packet))
            if due is not None:
                queue.append((due, packet))

    def stats(self) -> dict:
        """Counters and lateness percentiles over the last deliveries."""
        ordered = sorted(self.lateness_us)

        def pct(q: float) -> float | None:
            return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2) if ordered else None

        return {
            "t_utc_ns": time.time_ns(),
            "forwarded_a_to_b": self.directions[0].forwarded,
            "forwarded_b_to_a": self.directions[1].forwarded,
            "dropped_a_to_b": self.directions[0].dropped,
            "dropped_b_to_a": self.directions[1].dropped,
            "lateness_samples": len(ordered),
            "lateness_us_p50": pct(0.50),
            "lateness_us_p99": pct(0.99),
            "lateness_us_max": round(ordered[-1], 2) if ordered else None,
        }

    def _write_stats(self) -> None:
        if self.stats_path is None:
            return
        tmp = self.stats_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.stats()))
        os.replace(tmp, self.stats_path)

    def run(self, reload_params=None) -> None:
        """Forward until ``self.running`` becomes false (set by a signal handler)."""
        next_stats = time.monotonic() + 1.0
        last_forwarded = -1
        while self.running:
            if self.reload_requested and reload_params is not None:
                self.reload_requested = False
                self.set_params(reload_params())
            now = time.monotonic()
            self._deliver_due(now)
            heads = [queue[0][0] for queue in self.queues if queue]
            if heads:
                timeout = max(0.0, min(heads) - now - SPIN_WINDOW_S)
            else:
                timeout = max(0.0, next_stats - now)
            try:
                readable, _, _ = select.select((*self.fds, self.wakeup_r), [], [], timeout)
            except InterruptedError:
                continue
            if self.wakeup_r in readable:
                while True:
                    try:
                        if not os.read(self.wakeup_r, 512):
                            break
                    except BlockingIOError:
                        break
            for index, fd in enumerate(self.fds):
                if fd in readable:
                    self._read_from(index)
            if now >= next_stats:
                next_stats = now + 1.0
                total = self.directions[0].forwarded + self.directions[1].forwarded
                if total != last_forwarded:
                    last_forwarded = total
                    self._write_stats()
        self._write_stats()


def main(argv: list[str] | None = None) -> int:
    from labkit.testbed.netns import open_tun

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--netns-a", required=True)
    parser.add_argument("--netns-b", required=True)
    parser.add_argument("--ifname", default="lkdata")
    args = parser.parse_args(argv)

    link_file = args.state_dir / "link.json"
    params = LinkParams.from_file(link_file)
    fd_a = open_tun(args.netns_a, args.ifname)
    fd_b = open_tun(args.netns_b, args.ifname)
    line = DelayLine(fd_a, fd_b, params, stats_path=args.state_dir / "delayline-stats.json")

    def stop(signum, frame):
        line.running = False

    def reload(signum, frame):
        line.reload_requested = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, reload)
    signal.set_wakeup_fd(line.wakeup_w, warn_on_full_buffer=False)
    print(json.dumps({"event": "ready", "pid": os.getpid()}), flush=True)
    line.run(reload_params=lambda: LinkParams.from_file(link_file))
    return 0


if __name__ == "__main__":
    sys.exit(main())

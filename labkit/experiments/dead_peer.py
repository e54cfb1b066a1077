"""Keepalive measured for what it is for: how long a grpc-go client takes to notice a server silently gone.

The tuning article of the research brief (§5) recommends client keepalive, a PING every 10 s with a 3 s
timeout (and a server MaxConnectionIdle of 30 s). Keepalive changes no call's latency; it exists to notice a
peer that vanished without a FIN or RST (a partition, a host that lost power). :func:`measure` measures that on
the testbed: ``labkit-go serve`` on the server host (through ``labkit echo serve --impl go``, as experiments
start it), ``labkit-go dead-peer`` on the client host (go/internal/deadpeer: one Echo, then an EchoStream held
open with nothing outstanding), and, a few seconds after the client's ready line, a partition of the link
between them (the testbed's schedule, :mod:`labkit.testbed.schedule`). The detection time is the client's
noticed time minus the partition's start, which the link emulator records itself (the ``events`` of its
per-second stats: when each direction's change was due and when its thread applied it); the schedule's
origin + ``at`` stands in for it when the emulator's record cannot be read.

What to expect (grpc-go v1.85 on Linux; go/internal/deadpeer says why):

- keepalive time T, timeout O: the PING leaves T after the last frame the client read, and the connection is
  closed O later, so the detection falls between T + O − (partition − last read) and T + O;
- no keepalive, nothing outstanding: TCP has nothing to retransmit, and grpc-go's dialer leaves TCP keepalive
  to the kernel (on, after ``net.ipv4.tcp_keepalive_time``, 7200 s by default): nothing notices within minutes.

This is not a labkit run (no run directory, no resume): each measurement starts its two processes, stops them,
and heals the link before it returns, also when it fails. ``bench/keepalive_dead_peer.py`` repeats it and
prints the numbers; tests/test_dead_peer.py runs one.
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from dataclasses import dataclass, field

from labkit.echo.plans import GO, DeadPeerPlan, ServePlan, dead_peer_argv, serve_argv
from labkit.echo.remote import wait_until_ready
from labkit.errors import LabkitError
from labkit.experiments.base import url_host
from labkit.hosts.inventory import load_inventory
from labkit.hosts.layout import host_tool_candidates, labkit_argv
from labkit.hosts.tools import send_tools
from labkit.testbed import emulator
from labkit.testbed.lab import Testbed
from labkit.testbed.schedule import Change

#: The article's client keepalive: a PING every 10 s, 3 s to answer it, also with no call active.
KEEPALIVE = ("keepalive-time=10s", "keepalive-timeout=3s", "keepalive-permit-without-stream=true")
#: The article's server (MaxConnectionIdle 30 s), which also accepts those PINGs: grpc-go's default enforcement
#: (one PING in 5 minutes) would answer a client pinging every 10 s with GOAWAY too_many_pings after its third.
SERVER_OPTIONS = ("max-connection-idle=30s", "keepalive-min-time=10s", "keepalive-permit-without-stream=true")
#: How the partition is named in the emulator's records.
PARTITION_LABEL = "dead-peer partition"
#: How long the emulator's record of the partition may take to appear (it writes each second once passed).
RECORD_WAIT_S = 5.0


@dataclass
class Detection:
    """One measurement: when the client was ready, when the link was partitioned, and what the client noticed."""

    grpc_options: tuple[str, ...]  # the client's
    ready_t_ns: int  # when the client's stream was open (its first answer read), ns since the epoch
    partition_t_ns: int  # when the link began to drop every packet
    partition_source: str  # "emulator" (its own record) or "schedule" (origin + at: no record found)
    noticed: bool
    end_t_ns: int  # the noticed line's time, or when the client gave up
    code: str | None = None
    detail: str | None = None
    waited_s: float | None = None  # the client's --wait, when it did not notice
    applied_late_us: dict[str, float] = field(default_factory=dict)  # per direction: applied − due
    ready: dict = field(default_factory=dict)  # the client's ready line (its socket's keepalive, "tcp")
    end: dict = field(default_factory=dict)  # its last line

    @property
    def detection_s(self) -> float | None:
        """Seconds from the partition's start to the client noticing (None: it did not)."""
        return (self.end_t_ns - self.partition_t_ns) / 1e9 if self.noticed else None

    @property
    def quiet_before_s(self) -> float:
        """Seconds from the client's ready line (its last read before the partition) to the partition's start."""
        return (self.partition_t_ns - self.ready_t_ns) / 1e9


def measure(inventory_path, *, client: str = "a", server: str = "b", grpc_options: tuple[str, ...] = KEEPALIVE,
            server_options: tuple[str, ...] = SERVER_OPTIONS, wait_s: float = 60.0, partition_after_s: float = 2.0,
            probe_every_s: float | None = None, timeout_s: float = 20.0,
            accept_new_host_keys: bool = False) -> Detection:
    """Measure once on the testbed whose inventory is ``inventory_path`` (labkit deployed on both hosts): see the
    module docstring. ``partition_after_s``: the partition's ``at``, counted from when the testbed takes the
    schedule, just after the client's ready line; ``wait_s``: the client's --wait after its ready line."""
    inventory = load_inventory(inventory_path)
    name = (inventory.testbed or {}).get("name")
    if not name:
        raise LabkitError(f"{inventory_path} is not a testbed's inventory: the partition needs the testbed's link")
    testbed = Testbed(name, log=lambda message: None)
    state = testbed.load_state()
    if state is None:
        raise LabkitError(f"testbed {name} is not up")
    server_address = inventory.peer_address(server)
    with ExitStack() as stack:
        hosts = {host: stack.enter_context(inventory.open(host, accept_new_host_keys=accept_new_host_keys))
                 for host in (client, server)}
        for host in (client, server):  # labkit-go serves on one and calls from the other: sent where it lacks
            send_tools(hosts[host], inventory.host(host), ["labkit-go"])
        labkit_go = _labkit_go(inventory, client, hosts[client])
        serve = ServePlan(bind=f"{url_host(server_address)}:0", grpc_options=tuple(server_options))
        server_proc = hosts[server].start([*labkit_argv(inventory, server, hosts[server]), *serve_argv(serve, GO)])
        stack.callback(server_proc.stop)
        port = wait_until_ready(server_proc, timeout=60)["port"]
        plan = DeadPeerPlan(target=f"{url_host(server_address)}:{port}", wait_s=wait_s, timeout_s=timeout_s,
                            probe_every_s=probe_every_s, grpc_options=tuple(grpc_options))
        client_proc = hosts[client].start([labkit_go, *dead_peer_argv(plan)])
        stack.callback(client_proc.stop)
        ready = _event(client_proc, ("ready",), 2 * timeout_s + 30)
        partitioned = _partition(testbed, state, client, server, partition_after_s, wait_s)
        try:
            end = _event(client_proc, ("noticed", "not_noticed"), partition_after_s + wait_s + 60)
        finally:
            _heal(testbed, partitioned)
        partition_t_ns, source, late = _partition_start(partitioned, partition_after_s, end["t_ns"])
    return Detection(grpc_options=tuple(grpc_options), ready_t_ns=ready["t_ns"], partition_t_ns=partition_t_ns,
                     partition_source=source, noticed=end["event"] == "noticed", end_t_ns=end["t_ns"],
                     code=end.get("code"), detail=end.get("detail"), waited_s=end.get("waited_s"),
                     applied_late_us=late, ready=ready, end=end)


def _labkit_go(inventory, name: str, host) -> str:
    """The host's labkit-go (deploy's copy first), checked to run."""
    tried = host_tool_candidates(inventory.host(name), "labkit-go")
    for candidate in tried:
        try:
            if host.run([candidate, "--version"], timeout=30).ok:
                return candidate
        except LabkitError:
            continue  # not there
    raise LabkitError(f"labkit-go is not on {name} (looked for {', '.join(tried)}); deploy labkit there first")


def _event(proc, events: tuple[str, ...], timeout: float) -> dict:
    """The first JSON line of ``proc`` whose event is one of ``events``."""
    def wanted(line: str) -> bool:
        try:
            return line.startswith("{") and json.loads(line).get("event") in events
        except ValueError:
            return False

    return json.loads(proc.wait_for_line(wanted, timeout=timeout))


def _partition(testbed: Testbed, state, client: str, server: str, at_s: float, wait_s: float):
    """Schedule a partition of the client-server link ``at_s`` from now (healed by itself well after the client's
    wait, should nothing heal it before); the testbed's state with its new schedule."""
    change = Change(at_s=at_s, fields={"partition": True}, for_s=wait_s + 120, link="-".join(sorted((client, server))),
                    label=PARTITION_LABEL)
    updated = testbed.up(state.link, state.login, state.topology, schedule=[change])
    if updated.forwarder_pid != state.forwarder_pid:
        raise LabkitError(f"testbed {testbed.name} was rebuilt instead of changed: no partition was measured")
    return updated


def _heal(testbed: Testbed, state) -> None:
    """The link back to its own parameters, with no schedule."""
    testbed.up(state.link, state.login, state.topology, schedule=[])


def _partition_start(state, at_s: float, until_ns: int) -> tuple[int, str, dict[str, float]]:
    """When the partition began, from the emulator's record of its changes (the earliest direction's due time),
    and how late each direction's thread applied it (µs); else the schedule's origin + at."""
    planned = state.schedule_origin_utc_ns + round(at_s * 1e9)
    stats = state.dir / emulator.STATS_FILE
    deadline = time.monotonic() + RECORD_WAIT_S
    while True:
        events = [event for line in emulator.read_lines(stats, state.schedule_origin_utc_ns, until_ns + 10**9)
                  for event in line.get("events", []) if event.get("label") == PARTITION_LABEL
                  and event.get("due_utc_ns", 0) >= state.schedule_origin_utc_ns]
        if len(events) >= 2 or time.monotonic() > deadline:  # both directions of the link
            break
        time.sleep(0.2)
    if not events:
        return planned, "schedule", {}
    late = {event["direction"]: (event["applied_utc_ns"] - event["due_utc_ns"]) / 1e3 for event in events}
    return min(event["due_utc_ns"] for event in events), "emulator", late

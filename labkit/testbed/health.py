"""What a testbed's hosts look like now, against what `testbed up` made: one :class:`Fault` per difference.

`up` makes, in each host's namespace, a management veth (``mgmt0``, its root-side peer
``lk<index><host>``) with a /30 address at each end, the data device ``lkdata`` (the link
emulator's TUN) up with the host's data address as a /32, a /32 route to every peer's data
address through ``lkdata``, and an sshd; outside them, the emulator. A device taken down
and up again (a flap) keeps its addresses but loses every route through it that the kernel
did not derive from an address: the data routes are exactly those. So each of these is
checked here, and a fault says whether putting the part back in place repairs it
(:meth:`labkit.testbed.lab.Testbed.repair`, which reruns the steps of `up` that made it) or
only a rebuild does (a namespace, a device or a process that is gone).

The comparison is pure (:func:`host_faults` on ``ip -json`` output), the gathering is
:func:`gather`.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass

from labkit.testbed import netns as ns
from labkit.testbed.datapath import DATA_IFNAME

MGMT_IFNAME = "mgmt0"
SSH_ANSWER_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class Fault:
    """One difference from what `up` made; ``repairable``: rerunning the step of `up` that made the part fixes it."""

    text: str
    repairable: bool


def _links(addr_json: list[dict]) -> dict[str, dict]:
    return {link.get("ifname"): link for link in addr_json}


def _has_address(link: dict, address: str, prefixlen: int) -> bool:
    return any(info.get("family") == "inet" and info.get("local") == address and info.get("prefixlen") == prefixlen
               for info in link.get("addr_info", []))


def device_faults(where: str, link: dict | None, ifname: str, address: str, prefixlen: int) -> list[Fault]:
    """``ifname`` (its ``ip -json addr`` entry ``link``, None when absent) must exist, be up and hold the address."""
    if link is None:
        return [Fault(f"{where}: {ifname} is missing", repairable=False)]
    faults = []
    if "UP" not in link.get("flags", []):
        faults.append(Fault(f"{where}: {ifname} is down", repairable=True))
    if not _has_address(link, address, prefixlen):
        faults.append(Fault(f"{where}: {ifname} lacks its address {address}/{prefixlen}", repairable=True))
    return faults


def _congestion_control(route: dict) -> str | None:
    return next((metric["congestion"] for metric in route.get("metrics", []) if "congestion" in metric), None)


def route_faults(where: str, route_json: list[dict], local_address: str, peers: dict[str, str], cc: str) -> list[Fault]:
    """A /32 route to each peer's data address (``peers``: name -> address) through lkdata, from ``local_address``,
    with congestion control ``cc``."""
    routes = {route.get("dst"): route for route in route_json}
    faults = []
    for peer, address in peers.items():
        route = routes.get(address)
        if route is None:
            faults.append(Fault(f"{where}: no route to {peer}'s data address {address} (via {DATA_IFNAME})", True))
        elif route.get("dev") != DATA_IFNAME or route.get("prefsrc") != local_address:
            faults.append(Fault(f"{where}: the route to {peer}'s data address {address} goes via {route.get('dev')} "
                                f"from {route.get('prefsrc')}, not via {DATA_IFNAME} from {local_address}", True))
        elif _congestion_control(route) != cc:
            faults.append(Fault(f"{where}: the route to {peer}'s data address {address} has congestion control "
                                f"{_congestion_control(route) or 'unset'}, not {cc}", True))
    return faults


def host_faults(host, peers: dict[str, str], cc: str, addr_json: list[dict], route_json: list[dict]) -> list[Fault]:
    """Everything inside ``host``'s namespace (a :class:`labkit.testbed.lab.HostInfo`) that differs from what `up`
    made (``peers``: the other hosts' data addresses by name, ``cc`` the data routes' congestion control), given that
    namespace's ``ip -json addr`` and ``ip -json route`` output."""
    links = _links(addr_json)
    return [
        *device_faults(host.name, links.get(MGMT_IFNAME), MGMT_IFNAME, host.mgmt_address, 30),
        *device_faults(host.name, links.get(DATA_IFNAME), DATA_IFNAME, host.data_address, 32),
        *route_faults(host.name, route_json, host.data_address, peers, cc),
    ]


def _ip_json(*args: str, netns: str | None = None) -> list[dict]:
    proc = ns.ip("-json", *args, netns=netns, check=False)
    try:
        return json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else []
    except ValueError:
        return []


def ssh_answers(address: str, port: int, timeout: float = SSH_ANSWER_TIMEOUT_S) -> bool:
    """Whether an SSH server's banner arrives from ``address:port`` (a testbed management address) in time."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return sock.recv(64).startswith(b"SSH-")
    except OSError:
        return False


def gather(state, namespaces: set[str], ssh_port: int) -> list[Fault]:
    """Every fault of ``state``'s hosts now (``namespaces``: those that exist); processes are checked by the caller."""
    faults: list[Fault] = []
    for host in state.hosts.values():
        if host.netns not in namespaces:
            faults.append(Fault(f"{host.name}: its namespace {host.netns} is missing", repairable=False))
            continue
        peers = {peer.name: peer.data_address for peer in state.hosts.values() if peer is not host}
        inside = host_faults(host, peers, state.link.cc, _ip_json("addr", "show", netns=host.netns),
                             _ip_json("route", "show", netns=host.netns))
        root_side = _links(_ip_json("addr", "show", "dev", host.root_veth)).get(host.root_veth)
        inside += device_faults(f"{host.name} (root side)", root_side, host.root_veth, host.root_address, 30)
        management_broken = any(MGMT_IFNAME in fault.text or host.root_veth in fault.text for fault in inside)
        # Only asked when the path to it is whole: a management veth that is down already says why it is silent.
        if not management_broken and not ssh_answers(host.mgmt_address, ssh_port):
            inside.append(Fault(f"{host.name}: sshd does not answer on {host.mgmt_address}:{ssh_port}", False))
        faults += inside
    return faults

"""``labkit hosts check``: can labkit use each host of an inventory, and what is it like?

Every fact is one argv run on the host; the parsing is pure and takes plain text.
Besides the facts: what the host's user may do as root (``root``, ``sudo
(passwordless)``, ``sudo (needs a password)``, ``none``) and, for the kernel
knobs an experiment asks for, which of them labkit could not set there.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from labkit.errors import LabkitError
from labkit.hosts.facts import read_text, tool_versions
from labkit.hosts.inventory import Inventory, open_host
from labkit.hosts.kernel import KNOBS, knob_commands
from labkit.hosts.layout import remote_labkit_version
from labkit.hosts.privilege import knob_blockers, probe_privilege
from labkit.parsers.iproute import parse_route_get

TOOLS = ("ping", "iperf3", "ss")


@dataclass
class PeerRoute:
    peer: str
    address: str
    mtu: int | None = None
    mtu_source: str = ""  # "route" or the interface name the MTU was read from
    dev: str | None = None
    congctl: str | None = None
    error: str = ""

    def describe(self) -> str:
        if self.error:
            return f"{self.peer}: {self.error}"
        text = f"{self.peer}: {self.mtu if self.mtu is not None else '?'}"
        if self.mtu_source and self.mtu_source != "route":
            text += f" ({self.mtu_source})"
        if self.congctl:
            text += f" congctl {self.congctl}"
        return text


@dataclass
class HostCheck:
    """What ``labkit hosts check`` found on one host."""

    name: str
    target: str = ""
    reachable: bool = False
    auth: bool = False
    python: str | None = None
    labkit: str | None = None
    tools: dict[str, bool] = field(default_factory=dict)
    kernel: str | None = None
    congestion_control: str | None = None
    slow_start_after_idle: str | None = None
    routes: list[PeerRoute] = field(default_factory=list)
    privilege: str | None = None  # labkit.hosts.privilege: root, sudo (passwordless), ...
    blocked: dict[str, str] = field(default_factory=dict)  # knob asked for -> why labkit cannot set it here
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.reachable and self.auth and not self.error and not self.blocked


def _first_line(result) -> str | None:
    lines = (result.stdout or result.stderr).strip().splitlines()
    return lines[0].strip() if result.ok and lines else None


def check_host(inventory: Inventory, name: str, accept_new_host_keys: bool = False,
               connect_timeout: float | None = None, knobs: list[str] = ()) -> HostCheck:
    """Connect to ``name`` and collect the facts `hosts check` shows; failures go into ``error``.

    ``knobs`` (names in :data:`labkit.hosts.kernel.KNOBS`) are the kernel knobs an experiment will set.
    """
    from labkit.hosts.ssh import AuthenticationFailed, HostKeyRejected

    entry = inventory.host(name)
    check = HostCheck(name)
    try:
        host = open_host(inventory, name, accept_new_host_keys=accept_new_host_keys, connect_timeout=connect_timeout)
    except LabkitError as exc:
        check.error = exc.message
        return check
    check.target = "local" if entry.is_local else host.describe()
    try:
        if entry.is_local:
            check.error = _cannot_enter(host)
            check.reachable = check.auth = not check.error
            if check.error:
                return check
        else:
            try:
                host.transport()
            except AuthenticationFailed as exc:
                check.reachable, check.error = True, exc.message
                return check
            except HostKeyRejected as exc:
                check.reachable, check.error = True, exc.message
                return check
            check.reachable = check.auth = True
        check.kernel = _first_line(host.run(["uname", "-r"]))
        try:
            check.python = _first_line(host.run([entry.python, "--version"]))
        except LabkitError:
            check.python = None
        check.labkit = remote_labkit_version(host, entry)
        versions = tool_versions(host)
        check.tools = {tool: versions.get(tool) is not None for tool in TOOLS}
        check.congestion_control = _first_line(host.run(["sysctl", "-n", "net.ipv4.tcp_congestion_control"]))
        check.slow_start_after_idle = _first_line(host.run(["sysctl", "-n", "net.ipv4.tcp_slow_start_after_idle"]))
        for peer in inventory.names:
            if peer != name:
                check.routes.append(_route_to(host, peer, inventory.peer_address(peer)))
        check.privilege = probe_privilege(host)
        peer = check.routes[0].address if check.routes else "127.0.0.1"
        check.blocked = knob_blockers(host, knob_commands(knobs, peer))
    except LabkitError as exc:
        check.error = exc.message
    finally:
        host.close()
    return check


def _cannot_enter(host) -> str:
    """Why commands cannot run on a local host (its network namespace is missing, or entering one needs root),
    or "" when they can: every fact below would otherwise be read as missing, and the host called usable."""
    result = host.run(["true"])
    if result.ok:
        return ""
    detail = (result.stderr or result.stdout).strip().splitlines()
    reason = detail[-1] if detail else f"exit status {result.returncode}"
    if host.netns:
        return f"cannot run commands in network namespace {host.netns}: {reason}"
    return f"cannot run commands here: {reason}"


def _route_to(host, peer: str, address: str) -> PeerRoute:
    route = PeerRoute(peer, address)
    result = host.run(["ip", "route", "get", address])
    if not result.ok:
        route.error = f"no route to {address}: {(result.stderr or result.stdout).strip() or result.returncode}"
        return route
    fields = parse_route_get(result.stdout)
    route.dev, route.congctl = fields.get("dev"), fields.get("congctl")
    if "mtu" in fields:
        route.mtu, route.mtu_source = fields["mtu"], "route"
    elif route.dev:
        # No MTU on the route: packets leave with the interface's MTU.
        text = (read_text(host, f"/sys/class/net/{route.dev}/mtu") or "").strip()
        if text and text.isdigit():
            route.mtu, route.mtu_source = int(text), route.dev
    return route


def check_hosts(inventory: Inventory, names: list[str] | None = None, accept_new_host_keys: bool = False,
                connect_timeout: float | None = None, knobs: list[str] = ()) -> list[HostCheck]:
    """:func:`check_host` for each name (default: all), in parallel."""
    names = list(names) if names else inventory.names
    for name in names:
        inventory.host(name)  # unknown names are an error before anything connects
    with ThreadPoolExecutor(max_workers=min(16, len(names))) as pool:
        return list(pool.map(lambda n: check_host(inventory, n, accept_new_host_keys, connect_timeout, knobs), names))


def knobs_of_experiment(data: dict) -> list[str]:
    """The kernel knobs an experiment file (parsed TOML) sets: each key of KNOBS given a value other than keep.

    The settings may sit in a ``[sweep]`` table or at the top level, under the
    flag's name with dashes or underscores, as a list or a comma string.
    """
    table = data.get("sweep", data) if isinstance(data.get("sweep", data), dict) else data
    knobs = []
    for knob in KNOBS:
        value = table.get(knob, table.get(knob.replace("-", "_")))
        values = value if isinstance(value, list) else [] if value is None else str(value).split(",")
        if any(str(item).strip().lower() not in ("keep", "") for item in values):
            knobs.append(knob)
    return knobs

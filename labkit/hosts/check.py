"""``labkit hosts check``: can labkit use each host of an inventory, and what is it like?

Every fact is one argv run on the host; the parsing is pure and takes plain text.
Besides the facts: what the host's user may do as root (``root``, ``sudo
(passwordless)``, ``sudo (needs a password)``, ``none``), for the kernel
knobs an experiment asks for, which of them labkit could not set there, and
what ``labkit deploy`` will do there: the interpreter it will use (path,
version, architecture), whether that has venv and pip (a venv) or not (the
wheels unpacked), or why deploy would refuse it, the clock's state, and which
stacks' agents the host can run.
"""

from __future__ import annotations

import platform
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from labkit.errors import LabkitError
from labkit.hosts.facts import CLOCK_CODE, parse_clock_state, read_text, tool_versions
from labkit.hosts.inventory import Inventory, open_host
from labkit.hosts.kernel import KNOBS, knob_commands
from labkit.hosts.layout import local_tool, python_facts, python_refusal, remote_labkit_version
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
    python: str | None = None  # "Python X.Y.Z" of the inventory's interpreter, None when there is none
    interpreter: dict | None = None  # labkit.hosts.layout.python_facts of it (path, version, machine, install, ...)
    refusal: str = ""  # why deploy would refuse the host's interpreter, naming the fix
    machine: str | None = None  # uname -m
    clock_synchronized: bool | None = None  # the kernel's word (adjtimex), None when it could not be read
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
        return self.reachable and self.auth and not self.error and not self.blocked and not self.refusal

    @property
    def stacks(self) -> list[str]:
        """The gRPC stacks (labkit.experiments.stacks) whose agents this host can run once deployed: every agent,
        the Go ones too, starts from labkit's CLI on the host's Python, and labkit-go is sent only where this
        machine has a build for the host's architecture."""
        if self.interpreter is None or self.refusal:
            return []
        go = local_tool("labkit-go") is not None and self.machine == platform.machine()
        return ["python", "go"] if go else ["python"]

    def deploy_line(self) -> str:
        """What ``labkit deploy`` will do on this host, in one line (its refusal when it would refuse)."""
        if self.refusal:
            return f"{self.name}: {self.refusal}"
        facts = self.interpreter or {}
        version = ".".join(map(str, facts.get("version", [])))
        where = f"{facts.get('path')} (Python {version}, {self.machine})"
        how = ("a venv (venv and pip there)" if facts.get("install") == "venv" else
               f"the wheels unpacked (no {'venv or ensurepip' if not facts.get('venv') else 'pip'} there)")
        clock = {True: "synchronized", False: "not synchronized", None: "unknown"}[self.clock_synchronized]
        stacks = " and ".join(self.stacks) + (" stacks" if len(self.stacks) > 1 else " stack")
        go = "" if "go" in self.stacks else " (no labkit-go here for its architecture)"
        return (f"{self.name}: deploy makes {how} with {where}; root: {self.privilege or '-'}; clock {clock}; "
                f"serves the {stacks}{go}")


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
        check.machine = _first_line(host.run(["uname", "-m"]))
        check.interpreter = python_facts(host, entry)
        check.refusal = python_refusal(entry, check.interpreter) or ""
        if check.interpreter is not None and "error" not in check.interpreter:
            check.python = "Python " + ".".join(map(str, check.interpreter["version"]))
            clock = host.run([entry.python, "-c", CLOCK_CODE], timeout=60)
            check.clock_synchronized = parse_clock_state(clock.stdout if clock.ok else None, None)["synchronized"]
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

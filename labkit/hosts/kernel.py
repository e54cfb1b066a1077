"""Kernel conditions an experiment sets on a host for a while, and puts back afterwards.

Two knobs shape the idle-connection step:

- ``net.ipv4.tcp_slow_start_after_idle`` (per network namespace), and
- the congestion control, set **per route** to the peer (``ip route replace
  PEER/32 ... congctl ALG``): inside a namespace, or without touching the
  whole host, the sysctl may only select globally allowed algorithms, while a
  route may use any loaded one.

:class:`KernelConditions` records each original value the first time it
changes it and restores all of them on :meth:`restore`, which callers run in a
``finally`` (so also on failure and Ctrl-C). The originals are also returned
for the run manifest, so ``labkit runs cleanup`` can restore them after a
SIGKILL.

Reading goes as the login user; every change (and every restore) goes
through the host's ``run_privileged``: as is for root, ``sudo -n -- ARGV``
on a host with ``become = "sudo"``. :data:`KNOBS` names the knobs as the sweep's
flags do, so a sweep can ask each host before its first cell whether it
may set them (:func:`labkit.hosts.privilege.knob_blockers`).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
import tempfile

from labkit.errors import LabkitError

SSAI = "net.ipv4.tcp_slow_start_after_idle"


def ssai_argv(value: object) -> list[str]:
    """The command that sets slow-start-after-idle (as root)."""
    return ["sysctl", "-q", "-w", f"{SSAI}={value}"]


def route_argv(peer: str, *route: str) -> list[str]:
    """The command that replaces the /32 route to ``peer`` with ``route`` (via/dev/src/congctl words; as root)."""
    return ["ip", "route", "replace", f"{peer}/32", *route]


#: The kernel knobs a sweep sets, named as its flags (--slow-start-after-idle, --cc): what each
#: one changes, and a command of the kind that sets it (``peer`` -> argv), which is what sudo's
#: policy is asked about before a run.
KNOBS = {
    "slow-start-after-idle": (SSAI, lambda peer: ssai_argv(1)),
    "cc": ("the route's congctl", lambda peer: route_argv(peer, "congctl", "cubic")),
}


def knob_commands(knobs, peer: str) -> dict[str, list[str]]:
    """``knobs`` (names in :data:`KNOBS`) -> ``"NAME (WHAT)"`` -> a command that sets it, for ``knob_blockers``."""
    return {f"{knob} ({KNOBS[knob][0]})": KNOBS[knob][1](peer) for knob in knobs}


class ConditionRefused(LabkitError):
    """The host's kernel would not take a setting (an unknown congestion control, a read-only /proc/sys)."""


def _last_line(result) -> str:
    detail = (result.stderr or result.stdout).strip().splitlines()
    return detail[-1] if detail else "no reason given"


class KernelConditions:
    """Set and restore slow-start-after-idle and per-route congestion control on one host."""

    def __init__(self, host, peer_address: str):
        self.host = host
        self.peer = peer_address
        self.original_ssai: str | None = None
        # The /32 route to the peer as it was: its `ip -o route show` line, "" if
        # there was none, None while we have not touched it.
        self.original_route: str | None = None
        self.current: dict[str, object] = {}

    def capture(self) -> dict[str, object]:
        """Read the values this object may change, before it changes any; return them for the manifest."""
        if self.original_ssai is None:
            self.original_ssai = self.host.read_sysctl(SSAI)
        if self.original_route is None:
            existing = self.host.run(["ip", "-o", "route", "show", f"{self.peer}/32"])
            # `ip -o` ends continuation lines with a backslash.
            self.original_route = existing.stdout.split("\\")[0].strip() if existing.returncode == 0 else ""
        return self.originals()

    def originals(self) -> dict[str, object]:
        return {"slow_start_after_idle": self.original_ssai, "route_to_peer": self.original_route, "peer": self.peer}

    def set_slow_start_after_idle(self, value: int) -> None:
        if self.current.get("ssai") == value:
            return
        self.capture()
        result = self.host.run_privileged(ssai_argv(value))
        if result.returncode != 0:
            raise ConditionRefused(f"{self.host.name} refused {SSAI}={value}: {_last_line(result)}")
        self.current["ssai"] = value

    def set_congestion_control(self, algorithm: str) -> None:
        if self.current.get("cc") == algorithm:
            return
        route = self.host.run(["ip", "-o", "route", "get", self.peer])
        if route.returncode != 0:
            raise ConditionRefused(f"{self.host.name} has no route to {self.peer}")
        tokens = route.stdout.split()
        self.capture()
        route = [word for key in ("via", "dev", "src") if key in tokens for word in (key, tokens[tokens.index(key) + 1])]
        result = self.host.run_privileged(route_argv(self.peer, *route, "congctl", algorithm))
        if result.returncode != 0:
            raise ConditionRefused(
                f"{self.host.name} refused congestion control {algorithm} on the route to {self.peer}: {_last_line(result)}"
            )
        self.current["cc"] = algorithm

    def restore(self) -> list[str]:
        """Put back every original value changed (through the same privilege path); return what could not be."""
        problems = []
        steps = []
        if self.original_ssai is not None:
            steps.append((ssai_argv(self.original_ssai), f"{SSAI}={self.original_ssai}"))
        if self.original_route is not None:
            argv = (["ip", "route", "replace", *self.original_route.split()] if self.original_route
                    else ["ip", "route", "del", f"{self.peer}/32"])
            steps.append((argv, f"the route to {self.peer}"))
        for argv, what in steps:
            try:
                result = self.host.run_privileged(argv)
            except LabkitError as exc:  # sudo refused, or the host went away: try the next one
                problems.append(f"{self.host.name}: could not restore {what}: {exc.message}")
                continue
            if result.returncode != 0:
                problems.append(f"{self.host.name}: could not restore {what}: {_last_line(result)}")
        self.current.clear()
        return problems


class ManifestRefused(LabkitError):
    """A value a run directory asks `labkit runs cleanup` to put on a host that labkit would never have recorded: the
    manifest was edited, or copied from somewhere else. ``field`` names where it is."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field = field


#: The words of a route that `ip -o route show` prints and `ip route replace` takes back, each with a check of its
#: value: what `testbed up` writes (dev, src, congctl) and what a host's own route to a peer may carry besides.
#: Anything else (a `default` route, `table`, `nexthop`, `encap`, ...) was not recorded by labkit.
_ROUTE_KEYS = ("via", "dev", "proto", "scope", "src", "metric", "mtu", "advmss", "initcwnd", "initrwnd", "congctl")
_IDENTIFIER = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_DEVICE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,14}$")


def _int_in(low: int, high: int):
    return lambda word: word.isdigit() and low <= int(word) <= high


_ROUTE_VALUE = {
    "via": lambda word: _is_ip(word),
    "dev": lambda word: bool(_DEVICE.match(word)),
    "proto": lambda word: word in ("kernel", "boot", "static", "dhcp", "ra", "redirect"),
    "scope": lambda word: word in ("global", "link", "host", "site"),
    "src": lambda word: _is_ip(word),
    "metric": _int_in(0, 2**32 - 1),
    "mtu": _int_in(68, 65535),
    "advmss": _int_in(1, 65535),
    "initcwnd": _int_in(1, 1024),  # a window in segments; the kernel's own default is 10
    "initrwnd": _int_in(1, 1024),
    "congctl": lambda word: bool(_IDENTIFIER.match(word)),
}


def _is_ip(text: object) -> bool:
    try:
        ipaddress.ip_address(str(text))
    except ValueError:
        return False
    return True


def parse_route(line: str, peer: str, field: str) -> dict[str, str]:
    """A recorded route to ``peer`` (its `ip -o route show PEER/32` line) as its parts, ``{"dev": ..., ...}``;
    :class:`ManifestRefused` naming ``field`` for anything but a /32 route to the peer of the words above."""
    words = line.split()
    if not words or words[0] not in (peer, f"{peer}/32"):
        raise ManifestRefused(field, f"{line[:60]!r} is not a route to {peer}/32")
    parts: dict[str, str] = {}
    rest = words[1:]
    while rest:
        key = rest.pop(0)
        if key not in _ROUTE_VALUE or key in parts or not rest:
            raise ManifestRefused(field, f"{key[:30]!r} is not part of a route labkit records")
        value = rest.pop(0)
        if key == "mtu" and value == "lock" and rest:  # `mtu lock 1400`: the path MTU is not to be lowered
            value = f"lock {rest.pop(0)}"
        if not _ROUTE_VALUE[key](value.removeprefix("lock ")):
            raise ManifestRefused(field, f"{key} {value[:30]!r} is not a valid {key}")
        parts[key] = value
    if "dev" not in parts:
        raise ManifestRefused(field, "a route labkit records names its device")
    return parts


def route_words(peer: str, parts: dict[str, str]) -> list[str]:
    """The arguments of `ip route replace` that make the route ``parts`` (from :func:`parse_route`) to ``peer``
    again, rebuilt from its checked parts in one order, never from the recorded text."""
    return [f"{peer}/32", *(word for key in _ROUTE_KEYS if key in parts for word in (key, *parts[key].split()))]


def check_originals(key: str, originals: dict, peers: dict[str, str]) -> None:
    """Refuse (:class:`ManifestRefused`) kernel originals a sweep would not have recorded: ``originals`` is
    ``kernel_originals[key]`` of a run, ``peers`` the data address of each host of the run's inventory."""
    field = f"kernel_originals[{key!r}]"
    if not isinstance(originals, dict):
        raise ManifestRefused(field, "is not an object")
    host, peer = originals.get("host"), originals.get("peer")
    if host not in peers:
        raise ManifestRefused(f"{field}.host", f"{str(host)[:40]!r} is not a host of the run's inventory")
    if not _is_ip(peer) or peer not in (address for name, address in peers.items() if name != host):
        raise ManifestRefused(f"{field}.peer", f"{str(peer)[:40]!r} is not the data address of another host of the "
                                               "run's inventory")
    if key != f"{host}->{peer}":
        raise ManifestRefused(field, f"its key is not its host and peer ({host}->{peer})")
    ssai = originals.get("slow_start_after_idle")
    if ssai is not None and str(ssai) not in ("0", "1"):
        raise ManifestRefused(f"{field}.slow_start_after_idle", f"{str(ssai)[:20]!r} is neither 0 nor 1")
    route = originals.get("route_to_peer")
    if route is not None and not isinstance(route, str):
        raise ManifestRefused(f"{field}.route_to_peer", "is not a route")
    if route:
        parse_route(route, str(peer), f"{field}.route_to_peer")


def check_route_on_host(host, originals: dict, field: str) -> None:
    """The host's side of a recorded route: its device, gateway and source address are the ones the host reaches the
    peer with now (a sweep changes only a route's congestion control, never those), its algorithm one the host's
    kernel has."""
    route = originals.get("route_to_peer")
    if not route:
        return
    parts = parse_route(route, str(originals["peer"]), field)
    now = host.run(["ip", "-o", "route", "get", str(originals["peer"])])
    words = now.stdout.split() if now.returncode == 0 else []
    current = {key: words[words.index(key) + 1] for key in ("dev", "via", "src") if key in words[:-1]}
    if parts["dev"] != current.get("dev"):
        raise ManifestRefused(field, f"device {parts['dev']!r} is not the one {host.name} reaches "
                                     f"{originals['peer']} through ({current.get('dev') or 'none'})")
    for key, what in (("via", "gateway"), ("src", "source address")):
        if key in parts and parts[key] != current.get(key):
            raise ManifestRefused(field, f"{key} {parts[key]} is not the {what} {host.name} reaches "
                                         f"{originals['peer']} with ({current.get(key) or 'none'})")
    if "congctl" in parts:
        allowed = host.read_sysctl("net.ipv4.tcp_available_congestion_control").split()
        if parts["congctl"] not in allowed:
            raise ManifestRefused(field, f"congestion control {parts['congctl']!r} is not one {host.name} has "
                                         f"({' '.join(allowed)})")


def restore_from_manifest(host, originals: dict[str, object]) -> list[str]:
    """Restore what a crashed run recorded as original (used by `labkit runs cleanup`, after
    :func:`check_originals` and :func:`check_route_on_host`): the route rebuilt from its checked parts."""
    peer = str(originals["peer"])
    conditions = KernelConditions(host, peer)
    ssai = originals.get("slow_start_after_idle")
    conditions.original_ssai = None if ssai is None else str(int(str(ssai)))
    route = originals.get("route_to_peer")
    if route:
        conditions.original_route = " ".join(route_words(peer, parse_route(str(route), peer, "route_to_peer")))
    else:
        conditions.original_route = route  # type: ignore[assignment]  # "" (none: delete it) or None (untouched)
    return conditions.restore()


class KnobsBusy(LabkitError):
    """Another run holds a host's kernel knobs: two runs changing them at once would each record the other's value
    as the original, and both end with it."""


class KnobLock:
    """A host's kernel knobs, held by one run at a time: a directory made atomically under /tmp, named for the
    host's network namespace (hosts of one machine's testbed share /tmp, not a namespace), with its owner inside.

    A lock whose owner is a run ended (its controller's process gone on this machine) is stale and taken over.
    """

    PREFIX = "/tmp/labkit-knobs-"

    def __init__(self, host, owner: dict[str, object]):
        self.host = host
        self.owner = owner
        self.path: str | None = None

    def _path(self) -> str:
        namespace = self.host.run(["readlink", "/proc/self/ns/net"], check=True).stdout.strip()  # net:[4026531840]
        return self.PREFIX + "".join(ch for ch in namespace if ch.isdigit())

    def acquire(self) -> None:
        path = self._path()
        for _ in range(2):
            if self.host.run(["mkdir", "-m", "0755", path]).ok:
                with tempfile.NamedTemporaryFile("w", suffix=".json") as owner:
                    owner.write(json.dumps(self.owner))
                    owner.flush()
                    self.host.put(owner.name, f"{path}/owner.json")
                self.path = path
                return
            holder = self._holder(path)
            if holder is not None and _controller_alive(holder):
                raise KnobsBusy(f"{self.host.name}: its kernel knobs are held by run {holder.get('run_id')} (pid "
                                f"{holder.get('pid')} on {holder.get('controller')}) since {holder.get('since')}; "
                                "wait for it, or `labkit runs cleanup` if it was killed")
            self.host.remove(path)  # stale: its run is gone
        raise KnobsBusy(f"{self.host.name}: could not take its kernel knobs' lock {path}")

    def _holder(self, path: str) -> dict | None:
        try:
            return json.loads(self.host.read_bytes(f"{path}/owner.json"))
        except (LabkitError, ValueError):
            return None  # being written, or half gone: treated as stale

    def release(self) -> None:
        if self.path is not None:
            try:
                self.host.remove(self.path)
            except LabkitError:
                pass  # the host went away: cleanup, or the next run, finds it stale
            self.path = None


def _controller_alive(holder: dict) -> bool:
    """Whether the run holding a lock is still measuring: its controller process, when that is on this machine; a
    run of another machine counts as alive."""
    if holder.get("controller") != socket.gethostname():
        return True
    try:
        os.kill(int(holder["pid"]), 0)
    except (ProcessLookupError, ValueError, KeyError, TypeError):
        return False
    except PermissionError:
        return True
    return True

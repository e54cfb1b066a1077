"""Kernel conditions an experiment sets on a host for a while, and puts back afterwards.

Two knobs shape the idle-connection step:

- ``net.ipv4.tcp_slow_start_after_idle`` (per network namespace), and
- the congestion control, set **per route** to the peer (``ip route replace
  PEER/32 ... congctl ALG``): inside a namespace, or without touching the
  whole host, the sysctl may only select globally allowed algorithms, while a
  route may use any loaded one.

:class:`KernelConditions` records each knob's exact state before it changes
any, and every value it writes before writing it; :meth:`restore` (which callers
run in a ``finally``, so also on failure and Ctrl-C) puts back each knob it
wrote, where the knob is still as it set it. Both are also in the run manifest,
so ``labkit runs cleanup`` can restore them after a SIGKILL, and refuses where a
knob is now neither as the run set it nor as it was before.

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
    """Set and restore slow-start-after-idle and per-route congestion control on one host.

    What it records is what :meth:`restore` checks: each knob's exact state before the run (the sysctl's value; the
    /32 route to the peer as `ip -o route show` prints it, "" where there was none) and every value the run wrote
    (``written``, recorded through ``record`` before each write, so a SIGKILL between the two leaves nothing
    unrecorded). Only a knob the run wrote is put back, and only while its state now is the one recorded before
    (nothing to do) or one the run wrote; anything else was changed by someone else and is left as it is.
    """

    def __init__(self, host, peer_address: str, record=None):
        self.host = host
        self.peer = peer_address
        self.original_ssai: str | None = None
        # The /32 route to the peer as it was: its `ip -o route show` line, "" if
        # there was none, None while we have not read it.
        self.original_route: str | None = None
        # Every value the run wrote, per knob: the sysctl's values, the routes' `ip route replace` words.
        self.written: dict[str, list[str]] = {"slow_start_after_idle": [], "route_to_peer": []}
        self.record = record or (lambda: None)  # saves originals() (the manifest) before a write
        self.current: dict[str, object] = {}

    def capture(self) -> dict[str, object]:
        """Read the values this object may change, before it changes any; return them for the manifest."""
        if self.original_ssai is None:
            self.original_ssai = self.host.read_sysctl(SSAI)
        if self.original_route is None:
            self.original_route = self.route_now()
        return self.originals()

    def route_now(self) -> str:
        """The /32 route to the peer as `ip -o route show` prints it now, "" where there is none."""
        existing = self.host.run(["ip", "-o", "route", "show", f"{self.peer}/32"])
        if existing.returncode != 0:
            raise ConditionRefused(f"{self.host.name} could not show its route to {self.peer}: {_last_line(existing)}")
        # `ip -o` ends continuation lines with a backslash.
        return " ".join(existing.stdout.split("\\")[0].split())

    def originals(self) -> dict[str, object]:
        return {"slow_start_after_idle": self.original_ssai, "route_to_peer": self.original_route, "peer": self.peer,
                "written": self.written}

    def set_slow_start_after_idle(self, value: int) -> None:
        if self.current.get("ssai") == value:
            return
        self.capture()
        self._write("slow_start_after_idle", str(value))
        result = self.host.run_privileged(ssai_argv(value))
        if result.returncode != 0:
            raise ConditionRefused(f"{self.host.name} refused {SSAI}={value}: {_last_line(result)}")
        self.current["ssai"] = value

    def set_congestion_control(self, algorithm: str) -> None:
        if self.current.get("cc") == algorithm:
            return
        self.capture()
        if self.original_route:
            # The route that was there, changed in its congestion control alone.
            try:
                parts = parse_route(self.original_route, self.peer, "route_to_peer")
            except ManifestRefused:
                raise ConditionRefused(f"{self.host.name}'s route to {self.peer} ({self.original_route[:60]}) is not "
                                       "of a form labkit changes") from None
        else:
            route = self.host.run(["ip", "-o", "route", "get", self.peer])
            if route.returncode != 0:
                raise ConditionRefused(f"{self.host.name} has no route to {self.peer}")
            tokens = route.stdout.split()
            parts = {key: tokens[tokens.index(key) + 1] for key in ("via", "dev", "src") if key in tokens[:-1]}
        words = route_words(self.peer, {**parts, "congctl": algorithm})
        self._write("route_to_peer", " ".join(words))
        result = self.host.run_privileged(["ip", "route", "replace", *words])
        if result.returncode != 0:
            raise ConditionRefused(
                f"{self.host.name} refused congestion control {algorithm} on the route to {self.peer}: {_last_line(result)}"
            )
        self.current["cc"] = algorithm

    def _write(self, knob: str, value: str) -> None:
        """Record that the run is about to write ``value`` to ``knob``, before it does."""
        if value not in self.written[knob]:
            self.written[knob].append(value)
            self.record()

    def restore_steps(self) -> list[tuple[list[str], str]]:
        """The commands that put back each knob the run wrote, from the host's state now; ManifestRefused (its field
        the knob's) where that state is neither the one recorded before the run nor one the run wrote. Reads only."""
        steps = []
        if self.written["slow_start_after_idle"] and self.original_ssai is not None:
            now = self.host.read_sysctl(SSAI)
            if now != str(self.original_ssai):
                if now not in self.written["slow_start_after_idle"]:
                    raise ManifestRefused("slow_start_after_idle", f"{self.host.name} has {SSAI}={now}, neither the "
                                          f"{self.original_ssai} recorded before the run nor a value it set; left as it is")
                steps.append((ssai_argv(self.original_ssai), f"{SSAI}={self.original_ssai}"))
        if self.written["route_to_peer"] and self.original_route is not None:
            now = self.route_now()
            if not _same_route(now, self.original_route, self.peer):
                if not any(_same_route(now, written, self.peer) for written in self.written["route_to_peer"]):
                    raise ManifestRefused("route_to_peer", f"{self.host.name}'s route to {self.peer}/32 is now "
                                          f"{now[:100] or 'absent'!r}, neither the one recorded before the run "
                                          f"({self.original_route[:100] or 'absent'!r}) nor one it set; left as it is")
                if self.original_route:
                    argv = ["ip", "route", "replace", *route_words(self.peer, parse_route(self.original_route, self.peer,
                                                                                          "route_to_peer"))]
                else:  # the run added it: exactly that route goes, never another to the peer
                    argv = ["ip", "route", "del", *route_words(self.peer, parse_route(now, self.peer, "route_to_peer"))]
                steps.append((argv, f"the route to {self.peer}"))
        return steps

    def restore(self) -> list[str]:
        """Put back every original value changed (through the same privilege path); return what could not be."""
        problems = []
        try:
            steps = self.restore_steps()
        except ManifestRefused as exc:
            steps = []
            problems.append(f"{self.host.name}: could not restore {exc.field}: {exc.reason}")
        except LabkitError as exc:  # the host went away
            steps = []
            problems.append(f"{self.host.name}: could not restore its kernel settings: {exc.message}")
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


def _same_route(line: str, recorded: str, peer: str) -> bool:
    """Whether the route ``line`` (as shown now, "" for none) is ``recorded`` (as shown, or as the words labkit wrote):
    the same parts, the scope the kernel adds to a route written without one aside."""
    if not line or not recorded:
        return line == recorded
    try:
        now, then = parse_route(line, peer, "route_to_peer"), parse_route(recorded, peer, "route_to_peer")
    except ManifestRefused:
        return " ".join(line.split()) == " ".join(recorded.split())
    if "scope" not in then:
        now.pop("scope", None)
    return now == then


class ManifestRefused(LabkitError):
    """A value a run directory asks `labkit runs cleanup` to put on a host that labkit would never have recorded: the
    manifest was edited, or copied from somewhere else. ``field`` names where it is."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field, self.reason = field, reason


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
    written = originals.get("written", {})
    if not isinstance(written, dict) or set(written) - {"slow_start_after_idle", "route_to_peer"} \
            or not all(isinstance(values, list) and len(values) <= 64 for values in written.values()):
        raise ManifestRefused(f"{field}.written", "is not the values of the knobs labkit sets")
    for value in written.get("slow_start_after_idle", []):
        if value not in ("0", "1"):
            raise ManifestRefused(f"{field}.written.slow_start_after_idle", f"{str(value)[:20]!r} is neither 0 nor 1")
    for value in written.get("route_to_peer", []):
        if not isinstance(value, str):
            raise ManifestRefused(f"{field}.written.route_to_peer", "is not a route")
        parse_route(value, str(peer), f"{field}.written.route_to_peer")


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


def conditions_from_manifest(host, originals: dict[str, object]) -> KernelConditions:
    """The :class:`KernelConditions` a run recorded (``kernel_originals[KEY]``, passed :func:`check_originals`), to
    be checked against the host (:meth:`KernelConditions.restore_steps`) and restored by `labkit runs cleanup`.

    A run recorded before labkit kept what it wrote names no ``written``: its sysctl counts as written (either value
    of its domain), and its route as written where only its congestion control differs from the one recorded."""
    peer = str(originals["peer"])
    conditions = KernelConditions(host, peer)
    ssai = originals.get("slow_start_after_idle")
    conditions.original_ssai = None if ssai is None else str(int(str(ssai)))
    route = originals.get("route_to_peer")
    conditions.original_route = None if route is None else str(route)
    if "written" in originals:
        conditions.written = {knob: list(originals["written"].get(knob, [])) for knob in conditions.written}
    else:
        conditions.written["slow_start_after_idle"] = ["0", "1"]
        if route:
            try:
                now = parse_route(conditions.route_now(), peer, "route_to_peer")
            except ManifestRefused:
                now = {}  # none now, or one labkit would not have written
            if "congctl" in now:
                parts = {**parse_route(str(route), peer, "route_to_peer"), "congctl": now["congctl"]}
                conditions.written["route_to_peer"] = [" ".join(route_words(peer, parts))]
    return conditions


def restore_from_manifest(host, originals: dict[str, object]) -> list[str]:
    """Restore what a crashed run recorded (:func:`conditions_from_manifest`); return what could not be."""
    return conditions_from_manifest(host, originals).restore()


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
            self._remove_stale(path)
        raise KnobsBusy(f"{self.host.name}: could not take its kernel knobs' lock {path}")

    def _remove_stale(self, path: str) -> None:
        """Remove a lock whose run is gone. A namespace's number is reused once it is deleted, so a lock another user
        left (root's, from a run on a namespace long gone) can name this one; /tmp's sticky bit keeps the login user
        from removing it, and the host's privilege path (as is for root, ``sudo -n``) removes it instead."""
        try:
            self.host.remove(path)
            return
        except LabkitError as exc:
            refused = exc.message
        result = self.host.run_privileged(["rm", "-rf", "--", path])
        if not result.ok:
            raise KnobsBusy(f"{self.host.name}: a stale lock of its kernel knobs, {path}, cannot be removed ({refused}); "
                            "remove it as root")

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

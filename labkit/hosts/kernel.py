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


def restore_from_manifest(host, originals: dict[str, object]) -> list[str]:
    """Restore what a crashed run recorded as original (used by `labkit runs cleanup`)."""
    conditions = KernelConditions(host, str(originals["peer"]))
    conditions.original_ssai = originals.get("slow_start_after_idle")  # type: ignore[assignment]
    conditions.original_route = originals.get("route_to_peer")  # type: ignore[assignment]
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
        import json
        import tempfile

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
        import json

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
    import os
    import socket

    if holder.get("controller") != socket.gethostname():
        return True
    try:
        os.kill(int(holder["pid"]), 0)
    except (ProcessLookupError, ValueError, KeyError, TypeError):
        return False
    except PermissionError:
        return True
    return True

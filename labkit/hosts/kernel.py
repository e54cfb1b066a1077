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
"""

from __future__ import annotations

from labkit.errors import LabkitError

SSAI = "net.ipv4.tcp_slow_start_after_idle"


class ConditionRefused(LabkitError):
    """The host would not let us change a kernel setting (usually: not root there)."""


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
        result = self.host.run(["sysctl", "-q", "-w", f"{SSAI}={value}"])
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise ConditionRefused(f"{self.host.name} refused {SSAI}={value}: {detail[-1] if detail else 'no reason given'}")
        self.current["ssai"] = value

    def set_congestion_control(self, algorithm: str) -> None:
        if self.current.get("cc") == algorithm:
            return
        route = self.host.run(["ip", "-o", "route", "get", self.peer])
        if route.returncode != 0:
            raise ConditionRefused(f"{self.host.name} has no route to {self.peer}")
        tokens = route.stdout.split()
        self.capture()
        argv = ["ip", "route", "replace", f"{self.peer}/32"]
        for key in ("via", "dev", "src"):
            if key in tokens:
                argv += [key, tokens[tokens.index(key) + 1]]
        argv += ["congctl", algorithm]
        result = self.host.run(argv)
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise ConditionRefused(
                f"{self.host.name} refused congestion control {algorithm} on the route to {self.peer}: "
                f"{detail[-1] if detail else 'no reason given'}"
            )
        self.current["cc"] = algorithm

    def restore(self) -> list[str]:
        """Put back every original value changed; return what could not be restored."""
        problems = []
        if self.original_ssai is not None:
            result = self.host.run(["sysctl", "-q", "-w", f"{SSAI}={self.original_ssai}"])
            if result.returncode != 0:
                problems.append(f"{self.host.name}: could not restore {SSAI}={self.original_ssai}")
        if self.original_route is not None:
            if self.original_route:
                argv = ["ip", "route", "replace", *self.original_route.split()]
            else:
                argv = ["ip", "route", "del", f"{self.peer}/32"]
            result = self.host.run(argv)
            if result.returncode != 0:
                problems.append(f"{self.host.name}: could not restore the route to {self.peer}")
        self.current.clear()
        return problems


def restore_from_manifest(host, originals: dict[str, object]) -> list[str]:
    """Restore what a crashed run recorded as original (used by `labkit runs cleanup`)."""
    conditions = KernelConditions(host, str(originals["peer"]))
    conditions.original_ssai = originals.get("slow_start_after_idle")  # type: ignore[assignment]
    conditions.original_route = originals.get("route_to_peer")  # type: ignore[assignment]
    return conditions.restore()

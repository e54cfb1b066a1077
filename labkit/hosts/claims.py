"""Which runs use a host now: two runs on the same hosts at once each measure the other's traffic, so a second run
that shares a pair of hosts with one still measuring refuses in one line, naming it, unless asked to share.

Each run leaves a claim on each of its hosts for as long as it runs: a file named for the run in a directory under
/tmp named, like :class:`labkit.hosts.kernel.KnobLock`'s, for the host's network namespace (the hosts of one
machine's testbed share /tmp, not a namespace). A claim whose run's controller is gone (a killed run, on this
machine) is stale: it is skipped, removed when it can be, and `labkit runs cleanup` removes the run's own.
"""

from __future__ import annotations

import json
import re
import socket
import tempfile

from labkit.echo.cputime import start_ticks_of
from labkit.errors import LabkitError

PREFIX = "/tmp/labkit-runs-"
#: A claim's path as :class:`HostClaims` writes it: the namespace's directory, then ``<run id>.json``.
CLAIM_PATH = re.compile(r"^/tmp/labkit-runs-[0-9]{1,20}/[0-9A-Za-z._-]{1,200}\.json$")


def controller_alive(manifest: dict) -> bool:
    """Whether the process that measures a run (its controller) still runs, on this machine."""
    controller = manifest.get("controller") or {}
    if controller.get("host") != socket.gethostname() or not controller.get("pid"):
        return False
    started = start_ticks_of(controller["pid"])
    if started is None:
        return False
    # A run recorded before start times were: any process with the pid counts (the old, cautious answer).
    return controller.get("start_ticks") in (None, started)


class HostsBusy(LabkitError):
    """Another run still measures on the hosts this one would use."""


def claims_dir(host) -> str:
    """The directory of claims on ``host``: one per network namespace."""
    namespace = host.run(["readlink", "/proc/self/ns/net"], check=True).stdout.strip()  # net:[4026531840]
    return PREFIX + "".join(ch for ch in namespace if ch.isdigit())


def _claims(host, directory: str) -> list[dict]:
    """Every claim in ``directory`` on ``host``, read in one command (a claim is one JSON line)."""
    listing = host.run(["find", directory, "-maxdepth", "1", "-name", "*.json", "-exec", "cat", "{}", "+"])
    found = []
    for line in listing.stdout.splitlines():
        try:
            claim = json.loads(line)
        except ValueError:
            continue  # being written
        if isinstance(claim, dict) and isinstance(claim.get("run_id"), str):
            found.append(claim)
    return found


class HostClaims:
    """A run's claims on the hosts it uses (``hosts``: inventory name -> open host), made by :meth:`claim` and given
    up by :meth:`release`; ``paths`` are where they are (kept in the manifest for `runs cleanup`)."""

    def __init__(self, hosts: dict, owner: dict):
        self.hosts = hosts
        self.owner = owner  # run_id, controller {host, pid, start_ticks}, since
        self.paths: dict[str, str] = {}

    def claim(self, share: bool = False) -> None:
        """Claim every host, then (unless ``share``) refuse when another live run claims two of them (one, for a run
        on one host). Claiming before looking: of two runs starting at once, at least one sees the other."""
        directories = {}
        for name, host in self.hosts.items():
            directories[name] = claims_dir(host)
            # Sticky and open to all, as /tmp is: a login user's runs and root's share it, each removing only its own.
            host.run(["mkdir", "-p", "-m", "1777", directories[name]])
            with tempfile.NamedTemporaryFile("w", suffix=".json") as mine:
                mine.write(json.dumps({**self.owner, "hosts": sorted(self.hosts)}) + "\n")
                mine.flush()
                path = f"{directories[name]}/{self.owner['run_id']}.json"
                host.put(mine.name, path)
                self.paths[name] = path
        if share:
            return
        try:
            refuse_if_busy(self.hosts, directories, self.owner["run_id"])
        except HostsBusy:
            self.release()
            raise

    def release(self) -> None:
        for name, path in list(self.paths.items()):
            release_claim(self.hosts[name], path)
            self.paths.pop(name)


def live_claims(hosts: dict, directories: dict[str, str], own_run_id: str | None) -> dict[str, tuple[dict, set[str]]]:
    """The other live runs claiming ``hosts`` (name -> open host, its claims in ``directories``): run id -> (its
    claim, which of these hosts). Stale claims are removed on the way."""
    others: dict[str, tuple[dict, set[str]]] = {}
    for name, host in hosts.items():
        for claim in _claims(host, directories[name]):
            if claim["run_id"] == own_run_id:
                continue
            if not controller_alive(claim):
                try:
                    host.remove(f"{directories[name]}/{claim['run_id']}.json")  # stale: its run is gone
                except (LabkitError, OSError):
                    pass  # another user's: skipped all the same
                continue
            others.setdefault(claim["run_id"], (claim, set()))[1].add(name)
    return others


def refuse_if_busy(hosts: dict, directories: dict[str, str] | None = None, own_run_id: str | None = None) -> None:
    """Raise HostsBusy, naming the run, when a live run other than ``own_run_id`` claims two of ``hosts`` (the one,
    for a run on one host)."""
    directories = directories or {name: claims_dir(host) for name, host in hosts.items()}
    needed = min(2, len(hosts))
    for run_id, (claim, names) in live_claims(hosts, directories, own_run_id).items():
        if len(names) >= needed:
            controller = claim.get("controller") or {}
            raise HostsBusy(
                f"host{'s' if len(names) > 1 else ''} {' and '.join(sorted(names))} {'are' if len(names) > 1 else 'is'} "
                f"in use by run {run_id} (pid {controller.get('pid')} on {controller.get('host')}, since "
                f"{claim.get('since')}): each run would measure the other's traffic; wait for it, or pass "
                "--share-hosts to run alongside it")


def release_claim(host, path: str) -> None:
    """Remove one claim (the run's own); a host that went away keeps it, stale, until cleanup or the next run."""
    try:
        host.remove(path)
    except (LabkitError, OSError):
        pass

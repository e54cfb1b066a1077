"""``--capture``: tcpdump on the client and server hosts for as long as an experiment's echo server runs.

When a run captures, :meth:`Captures.start` follows every echo server a runner
starts: one tcpdump on the server's host and one on each client host, headers
only, filtered to the server's ports and the peer's data address
(:func:`labkit.parsers.pcap.tcpdump_argv`), started (through ``sudo -n`` where
the host needs it) once the server is ready and so before its first cell.
:meth:`Captures.stop` stops them after the server, also on failure or interrupt
(the session stops every registered process), copies each file into the
run's ``raw/`` and records it in the manifest's ``captures``: host, role, peer,
ports, file and its size. :func:`labkit.explain.packets_table` turns them into
packets attributed to calls. Each capture's directory on its host is in the
manifest's ``capture_dirs`` until its file is kept, so that after a SIGKILL
`labkit runs cleanup` keeps what it holds (``partial``) and removes it.
"""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from labkit.errors import LabkitError
from labkit.hosts.kernel import ManifestRefused, _is_ip
from labkit.hosts.privilege import knob_blockers
from labkit.parsers.pcap import tcpdump_argv
from labkit.provenance import utc_now

#: What an echo server's ready line calls its ports, and the name each gets in a capture's record.
PORT_KEYS = {"port": "grpc", "http2_port": "http2", "tcp_echo_port": "tcp_echo"}


def ready_ports(ready: dict, keys: dict[str, str] | None = None) -> dict[str, int]:
    """A server's ports from its ready line: ``keys`` (ready key -> name; default the echo server's), or else every
    ``<name>_port`` it reports (labkit-go back and front)."""
    if keys is None and "port" not in ready:
        return {key.removesuffix("_port"): int(value) for key, value in ready.items()
                if key.endswith("_port") and isinstance(value, int) and value > 0}
    return {name: int(ready[key]) for key, name in (keys or PORT_KEYS).items() if ready.get(key)}


@dataclass
class _Running:
    host: str
    role: str  # "client" or "server"
    peer: str  # the data address the capture is filtered to
    ports: dict[str, int]
    proc: Any
    workdir: str
    started_utc: str


class Captures:
    """The captures of one run's session, keyed by the echo server they follow."""

    def __init__(self, session):
        self.session = session
        self._by_server: dict[int, list[_Running]] = {}
        self._lock = threading.Lock()

    def start(self, server_host: str, server, ports: dict[str, int], clients: tuple[str, ...]) -> None:
        """tcpdump on ``server_host`` and each of ``clients`` (other hosts) for ``ports`` (name -> port) of the server,
        until :meth:`stop` of ``server``."""
        session = self.session
        clients = tuple(c for c in dict.fromkeys(clients) if c != server_host)
        started = []
        try:
            for host_name, role, peer in [(server_host, "server", session.address(c)) for c in clients[:1]] + [
                    (c, "client", session.address(server_host)) for c in clients]:
                host = session.host(host_name)
                workdir = host.make_temp_dir("labkit-capture.")
                self._record_dir(host_name, role, peer, ports, workdir)
                argv = tcpdump_argv(_tcpdump(host), f"{workdir}/capture.pcap", peer, sorted(ports.values()))
                proc = session.start(host_name, host.privileged_argv(argv))
                started.append(_Running(host_name, role, peer, ports, proc, workdir, utc_now()))
                self._wait_until_listening(proc, host_name)
        except BaseException:
            self._finish(started)
            raise
        with self._lock:
            self._by_server[id(server)] = started

    def _record_dir(self, host: str, role: str, peer: str, ports: dict[str, int], workdir: str) -> None:
        """Note a capture's directory on its host in the manifest until its file is kept: after a SIGKILL,
        `labkit runs cleanup` collects what it holds (:func:`collect_leftovers`)."""
        run = self.session.run
        with self._lock:
            run.manifest.setdefault("capture_dirs", []).append(
                {"host": host, "role": role, "peer": peer, "ports": ports, "dir": workdir, "started_utc": utc_now()})
            run.save_manifest()

    def _wait_until_listening(self, proc, host_name: str, timeout_s: float = 15) -> None:
        """tcpdump says ``listening on`` (on stderr) once its filter is in place; packets before that would be missed."""
        deadline = time.monotonic() + timeout_s
        while not any("listening on" in line for line in list(proc.stderr_lines)):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise LabkitError(f"tcpdump did not start on {host_name}: {proc.last_words(proc.poll())}")
            time.sleep(0.02)

    def stop(self, server) -> None:
        """Stop the captures that follow ``server`` (already stopped) and keep their files."""
        with self._lock:
            running = self._by_server.pop(id(server), [])
        self._finish(running)

    def stop_all(self) -> None:
        with self._lock:
            running = [r for group in self._by_server.values() for r in group]
            self._by_server.clear()
        self._finish(running)

    def _finish(self, running: list[_Running]) -> None:
        for capture in running:
            try:
                self.session.stop(capture.host, capture.proc)  # SIGTERM: tcpdump closes its file
            except Exception:
                pass
            stopped = utc_now()
            try:
                self._keep(capture, stopped)
            except LabkitError as exc:  # an unreachable host: the capture stays there, the run says so
                self.session.progress.log(f"[yellow]capture on {capture.host} not kept: {exc.message}[/yellow]")

    def _keep(self, capture: _Running, stopped_utc: str) -> None:
        run = self.session.run
        host = self.session.host(capture.host)
        with self._lock:
            index = len(run.manifest.setdefault("captures", []))
            name = f"capture-{capture.host}-{capture.role}-{index}.pcap"
            run.manifest["captures"].append({
                "host": capture.host, "role": capture.role, "peer": capture.peer, "ports": capture.ports,
                "file": name, "started_utc": capture.started_utc, "stopped_utc": stopped_utc, "bytes": None,
            })
            run.save_manifest()
        local = run.raw_dir / name
        remote = f"{capture.workdir}/capture.pcap"
        if host.exists(remote):
            host.get(remote, local)
        host.remove(capture.workdir)
        with self._lock:
            run.manifest["captures"][index]["bytes"] = local.stat().st_size if local.exists() else 0
            _forget_dir(run, capture.host, capture.workdir)
            run.save_manifest()


def _forget_dir(run, host: str, workdir: str) -> None:
    run.manifest["capture_dirs"] = [entry for entry in run.manifest.get("capture_dirs", [])
                                    if (entry.get("host"), entry.get("dir")) != (host, workdir)]


#: A capture's directory as Host.make_temp_dir("labkit-capture.") names it (in /tmp, or a local host's $TMPDIR).
_CAPTURE_DIR = re.compile(r"^(/[A-Za-z0-9_.-]+)*/labkit-capture\.[A-Za-z0-9_]{1,32}$")


def check_leftover(entry: object, index: int, hosts) -> None:
    """Refuse (ManifestRefused, naming the field) a ``capture_dirs`` entry labkit would not have written: a host not
    in the run's inventory (``hosts``), a directory not named as a capture's, a role, peer or port out of place."""
    field = f"capture_dirs[{index}]"
    if not isinstance(entry, dict):
        raise ManifestRefused(field, "is not an object")
    if entry.get("host") not in hosts:
        raise ManifestRefused(f"{field}.host", f"{str(entry.get('host'))[:40]!r} is not a host of the run's inventory")
    workdir = entry.get("dir")
    if not isinstance(workdir, str) or not _CAPTURE_DIR.match(workdir) or "/../" in f"{workdir}/":
        raise ManifestRefused(f"{field}.dir", f"{str(workdir)[:60]!r} is not a directory labkit captures into")
    if entry.get("role") not in ("client", "server") or not _is_ip(entry.get("peer")):
        raise ManifestRefused(field, "its role or peer is not one a capture has")
    ports = entry.get("ports")
    if not isinstance(ports, dict) or not all(isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536
                                              for port in ports.values()):
        raise ManifestRefused(f"{field}.ports", "are not port numbers")


def collect_leftovers(run, host_of, say) -> None:
    """The captures a killed run left on its hosts (their tcpdump already stopped): each file into ``raw/``, recorded
    in ``captures`` as ``partial`` (cut short where the run was killed), its directory removed. ``host_of(name)`` opens
    a host; ``say`` reports a line. Entries are checked with :func:`check_leftover` beforehand."""
    for entry in list(run.manifest.get("capture_dirs", [])):
        captures = run.manifest.setdefault("captures", [])
        name = f"capture-{entry['host']}-{entry['role']}-{len(captures)}.pcap"
        local = run.raw_dir / name
        try:
            host = host_of(entry["host"])
            if host.exists(f"{entry['dir']}/capture.pcap"):
                host.get(f"{entry['dir']}/capture.pcap", local)
            host.remove(entry["dir"])
        except LabkitError as exc:  # the host went away: the entry stays for the next cleanup
            local.unlink(missing_ok=True)
            say(f"{run.run_id}: capture on {entry['host']} not kept yet: {exc.message}")
            continue
        size = local.stat().st_size if local.exists() else 0
        captures.append({"host": entry["host"], "role": entry["role"], "peer": entry["peer"], "ports": entry["ports"],
                         "file": name, "started_utc": entry.get("started_utc"), "stopped_utc": None, "bytes": size,
                         "partial": True})
        _forget_dir(run, entry["host"], entry["dir"])
        run.save_manifest()
        say(f"{run.run_id}: kept the partial capture on {entry['host']} ({size} bytes) as raw/{name}; removed "
            f"{entry['dir']}")


def _tcpdump(host) -> str:
    """tcpdump on the host: Debian puts it in /usr/sbin, which an ordinary user's PATH may lack."""
    for candidate in ("/usr/sbin/tcpdump", "/usr/bin/tcpdump"):
        if host.exists(candidate):
            return candidate
    raise LabkitError(f"tcpdump is not installed on {host.name}; install Debian's tcpdump there "
                      "(`apt-get install tcpdump`)")


def preflight(inventory, host_names: list[str], accept_new_host_keys: bool = False) -> None:
    """Refuse a capturing run before it exists, in one line, when a host cannot run tcpdump as root."""
    def blockers(name: str) -> dict[str, str]:
        with inventory.open(name, accept_new_host_keys=accept_new_host_keys) as host:
            argv = tcpdump_argv(_tcpdump(host), "/tmp/labkit-capture.pcap", "198.18.0.1", [1])
            return knob_blockers(host, {"--capture (tcpdump)": argv})

    with ThreadPoolExecutor(max_workers=min(8, len(host_names))) as pool:
        found = dict(zip(host_names, pool.map(blockers, host_names)))
    problems = [f"{name} cannot capture: {reason}" for name, blocked in found.items() for reason in blocked.values()]
    if problems:
        raise LabkitError("; ".join(problems) + " (nothing was run)")

"""What every experiment shares: open hosts, progress, processes that are always stopped, baselines.

An experiment (``labkit sweep``, ``labkit series``, ...) is a body of code run
inside :func:`session`, which

- creates or resumes the run in the store and records who is measuring it;
- opens each inventory host once (SSH transports are reused by every command)
  and checks that labkit runs there;
- records every host's facts before anything is measured;
- gives the body a :class:`Session`, whose :meth:`Session.start` registers each
  process it starts on a host in the run (so ``labkit runs cleanup`` can stop
  it after a SIGKILL) and whose :meth:`Session.stop_everything` ends them all;
- marks the run interrupted (Ctrl-C, SIGTERM) or failed, and times it.

The body appends its samples to the run itself, cell by cell, so a resumed run
redoes only what is missing.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any

from labkit.errors import LabkitError


class Progress:
    """Calls done / total with an ETA: rich in a terminal, tqdm in a notebook, nothing when quiet."""

    def __init__(self, total: int, quiet: bool = False, unit: str = "call"):
        self.total = total
        self._lock = threading.Lock()
        self._rich = self._tqdm = None
        if quiet:
            return
        if "ipykernel" in sys.modules:
            from tqdm.auto import tqdm

            self._tqdm = tqdm(total=total, unit=unit)
        else:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeRemainingColumn

            self._rich = RichProgress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                transient=False,
            )
            self._task = self._rich.add_task(unit, total=total)
            self._rich.start()

    def describe(self, text: str) -> None:
        with self._lock:
            if self._rich:
                self._rich.update(self._task, description=text)
            elif self._tqdm:
                self._tqdm.set_description(text)

    def advance(self, count: int = 1) -> None:
        with self._lock:
            if self._rich:
                self._rich.advance(self._task, count)
            elif self._tqdm:
                self._tqdm.update(count)

    def log(self, message: str) -> None:
        if self._rich:
            self._rich.console.print(message)
        elif self._tqdm:
            self._tqdm.write(message)

    def close(self) -> None:
        if self._rich:
            self._rich.stop()
        elif self._tqdm:
            self._tqdm.close()


class HostPool:
    """One open host object per inventory name, shared by every pair that uses it."""

    def __init__(self, inventory, accept_new_host_keys: bool):
        self.inventory = inventory
        self.accept_new_host_keys = accept_new_host_keys
        self._hosts: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, name: str):
        from labkit.hosts.inventory import open_host

        with self._lock:
            if name not in self._hosts:
                self._hosts[name] = open_host(self.inventory, name, accept_new_host_keys=self.accept_new_host_keys)
            return self._hosts[name]

    def hosts(self) -> list:
        with self._lock:
            return list(self._hosts.values())

    def close(self) -> None:
        for host in self._hosts.values():
            close = getattr(host, "close", None)
            if close:
                close()


def labkit_on(inventory, name: str, host) -> list[str]:
    """argv prefix that runs labkit on host ``name``; a clear error when it is not deployed there."""
    from labkit.deploy import check_remote_labkit, remote_labkit_argv

    entry = inventory.host(name)
    if entry.is_local:
        return [sys.executable, "-m", "labkit"]  # a local host runs this very labkit
    check_remote_labkit(host, entry, inventory.path)
    return remote_labkit_argv(entry)


class Session:
    """The hosts, progress and started processes of one run of an experiment."""

    def __init__(self, run, inventory, pool: HostPool, progress: Progress):
        self.run = run
        self.inventory = inventory
        self.pool = pool
        self.progress = progress
        self.stopping = threading.Event()
        self.labkit_argv: dict[str, list[str]] = {}
        self.live_processes: set = set()
        self._live_lock = threading.Lock()

    def host(self, name: str):
        return self.pool.get(name)

    def start(self, host_name: str, argv: list[str]):
        """Start ``argv`` on a host, registered in the run until :meth:`stop`."""
        proc = self.pool.get(host_name).start(argv)
        self.run.register_process(host_name, proc.pid, argv)
        with self._live_lock:
            self.live_processes.add(proc)
        return proc

    def start_labkit(self, host_name: str, *args: str):
        """Start a labkit subcommand on a host (its deployed copy, or this one on a local host)."""
        return self.start(host_name, [*self.labkit_argv[host_name], *args])

    def stop(self, host_name: str, proc) -> None:
        try:
            proc.stop()
        finally:
            self.run.unregister_process(host_name, proc.pid)
            with self._live_lock:
                self.live_processes.discard(proc)

    def stop_everything(self) -> None:
        """End every process still running, so worker threads blocked on them return."""
        self.stopping.set()
        with self._live_lock:
            live = list(self.live_processes)
        for proc in live:
            try:
                proc.stop(grace_s=1.0)
            except Exception:
                pass

    def ping(self, host_name: str, address: str, label: str, count: int = 10) -> dict[str, Any]:
        """A ping baseline from a host to an address; raw output kept as raw/ping-<label>.txt."""
        from labkit.parsers.ping import parse_ping

        result = self.pool.get(host_name).run(["ping", "-n", "-c", str(count), "-i", "0.2", address], timeout=count * 0.2 + 30)
        self.run.write_raw(f"ping-{label}.txt", result.stdout + result.stderr)
        summary = parse_ping(result.stdout).summary
        return {k: summary.get(k) for k in ("transmitted", "received", "rtt_min_ms", "rtt_avg_ms", "rtt_max_ms", "rtt_mdev_ms")}

    def iperf(self, client_name: str, server_name: str, address: str, label: str, *,
              seconds: int = 3, rate: str = "50M", port: int = 5201) -> dict[str, Any]:
        """A rate-limited iperf3 throughput baseline (-J output kept as raw/iperf3-<label>.json).

        Always rate-limited: through the testbed's delay line an unlimited
        sender overflows queues and measures the emulator, not the path.
        """
        from labkit.parsers.iperf3 import parse_iperf3_json

        server = self.start(server_name, ["iperf3", "-s", "-1", "--forceflush", "-B", address, "-p", str(port)])
        try:
            server.wait_for_line(lambda line: "listening" in line.lower(), timeout=15)
            result = self.pool.get(client_name).run(
                ["iperf3", "-c", address, "-p", str(port), "-t", str(seconds), "-b", rate, "-J"], timeout=seconds + 30
            )
        finally:
            self.stop(server_name, server)
        self.run.write_raw(f"iperf3-{label}.json", result.stdout)
        try:
            summary = parse_iperf3_json(result.stdout).summary
        except LabkitError as exc:
            return {"error": str(exc)}
        return {k: summary.get(k) for k in ("received_bps", "sent_bps", "retransmits", "sender_tcp_congestion", "error")}


@contextmanager
def session(run, inventory, host_names: list[str], *, total: int, unit: str = "call", quiet: bool = False,
            accept_new_host_keys: bool = False):
    """Run an experiment's body on ``host_names``; see the module docstring for what it takes care of.

    The caller finalises the run (Parquet, status complete) after the block.
    """
    from labkit.hosts.facts import collect_facts
    from labkit.provenance import utc_now

    run.update(controller={"pid": os.getpid(), "host": socket.gethostname()})
    pool = HostPool(inventory, accept_new_host_keys)
    progress = Progress(total=total, quiet=quiet, unit=unit)
    current = Session(run, inventory, pool, progress)
    started = time.monotonic()
    try:
        current.labkit_argv = {name: labkit_on(inventory, name, pool.get(name)) for name in host_names}
        for name in host_names:
            peers = [inventory.peer_address(other) for other in host_names if other != name]
            run.manifest["hosts"][name] = collect_facts(
                pool.get(name), peers[0] if peers else None, current.labkit_argv[name][:1]
            )
        run.save_manifest()
        yield current
    except KeyboardInterrupt:
        current.stop_everything()
        run.set_status("interrupted")
        raise
    except BaseException:
        current.stop_everything()
        run.set_status("failed")
        raise
    finally:
        progress.close()
        pool.close()
        run.close()
        run.manifest.setdefault("timing", {})[utc_now()] = {
            "wall_s": round(time.monotonic() - started, 3),
            # Per-unit orchestration must not cost SSH round trips: this stays
            # constant per cell however many calls a cell makes.
            "ssh_sessions_opened": sum(getattr(host, "sessions_opened", 0) for host in pool.hosts()),
        }
        run.save_manifest()


def prepare_run(experiment: str, config_type, config, *, resume: str | None = None, runs_dir=None):
    """Check everything that can be checked before a run exists; return (run to resume or None, config, inventory).

    Resuming takes the config recorded in the run's manifest, so the matrix it
    finishes is the one it started. Bad values, a bad inventory or an unknown
    host fail here, so no run directory is left behind by a typo.
    """
    from labkit.hosts.inventory import load_inventory
    from labkit.store import find_run

    run = None
    if resume:
        run = find_run(resume, runs_dir)
        if run.manifest.get("experiment") != experiment:
            raise LabkitError(f"{run.path} is a {run.manifest.get('experiment')} run, not a {experiment} run")
        if run.status == "complete":
            raise LabkitError(f"{run.path} is already complete; nothing to resume")
        config = config_type(**run.manifest["config"])
    config.validate()
    inventory = load_inventory(config.inventory)
    for name in (getattr(config, "client", None), getattr(config, "server", None)):
        if name:
            inventory.host(name)  # a clear error for an unknown name
    return run, config, inventory


def begin_run(run, experiment: str, config, runs_dir=None):
    """Mark a resumed run as running again, or create the new one (after its config was checked)."""
    import dataclasses

    from labkit.store import Run

    if run is not None:
        run.mark_resumed()
        return run
    return Run.create(runs_dir, config.name, experiment, dataclasses.asdict(config))

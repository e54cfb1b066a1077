"""The experiment template: what every experiment command shares, written once.

An experiment (``labkit sweep``, ``series``, ``upload``, ``load``) is an
:class:`ExperimentSpec` in its own module, ``labkit/experiments/<command>.py``:
its config dataclass, how it plans its cells, how it executes them in a
:class:`Session`, its Parquet schema, its summary and its notebook.
:func:`run_experiment` does the rest, the same way for all of them:

1. checks the config, the inventory and the host names before a run exists
   (:func:`prepare_run`), or takes the recorded config of a run to resume;
2. plans the cells and asks the spec's ``preflight`` whether the hosts can
   run them (a sweep: may each host set the kernel knobs it asks for), then
   creates (or reopens) the run in the store;
3. opens each host once, checks labkit is deployed there, sends it the static
   tools the plan runs there that it lacks (``Plan.tools``) and records every
   host's facts before anything is measured (:func:`session`);
4. lets the spec execute its cells; every process started on a host is
   registered in the run before it runs and stopped afterwards, also on
   failure, Ctrl-C and SIGTERM (:meth:`Session.stop_everything`);
5. marks the run interrupted or failed, or writes the Parquet dataset and
   marks it complete.

The spec's executor appends its samples to the run itself, cell by cell, so a
resumed run redoes only what is missing.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import random
import shutil
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from labkit.cleanup import clean_up, needs_cleanup
from labkit.echo.cputime import parse_proc_stat, start_ticks_of
from labkit.echo.plans import ServePlan, serve_argv
from labkit.echo.remote import wait_until_ready
from labkit.errors import LabkitError, RunInterrupted
from labkit.experiments.capture import Captures, preflight as capture_preflight, ready_ports
from labkit.experiments.registry import spec_for_experiment
from labkit.experiments.stacks import Stack
from labkit.hosts.claims import HostClaims, refuse_if_busy
from labkit.hosts.facts import collect_facts, process_start_ticks
from labkit.hosts.inventory import load_inventory, open_host
from labkit.hosts.layout import TOOL_HINTS, host_tool_candidates, labkit_argv, labkit_home
from labkit.hosts.local import Silent
from labkit.hosts.tools import send_tools
from labkit.interrupts import interrupts_deferred
from labkit.parsers.ping import baseline_ping_argv, parse_ping
from labkit.provenance import utc_now
from labkit.store import Run, find_run
from labkit.testbed.emulator import run_window
from labkit.testbed.lab import link_settings


# -- the spec of an experiment -------------------------------------------------------------------
@dataclass
class Plan:
    """What an experiment will run: its cells, in order, and how progress is counted."""

    cells: list
    hosts: list[str]  # inventory names of every host the run uses
    total: int  # progress units (calls, samples, uploads, cells) of the whole plan
    unit: str = "call"
    omitted: list[str] = field(default_factory=list)  # combinations left out, with the reason for each
    # host -> the static tools (labkit.hosts.layout.TOOLS) the cells run from its labkit_dir/bin: the session sends
    # each one a host lacks before the first cell (labkit.hosts.tools), so no transfer overlaps a measurement.
    tools: dict[str, set[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class ExperimentSpec:
    """One experiment command, declared once; :func:`run_experiment` runs any of them."""

    command: str  # the CLI command, e.g. "sweep"; also what --resume is given to
    experiment: str  # the run manifest's experiment id, e.g. "idle-step"
    config_type: type  # the config dataclass; its fields are the options (and the manifest's config)
    plan: Callable[[Any, Any], Plan]  # (config, inventory) -> Plan
    runner: type  # an ExperimentRunner: runner(session, config).run_cells(cells) runs the plan's cells
    schema: str  # the name of its samples.parquet schema in labkit.schemas, e.g. "SWEEP_SCHEMA"
    summarize: Callable[[Any], Any]  # Run -> the DataFrame a person reads first
    notebook: str | None = None  # the notebook in notebooks/ that analyses its runs
    # (config, inventory, plan, accept_new_host_keys) -> None; raises LabkitError (one line) when a host cannot
    # do what the plan needs, before the run exists and before any cell runs.
    preflight: Callable[[Any, Any, Plan, bool], None] | None = None

    def resume_command(self, run_id: str) -> str:
        return f"labkit {self.command} --resume {run_id}"


def run_experiment(spec: ExperimentSpec, config, *, runs_dir=None, resume: str | None = None, quiet: bool = False,
                   accept_new_host_keys: bool = False, replicate: dict | None = None, share_hosts: bool = False):
    """Run (or, with ``resume``, continue) an experiment and return its :class:`labkit.store.Run`; ``replicate``
    (labkit.experiments.run_replicates) goes into a new run's manifest, its ``group`` the run's own id when None;
    ``share_hosts``: run even while another run measures on the same hosts (:mod:`labkit.hosts.claims`)."""
    run, config, inventory = prepare_run(spec.experiment, spec.config_type, config, resume=resume, runs_dir=runs_dir)
    if run is not None:
        _finish_cleanup(run, accept_new_host_keys)
    plan = spec.plan(config, inventory)
    if not plan.cells:
        raise LabkitError("no cell to run" + (": " + "; ".join(plan.omitted[:3]) if plan.omitted else ""))
    if spec.preflight is not None:
        spec.preflight(config, inventory, plan, accept_new_host_keys)
    if getattr(config, "capture", False):
        capture_preflight(inventory, plan.hosts, accept_new_host_keys)
    if not share_hosts:
        _refuse_busy_hosts(inventory, plan.hosts, accept_new_host_keys, run.run_id if run is not None else None)
    resumed = run is not None
    run = begin_run(run, spec.experiment, config, runs_dir)
    if plan.omitted and not resumed:
        run.update(omitted_cells=plan.omitted)
    if replicate and not resumed:
        run.update(replicate={**replicate, "group": replicate["group"] or run.run_id})
    try:
        with session(run, inventory, plan.hosts, total=plan.total, unit=plan.unit, quiet=quiet,
                     accept_new_host_keys=accept_new_host_keys, share_hosts=share_hosts, tools=plan.tools) as current:
            spec.runner(current, config).run_cells(plan.cells)
    except KeyboardInterrupt:
        raise RunInterrupted(run, spec.command) from None
    import labkit.schemas

    run = run.finish(getattr(labkit.schemas, spec.schema))
    if run.manifest.get("captures"):
        from labkit.explain import write_packets

        write_packets(run)
    return run


def _finish_cleanup(run, accept_new_host_keys: bool) -> None:
    """Before a run is resumed: what `labkit runs cleanup` does for it, if its end (a SIGKILL) did not, so none of its
    old processes (an echo server still answering) or changed knobs outlive it into the resumed measurement."""
    if needs_cleanup(run):  # refused in one line, as `runs cleanup` would, when the run asks for what labkit never does
        clean_up(run, accept_new_host_keys, say=lambda line: print(line, file=sys.stderr))


def _refuse_busy_hosts(inventory, host_names: list[str], accept_new_host_keys: bool, own_run_id: str | None) -> None:
    """Before a run exists: refuse in one line while another run measures on these hosts (the session's claim checks
    again, for a run that started meanwhile), so a refused run leaves no run directory behind."""
    with ExitStack() as stack:
        hosts = {name: stack.enter_context(inventory.open(name, accept_new_host_keys=accept_new_host_keys))
                 for name in host_names}
        refuse_if_busy(hosts, own_run_id=own_run_id)


def prepare_run(experiment: str, config_type, config, *, resume: str | None = None, runs_dir=None):
    """Check everything that can be checked before a run exists; return (run to resume or None, config, inventory).

    Resuming takes the config recorded in the run's manifest, so the matrix it
    finishes is the one it started. Bad values, a bad inventory or an unknown
    host fail here, so no run directory is left behind by a typo.
    """
    run = None
    if resume:
        run = find_run(resume, runs_dir)
        if run.manifest.get("experiment") != experiment:
            raise LabkitError(f"{run.path} is a {run.manifest.get('experiment')} run, not a {experiment} run")
        if run.status == "complete":
            raise LabkitError(f"{run.path} is already complete; nothing to resume")
        config = config_type(**run.manifest["config"])
    if config is None:
        raise LabkitError("give a config, or a run to resume")
    config.validate()
    inventory = load_inventory(config.inventory)
    for name in (getattr(config, "client", None), getattr(config, "server", None)):
        if name:
            inventory.host(name)  # a clear error for an unknown name
    return run, config, inventory


def begin_run(run, experiment: str, config, runs_dir=None):
    """Mark a resumed run as running again, or create the new one (after its config was checked)."""
    if run is not None:
        run.mark_resumed()
        return run
    return Run.create(runs_dir, config.name, experiment, dataclasses.asdict(config))


class ServerDied(LabkitError):
    """The experiment's echo server exited while a cell ran: that cell's calls measured nothing but the failure."""


class ExperimentRunner:
    """Runs the cells of one experiment in a :class:`Session`; each experiment subclasses it."""

    #: What a server's ready line says of the stack that answered, kept in the manifest's ``servers``.
    SERVER_FACTS = ("impl", "labkit_version", "grpcio_version", "grpc_go_version", "go_version", "grpc_options")

    def __init__(self, session: "Session", config):
        self.session = session
        self.run = session.run
        self.config = config
        self.progress = session.progress
        self._manifest_lock = threading.Lock()
        if getattr(config, "capture", False):  # --capture: tcpdump follows every echo server the runner starts
            session.captures = Captures(session)

    def run_cells(self, cells: list) -> None:
        """Run every cell not finished yet, appending rows and cell events to the run."""
        raise NotImplementedError

    def check_server(self, host: str, server, what: str) -> None:
        """Raise :class:`ServerDied` (one line, the exit kept in the manifest's ``server_exits``) when ``server``, the
        echo server on ``host``, is no longer running: ``what`` (a cell) measured a dead server, not the path."""
        status = server.poll()
        if status is None:
            return
        with self._manifest_lock:
            self.run.manifest.setdefault("server_exits", []).append(
                {"host": host, "pid": server.pid, "status": status, "during": what,
                 "stderr_tail": list(server.stderr_lines[-5:])})
            self.run.save_manifest()
        raise ServerDied(f"the echo server on {host} (pid {server.pid}) exited with status {status} during {what}")

    @contextmanager
    def stops_with(self, server, agent) -> Iterator[None]:
        """For a ``with`` block: when the echo server ``server`` exits, stop the ``agent`` calling it, so the cell ends
        at once (and :meth:`check_server` says why) instead of after the agent's own deadlines to a dead server."""
        done = threading.Event()

        def watch() -> None:
            while not done.wait(0.2):
                if server.poll() is not None:
                    try:
                        agent.stop(grace_s=1.0)
                    except Exception:  # noqa: BLE001 - the agent may have ended by itself meanwhile
                        pass
                    return

        watcher = threading.Thread(target=watch, name="server-watch", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            done.set()
            watcher.join(timeout=5)

    def with_one_restart(self, what: str, attempt: Callable[[], None], restart: Callable[[], None]) -> None:
        """Run ``attempt`` (it leaves its cell incomplete when the server dies); after a server's death, ``restart``
        it and run ``attempt`` once more. A second death ends the run in one line, the cell left for ``--resume``."""
        try:
            attempt()
            return
        except ServerDied as died:
            self.progress.log(f"[yellow]{died.message}; restarting it and redoing {what}[/yellow]")
        restart()
        try:
            attempt()
        except ServerDied as again:
            raise LabkitError(f"{again.message}, again after a restart: {what} is left incomplete "
                              f"(`{self.resume_command()}` redoes it)") from None

    def rows_within_deadline(self, proc, code_field: str, src: str, dst: str, deadline_s: float, what: str, *,
                             silence_s: float) -> Iterator[dict[str, Any]]:
        """The JSON rows an agent calling from ``src`` to ``dst`` prints (see :func:`json_lines`), failing the cell in
        one line, the run resumable, at the first row whose ``code_field`` is gRPC's DEADLINE_EXCEEDED: the link or
        the server stopped answering, and every later call would wait out its deadline too, so the cell ends now
        instead of after all of them.

        An agent that prints nothing for ``silence_s`` (longer than a call's deadline) fails the cell the same way:
        no call got an answer within its deadline, whatever held the agent past it.
        """
        try:
            for row in json_lines(proc, timeout=silence_s):
                if row.get(code_field) == "DEADLINE_EXCEEDED":
                    raise LabkitError(self._no_answer(src, dst, deadline_s, what))
                yield row
        except Silent as silent:
            raise LabkitError(self._no_answer(src, dst, deadline_s, what, f" (`{silent.command}` on {src} then wrote "
                                              f"nothing for {silent.seconds:g} s)")) from None

    def _no_answer(self, src: str, dst: str, deadline_s: float, what: str, detail: str = "") -> str:
        return (f"a call from {src} to {dst} got no answer within its {deadline_s:g} s deadline in {what}{detail}: "
                "the link or the server stopped answering (on a testbed, `labkit testbed status` says what is wrong); "
                f"`{self.resume_command()}` redoes the cell")

    def resume_command(self) -> str:
        return spec_for_experiment(self.run.manifest["experiment"]).resume_command(self.run.run_id)

    def record_server(self, host: str, ready: dict) -> None:
        """Keep each distinct server a run started (implementation, versions, options) in the manifest's ``servers``."""
        entry = {"host": host, **{key: ready[key] for key in self.SERVER_FACTS if key in ready}}
        with self._manifest_lock:  # --mesh runs pairs in threads
            servers = self.run.manifest.setdefault("servers", [])
            if entry not in servers:
                servers.append(entry)
                self.run.save_manifest()


# -- progress, hosts and processes ----------------------------------------------------------------
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
        with self._lock:
            if name not in self._hosts:
                self._hosts[name] = open_host(self.inventory, name, accept_new_host_keys=self.accept_new_host_keys)
            return self._hosts[name]

    def hosts(self) -> list:
        with self._lock:
            return list(self._hosts.values())

    def close(self) -> None:
        for host in self._hosts.values():
            host.close()


class Session:
    """The hosts, progress and started processes of one run of an experiment."""

    def __init__(self, run, inventory, pool: HostPool, progress: Progress):
        self.run = run
        self.inventory = inventory
        self.pool = pool
        self.progress = progress
        self.stopping = threading.Event()
        self.labkit_argv: dict[str, list[str]] = {}
        # In start order: stop_everything ends the newest first (see there).
        self.live_processes: dict = {}
        self._live_lock = threading.Lock()
        self.captures = None  # labkit.experiments.capture.Captures when the run captures packets
        self.link_at_start = self.link_settings()  # a testbed's link parameters, compared at each cell's end
        # Seconds spent on what a run does besides its cells (host facts, baselines), kept in the manifest's timing.
        self.fixed_s: dict[str, float] = {}

    @contextmanager
    def fixed_cost(self, what: str):
        """Time the block as part of ``what``, one of the run's fixed costs (summed over the run)."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.fixed_s[what] = round(self.fixed_s.get(what, 0.0) + time.monotonic() - started, 3)

    def host(self, name: str):
        return self.pool.get(name)

    def link_settings(self) -> str | None:
        """The testbed's link parameters when the inventory is a local testbed's (None otherwise)."""
        testbed = getattr(self.inventory, "testbed", None) or {}
        return link_settings(testbed["name"]) if testbed.get("name") else None

    def check_link(self, what: str) -> None:
        """Fail ``what`` (a cell, before it is marked complete) in one line when the testbed's link was changed since
        the run began: its calls measured two links (e.g. 45 and 62 ms round trips)."""
        now = self.link_settings()
        if now != self.link_at_start:
            raise LabkitError(f"the testbed's link changed during {what} (`labkit testbed up` with other settings?): "
                              "the cell is left incomplete; put the link back and resume")

    def address(self, name: str) -> str:
        """Where peers send experiment traffic to host ``name`` (its data address)."""
        return self.inventory.peer_address(name)

    def home(self, name: str) -> str:
        """Host ``name``'s labkit directory, as its commands see it."""
        return labkit_home(self.inventory.host(name))

    # -- cells -------------------------------------------------------------------------------
    def pending(self, cells: list, weight: Callable[[Any], int]) -> list:
        """The cells not yet finished (complete or skipped); progress advances by ``weight`` of the others."""
        finished = self.run.finished_cells()
        todo = [cell for cell in cells if cell.id not in finished]
        self.progress.advance(sum(weight(cell) for cell in cells if cell.id in finished))
        return todo

    def check_stopping(self) -> None:
        """Between cells: end the run like Ctrl-C once another thread asked everything to stop."""
        if self.stopping.is_set():
            raise KeyboardInterrupt

    # -- processes ---------------------------------------------------------------------------
    def start(self, host_name: str, argv: list[str]):
        """Start ``argv`` on a host, registered in the run until :meth:`stop`."""
        host = self.pool.get(host_name)
        # Started, known as live and recorded as one step: an interrupt between the host's start and the record left
        # a process no one would stop (a ghz on a, after a SIGINT). It is taken once the process is recorded; a host
        # slow to say the pid delays it, by at most the host's start timeout.
        with interrupts_deferred():
            proc = host.start(argv)
            with self._live_lock:
                self.live_processes[proc] = host_name
            self.run.register_process(host_name, proc.pid, argv)
        # Reading its start time is another round trip to the host: an interrupt during it still finds the process.
        started = process_start_ticks(host, proc.pid)
        if started is not None:
            self.run.register_process(host_name, proc.pid, argv, started)
        return proc

    def start_labkit(self, host_name: str, *args: str):
        """Start a labkit subcommand on a host (its deployed copy, or this one on a local host)."""
        return self.start(host_name, [*self.labkit_argv[host_name], *args])

    def run_labkit(self, host_name: str, *args: str, timeout: float = 600) -> dict[str, Any]:
        """Run a labkit agent command on a host to completion; its last JSON line."""
        result = self.host(host_name).run([*self.labkit_argv[host_name], *args], timeout=timeout)
        lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
        if not result.ok or not lines:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise LabkitError(f"{host_name}: `labkit {' '.join(args[:2])}` failed: {detail[-1] if detail else result.returncode}")
        return json.loads(lines[-1])

    @contextmanager
    def agent(self, host_name: str, *args: str) -> Iterator:
        """A labkit agent process on a host for the length of a ``with`` block, stopped (and unregistered) after."""
        proc = self.start_labkit(host_name, *args)
        try:
            yield proc
        finally:
            self.stop(host_name, proc)

    def start_echo_server(self, host_name: str, stack: Stack = Stack(), *, timeout: float = 60, clients: tuple[str, ...] = (),
                          bind_host: str | None = None, **serve):
        """``labkit echo serve`` of ``stack``'s server side (implementation and options) on a host, bound to its data
        address (or ``bind_host``, e.g. 127.0.0.1 for a client on the same host) with port 0, with the other
        :class:`~labkit.echo.plans.ServePlan` fields ``serve``; (process, its ready line as a dict).

        In a run that captures, tcpdump follows the server on its host and on ``clients`` until it is stopped.
        """
        plan = ServePlan(bind=f"{url_host(bind_host or self.address(host_name))}:0", grpc_options=stack.server_options(),
                         **serve)
        server = self.start_labkit(host_name, *serve_argv(plan, stack.server_impl))
        try:
            ready = wait_until_ready(server, timeout)
            if self.captures is not None and clients:
                self.captures.start(host_name, server, ready_ports(ready), clients)
            return server, ready
        except BaseException:
            self.stop(host_name, server)
            raise

    def stop(self, host_name: str, proc) -> None:
        """Stop a process this session started; it stays in the run's process list unless it surely stopped (a host
        that went away may still run it: `labkit runs cleanup` stops it once the host answers again)."""
        try:
            proc.stop()
            self.run.unregister_process(host_name, proc.pid)
        except KeyboardInterrupt:
            # Interrupted while stopping it: it may still run and is still registered. It stays live, so that the
            # stop_everything the interrupt leads to stops it and unregisters it (once, a clean Ctrl-C during the
            # iperf3 baseline's stop left its server in processes.json).
            raise
        except BaseException:
            self._forget(proc)
            raise
        else:
            self._forget(proc)
        finally:
            if self.captures is not None:  # the captures that follow this process (a server) end after it
                self.captures.stop(proc)

    def _forget(self, proc) -> None:
        with self._live_lock:
            self.live_processes.pop(proc, None)

    def stop_everything(self) -> None:
        """End every process still running, so worker threads blocked on them return: the newest first, as a stack
        unwinds. A client agent finishes the call it is in before it exits; stopped after the tcpdump that follows
        its server, that call's row would be kept without the packets of its last round trips."""
        self.stopping.set()
        with self._live_lock:
            live = list(reversed(self.live_processes.items()))
        for proc, host_name in live:
            try:
                proc.stop(grace_s=1.0)
                # Stopped as Session.stop stops it (its group TERMed, then KILLed): nothing for `runs cleanup` to do.
                self.run.unregister_process(host_name, proc.pid)
                self._forget(proc)
            except Exception:
                pass

    # -- tools, CPU and raw outputs on hosts -----------------------------------------------------
    def find_tool(self, host_name: str, tool: str, given: str | None, how_to_get: str) -> dict[str, str]:
        """``{path, version}`` of ``tool`` on a host: ``given``, else deploy's copy, else its PATH.

        ``how_to_get`` ends the one-line error when none of them runs ``--version``.
        """
        tried = [given] if given else host_tool_candidates(self.inventory.host(host_name), tool)
        for candidate in tried:
            try:
                result = self.host(host_name).run([candidate, "--version"], timeout=30)
            except LabkitError:
                continue  # not there
            version = (result.stdout + result.stderr).strip().splitlines()
            # wrk prints its usage and exits 1 after the version line; a found tool says its name first.
            if result.ok or (version and tool in version[0]):
                return {"path": candidate, "version": version[0] if version else ""}
        raise LabkitError(f"{tool} is not on {host_name} (looked for {', '.join(tried)}); {how_to_get}")

    def deploy_hint(self, host_name: str, tool: str) -> str:
        """How to get a tool that labkit sends to hosts onto one (a run sends this machine's copy by itself)."""
        return (f"run `labkit deploy {self.inventory.path or 'INVENTORY'} {host_name} --tools {tool}` from a machine "
                f"that has {tool} ({TOOL_HINTS[tool]})")

    def process_cpu_s(self, host_name: str, pid: int | None) -> float | None:
        """A process's CPU seconds so far (user + system, from /proc/<pid>/stat on its host); None if unreadable."""
        if pid is None:
            return None
        try:
            user, system = parse_proc_stat(self.host(host_name).read_bytes(f"/proc/{pid}/stat").decode())
        except (LabkitError, ValueError, IndexError):
            return None
        return user + system

    def fetch_raw(self, host_name: str, remote: str, raw_name: str, transform: Callable[[str], str] | None = None):
        """Move a tool's output file from a host into the run's raw/ as ``raw_name``, gzip-compressed; its path, or None.

        ``transform`` may rewrite the text first (e.g. drop what the tool copied of the request).
        """
        host = self.host(host_name)
        if not host.exists(remote):
            return None
        local = self.run.raw_dir / raw_name
        with tempfile.TemporaryDirectory(prefix="labkit-raw-") as tmp:
            copy = Path(tmp) / "out"
            host.get(remote, copy)
            if transform is not None:
                copy.write_text(transform(copy.read_text()))
            with open(copy, "rb") as source, gzip.open(local, "wb", compresslevel=1) as target:
                shutil.copyfileobj(source, target)
        host.remove(remote)
        return local

    def iperf3_server(self, host_name: str, address: str, port: int | None = None):
        """iperf3 -s listening on ``address`` (a port of its own unless given); (process, port)."""
        from labkit.parsers.iperf3 import iperf3_server_argv

        last = ""
        for candidate in _free_port_tries(port):
            server = self.start(host_name, iperf3_server_argv(address, candidate))
            try:
                server.wait_for_line(lambda line: "listening" in line.lower(), timeout=15)
                return server, candidate
            except LabkitError as exc:  # the port is taken: another one
                last = exc.message
                self.stop(host_name, server)
        raise LabkitError(f"iperf3 could not listen on {host_name}: {last}")

    # -- baselines -----------------------------------------------------------------------------
    def ping_baseline(self, src: str, dst: str, when: str, count: int = 10) -> dict[str, Any]:
        """Ping ``dst``'s data address from ``src`` and record it as ``baselines[src-dst][ping_<when>_<attempt>]``.

        The raw output is kept as ``raw/ping-<src>-<dst>-<when>.txt``.
        """
        with self.fixed_cost("ping baselines"):
            result = self.host(src).run(baseline_ping_argv(self.address(dst), count), timeout=count * 0.2 + 30)
        self.run.write_raw(f"ping-{src}-{dst}-{when}.txt", result.stdout + result.stderr)
        summary = parse_ping(result.stdout).summary
        values = {k: summary.get(k) for k in ("transmitted", "received", "rtt_min_ms", "rtt_avg_ms", "rtt_max_ms", "rtt_mdev_ms")}
        self.run.record_baseline(src, dst, f"ping_{when}_{self.run.attempt}", values)
        return values

    def iperf_baseline(self, src: str, dst: str, *, seconds: int = 3, rate: str = "50M",
                       port: int | None = None) -> dict[str, Any]:
        """A rate-limited iperf3 throughput baseline from ``src`` to ``dst``, recorded as ``baselines[src-dst][iperf3]``.

        Always rate-limited: through the testbed's delay line an unlimited
        sender overflows queues and measures the emulator, not the path. The
        ``-J`` output is kept as ``raw/iperf3-<src>-<dst>.json``. Without a
        ``port``, one picked at random per run (another run's iperf3 on the
        same host would hold a fixed one), again when it is taken.
        """
        from labkit.parsers.iperf3 import iperf3_client_argv, parse_iperf3_json

        address = self.address(dst)
        with self.fixed_cost("iperf3 baselines"):
            server, port = self.iperf3_server(dst, address, port)
            try:
                result = self.host(src).run(iperf3_client_argv(address, port, seconds, rate), timeout=seconds + 30)
            finally:
                self.stop(dst, server)
        self.run.write_raw(f"iperf3-{src}-{dst}.json", result.stdout)
        try:
            summary = parse_iperf3_json(result.stdout).summary
            values = {k: summary.get(k) for k in ("received_bps", "sent_bps", "retransmits", "sender_tcp_congestion", "error")}
        except LabkitError as exc:
            values = {"error": str(exc)}
        self.run.record_baseline(src, dst, "iperf3", values)
        return values


def _free_port_tries(port: int | None) -> list[int]:
    """The ports to try for a server: the one asked for, or a few random ones above the well-known range."""
    return [port] if port is not None else [random.randrange(20000, 60000) for _ in range(5)]


def url_host(address: str) -> str:
    """An address as the host part of ``HOST:PORT`` or a URL: IPv6 literals in brackets."""
    return f"[{address}]" if ":" in address and not address.startswith("[") else address


def json_lines(proc, timeout: float) -> Iterator[dict[str, Any]]:
    """The JSON objects an agent prints on stdout, as they arrive; other lines are skipped.

    ``timeout``: the longest silence allowed before the agent counts as stuck.
    """
    for line in proc.lines(timeout=timeout):
        if line.startswith("{"):
            yield json.loads(line)


@contextmanager
def session(run, inventory, host_names: list[str], *, total: int, unit: str = "call", quiet: bool = False,
            accept_new_host_keys: bool = False, share_hosts: bool = False, tools: dict[str, set[str]] | None = None):
    """Run an experiment's body on ``host_names``; see the module docstring for what it takes care of.
    ``tools``: host name -> the static tools to send there if it lacks them (``Plan.tools``).

    The caller finalises the run (Parquet, status complete) after the block.
    """
    # The pid alone may name another process once this one has ended: its start time tells them apart.
    run.update(controller={"pid": os.getpid(), "host": socket.gethostname(), "start_ticks": start_ticks_of()})
    started_utc_ns = time.time_ns()
    pool = HostPool(inventory, accept_new_host_keys)
    progress = Progress(total=total, quiet=quiet, unit=unit)
    current = Session(run, inventory, pool, progress)
    started = time.monotonic()
    claims = None
    try:
        claims = _claim_hosts(run, pool, host_names, share_hosts)

        def argv_and_facts(name: str) -> tuple[list[str], dict]:
            host = pool.get(name)
            argv = labkit_argv(inventory, name, host)
            for note in send_tools(host, inventory.host(name), sorted((tools or {}).get(name, ()))):
                progress.log(f"{name}: {note}")
            peers = [inventory.peer_address(other) for other in host_names if other != name]
            return argv, collect_facts(host, peers[0] if peers else None, argv[:1])

        with current.fixed_cost("hosts opened: tools and facts"), ThreadPoolExecutor(max(1, len(host_names))) as hosts:
            found = dict(zip(host_names, hosts.map(argv_and_facts, host_names)))  # each host's take round trips: at once
        current.labkit_argv = {name: argv for name, (argv, _) in found.items()}
        run.manifest["hosts"].update({name: facts for name, (_, facts) in found.items()})
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
        if current.captures is not None:  # what the stopped captures saw is kept, also after a failure
            current.captures.stop_all()
        progress.close()
        if claims is not None:
            claims.release()
            run.manifest.pop("host_claims", None)
        pool.close()
        run.close()
        run.manifest.setdefault("timing", {})[utc_now()] = {
            "wall_s": round(time.monotonic() - started, 3),
            # Per-unit orchestration must not cost SSH round trips: this stays
            # constant per cell however many calls a cell makes.
            "ssh_sessions_opened": sum(getattr(host, "sessions_opened", 0) for host in pool.hosts()),
            "fixed_s": current.fixed_s,
        }
        _record_emulator(run, inventory, started_utc_ns)
        run.save_manifest()


def _claim_hosts(run, pool: HostPool, host_names: list[str], share_hosts: bool):
    """Mark each host as used by this run for its length, refusing (HostsBusy) while another run measures on them."""
    owner = {"run_id": run.run_id, "since": utc_now(),
             "controller": {"host": socket.gethostname(), "pid": os.getpid(), "start_ticks": start_ticks_of()}}
    claims = HostClaims({name: pool.get(name) for name in host_names}, owner)
    claims.claim(share=share_hosts)
    run.update(host_claims=dict(claims.paths))  # for `runs cleanup` after a SIGKILL
    return claims


def _record_emulator(run, inventory, started_utc_ns: int) -> None:
    """On a testbed's inventory, keep what the link emulator did during this session (a resumed run has
    several), so a run's delays can be trusted or flagged (labkit.report)."""
    window = run_window(inventory.testbed, started_utc_ns, time.time_ns())
    if window is not None:
        run.manifest.setdefault("emulator", {"windows": []})["windows"].append(window)

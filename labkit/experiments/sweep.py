"""``labkit sweep``: the idle-connection experiment (research brief, experiment 1) on any two hosts.

The experiment matrix is request size × idle gap × background sender ×
keepalive × ``tcp_slow_start_after_idle`` × congestion control. A **cell** is
one combination of everything but the size: it runs as one client process on
the client host (one warm channel, a warm-up call, then every size × repeat),
streaming one JSON line per call back over a single SSH channel, so the
orchestration cost per call is zero SSH round trips.

Before anything runs, each host is asked whether it may set the kernel knobs
the sweep asks for (root, or ``become = "sudo"`` with a passwordless rule);
if one may not, the sweep refuses in one line (:func:`preflight`).

Per pair of hosts the sweep:

1. records host facts and the original kernel settings (in the manifest,
   before changing anything);
2. pings the server's data address and runs a rate-limited iperf3 (raw output
   kept) as baselines;
3. starts one echo server on the server host;
4. runs each cell: sets the cell's kernel conditions on both hosts (skipping
   the cell, recorded, when a host's kernel refuses a value), runs the client with ``--tcp-info``
   and appends every call to the run's journal as it arrives;
5. pings again, stops the server and restores the kernel settings — also on
   failure and Ctrl-C.

Completed cells are recorded, so ``--resume`` redoes only what is missing.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from labkit.echo.plans import CallPlan, call_argv, warmup_seconds
from labkit.errors import LabkitError
from labkit.hosts.kernel import ConditionRefused, KernelConditions, KnobLock, knob_commands
from labkit.hosts.privilege import knob_blockers
from labkit.limits import (MAX_CALL_TIMEOUT_S, MAX_ECHO_PAYLOAD_BYTES, MAX_IPERF_SECONDS, MAX_PING_COUNT,
                           MIN_CALL_TIMEOUT_S, check_within)
from labkit.experiments.base import ExperimentRunner, ExperimentSpec, Plan, url_host
from labkit.experiments.stacks import Stack, StackChoice, go_tools, plan_stacks
from labkit.parsers.iperf3 import iperf3_rate
from labkit.provenance import utc_now

EXPERIMENT = "idle-step"


@dataclass
class SweepConfig(StackChoice):
    """Everything that defines a sweep; stored in the manifest as the resolved config."""

    inventory: str
    client: str | None = None
    server: str | None = None
    sizes: list[int] = field(default_factory=lambda: [1000, 14000, 16000, 32000])
    gaps_s: list[float] = field(default_factory=lambda: [1.0])
    repeats: int = 5
    background_gaps_s: list[float | None] = field(default_factory=lambda: [None])
    keepalive_ms: list[int | None] = field(default_factory=lambda: [None])
    slow_start_after_idle: list[int | None] = field(default_factory=lambda: [None])
    cc: list[str | None] = field(default_factory=lambda: [None])
    # New runs: cells and calls in a seeded random order, so that time and history are confounded with no knob.
    order: str = "shuffled"
    name: str = "sweep"
    capture: bool = False  # --capture: tcpdump on client and server hosts (labkit.experiments.capture)
    seed: int = 1
    warmup: int = 1
    mesh: bool = False
    hosts: list[str] | None = None
    ping_count: int = 10
    iperf_seconds: int = 3
    iperf_rate: str = "50M"
    iperf_port: int | None = None  # None: one of its own, picked at random (runs at once never share one)
    call_timeout_s: float = 30.0

    def _check_bounds(self) -> None:
        """Each cell's calls are a plan the echo client takes (its rules and the bounds of labkit.limits), and the
        sweep's own bounds, checked before a run exists."""
        for gap, background, keepalive in itertools.product(self.gaps_s, self.background_gaps_s, self.keepalive_ms):
            CallPlan(target="", sizes=self.sizes, repeats=self.repeats, gap_s=gap, background_gap_s=background,
                     warmup=self.warmup, order=self.order, keepalive_ms=keepalive).check()
        for size in self.sizes:
            check_within("sizes", size, 0, MAX_ECHO_PAYLOAD_BYTES, " bytes")
        check_within("--call-timeout", self.call_timeout_s, MIN_CALL_TIMEOUT_S, MAX_CALL_TIMEOUT_S, "s")
        check_within("ping count", self.ping_count, 1, MAX_PING_COUNT)
        check_within("iperf seconds", self.iperf_seconds, 1, MAX_IPERF_SECONDS)

    def validate(self) -> None:
        if self.mesh == bool(self.client and self.server):
            if self.mesh:
                raise LabkitError("--mesh runs every pair of hosts; do not also give --client/--server")
            raise LabkitError("give --client and --server (host names from the inventory), or --mesh")
        if not self.mesh and self.client == self.server:
            raise LabkitError("client and server must be different hosts")
        self._check_bounds()
        if any(v not in (None, 0, 1) for v in self.slow_start_after_idle):
            raise LabkitError("--slow-start-after-idle takes 1, 0 (or 'keep')")
        try:
            iperf3_rate(self.iperf_rate)
        except ValueError as exc:
            raise LabkitError(f"--iperf-rate: {exc}") from None
        plan_stacks(self.client_impl, self.server_impl, self.grpc_option)


@dataclass(frozen=True)
class Cell:
    """One condition of the matrix for one (client, server) pair."""

    src: str
    dst: str
    cc: str | None
    slow_start_after_idle: int | None
    gap_s: float
    background_gap_s: float | None
    keepalive_ms: int | None
    stack: Stack = Stack()

    @property
    def id(self) -> str:
        return (
            f"{self.src}->{self.dst}|cc={self.cc or 'keep'}|ssai={_keep(self.slow_start_after_idle)}"
            f"|gap={self.gap_s:g}|bg={_keep(self.background_gap_s, 'none')}|ka={_keep(self.keepalive_ms, 'none')}"
            f"{self.stack.id_suffix}"
        )

    def columns(self) -> dict[str, Any]:
        return {
            "src": self.src,
            "dst": self.dst,
            "cell_id": self.id,
            "cc": self.cc,
            "slow_start_after_idle": self.slow_start_after_idle,
            "gap_s": self.gap_s,
            "background_gap_s": self.background_gap_s,
            "keepalive_ms": self.keepalive_ms,
            **self.stack.columns(),
        }


def _keep(value, word: str = "keep") -> str:
    return word if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def plan_cells(config: SweepConfig, pairs: list[tuple[str, str]], stacks: list[Stack] | None = None) -> list[Cell]:
    """The cells of the sweep in execution order.

    Cells are grouped by server (implementation and options: one server runs
    per group), then by kernel condition (cc, then the sysctl), so servers
    restart and host settings change as rarely as possible;
    ``order="shuffled"`` shuffles the remaining knobs within each group with
    the config's seed.
    """
    stacks = stacks or [Stack()]
    servers = list(dict.fromkeys(stack.server_key for stack in stacks))
    cells = []
    rng = random.Random(config.seed)
    for (src, dst), server in itertools.product(pairs, servers):
        for cc, ssai in itertools.product(config.cc, config.slow_start_after_idle):
            group = [
                Cell(src, dst, cc, ssai, gap, background, keepalive, stack)
                for stack in stacks if stack.server_key == server
                for gap, background, keepalive in itertools.product(
                    config.gaps_s, config.background_gaps_s, config.keepalive_ms
                )
            ]
            if config.order == "shuffled":
                rng.shuffle(group)
            cells += group
    return cells


# -- running ----------------------------------------------------------------------------


class KernelNotRestored(LabkitError):
    """A sweep measured its cells but could not put back a kernel setting it changed: it ends failed, with exit
    status 1, and `labkit runs cleanup` finishes the restore."""

    exit_code = 1


class _Sweeper(ExperimentRunner):
    """Runs the cells of one sweep, pair by pair (several pairs at once with --mesh)."""

    def __init__(self, session, config: SweepConfig):
        super().__init__(session, config)
        # (client, server) -> the KernelConditions of both hosts; filled in before any cell runs.
        self.kernel_conditions: dict[tuple[str, str], tuple] = {}
        self.knob_locks: dict[str, object] = {}  # host -> its KnobLock, while this run may change its kernel
        self.calls_measured = 0
        self.restore_problems: list[str] = []  # what restore_pair could not put back: the run ends non-zero

    def run_cells(self, cells: list[Cell]) -> None:
        """Run every pair's cells: one pair in this thread, or disjoint pairs in parallel with --mesh."""
        pairs = list(dict.fromkeys((cell.src, cell.dst) for cell in cells))
        try:
            self.capture_kernel_originals(pairs)
            by_pair = {pair: [cell for cell in cells if (cell.src, cell.dst) == pair] for pair in pairs}
            if len(pairs) == 1:
                self.run_pair(*pairs[0], by_pair[pairs[0]])
            else:
                _run_mesh(self, by_pair)
        finally:
            self.unlock_knobs()
        if self.restore_problems:
            raise KernelNotRestored(f"{self.run.run_id}: its cells are measured, but not every kernel setting it changed "
                                    f"is back: {'; '.join(self.restore_problems)}; `labkit runs cleanup "
                                    f"{self.run.run_id}` puts them back once that is resolved")

    def capture_kernel_originals(self, pairs: list[tuple[str, str]]) -> None:
        """Record each host's original settings in the manifest before any cell changes them."""
        originals = self.run.manifest.setdefault("kernel_originals", {})
        self.lock_knobs(sorted({name for pair in pairs for name in pair}))
        for src, dst in pairs:
            sides = (
                KernelConditions(self.session.host(src), self.session.address(dst)),
                KernelConditions(self.session.host(dst), self.session.address(src)),
            )
            self.kernel_conditions[(src, dst)] = sides
            for name, side in zip((src, dst), sides):
                key = f"{name}->{side.peer}"
                # What the run writes is in the manifest before the host has it (cleanup's to put back after a kill).
                side.record = self.run.save_manifest
                if key in originals:
                    # Resuming: the values from before the first attempt are the originals,
                    # whatever a crashed attempt left behind (cleanup put back what it wrote).
                    entry = originals[key]
                    entry.pop("restored", None)  # this attempt may change them again
                    side.original_ssai = entry["slow_start_after_idle"]
                    side.original_route = entry["route_to_peer"]
                    written = entry.setdefault("written", {})
                    side.written = {knob: written.setdefault(knob, []) for knob in side.written}
                else:
                    originals[key] = {"host": name, **side.capture()}
        self.run.save_manifest()

    def lock_knobs(self, names: list[str]) -> None:
        """Hold each host's kernel knobs for this run, when it changes any: a second run on the same hosts waits for
        none of it, but refuses in one line before it records another run's setting as the original."""
        config = self.config
        if all(v is None for v in config.slow_start_after_idle) and all(v is None for v in config.cc):
            return
        owner = {"run_id": self.run.run_id, "controller": socket.gethostname(), "pid": os.getpid(), "since": utc_now()}
        for name in names:
            lock = KnobLock(self.session.host(name), owner)
            lock.acquire()
            self.knob_locks[name] = lock
            self.run.manifest.setdefault("knob_locks", {})[name] = lock.path  # held now (cleanup's to release)
            self.run.manifest.setdefault("knob_locks_held", []).append(lock.path)  # every one it held
            self.run.save_manifest()

    def unlock_knobs(self) -> None:
        """Let go of every host whose kernel is back as it was; one left changed stays held until cleanup restores it."""
        originals = self.run.manifest.get("kernel_originals", {})
        for name in list(self.knob_locks):
            if all(entry.get("restored", True) for entry in originals.values() if entry["host"] == name):
                self.knob_locks.pop(name).release()
                self.run.manifest.get("knob_locks", {}).pop(name, None)
        self.run.save_manifest()

    def run_pair(self, src: str, dst: str, cells: list[Cell]) -> None:
        from labkit.analysis.tables import condition_label

        config, session = self.config, self.session
        conditions = self.kernel_conditions[(src, dst)]
        calls_per_cell = len(config.sizes) * config.repeats
        todo = session.pending(cells, lambda cell: calls_per_cell)
        if not todo:
            return
        server = _PairServer(self, src, dst)
        try:
            session.ping_baseline(src, dst, "before", config.ping_count)
            session.iperf_baseline(src, dst, seconds=config.iperf_seconds, rate=config.iperf_rate, port=config.iperf_port)
            for cell in todo:
                session.check_stopping()
                server.serve(cell.stack)  # cells come grouped by server: one per group
                self.progress.describe(f"{src}→{dst} {condition_label(cell.cc, cell.slow_start_after_idle, cell.gap_s)}"
                                       f" {cell.stack.label()}")
                if self.set_conditions(cell, conditions):
                    self.with_one_restart(cell.id, lambda: self.run_cell(cell, server), server.restart)
                else:
                    self.progress.advance(calls_per_cell)
            session.ping_baseline(src, dst, "after", config.ping_count)
        finally:
            try:
                server.stop()
            finally:  # a host that went away must not keep the other from being restored
                self.restore_pair(src, dst, conditions)

    def restore_pair(self, src: str, dst: str, conditions) -> None:
        """Put back both hosts' kernel settings, each on its own; mark in the manifest which ones are back."""
        originals = self.run.manifest.setdefault("kernel_originals", {})
        for name, side in zip((src, dst), conditions):
            problems = side.restore()
            for problem in problems:
                self.progress.log(f"[red]{problem}[/red]")
            self.restore_problems += problems
            key = f"{name}->{side.peer}"
            if key in originals:
                originals[key]["restored"] = not problems
        self.run.save_manifest()

    def set_conditions(self, cell: Cell, conditions) -> bool:
        """Set the cell's kernel conditions on both hosts; False (and the cell recorded as skipped) if a host refuses."""
        try:
            for side in conditions:
                if cell.slow_start_after_idle is not None:
                    side.set_slow_start_after_idle(cell.slow_start_after_idle)
                if cell.cc is not None:
                    side.set_congestion_control(cell.cc)
        except ConditionRefused as exc:
            self.run.skip_cell(cell.id, str(exc))
            self.progress.log(f"skipping {cell.id}: {exc}")
            return False
        return True

    def run_cell(self, cell: Cell, server: "_PairServer") -> None:
        config, run = self.config, self.run
        target = server.target
        expected = len(config.sizes) * config.repeats
        attempt = run.begin_cell(cell.id)
        calls = CallPlan(target=target, sizes=config.sizes, repeats=config.repeats, gap_s=cell.gap_s,
                         background_gap_s=cell.background_gap_s, warmup=config.warmup, seed=config.seed,
                         order=config.order, keepalive_ms=cell.keepalive_ms, tcp_info=True,
                         timeout_s=config.call_timeout_s, grpc_options=cell.stack.client_options())
        fixed = {"run_id": run.run_id, "experiment": EXPERIMENT, "attempt": attempt, **cell.columns()}
        received = 0
        with self.session.agent(cell.src, *call_argv(calls, cell.stack.client_impl)) as proc, self.stops_with(server.proc, proc):
            # Silence for longer than a call's deadline plus its gap means the client is stuck.
            for call in self.rows_within_deadline(proc, "grpc_code", cell.src, cell.dst, config.call_timeout_s, cell.id,
                                                  silence_s=config.call_timeout_s + cell.gap_s + 30):
                call["rtt_ms"] = call["rtt_ns"] / 1e6
                call.pop("background", None)
                run.append([{**fixed, **call}])
                received += 1
                self.calls_measured += 1
                self.progress.advance()
            status = proc.wait()
        self.check_server(cell.dst, server.proc, cell.id)  # calls to a dead server measured nothing of the path
        # Exit status 1 with every row: every call failed (a path that was down), which the rows record.
        if status not in (0, 1) or received != expected:
            raise LabkitError(f"the echo client on {cell.src} stopped after {received} of {expected} calls: "
                              f"{proc.last_words(status)}")
        self.session.check_link(cell.id)
        # The warm-up call's own time (its connection set up in it) is the cell's plan, as its gaps are: kept, so that
        # what the cell took beyond both (labkit's overhead, bench/sweep_overhead.py) can be told.
        run.complete_cell(cell.id, attempt, received, warmup_s=warmup_seconds(proc.stderr_lines))


class _PairServer:
    """The echo server one pair's cells call: started for a server stack, restarted after it died, stopped at the end."""

    def __init__(self, sweeper: _Sweeper, src: str, dst: str):
        self.sweeper, self.session, self.src, self.dst = sweeper, sweeper.session, src, dst
        self.proc = self.key = self.stack = None
        self.target = ""

    def serve(self, stack) -> None:
        if self.proc is not None and stack.server_key == self.key:
            return
        self.stop()
        config = self.sweeper.config
        keepalives = [k for k in config.keepalive_ms if k]
        self.proc, ready = self.session.start_echo_server(self.dst, stack, clients=(self.src,),
                                                          permit_keepalive_ms=min(keepalives) if keepalives else None)
        self.key, self.stack = stack.server_key, stack
        self.target = f"{url_host(self.session.address(self.dst))}:{ready['port']}"
        self.sweeper.record_server(self.dst, ready)

    def restart(self) -> None:
        stack = self.stack
        self.stop()
        self.serve(stack)

    def stop(self) -> None:
        if self.proc is not None:
            proc, self.proc = self.proc, None
            self.session.stop(self.dst, proc)


def _pairs(config: SweepConfig, inventory) -> list[tuple[str, str]]:
    if not config.mesh:
        for name in (config.client, config.server):
            inventory.host(name)  # a clear error for an unknown name, before anything runs
        return [(config.client, config.server)]
    names = config.hosts or inventory.names
    for name in names:
        inventory.host(name)
    if len(names) < 2:
        raise LabkitError("--mesh needs at least two hosts")
    return [(a, b) for a in names for b in names if a != b]


def plan(config: SweepConfig, inventory) -> Plan:
    pairs = _pairs(config, inventory)
    stacks, left_out = plan_stacks(config.client_impl, config.server_impl, config.grpc_option)
    cells = plan_cells(config, pairs, stacks)
    hosts = sorted({name for pair in pairs for name in pair})
    return Plan(cells, hosts, total=len(cells) * len(config.sizes) * config.repeats, unit="call", omitted=left_out,
                tools=go_tools((cell.src, cell.dst, cell.stack) for cell in cells))


def preflight(config: SweepConfig, inventory, plan: Plan, accept_new_host_keys: bool = False) -> None:
    """Refuse the sweep before its first cell, in one line, when a host cannot set a kernel knob it asks for.

    Each host is asked once (in parallel) with the command of each knob; root
    may set them all, another user only through become = "sudo" and a sudo
    rule that needs no password.
    """
    knobs = [knob for knob, values in (("slow-start-after-idle", config.slow_start_after_idle), ("cc", config.cc))
             if any(value is not None for value in values)]
    if not knobs:
        return

    peers: dict[str, str] = {}  # host -> the address of a host it sets a route to
    for src, dst in dict.fromkeys((cell.src, cell.dst) for cell in plan.cells):
        peers.setdefault(src, inventory.peer_address(dst))
        peers.setdefault(dst, inventory.peer_address(src))

    def blockers(name: str) -> dict[str, str]:
        with inventory.open(name, accept_new_host_keys=accept_new_host_keys) as host:
            return knob_blockers(host, knob_commands(knobs, peers[name]))

    with ThreadPoolExecutor(max_workers=min(8, len(plan.hosts))) as pool:
        found = dict(zip(plan.hosts, pool.map(blockers, plan.hosts)))
    problems = [f"{name} cannot set {knob}: {reason}" for name, blocked in found.items() for knob, reason in blocked.items()]
    if problems:
        raise LabkitError("; ".join(problems) + " (nothing was run; `labkit hosts check INVENTORY --knob ...` says more)")


def _run_mesh(sweeper: _Sweeper, by_pair: dict[tuple[str, str], list[Cell]]) -> None:
    """Run pairs in parallel, never letting one host take part in two pairs at once."""
    pending = list(by_pair)
    busy: set[str] = set()
    hosts = {name for pair in pending for name in pair}
    with ThreadPoolExecutor(max_workers=max(1, len(hosts) // 2)) as executor:
        running = {}
        try:
            while pending or running:
                for pair in list(pending):
                    if not busy & set(pair):
                        busy |= set(pair)
                        pending.remove(pair)
                        running[executor.submit(sweeper.run_pair, *pair, by_pair[pair])] = pair
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    busy -= set(running.pop(future))
                    future.result()
        except BaseException:
            sweeper.session.stop_everything()
            for future in running:
                future.cancel()
            raise


def summarize(run):
    """The sweep's table: median RTT per condition and size, as a multiple of each pair's ping RTT."""
    from labkit.analysis.tables import summarize_sweep

    ping = {pair: (values.get("ping_before_0") or {}).get("rtt_avg_ms")
            for pair, values in (run.manifest.get("baselines") or {}).items()}
    return summarize_sweep(run.samples(), ping)


SPEC = ExperimentSpec(
    command="sweep", experiment=EXPERIMENT, config_type=SweepConfig, plan=plan, runner=_Sweeper,
    schema="SWEEP_SCHEMA", summarize=summarize, notebook="idle_step", preflight=preflight,
)

"""``labkit sweep``: the idle-connection experiment (research brief, experiment 1) on any two hosts.

The experiment matrix is request size × idle gap × background sender ×
keepalive × ``tcp_slow_start_after_idle`` × congestion control. A **cell** is
one combination of everything but the size: it runs as one client process on
the client host (one warm channel, a warm-up call, then every size × repeat),
streaming one JSON line per call back over a single SSH channel, so the
orchestration cost per call is zero SSH round trips.

Per pair of hosts the sweep:

1. records host facts and the original kernel settings (in the manifest,
   before changing anything);
2. pings the server's data address and runs a rate-limited iperf3 (raw output
   kept) as baselines;
3. starts one echo server on the server host;
4. runs each cell: sets the cell's kernel conditions on both hosts (skipping
   the cell, recorded, when a host refuses), runs the client with ``--tcp-info``
   and appends every call to the run's journal as it arrives;
5. pings again, stops the server and restores the kernel settings — also on
   failure and Ctrl-C.

Completed cells are recorded, so ``--resume`` redoes only what is missing.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import random
import socket
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from labkit.errors import LabkitError

EXPERIMENT = "idle-step"


@dataclass
class SweepConfig:
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
    order: str = "sequential"
    name: str = "sweep"
    seed: int = 1
    warmup: int = 1
    mesh: bool = False
    hosts: list[str] | None = None
    ping_count: int = 10
    iperf_seconds: int = 3
    iperf_rate: str = "50M"
    iperf_port: int = 5201
    call_timeout_s: float = 30.0

    def validate(self) -> None:
        if self.mesh == bool(self.client and self.server):
            if self.mesh:
                raise LabkitError("--mesh runs every pair of hosts; do not also give --client/--server")
            raise LabkitError("give --client and --server (host names from the inventory), or --mesh")
        if not self.mesh and self.client == self.server:
            raise LabkitError("client and server must be different hosts")
        if not self.sizes or any(s < 0 or s > 64 * 2**20 for s in self.sizes):
            raise LabkitError("sizes must be between 0 and 64 MiB")
        if self.repeats < 1:
            raise LabkitError("repeats must be at least 1")
        if any(g < 0 for g in self.gaps_s):
            raise LabkitError("gaps must not be negative")
        if any(v not in (None, 0, 1) for v in self.slow_start_after_idle):
            raise LabkitError("--slow-start-after-idle takes 1, 0 (or 'keep')")
        if self.order not in ("sequential", "shuffled"):
            raise LabkitError("--order is sequential or shuffled")


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

    @property
    def id(self) -> str:
        return (
            f"{self.src}->{self.dst}|cc={self.cc or 'keep'}|ssai={_keep(self.slow_start_after_idle)}"
            f"|gap={self.gap_s:g}|bg={_keep(self.background_gap_s, 'none')}|ka={_keep(self.keepalive_ms, 'none')}"
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
        }


def _keep(value, word: str = "keep") -> str:
    return word if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def plan_cells(config: SweepConfig, pairs: list[tuple[str, str]]) -> list[Cell]:
    """The cells of the sweep in execution order.

    Cells are grouped by kernel condition (cc, then the sysctl) so each host
    setting changes as rarely as possible; ``order="shuffled"`` shuffles the
    remaining knobs within each group with the config's seed.
    """
    cells = []
    rng = random.Random(config.seed)
    for src, dst in pairs:
        for cc, ssai in itertools.product(config.cc, config.slow_start_after_idle):
            group = [
                Cell(src, dst, cc, ssai, gap, background, keepalive)
                for gap, background, keepalive in itertools.product(
                    config.gaps_s, config.background_gaps_s, config.keepalive_ms
                )
            ]
            if config.order == "shuffled":
                rng.shuffle(group)
            cells += group
    return cells


def sweep_schema():
    """The declared Parquet schema of a sweep's samples: one row per call, tidy and long."""
    import pyarrow as pa

    from labkit.echo.tcpinfo import TCP_COLUMNS

    integer_tcp = {"cwnd", "ssthresh", "bytes_acked", "retrans", "mss"}
    tcp_fields = []
    for column in TCP_COLUMNS:
        base = column.rsplit("_", 1)[0] if column.endswith(("_before", "_after")) else column
        if column == "tcp_cc":
            tcp_fields.append(pa.field(column, pa.string()))
        elif base in integer_tcp:
            tcp_fields.append(pa.field(column, pa.int64()))
        else:
            tcp_fields.append(pa.field(column, pa.float64()))
    return pa.schema(
        [
            pa.field("run_id", pa.string(), nullable=False),
            pa.field("experiment", pa.string(), nullable=False),
            pa.field("src", pa.string(), nullable=False),
            pa.field("dst", pa.string(), nullable=False),
            pa.field("cell_id", pa.string(), nullable=False),
            pa.field("attempt", pa.int32(), nullable=False),
            pa.field("cc", pa.string()),
            pa.field("slow_start_after_idle", pa.int8()),
            pa.field("background_gap_s", pa.float64()),
            pa.field("keepalive_ms", pa.int64()),
            pa.field("payload_bytes", pa.int64(), nullable=False),
            pa.field("gap_s", pa.float64(), nullable=False),
            pa.field("seq", pa.int64(), nullable=False),
            pa.field("t_start_utc_ns", pa.int64(), nullable=False),
            pa.field("rtt_ns", pa.int64(), nullable=False),
            pa.field("rtt_ms", pa.float64(), nullable=False),
            pa.field("ok", pa.bool_(), nullable=False),
            pa.field("error", pa.string()),
            pa.field("grpc_code", pa.string()),
            pa.field("cold", pa.bool_(), nullable=False),
            *tcp_fields,
        ]
    )


# -- progress ---------------------------------------------------------------------------


class Progress:
    """Calls done / total with an ETA: rich in a terminal, tqdm in a notebook, nothing when quiet."""

    def __init__(self, total: int, quiet: bool = False):
        self.total = total
        self._lock = threading.Lock()
        self._rich = self._tqdm = None
        if quiet:
            return
        if "ipykernel" in sys.modules:
            from tqdm.auto import tqdm

            self._tqdm = tqdm(total=total, unit="call")
        else:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeRemainingColumn

            self._rich = RichProgress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                transient=False,
            )
            self._task = self._rich.add_task("sweep", total=total)
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


# -- running ----------------------------------------------------------------------------


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


def _labkit_on(inventory, name: str, host) -> list[str]:
    """argv prefix that runs labkit on host ``name``; a clear error when it is not deployed there."""
    from labkit.deploy import check_remote_labkit, remote_labkit_argv

    entry = inventory.host(name)
    if entry.is_local:
        return [sys.executable, "-m", "labkit"]  # a local host runs this very labkit
    check_remote_labkit(host, entry, inventory.path)
    return remote_labkit_argv(entry)


class _Sweeper:
    """Runs the cells of one run, pair by pair (several pairs at once with --mesh)."""

    def __init__(self, run, config: SweepConfig, inventory, pool: HostPool, progress: Progress):
        self.run = run
        self.config = config
        self.inventory = inventory
        self.pool = pool
        self.progress = progress
        self.stopping = threading.Event()
        # Filled in by run_sweep before any pair runs.
        self.labkit_argv: dict[str, list[str]] = {}
        self.kernel_conditions: dict[tuple[str, str], tuple] = {}
        self.live_processes: set = set()
        self._live_lock = threading.Lock()
        self.calls_measured = 0

    # processes started on hosts are registered in the run, so a SIGKILLed sweep
    # can be cleaned up by `labkit runs cleanup`.
    def _start(self, host_name: str, host, argv: list[str]):
        proc = host.start(argv)
        self.run.register_process(host_name, proc.pid, argv)
        with self._live_lock:
            self.live_processes.add(proc)
        return proc

    def _stop(self, host_name: str, proc) -> None:
        try:
            proc.stop()
        finally:
            self.run.unregister_process(host_name, proc.pid)
            with self._live_lock:
                self.live_processes.discard(proc)

    def stop_everything(self) -> None:
        """Called on Ctrl-C with --mesh: end every client and server so worker threads return."""
        self.stopping.set()
        with self._live_lock:
            live = list(self.live_processes)
        for proc in live:
            try:
                proc.stop(grace_s=1.0)
            except Exception:
                pass

    def ping(self, host, address: str, label: str) -> dict[str, Any]:
        from labkit.parsers.ping import parse_ping

        count = self.config.ping_count
        result = host.run(["ping", "-n", "-c", str(count), "-i", "0.2", address], timeout=count * 0.2 + 30)
        self.run.write_raw(f"ping-{label}.txt", result.stdout + result.stderr)
        summary = parse_ping(result.stdout).summary
        return {k: summary.get(k) for k in ("transmitted", "received", "rtt_min_ms", "rtt_avg_ms", "rtt_max_ms", "rtt_mdev_ms")}

    def iperf(self, client, server, server_name: str, address: str, label: str) -> dict[str, Any]:
        from labkit.parsers.iperf3 import parse_iperf3_json

        port = str(self.config.iperf_port)
        iperf_server = self._start(server_name, server, ["iperf3", "-s", "-1", "--forceflush", "-B", address, "-p", port])
        try:
            iperf_server.wait_for_line(lambda line: "listening" in line.lower(), timeout=15)
            result = client.run(
                ["iperf3", "-c", address, "-p", port, "-t", str(self.config.iperf_seconds), "-b", self.config.iperf_rate, "-J"],
                timeout=self.config.iperf_seconds + 30,
            )
        finally:
            self._stop(server_name, iperf_server)
        self.run.write_raw(f"iperf3-{label}.json", result.stdout)
        try:
            summary = parse_iperf3_json(result.stdout).summary
        except LabkitError as exc:
            return {"error": str(exc)}
        return {k: summary.get(k) for k in ("received_bps", "sent_bps", "retransmits", "sender_tcp_congestion", "error")}

    def run_pair(self, src: str, dst: str, cells: list[Cell]) -> None:
        from labkit.hosts.kernel import ConditionRefused

        config, run = self.config, self.run
        client, server = self.pool.get(src), self.pool.get(dst)
        conditions = self.kernel_conditions[(src, dst)]
        client_labkit, server_labkit = self.labkit_argv[src], self.labkit_argv[dst]
        server_address = self.inventory.peer_address(dst)
        label = f"{src}-{dst}"
        finished = run.finished_cells()
        todo = [cell for cell in cells if cell.id not in finished]
        calls_per_cell = len(config.sizes) * config.repeats
        self.progress.advance(calls_per_cell * (len(cells) - len(todo)))
        if not todo:
            return
        baselines = run.manifest.setdefault("baselines", {}).setdefault(label, {})
        echo_server = None
        try:
            baselines[f"ping_before_{len(run.manifest['resumed_utc'])}"] = self.ping(client, server_address, f"{label}-before")
            baselines["iperf3"] = self.iperf(client, server, dst, server_address, label)
            run.save_manifest()
            serve = [*server_labkit, "echo", "serve", "--bind", f"{server_address}:0"]
            keepalives = [k for k in config.keepalive_ms if k]
            if keepalives:
                serve += ["--permit-keepalive-ms", str(min(keepalives))]
            echo_server = self._start(dst, server, serve)
            port = json.loads(echo_server.wait_for_line(lambda line: '"ready"' in line, timeout=60))["port"]
            for cell in todo:
                if self.stopping.is_set():
                    raise KeyboardInterrupt
                self.progress.describe(f"{src}→{dst} cc={cell.cc or 'keep'} ssai={_keep(cell.slow_start_after_idle)} gap={cell.gap_s:g}s")
                try:
                    for side in conditions:
                        if cell.slow_start_after_idle is not None:
                            side.set_slow_start_after_idle(cell.slow_start_after_idle)
                        if cell.cc is not None:
                            side.set_congestion_control(cell.cc)
                except ConditionRefused as exc:
                    run.skip_cell(cell.id, str(exc))
                    self.progress.log(f"skipping {cell.id}: {exc}")
                    self.progress.advance(calls_per_cell)
                    continue
                self.run_cell(cell, client, src, client_labkit, f"{server_address}:{port}")
            baselines[f"ping_after_{len(run.manifest['resumed_utc'])}"] = self.ping(client, server_address, f"{label}-after")
            run.save_manifest()
        finally:
            if echo_server is not None:
                self._stop(dst, echo_server)
            problems = [problem for side in conditions for problem in side.restore()]
            for problem in problems:
                self.progress.log(f"[red]{problem}[/red]")

    def run_cell(self, cell: Cell, client, src: str, client_labkit: list[str], target: str) -> None:
        config, run = self.config, self.run
        expected = len(config.sizes) * config.repeats
        attempt = run.begin_cell(cell.id)
        argv = [
            *client_labkit, "echo", "call", "--target", target,
            "--sizes", ",".join(map(str, config.sizes)), "--repeats", str(config.repeats),
            "--gap", f"{cell.gap_s!r}s", "--warmup", str(config.warmup), "--tcp-info",
            "--order", config.order, "--seed", str(config.seed), "--timeout", f"{config.call_timeout_s!r}s",
        ]
        if cell.background_gap_s is not None:
            argv += ["--background-gap", f"{cell.background_gap_s!r}s"]
        if cell.keepalive_ms is not None:
            argv += ["--keepalive-ms", str(cell.keepalive_ms)]
        fixed = {"run_id": run.run_id, "experiment": EXPERIMENT, "attempt": attempt, **cell.columns()}
        received = 0
        proc = self._start(src, client, argv)
        try:
            # Silence for longer than a call's deadline plus its gap means the client is stuck.
            for line in proc.lines(timeout=config.call_timeout_s + cell.gap_s + 30):
                if not line.startswith("{"):
                    continue
                call = json.loads(line)
                call["rtt_ms"] = call["rtt_ns"] / 1e6
                call.pop("background", None)
                run.append([{**fixed, **call}])
                received += 1
                self.calls_measured += 1
                self.progress.advance()
            status = proc.wait()
        finally:
            self._stop(src, proc)
        if status != 0 or received != expected:
            detail = proc.stderr_lines[-1] if proc.stderr_lines else f"exit status {status}"
            raise LabkitError(f"the echo client on {src} stopped after {received} of {expected} calls: {detail}")
        run.complete_cell(cell.id, attempt, received)


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


def run_sweep(
    config: SweepConfig,
    *,
    runs_dir=None,
    resume: str | None = None,
    quiet: bool = False,
    accept_new_host_keys: bool = False,
):
    """Run (or resume) a sweep and return its :class:`labkit.store.Run`."""
    from labkit.hosts.facts import collect_facts
    from labkit.hosts.inventory import load_inventory
    from labkit.hosts.kernel import KernelConditions
    from labkit.store import Run, find_run
    from labkit.provenance import utc_now

    if resume:
        run = find_run(resume, runs_dir)
        if run.manifest.get("experiment") != EXPERIMENT:
            raise LabkitError(f"{run.path} is a {run.manifest.get('experiment')} run, not a sweep")
        if run.status == "complete":
            raise LabkitError(f"{run.path} is already complete; nothing to resume")
        config = SweepConfig(**run.manifest["config"])
    config.validate()
    inventory = load_inventory(config.inventory)
    pairs = _pairs(config, inventory)
    cells = plan_cells(config, pairs)
    if resume:
        run.mark_resumed()
    else:
        run = Run.create(runs_dir, config.name, EXPERIMENT, dataclasses.asdict(config))
    run.update(controller={"pid": os.getpid(), "host": socket.gethostname()})

    pool = HostPool(inventory, accept_new_host_keys)
    progress = Progress(total=len(cells) * len(config.sizes) * config.repeats, quiet=quiet)
    sweeper = _Sweeper(run, config, inventory, pool, progress)
    started = time.monotonic()
    try:
        names = sorted({name for pair in pairs for name in pair})
        # Connect, check labkit, and record facts and original kernel settings on
        # every host before anything changes.
        sweeper.labkit_argv = {name: _labkit_on(inventory, name, pool.get(name)) for name in names}
        originals = run.manifest.setdefault("kernel_originals", {})
        for src, dst in pairs:
            sides = (
                KernelConditions(pool.get(src), inventory.peer_address(dst)),
                KernelConditions(pool.get(dst), inventory.peer_address(src)),
            )
            sweeper.kernel_conditions[(src, dst)] = sides
            for name, side in zip((src, dst), sides):
                key = f"{name}->{side.peer}"
                if key in originals:
                    # Resuming: the values from before the first attempt are the originals,
                    # whatever a crashed attempt left behind.
                    side.original_ssai = originals[key]["slow_start_after_idle"]
                    side.original_route = originals[key]["route_to_peer"]
                else:
                    originals[key] = {"host": name, **side.capture()}
        run.save_manifest()
        for name in names:
            peers = [inventory.peer_address(other) for other in names if other != name]
            run.manifest["hosts"][name] = collect_facts(pool.get(name), peers[0] if peers else None, sweeper.labkit_argv[name][:1])
        run.save_manifest()

        by_pair = {pair: [cell for cell in cells if (cell.src, cell.dst) == pair] for pair in pairs}
        if len(pairs) == 1:
            sweeper.run_pair(*pairs[0], by_pair[pairs[0]])
        else:
            _run_mesh(sweeper, by_pair)
    except KeyboardInterrupt:
        sweeper.stop_everything()
        run.set_status("interrupted")
        raise
    except BaseException:
        sweeper.stop_everything()
        run.set_status("failed")
        raise
    finally:
        progress.close()
        pool.close()
        run.close()
        run.manifest.setdefault("timing", {})[utc_now()] = {
            "wall_s": round(time.monotonic() - started, 3),
            "calls_measured": sweeper.calls_measured,
            # Per-call orchestration must not cost SSH round trips: this stays
            # constant per cell however many calls a cell makes.
            "ssh_sessions_opened": sum(getattr(host, "sessions_opened", 0) for host in pool.hosts()),
        }
        run.save_manifest()
    run.finalize(sweep_schema())
    run.set_status("complete")
    return run


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
            sweeper.stop_everything()
            for future in running:
                future.cancel()
            raise


def summarise(samples, ping_ms: dict[str, float] | None = None):
    """Median RTT per condition and size over warm, successful calls (a DataFrame).

    With ``ping_ms`` (pair label ``src-dst`` → ping mean), adds the median as a
    multiple of the pair's ping RTT.
    """
    warm = samples[samples["ok"] & ~samples["cold"]]
    keys = ["src", "dst", "cc", "slow_start_after_idle", "gap_s", "background_gap_s", "keepalive_ms", "payload_bytes"]
    table = (
        warm.groupby(keys, dropna=False)["rtt_ms"].agg(["count", "median"]).reset_index().rename(columns={"median": "median_ms"})
    )
    if ping_ms:
        table["ping_ms"] = [ping_ms.get(f"{s}-{d}") for s, d in zip(table["src"], table["dst"])]
        table["rtt_multiple"] = table["median_ms"] / table["ping_ms"]
    return table

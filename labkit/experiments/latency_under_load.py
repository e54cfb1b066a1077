"""``labkit latency-under-load``: the probes of a series before, during and after a saturating load (issue 25).

The commonest reason an RPC is slow in production is not on its own connection: a queue it shares with other
traffic, in one direction (bufferbloat). Each **cell** is one condition (the link's queue, the load's direction
and congestion control) and one timeline of ``duration``: the series agent's probes (:mod:`labkit.echo.series_agent`:
ping, warm gRPC echo, raw TCP echo, ...; and irtt, its client started with the agent's first tick, as in a series)
at every ``interval`` from the first tick to the last, and an iperf3 TCP
load (one stream, no rate limit) from ``load_start`` for ``load``: ``tcp-up`` from the client host to the server
host, ``tcp-down`` back, ``tcp-both`` at once; or the application's own: ``grpc-up``, gRPC uploads of a generated
16 MiB file on one channel, one after another, by the stack's upload agent. Each row is a series row with the condition and its **phase**: sent
``before`` the load, in its first ``ramp`` seconds (the queue filling), ``during`` it, or ``after``; by the cell's
plan (tick ``k`` at ``k × interval``), so a row knows its phase as it is written.

Queues (``queues``) are the testbed link emulator's: ``keep`` leaves the link as it is, ``10bdp`` is droptail of
ten bandwidth-delay products, ``codel:10bdp`` CoDel (target 5 ms, interval 100 ms) over that buffer; both
directions of the client-server link get it, for the cell, and the link is put back when the run ends. On hosts
that are not a labkit testbed only ``keep`` exists, and anything else is refused before the run.

The load starts on the controller's clock at the agent's first tick plus ``load_start`` (on the testbed every
host reads one clock; elsewhere the hosts' clock offset to the controller shifts it, which ``ramp`` absorbs up to
its length). Its iperf3 ``-J`` output is kept in ``raw/`` and its own start and end go into the cell's complete
event. The probes' one-way delays (:mod:`labkit.analysis.oneway`) say in which direction the queue was.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from labkit.echo.plans import SeriesPlan, UploadFilePlan, UploadPlan, series_argv, upload_argv, upload_file_argv
from labkit.errors import LabkitError
from labkit.experiments.base import ExperimentSpec, Plan, json_lines, url_host
from labkit.experiments.order import arrange, record as record_order
from labkit.experiments.series import (SERIES_PROBES, IrttClient, ProbedServerRunner, SeriesConfig, over_timeout,
                                      ping_raw_text, ping_rows, require_irtt, sample_row)
from labkit.experiments.stacks import go_tools
from labkit.limits import MAX_DURATION_S, MAX_REPEATS, check_within
from labkit.parsers.iperf3 import LOAD_DIRECTIONS, iperf3_load_argv, parse_iperf3_json
from labkit.testbed import emulator
from labkit.testbed.lab import Testbed
from labkit.testbed.linkspec import parse_queue

EXPERIMENT = "latency-under-load"
#: The loads: iperf3's TCP flows, and the application's own, gRPC uploads from the client host (one stream after
#: another on one channel, the stack's client) for as long as the load runs.
LOADS = (*LOAD_DIRECTIONS, "grpc-up")
#: A gRPC upload's file (generated on the client host) and chunks: large enough that one upload outlasts a round
#: trip many times over, chunks as the upload experiment's middle size.
UPLOAD_LOAD_BYTES = 16 * 2**20
UPLOAD_LOAD_CHUNK = 64 * 2**10
PHASES = ("before", "ramp", "during", "after")
DEFAULT_UNDER_LOAD_PROBES = ("ping", "echo-warm", "tcp-echo")


def parse_queue_setting(text: str) -> dict[str, str] | None:
    """``keep`` -> None (the link as it is); ``10bdp`` -> droptail of that size; ``codel:10bdp`` -> CoDel over it.
    A bad one is one line naming it."""
    if text == "keep":
        return None
    aqm, _, size = text.rpartition(":")
    if aqm not in ("", "codel"):
        raise LabkitError(f"--queues: {text!r} is not a queue (examples: keep, bdp, 10bdp, codel:10bdp)")
    try:
        parse_queue(size)
    except LabkitError as exc:
        raise LabkitError(f"--queues: {text!r}: {exc.message.removeprefix('--queue: ')}") from None
    return {"queue": size, "aqm": "codel" if aqm else "droptail"}


@dataclass
class UnderLoadConfig(SeriesConfig):
    """A series' settings (its probes, interval, stack), each cell a timeline with a load in its middle."""

    ALLOWED_PROBES: ClassVar[tuple[str, ...]] = SERIES_PROBES  # the agent's, and irtt run beside it

    duration_s: float = 30.0
    interval_s: float = 0.1
    probes: list[str] = field(default_factory=lambda: list(DEFAULT_UNDER_LOAD_PROBES))
    load_start_s: float = 5.0
    load_s: float = 20.0
    ramp_s: float = 2.0
    loads: list[str] = field(default_factory=lambda: ["tcp-up"])
    queues: list[str] = field(default_factory=lambda: ["keep"])
    cc: list[str] = field(default_factory=lambda: ["cubic"])
    name: str = "under-load"

    def validate(self) -> None:
        self.cell_s = self.duration_s  # a cell is one whole timeline
        super().validate()
        if not self.agent_probes:
            raise LabkitError(f"--probes {','.join(self.probes)}: give an agent probe beside irtt (ping, echo-warm, "
                              "tcp-echo, ...): the agent's first tick starts each cell's timeline and its load")
        check_within("--load-start", self.load_start_s, 0, MAX_DURATION_S, "s")
        check_within("--load-for", self.load_s, None, MAX_DURATION_S, "s")
        if self.load_start_s + self.load_s > self.duration_s:
            raise LabkitError(f"the load (--load-start {self.load_start_s:g} s + --load-for {self.load_s:g} s) ends after "
                              f"the cell's --duration ({self.duration_s:g} s): give a longer --duration or a shorter load")
        if not 0 <= self.ramp_s < self.load_s:
            raise LabkitError(f"--ramp ({self.ramp_s:g} s) must be shorter than the load (--load-for {self.load_s:g} s)")
        if round(self.load_s) != self.load_s or self.load_s < 1:
            raise LabkitError(f"--load-for must be whole seconds (iperf3 -t), not {self.load_s:g} s")
        for name, values, allowed in (("--loads", self.loads, LOADS),):
            if not values or any(v not in allowed for v in values) or len(set(values)) != len(values):
                raise LabkitError(f"{name} must be distinct names from {','.join(allowed)}, not {','.join(values) or 'none'}")
        if not self.queues or len(set(self.queues)) != len(self.queues):
            raise LabkitError("--queues must be distinct queue settings (examples: keep, bdp, 10bdp, codel:10bdp)")
        for queue in self.queues:
            parse_queue_setting(queue)
        if not self.cc or len(set(self.cc)) != len(self.cc) or any(not c.replace("_", "").isalnum() for c in self.cc):
            raise LabkitError(f"--cc must be distinct congestion control names (e.g. cubic,bbr), not {','.join(self.cc)}")

    def phase(self, t_offset_s: float) -> str:
        """The phase of the load a probe sent ``t_offset_s`` after the cell's first tick belongs to (pure)."""
        if t_offset_s < self.load_start_s:
            return "before"
        if t_offset_s < self.load_start_s + self.ramp_s:
            return "ramp"
        return "during" if t_offset_s < self.load_start_s + self.load_s else "after"


@dataclass(frozen=True)
class Cell:
    src: str
    dst: str
    queue: str
    cc: str
    load: str

    @property
    def id(self) -> str:
        return f"{self.src}->{self.dst}|queue={self.queue}|cc={self.cc}|load={self.load}"

    @property
    def label(self) -> str:
        """A file-name-safe name for the cell."""
        return f"{self.queue.replace(':', '-')}-{self.cc}-{self.load}"

    def columns(self) -> dict[str, Any]:
        return {"queue": self.queue, "cc": self.cc, "load": self.load}


def plan_cells(config: UnderLoadConfig) -> list[Cell]:
    """Every queue × congestion control × load, in an order shuffled from the config's seed (``order="planned"``: queue
    by queue, as listed); gRPC uploads run on the hosts' own congestion control (a channel takes no -C), so once per
    queue, as ``default``. Each cell sets its own queue, so any order gives every cell the queue it names."""
    cells = [Cell(config.client, config.server, queue, "default" if load == "grpc-up" else cc, load)
             for queue in config.queues for cc in config.cc for load in config.loads]
    return arrange(list(dict.fromkeys(cells)), config.seed, config.order)


class _UnderLoad(ProbedServerRunner):
    """One echo server for the run; per cell the link's queue, one probe agent over the cell's timeline and one
    load in its middle."""

    def run_cells(self, cells: list[Cell]) -> None:
        config, session = self.config, self.session
        record_order(self.run, [cell.id for cell in cells], config.seed, config.order, probe_slots=config.probe_slots)
        todo = session.pending(cells, lambda cell: config.ticks * len(config.probes))
        if not todo:
            return
        self.address = session.address(config.server)
        self.server, self.ready = None, {}
        testbed = (getattr(session.inventory, "testbed", None) or {}).get("name")
        self.testbed = Testbed(testbed, log=self.progress.log) if testbed else None
        # The testbed's links as the run found them and every setting it gave them, in the manifest before the
        # emulator has each (`labkit runs cleanup` puts them back after a SIGKILL). Resuming: as the first attempt
        # found them, whatever a killed attempt left.
        recorded = self.run.manifest.get("testbed_links")
        links_before = recorded["before"] if recorded else None

        def remember(before: dict, after: dict) -> None:
            entry = self.run.manifest.setdefault("testbed_links", {"testbed": testbed, "before": before, "written": []})
            entry.pop("restored", None)
            if after not in entry["written"]:
                entry["written"].append(after)
            self.run.save_manifest()

        try:
            self.start_server()
            if "irtt" in config.probes:
                self.start_irtt_server()
            for cell in todo:
                session.check_stopping()
                queue = parse_queue_setting(cell.queue)
                if queue is not None:
                    changed = self.testbed.change_links({f"{config.client}>{config.server}": queue,
                                                         f"{config.server}>{config.client}": queue}, record=remember)
                    links_before = changed if links_before is None else links_before
                elif links_before is not None:  # keep: the link as the run found it, not as the last cell left it
                    self.put_links_back()
                self.with_one_restart(cell.label, lambda: self.run_cell(cell), self.restart_server)
        finally:
            if self.irtt_server is not None:
                session.stop(config.server, self.irtt_server)
            if self.server is not None:
                session.stop(config.server, self.server)
            if links_before is not None:
                self.put_links_back()

    def put_links_back(self) -> None:
        """The testbed's links as the run found them, from a setting the run gave them (someone else's change is
        left as it is, and the run fails saying so); marked restored in the manifest."""
        entry = self.run.manifest["testbed_links"]
        try:
            self.testbed.restore_links(entry["before"], own=entry["written"])
        except LabkitError:
            entry["restored"] = False
            self.run.save_manifest()
            raise
        entry["restored"] = True
        self.run.save_manifest()

    def run_cell(self, cell: Cell) -> None:
        config, run, session = self.config, self.run, self.session
        if cell.id in run.finished_cells():
            return
        attempt = run.begin_cell(cell.id)
        agent = SeriesPlan(address=self.address, grpc_port=self.ready["port"], tcp_echo_port=self.ready["tcp_echo_port"],
                           probes=config.probe_slots, first_tick=0, ticks=config.ticks, interval_s=config.interval_s,
                           payload_bytes=config.payload_bytes, timeout_s=config.timeout_s, spread=config.spread)
        fixed = {"run_id": run.run_id, "experiment": EXPERIMENT, "src": config.client, "dst": config.server,
                 "cell_id": cell.id, "attempt": attempt, **cell.columns()}
        load = _Load(self, cell, attempt)
        irtt = IrttClient(self, 0, config.ticks, cell.label) if "irtt" in config.probes else None
        rows, pings, t0_ns = 0, {}, time.time_ns()

        def append(new: list[dict[str, Any]]) -> None:
            nonlocal rows
            stamped = []
            for row in new:
                offset = row["seq"] * config.interval_s
                stamped.append({**fixed, **over_timeout(row, config.timeout_s), "t_offset_s": offset,
                                "phase": config.phase(offset)})
            run.append(stamped)
            rows += len(stamped)

        with session.agent(config.client, *series_argv(agent, config.stack().client_impl)) as proc, \
                self.stops_with(self.server, proc):
            try:
                for event in json_lines(proc, timeout=3 * config.timeout_s + config.interval_s + 60):
                    kind = event.get("event")
                    if kind == "start":
                        t0_ns = event["t0_utc_ns"]
                        if irtt is not None:
                            irtt.start()  # with the agent's first tick: irtt's intervals are the agent's ticks
                        load.start_at(t0_ns + int(config.load_start_s * 1e9))
                    elif kind == "sample":
                        append([sample_row(event)])
                        self.progress.advance()
                    elif kind == "ping":
                        pings[event["tick"]] = event
                        source = f"ping-{cell.label}-a{attempt}.txt"
                        run.write_raw(source, ping_raw_text(list(pings.values())))
                        append(ping_rows(event, source))
                        self.progress.advance()
                        self.progress.describe(f"{cell.label}: tick {event['tick'] + 1}/{config.ticks}")
                status = proc.wait()
                if irtt is not None and status == 0:
                    append(irtt.finish(attempt))
            except BaseException:
                load.cancel()  # Ctrl-C, a dead agent: the load stops with the cell, on both hosts
                raise
            finally:
                if irtt is not None:
                    irtt.stop()
        measured = load.finish()
        self.check_server(config.server, self.server, cell.label)
        if status != 0:
            raise LabkitError(f"the probe agent on {config.client} stopped during {cell.label}: {proc.last_words(status)}")
        testbed = getattr(session.inventory, "testbed", None)
        directions = [f"{config.client}>{config.server}", f"{config.server}>{config.client}"]
        link = link_during(testbed, load.window_ns, directions)
        if link:
            # What every packet of the cell waited in the link's queue, each direction: the queue behind each call
            # (labkit explain), kept with the run since the testbed's own record goes with the testbed.
            end_ns = time.time_ns()
            emulator.status_after(Path(testbed["state_dir"]), end_ns + 1_000_000_000)  # its last second written
            waits = emulator.queue_waits(Path(testbed["link_stats"]), t0_ns, end_ns, directions)
            text = "direction,t_ms,wait_us\n" + "".join(f"{d},{t},{w}\n" for d, t, w in waits)
            run.write_raw_gzip(f"queue-{cell.label}-a{attempt}.csv.gz", text)
        run.complete_cell(cell.id, attempt, rows, **measured, **({"link": link} if link else {}))


class _Load:
    """One cell's iperf3 load: its server on the server host, its client on the client host from a given moment
    for ``load_s``, both registered in the run (so Ctrl-C and `runs cleanup` stop them)."""

    def __init__(self, runner: _UnderLoad, cell: Cell, attempt: int):
        self.runner, self.cell, self.attempt = runner, cell, attempt
        self.thread: threading.Thread | None = None
        self.result: dict[str, Any] = {}
        self.error: BaseException | None = None
        self.window_ns: tuple[int, int] | None = None  # the load's own time, its ramp left out: the queue's full
        self.cancelled = threading.Event()
        self.client = None  # the iperf3 client once it runs

    def start_at(self, t_utc_ns: int) -> None:
        self.thread = threading.Thread(target=self._run, args=(t_utc_ns,), name="load", daemon=True)
        self.thread.start()

    def _run(self, t_utc_ns: int) -> None:
        if self.cell.load == "grpc-up":
            return self._uploads(t_utc_ns)
        runner, cell = self.runner, self.cell
        session, config = runner.session, runner.config
        try:
            server, port = session.iperf3_server(config.server, runner.address)
            try:
                if self.cancelled.wait(max(0.0, (t_utc_ns - time.time_ns()) / 1e9)):
                    return
                argv = iperf3_load_argv(runner.address, port, int(config.load_s), cell.load,
                                        None if cell.cc == "default" else cell.cc)
                started = time.time_ns()
                self.window_ns = (started + int(config.ramp_s * 1e9), started + int(config.load_s * 1e9))
                self.client = proc = session.start(config.client, argv)
                try:
                    if self.cancelled.is_set():  # cancelled while it started: cancel() may not have seen it
                        return
                    # iperf3 -J says nothing until its report at the end: silence for the whole load.
                    output = "\n".join(proc.lines(timeout=config.load_s + 60))
                    proc.wait()
                finally:
                    session.stop(config.client, proc)
                ended = time.time_ns()
            finally:
                session.stop(config.server, server)
            runner.run.write_raw(f"iperf3-{cell.label}-a{self.attempt}.json", output)
            self.result = {"load_started_s": (started - t_utc_ns) / 1e9 + config.load_start_s,
                           "load_ended_s": (ended - t_utc_ns) / 1e9 + config.load_start_s, **_load_figures(output)}
        except BaseException as exc:  # the agent's thread reports it once the timeline is over
            self.error = exc

    def _uploads(self, t_utc_ns: int) -> None:
        """The application's own load: the stack's upload agent sending a generated file over one gRPC channel, one
        upload after another, from ``t_utc_ns`` until the load's time is up (then stopped, mid-upload)."""
        runner, cell = self.runner, self.cell
        session, config = runner.session, runner.config
        try:
            path = f"{session.home(config.client)}/under-load-{UPLOAD_LOAD_BYTES}.bin"
            file = session.run_labkit(config.client, *upload_file_argv(UploadFilePlan(path, UPLOAD_LOAD_BYTES)))
            plan = UploadPlan(transport="grpc", target=f"{url_host(runner.address)}:{runner.ready['port']}",
                              file=file["path"], sha256=file["sha256"], chunk_size=UPLOAD_LOAD_CHUNK, repeats=MAX_REPEATS,
                              warmup=0, timeout_s=config.load_s + 60)
            if self.cancelled.wait(max(0.0, (t_utc_ns - time.time_ns()) / 1e9)):
                return
            started = time.time_ns()
            self.window_ns = (started + int(config.ramp_s * 1e9), started + int(config.load_s * 1e9))
            self.client = proc = session.start_labkit(config.client, *upload_argv(plan, config.stack().client_impl))
            try:
                self.cancelled.wait(config.load_s)
            finally:
                session.stop(config.client, proc)
            ended = time.time_ns()
            events = [json.loads(line) for line in proc.lines(timeout=10) if line.startswith("{")]
            done = [e for e in events if e.get("event") == "upload" and e.get("ok")]
            self.result = {"load_started_s": (started - t_utc_ns) / 1e9 + config.load_start_s,
                           "load_ended_s": (ended - t_utc_ns) / 1e9 + config.load_start_s, "load_error": None,
                           "load_uploads": len(done),
                           "load_sent_bps": len(done) * file["bytes"] * 8e9 / max(1, ended - started)}
            if not done and not self.cancelled.is_set():
                self.result["load_error"] = f"no upload finished in {config.load_s:g} s: {proc.last_words()}"
        except BaseException as exc:
            self.error = exc

    def cancel(self) -> None:
        """Stop the load now (its client, then, as its thread ends, its server) and wait for its thread."""
        self.cancelled.set()
        if self.client is not None:
            try:
                self.client.stop(grace_s=1.0)
            except Exception:
                pass  # its thread's own stop, or the session's, gets it
        if self.thread is not None:
            self.thread.join(timeout=30)

    def finish(self) -> dict[str, Any]:
        """Wait for the load to end; its figures for the cell's complete event. A load that could not run fails
        the cell: its probes measured an idle link."""
        if self.thread is None:
            raise LabkitError(f"{self.cell.label}: the probe agent never started, so the load did not either")
        self.thread.join()
        if self.error is not None:
            raise self.error if isinstance(self.error, LabkitError) else LabkitError(
                f"{self.cell.label}: the load failed: {self.error}")
        if self.result.get("load_error"):
            raise LabkitError(f"{self.cell.label}: iperf3's load failed: {self.result['load_error']}")
        return self.result


def _load_figures(output: str) -> dict[str, Any]:
    """What the cell's complete event keeps of iperf3's -J report: goodput each way, retransmits, its error."""
    try:
        summary = parse_iperf3_json(output).summary
    except LabkitError as exc:
        return {"load_error": str(exc)}
    return {"load_error": summary.get("error"), "load_sent_bps": summary.get("sent_bps"),
            "load_received_bps": summary.get("received_bps"), "load_retransmits": summary.get("retransmits"),
            "load_cc": summary.get("sender_tcp_congestion")}


def link_during(testbed: dict | None, window_ns: tuple[int, int] | None, directions: list[str]) -> dict | None:
    """On a testbed, each direction's queue as the emulator had it while the load ran: its limit and the time that
    limit takes to drain at the link's rate (what a full droptail queue adds to each packet), its AQM, and what the
    emulator saw (the queue's peak, drops by cause, its own lateness). None elsewhere."""
    if not testbed or not testbed.get("state_dir") or window_ns is None:
        return None
    state_dir = Path(testbed["state_dir"])
    emulator.status_after(state_dir, window_ns[1] + 1_000_000_000)  # the window's last second is written
    try:
        params = {f"{d['from']}>{d['to']}": d["params"]
                  for d in json.loads((state_dir / "link.json").read_text())["directions"]}
    except (OSError, ValueError, KeyError):
        return None
    seen = emulator.window_summary(state_dir / emulator.STATS_FILE, *window_ns,
                                   {key: p.get("delay_ns", 0) for key, p in params.items()})["directions"]
    link = {}
    for key in directions:
        p, s = params.get(key) or {}, seen.get(key) or {}
        rate = p.get("rate_bps") or 0
        link[key] = {"rate_bps": rate or None, "queue_bytes": p.get("queue_bytes"), "queue_packets": p.get("queue_packets"),
                     "aqm": p.get("aqm"), "drain_ms": p["queue_bytes"] * 8e3 / rate if rate and p.get("queue_bytes") else None,
                     "queue_peak_bytes": s.get("queue_peak_bytes"), "drops": s.get("drops"),
                     "lateness_p99_us": s.get("lateness_p99_us")}
    return link


def plan(config: UnderLoadConfig, inventory) -> Plan:
    cells = plan_cells(config)
    return Plan(cells, [config.client, config.server], total=len(cells) * config.ticks * len(config.probes),
                unit="sample", tools=go_tools([(config.client, config.server, config.stack())]))


def preflight(config: UnderLoadConfig, inventory, plan: Plan, accept_new_host_keys: bool) -> None:
    """Before the run: a queue other than ``keep`` needs a labkit testbed to set it on; irtt needs irtt on both
    hosts."""
    changing = [queue for queue in config.queues if queue != "keep"]
    if changing and not (getattr(inventory, "testbed", None) or {}).get("name"):
        raise LabkitError(f"--queues {changing[0]}: {config.client} and {config.server} are not a labkit testbed, whose "
                          "link emulator sets the queue; on other hosts give --queues keep (and set the bottleneck's "
                          "queue yourself)")
    require_irtt(config, inventory, accept_new_host_keys)


def summarize(run):
    """Per condition and probe: the median round trip before and during the load, what the load added with its
    interval, and round trips per minute under load."""
    from labkit.analysis.under_load import added_latency

    samples = run.samples()
    return added_latency(samples, shared_clock=_shared_clock(run))


def _shared_clock(run) -> bool:
    from labkit.analysis.oneway import share_a_clock

    config = run.manifest.get("config") or {}
    return share_a_clock(run.manifest, config.get("client"), config.get("server"))


SPEC = ExperimentSpec(
    command="latency-under-load", experiment=EXPERIMENT, config_type=UnderLoadConfig, plan=plan, runner=_UnderLoad,
    schema="UNDER_LOAD_SCHEMA", summarize=summarize, notebook="latency_under_load", preflight=preflight,
)

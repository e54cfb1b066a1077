"""``labkit series``: ping vs echo over time (research brief, experiment 2) between two hosts.

Every probe runs on one shared schedule (default 1 Hz) from the client host to
the server host's data address, for ``duration``:

- ``ping``: ICMP echo, one ``LC_ALL=C ping -D -n -c 1`` run per tick;
- ``echo-warm``: a gRPC ``Echo`` on one channel kept open for the whole run;
- ``echo-cold``: a gRPC ``Echo`` on a new channel per call (TCP and HTTP/2
  set-up included: what the 2016 Go client actually measured);
- ``tcp-echo``: the raw length-prefixed TCP echo on one open connection, the
  floor for an application-level round trip;
- ``tcp-connect`` (optional): the time to open a TCP connection.

One agent process on the client host (``labkit echo series-agent``, see
:mod:`labkit.echo.series_agent`) runs every probe and streams one JSON line per
result back over a single SSH channel; the controller here appends each as a
row of :data:`labkit.schemas.SERIES_SCHEMA` and parses each ping run's raw
output (kept under ``raw/``) with :func:`labkit.parsers.ping.parse_ping`.

Rows: one per probe per tick, plus one per duplicate ping reply. ``seq`` is
the tick (0-based, shared by every probe: rows with the same ``seq`` were sent
within the same interval); ``t_utc_ns`` is the UTC send time (for ping, the
``-D`` reply stamp minus the RTT; for a ping with no reply, when its run
started). A lost ping, a failed call and a tick skipped because the previous
call of that probe was still in flight are rows with ``ok=False`` and the
reason in ``error``: nothing goes missing silently. If the echo server dies,
its probes record errors and the series goes on to the end.

A **cell** is a chunk of consecutive ticks (``cell_s``, default 60 s); a cell
is complete when every probe has reported every one of its ticks. ``--resume``
redoes only the cells that are not complete, one agent per contiguous range.

The notebook of series runs is ``notebooks/series.py`` (registered in
:data:`labkit.report.NOTEBOOKS`; shipped samples ``data/samples/series-wan``
and ``series-lan``): per-probe tables with bootstrap intervals, the warm/cold
split and a second run compared. ``notebooks/ping_vs_echo.py`` stays the
notebook of *imported* 2016 logs (it re-reads them with the original regular
expressions) and refuses a series run.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from labkit.echo.options import OPTIONS
from labkit.echo.plans import DEFAULT_PROBES, PROBES, SeriesPlan, series_argv
from labkit.errors import LabkitError
from labkit.limits import (GRPC_DEFAULT_MESSAGE_BYTES, MAX_DURATION_S, MAX_SERIES_INTERVAL_S, MAX_SERIES_PAYLOAD_BYTES,
                           MAX_TICKS, check_within)
from labkit.experiments.base import ExperimentRunner, ExperimentSpec, Plan, json_lines
from labkit.experiments.stacks import Stack, StackChoice, go_tools, knob_keys, option_values, plan_stacks
from labkit.parsers.ping import parse_ping

EXPERIMENT = "series"
MIN_INTERVAL_S = 0.01  # the shortest time between a series' ticks


@dataclass
class SeriesConfig(StackChoice):
    """Everything that defines a series; stored in the manifest as the resolved config."""

    inventory: str
    client: str | None = None
    server: str | None = None
    duration_s: float = 60.0
    interval_s: float = 1.0
    probes: list[str] = field(default_factory=lambda: list(DEFAULT_PROBES))
    payload_bytes: int = 50
    name: str = "series"
    capture: bool = False  # --capture: tcpdump on client and server hosts (labkit.experiments.capture)
    cell_s: float = 60.0
    timeout_s: float = 5.0
    spread: bool = True

    def validate(self) -> None:
        if not (self.client and self.server):
            raise LabkitError("give --client and --server (host names from the inventory)")
        if self.client == self.server:
            raise LabkitError("client and server must be different hosts")
        check_within("--interval", self.interval_s, MIN_INTERVAL_S, MAX_SERIES_INTERVAL_S, "s")
        if self.duration_s < self.interval_s:
            raise LabkitError(f"--duration ({self.duration_s:g} s) must be at least one --interval ({self.interval_s:g} s)")
        if self.ticks > MAX_TICKS:
            raise LabkitError(f"{self.ticks} ticks is more than {MAX_TICKS}; use a longer --interval")
        if not self.probes or any(p not in PROBES for p in self.probes) or len(set(self.probes)) != len(self.probes):
            raise LabkitError(f"--probes must be distinct names from {','.join(PROBES)}, not {','.join(self.probes) or 'none'}")
        check_within("--payload-bytes", self.payload_bytes, 0, MAX_SERIES_PAYLOAD_BYTES)
        if self.cell_s < self.interval_s:
            raise LabkitError("--cell must be at least one --interval")
        check_within("--cell", self.cell_s, self.interval_s, MAX_DURATION_S, "s")
        check_within("--timeout", self.timeout_s, None, MAX_SERIES_INTERVAL_S, "s")
        self.stack()

    def stack(self) -> Stack:
        """The one gRPC stack of the series: its probes are compared tick by tick, so a run keeps one stack.

        ``--client-impl`` picks the agent (Python or Go), ``--server-impl`` and
        server ``--grpc-option`` values the server, one each; the agent's
        probes open channels of their own (warm, cold), so it takes no option.
        Run one series per stack to compare stacks.
        """
        if len(self.client_impl) != 1 or len(self.server_impl) != 1 or any("," in item for item in self.grpc_option):
            raise LabkitError("a series runs one stack: give one --client-impl, one --server-impl and one value per "
                              "--grpc-option (run one series per stack to compare them)")
        client_side = [key for knob in option_values(self.grpc_option) for key in knob_keys(knob)
                       if "server" not in OPTIONS[key].sides]
        if client_side:
            raise LabkitError(f"--grpc-option {client_side[0]} is a client option, and the series agent's probes open "
                              "channels of their own: give server options only")
        stacks, _ = plan_stacks(self.client_impl, self.server_impl, self.grpc_option)
        return stacks[0]

    @property
    def ticks(self) -> int:
        """Ticks in the whole series: ``duration / interval``, rounded."""
        return max(1, round(self.duration_s / self.interval_s))

    @property
    def cell_ticks(self) -> int:
        return max(1, round(self.cell_s / self.interval_s))


@dataclass(frozen=True)
class Cell:
    """Ticks ``first .. first + count - 1`` of the series."""

    src: str
    dst: str
    first: int
    count: int

    @property
    def id(self) -> str:
        return f"{self.src}->{self.dst}|ticks={self.first}-{self.first + self.count - 1}"

    @property
    def label(self) -> str:
        """A file-name-safe name for the cell."""
        return f"ticks{self.first:07d}-{self.first + self.count - 1:07d}"


def plan_cells(config: SeriesConfig) -> list[Cell]:
    step = config.cell_ticks
    return [Cell(config.client, config.server, first, min(step, config.ticks - first))
            for first in range(0, config.ticks, step)]


def contiguous_ranges(cells: list[Cell]) -> list[list[Cell]]:
    """Group cells (in tick order) into runs of consecutive ticks: one agent per group."""
    groups: list[list[Cell]] = []
    for cell in sorted(cells, key=lambda c: c.first):
        if groups and groups[-1][-1].first + groups[-1][-1].count == cell.first:
            groups[-1].append(cell)
        else:
            groups.append([cell])
    return groups


# -- rows -----------------------------------------------------------------------------------


def sample_row(event: dict[str, Any]) -> dict[str, Any]:
    """The series columns of one agent ``sample`` event (pure)."""
    rtt_ns = event.get("rtt_ns")
    return {
        "probe": event["probe"],
        "seq": event["tick"],
        "t_utc_ns": event["t_utc_ns"],
        "rtt_ms": rtt_ns / 1e6 if rtt_ns is not None else None,
        "server_ns": event.get("server_ns"),
        "server_recv_utc_ns": event.get("server_recv_utc_ns"),
        "server_send_utc_ns": event.get("server_send_utc_ns"),
        "ok": bool(event["ok"]),
        "error": event.get("error") or "",
        "cold": bool(event.get("cold")),
        "duplicate": False,
        "payload_bytes": event.get("payload_bytes"),
        "unit": "ns" if rtt_ns is not None else None,
        "source_file": None,
        "line_number": None,
    }


def ping_rows(event: dict[str, Any], source_file: str | None = None) -> list[dict[str, Any]]:
    """The series columns of one ping run (an agent ``ping`` event), parsed by :func:`parse_ping` (pure).

    One row for the probe (its reply, or ok=False with the reason) plus one
    per duplicate reply. A run that printed no probe at all (ping missing,
    no permission, a bad address) still gives one row: ok=False, with ping's
    exit status and last stderr line as the error.

    The reply's RTT is taken from the summary line when it can be: iputils
    prints ``time=`` with three significant digits (above 100 ms, whole
    milliseconds), while ``rtt min/avg/max`` of a one-reply run is that same
    reply in microseconds.
    """
    import pandas as pd

    tick, started = event["tick"], event["t_utc_ns"]
    result = parse_ping(event.get("stdout") or "")
    payload = result.summary.get("payload_bytes")
    precise = single_reply_rtt_ms(result)
    rows = []
    for r in result.rows.itertuples(index=False):
        rtt = None if math.isnan(r.rtt_ms) else float(r.rtt_ms)
        if precise is not None and r.ok and not r.duplicate:
            rtt = precise
        stamp = None if pd.isna(r.t_utc_ns) else int(r.t_utc_ns)
        if r.duplicate:
            error = "duplicate"
        elif r.ok:
            error = ""
        else:
            error = str(r.error) if r.error else "no reply"
        rows.append({
            "probe": "ping",
            "seq": tick,
            # -D stamps the reply line; the request left one RTT earlier.
            "t_utc_ns": stamp - round(rtt * 1e6) if stamp is not None and rtt is not None else started,
            "rtt_ms": rtt,
            "ok": bool(r.ok),
            "error": error,
            "cold": False,
            "duplicate": bool(r.duplicate),
            "payload_bytes": payload,
            "unit": "ms" if rtt is not None else None,
            "source_file": source_file,
            "line_number": None,
        })
    if not any(not row["duplicate"] for row in rows):
        stderr = [line for line in (event.get("stderr") or "").splitlines() if line.strip()]
        reason = stderr[-1].strip() if stderr else "no output"
        rows.append({
            "probe": "ping", "seq": tick, "t_utc_ns": started, "rtt_ms": None, "ok": False,
            "error": f"ping exited with status {event.get('status')}: {reason}", "cold": False, "duplicate": False,
            "payload_bytes": payload, "unit": None, "source_file": source_file, "line_number": None,
        })
    return rows


def single_reply_rtt_ms(result) -> float | None:
    """The µs-resolution RTT of a ping run with exactly one reply and no duplicate (pure): its summary line's min,
    when it agrees with the reply line's rounded time; None otherwise."""
    rows = result.rows
    replies = rows[rows["ok"] & ~rows["duplicate"]] if len(rows) else rows
    summary_min = result.summary.get("rtt_min_ms")
    if len(replies) != 1 or rows["duplicate"].any() or summary_min is None:
        return None
    printed = float(replies["rtt_ms"].iat[0])
    # time= keeps three significant digits: the two must agree to within its last digit's half.
    last_digit = 10.0 ** (math.floor(math.log10(printed)) - 2) if printed > 0 else 0.001
    return float(summary_min) if abs(float(summary_min) - printed) <= last_digit / 2 + 1e-9 else None


def over_timeout(row: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """A row whose reply came later than the run's timeout, as a failed probe that says so (pure).

    Every probe was meant to give up by then, yet not all can: ping waits whole seconds (-W), and a tool that
    times each step apart lets a call run over. Such a reply is not a sample of the round trip the run asked
    about (a link outage would pass for a slow link): ok is False, the time kept.
    """
    if not row["ok"] or row["rtt_ms"] is None or row["rtt_ms"] <= timeout_s * 1e3:
        return row
    return {**row, "ok": False, "error": f"slower than the timeout ({timeout_s * 1e3:g} ms): {row['rtt_ms']:.3f} ms"}


def ping_raw_text(events: list[dict[str, Any]]) -> str:
    """The raw output of a cell's ping runs, in tick order, each after a '# tick' line saying how it ran."""
    lines = ["# labkit series: one ping run per tick; each run's stdout follows its '# tick' line, "
             "its stderr (if any) is on '# stderr:' lines"]
    for event in sorted(events, key=lambda e: e["tick"]):
        lines.append(f"# tick {event['tick']}: t_utc_ns={event['t_utc_ns']} exit={event['status']} "
                     f"argv={json.dumps(event.get('argv'))}")
        lines += (event.get("stdout") or "").rstrip("\n").splitlines()
        lines += [f"# stderr: {line}" for line in (event.get("stderr") or "").rstrip("\n").splitlines()]
    return "\n".join(lines) + "\n"


# -- running ----------------------------------------------------------------------------------


class _CellState:
    def __init__(self, cell: Cell, attempt: int, probes: list[str]):
        self.cell = cell
        self.attempt = attempt
        self.seen = {probe: set() for probe in probes if probe != "ping"}
        self.pings: dict[int, dict[str, Any]] | None = {} if "ping" in probes else None
        self.rows = 0

    @property
    def complete(self) -> bool:
        ticks = set(range(self.cell.first, self.cell.first + self.cell.count))
        if any(seen != ticks for seen in self.seen.values()):
            return False
        return self.pings is None or set(self.pings) == ticks


class ProbedServerRunner(ExperimentRunner):
    """A runner whose probes (the series agent's) go to one echo server on ``config.server``, with its TCP echo, at
    ``self.address``: started once, restarted once when it dies (``with_one_restart``); recorded in the manifest's
    ``servers`` per attempt."""

    def start_server(self) -> None:
        config, run = self.config, self.run
        self.server, self.ready = self.session.start_echo_server(
            config.server, config.stack(), clients=(config.client,), tcp_echo_port=0,
            max_message_bytes=max(GRPC_DEFAULT_MESSAGE_BYTES, config.payload_bytes + 1024))
        run.manifest.setdefault("servers", {})[str(run.attempt)] = {"host": config.server, "address": self.address,
                                                                   **self.ready}
        run.save_manifest()

    def restart_server(self) -> None:
        server, self.server = self.server, None
        self.session.stop(self.config.server, server)
        self.start_server()


class _Series(ProbedServerRunner):
    """Runs the ticks of one series: one echo server, then one probe agent per contiguous range of cells."""

    def __init__(self, session, config: SeriesConfig):
        super().__init__(session, config)
        self.cells_done = 0

    def run_cells(self, cells: list[Cell]) -> None:
        config, run, session = self.config, self.run, self.session
        todo = session.pending(cells, lambda cell: cell.count * len(config.probes))
        if not todo:
            return
        self.address = session.address(config.server)
        self.server, self.ready = None, {}
        try:
            self.start_server()
            for group in contiguous_ranges(todo):
                session.check_stopping()
                label = f"ticks {group[0].first}–{group[-1].first + group[-1].count - 1}"
                self.with_one_restart(label, lambda: self.run_range(self.unfinished(group)), self.restart_server)
        finally:
            if self.server is not None:
                session.stop(config.server, self.server)

    def unfinished(self, cells: list[Cell]) -> list[Cell]:
        finished = self.run.finished_cells()
        return [cell for cell in cells if cell.id not in finished]

    def run_range(self, cells: list[Cell]) -> None:
        """One agent for a contiguous range of cells; each cell completes when every probe has every tick. A dead
        echo server stops the agent at its first failed call: cells not complete by then are left for a redo."""
        if not cells:
            return
        config, address, ready = self.config, self.address, self.ready
        agent = SeriesPlan(address=address, grpc_port=ready["port"], tcp_echo_port=ready["tcp_echo_port"],
                           probes=config.probes, first_tick=cells[0].first, ticks=sum(cell.count for cell in cells),
                           interval_s=config.interval_s, payload_bytes=config.payload_bytes,
                           timeout_s=config.timeout_s, spread=config.spread)
        recorder = _RangeRecorder(self.run, config, cells, server_alive=lambda: self.server.poll() is None,
                                  check_link=self.session.check_link)
        argv = series_argv(agent, config.stack().client_impl)
        with self.session.agent(config.client, *argv) as proc, self.stops_with(self.server, proc):
            # Silence longer than a call's deadline (twice: warm-up of two probes) plus a tick means the agent is stuck.
            for event in json_lines(proc, timeout=3 * config.timeout_s + config.interval_s + 60):
                self.handle(event, recorder)
                if event.get("event") == "sample" and not event.get("ok"):
                    self.check_server(config.server, self.server, f"tick {event['tick']}")
            status = proc.wait()
        missing = [cell for cell in cells if cell.id not in recorder.done]
        self.cells_done += len(cells) - len(missing)
        if missing:
            self.check_server(config.server, self.server, f"cells {missing[0].label}–{missing[-1].label}")
        if status != 0 or missing:
            raise LabkitError(f"the series agent on {config.client} stopped with {len(missing)} of {len(cells)} cells "
                              f"incomplete: {proc.last_words(status)}")

    def handle(self, event: dict[str, Any], recorder: "_RangeRecorder") -> None:
        kind = event.get("event")
        if kind == "start":
            self.run.manifest.setdefault("agents", []).append({k: v for k, v in event.items() if k != "event"})
            self.run.save_manifest()
            for probe, error in event.get("warmup", {}).items():
                if error:
                    self.progress.log(f"[yellow]{probe}: the unrecorded warm-up call failed: {error}[/yellow]")
        elif kind == "sample":
            recorder.sample(event)
            self.progress.advance()
        elif kind == "ping":
            recorder.ping(event)
            self.progress.advance()
            self.progress.describe(f"{self.config.client}→{self.config.server} tick {event['tick'] + 1}/{self.config.ticks}")


class _RangeRecorder:
    """Appends one agent's events to the run, cell by cell, and completes each cell once it has every tick."""

    def __init__(self, run, config: SeriesConfig, cells: list[Cell], server_alive: Callable[[], bool] = lambda: True,
                 check_link: Callable[[str], None] = lambda what: None):
        self.run = run
        self.config = config
        self.server_alive = server_alive
        self.check_link = check_link
        self.by_first = {cell.first: cell for cell in cells}
        self.states: dict[int, _CellState] = {}
        self.done: set[str] = set()
        self.fixed = {"run_id": run.run_id, "experiment": EXPERIMENT, "src": config.client, "dst": config.server}

    def state_of(self, tick: int) -> _CellState:
        cell = self.by_first[tick - tick % self.config.cell_ticks]
        if cell.first not in self.states:
            self.states[cell.first] = _CellState(cell, self.run.begin_cell(cell.id), self.config.probes)
        return self.states[cell.first]

    def append(self, state: _CellState, rows: list[dict[str, Any]]) -> None:
        self.run.append([{**self.fixed, "cell_id": state.cell.id, "attempt": state.attempt,
                          **over_timeout(row, self.config.timeout_s)} for row in rows])
        state.rows += len(rows)

    def sample(self, event: dict[str, Any]) -> None:
        state = self.state_of(event["tick"])
        self.append(state, [sample_row(event)])
        state.seen[event["probe"]].add(event["tick"])
        self.finish_if_complete(state)

    def ping(self, event: dict[str, Any]) -> None:
        """A ping run: its rows at once, and the cell's raw ping output so far, so an interrupted run keeps both."""
        state = self.state_of(event["tick"])
        state.pings[event["tick"]] = event
        source = f"ping-{state.cell.label}-a{state.attempt}.txt"
        self.run.write_raw(source, ping_raw_text(list(state.pings.values())))
        self.append(state, ping_rows(event, source))
        self.finish_if_complete(state)

    def finish_if_complete(self, state: _CellState) -> None:
        """Once a cell has every tick of every probe, it is complete: unless the echo server is gone, when its
        calls may have gone to nothing."""
        if not state.complete or state.cell.id in self.done or not self.server_alive():
            return
        self.check_link(state.cell.id)
        self.run.complete_cell(state.cell.id, state.attempt, state.rows)
        self.done.add(state.cell.id)


def plan(config: SeriesConfig, inventory) -> Plan:
    return Plan(plan_cells(config), [config.client, config.server], total=config.ticks * len(config.probes), unit="sample",
                tools=go_tools([(config.client, config.server, config.stack())]))


def summarize(run):
    """Per probe: samples, failures and the RTT distribution, with the median as a multiple of ping's."""
    from labkit.analysis.tables import summarize_series

    return summarize_series(run.samples())


def one_way_delays(run):
    """Per probe whose server stamped it (gRPC and TCP echo): the median way out and way back with intervals, and
    the clock offset they rest on (one clock when the two hosts share a kernel, else bounded by the probes)."""
    from labkit.analysis.oneway import clock_offset, one_way_summary, raw_one_way, share_a_clock

    config, samples = run.manifest.get("config") or {}, run.samples()
    offset = clock_offset(raw_one_way(samples), share_a_clock(run.manifest, config.get("client"), config.get("server")))
    return offset, one_way_summary(samples, offset)


SPEC = ExperimentSpec(
    command="series", experiment=EXPERIMENT, config_type=SeriesConfig, plan=plan, runner=_Series,
    schema="SERIES_SCHEMA", summarize=summarize, notebook="series",
)

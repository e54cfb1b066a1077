"""``labkit series``: ping vs echo over time (research brief, experiment 2) between two hosts.

Every probe runs on one shared schedule (default 1 Hz) from the client host to
the server host's data address, for ``duration``:

- ``ping``: ICMP echo, one ``LC_ALL=C ping -D -n -c 1`` run per tick;
- ``echo-warm``: a gRPC ``Echo`` on one channel kept open for the whole run;
- ``echo-cold``: a gRPC ``Echo`` on a new channel per call (TCP and HTTP/2
  set-up included: what the 2016 Go client actually measured);
- ``tcp-echo``: the raw length-prefixed TCP echo on one open connection, the
  floor for an application-level round trip;
- ``tcp-connect`` (optional): the time to open a TCP connection;
- ``irtt`` (optional): irtt's UDP round trips (Debian's ``irtt``), each split by
  direction by its own server's stamps, so labkit's one-way delays can be
  compared with irtt's on the same link.

One agent process on the client host (``labkit echo series-agent``, see
:mod:`labkit.echo.series_agent`) runs every probe but irtt and streams one JSON
line per result back over a single SSH channel; the controller here appends
each as a row of :data:`labkit.schemas.SERIES_SCHEMA` and parses each ping
run's raw output (kept under ``raw/``) with :func:`labkit.parsers.ping.parse_ping`.

irtt is the controller's own (:data:`CONTROLLER_PROBES`): ``irtt server`` on the
server host, bound to its data address and bounded to the series' interval,
length and packet size, for the whole run; and for each range of cells the agent
runs, one ``irtt client`` on the client host, started with the agent's ticks, a
packet every interval, its JSON kept in ``raw/`` and parsed with
:func:`labkit.parsers.irtt.parse_irtt`: the packet sent in the range's interval
``k`` is the row of tick ``first + k`` (irtt's seqno, unless its timer skipped an
interval: :func:`irtt_rows`). Both are registered like every process a run
starts, so they stop with it. A host without irtt is refused before the run
(:func:`preflight`).

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
from typing import Any, Callable, ClassVar

from concurrent.futures import ThreadPoolExecutor

from labkit.echo.options import OPTIONS
from labkit.echo.plans import DEFAULT_PROBES, PROBES, SeriesPlan, series_argv
from labkit.errors import LabkitError
from labkit.limits import (GRPC_DEFAULT_MESSAGE_BYTES, MAX_DURATION_S, MAX_IRTT_LENGTH, MAX_IRTT_ROUND_TRIPS,
                           MAX_SERIES_INTERVAL_S, MAX_SERIES_PAYLOAD_BYTES, MAX_TICKS, check_within)
from labkit.experiments.base import ExperimentRunner, ExperimentSpec, Plan, json_lines
from labkit.experiments.order import arrange, check_order, record as record_order
from labkit.experiments.stacks import Stack, StackChoice, go_tools, knob_keys, option_values, plan_stacks
from labkit.parsers.irtt import (irtt_client_argv, irtt_server_argv, irtt_version_argv, parse_irtt,
                                 parse_irtt_listening)
from labkit.parsers.ping import parse_ping

EXPERIMENT = "series"
MIN_INTERVAL_S = 0.01  # the shortest time between a series' ticks
#: The probes the controller runs itself, each with a tool of its own on both hosts, never through the agent.
CONTROLLER_PROBES = ("irtt",)
#: Every probe a series may have: the agent's (labkit.echo.plans.PROBES) and the controller's.
SERIES_PROBES = (*PROBES, *CONTROLLER_PROBES)
#: The packet length irtt's server allows beyond the series' payload: irtt's header with both stamps on both clocks
#: and the receive window is 60 bytes (0.9.0); room for an HMAC and fields of a later version.
IRTT_HEADER_ROOM = 128


@dataclass
class SeriesConfig(StackChoice):
    """Everything that defines a series; stored in the manifest as the resolved config."""

    #: The probes --probes may name: the agent's and the controller's own (irtt). An experiment that hands every
    #: probe to the agent (latency-under-load) names the agent's alone.
    ALLOWED_PROBES: ClassVar[tuple[str, ...]] = SERIES_PROBES

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
    # The agent's probes take their slots within a tick (with spread, probe i at i × interval / n) in an order shuffled
    # from the seed (labkit.experiments.order), so no probe always sends first after the tick; "planned": as listed.
    seed: int = 1
    order: str = "shuffled"

    def validate(self) -> None:
        if not (self.client and self.server):
            raise LabkitError("give --client and --server (host names from the inventory)")
        if self.client == self.server:
            raise LabkitError("client and server must be different hosts")
        check_order(self.order)
        check_within("--interval", self.interval_s, MIN_INTERVAL_S, MAX_SERIES_INTERVAL_S, "s")
        if self.duration_s < self.interval_s:
            raise LabkitError(f"--duration ({self.duration_s:g} s) must be at least one --interval ({self.interval_s:g} s)")
        if self.ticks > MAX_TICKS:
            raise LabkitError(f"{self.ticks} ticks is more than {MAX_TICKS}; use a longer --interval")
        if (not self.probes or any(p not in self.ALLOWED_PROBES for p in self.probes)
                or len(set(self.probes)) != len(self.probes)):
            raise LabkitError(f"--probes must be distinct names from {','.join(self.ALLOWED_PROBES)}, "
                              f"not {','.join(self.probes) or 'none'}")
        check_within("--payload-bytes", self.payload_bytes, 0, MAX_SERIES_PAYLOAD_BYTES)
        if "irtt" in self.probes:
            if self.ticks > MAX_IRTT_ROUND_TRIPS:
                raise LabkitError(f"--probes irtt: {self.ticks} ticks is more than one irtt run keeps "
                                  f"({MAX_IRTT_ROUND_TRIPS}: it writes every round trip when it ends); "
                                  "use a longer --interval or a shorter --duration")
            check_within("--payload-bytes (with irtt, its packet length)", self.payload_bytes, 0, MAX_IRTT_LENGTH)
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

    @property
    def agent_probes(self) -> list[str]:
        """The probes the series agent runs: all but the controller's own (irtt)."""
        return [probe for probe in self.probes if probe not in CONTROLLER_PROBES]

    @property
    def probe_slots(self) -> list[str]:
        """The agent's probes in the order they take their slots within a tick: shuffled from the seed, or as listed."""
        return arrange(self.agent_probes, self.seed, self.order)


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


#: The error of a tick irtt sent no packet in (its send loop skips an interval after a send more than half one late).
IRTT_SKIPPED = "not sent: irtt skipped this interval (its previous send was late)"


def irtt_rows(result, first_tick: int, ticks: int, interval_s: float,
              source_file: str | None = None) -> list[dict[str, Any]]:
    """The series columns of one irtt client run over ticks ``first_tick .. first_tick + ticks - 1`` (pure).

    ``result`` is :func:`parse_irtt`'s. The packet irtt sent in the run's interval ``k`` (its ``slot``: its seqno,
    unless irtt's send loop skipped an interval before it) is the row of tick ``first_tick + k``; a tick irtt sent
    nothing in is a row too, ``ok=False`` with :data:`IRTT_SKIPPED` and the time it was due, so every tick of the
    range has one. irtt aims no send past its duration: a last send late enough to round into the interval after it
    still belongs to the last one.
    """
    import pandas as pd

    def stamp(value) -> int | None:
        return None if pd.isna(value) else int(value)

    rows: dict[int, dict[str, Any]] = {}
    for r in result.rows.itertuples(index=False):
        slot = int(r.slot)
        if slot >= ticks and ticks - 1 not in rows:
            slot = ticks - 1
        if slot >= ticks:
            raise LabkitError(f"irtt sent packet {r.seq} in interval {slot}, after the last of its {ticks}")
        rows[slot] = {
            "probe": "irtt", "seq": first_tick + slot, "t_utc_ns": int(r.t_utc_ns),
            "rtt_ms": None if math.isnan(r.rtt_ms) else float(r.rtt_ms), "server_ns": None,
            "server_recv_utc_ns": stamp(r.server_recv_utc_ns), "server_send_utc_ns": stamp(r.server_send_utc_ns),
            "ok": bool(r.ok), "error": str(r.error), "cold": False, "duplicate": False,
            "payload_bytes": stamp(r.payload_bytes), "unit": None if pd.isna(r.unit) else str(r.unit),
            "source_file": source_file, "line_number": None,
        }
    if not rows:
        return []
    # When a skipped interval was due: the first packet's send, a whole number of intervals on.
    start_ns = min(row["t_utc_ns"] - (row["seq"] - first_tick) * round(interval_s * 1e9) for row in rows.values())
    payload = next(iter(rows.values()))["payload_bytes"]
    for slot in range(ticks):
        rows.setdefault(slot, {
            "probe": "irtt", "seq": first_tick + slot, "t_utc_ns": start_ns + slot * round(interval_s * 1e9),
            "rtt_ms": None, "server_ns": None, "server_recv_utc_ns": None, "server_send_utc_ns": None, "ok": False,
            "error": IRTT_SKIPPED, "cold": False, "duplicate": False, "payload_bytes": payload, "unit": None,
            "source_file": source_file, "line_number": None,
        })
    return [rows[slot] for slot in sorted(rows)]


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
    ``servers`` per attempt. With irtt among the probes, irtt's server beside it (``start_irtt_server``)."""

    irtt_server = None
    irtt_port: int | None = None

    def start_irtt_server(self) -> None:
        """irtt's server on the server host for the whole run, on its data address alone (a port the kernel picks),
        bounded to what the run asks of it: no test longer than its ticks (a series' whole, a latency-under-load
        cell's timeline), no interval shorter, no packet longer than its payload (with irtt's header), and a client
        silent for longer than 8 intervals dropped."""
        config, session = self.config, self.session
        argv = irtt_server_argv(self.address, 0, max_duration_s=config.ticks * config.interval_s + 1,
                                min_interval_s=config.interval_s,
                                max_length=max(config.payload_bytes, IRTT_HEADER_ROOM),
                                idle_timeout_s=max(60.0, 8 * config.interval_s))
        self.irtt_server = session.start(config.server, argv)
        line = self.irtt_server.wait_for_line(lambda text: parse_irtt_listening(text) is not None, timeout=30)
        self.irtt_port = parse_irtt_listening(line)[1]
        self.run.manifest.setdefault("irtt_servers", {})[str(self.run.attempt)] = {
            "host": config.server, "address": self.address, "port": self.irtt_port, "argv": argv}
        self.run.save_manifest()

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
    """Runs the ticks of one series: one echo server (and irtt's, with irtt), then one probe agent (and irtt client)
    per contiguous range of cells."""

    def __init__(self, session, config: SeriesConfig):
        super().__init__(session, config)
        self.cells_done = 0

    def run_cells(self, cells: list[Cell]) -> None:
        config, run, session = self.config, self.run, self.session
        # A series' cells are stretches of time, in time's order; what is shuffled is the probes' slots in a tick.
        record_order(run, [cell.id for cell in cells], config.seed, config.order, probe_slots=config.probe_slots)
        todo = session.pending(cells, lambda cell: cell.count * len(config.probes))
        if not todo:
            return
        self.address = session.address(config.server)
        self.server, self.ready = None, {}
        self.irtt_server, self.irtt_port = None, None
        try:
            if config.agent_probes:  # irtt alone needs no echo server
                self.start_server()
            if "irtt" in config.probes:
                self.start_irtt_server()
            for group in contiguous_ranges(todo):
                session.check_stopping()
                label = f"ticks {group[0].first}–{group[-1].first + group[-1].count - 1}"
                self.with_one_restart(label, lambda: self.run_range(self.unfinished(group)), self.restart_server)
        finally:
            if self.irtt_server is not None:
                session.stop(config.server, self.irtt_server)
            if self.server is not None:
                session.stop(config.server, self.server)

    def unfinished(self, cells: list[Cell]) -> list[Cell]:
        finished = self.run.finished_cells()
        return [cell for cell in cells if cell.id not in finished]

    def run_range(self, cells: list[Cell]) -> None:
        """One agent for a contiguous range of cells (and one irtt client beside it, with irtt); each cell completes
        when every probe has every tick. A dead echo server stops the agent at its first failed call: cells not
        complete by then are left for a redo."""
        if not cells:
            return
        config, address, ready = self.config, self.address, self.ready
        alive = [server for server in (self.server, self.irtt_server) if server is not None]
        recorder = _RangeRecorder(self.run, config, cells, server_alive=lambda: all(s.poll() is None for s in alive),
                                  check_link=self.session.check_link)
        first, ticks = cells[0].first, sum(cell.count for cell in cells)
        irtt = (IrttClient(self, first, ticks, f"ticks{first:07d}-{first + ticks - 1:07d}")
                if "irtt" in config.probes else None)
        status, proc = 0, None
        try:
            if config.agent_probes:
                agent = SeriesPlan(address=address, grpc_port=ready["port"], tcp_echo_port=ready["tcp_echo_port"],
                                   probes=config.probe_slots, first_tick=cells[0].first,
                                   ticks=sum(cell.count for cell in cells), interval_s=config.interval_s,
                                   payload_bytes=config.payload_bytes, timeout_s=config.timeout_s, spread=config.spread)
                argv = series_argv(agent, config.stack().client_impl)
                with self.session.agent(config.client, *argv) as proc, self.stops_with(self.server, proc):
                    # Silence longer than a call's deadline (twice: warm-up of two probes) plus a tick: stuck.
                    for event in json_lines(proc, timeout=3 * config.timeout_s + config.interval_s + 60):
                        if irtt is not None and event.get("event") == "start":
                            irtt.start()  # with the agent's first tick, so irtt's intervals are the agent's ticks
                        self.handle(event, recorder)
                        if event.get("event") == "sample" and not event.get("ok"):
                            self.check_server(config.server, self.server, f"tick {event['tick']}")
                    status = proc.wait()
            if irtt is not None and status == 0:
                irtt.start()  # at once when there is no agent (no-op once started)
                recorder.irtt(irtt.finish(recorder.state_of(first).attempt))
        finally:
            if irtt is not None:
                irtt.stop()
        missing = [cell for cell in cells if cell.id not in recorder.done]
        self.cells_done += len(cells) - len(missing)
        if missing and self.server is not None:
            self.check_server(config.server, self.server, f"cells {missing[0].label}–{missing[-1].label}")
        if missing and self.irtt_server is not None and self.irtt_server.poll() is not None:
            raise LabkitError(f"irtt's server on {config.server} exited ({self.irtt_server.last_words()}) during "
                              f"cells {missing[0].label}–{missing[-1].label}: they are left incomplete; "
                              f"`{self.resume_command()}` redoes them")
        if status != 0 or missing:
            who = f"the series agent on {config.client}" if proc is not None else f"irtt's client on {config.client}"
            why = proc.last_words(status) if proc is not None else "its round trips did not cover every tick"
            raise LabkitError(f"{who} stopped with {len(missing)} of {len(cells)} cells incomplete: {why}")

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


class IrttClient:
    """irtt's client for ``ticks`` ticks from ``first`` (a series' range of cells, a latency-under-load cell's
    timeline), on the client host, against the runner's irtt server: started with the first tick, a packet every
    interval; its JSON is kept in raw/ (``irtt-<label>-a<attempt>.json``) and becomes the ticks' irtt rows
    (:func:`irtt_rows`) once it ends."""

    def __init__(self, runner: ProbedServerRunner, first: int, ticks: int, label: str):
        self.runner, self.session, self.config = runner, runner.session, runner.config
        self.first, self.ticks, self.label = first, ticks, label
        self.proc = None
        config = self.config
        # Replies later than a call's deadline are no samples anyway (over_timeout): irtt waits that long for them.
        self.argv = irtt_client_argv(runner.address, runner.irtt_port, config.interval_s,
                                     self.ticks * config.interval_s, config.payload_bytes, wait_s=config.timeout_s)

    def start(self) -> None:
        if self.proc is None:
            self.proc = self.session.start(self.config.client, self.argv)

    def finish(self, attempt: int) -> list[dict[str, Any]]:
        """Wait for irtt to end (its ticks and its wait for the last replies), keep its JSON in raw/ (named after its
        label and the ``attempt`` of the cell it starts in) and return its rows. irtt writes nothing until it ends:
        silence past that is a stuck irtt, one line."""
        config, proc = self.config, self.proc
        run_s = self.ticks * config.interval_s + config.timeout_s + 60
        self.runner.progress.describe(f"{config.client}→{config.server} irtt's last replies")
        text = "\n".join(proc.lines(timeout=run_s)) + "\n"
        status = proc.wait(timeout=30)
        self.stop()
        source = f"irtt-{self.label}-a{attempt}.json"
        self.runner.run.write_raw(source, text)
        if status != 0:
            raise LabkitError(f"irtt's client on {config.client} exited with status {status}: "
                              f"{proc.last_words(status)}")
        rows = irtt_rows(parse_irtt(text), self.first, self.ticks, config.interval_s, source)
        self.runner.progress.advance(len(rows))
        return rows

    def stop(self) -> None:
        """Stop (and unregister) the client, if it was started and not stopped yet."""
        proc, self.proc = self.proc, None
        if proc is not None:
            self.session.stop(self.config.client, proc)


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

    def irtt(self, rows: list[dict[str, Any]]) -> None:
        """An irtt client run's rows (one per tick of its range), cell by cell."""
        by_cell: dict[int, list[dict[str, Any]]] = {}
        for row in rows:
            by_cell.setdefault(self.state_of(row["seq"]).cell.first, []).append(row)
        for first, cell_rows in sorted(by_cell.items()):
            state = self.states[first]
            self.append(state, cell_rows)
            state.seen["irtt"].update(row["seq"] for row in cell_rows)
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


def preflight(config: SeriesConfig, inventory, plan: Plan, accept_new_host_keys: bool = False) -> None:
    """With irtt among the probes: refuse the series before it exists, in one line, when the client or the server
    host lacks irtt (its client runs on one, its server on the other; Debian's package, not a tool labkit sends)."""
    require_irtt(config, inventory, accept_new_host_keys)


def require_irtt(config: SeriesConfig, inventory, accept_new_host_keys: bool = False) -> None:
    """With irtt among ``config``'s probes, refuse in one line when the client or the server host lacks it."""
    if "irtt" not in config.probes:
        return
    hosts = [config.client, config.server]

    def has_irtt(name: str) -> bool:
        with inventory.open(name, accept_new_host_keys=accept_new_host_keys) as host:
            try:
                return host.run(irtt_version_argv(), timeout=30).ok
            except LabkitError:  # not installed: the host could not start it
                return False

    with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
        missing = [name for name, found in zip(hosts, pool.map(has_irtt, hosts)) if not found]
    if missing:
        raise LabkitError(f"--probes irtt needs irtt on the client and the server host: it is not on "
                          f"{' nor '.join(missing)}; install Debian's irtt there (`apt-get install irtt`) "
                          "(nothing was run)")


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
    schema="SERIES_SCHEMA", summarize=summarize, notebook="series", preflight=preflight,
)

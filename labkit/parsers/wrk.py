"""wrk (the HTTP/1.1 load generator of the cost-of-a-call post): its ``--latency`` text report.

:func:`parse_wrk` reads what wrk prints, the report the published figures
came from, and ``summary`` holds it in milliseconds, bytes and seconds:

- ``url``, ``threads``, ``connections``, ``planned_s`` (the ``Running 10s
  test`` line);
- ``latency_ms`` (``mean``, ``stdev``, ``max``, ``within_stdev_pct``) and
  ``thread_rps`` (``mean``, ``stdev``, ``max``, ``within_stdev_pct``): the
  Thread Stats table;
- ``percentiles_ms``: {50, 75, 90, 99} from ``--latency``'s Latency
  Distribution;
- ``requests``, ``duration_s``, ``bytes_read`` (the ``N requests in Ts, X
  read`` line; wrk's units are binary, MB = MiB, and rounded to 2 decimals),
  ``rps`` (Requests/sec), ``transfer_bytes_per_s``;
- ``errors``: ``connect``, ``read``, ``write``, ``timeout`` (Socket errors)
  and ``status`` (Non-2xx or 3xx responses); zero when wrk printed no such line.

wrk rounds all of that, and its report keeps no per-request record. With
:data:`WRK_SCRIPT` (``wrk -s``), wrk's ``done()`` also prints ``labkit-wrk``
lines with the exact numbers of the same run (``summary['exact']``: duration
µs, requests, bytes, every error count, min/max/mean/stdev µs) and its latency
percentiles at every 0.1 % (plus 99.95, 99.99 and 99.999), read from wrk's
own histogram with microsecond resolution; they become ``rows``, one per
percentile in increasing order (``percent``, ``latency_ms``): the latency CDF
of the run. wrk answers 0 for its 100th percentile (its walk runs past the
last bucket), so 100 % is taken from the exact maximum.

What wrk does not tell apart: its latencies include the requests answered
with an error status (a 502 from a relay that failed is timed like a 200),
and ``Requests/sec`` counts them too.
"""

from __future__ import annotations

import re

from labkit.parsers.base import LineTally, ParseError, ParseResult

#: The percentiles labkit's script prints (every 0.1 % and the far tail), in increasing order.
SCRIPT_PERCENTILES = tuple(sorted([round(i / 10, 1) for i in range(1, 1001)] + [99.95, 99.99, 99.999]))

#: The Lua script labkit runs wrk with: after wrk's own report, the same run's numbers unrounded.
#: (wrk's stats object indexes by position, not by latency value, so the histogram cannot be read
#: bucket by bucket from Lua; percentile() walks it exactly, which is what these lines use.)
WRK_SCRIPT = """\
-- labkit hop: print wrk's own numbers of this run unrounded, for labkit.parsers.wrk.
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("labkit-wrk summary duration_us=%d requests=%d bytes=%d connect=%d read=%d write=%d status=%d timeout=%d\\n",
    summary.duration, summary.requests, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout))
  io.write(string.format("labkit-wrk latency_us min=%d max=%d mean=%.3f stdev=%.3f\\n",
    latency.min, latency.max, latency.mean, latency.stdev))
  local parts = {}
  for i = 1, 1000 do
    parts[#parts + 1] = string.format("%.1f=%d", i / 10, latency:percentile(i / 10))
  end
  for _, p in ipairs({99.95, 99.99, 99.999}) do
    parts[#parts + 1] = string.format("%g=%d", p, latency:percentile(p))
  end
  io.write("labkit-wrk percentiles_us " .. table.concat(parts, " ") .. "\\n")
end
"""


def wrk_argv(wrk: str, url: str, *, threads: int, connections: int, seconds: int, timeout_s: float,
             script: str | None = None) -> list[str]:
    """wrk with ``--latency`` against ``url`` for ``seconds`` (wrk takes whole seconds), with labkit's script when given."""
    argv = [wrk, "-t", str(threads), "-c", str(connections), "-d", f"{int(seconds)}s",
            "--timeout", f"{max(1, round(timeout_s))}s", "--latency"]
    if script:
        argv += ["-s", script]
    return [*argv, url]


_TIME_UNITS_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
_METRIC = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_BINARY = {"B": 1, "KB": 2**10, "MB": 2**20, "GB": 2**30, "TB": 2**40}
_NUM = r"(-?\d+(?:\.\d+)?|-?nan|-?inf)"
_TIME = rf"{_NUM}(us|ms|s|m|h)"

_RUNNING = re.compile(r"^Running (\d+(?:\.\d+)?)(s|m|h) test @ (\S+)$")
_THREADS = re.compile(r"^(\d+) threads and (\d+) connections$")
_HEADER = re.compile(r"^Thread Stats\s+Avg\s+Stdev\s+Max\s+\+/- Stdev$")
_LATENCY = re.compile(rf"^Latency\s+{_TIME}\s+{_TIME}\s+{_TIME}\s+{_NUM}%$")
_REQ_SEC = re.compile(rf"^Req/Sec\s+{_NUM}([kMGT]?)\s+{_NUM}([kMGT]?)\s+{_NUM}([kMGT]?)\s+{_NUM}%$")
_DISTRIBUTION = re.compile(r"^Latency Distribution$")
_PERCENTILE = re.compile(rf"^(50|75|90|99)%\s+{_TIME}$")
_TOTALS = re.compile(rf"^(\d+) requests in {_TIME}, {_NUM}(B|KB|MB|GB|TB) read$")
_SOCKET = re.compile(r"^Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)$")
_NON_2XX = re.compile(r"^Non-2xx or 3xx responses: (\d+)$")
_RPS = re.compile(rf"^Requests/sec:\s+{_NUM}$")
_TRANSFER = re.compile(rf"^Transfer/sec:\s+{_NUM}(B|KB|MB|GB|TB)$")
_SCRIPT_LINE = re.compile(r"^labkit-wrk (summary|latency_us|percentiles_us) (.*)$")


def _ms(number: str, unit: str) -> float:
    return float(number) * _TIME_UNITS_MS[unit]


def _stat_row(match: re.Match, convert) -> dict[str, float]:
    values = [convert(match.group(1 + 2 * i), match.group(2 + 2 * i)) for i in range(3)]
    return {**dict(zip(("mean", "stdev", "max"), values)), "within_stdev_pct": float(match.group(7))}


def _read_line(line: str, summary: dict) -> bool:
    """Put what one line of wrk's report says into ``summary``; False when it is no line wrk prints."""
    if match := _RUNNING.match(line):
        summary.update(planned_s=_ms(match.group(1), match.group(2)) / 1e3, url=match.group(3))
    elif match := _THREADS.match(line):
        summary.update(threads=int(match.group(1)), connections=int(match.group(2)))
    elif match := _LATENCY.match(line):
        summary["latency_ms"] = _stat_row(match, _ms)
    elif match := _REQ_SEC.match(line):
        summary["thread_rps"] = _stat_row(match, lambda number, unit: float(number) * _METRIC[unit])
    elif match := _PERCENTILE.match(line):
        summary.setdefault("percentiles_ms", {})[int(match.group(1))] = _ms(match.group(2), match.group(3))
    elif match := _TOTALS.match(line):
        summary.update(requests=int(match.group(1)), duration_s=_ms(match.group(2), match.group(3)) / 1e3,
                       bytes_read=float(match.group(4)) * _BINARY[match.group(5)])
    elif match := _SOCKET.match(line):
        summary["errors"].update(zip(("connect", "read", "write", "timeout"), map(int, match.groups())))
    elif match := _NON_2XX.match(line):
        summary["errors"]["status"] = int(match.group(1))
    elif match := _RPS.match(line):
        summary["rps"] = float(match.group(1))
    elif match := _TRANSFER.match(line):
        summary["transfer_bytes_per_s"] = float(match.group(1)) * _BINARY[match.group(2)]
    elif match := _SCRIPT_LINE.match(line):
        _read_script_line(match.group(1), match.group(2), summary)
    else:
        return bool(_HEADER.match(line) or _DISTRIBUTION.match(line))
    return True


def _read_script_line(kind: str, text: str, summary: dict) -> None:
    """A ``labkit-wrk`` line of :data:`WRK_SCRIPT`: ``key=value`` pairs."""
    pairs = dict(item.split("=", 1) for item in text.split())
    if kind == "percentiles_us":
        summary["script_percentiles_us"] = {float(key): int(value) for key, value in pairs.items()}
    else:
        exact = summary.setdefault("exact", {})
        if kind == "summary":
            exact.update({key: int(value) for key, value in pairs.items()})
        else:
            exact.update({f"latency_{key}_us": float(value) for key, value in pairs.items()})


def parse_wrk(text: str) -> ParseResult:
    """Parse wrk's report (``--latency``, with or without :data:`WRK_SCRIPT`'s lines); see the module docstring."""
    import pandas as pd

    tally = LineTally()
    summary: dict = {"errors": {"connect": 0, "read": 0, "write": 0, "timeout": 0, "status": 0}}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = tally.prepare(raw)
        if line is None:
            continue
        if _read_line(line, summary):
            tally.recognised()
        else:
            tally.unknown(number, raw)
    if "requests" not in summary or "rps" not in summary:
        raise ParseError("not wrk output: no 'N requests in' and 'Requests/sec:' lines (did wrk start?)")
    percentiles = summary.pop("script_percentiles_us", {})
    if 100.0 in percentiles and "latency_max_us" in summary.get("exact", {}):
        # wrk's percentile(100) walks past its last bucket and answers 0; 100 % is the maximum.
        percentiles[100.0] = int(summary["exact"]["latency_max_us"])
    percentiles = dict(sorted(percentiles.items()))
    rows = pd.DataFrame({"percent": pd.Series(list(percentiles), dtype="float64"),
                         "latency_ms": pd.Series(list(percentiles.values()), dtype="float64") / 1e3})
    counts = {**tally.counts(), "requests": summary["requests"], "errors": sum(summary["errors"].values()),
              "percentiles": len(rows)}
    return ParseResult(rows=rows, counts=counts, summary=summary, unrecognised_lines=tally.unrecognised)

"""ghz ``--format json`` reports (gRPC load tests).

ghz writes every duration in integer nanoseconds. Rows are the per-call
``details`` when present: ``t_utc`` (call start), ``latency_ms``, ``status``
(gRPC code name, ``OK`` on success), ``error`` (text, empty on success) and
``ok``. Without details the rows are empty and ``summary`` still has the
aggregates.

``summary``: ``count``, ``total_ms``, ``average_ms``, ``fastest_ms``,
``slowest_ms``, ``rps``, ``end_reason``, ``date``, ``percentiles_ms``
(``{10: ..., 25: ..., 50: ..., ...}``, empty when every call failed),
``status_codes`` and ``errors`` (ghz's distributions, as dicts), ``options``
(call, host, concurrency, connections, total, ...).
"""

from __future__ import annotations

import json
from typing import Any


from labkit.parsers.base import ParseError, ParseResult

_NS_PER_MS = 1e6


def ms_arg(seconds: float) -> str:
    """A duration as whole milliseconds, a unit both ghz and h2load accept (h2load takes no fractions)."""
    return f"{max(1, round(seconds * 1000))}ms"


def ghz_argv(ghz: str, target: str, *, call: str, protoset: str, data_file: str, concurrency: int, connections: int,
             seconds: float, call_timeout_s: float, out: str, keepalive_ms: int | None = None,
             stream_messages: int | None = None, gzip: bool = False) -> list[str]:
    """ghz against ``target`` (HOST:PORT) for ``seconds``, the service read from a compiled ``protoset``.

    The JSON report (with every call's details, which the measured-window
    statistics need) goes to ``out``. ``stream_messages``: ``call`` is a
    bidirectional stream, and each call sends that many messages (ghz
    ``--stream-call-count``) back to back, then closes; the call's latency
    is the whole stream's. ``gzip``: every request is gzip-compressed (ghz
    ``--enable-compression``).
    """
    argv = [
        ghz, "--insecure", "--protoset", protoset, "--call", call, "-D", data_file, "-c", str(concurrency),
        "--connections", str(connections), "-z", ms_arg(seconds),
        # In-flight calls at the end are dropped, not reported as errors.
        "--duration-stop", "ignore", "-t", ms_arg(call_timeout_s), "--connect-timeout", "5s",
        "--format", "json", "-o", out,
    ]
    if keepalive_ms is not None:
        argv += ["--keepalive", f"{keepalive_ms}ms"]
    if stream_messages is not None:
        argv += ["--stream-call-count", str(stream_messages)]
    if gzip:
        argv.append("--enable-compression")
    return [*argv, target]


def _ms(value: Any) -> float | None:
    return None if value is None else value / _NS_PER_MS


def parse_ghz_json(text: str) -> ParseResult:
    """Parse one ghz JSON report into per-call rows and the report's aggregates."""
    import pandas as pd

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"not ghz JSON: invalid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or "count" not in data or "statusCodeDistribution" not in data:
        raise ParseError("not ghz JSON: no 'count' or 'statusCodeDistribution'")

    details = data.get("details") or []
    frame = pd.DataFrame(
        {
            "t_utc": pd.to_datetime([d.get("timestamp") for d in details], utc=True, format="ISO8601"),
            "latency_ms": [_ms(d.get("latency")) for d in details],
            "status": [d.get("status") or "" for d in details],
            "error": [d.get("error") or "" for d in details],
        }
    )
    frame["ok"] = frame["status"].eq("OK") & frame["error"].eq("")
    frame = frame.astype({"latency_ms": "float64", "status": "string", "error": "string", "ok": "bool"})

    percentiles = {
        int(p["percentage"]) if float(p["percentage"]).is_integer() else float(p["percentage"]): _ms(p["latency"])
        for p in data.get("latencyDistribution") or []
    }
    status_codes = dict(data.get("statusCodeDistribution") or {})
    errors = dict(data.get("errorDistribution") or {})
    options = data.get("options") or {}
    summary = {
        "count": data.get("count"),
        "total_ms": _ms(data.get("total")),
        "average_ms": _ms(data.get("average")),
        "fastest_ms": _ms(data.get("fastest")),
        "slowest_ms": _ms(data.get("slowest")),
        "rps": data.get("rps"),
        "end_reason": data.get("endReason"),
        "date": data.get("date"),
        "percentiles_ms": percentiles,
        "status_codes": status_codes,
        "errors": errors,
        "options": {k: options.get(k) for k in ("call", "host", "concurrency", "connections", "total", "rps", "duration", "timeout") if k in options},
    }
    counts = {
        "lines": len(text.splitlines()),
        "calls": int(data.get("count") or 0),
        "details": len(details),
        "ok": int(status_codes.get("OK", 0)),
        "failed": int(sum(n for code, n in status_codes.items() if code != "OK")),
        "error_kinds": len(errors),
    }
    return ParseResult(rows=frame, counts=counts, summary=summary)

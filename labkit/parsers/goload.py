"""``labkit-go load``: the closed-loop HTTP load of ``labkit hop --tool labkit-go``, one CSV row per request.

Each of its connections sends its next GET as soon as the last is answered (as
wrk's do), and every request is timed on its own, from its send to the last
byte of its body: no correction, no synthetic samples, so req/s × mean latency
÷ connections (Little's law) comes out near 1. The CSV has a header line (the
columns of ``go/internal/hop`` ``LoadColumns``)::

    t_ns,connection,status,latency_ns,bytes_in,error
    1795890411123456789,3,200,1834211,257,

``t_ns`` is the send (ns since the epoch), ``status`` 0 when no response came,
``error`` empty unless the request failed (a body other than the back's is one).

:func:`parse_goload_csv` gives one row per request: ``t_utc``, ``connection``,
``status``, ``latency_ms``, ``bytes_in``, ``error`` and ``ok`` (no error).
"""

from __future__ import annotations

from labkit.parsers.base import ParseResult, csv_records

HEADER = ["t_ns", "connection", "status", "latency_ns", "bytes_in", "error"]


def goload_argv(labkit_go: str, url: str, *, connections: int, seconds: float, timeout_s: float,
                body_sha256: str | None, out: str) -> list[str]:
    """labkit-go's closed loop of ``connections`` on ``url`` for ``seconds``, its CSV in ``out``."""
    argv = [labkit_go, "load", "-url", url, "-connections", str(connections), "-duration", f"{seconds:g}s",
            "-timeout", f"{timeout_s:g}s", "-out", out]
    return argv + (["-body-sha256", body_sha256] if body_sha256 else [])


def _record(row: list[str]) -> tuple | None:
    try:
        return int(row[0]), int(row[1]), int(row[2]), int(row[3]), int(row[4]), row[5]
    except ValueError:
        return None


def parse_goload_csv(text: str) -> ParseResult:
    """Parse ``labkit-go load``'s CSV; see the module docstring."""
    import pandas as pd

    records, tally = csv_records(text, HEADER, _record, "labkit-go load")
    frame = pd.DataFrame.from_records(records, columns=HEADER).astype(
        {"t_ns": "int64", "connection": "int64", "status": "int64", "latency_ns": "int64", "bytes_in": "int64"})
    frame.insert(0, "t_utc", pd.to_datetime(frame.pop("t_ns"), unit="ns", utc=True))
    frame["latency_ms"] = frame.pop("latency_ns") / 1e6
    frame["ok"] = frame["error"] == ""
    counts = {**tally.counts(), "requests": len(frame), "ok": int(frame["ok"].sum()),
              "no_response": int((frame["status"] == 0).sum())}
    return ParseResult(rows=frame, counts=counts, unrecognised_lines=tally.unrecognised)

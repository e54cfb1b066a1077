"""vegeta (open-loop HTTP load at a fixed rate): its per-request results, encoded as CSV.

``vegeta attack`` sends requests at the rate asked whatever the answers do
(a new worker for every request that would otherwise wait), so a slow
server shows as longer latencies and not as fewer requests: the coordinated
omission a closed loop such as wrk's hides. It writes binary results;
``vegeta encode --to csv`` turns them into one line per request, with no
header, in the columns its own help lists:

    timestamp (ns since the epoch), HTTP status (0: no response), latency (ns),
    bytes out, bytes in, error, base64 body, attack name, sequence number,
    method, URL, base64 headers

:func:`parse_vegeta_csv` gives one row per request: ``t_utc``, ``seq``,
``status``, ``latency_ms``, ``bytes_in``, ``error`` (empty when none),
``body_sha256`` (of the response body vegeta kept, so that every answer can be
checked against the back's) and ``ok`` (a 2xx response with no error).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io

from labkit.parsers.base import LineTally, ParseError, ParseResult
from labkit.parsers.ghz import ms_arg

_COLUMNS = 12


def vegeta_attack_argv(vegeta: str, targets_file: str, *, rate: int, seconds: float, timeout_s: float,
                       out: str, workers: int | None = None) -> list[str]:
    """vegeta at ``rate`` requests per second for ``seconds`` on the targets in ``targets_file``; binary results in ``out``.

    ``rate`` 0 with ``workers``: a closed loop instead, vegeta's "as fast as possible" with exactly that many
    workers, each sending its next request when its last one is answered (as wrk's connections do), every request
    timed as it happened and kept.
    """
    if rate == 0:
        if not workers:
            raise ValueError("a closed loop (rate 0) needs its number of workers")
        pace = ["-rate", "0", "-workers", str(workers), "-max-workers", str(workers)]
    else:
        pace = ["-rate", f"{int(rate)}/1s"]
    return [vegeta, "attack", "-targets", targets_file, *pace, "-duration", ms_arg(seconds), "-timeout",
            ms_arg(timeout_s), "-output", out]


def vegeta_encode_argv(vegeta: str, results: str, out: str) -> list[str]:
    """vegeta's binary ``results`` as CSV in ``out``."""
    return [vegeta, "encode", "--to", "csv", "--output", out, results]


def parse_vegeta_csv(text: str) -> ParseResult:
    """Parse ``vegeta encode --to csv`` output; see the module docstring."""
    import pandas as pd

    tally = LineTally()
    records: list[tuple] = []
    # A field may hold a quoted error text; the csv module reads each physical line on its own here
    # because vegeta's errors hold no newline.
    for number, raw in enumerate(text.splitlines(), start=1):
        line = tally.prepare(raw)
        if line is None:
            continue
        try:
            fields = next(csv.reader(io.StringIO(line)))
            record = (int(fields[0]), int(fields[8]), int(fields[1]), int(fields[2]), int(fields[4]), fields[5],
                      hashlib.sha256(base64.b64decode(fields[6])).hexdigest() if fields[6] else None)
        except (ValueError, IndexError, StopIteration, csv.Error):
            record = None
        if record is None or len(fields) != _COLUMNS:
            tally.unknown(number, raw)
            continue
        records.append(record)
        tally.recognised()
    if not records and tally.unrecognised:
        raise ParseError("not vegeta's CSV encoding: no line of 12 columns starting with a timestamp in ns")
    columns = ["t_ns", "seq", "status", "latency_ns", "bytes_in", "error", "body_sha256"]
    frame = pd.DataFrame.from_records(records, columns=columns).astype(
        {"t_ns": "int64", "seq": "int64", "status": "int64", "latency_ns": "int64", "bytes_in": "int64"})
    frame.insert(0, "t_utc", pd.to_datetime(frame["t_ns"], unit="ns", utc=True))
    frame["latency_ms"] = frame.pop("latency_ns") / 1e6
    frame["ok"] = frame["status"].between(200, 299) & (frame["error"] == "")
    counts = {**tally.counts(), "requests": len(frame), "ok": int(frame["ok"].sum()),
              "no_response": int((frame["status"] == 0).sum())}
    return ParseResult(rows=frame.drop(columns="t_ns"), counts=counts, unrecognised_lines=tally.unrecognised)

"""ping's text output: Linux iputils (with or without ``-D`` and ``-O``), busybox, GNU inetutils and macOS/BSD.

Every probe the run sent becomes one row, and every extra reply one more row:

- a reply is a row with ``ok=True`` and its ``rtt_ms``;
- a further reply to the same ``icmp_seq`` (iputils' ``DUP!``, or any repeat)
  is a row with ``duplicate=True``; it is not a second sample of that probe;
- a probe with no reply is a row with ``ok=False`` and ``rtt_ms`` NaN. It is
  found from ``no answer yet`` (iputils ``-O``), ``Request timeout`` (macOS),
  ICMP errors such as ``Destination Host Unreachable``, or simply a gap in
  ``icmp_seq``; with the closing statistics, losses at the end are found too
  (the count transmitted fixes the range of sequence numbers);
- a reply that arrives after ping already reported it missing (macOS
  ``Request timeout``, iputils ``no answer yet``) is a reply (``ok=True``)
  marked ``late=True``: ping's own statistics count it as received.

busybox writes ``seq=`` where the others write ``icmp_seq=``, and its
statistics have no deviation. An output line the parser cannot read is
``unrecognised``; if it is not recognisably something other than a reply
(ping's own ``ping: ...`` messages, a header or statistics line of a shape not
read), it is also *unreadable* (``ParseResult.unreadable_lines``): it may be a
reply, so a probe seen only as a gap in the numbers is then not known to be
lost, and its row gets status ``unknown`` instead of ``no_reply``.

Row columns: ``seq`` (int), ``rtt_ms`` (float, NaN when lost), ``ok`` (bool),
``duplicate`` (bool), ``late`` (bool), ``t_utc_ns`` (Int64, the ``-D``
timestamp of the reply line, i.e. when the reply was received; NA when ping
printed none), ``ttl`` (Int64), ``bytes`` (Int64, the ICMP size ping reports),
``source`` (address that answered, or that sent the ICMP error), ``status``
(``reply``, ``duplicate``, ``no_reply``, ``error``, or ``unknown`` for a gap
in output with unreadable lines) and ``error`` (the ICMP error text, or why the
status is unknown; else empty).

``summary`` holds the closing statistics as printed: ``transmitted``,
``received``, ``duplicates``, ``errors``, ``loss_percent``, ``time_ms``,
``rtt_min_ms``, ``rtt_avg_ms``, ``rtt_max_ms``, ``rtt_mdev_ms``, ``pipe``,
plus ``target``, ``target_address`` and ``payload_bytes`` from the first line
and ``flavour`` (``iputils``, numbering probes from 1, or ``bsd`` for the
``PING host (address): N data bytes`` header that macOS, BSD, busybox and
inetutils print, numbering from 0).

Run ping with ``LC_ALL=C``: some locales print ``time=0,045``.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from labkit.parsers.base import LineTally, ParseResult, split_lines

if TYPE_CHECKING:  # pandas is imported where rows are built: the series agent on a host imports the argv builders only
    import pandas as pd


def baseline_ping_argv(address: str, count: int = 10, interval_s: float = 0.2) -> list[str]:
    """A short ping baseline: ``count`` probes ``interval_s`` apart, -n so no DNS lookup adds to the run."""
    return ["ping", "-n", "-c", str(count), "-i", f"{interval_s:g}", address]


def log_ping_argv(address: str, count: int, interval_s: float = 1.0) -> list[str]:
    """A ping log to import (``labkit import ping``): ``count`` probes ``interval_s`` apart, each line stamped with
    its UTC time (-D), -n so no DNS lookup adds to the run."""
    return ["ping", "-D", "-n", "-c", str(count), "-i", f"{interval_s:g}", address]


def tick_ping_argv(address: str, timeout_s: float) -> list[str]:
    """One ICMP echo with a reply deadline (one per tick of a series); -D stamps each line with the UTC time."""
    return ["ping", "-D", "-n", "-c", "1", "-W", str(max(1, math.ceil(timeout_s))), address]

_TIMESTAMP = re.compile(r"^\[(\d+)(?:\.(\d+))?\]\s*")
_HEADER_IPUTILS = re.compile(r"^PING (\S+) \(([^)]*)\) (\d+)\((\d+)\) bytes of data\.$")
_HEADER_BSD = re.compile(r"^PING (\S+) \(([^)]*)\): (\d+) data bytes$")
_REPLY = re.compile(
    r"^(\d+) bytes from (?P<src>\S+?)(?: \((?P<srcaddr>[^)]*)\))?: "
    r"(?:icmp_)?seq=(?P<seq>\d+)(?: ident=\d+)?(?: ttl=(?P<ttl>\d+))?"  # busybox: seq=
    r"(?: time=(?P<time>[\d.]+) ms)?(?P<dup> \(DUP!\))?(?P<rest>.*)$"
)
_NO_ANSWER = re.compile(r"^no answer yet for icmp_seq=(\d+)$")
_BSD_TIMEOUT = re.compile(r"^Request timeout for icmp_seq (\d+)$")
_ICMP_ERROR = re.compile(r"^From (?P<src>\S+)(?: \((?P<srcaddr>[^)]*)\))?:? icmp_seq=(?P<seq>\d+) (?P<msg>.+)$")
_STATS_HEADER = re.compile(r"^--- (\S+) ping statistics ---$")
_STATS_COUNTS = re.compile(r"^(\d+) packets transmitted, (\d+) (?:packets )?received(?P<rest>.*)$")
_STATS_EXTRA = re.compile(r"\+(\d+) (duplicates|corrupted|errors)")
_STATS_LOSS = re.compile(r"([\d.]+)% packet loss")
_STATS_TIME = re.compile(r"time (\d+)ms")
_STATS_RTT = re.compile(  # busybox prints no deviation: round-trip min/avg/max = a/b/c ms
    r"^(?:rtt|round-trip) min/avg/max(?:/(?:mdev|stddev))? = ([\d.]+)/([\d.]+)/([\d.]+)(?:/([\d.]+))? ms"
    r"(?:, pipe (\d+))?"
)
_PIPE = re.compile(r"^pipe (\d+)$")
_NOTICE = re.compile(r"^(?:WARNING: .*|PING .*)$")
# Lines not read that are still recognisably not replies: ping's own messages (iputils -v debug
# lines, "ping: sendmsg: ..."), and header or statistics lines of a shape the patterns above miss.
# Any other unread line may be a reply in a format not known here: it must not become a loss.
_NOT_A_REPLY = re.compile(r"^(?:ping: |ai->|--- |rtt |round-trip |\d+ packets transmitted)")

_SEQ_MODULUS = 65536  # icmp_seq is 16 bits and wraps on long runs


def _timestamp_ns(whole: str, frac: str | None) -> int:
    """Exact integer nanoseconds of a ``[seconds.fraction]`` stamp (no float rounding)."""
    frac = (frac or "")[:9].ljust(9, "0")
    return int(whole) * 1_000_000_000 + int(frac)


class _SeqUnwrapper:
    """Turns 16-bit icmp_seq values back into a monotonic count across wraps."""

    def __init__(self) -> None:
        self.offset = 0
        self.last: int | None = None

    def __call__(self, seq: int) -> int:
        if self.last is not None and seq + self.offset < self.last - _SEQ_MODULUS // 2:
            self.offset += _SEQ_MODULUS
        value = seq + self.offset
        self.last = max(value, self.last if self.last is not None else value)
        return value


def parse_ping(text: str) -> ParseResult:
    """Parse the text output of one ping run (iputils, busybox, inetutils, macOS/BSD) into one row per probe and reply."""
    tally = LineTally()
    unreadable: list[tuple[int, str]] = []  # unread lines that may be replies
    summary: dict = {}
    replies: list[dict] = []
    unanswered_reported: dict[int, str] = {}  # seq -> 'no_answer' | 'timeout'
    icmp_errors: dict[int, tuple[str, str, int | None]] = {}
    counts_extra = {"no_answer_lines": 0, "timeout_lines": 0, "error_lines": 0}
    unwrap = _SeqUnwrapper()

    for number, raw in enumerate(split_lines(text), start=1):
        line = tally.prepare(raw)
        if line is None:
            continue
        stamp_ns = None
        stamp = _TIMESTAMP.match(line)
        if stamp:
            stamp_ns = _timestamp_ns(stamp.group(1), stamp.group(2))
            line = line[stamp.end():]

        # A reply whose time is written in a way not read here (time=0,045 in some locales) is not a
        # reply without a time: it falls through to the unreadable lines.
        if (m := _REPLY.match(line)) and "time" not in m["rest"]:
            seq = unwrap(int(m["seq"]))
            replies.append(
                {
                    "seq": seq,
                    "rtt_ms": float(m["time"]) if m["time"] else math.nan,
                    "dup_flag": bool(m["dup"]),
                    "t_utc_ns": stamp_ns,
                    "ttl": int(m["ttl"]) if m["ttl"] else None,
                    "bytes": int(m.group(1)),
                    "source": m["srcaddr"] or m["src"],
                }
            )
        elif m := _NO_ANSWER.match(line):
            unanswered_reported.setdefault(unwrap(int(m.group(1))), "no_answer")
            counts_extra["no_answer_lines"] += 1
        elif m := _BSD_TIMEOUT.match(line):
            unanswered_reported.setdefault(unwrap(int(m.group(1))), "timeout")
            counts_extra["timeout_lines"] += 1
        elif m := _ICMP_ERROR.match(line):
            seq = unwrap(int(m["seq"]))
            icmp_errors.setdefault(seq, (m["msg"].strip(), m["srcaddr"] or m["src"], stamp_ns))
            counts_extra["error_lines"] += 1
        elif not _read_summary_line(line, summary):
            tally.unknown(number, raw)
            if not _NOT_A_REPLY.match(line):
                unreadable.append((number, raw))
            continue
        tally.recognised()

    unknown = _why_gaps_are_not_losses(unreadable, summary, len({r["seq"] for r in replies}))
    rows = _assemble_rows(replies, unanswered_reported, icmp_errors, summary, unknown)
    n_dup = int(rows["duplicate"].sum()) if len(rows) else 0
    n_lost = int(rows["status"].isin(["no_reply", "error"]).sum()) if len(rows) else 0
    counts = tally.counts()
    counts.update(
        replies=len(replies) - n_dup,
        duplicates=n_dup,
        lost=n_lost,
        unknown=int((rows["status"] == "unknown").sum()) if len(rows) else 0,
        unreadable=len(unreadable),
        unread_replies=max(0, summary.get("received", 0) - len({r["seq"] for r in replies})),
        late=int(rows["late"].sum()) if len(rows) else 0,
        probes=len(rows) - n_dup,
        **counts_extra,
    )
    return ParseResult(rows=rows, counts=counts, summary=summary, unrecognised_lines=tally.unrecognised,
                       unreadable_lines=unreadable)


def _why_gaps_are_not_losses(unreadable: list[tuple[int, str]], summary: dict, answered: int) -> str | None:
    """Why a probe with no reply read may still have had one; None when every reply ping printed was read.

    A gap in the numbers is a loss only if no line that could be a reply went
    unread and ping's own count of replies (``received``) was reached.
    """
    if unreadable:
        return f"line {unreadable[0][0]} could not be read and may be its reply"
    if summary.get("received", 0) > answered:
        return f"ping counted {summary['received']} replies but printed {answered} (was it run with -q?)"
    return None


def _read_summary_line(line: str, summary: dict) -> bool:
    """Read a header, statistics or notice line into ``summary``; False when the line is none of those."""
    if m := _HEADER_IPUTILS.match(line):
        summary.update(flavour="iputils", target=m.group(1), target_address=m.group(2), payload_bytes=int(m.group(3)))
    elif m := _HEADER_BSD.match(line):
        summary.update(flavour="bsd", target=m.group(1), target_address=m.group(2), payload_bytes=int(m.group(3)))
    elif m := _STATS_COUNTS.match(line):
        summary["transmitted"] = int(m.group(1))
        summary["received"] = int(m.group(2))
        for value, kind in _STATS_EXTRA.findall(m["rest"]):
            summary[kind] = int(value)
        if loss := _STATS_LOSS.search(m["rest"]):
            summary["loss_percent"] = float(loss.group(1))
        if elapsed := _STATS_TIME.search(m["rest"]):
            summary["time_ms"] = int(elapsed.group(1))
    elif m := _STATS_RTT.match(line):
        for key, value in zip(("rtt_min_ms", "rtt_avg_ms", "rtt_max_ms", "rtt_mdev_ms"), m.groups()[:4]):
            if value is not None:  # busybox prints no deviation
                summary[key] = float(value)
        if m.group(5):
            summary["pipe"] = int(m.group(5))
    elif m := _PIPE.match(line):
        summary["pipe"] = int(m.group(1))
    else:
        return bool(_STATS_HEADER.match(line) or _NOTICE.match(line))
    return True


def _first_seq(summary: dict, seen: list[int]) -> int:
    """iputils numbers probes from 1, BSD ping from 0; without a header, trust what was seen."""
    flavour = summary.get("flavour")
    if flavour == "iputils":
        return 1
    if flavour == "bsd":
        return 0
    return min(seen) if seen else 0


_COLUMNS = {
    "seq": "int64", "rtt_ms": "float64", "ok": "bool", "duplicate": "bool", "late": "bool", "t_utc_ns": "Int64",
    "ttl": "Int64", "bytes": "Int64", "source": "string", "status": "string", "error": "string",
}


def _assemble_rows(replies, unanswered_reported, icmp_errors, summary, unknown: str | None) -> pd.DataFrame:
    """One row per reply and per probe without one; ``unknown`` says why a gap may not be a loss (None: it is)."""
    import pandas as pd

    seen = [r["seq"] for r in replies] + list(unanswered_reported) + list(icmp_errors)
    first = _first_seq(summary, seen)
    last = max(seen) if seen else first - 1
    if "transmitted" in summary:
        last = max(last, first + summary["transmitted"] - 1)
    rows = _reply_rows(replies, unanswered_reported)
    answered = {row["seq"] for row in rows}
    for seq in range(first, last + 1):
        if seq not in answered:
            rows.append(_missing_row(seq, icmp_errors.get(seq), seq in unanswered_reported, unknown))
    frame = pd.DataFrame(rows, columns=list(_COLUMNS)).astype(_COLUMNS)
    # Probes in sequence order; a duplicate follows the reply it repeats.
    return frame.sort_values(["seq", "duplicate"], kind="stable").reset_index(drop=True)


def _reply_rows(replies, unanswered_reported) -> list[dict]:
    rows: list[dict] = []
    answered: set[int] = set()
    for reply in replies:
        duplicate = reply["dup_flag"] or reply["seq"] in answered
        answered.add(reply["seq"])
        rows.append(
            {
                "seq": reply["seq"],
                "rtt_ms": reply["rtt_ms"],
                # A duplicate is a reply too, but not a sample of its own: ok=False
                # marks it out of the RTT statistics while `duplicate` says why.
                "ok": not duplicate,
                "duplicate": duplicate,
                "late": (not duplicate) and reply["seq"] in unanswered_reported,
                "t_utc_ns": reply["t_utc_ns"],
                "ttl": reply["ttl"],
                "bytes": reply["bytes"],
                "source": reply["source"],
                "status": "duplicate" if duplicate else "reply",
                "error": "",
            }
        )
    return rows


def _missing_row(seq: int, icmp_error, reported: bool, unknown: str | None) -> dict:
    """The row of a probe no reply was read for: an ICMP error, a loss ping reported, or a gap."""
    message, source, stamp = icmp_error or ("", "", None)
    if message:
        status = "error"
    elif reported or unknown is None:
        status = "no_reply"  # ping said so (no answer yet, Request timeout), or every line was read
    else:
        status, message = "unknown", unknown
    return {
        "seq": seq, "rtt_ms": math.nan, "ok": False, "duplicate": False, "late": False, "t_utc_ns": stamp,
        "ttl": None, "bytes": None, "source": source, "status": status, "error": message,
    }

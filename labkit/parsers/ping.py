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
from typing import TYPE_CHECKING, Iterator

from labkit.parsers.base import KEPT_LINES, LineTally, ParseError, ParseResult
from labkit.parsers.compiled import ping_replies
from labkit.parsers.stream import (INFERRED_BATCH, LAST_NS, STORABLE_TIMES, Lines, Prepared, SeqWindow, StreamParser,
                                   arrow_schema, digits, field, inferred_allowed, lines_one_by_one, match_lines,
                                   numbers, parse_whole, sort_by, sorted_within)

if TYPE_CHECKING:  # pandas is imported where rows are built: the series agent on a host imports the argv builders only
    import pandas as pd  # noqa: F401


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

_TIMESTAMP = re.compile(r"^\[(\d{1,12})(?:\.(\d{1,12}))?\]\s*")
_HEADER_IPUTILS = re.compile(r"^PING (\S+) \(([^)]*)\) (\d{1,9})\((\d{1,9})\) bytes of data\.$")
_HEADER_BSD = re.compile(r"^PING (\S+) \(([^)]*)\): (\d{1,9}) data bytes$")
# Numbers are bounded: a 40-digit "seq" is not ping's, and must not reach 64-bit columns.
_REPLY_TEMPLATE = (
    r"(?P<bytes>\d{{1,9}}) bytes from (?P<src>{src})(?: \((?P<srcaddr>{addr})\))?: "
    r"(?:icmp_)?seq=(?P<seq>\d{{1,9}})(?: ident=\d+)?(?: ttl=(?P<ttl>\d{{1,9}}))?"  # busybox: seq=
    r"(?: time=(?P<time>\d{{1,12}}(?:\.\d{{1,12}})?) ms)?(?P<dup> \(DUP!\))?{rest}"
)
_REPLY = re.compile("^" + _REPLY_TEMPLATE.format(src=r"\S+?", addr=r"[^)]*", rest=r"(?P<rest>.*)") + "$")
# A -D stamp the vectorised pass reads: whole seconds below 9000000000 (2255), whose nanoseconds surely fit 64 bits,
# as the compiled reader's; a later stamp goes to the line-by-line code, which refuses one past what 64 bits hold.
_EARLY_SECONDS = r"(?:[0-8]\d{9}|\d{1,9})"
# The same reply, with or without its -D stamp, as the vectorised pass reads it (RE2): plain names and
# addresses, nothing after it; any other line is read by the code that reads every line.
_FAST_REPLY = (rf"^(?:\[(?P<whole>{_EARLY_SECONDS})(?:\.(?P<frac>\d{{1,12}}))?\]\s*)?"
               + _REPLY_TEMPLATE.format(src=r"[A-Za-z0-9._-]+", addr=r"[0-9.]*", rest="") + r"\r?\n?$")
# The commonest reply exactly (one space after a -D stamp, an address, ttl and time, nothing after): read by
# compiled code (labkit.parsers.compiled) or, without it, cut out of many lines at once by their spaces
# (:func:`_plain_replies`).
_PLAIN_REPLY = (rf"^(?:\[{_EARLY_SECONDS}(?:\.\d{{1,12}})?\] )?"
                r"\d{1,9} bytes from [A-Za-z0-9._-]{1,64}: (?:icmp_)?seq=\d{1,9} "
                r"ttl=\d{1,9} time=\d{1,12}(?:\.\d{1,12})? ms(?: \(DUP!\))?\n?$")
_NO_ANSWER = re.compile(r"^no answer yet for icmp_seq=(\d{1,9})$")
_BSD_TIMEOUT = re.compile(r"^Request timeout for icmp_seq (\d{1,9})$")
_ICMP_ERROR = re.compile(r"^From (?P<src>\S+)(?: \((?P<srcaddr>[^)]*)\))?:? icmp_seq=(?P<seq>\d{1,9}) (?P<msg>.+)$")
_STATS_HEADER = re.compile(r"^--- (\S+) ping statistics ---$")
_STATS_COUNTS = re.compile(r"^(\d{1,12}) packets transmitted, (\d{1,12}) (?:packets )?received(?P<rest>.*)$")
_STATS_EXTRA = re.compile(r"\+(\d{1,12}) (duplicates|corrupted|errors)")
_STATS_LOSS = re.compile(r"(\d+(?:\.\d+)?)% packet loss")
_STATS_TIME = re.compile(r"time (\d{1,15})ms")
_NUMBER = r"(\d+(?:\.\d+)?)"
_STATS_RTT = re.compile(  # busybox prints no deviation: round-trip min/avg/max = a/b/c ms
    rf"^(?:rtt|round-trip) min/avg/max(?:/(?:mdev|stddev))? = {_NUMBER}/{_NUMBER}/{_NUMBER}(?:/{_NUMBER})? ms"
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


def _unwrap(raw, state: list):
    """16-bit icmp_seq values, in line order, back into a monotonic count across wraps (vectorised).

    ``state`` is ``[offset, highest so far or None]``, carried from one chunk to the next. A value more than
    half the modulus below the highest so far has wrapped: it and what follows count one modulus higher.
    """
    import numpy as np

    raw = np.asarray(raw, dtype=np.int64)
    out = np.empty_like(raw)
    start = 0
    while start < len(raw):
        offset, last = state
        values = raw[start:] + offset
        running = np.maximum.accumulate(values)
        before = np.concatenate([[values[0] if last is None else last], running[:-1]])
        if last is not None:
            before = np.maximum(before, last)
        wrapped = np.flatnonzero(values < before - _SEQ_MODULUS // 2)
        stop = int(wrapped[0]) if len(wrapped) else len(values)
        out[start:start + stop] = values[:stop]
        if stop:
            state[1] = int(running[stop - 1]) if last is None else max(last, int(running[stop - 1]))
        if stop == len(values):
            break
        state[0] += _SEQ_MODULUS
        start += stop
    return out


def _event(line: str, stamp_ns: int | None):
    """A cleaned line (its -D stamp taken off) that is no plain reply: ("reply", seq, fields),
    ("no_answer"|"timeout", seq), ("error", seq, (message, source, stamp)), or None for none of those."""
    # A reply whose time is written in a way not read here (time=0,045 in some locales) is not a
    # reply without a time: it falls through to the unreadable lines.
    if (m := _REPLY.match(line)) and "time" not in m["rest"]:
        return ("reply", int(m["seq"]), {
            "rtt_ms": float(m["time"]) if m["time"] else math.nan, "dup": bool(m["dup"]), "t_utc_ns": stamp_ns,
            "ttl": int(m["ttl"]) if m["ttl"] else None, "bytes": int(m["bytes"]), "source": m["srcaddr"] or m["src"]})
    if m := _NO_ANSWER.match(line):
        return ("no_answer", int(m.group(1)))
    if m := _BSD_TIMEOUT.match(line):
        return ("timeout", int(m.group(1)))
    if m := _ICMP_ERROR.match(line):
        return ("error", int(m["seq"]), (m["msg"].strip(), m["srcaddr"] or m["src"], stamp_ns))
    return None


_EVENT_COUNTS = {"no_answer": "no_answer_lines", "timeout": "timeout_lines", "error": "error_lines"}
#: Replies waiting in :class:`PingParser` (``line``: where each was, which orders the replies to one probe).
_PENDING = {"seq": "int64", "line": "int64", "rtt_ms": "float64", "dup": "bool", "t_utc_ns": "Int64", "ttl": "Int64",
            "bytes": "Int64", "source": "string"}


class PingParser(StreamParser):
    """ping's output fed a chunk of whole lines at a time (see the module docstring for the rows).

    Rows come out in sequence order once no later line can name their probe: icmp_seq wraps at 65536 and is
    unwrapped assuming no line is half of that out of order, so a probe that far below the highest seen is
    settled. The rows carry a column :func:`parse_ping`'s lack: ``gap``, True for a probe seen only as a gap
    in the numbers, whose status (``no_reply``) holds only if ``result().doubt`` is None.
    """

    dtypes = {"seq": "int64", "rtt_ms": "float64", "ok": "bool", "duplicate": "bool", "late": "bool",
              "t_utc_ns": "Int64", "ttl": "Int64", "bytes": "Int64", "source": "string", "status": "string",
              "error": "string", "gap": "bool"}

    def __init__(self) -> None:
        self.schema = arrow_schema(self.dtypes)
        self.tally = LineTally()
        self.summary: dict = {}
        self.unreadable: list[tuple[int, str]] = []
        self.n = {"unreadable": 0, "rows": 0, "duplicates": 0, "lost": 0, "late": 0, "gaps": 0, "answered": 0,
                  "replies": 0, "no_answer_lines": 0, "timeout_lines": 0, "error_lines": 0}
        self.window = SeqWindow(arrow_schema(_PENDING), ["seq", "line"], _SEQ_MODULUS // 2)
        self.reported: dict[int, str] = {}  # seq -> 'no_answer' | 'timeout', of probes not yet released
        self.errors: dict[int, tuple[str, str, int | None]] = {}
        self.unwrap_state: list = [0, None]
        self.first: int | None = None  # the first probe's seq, fixed when first needed
        self.next_missing: int | None = None  # every probe below this was released

    def prepare(self, text: str) -> Prepared:
        """The vectorised pass over a chunk (no state: it may run ahead, on another thread)."""
        import numpy as np
        import pyarrow as pa

        lines = Lines(text)
        found = ping_replies(lines, arrow_schema(_PENDING))
        if found is None:  # no compiled reader here: the plain lines found by a regex and cut out by numpy
            plain = lines.matching(_PLAIN_REPLY)
            found = _plain_replies(lines, plain), plain
        plain_rows, plain = found
        left = np.ones(len(lines), dtype=bool)
        left[plain] = False
        rest = np.flatnonzero(left)
        groups, matched = match_lines(lines.array.take(rest), _FAST_REPLY)
        fast = rest[matched]
        slow = rest[~np.isin(rest, fast, assume_unique=True)]
        replies = pa.concat_tables([plain_rows, _fast_replies(groups, fast + 1)])
        return Prepared(len(lines), sort_by(replies, ["line"]), lines.array.take(slow).to_pylist(), slow)

    def feed_prepared(self, chunk: Prepared) -> list:
        import pyarrow.compute as pc

        base = self.tally.lines
        self.tally.bulk(chunk.rows.num_rows, chunk.rows.num_rows)
        events = self._read_lines(chunk.rest, (base + chunk.rest_at + 1).tolist())
        replies = chunk.rows.set_column(1, "line", pc.add(chunk.rows["line"], base))
        self._place(replies, events)
        below = self.window.ready_below()
        return self._release(below, below) if below is not None else []

    def _read_lines(self, texts: list[str], numbers: list[int]) -> list[tuple[int, tuple]]:
        """The lines the vectorised pass did not read, one by one: their events, in line order."""
        events = []
        for number, raw, line in lines_one_by_one(self.tally, texts, numbers):
            stamp_ns = None
            if stamp := _TIMESTAMP.match(line):
                stamp_ns = _timestamp_ns(stamp.group(1), stamp.group(2))
                line = line[stamp.end():]
            event = _event(line, stamp_ns)
            if event is not None and stamp_ns is not None and stamp_ns > LAST_NS:
                raise ParseError(f"line {number}: the stamp {stamp.group(0).strip()} is outside the times labkit can "
                                 f"store ({STORABLE_TIMES})")
            if event is None and not _read_summary_line(line, self.summary):
                self.tally.unknown(number, raw)
                if not _NOT_A_REPLY.match(line):  # it may be a reply in a format not known here
                    self.n["unreadable"] += 1
                    if len(self.unreadable) < KEPT_LINES:
                        self.unreadable.append((number, raw))
                continue
            self.tally.recognised()
            if event is not None:
                events.append((number, event))
                if event[0] in _EVENT_COUNTS:
                    self.n[_EVENT_COUNTS[event[0]]] += 1
        return events

    def _place(self, replies, events: list[tuple[int, tuple]]) -> None:
        """Unwrap every probe number in line order; replies wait in the window, losses in the dicts."""
        import numpy as np
        import pyarrow as pa

        numbers = np.concatenate([replies["line"].to_numpy(), np.array([n for n, _ in events], dtype=np.int64)])
        raw = np.concatenate([replies["seq"].to_numpy(), np.array([e[1] for _, e in events], dtype=np.int64)])
        order = np.argsort(numbers, kind="stable")
        seqs = np.empty_like(raw)
        seqs[order] = _unwrap(raw[order], self.unwrap_state)
        self.window.see(seqs)
        self._check_gaps(seqs, raw, numbers)
        later = []
        for (number, event), seq in zip(events, seqs[replies.num_rows:].tolist()):
            if event[0] == "reply":
                later.append({"seq": seq, "line": number, **event[2]})
            elif event[0] == "error":
                self.errors.setdefault(seq, event[2])
            else:
                self.reported.setdefault(seq, event[0])
        self.window.add(replies.set_column(0, "seq", pa.array(seqs[:replies.num_rows])))
        if later:
            self.window.add(pa.Table.from_pylist(later, schema=self.window.schema))

    def _check_gaps(self, seqs, raw, numbers) -> None:
        """Refuse, before any is made, more rows for probes seen only as gaps than the lines read so far may infer."""
        import numpy as np

        if not len(seqs):
            return
        lines = self.tally.lines
        first = self.first if self.first is not None else _first_seq(self.summary, [self.window.min_seen])
        missing = self.window.max_seen - first + 1 - lines  # at least this many probes have no line
        if missing > inferred_allowed(lines):
            highest = int(np.argmax(seqs))
            raise ParseError(f"line {numbers[highest]}: icmp_seq {raw[highest]} leaves {missing} probes missing from "
                             f"{lines} lines, more than labkit infers from ping output of this size "
                             f"({inferred_allowed(lines)}): not the output of one ping run")

    def finish(self) -> Iterator:
        first, seen = self._first(), self.window.max_seen
        last = seen if seen is not None else first - 1
        if "transmitted" in self.summary:
            last = max(last, first + self.summary["transmitted"] - 1)
        lines = self.tally.lines
        if last - first + 1 - lines > inferred_allowed(lines):
            said = (f"ping statistics say {self.summary['transmitted']} packets were transmitted"
                    if "transmitted" in self.summary else f"probes {first} to {last} were sent")
            raise ParseError(f"{said}, far more than the output shows probes for: not the output of one ping run")
        # Every reply, and the probes without one up to the last: those only the count tells of too.
        return self._release(None, last + 1)

    def _first(self) -> int:
        """iputils numbers probes from 1, BSD ping from 0; without a header, the lowest seen (fixed once used)."""
        if self.first is None:
            low = self.window.min_seen
            self.first = self.next_missing = _first_seq(self.summary, [] if low is None else [low])
        return self.first

    def _release(self, below: int | None, missing_to: int) -> Iterator:
        """As rows: the replies below ``below`` (all for None) and the probes without one below ``missing_to``.

        The replies are taken from the window, the losses from the lines that told of them, and every row
        counted, now; the rows of the probes without a reply are made as the result is taken,
        :data:`INFERRED_BATCH` probes at a time, so a long gap is never held whole."""
        import numpy as np

        self._first()
        if below is not None and below <= self.next_missing:
            return iter(())
        replies = self.window.release(below)
        seqs = replies["seq"].to_numpy()
        start, missing_to = self.next_missing, max(missing_to, self.next_missing)
        # Every probe below missing_to is settled: what lines said of those without a reply goes with them.
        reported, errors = (_take_below(losses, missing_to) for losses in (self.reported, self.errors))
        reply_rows = self._reply_rows(replies, seqs, reported)
        answered, distinct = sorted_within(seqs, start, missing_to)
        # A probe without a reply is a gap unless a line told of it: "no answer yet", a timeout, an ICMP error.
        told_of = np.array([seq for seq in {*reported, *errors}
                            if start <= seq < missing_to and (seq in reported or errors[seq][0])], dtype=np.int64)
        lost = (missing_to - start) - distinct
        self._count(rows=lost, lost=lost, gaps=lost - int(np.count_nonzero(~np.isin(told_of, answered))))
        self.next_missing = missing_to
        return self._filled(reply_rows, seqs, start, missing_to, reported, errors)

    def _filled(self, reply_rows, seqs, start: int, end: int, reported: dict, errors: dict) -> Iterator:
        """``reply_rows`` (sorted by probe) with a row for each probe from ``start`` to ``end`` they do not answer, a
        batch of probes at a time, in sequence order; ``reported`` and ``errors``: what lines said of those."""
        import numpy as np
        import pyarrow as pa

        steps = range(start, end, INFERRED_BATCH) if end > start else [start]
        for low in steps:
            high = min(end, low + INFERRED_BATCH)
            first, last = np.searchsorted(seqs, [low, high])
            first = 0 if low == start else first  # rows below start (none are expected) go with the first batch
            last = len(seqs) if high >= end else last
            inside = seqs[first:last]
            answered = np.zeros(max(0, high - low), dtype=bool)
            answered[inside[(inside >= low) & (inside < high)] - low] = True
            missing = np.flatnonzero(~answered) + low
            tables = [table for table in (reply_rows.slice(first, last - first),
                                          self._missing_rows(missing, reported, errors)) if table.num_rows]
            if tables:  # probes in sequence order; a duplicate follows the reply it repeats (the sort is stable)
                yield sort_by(pa.concat_tables(tables), ["seq", "duplicate"])

    def _reply_rows(self, replies, seqs, reported: dict):
        """Rows of released replies (sorted by probe, then line): the first reply to a probe is its sample; one to a
        probe ping had ``reported`` missing is late."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        first = np.ones(len(seqs), dtype=bool)
        first[1:] = seqs[1:] != seqs[:-1]
        duplicate = replies["dup"].to_numpy(zero_copy_only=False) | ~first
        late = ~duplicate & np.isin(seqs, np.fromiter(reported, dtype=np.int64, count=len(reported)))
        self._count(rows=len(seqs), replies=len(seqs), answered=int(first.sum()), duplicates=int(duplicate.sum()),
                    late=int(late.sum()))
        return pa.table({"seq": seqs, "rtt_ms": replies["rtt_ms"], "ok": ~duplicate, "duplicate": duplicate,
                         "late": late, "t_utc_ns": replies["t_utc_ns"], "ttl": replies["ttl"],
                         "bytes": replies["bytes"], "source": replies["source"],
                         "status": pc.if_else(pa.array(duplicate), "duplicate", "reply"),
                         "error": pa.repeat("", len(seqs)), "gap": np.zeros(len(seqs), dtype=bool)}, schema=self.schema)

    def _missing_rows(self, missing, reported: dict, errors: dict):
        """Rows of probes no reply was read for: an ICMP error, a loss ping ``reported``, or a gap in the numbers."""
        import numpy as np
        import pyarrow as pa

        n = len(missing)
        messages, sources, stamps = [""] * n, [""] * n, [None] * n
        for i in np.flatnonzero(np.isin(missing, np.fromiter(errors, np.int64, len(errors)))).tolist():
            messages[i], sources[i], stamps[i] = errors[int(missing[i])]
        error = np.array([bool(message) for message in messages], dtype=bool)
        gap = ~error & ~np.isin(missing, np.fromiter(reported, np.int64, len(reported)))
        return pa.table({"seq": missing, "rtt_ms": np.full(n, np.nan), "ok": np.zeros(n, dtype=bool),
                         "duplicate": np.zeros(n, dtype=bool), "late": np.zeros(n, dtype=bool),
                         "t_utc_ns": pa.array(stamps, pa.int64()), "ttl": pa.nulls(n, pa.int64()),
                         "bytes": pa.nulls(n, pa.int64()), "source": pa.array(sources, pa.string()),
                         "status": np.where(error, "error", "no_reply"), "error": pa.array(messages, pa.string()),
                         "gap": gap}, schema=self.schema)

    def _count(self, **counts: int) -> None:
        for key, value in counts.items():
            self.n[key] += value

    def result(self) -> ParseResult:
        n = self.n
        doubt = _why_gaps_are_not_losses(self.n["unreadable"], self.unreadable, self.summary, n["answered"])
        doubt = doubt if n["gaps"] else None
        unknown = n["gaps"] if doubt else 0
        counts = self.tally.counts()
        counts.update(
            replies=n["replies"] - n["duplicates"], duplicates=n["duplicates"], lost=n["lost"] - unknown,
            unknown=unknown, unreadable=n["unreadable"],
            unread_replies=max(0, self.summary.get("received", 0) - n["answered"]), late=n["late"],
            probes=n["rows"] - n["duplicates"],
            **{key: n[key] for key in ("no_answer_lines", "timeout_lines", "error_lines")},
        )
        return ParseResult(rows=None, counts=counts, summary=self.summary, unrecognised_lines=self.tally.unrecognised,
                           unreadable_lines=self.unreadable, doubt=doubt)


def _take_below(losses: dict, below: int) -> dict:
    """The entries of ``losses`` whose seq is below ``below``, taken out of it."""
    return {seq: losses.pop(seq) for seq in [seq for seq in losses if seq < below]}


def _plain_replies(lines, at):
    """The replies of :data:`_PLAIN_REPLY` lines ``at`` of a chunk, their fields cut out between spaces (``line``
    numbered within the chunk)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    starts, ends, raw = lines.starts[at], lines.ends[at], lines.bytes
    stamped = (raw[starts] == ord("[")).astype(np.int64)
    spaces, first = lines.positions(ord(" "), at)
    space = [spaces[first + stamped + j] for j in range(7)]  # after: N, bytes, from, ADDR:, seq, ttl, time
    text_start = np.where(stamped == 1, spaces[first] + 1, starts)
    seq_start = space[3] + np.where(raw[space[3] + 1] == ord("i"), 10, 5)  # " icmp_seq=" or " seq="
    stamp_end = np.where(stamped == 1, text_start - 2, starts)  # the "]"
    dot = np.minimum(lines.next_at(ord("."), starts, stamp_end), stamp_end) if stamped.any() else stamp_end
    whole = digits(raw, starts + 1, dot)
    frac = digits(raw, np.minimum(dot + 1, stamp_end), np.minimum(stamp_end, dot + 10))
    frac_digits = np.minimum(stamp_end - np.minimum(dot + 1, stamp_end), 9)
    nanos = whole * 1_000_000_000 + frac * 10 ** (9 - frac_digits)
    return pa.table({
        "seq": numbers(lines.cut(seq_start, space[4])), "line": pa.array(at + 1, pa.int64()),
        "rtt_ms": numbers(lines.cut(space[5] + 6, space[6]), "float"), "dup": pa.array(ends - space[6] > 3),
        "t_utc_ns": pa.array(nanos, mask=stamped == 0), "ttl": numbers(lines.cut(space[4] + 5, space[5])),
        "bytes": numbers(lines.cut(text_start, space[0])), "source": pc.cast(lines.cut(space[2] + 1, space[3] - 1),
                                                                           pa.string()),
    }, schema=arrow_schema(_PENDING))


def _fast_replies(groups, numbers):
    """The replies the vectorised pass read, as pending rows (their seq not yet unwrapped)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    whole, frac = field(groups, "whole", "int"), groups.field("frac")
    nanos = pc.cast(pc.utf8_slice_codeunits(pc.utf8_rpad(frac, 9, "0"), 0, 9), pa.int64())
    source = pc.if_else(pc.equal(groups.field("srcaddr"), ""), groups.field("src"), groups.field("srcaddr"))
    return pa.table({
        "seq": field(groups, "seq", "int"), "line": pa.array(numbers, pa.int64()),
        "rtt_ms": pc.fill_null(field(groups, "time", "float"), float("nan")),
        "dup": pc.not_equal(groups.field("dup"), ""), "t_utc_ns": pc.add(pc.multiply(whole, 1_000_000_000), nanos),
        "ttl": field(groups, "ttl", "int"), "bytes": field(groups, "bytes", "int"), "source": source,
    }, schema=arrow_schema(_PENDING))


def parse_ping(text: str) -> ParseResult:
    """Parse the text output of one ping run (iputils, busybox, inetutils, macOS/BSD) into one row per probe and reply."""
    result = parse_whole(PingParser(), text)
    rows = result.rows
    if result.doubt:  # a probe seen only as a gap may have had a reply in a line not read
        rows.loc[rows["gap"], ["status", "error"]] = ["unknown", result.doubt]
    result.rows = rows.drop(columns="gap")
    return result


def _why_gaps_are_not_losses(unreadable: int, kept: list[tuple[int, str]], summary: dict, answered: int) -> str | None:
    """Why a probe with no reply read may still have had one; None when every reply ping printed was read.

    A gap in the numbers is a loss only if no line that could be a reply went
    unread and ping's own count of replies (``received``) was reached.
    """
    if unreadable:
        return f"line {kept[0][0]} could not be read and may be its reply"
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

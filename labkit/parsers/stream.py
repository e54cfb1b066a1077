"""Parsing a tool's output a chunk of lines at a time, so a log of any size is read in bounded memory.

A streaming parser (:class:`StreamParser`) is pure like every parser here: it is fed text, whole lines at a
time (:meth:`~StreamParser.feed`), and returns the rows it is sure of as Arrow tables of its declared
``schema``; :meth:`~StreamParser.finish` returns the rest and :meth:`~StreamParser.result` the counts,
summary and lines it could not read. ``parse_*`` functions over a whole text run the same code
(:func:`parse_whole`), so what the importer streams is what the tests check on recorded output.

Rows a parser infers from numbers (a probe seen only as a gap in the sequence, or counted by closing statistics)
are counted as ranges and made :data:`INFERRED_BATCH` at a time, as the returned iterables are taken, and there are at
most :func:`inferred_allowed` of them: an import's memory and rows grow with its file, never with a number written in
it (a three-line log whose last seq is 999999999 is refused, not a billion rows).

A line ends at ``\\n`` (a ``\\r`` before it is dropped). Common lines are read by a vectorised pass over the
chunk (:func:`match_lines`, RE2 through Arrow); every other line goes through the parser's line-by-line code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from labkit.parsers.base import ParseError, ParseResult

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa


@dataclass
class Prepared:
    """A chunk after the vectorised pass: how many lines it has, the rows that pass read (``line`` numbered
    within the chunk, from 1), and the other lines (their text, and their 0-based index in the chunk)."""

    count: int
    rows: "pa.Table"
    rest: list[str]
    rest_at: "np.ndarray"


class StreamParser:
    """The interface of a parser fed whole lines: ``feed`` as they come, ``finish`` at the end.

    ``feed`` is :meth:`prepare` (the work that needs no state, which an importer may run a chunk ahead on
    another thread) then :meth:`feed_prepared`.
    """

    schema: "pa.Schema"
    #: pandas dtypes of the rows :func:`parse_whole` returns (Arrow's own types where not named).
    dtypes: dict[str, str] = {}

    def prepare(self, text: str):
        """What can be read of a chunk without the parser's state (by default: nothing, the text itself)."""
        return text

    def feed_prepared(self, chunk) -> Iterable["pa.Table"]:
        """Read a prepared chunk; the rows that no later line can change."""
        raise NotImplementedError

    def feed(self, text: str) -> Iterable["pa.Table"]:
        """Read ``text`` (whole lines); the rows that no later line can change."""
        return self.feed_prepared(self.prepare(text))

    def finish(self) -> Iterable["pa.Table"]:
        """The end of the output: every row not yet returned."""
        raise NotImplementedError

    def result(self) -> ParseResult:
        """Counts, summary and unread lines of everything fed (``rows`` is None: they were returned)."""
        raise NotImplementedError


#: Rows a parser may infer from numbers in its input (gaps in a sequence, a closing count), plus
#: :data:`INFERRED_PER_LINE` for each line read: more is not the output of one run (see :func:`inferred_allowed`).
INFERRED_ROWS = 2**22
INFERRED_PER_LINE = 64
#: Rows inferred from a gap are made this many at a time (tens of MB), however long the gap.
INFERRED_BATCH = 2**17


def inferred_allowed(lines: int) -> int:
    """How many rows a parser may infer from numbers after reading ``lines`` lines: a few million, and more for
    a longer log, so that what an import makes is bounded by its file's size."""
    return INFERRED_ROWS + INFERRED_PER_LINE * lines


def sorted_within(values, low: int, high: int):
    """The values of a sorted array from ``low`` up to (not including) ``high``, and how many distinct ones."""
    import numpy as np

    first, last = np.searchsorted(values, [low, high])
    inside = values[first:last]
    return inside, (1 + int(np.count_nonzero(np.diff(inside)))) if len(inside) else 0


def parse_whole(parser: StreamParser, text: str) -> ParseResult:
    """Run ``parser`` over one whole text: a :class:`ParseResult` whose rows are every row, as a DataFrame."""
    import pyarrow as pa

    batches = [batch for chunk in line_chunks(text) for batch in parser.feed(chunk)] + list(parser.finish())
    table = pa.concat_tables(batches) if batches else parser.schema.empty_table()
    result = parser.result()
    result.rows = to_frame(table, parser.dtypes)
    return result


def to_frame(table: "pa.Table", dtypes: dict[str, str]) -> "pd.DataFrame":
    """An Arrow table as a DataFrame with ``dtypes``: nullable integers stay exact (no float round trip)."""
    import pandas as pd
    import pyarrow as pa

    frame = table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype(), pa.string(): pd.StringDtype()}.get)
    return frame.astype({column: dtype for column, dtype in dtypes.items() if column in frame})


#: The times a timestamp in integer nanoseconds since the epoch (numpy's datetime64[ns], the tables' columns) holds.
STORABLE_TIMES = "1677-09-21 00:12:43.145224193 to 2262-04-11 23:47:16.854775807 UTC"
#: The last of them, in nanoseconds since the epoch.
LAST_NS = 2**63 - 1

#: Text is fed to a parser in pieces of about this many characters, cut at line ends.
CHUNK_CHARS = 4 * 2**20


def line_chunks(text: str, size: int = CHUNK_CHARS):
    """``text`` in pieces of whole lines of about ``size`` characters (a longer line is one piece)."""
    start = 0
    while start < len(text):
        cut = text.find("\n", min(start + size, len(text)) - 1)
        end = len(text) if cut < 0 else cut + 1
        yield text[start:end]
        start = end


class Lines:
    """The lines of a chunk of text (split at ``\\n``; a final newline adds no line): where each lies in the
    chunk's UTF-8 bytes (``starts``, ``ends`` without the newline), so fields can be cut out of many lines at
    once (:meth:`cut`), and ``array``, the lines as one Arrow string array, each with its newline."""

    def __init__(self, text: str):
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        self.data = text.encode("utf-8", "replace")
        self.bytes = np.frombuffer(self.data, np.uint8)
        newlines = np.flatnonzero(self.bytes == 10)
        starts = np.concatenate([[0], newlines + 1]).astype(np.int64)
        if starts[-1] == len(self.data):  # the text ends with a newline (or is empty)
            starts = starts[:-1]
        self.starts = starts
        self.ends = np.append(newlines, len(self.data))[:len(starts)].astype(np.int64)
        offsets = np.append(starts, len(self.data))
        # Each line with its newline (the last may lack one): patterns end in \n?$, and no copy is made.
        self.array = pa.LargeStringArray.from_buffers(len(starts), pa.py_buffer(offsets), pa.py_buffer(self.data))
        self._found: dict[int, "np.ndarray"] = {}

    def __len__(self) -> int:
        return len(self.starts)

    def cut(self, starts, ends) -> "pa.Array":
        """The text from ``starts[i]`` to ``ends[i]`` (byte positions in the chunk) as a string array, the
        bytes gathered at once."""
        import numpy as np
        import pyarrow as pa

        lengths = np.asarray(ends - starts, dtype=np.int64)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        gather = np.arange(offsets[-1], dtype=np.int64) + np.repeat(starts - offsets[:-1], lengths)
        return pa.LargeStringArray.from_buffers(len(lengths), pa.py_buffer(offsets),
                                                pa.py_buffer(self.bytes[gather].tobytes()))

    def matching(self, pattern: str, among=None):
        """Indices of the lines (of ``among``, default all) that ``pattern`` (RE2) matches whole."""
        import numpy as np
        import pyarrow.compute as pc

        lines = self.array if among is None else self.array.take(among)
        among = np.arange(len(self)) if among is None else among
        if not len(among):
            return among
        return among[pc.match_substring_regex(lines, pattern).to_numpy(zero_copy_only=False)]

    def found(self, byte: int):
        """Every position of ``byte`` in the chunk."""
        import numpy as np

        if byte not in self._found:
            self._found[byte] = np.flatnonzero(self.bytes == byte)
        return self._found[byte]

    def positions(self, byte: int, lines):
        """Where each of ``lines`` has ``byte``: ``(found, first)``, every position of that byte in the chunk
        and, per line, the index in ``found`` of its first one (``found[first + k]`` is its k-th)."""
        import numpy as np

        found = self.found(byte)
        return found, np.searchsorted(found, self.starts[lines])

    def next_at(self, byte: int, starts, default):
        """The first position of ``byte`` at or after each of ``starts``; ``default`` where there is none."""
        import numpy as np

        found = self.found(byte)
        if not len(found):
            return np.asarray(default)
        after = np.searchsorted(found, starts)
        return np.where(after < len(found), found[np.minimum(after, len(found) - 1)], default)


def digits(raw, starts, ends):
    """The decimal numbers of at most 18 digits at ``raw[starts[i]:ends[i]]`` (0 where empty), vectorised."""
    import numpy as np

    width = int((ends - starts).max(initial=0))
    if width == 0:
        return np.zeros(len(starts), dtype=np.int64)
    at = starts[:, None] + np.arange(width)
    inside = at < ends[:, None]
    values = np.where(inside, raw[np.minimum(at, len(raw) - 1)].astype(np.int64) - 48, 0)
    powers = 10 ** np.clip((ends - starts)[:, None] - 1 - np.arange(width), 0, None)
    return (values * np.where(inside, powers, 0)).sum(axis=1)


def numbers(strings: "pa.Array", kind: str = "int") -> "pa.Array":
    """Decimal text to int64 or float64 (Arrow's parsers: floats correctly rounded, as Python's float())."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(strings, pa.int64() if kind == "int" else pa.float64())


def line_numbers(text: str, before: int = 0):
    """``(number, line)`` for each line of ``text`` (split at ``\\n``, a ``\\r`` before it dropped), numbered
    after ``before`` lines."""
    lines = text.split("\n")
    if lines and lines[-1] == "":  # a final newline adds no line
        lines.pop()
    for number, line in enumerate(lines, start=before + 1):
        yield number, line[:-1] if line.endswith("\r") else line


def lines_one_by_one(tally, texts: list[str], numbers: list[int]):
    """``(number, raw, line)`` for the lines a vectorised pass left (``texts``, numbered ``numbers``), each
    counted by ``tally`` (a :class:`~labkit.parsers.base.LineTally`): ``raw`` without its line end, ``line``
    cleaned; blank lines are counted and skipped."""
    for number, raw in zip(numbers, texts):
        raw = raw.removesuffix("\n").removesuffix("\r")
        line = tally.prepare(raw)
        if line is not None:
            yield number, raw, line


def match_lines(lines: "pa.Array", pattern: str) -> tuple["pa.StructArray", "np.ndarray"]:
    """Every line matched against ``pattern`` (RE2, named groups; an absent group is ""): the groups, and the
    indices of the lines that matched."""
    import numpy as np
    import pyarrow.compute as pc

    groups = pc.extract_regex(lines, pattern)
    matched = np.flatnonzero(groups.is_valid().to_numpy(zero_copy_only=False))
    return groups.filter(groups.is_valid()), matched


def field(groups: "pa.StructArray", name: str, kind: str = "str") -> "pa.Array":
    """One group of :func:`match_lines` as ``kind``: "str", "int" or "float"; an absent group is null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = groups.field(name)
    if kind == "str":
        return values
    present = pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.string()), values)
    return pc.cast(present, pa.int64() if kind == "int" else pa.float64())


class SeqWindow:
    """Rows held until no later line can come before them in sequence order.

    Rows arrive in output order. Once a row's ``seq`` is more than ``reach`` below the highest seq seen,
    no later line may still name a lower seq (ping's 16-bit numbers unwrap that way; for other logs a line
    that far out of order is refused), so rows below that mark are released sorted by ``keys``.
    """

    def __init__(self, schema: "pa.Schema", keys: list[str], reach: int):
        self.schema = schema
        self.keys = keys
        self.reach = reach
        self.pending = schema.empty_table()
        self.released_below: int | None = None  # every seq below this was released
        self.min_seen: int | None = None
        self.max_seen: int | None = None

    def see(self, seqs, where: str = "") -> None:
        """Note seqs met on lines (rows or not); a seq below what was released cannot be placed."""
        import numpy as np

        seqs = np.asarray(seqs, dtype=np.int64)
        if not len(seqs):
            return
        low, high = int(seqs.min()), int(seqs.max())
        if self.released_below is not None and low < self.released_below:
            raise ParseError(f"{where}seq {low} comes after seq {self.max_seen}: more than {self.reach} out of "
                             "order, which labkit does not reorder")
        self.min_seen = low if self.min_seen is None else min(self.min_seen, low)
        self.max_seen = high if self.max_seen is None else max(self.max_seen, high)

    def add(self, table: "pa.Table") -> None:
        import pyarrow as pa

        if table.num_rows:
            self.pending = pa.concat_tables([self.pending, table.select(self.schema.names).cast(self.schema)])

    def ready_below(self) -> int | None:
        """The seq below which rows can be released now, or None."""
        return None if self.max_seen is None else self.max_seen - self.reach

    def release(self, below: int | None = None) -> "pa.Table":
        """Pending rows with seq below ``below`` (all of them for None), sorted by ``keys``."""
        import numpy as np
        import pyarrow.compute as pc

        if below is None:
            out, self.pending = self.pending, self.schema.empty_table()
        else:
            seqs = self.pending["seq"].to_numpy()
            if (np.diff(seqs) >= 0).all():  # in order, as logs mostly are: the rows to release lead
                cut = int(np.searchsorted(seqs, below))
                out, self.pending = self.pending.slice(0, cut), self.pending.slice(cut)
            else:
                early = pc.less(self.pending["seq"], below)
                out, self.pending = self.pending.filter(early), self.pending.filter(pc.invert(early))
        if below is not None:
            self.released_below = below if self.released_below is None else max(self.released_below, below)
        return sort_by(out, self.keys)


def sort_by(table: "pa.Table", keys: list[str]) -> "pa.Table":
    """``table`` sorted by ``keys`` (stable), without the copy when it already is (logs mostly are)."""
    import numpy as np

    if table.num_rows < 2:
        return table
    columns = [table[key].to_numpy(zero_copy_only=False) for key in keys]
    later = np.zeros(table.num_rows - 1, dtype=bool)  # row i+1 already after row i on an earlier key
    for values in columns:
        if values.dtype == object:  # nulls in an integer column: fall back to Arrow's sort
            return table.sort_by([(key, "ascending") for key in keys])
        step = np.diff(values.astype(np.float64 if values.dtype.kind == "f" else np.int64))
        if (step[~later] < 0).any():
            return table.sort_by([(key, "ascending") for key in keys])
        later |= step > 0
    return table


def arrow_schema(dtypes: dict[str, str]) -> "pa.Schema":
    """An Arrow schema from pandas-style dtype names: int64/Int64 -> int64, float64, bool, string."""
    import pyarrow as pa

    types = {"int64": pa.int64(), "Int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_(), "string": pa.string()}
    return pa.schema([(name, types[dtype]) for name, dtype in dtypes.items()])

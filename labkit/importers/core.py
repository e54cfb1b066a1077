"""Importing logs collected elsewhere into a labkit run.

Two steps, as a probe does it: first every file is read and parsed
(:func:`read_log`), and anything wrong (a missing file, a file of another kind,
a file with nothing in it that the parser knows, a line that may be a reply the
parser cannot read, an iperf3 report of an error) stops the import before a run
is touched; then the rows go through the run store (:func:`import_files`):
one cell per file, the file copied byte for byte into ``raw/<kind>/``, the
manifest saying where each file came from, and ``samples.parquet`` cast to the
declared schema.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from labkit.errors import LabkitError
from labkit.importers.kinds import KINDS, Kind, Options, guess_kind
from labkit.importers.source import LogSource, NotJSON, Spool, ahead, read_document
from labkit.parsers import ParseError, ParseResult
from labkit.provenance import utc_now, utc_stamp
from labkit.store import Run, find_run

#: How many unrecognised lines of a file the manifest keeps (all are counted).
MANIFEST_UNRECOGNISED_LINES = 50
#: A log with nothing of its kind in this much text is the wrong file: refused without reading the rest.
FIRST_TEXT_BYTES = 16 * 2**20
#: A report (JSON) is parsed whole, at about seven times its size in memory (a 48 MB ghz report peaked at 455 MB):
#: a larger one is refused, before it is read whole, to keep an import within 500 MB. That is ~330,000 ghz
#: calls' details, or a day of iperf3 intervals at one a second.
MAX_REPORT_BYTES = 32 * 2**20
#: The columns every row of a run has, which the run gives and no file does.
RUN_COLUMNS = ("run_id", "experiment", "cell_id", "attempt", "source_file")


def read_source(path: str | os.PathLike) -> tuple[bytes, str]:
    """The bytes of a (small) file as stored, and its text (gunzipped when it is gzip, whatever its name)."""
    source = LogSource(Path(path))
    text = "".join(source.chunks())
    return Path(path).read_bytes(), text


@dataclass
class ParsedFile:
    """One file read and parsed, ready to become a cell of a run; its rows wait in a spool until then.

    ``close()`` removes the spool (:func:`import_files` does, and so does garbage collection).
    """

    kind: str
    path: Path
    source: LogSource
    result: ParseResult
    spool: Spool
    counts: dict[str, int]  # rows, ok and duplicate rows, as the table has them
    first: dict[str, Any] = field(default_factory=dict)  # each string column's first value
    options: Options = field(default_factory=Options)
    planned: dict[str, Any] = field(default_factory=dict)  # the run's columns, as the spooled rows have them
    # The columns the file's summary gives every row, as each spooled batch had them (a header read after rows
    # were spooled changes them: those rows are then given the file's final values).
    summary_columns: list[dict[str, Any]] = field(default_factory=list)
    repeated: dict = field(default_factory=dict)  # columns of one value, made once (see _table)

    @property
    def sha256(self) -> str:
        return self.source.sha256

    def tables(self, run_columns: dict[str, Any] | None = None) -> Iterator[Any]:
        """The file's rows in its kind's table, a batch at a time (Arrow): the run's columns as planned, or as
        ``run_columns`` says."""
        changed = {**self.late_columns(), **(run_columns or {})}
        for table in self.spool.batches():
            yield _with_constants(table, changed) if changed else table

    def late_columns(self) -> dict[str, Any]:
        """The columns the file's summary gives, as it ended, when a spooled batch had other values; else none."""
        final = KINDS[self.kind].summary_columns(self.result, self.options)
        return final if any(used != final for used in self.summary_columns) else {}

    def as_planned(self, run_columns: dict[str, Any]) -> bool:
        """Whether the spool holds exactly the rows the run gets: its columns as planned, no late column."""
        return run_columns == self.planned and not self.late_columns()

    @property
    def rows(self) -> list[dict[str, Any]]:
        """Every row, as dicts, without the run's columns (for a small file: all in memory)."""
        return [{k: v for k, v in row.items() if k not in RUN_COLUMNS} for table in self.tables()
                for row in table.to_pylist()]

    def tally(self) -> dict[str, int]:
        """Lines parsed and unrecognised, and rows by what they are: samples, lost, duplicates."""
        counts = self.result.counts
        tally = {"lines": int(counts.get("lines", 0))}
        if KINDS[self.kind].line_oriented:
            tally.update(parsed=int(counts["parsed"]), unrecognised=int(counts["unrecognised"]), blank=int(counts["blank"]))
        else:
            # A JSON report is read whole: every line is part of the one document.
            tally.update(parsed=tally["lines"], unrecognised=0, blank=0)
        tally["rows"] = self.counts["rows"]
        if KINDS[self.kind].table == "series":
            tally["samples"] = self.counts["ok"]
            tally["duplicates"] = self.counts["duplicate"]
            tally["lost"] = tally["rows"] - tally["samples"] - tally["duplicates"]
        return tally

    def describe(self) -> str:
        """One line for a person: lines parsed/unrecognised, then what the rows are."""
        t = self.tally()
        name = self.path.name
        if self.kind == "iperf3":
            return f"{name}: iperf3 report, {self.result.counts['intervals']} intervals, {t['rows']} rows; " + _iperf3_end(
                self.result.summary)
        if self.kind == "ghz":
            counts = self.result.counts
            text = (f"{name}: ghz report of {counts['calls']} calls, {counts['details']} with details: "
                    f"{t['samples']} ok, {t['lost']} failed")
            if counts["details"] == 0:
                text += " (no per-call details in the report: its summary is kept in the manifest)"
            return text
        lost_word = {"go-echo": "missing"}.get(self.kind, "lost")
        text = (f"{name}: {t['lines']} lines: {t['parsed']} parsed, {t['unrecognised']} unrecognised, {t['blank']} blank; "
                f"{t['rows']} rows: {t['samples']} samples, {t['lost']} {lost_word}, {t['duplicates']} duplicates")
        units = {k[len("unit_"):]: v for k, v in self.result.counts.items() if k.startswith("unit_")}
        if len(units) > 1 or (units and "ms" not in units):
            text += " (times written in " + ", ".join(f"{u} ×{n}" for u, n in sorted(units.items())) + ")"
        return text

    def close(self) -> None:
        self.spool.close()


def _table(columns: dict[str, Any], schema, rows: int, repeated: dict | None = None):
    """An Arrow table of ``schema`` from columns given as arrays, or as one value for every row (None: null).

    ``repeated`` keeps the arrays of one value made so far, for the next batch to take a slice of: a file's batches
    mostly have the same values (the run's columns, the host names), and making each anew copied ~400 MB of the
    same few strings for a 200 MB ping log."""
    import pyarrow as pa

    arrays = []
    for column in schema:
        value = columns.get(column.name)
        if value is None or isinstance(value, (str, int, float, bool)):
            key = (column.name, value)
            made = (repeated or {}).get(key)
            if made is None or len(made) < rows:
                made = pa.nulls(rows, column.type) if value is None else pa.repeat(pa.scalar(value, column.type), rows)
                if repeated is not None:
                    repeated[key] = made
            arrays.append(made.slice(0, rows))
        elif isinstance(value, (pa.Array, pa.ChunkedArray)):
            arrays.append(value.cast(column.type))
        else:
            arrays.append(pa.array(value, column.type, from_pandas=True))
    return pa.Table.from_arrays(arrays, schema=schema)


def read_log(kind: str, path: str | os.PathLike, *, tz: str | None = None, src: str | None = None,
             dst: str | None = None, on_read: Callable[[int], None] | None = None,
             planned: dict[str, Any] | None = None) -> ParsedFile:
    """Read and parse one file as ``kind``, in bounded memory; refuse, with a hint, a file in which nothing of
    that kind is found, and any file whose rows would be wrong. ``on_read`` is told the bytes of a log read so
    far, as it goes. ``planned``: the run's columns the rows are spooled with (:func:`import_files` plans them;
    by default, a new run of this file alone with no id)."""
    if kind not in KINDS:
        raise LabkitError(f"unknown kind {kind!r}; use one of {', '.join(KINDS)}")
    spec: Kind = KINDS[kind]
    path = Path(path).absolute()
    options = Options(tz=tz, src=src, dst=dst)
    planned = planned or _run_columns("", experiment_for([kind]), f"{kind}:{path.name}", 1, f"raw/{kind}/{path.name}")
    spool = Spool(table_schema(spec.table), planned["run_id"])
    parsed = ParsedFile(kind=kind, path=path, source=LogSource(path, on_read), result=ParseResult(None, {}), spool=spool,
                        counts={"rows": 0, "ok": 0, "duplicate": 0}, options=options, planned=planned)
    try:
        (_read_lines if spec.line_oriented else _read_report)(parsed, spec)
        if reason := spec.refusal(parsed.result):
            raise LabkitError(f"{path}: {reason}; nothing imported")
    except BaseException:
        spool.close()
        raise
    spool.finish()
    return parsed


def _spool(parsed: ParsedFile, batches: Iterable[Any], result: ParseResult) -> None:
    """Keep a parser's rows as rows of the kind's table (``result``: the parser's so far), counting what the tally
    needs and each string column's first value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    spec = KINDS[parsed.kind]
    for batch in batches:
        if not batch.num_rows:
            continue
        parsed.counts["rows"] += batch.num_rows
        for column in ("ok", "duplicate"):  # what every series parser's rows say of themselves
            if column in batch.column_names:
                parsed.counts[column] += int(pc.sum(batch[column]).as_py() or 0)
        for column in batch.schema:
            if column.type == pa.string() and column.name not in parsed.first:
                values = batch[column.name].drop_null()
                if len(values):
                    parsed.first[column.name] = values[0].as_py()
        summary_columns = spec.summary_columns(result, parsed.options)
        if summary_columns not in parsed.summary_columns:
            parsed.summary_columns.append(summary_columns)
        columns = {**spec.rows(batch, result, parsed.options, parsed.first), **summary_columns, **parsed.planned}
        parsed.spool.write(_table(columns, parsed.spool.schema, batch.num_rows, parsed.repeated))


def _read_lines(parsed: ParsedFile, spec: Kind) -> None:
    """A log, a chunk of lines at a time: rows spooled, the file refused as soon as it cannot be imported."""
    parser, heads = spec.parser(parsed.options), []

    def prepared():  # on another thread, a chunk or two ahead
        for text in parsed.source.chunks():
            heads.append(text[:65536]) if not heads else None
            yield parser.prepare(text)

    head = ""
    try:
        for chunk in ahead(prepared()):
            head = heads[0]
            batches = parser.feed_prepared(chunk)
            so_far = parser.result()
            _spool(parsed, batches, so_far)
            _check_so_far(parsed, so_far, head)
        batches = parser.finish()
        _spool(parsed, batches, parser.result())
    except ParseError as exc:
        raise LabkitError(f"{parsed.path}: {exc.format_message()}{_hint(parsed.kind, head, parsed.path)}") from None
    parsed.result = result = parser.result()
    if result.counts["lines"] == result.counts["blank"]:
        raise LabkitError(f"{parsed.path}: the file is empty")
    if not parsed.counts["rows"]:
        raise LabkitError(f"{parsed.path}: no {parsed.kind} output found ({_parsed_of(result)}){_hint(parsed.kind, head, parsed.path)}")
    if result.unreadable_lines:
        number, line = result.unreadable_lines[0]
        raise LabkitError(f"{parsed.path}: line {number} cannot be read as {parsed.kind} output and may be a reply: "
                          f"{line.strip()[:80]!r}; nothing imported")


def _parsed_of(result: ParseResult) -> str:
    counts = result.counts
    first = result.unrecognised_lines[0] if result.unrecognised_lines else None
    sample = f"; line {first[0]}: {first[1].strip()[:60]!r}" if first else ""
    return f"{counts['parsed']} of {counts['lines']} lines parsed, {counts['unrecognised']} unrecognised{sample}"


def _check_so_far(parsed: ParsedFile, result: ParseResult, head: str) -> None:
    """Stop reading a file that cannot be imported: a line that may be a reply went unread (its rows would
    count a probe lost that was not), or no row of its kind in the first :data:`FIRST_TEXT_BYTES` (a parser
    holds rows back only for a few MB; a line such as ping's closing statistics found in another tool's log
    is no row). Both wait for rows: a file of another kind has none, and is told so at its end."""
    if result.unreadable_lines and parsed.counts["rows"]:
        number, line = result.unreadable_lines[0]
        raise LabkitError(f"{parsed.path}: line {number} cannot be read as {parsed.kind} output and may be a reply: "
                          f"{line.strip()[:80]!r}; nothing imported")
    if parsed.source.text_bytes >= FIRST_TEXT_BYTES and not parsed.counts["rows"]:
        raise LabkitError(f"{parsed.path}: no {parsed.kind} output in its first {FIRST_TEXT_BYTES // 2**20} MiB "
                          f"({_parsed_of(result)}){_hint(parsed.kind, head, parsed.path)}")


def _read_report(parsed: ParsedFile, spec: Kind) -> None:
    """A report (JSON), read whole: it is one document, and never large."""
    import pyarrow as pa

    try:
        parsed.source, text = read_document(parsed.path, MAX_REPORT_BYTES)
    except NotJSON as exc:
        hint = _hint(parsed.kind, exc.head, parsed.path)
        raise LabkitError(f"{parsed.path}: not JSON (it starts {exc.head[:20]!r}){hint}") from None
    if not text.strip():
        raise LabkitError(f"{parsed.path}: the file is empty")
    try:
        parsed.result = spec.parse(text, parsed.options)
    except ParseError as exc:
        raise LabkitError(f"{parsed.path}: {exc.format_message()}{_hint(parsed.kind, text, parsed.path)}") from None
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:  # JSON, but not of this shape
        raise LabkitError(f"{parsed.path}: not {spec.description}: {type(exc).__name__}: {exc}") from None
    rows, parsed.result.rows = parsed.result.rows, None
    _spool(parsed, [pa.Table.from_pandas(rows, preserve_index=False)], parsed.result)


def _iperf3_end(summary: dict[str, Any]) -> str:
    """The end summary in a few words: bytes and rates both ways, then TCP retransmits or UDP losses."""
    def side(word: str, key: str) -> str:
        bytes_, bps = summary.get(f"{key}_bytes"), summary.get(f"{key}_bps")
        return f"{word} {bytes_} bytes ({bps / 1e6:.1f} Mbit/s)" if bytes_ is not None and bps is not None else f"{word} ?"

    text = f"{summary.get('protocol')} {side('sent', 'sent')}, {side('received', 'received')}"
    if summary.get("lost_packets") is not None:
        return text + (f", {summary['lost_packets']} of {summary['packets']} datagrams lost "
                       f"({summary['lost_percent']:.2f} %), jitter {summary['jitter_ms']:.3f} ms")
    return text + f", {summary.get('retransmits')} retransmits"


def _hint(kind: str, text: str, path: Path) -> str:
    guess = guess_kind(text)
    if guess and guess != kind:
        return f"; it looks like {guess} output: labkit import {guess} {path}"
    return f"; is it {KINDS[kind].description}?"


# --- into a run ----------------------------------------------------------------------------------


def experiment_for(kinds: Iterable[str]) -> str:
    """The experiment of an imported run from the kinds of files it holds.

    ping and the 2016 Go echo log together are the ping-vs-echo experiment
    (research brief, experiment 2); one kind alone is ``import-<kind>``;
    any other mix is ``import-<kind>+<kind>...``.
    """
    kinds = set(kinds)
    if {"ping", "go-echo"} <= kinds:
        return "ping-vs-echo"
    return "import-" + "+".join(sorted(kinds))


def table_schema(table: str):
    from labkit.schemas import IPERF3_SCHEMA, SERIES_SCHEMA

    return {"series": SERIES_SCHEMA, "iperf3": IPERF3_SCHEMA}[table]


@dataclass
class ImportResult:
    """The run written to, and what each file became."""

    run: Any  # labkit.store.Run
    files: list[ParsedFile]
    cells: list[str]
    experiment: str
    parquet: Path


def _single_table(parsed: list[ParsedFile], previous: list[dict]) -> str:
    """The one table every file (and every file already in the run) goes into; refuse a mix."""
    tables = {KINDS[p.kind].table for p in parsed} | {KINDS[i["kind"]].table for i in previous}
    if len(tables) > 1:
        raise LabkitError(
            "iperf3 intervals and round-trip series do not share a run (each run has one table); "
            "import the iperf3 reports into a run of their own"
        )
    (table,) = tables
    return table


def _log_file(log: Callable[[str], None], parsed: ParsedFile) -> None:
    """One line of counts per file, and its first unrecognised lines (the rest are in the manifest)."""
    log(parsed.describe())
    for number, text in parsed.result.unrecognised_lines[:3]:
        log(f"  unrecognised line {number}: {text.strip()[:100]!r}")
    if len(parsed.result.unrecognised_lines) > 3:
        log(f"  ... {len(parsed.result.unrecognised_lines) - 3} more unrecognised lines listed in the manifest")


def import_files(
    specs: Sequence[tuple[str, str | os.PathLike]],
    *,
    out: str,
    runs_dir: str | os.PathLike | None = None,
    append: bool = False,
    tz: str | None = None,
    src: str | None = None,
    dst: str | None = None,
    log: Callable[[str], None] | None = None,
    progress: Callable[[Path, int], None] | None = None,
) -> ImportResult:
    """Import ``(kind, path)`` pairs into a new run named ``out`` (or, with ``append``, the existing run ``out``).

    Every file is parsed before the run is created or changed, each in bounded memory. Each file becomes one
    cell: its bytes copied to ``raw/<kind>/<name>``, its rows written to ``samples.parquet`` a batch at a
    time (no journal: the Parquet file is replaced whole, so an interrupted import leaves the run as it was),
    and the manifest's ``imports`` list records its absolute path, sha256, size, kind, the parser's counts
    and summary, and up to :data:`MANIFEST_UNRECOGNISED_LINES` unrecognised lines. ``log`` receives one line
    per file (counts) and per notable event; ``progress`` is told each file's bytes read so far, as it is read.
    """
    log = log or (lambda line: None)
    if not specs:
        raise LabkitError("nothing to import: give a KIND and at least one FILE")
    # The rows are spooled with the run's columns a new run will have (its id from the time now), so that the spool
    # of a single file can become the run's samples.parquet as it is, not be written a second time.
    stamp, experiment, taken = utc_stamp(), experiment_for(kind for kind, _ in specs), set()
    parsed: list[ParsedFile] = []
    try:
        for kind, path in specs:
            on_read = (lambda done, path=Path(path): progress(path, done)) if progress else None
            raw_name = _unique_raw_name(lambda name, kind=kind: (kind, name) in taken, Path(path).name)
            taken.add((kind, raw_name))
            planned = _run_columns(f"{stamp}-{out}", experiment, f"{kind}:{raw_name}", 1, f"raw/{kind}/{raw_name}")
            parsed.append(read_log(kind, path, tz=tz, src=src, dst=dst, on_read=on_read, planned=planned))
        _refuse_repeats(parsed)
        return _into_run(parsed, out=out, runs_dir=runs_dir, append=append, log=log, stamp=stamp,
                         config={"command": "labkit import", "tz": tz, "src": src, "dst": dst})
    finally:
        for p in parsed:
            p.close()


def _into_run(parsed: list[ParsedFile], *, out: str, runs_dir, append: bool, log, stamp: str,
              config: dict) -> ImportResult:
    """The second step: the files' rows, read and found importable, into a new run or after a run's own."""
    run = find_run(out, runs_dir) if append else None
    previous = _check_importable(run) if append else []
    table = _single_table(parsed, previous)
    known = {i["sha256"]: i["cell_id"] for i in previous}
    for p in parsed:
        if p.sha256 in known:
            raise LabkitError(f"{p.path} is already in {run.path} as cell {known[p.sha256]} (same sha256)")
    experiment = experiment_for([i["kind"] for i in previous] + [p.kind for p in parsed])
    if append:
        old_experiment = run.manifest.get("experiment")
        run.update(status="running", ended_utc=None)
    else:
        run = Run.create(runs_dir, out, experiment, {**config, "table": table}, stamp=stamp)
        old_experiment = experiment
        run.update(imports=[], table=table)
    imports = list(previous)
    try:
        relabelled = {}
        if old_experiment != experiment:  # rows carry the run's experiment: the earlier cells' are relabelled
            relabelled = {record["cell_id"]: run.begin_cell(record["cell_id"]) for record in imports}
            log(f"experiment {old_experiment} -> {experiment}: {len(imports)} earlier cell(s) relabelled")
        records = [_new_cell(run, p) for p in parsed]
        run_columns = [_run_columns(run.run_id, experiment, r["cell_id"], r["attempt"], r["raw"]) for r in records]
        with ThreadPoolExecutor(1) as copier:  # the kernel copies the files while the rows are written
            copied = copier.submit(lambda: [p.source.copy_to(run.path / r["raw"]) for p, r in zip(parsed, records)])
            if not imports and len(parsed) == 1 and parsed[0].as_planned(run_columns[0]):
                parquet = run.install_samples(parsed[0].spool.path)  # the spool is the run's table
            else:
                rows = ahead(_all_rows(run, experiment, relabelled, parsed, run_columns))
                parquet = run.write_samples(rows, table_schema(table))
            copied.result()
        for record in imports:
            if record["cell_id"] in relabelled:
                record["attempt"] = relabelled[record["cell_id"]]
                run.complete_cell(record["cell_id"], record["attempt"], record["tally"]["rows"])
        for p, record in zip(parsed, records):
            run.complete_cell(record["cell_id"], record["attempt"], record["tally"]["rows"])
            _log_file(log, p)
        run.update(experiment=experiment, imports=imports + records, table=table)
        run.set_status("complete")
    except BaseException:
        run.set_status("failed" if not append else "complete")
        raise
    return ImportResult(run=run, files=parsed, cells=[r["cell_id"] for r in records], experiment=experiment,
                        parquet=parquet)


def _all_rows(run, experiment: str, relabelled: dict[str, int], parsed: list[ParsedFile], run_columns: list[dict]):
    """Every row of the run, a batch at a time: the rows already in it (relabelled where their cell is), then
    each new file's, with the run's columns."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    existing = run.path / "samples.parquet"
    if existing.exists():
        for batch in pq.ParquetFile(existing).iter_batches(batch_size=2**17):
            table = pa.Table.from_batches([batch])
            if relabelled:
                attempts = table["attempt"]
                for cell_id, attempt in relabelled.items():
                    attempts = pc.if_else(pc.equal(table["cell_id"], cell_id), attempt, attempts)
                table = table.set_column(table.schema.get_field_index("attempt"), "attempt", attempts)
                table = table.set_column(table.schema.get_field_index("experiment"), "experiment",
                                         pa.repeat(experiment, table.num_rows))
            yield table
    for p, columns in zip(parsed, run_columns):
        yield from p.tables(columns)


def _run_columns(run_id: str, experiment: str, cell_id: str, attempt: int, source_file: str) -> dict[str, Any]:
    """The columns every row of a cell of a run has (:data:`RUN_COLUMNS`)."""
    return dict(zip(RUN_COLUMNS, (run_id, experiment, cell_id, attempt, source_file)))


def _with_constants(table, values: dict[str, Any]):
    """``table`` with each column named in ``values`` set to that one value in every row."""
    import pyarrow as pa

    for name, value in values.items():
        index = table.schema.get_field_index(name)
        column = table.schema.field(index)
        filled = pa.nulls(table.num_rows, column.type) if value is None else pa.repeat(pa.scalar(value, column.type),
                                                                                      table.num_rows)
        table = table.set_column(index, column, filled)
    return table


def _refuse_repeats(parsed: list[ParsedFile]) -> None:
    seen: dict[str, Path] = {}
    for p in parsed:
        if p.sha256 in seen:
            raise LabkitError(f"{p.path} has the same content as {seen[p.sha256]}; give each file once")
        seen[p.sha256] = p.path


def _check_importable(run) -> list[dict[str, Any]]:
    """The run's earlier imports; refuse runs that were not made by ``labkit import`` or lost their rows."""
    imports = run.manifest.get("imports")
    if imports is None:
        raise LabkitError(
            f"{run.path} is a {run.manifest.get('experiment')} run, not one made by `labkit import`; import into a new run"
        )
    if imports and not (run.path / "samples.parquet").exists():
        raise LabkitError(
            f"{run.path} has no samples.parquet (an import that failed?); appending would lose its rows: "
            "import into a new run"
        )
    return [dict(i) for i in imports]


def _unique_raw_name(taken: Callable[[str], bool], name: str) -> str:
    """``name``, or ``stem-2.suffix``, ``stem-3.suffix``... the first that is not ``taken``."""
    candidate, n = name, 1
    while taken(candidate):
        n += 1
        stem, dot, suffix = name.partition(".")
        candidate = f"{stem}-{n}{dot}{suffix}"
    return candidate


def _new_cell(run, p: ParsedFile) -> dict[str, Any]:
    """A new cell for a file: its name under raw/ taken, its attempt begun, its manifest record."""
    raw_name = _unique_raw_name(lambda name: (run.raw_dir / p.kind / name).exists(), p.path.name)
    (run.raw_dir / p.kind).mkdir(parents=True, exist_ok=True)
    raw_path = run.raw_dir / p.kind / raw_name
    raw_path.touch()  # taken (the copy is made while the rows are written)
    source_file = raw_path.relative_to(run.path).as_posix()
    cell_id = f"{p.kind}:{raw_name}"
    stat = p.path.stat()
    return {
        "cell_id": cell_id,
        "attempt": run.begin_cell(cell_id),
        "kind": p.kind,
        "probe": KINDS[p.kind].probe,
        "source": {
            "path": str(p.path),
            "sha256": p.sha256,
            "size_bytes": p.source.size_bytes,
            "gzip": p.source.gzip,
            "mtime_utc": _utc(stat.st_mtime),
        },
        "raw": source_file,
        "imported_utc": utc_now(),
        "options": {"tz": p.options.tz, "tz_assumed_utc": p.options.tz is None and p.kind in ("go-echo", "idle-step"),
                    "src": p.options.src, "dst": p.options.dst},
        "tally": p.tally(),
        "parser_counts": {k: int(v) for k, v in p.result.counts.items()},
        "parser_summary": p.result.summary,
        "unrecognised_lines": [[n, text] for n, text in p.result.unrecognised_lines[:MANIFEST_UNRECOGNISED_LINES]],
        "sha256": p.sha256,
    }


def _utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

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

import gzip
import hashlib
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from labkit.errors import LabkitError
from labkit.importers.kinds import KINDS, Kind, Options, guess_kind
from labkit.parsers import ParseError, ParseResult
from labkit.provenance import utc_now

#: How many unrecognised lines of a file the manifest keeps (all are counted).
MANIFEST_UNRECOGNISED_LINES = 50
_GZIP_MAGIC = b"\x1f\x8b"


def read_source(path: str | os.PathLike) -> tuple[bytes, str]:
    """The bytes of a file as stored, and its text (gunzipped when it is gzip, whatever its name).

    Text is UTF-8; a file that is not is read as Latin-1, so every byte
    becomes a character and reaches the parser (which counts what it does not
    recognise) instead of stopping the import.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise LabkitError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise LabkitError(f"{path} is a directory, not a log file") from None
    except PermissionError:
        raise LabkitError(f"cannot read {path}: permission denied") from None
    payload = data
    if data[:2] == _GZIP_MAGIC:
        try:
            payload = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise LabkitError(f"{path}: damaged gzip file ({exc})") from None
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        text = payload.decode("latin-1")
    return data, text


@dataclass
class ParsedFile:
    """One file read and parsed, ready to become a cell of a run."""

    kind: str
    path: Path
    data: bytes
    result: ParseResult
    rows: list[dict[str, Any]]
    options: Options = field(default_factory=Options)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def tally(self) -> dict[str, int]:
        """Lines parsed and unrecognised, and rows by what they are: samples, lost, duplicates."""
        counts = self.result.counts
        tally = {"lines": int(counts.get("lines", 0))}
        if KINDS[self.kind].line_oriented:
            tally.update(parsed=int(counts["parsed"]), unrecognised=int(counts["unrecognised"]), blank=int(counts["blank"]))
        else:
            # A JSON report is read whole: every line is part of the one document.
            tally.update(parsed=tally["lines"], unrecognised=0, blank=0)
        tally["rows"] = len(self.rows)
        if KINDS[self.kind].table == "series":
            tally["samples"] = sum(1 for r in self.rows if r["ok"])
            tally["duplicates"] = sum(1 for r in self.rows if r["duplicate"])
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


def read_log(kind: str, path: str | os.PathLike, *, tz: str | None = None, src: str | None = None,
             dst: str | None = None) -> ParsedFile:
    """Read and parse one file as ``kind``; refuse, with a hint, a file in which nothing of that kind is found."""
    if kind not in KINDS:
        raise LabkitError(f"unknown kind {kind!r}; use one of {', '.join(KINDS)}")
    spec: Kind = KINDS[kind]
    path = Path(path).absolute()
    data, text = read_source(path)
    if not text.strip():
        raise LabkitError(f"{path}: the file is empty")
    options = Options(tz=tz, src=src, dst=dst)
    try:
        result = spec.parse(text, options)
    except ParseError as exc:
        raise LabkitError(f"{path}: {exc.format_message()}{_hint(kind, text, path)}") from None
    rows = spec.rows(result, options)
    if spec.line_oriented and not rows:
        counts = result.counts
        first = result.unrecognised_lines[0] if result.unrecognised_lines else None
        sample = f"; line {first[0]}: {first[1].strip()[:60]!r}" if first else ""
        raise LabkitError(
            f"{path}: no {kind} output found ({counts['parsed']} of {counts['lines']} lines parsed, "
            f"{counts['unrecognised']} unrecognised{sample}){_hint(kind, text, path)}"
        )
    # Rows that read fine can still be wrong: a reply line not read turns its probe into a loss.
    if result.unreadable_lines:
        number, line = result.unreadable_lines[0]
        raise LabkitError(f"{path}: line {number} cannot be read as {kind} output and may be a reply: "
                          f"{line.strip()[:80]!r}; nothing imported")
    if reason := spec.refusal(result):
        raise LabkitError(f"{path}: {reason}; nothing imported")
    return ParsedFile(kind=kind, path=path, data=data, result=result, rows=rows, options=options)


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
) -> ImportResult:
    """Import ``(kind, path)`` pairs into a new run named ``out`` (or, with ``append``, the existing run ``out``).

    Every file is parsed before the run is created or changed. Each file
    becomes one cell; its rows are journaled, its bytes copied to
    ``raw/<kind>/<name>``, and the manifest's ``imports`` list records its
    absolute path, sha256, size, kind, the parser's counts and summary, and
    up to :data:`MANIFEST_UNRECOGNISED_LINES` unrecognised lines. ``log``
    receives one line per file (counts) and per notable event.
    """
    from labkit.store import Run, find_run

    log = log or (lambda line: None)
    if not specs:
        raise LabkitError("nothing to import: give a KIND and at least one FILE")
    parsed = [read_log(kind, path, tz=tz, src=src, dst=dst) for kind, path in specs]
    _refuse_repeats(parsed)

    if append:
        run = find_run(out, runs_dir)
        previous = _check_importable(run)
    else:
        previous = []
    table = _single_table(parsed, previous)
    known = {i["sha256"]: i["cell_id"] for i in previous}
    for p in parsed:
        if p.sha256 in known:
            raise LabkitError(f"{p.path} is already in {run.path} as cell {known[p.sha256]} (same sha256)")

    kinds = [i["kind"] for i in previous] + [p.kind for p in parsed]
    experiment = experiment_for(kinds)
    if append:
        old_experiment = run.manifest.get("experiment")
        run.update(status="running", ended_utc=None)
    else:
        config = {"command": "labkit import", "tz": tz, "src": src, "dst": dst, "table": table}
        run = Run.create(runs_dir, out, experiment, config)
        old_experiment = experiment
        run.update(imports=[], table=table)

    imports = list(previous)
    cells = []
    try:
        if append and old_experiment != experiment:
            # Rows carry the run's experiment: relabel the cells already here,
            # as a new attempt of each, so the journal stays append-only.
            for record in imports:
                record["attempt"] = _relabel_cell(run, record["cell_id"], experiment)
            log(f"experiment {old_experiment} -> {experiment}: {len(imports)} earlier cell(s) relabelled")
        for p in parsed:
            record = _write_cell(run, p, experiment)
            imports.append(record)
            cells.append(record["cell_id"])
            _log_file(log, p)
        run.update(experiment=experiment, imports=imports, table=table)
        parquet = run.finalize(table_schema(table))
        run.set_status("complete")
    except BaseException:
        run.set_status("failed" if not append else "complete")
        raise
    finally:
        run.close()
    return ImportResult(run=run, files=parsed, cells=cells, experiment=experiment, parquet=parquet)


def _refuse_repeats(parsed: list[ParsedFile]) -> None:
    seen: dict[str, Path] = {}
    for p in parsed:
        if p.sha256 in seen:
            raise LabkitError(f"{p.path} has the same content as {seen[p.sha256]}; give each file once")
        seen[p.sha256] = p.path


def _check_importable(run) -> list[dict[str, Any]]:
    """The run's earlier imports; refuse runs that were not made by ``labkit import`` or lost their journal."""
    imports = run.manifest.get("imports")
    if imports is None:
        raise LabkitError(
            f"{run.path} is a {run.manifest.get('experiment')} run, not one made by `labkit import`; import into a new run"
        )
    if imports and not (run.path / "samples.jsonl").exists():
        raise LabkitError(
            f"{run.path} has no samples.jsonl journal (a shipped sample?); appending would lose its rows: import into a new run"
        )
    return [dict(i) for i in imports]


def _unique_raw_name(run, kind: str, name: str) -> str:
    directory = run.raw_dir / kind
    candidate, n = name, 1
    while (directory / candidate).exists():
        n += 1
        stem, dot, suffix = name.partition(".")
        candidate = f"{stem}-{n}{dot}{suffix}"
    return candidate


def _copy_raw(run, kind: str, name: str, data: bytes) -> Path:
    directory = run.raw_dir / kind
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / name
    tmp = directory / f".{name}.tmp"
    tmp.write_bytes(data)
    os.replace(tmp, target)
    return target


def _write_cell(run, p: ParsedFile, experiment: str) -> dict[str, Any]:
    raw_name = _unique_raw_name(run, p.kind, p.path.name)
    raw_path = _copy_raw(run, p.kind, raw_name, p.data)
    source_file = raw_path.relative_to(run.path).as_posix()
    cell_id = f"{p.kind}:{raw_name}"
    attempt = run.begin_cell(cell_id)
    fixed = {"run_id": run.run_id, "experiment": experiment, "cell_id": cell_id, "attempt": attempt,
             "source_file": source_file}
    written = run.append({**row, **fixed} for row in p.rows)
    run.complete_cell(cell_id, attempt, written)
    stat = p.path.stat()
    return {
        "cell_id": cell_id,
        "attempt": attempt,
        "kind": p.kind,
        "probe": KINDS[p.kind].probe,
        "source": {
            "path": str(p.path),
            "sha256": p.sha256,
            "size_bytes": len(p.data),
            "gzip": p.data[:2] == _GZIP_MAGIC,
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


def _relabel_cell(run, cell_id: str, experiment: str) -> int:
    rows = [r for r in run.final_rows() if r.get("cell_id") == cell_id]
    attempt = run.begin_cell(cell_id)
    written = run.append({**r, "experiment": experiment, "attempt": attempt} for r in rows)
    run.complete_cell(cell_id, attempt, written)
    return attempt


def _utc(timestamp: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

"""The run store: one directory per run, append-only while measuring, Parquet when done.

Layout of a run directory ``<runs>/<UTC-timestamp>-<name>/``::

    manifest.json     format version, resolved config, host facts, provenance,
                      the machine that made it, UTC start/end, status (running|complete|interrupted|failed),
                      baselines per host pair ("a-b": ping before/after each
                      attempt, iperf3)
    samples.jsonl     the journal: one JSON object per measured sample, appended
                      and flushed as it arrives, so a crash or SIGKILL loses at
                      most the line being written
    cells.jsonl       one line per cell event (start, complete, skipped), which
                      is what makes ``--resume`` possible
    processes.json    processes started on hosts and not yet stopped, so that
                      ``labkit runs cleanup`` can stop them after a SIGKILL
    raw/              every tool's raw output, kept
    samples.parquet   written on completion: the rows of each cell's last
                      complete attempt, cast to the experiment's schema

Every file that is rewritten (manifest, processes, Parquet) is written to a
temporary file and renamed, so a reader never sees half of one.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import re
import shutil
import stat
import sys
import threading
from pathlib import Path
from typing import Any, Iterable

from labkit.errors import LabkitError
from labkit.files import read_errors, read_file
from labkit.provenance import labkit_provenance, this_machine, utc_now, utc_stamp

#: Format 2 (2026-11): baselines are always nested per host pair (format 1 load runs kept them flat).
FORMAT_VERSION = 2
STATUSES = ("running", "complete", "interrupted", "failed")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: The most of a manifest labkit reads, and how deep its JSON may nest: labkit writes tens of KiB, 8 levels deep; a
#: larger or deeper one was not written by labkit, and reading it would cost memory or Python's recursion limit.
MAX_MANIFEST_BYTES = 16 * 2**20
MAX_MANIFEST_DEPTH = 32
#: The files labkit writes in a run directory besides its manifest: each a regular file when there (a FIFO would block
#: whoever reads it, a device never end).
RUN_FILES = ("samples.jsonl", "cells.jsonl", "processes.json", "samples.parquet")
#: The manifest's fields every reader relies on, and the JSON type labkit writes each as (None: absent or null).
_MANIFEST_TYPES = {"run_id": str, "status": str, "experiment": str, "started_utc": str,
                   "config": (dict, type(None)), "provenance": (dict, type(None)), "hosts": (dict, type(None)),
                   "emulator": (dict, type(None)), "replicate": (dict, type(None)), "baselines": (dict, type(None)),
                   "servers": (dict, list, type(None)), "resumed_utc": (list, type(None))}


def runs_root(runs_dir: str | os.PathLike | None = None) -> Path:
    """Where runs live: ``runs_dir``, else ``$LABKIT_RUNS``, else ``data/runs``."""
    return Path(runs_dir or os.environ.get("LABKIT_RUNS") or "data/runs")


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _json_default(value):
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "__dataclass_fields__"):
        return dataclasses.asdict(value)
    raise TypeError(f"cannot store {type(value).__name__} in a manifest")


class Run:
    """One run directory. Create with :meth:`create`, reopen with :meth:`open`.

    What a person reads of a run (its summary, its report, how it shows in a notebook) needs the experiments and the
    report, which sit above the store: it is :class:`labkit.results.Run`, the run labkit hands out."""

    def __init__(self, path: Path, manifest: dict[str, Any]):
        self.path = Path(path)
        self.manifest = manifest
        self._lock = threading.Lock()
        self._journal = None

    # -- creation and loading ------------------------------------------------------
    @classmethod
    def create(cls, runs_dir, name: str, experiment: str, config: dict[str, Any], stamp: str | None = None) -> "Run":
        """Make a new run directory and write its manifest with status ``running``. Its id is ``<stamp>-<name>``
        (``stamp`` the UTC time now unless given), with ``-2``, ``-3``... after it when that is taken."""
        if not _NAME_RE.match(name):
            raise LabkitError(f"run name {name!r} must be letters, digits, '.', '_' or '-' (at most 64)")
        root = runs_root(runs_dir)
        path = _new_run_dir(root, name, stamp)
        manifest = {
            "format_version": FORMAT_VERSION,
            "run_id": path.name,
            "name": name,
            "experiment": experiment,
            "config": config,
            "provenance": labkit_provenance(),
            "machine": this_machine(),  # where it was made: `labkit runs cleanup` acts only on this machine's runs
            "hosts": {},
            "started_utc": utc_now(),
            "ended_utc": None,
            "status": "running",
            "resumed_utc": [],
        }
        run = cls(path, manifest)
        run.save_manifest()
        return run

    @classmethod
    def of(cls, run: "Run") -> "Run":
        """``run`` as this class: the same directory and manifest (``run`` itself when it is one already). A run the
        experiments or an import made becomes the :class:`labkit.results.Run` labkit hands out."""
        return run if isinstance(run, cls) else cls(run.path, run.manifest)

    @classmethod
    def open(cls, path: str | os.PathLike) -> "Run":
        """Open an existing run; refuse, with a clear message, one this labkit cannot read: a manifest that is not
        labkit's (too large, too deep, not a JSON object of labkit's fields), or a file of the run directory that is
        not a regular file or, for samples.parquet, not Parquet. Only bounded reads: nothing here can block or fill
        memory, whatever the directory holds."""
        path = Path(path)
        manifest_path = path / "manifest.json"
        if not os.path.lexists(manifest_path):
            raise LabkitError(f"{path} is not a labkit run (no manifest.json)")
        data = read_file(manifest_path, "run manifest", max_bytes=MAX_MANIFEST_BYTES)
        try:
            manifest = json.loads(data)
        except RecursionError:
            raise LabkitError(f"{manifest_path} nests deeper than a labkit manifest ({MAX_MANIFEST_DEPTH} levels)") \
                from None
        except ValueError as exc:  # not JSON, or not text at all
            raise LabkitError(f"{manifest_path} is not valid JSON: {exc}") from None
        if not isinstance(manifest, dict):
            raise LabkitError(f"{manifest_path} is not a labkit manifest (a JSON object)")
        if _nesting_depth(manifest) > MAX_MANIFEST_DEPTH:
            raise LabkitError(f"{manifest_path} nests deeper than a labkit manifest ({MAX_MANIFEST_DEPTH} levels)")
        version = manifest.get("format_version")
        if not isinstance(version, int):
            raise LabkitError(f"{path}: manifest has no format_version; it was not written by labkit")
        if version > FORMAT_VERSION:
            raise LabkitError(
                f"{path} uses run format {version}, newer than this labkit reads ({FORMAT_VERSION}); upgrade labkit"
            )
        if version < FORMAT_VERSION:
            manifest = upgrade_manifest(manifest, path)
        for field, types in _MANIFEST_TYPES.items():
            if not isinstance(manifest.get(field), types):
                raise LabkitError(f"{manifest_path}: its {field} is not what labkit writes there")
        _check_run_files(path)
        return cls(path, manifest)

    # -- manifest ------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        return self.manifest["run_id"]

    @property
    def status(self) -> str:
        return self.manifest["status"]

    def save_manifest(self) -> None:
        with self._lock:
            atomic_write_text(self.path / "manifest.json", json.dumps(self.manifest, indent=2, default=_json_default))

    def update(self, **fields: Any) -> None:
        """Set top-level manifest fields and write the manifest."""
        self.manifest.update(fields)
        self.save_manifest()

    def set_status(self, status: str) -> None:
        if status not in STATUSES:
            raise ValueError(f"unknown run status {status!r}")
        fields = {"status": status}
        if status != "running":
            fields["ended_utc"] = utc_now()
        self.update(**fields)

    def made_here(self) -> bool:
        """Whether this machine made the run (its manifest's ``machine``); a run that does not say was not."""
        return self.manifest.get("machine") == this_machine()

    def mark_resumed(self) -> None:
        self.manifest.setdefault("machine", this_machine())  # a run made before runs recorded it: resumed here
        self.manifest["resumed_utc"].append(utc_now())
        self.update(status="running", ended_utc=None)

    @property
    def attempt(self) -> int:
        """How many times the run was resumed: 0 for the first attempt, which is what baselines are keyed by."""
        return len(self.manifest.get("resumed_utc", []))

    # -- baselines -----------------------------------------------------------------
    def record_baseline(self, src: str, dst: str, key: str, values: dict[str, Any]) -> None:
        """Keep a baseline measured from ``src`` to ``dst`` as ``baselines["src-dst"][key]`` and save the manifest."""
        self.manifest.setdefault("baselines", {}).setdefault(f"{src}-{dst}", {})[key] = values
        self.save_manifest()

    def baselines(self, src: str | None = None, dst: str | None = None) -> dict[str, Any]:
        """The baselines of one host pair (``ping_before_0``, ``ping_after_0``, ``iperf3``...); {} when there are none.

        Without ``src``/``dst`` the run must have at most one pair.
        """
        pairs = self.manifest.get("baselines") or {}
        if src is None and dst is None:
            if len(pairs) > 1:
                raise LabkitError(f"{self.run_id} has baselines of {len(pairs)} host pairs ({', '.join(pairs)}); name one")
            return next(iter(pairs.values()), {})
        return pairs.get(f"{src}-{dst}", {})

    def ping_baseline(self, src: str | None = None, dst: str | None = None, when: str = "before") -> dict[str, Any] | None:
        """The first ping baseline of a host pair taken ``when`` ("before" or "after" the cells), or None.

        It holds ``transmitted``, ``received`` and ``rtt_min_ms`` / ``rtt_avg_ms``
        / ``rtt_max_ms`` / ``rtt_mdev_ms`` as ping printed them.
        """
        values = self.baselines(src, dst)
        keys = sorted((key for key in values if key.startswith(f"ping_{when}_")), key=lambda k: int(k.rsplit("_", 1)[1]))
        return values[keys[0]] if keys else None

    # -- raw output ----------------------------------------------------------------
    @property
    def raw_dir(self) -> Path:
        return self.path / "raw"

    def raw_text(self, name: str) -> str:
        """A raw output kept under raw/, as text (gunzipped when its name ends in ``.gz``)."""
        data = (self.raw_dir / name).read_bytes()
        return (gzip.decompress(data) if name.endswith(".gz") else data).decode()

    def write_raw(self, name: str, text: str) -> Path:
        """Keep a tool's raw output under raw/ (atomically)."""
        path = self.raw_dir / name
        atomic_write_text(path, text)
        return path

    def write_raw_gzip(self, name: str, text: str) -> Path:
        """Keep a large raw record under raw/ gzip-compressed (``name`` ends in .gz), atomically and byte for byte the
        same for the same text (no time in the gzip header)."""
        path = self.raw_dir / name
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(gzip.compress(text.encode(), compresslevel=6, mtime=0))
        os.replace(tmp, path)
        return path

    # -- the journal -----------------------------------------------------------------
    def append(self, rows: Iterable[dict[str, Any]]) -> int:
        """Append samples to the journal and flush them to the OS; return how many were written.

        Each line is flushed at once: a measured sample costs far more than a
        write, and a SIGKILL must not take buffered samples with it.
        """
        count = 0
        with self._lock:
            if self._journal is None:
                self._journal = open(self.path / "samples.jsonl", "a", encoding="utf-8")
            for row in rows:
                self._journal.write(json.dumps(row, default=_json_default) + "\n")
                count += 1
            self._journal.flush()
        return count

    def journal_rows(self) -> list[dict[str, Any]]:
        """Every sample in the journal; a torn last line (from a kill mid-write) is skipped."""
        path = self.path / "samples.jsonl"
        if not path.exists():
            return []
        rows = []
        with open(path, encoding="utf-8") as journal:
            for line in journal:
                try:
                    rows.append(json.loads(line))
                except (ValueError, RecursionError):  # torn, or not a row labkit writes
                    continue
        return rows

    def close(self) -> None:
        with self._lock:
            if self._journal is not None:
                self._journal.close()
                self._journal = None

    # -- cells -----------------------------------------------------------------------
    def _cell_event(self, event: dict[str, Any]) -> None:
        with self._lock, open(self.path / "cells.jsonl", "a", encoding="utf-8") as cells:
            cells.write(json.dumps({**event, "t_utc": utc_now()}) + "\n")

    def cell_events(self) -> list[dict[str, Any]]:
        path = self.path / "cells.jsonl"
        if not path.exists():
            return []
        events = []
        for line in path.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except (ValueError, RecursionError):
                continue
        return events

    def begin_cell(self, cell_id: str) -> int:
        """Record that a cell starts; return its attempt number (1 for the first)."""
        attempts = [e["attempt"] for e in self.cell_events() if e["cell"] == cell_id and e["event"] == "start"]
        attempt = max(attempts, default=0) + 1
        self._cell_event({"cell": cell_id, "attempt": attempt, "event": "start"})
        return attempt

    def complete_cell(self, cell_id: str, attempt: int, rows: int, **measured: Any) -> None:
        """Record that a cell's attempt ended with ``rows`` rows; ``measured``: what else the cell timed (a sweep's
        warm-up calls, ``warmup_s``)."""
        self._cell_event({"cell": cell_id, "attempt": attempt, "event": "complete", "rows": rows, **measured})

    def skip_cell(self, cell_id: str, reason: str) -> None:
        self._cell_event({"cell": cell_id, "attempt": 0, "event": "skipped", "reason": reason})

    def finished_cells(self) -> dict[str, dict[str, Any]]:
        """cell id -> its last 'complete' or 'skipped' event; these are not run again on resume."""
        done = {}
        for event in self.cell_events():
            if event["event"] in ("complete", "skipped"):
                done[event["cell"]] = event
        return done

    # -- processes on hosts ------------------------------------------------------------
    def _processes_path(self) -> Path:
        return self.path / "processes.json"

    def processes(self) -> list[dict[str, Any]]:
        try:
            return json.loads(self._processes_path().read_text())
        except (FileNotFoundError, ValueError):
            return []

    def replicates(self) -> list["Run"]:
        """The runs of this run's ``--runs`` group in the same runs directory (labkit.experiments.run_replicates),
        in replicate order; just this run when it was made alone."""
        group = (self.manifest.get("replicate") or {}).get("group")
        if not group:
            return [self]
        found = [type(self).of(run) for run in list_runs(self.path.parent)
                 if (run.manifest.get("replicate") or {}).get("group") == group]
        return sorted(found, key=lambda run: run.manifest["replicate"]["index"])

    def register_process(self, host: str, pid: int, argv: list[str], start_ticks: int | None = None) -> None:
        """Remember a process started on ``host`` until :meth:`unregister_process`; ``start_ticks`` (when it
        started, from /proc/<pid>/stat) lets ``labkit runs cleanup`` tell it from a later process given its pid."""
        with self._lock:  # read and write as one step: --mesh starts processes from several threads
            entries = [e for e in self.processes() if not (e["host"] == host and e["pid"] == pid)]
            entries.append({"host": host, "pid": pid, "argv": argv, "started_utc": utc_now(), "start_ticks": start_ticks})
            atomic_write_text(self._processes_path(), json.dumps(entries, indent=2))

    def unregister_process(self, host: str, pid: int) -> None:
        with self._lock:
            entries = [e for e in self.processes() if not (e["host"] == host and e["pid"] == pid)]
            atomic_write_text(self._processes_path(), json.dumps(entries, indent=2))

    # -- the final dataset -------------------------------------------------------------
    def final_rows(self) -> list[dict[str, Any]]:
        """Journal rows of each cell's last complete attempt; rows of redone attempts are left out."""
        complete = {e["cell"]: e["attempt"] for e in self.cell_events() if e["event"] == "complete"}
        return [row for row in self.journal_rows() if complete.get(row.get("cell_id")) == row.get("attempt")]

    def finalize(self, schema) -> Path:
        """Write samples.parquet (atomically) from :meth:`final_rows`, cast to ``schema`` (a pyarrow schema)."""
        import pyarrow as pa

        rows = self.final_rows()
        columns = {field.name: [row.get(field.name) for row in rows] for field in schema}
        return self.write_samples([pa.Table.from_pydict(columns, schema=schema)], schema)

    def write_samples(self, tables: Iterable[Any], schema) -> Path:
        """Write samples.parquet (atomically) from ``tables`` (Arrow, with every column of ``schema``), one at a
        time: a table of any size is written in bounded memory."""
        path = self.path / "samples.parquet"
        tmp = path.with_name(".samples.parquet.tmp")
        try:
            with samples_writer(tmp, schema, self.run_id) as writer:
                for table in tables:
                    writer.write_table(table.select(schema.names).cast(writer.schema))
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, path)
        return path

    def install_samples(self, source: Path) -> Path:
        """Make a finished Parquet file of this run's rows (written by :func:`samples_writer` for this run's id)
        its samples.parquet, atomically: copied beside it, then renamed."""
        path = self.path / "samples.parquet"
        tmp = path.with_name(".samples.parquet.tmp")
        try:
            shutil.copyfile(source, tmp)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, path)
        return path

    def finish(self, schema) -> "Run":
        """Write the final Parquet dataset and mark the run complete."""
        self.finalize(schema)
        self.set_status("complete")
        return self

    def samples(self):
        """The run's samples as a DataFrame: the Parquet file, or the journal of an unfinished run."""
        import pandas as pd

        path = self.path / "samples.parquet"
        if path.exists():
            frame = _exact_stamps(pd.read_parquet(path), path)
        else:
            rows = self.journal_rows()
            frame = pd.DataFrame(rows)
            for name in EXACT_NS_COLUMNS:
                if name in frame.columns and frame[name].dtype != "int64":
                    frame[name] = pd.array([row.get(name) for row in rows], dtype="Int64")
        return _with_server_stamps(_with_call_columns(_with_stack_columns(frame, self.manifest), self.manifest))

    def __repr__(self) -> str:
        return f"<labkit Run {self.run_id}: {self.manifest.get('experiment')}, {self.status}>"

    def row_counts(self) -> dict[str, int]:
        journal = self.journal_rows()
        cells = self.cell_events()
        counts = {
            "journal_rows": len(journal),
            "cells_complete": len({e["cell"] for e in cells if e["event"] == "complete"}),
            "cells_skipped": len({e["cell"] for e in cells if e["event"] == "skipped"}),
        }
        parquet = self.path / "samples.parquet"
        if parquet.exists():
            import pyarrow.parquet as pq

            counts["parquet_rows"] = pq.ParquetFile(parquet).metadata.num_rows
        return counts


def samples_writer(path, schema, run_id: str):
    """A Parquet writer of a run's samples to ``path``: ``schema`` with the run's id and the format version in
    its metadata.

    Dictionaries for the strings (a few values repeated over every row), deltas for the integers (counters and
    times going up), and min/max statistics for the numbers only: with Arrow's defaults (a dictionary tried for
    every column, statistics of every string), a 3-million-row import spent 0.9 s writing, with these 0.5 s.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    stored = schema.with_metadata({b"labkit.run_id": run_id.encode(),
                                   b"labkit.format_version": str(FORMAT_VERSION).encode()})
    strings = [field.name for field in stored if pa.types.is_string(field.type)]
    return pq.ParquetWriter(path, stored, use_dictionary=strings,
                            write_statistics=[field.name for field in stored if field.name not in strings],
                            column_encoding={field.name: "DELTA_BINARY_PACKED" for field in stored
                                             if pa.types.is_integer(field.type)})


def _nesting_depth(value: Any) -> int:
    """How deep ``value`` (parsed JSON) nests: a scalar 0, ``[]`` 1, ``{"a": [1]}`` 2; counted without recursion."""
    deepest, pending = 0, [(value, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth + 1)
            pending.extend((item, depth + 1) for item in (value.values() if isinstance(value, dict) else value))
    return deepest


def _check_run_files(path: Path) -> None:
    """Refuse a run directory whose files (:data:`RUN_FILES`) are not what labkit writes: each must be a regular file
    (checked through a link, before anything opens it), and samples.parquet a Parquet file (its footer read)."""
    for name in RUN_FILES:
        try:
            mode = os.stat(path / name).st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise LabkitError(f"{path / name}: cannot read: {exc.strerror or exc}") from None
        if not stat.S_ISREG(mode):
            raise LabkitError(f"{path / name} is not a regular file (a directory, device, FIFO or socket); "
                              "labkit writes none")
    parquet = path / "samples.parquet"
    if parquet.exists():
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            pq.read_metadata(parquet)
        except (pa.ArrowException, OSError):
            raise LabkitError(f"{parquet} is not a Parquet file (labkit writes one when a run completes)") from None


def _new_run_dir(root: Path, name: str, stamp: str | None = None) -> Path:
    """A fresh ``<root>/<UTC time>-<name>/raw``; a runs directory labkit cannot write to is one line."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        stamp, suffix = stamp or utc_stamp(), 1
        while True:
            path = root / (f"{stamp}-{name}" if suffix == 1 else f"{stamp}-{name}-{suffix}")
            try:
                path.mkdir()  # atomic: of two runs started within the same second, one gets the next suffix
                break
            except FileExistsError:
                suffix += 1
        (path / "raw").mkdir()
    except (FileExistsError, NotADirectoryError):
        raise LabkitError(f"runs directory {root} is not a directory (give another with --runs-dir)") from None
    except PermissionError:
        raise LabkitError(f"cannot write to runs directory {root}: permission denied "
                          "(give another with --runs-dir)") from None
    except OSError as exc:
        raise LabkitError(f"cannot make a run in {root}: {exc.strerror or exc}") from None
    return path


def upgrade_manifest(manifest: dict[str, Any], path: Path) -> dict[str, Any]:
    """Bring a manifest of an older format up to :data:`FORMAT_VERSION` (in memory; the file is left as written).

    - 1 -> 2: a load run's ping baselines, kept flat in format 1
      (``baselines.ping_before_0``), move under their host pair
      (``baselines["client-server"].ping_before_0``), as every other
      experiment has always kept them.
    """
    version = manifest.get("format_version")
    if version == 1:
        baselines = manifest.get("baselines") or {}
        flat = {key: value for key, value in baselines.items() if key.startswith("ping_")}
        if flat:
            config = manifest.get("config") or {}
            pair = f"{config.get('client', 'unknown')}-{config.get('server', 'unknown')}"
            nested = {key: value for key, value in baselines.items() if key not in flat}
            nested.setdefault(pair, {}).update(flat)
            manifest["baselines"] = nested
        manifest["format_version"] = version = 2
    if version != FORMAT_VERSION:
        raise LabkitError(
            f"{path} uses run format {manifest.get('format_version')}, which this labkit cannot read "
            f"(it reads formats 1 to {FORMAT_VERSION})"
        )
    return manifest


_named_skipped: set[str] = set()


def say_skipped(path: Path, reason: str) -> None:
    """Name a run directory :func:`list_runs` skips, one line on stderr, once a process (a command may list the runs
    more than once: `labkit compare`, a side each)."""
    if str(path) not in _named_skipped:
        _named_skipped.add(str(path))
        print(f"labkit: warning: skipped {path}: {reason}", file=sys.stderr)


def list_runs(runs_dir=None, skipped=say_skipped) -> list[Run]:
    """Every readable run under the runs directory, oldest first. One that cannot be read (see :meth:`Run.open`)
    is skipped, and ``skipped(path, reason)`` told (by default, one line on stderr; None: nothing)."""
    root = runs_root(runs_dir)
    runs = []
    for manifest in sorted(root.glob("*/manifest.json")):
        try:
            runs.append(Run.open(manifest.parent))
        except LabkitError as exc:
            if skipped is not None:
                skipped(manifest.parent, exc.message)
    return runs


def find_resumable(experiment: str, config: dict[str, Any], runs_dir=None) -> Run | None:
    """The newest interrupted or failed run of ``experiment`` whose recorded config is ``config``, or None.

    Configs are compared as the manifest stores them (JSON), so a tuple given now matches the list kept then.
    """
    wanted = json.loads(json.dumps(config, default=_json_default))
    for run in reversed(list_runs(runs_dir)):
        if (run.manifest.get("experiment") == experiment and run.status in ("interrupted", "failed")
                and run.manifest.get("config") == wanted):
            return run
    return None


def find_run(ref: str, runs_dir=None) -> Run:
    """A run by path, by directory name, or by a unique part of its name (e.g. the run name)."""
    candidate = Path(ref)
    if (candidate / "manifest.json").exists():
        return Run.open(candidate)
    root = runs_root(runs_dir)
    if (root / ref / "manifest.json").exists():
        return Run.open(root / ref)
    matches = [p.parent for p in sorted(root.glob("*/manifest.json")) if ref in p.parent.name]
    if len(matches) == 1:
        return Run.open(matches[0])
    if not matches:
        raise LabkitError(f"no run {ref!r} in {root} (see `labkit runs list`)")
    names = ", ".join(m.name for m in matches[:5])
    raise LabkitError(f"{ref!r} matches {len(matches)} runs in {root} ({names}{', ...' if len(matches) > 5 else ''}); be more specific")


#: The experiments whose rows name their gRPC stack (labkit.schemas.STACK_FIELDS), and their client: labkit's
#: Python echo, or for load a tool (ghz and h2load: no gRPC client of labkit's).
_STACK_CLIENT = {"idle-step": "python", "series": "python", "upload": "python", "load": None}


#: The columns labkit-go's gRPC load adds to a load cell (each message timed); older runs and ghz cells have none.
LOAD_MESSAGE_COLUMNS = ("messages", "messages_ok", "message_mean_ms", "message_p50_ms", "message_p90_ms",
                        "message_p99_ms", "message_intended_mean_ms", "message_intended_p50_ms",
                        "message_intended_p90_ms", "message_intended_p99_ms")


#: Wall-clock stamps in ns that may be null (a server that sent none): pandas reads a nullable int64 column as
#: float64, whose 53-bit mantissa keeps a 2026 UTC stamp to 256 ns only; these are read as nullable Int64 instead.
EXACT_NS_COLUMNS = ("server_recv_utc_ns", "server_send_utc_ns")


def _exact_stamps(frame, path):
    """``frame`` (the Parquet file at ``path``) with its nullable ns stamps read again as exact Int64."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    inexact = [name for name in EXACT_NS_COLUMNS if name in frame.columns and frame[name].dtype != "int64"]
    if inexact:
        table = pq.read_table(path, columns=inexact)
        for name in inexact:
            frame[name] = table.column(name).to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get).array
    return frame


def _with_server_stamps(frame):
    """Rows of the echo probes written before servers stamped a call's arrival and reply (sweep/3, series/2):
    their server sent no stamps, as a server of today may not."""
    if "server_ns" not in frame.columns or "server_recv_utc_ns" in frame.columns:
        return frame
    return frame.assign(server_recv_utc_ns=None, server_send_utc_ns=None)


def _with_call_columns(frame, manifest: dict):
    """A load run written before compression, streaming and the payload's kind were knobs: its calls were
    uncompressed unary ones of random bytes, timed by the call (ghz)."""
    if manifest.get("experiment") != "load" or frame.empty:
        return frame
    if "rpc" not in frame.columns:
        frame = frame.assign(compression="none", rpc="unary", messages_per_call=1)
    if "payload_kind" not in frame.columns:
        frame = frame.assign(payload_kind="random")
    return frame.assign(**{column: None for column in ("ladder_step", *LOAD_MESSAGE_COLUMNS) if column not in frame.columns})


def _with_stack_columns(frame, manifest: dict):
    """Every experiment's rows with their gRPC stack: a series' one stack from its config (its rows share the
    schema of imports, which have none); rows written before the stack was recorded as they were measured then,
    Python with no option."""
    experiment = manifest.get("experiment")
    if experiment not in _STACK_CLIENT or frame.empty or "server_impl" in frame.columns:
        return frame
    config = manifest.get("config") or {}
    if experiment == "series":  # one stack a run, in its config
        return frame.assign(client_impl=(config.get("client_impl") or ["python"])[0],
                            server_impl=(config.get("server_impl") or ["python"])[0],
                            grpc_options=";".join(sorted(config.get("grpc_option") or [])) or None)
    return frame.assign(client_impl=_STACK_CLIENT[experiment], server_impl="python", grpc_options=None)

"""The run store on a real filesystem: journal, cells, resume bookkeeping, Parquet, format versions."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import labkit

from labkit.errors import LabkitError
from labkit.store import FORMAT_VERSION, Run, find_run, list_runs

SCHEMA = pa.schema([
    pa.field("cell_id", pa.string()), pa.field("attempt", pa.int32()),
    pa.field("seq", pa.int64()), pa.field("rtt_ms", pa.float64()), pa.field("ok", pa.bool_()),
])


def test_a_new_run_records_provenance_and_status(tmp_path):
    run = Run.create(tmp_path, "unit", "idle-step", {"sizes": [1, 2]})
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert manifest["format_version"] == FORMAT_VERSION
    assert manifest["status"] == "running" and manifest["started_utc"].endswith("Z")
    assert manifest["provenance"]["labkit_version"]
    assert len(manifest["provenance"]["git"]["commit"] or "") in (0, 40)
    assert manifest["config"] == {"sizes": [1, 2]}
    assert run.path.name.endswith("-unit") and (run.path / "raw").is_dir()
    run.set_status("complete")
    assert Run.open(run.path).manifest["ended_utc"].endswith("Z")


def test_only_the_last_complete_attempt_of_each_cell_reaches_parquet(tmp_path):
    run = Run.create(tmp_path, "resume", "idle-step", {})
    first = run.begin_cell("A")
    run.append([{"cell_id": "A", "attempt": first, "seq": 0, "rtt_ms": 1.0, "ok": True}])
    # Cell A is interrupted; B completes; A is then redone completely.
    second_b = run.begin_cell("B")
    run.append([{"cell_id": "B", "attempt": second_b, "seq": i, "rtt_ms": 2.0, "ok": True} for i in range(2)])
    run.complete_cell("B", second_b, 2)
    redo = run.begin_cell("A")
    assert redo == 2
    run.append([{"cell_id": "A", "attempt": redo, "seq": i, "rtt_ms": 3.0, "ok": i == 0} for i in range(2)])
    run.complete_cell("A", redo, 2)
    run.skip_cell("C", "not root")
    assert set(run.finished_cells()) == {"A", "B", "C"}
    table = pq.read_table(run.finalize(SCHEMA))
    assert table.schema.equals(SCHEMA, check_metadata=False)
    rows = sorted(zip(table["cell_id"].to_pylist(), table["attempt"].to_pylist(), table["seq"].to_pylist()))
    assert rows == [("A", 2, 0), ("A", 2, 1), ("B", 1, 0), ("B", 1, 1)]
    assert len(run.journal_rows()) == 5  # the abandoned attempt stays in the journal: nothing is lost
    assert run.row_counts() == {"journal_rows": 5, "cells_complete": 2, "cells_skipped": 1, "parquet_rows": 4}


def test_journal_survives_sigkill_of_the_writer(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal, sys
        from labkit.store import Run
        run = Run.create({str(tmp_path)!r}, "killed", "idle-step", {{}})
        for seq in range(50):
            run.append([{{"seq": seq, "rtt_ms": 1.5}}])
        print(run.path, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL
    run = Run.open(proc.stdout.strip())
    assert [row["seq"] for row in run.journal_rows()] == list(range(50))
    assert run.status == "running"


def test_a_torn_last_journal_line_is_skipped_not_fatal(tmp_path):
    run = Run.create(tmp_path, "torn", "idle-step", {})
    run.append([{"seq": 0}, {"seq": 1}])
    with open(run.path / "samples.jsonl", "a") as journal:
        journal.write('{"seq": 2, "rtt')
    assert [row["seq"] for row in Run.open(run.path).journal_rows()] == [0, 1]


def test_other_format_versions_are_refused_clearly(tmp_path):
    run = Run.create(tmp_path, "old", "idle-step", {})
    manifest = json.loads((run.path / "manifest.json").read_text())
    for version, expected in ((FORMAT_VERSION + 1, "newer than this labkit"), (0, "cannot read")):
        manifest["format_version"] = version
        (run.path / "manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(LabkitError, match=expected):
            Run.open(run.path)
    proc = labkit("runs", "show", str(run.path))
    assert proc.returncode == 2 and "cannot read" in proc.stderr and "Traceback" not in proc.stderr


def test_runs_are_found_by_path_id_or_unique_name(tmp_path):
    first = Run.create(tmp_path, "alpha", "idle-step", {})
    Run.create(tmp_path, "beta", "idle-step", {})
    assert find_run("alpha", tmp_path).path == first.path
    assert find_run(str(first.path)).path == first.path
    assert len(list_runs(tmp_path)) == 2
    with pytest.raises(LabkitError, match="no run"):
        find_run("gamma", tmp_path)


def test_runs_list_and_show_through_the_console_script(tmp_path):
    run = Run.create(tmp_path, "shown", "idle-step", {})
    run.append([{"seq": 0}])
    listed = labkit("runs", "list", "--runs-dir", str(tmp_path), check=True)
    assert run.run_id in listed.stdout and "running" in listed.stdout
    shown = labkit("runs", "show", "shown", "--runs-dir", str(tmp_path), check=True)
    assert "journal_rows: 1" in shown.stdout
    missing = labkit("runs", "show", "nope", "--runs-dir", str(tmp_path))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1

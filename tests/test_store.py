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


def test_format_1_load_runs_get_their_baselines_nested_per_pair(tmp_path):
    """The shipped load samples were written in format 1, with the ping baselines flat in the manifest."""
    import shutil

    from conftest import REPO

    copy = tmp_path / "load-small"
    shutil.copytree(REPO / "data" / "samples" / "load-small", copy)
    written = json.loads((copy / "manifest.json").read_text())
    assert written["format_version"] == 1 and "ping_before_0" in written["baselines"]
    run = Run.open(copy)
    assert run.manifest["format_version"] == FORMAT_VERSION
    assert run.manifest["baselines"] == {"a-b": written["baselines"]}
    assert run.ping_baseline() == written["baselines"]["ping_before_0"]
    assert run.ping_baseline("a", "b", when="after") == written["baselines"]["ping_after_0"]
    assert run.ping_baseline("b", "a") is None
    # Upgrading happens on load; the file stays as it was written until the run is saved again.
    assert json.loads((copy / "manifest.json").read_text()) == written


def test_ping_baseline_is_the_first_attempts(tmp_path):
    run = Run.create(tmp_path, "baselines", "idle-step", {})
    run.record_baseline("a", "b", "ping_before_1", {"rtt_avg_ms": 2.0})
    run.record_baseline("a", "b", "ping_before_0", {"rtt_avg_ms": 1.0})
    run.record_baseline("b", "a", "ping_before_0", {"rtt_avg_ms": 3.0})
    reopened = Run.open(run.path)
    assert reopened.ping_baseline("a", "b") == {"rtt_avg_ms": 1.0}
    assert reopened.ping_baseline("b", "a") == {"rtt_avg_ms": 3.0}
    with pytest.raises(LabkitError, match="2 host pairs"):
        reopened.ping_baseline()


@pytest.mark.parametrize("sample, columns", [
    ("idle-step-cubic", {"payload_bytes", "median_ms", "rtt_multiple"}),
    ("series-wan", {"ticks", "median_ms", "vs_ping"}),
    ("upload-small", {"transport", "median_mb_per_s", "failed"}),
    ("load-small", {"transport", "rps", "latency_p99_ms"}),
])
def test_every_experiment_run_has_a_summary(sample, columns):
    from conftest import REPO
    from labkit.results import Run

    run = Run.open(REPO / "data" / "samples" / sample)
    table = run.summary()
    assert columns <= set(table.columns) and len(table) > 0
    if sample == "idle-step-cubic":
        # The smallest requests take one round trip whatever the condition: about one ping RTT.
        smallest = table[table["payload_bytes"] == table["payload_bytes"].min()]
        assert ((smallest["rtt_multiple"] > 1.0) & (smallest["rtt_multiple"] < 1.1)).all()


def test_an_import_has_no_summary_to_give(tmp_path):
    from conftest import REPO
    from labkit.results import Run

    with pytest.raises(LabkitError, match="has no summary"):
        Run.open(REPO / "data" / "samples" / "orca-2016").summary()


@pytest.mark.parametrize("experiment, command", [
    ("idle-step", "sweep"), ("series", "series"), ("upload", "upload"), ("load", "load")])
def test_cleanup_names_the_resume_command_of_the_runs_own_experiment(tmp_path, experiment, command):
    """A run left 'running' by a killed controller: cleanup marks it interrupted and says how to resume it."""
    inventory = tmp_path / "inventory.toml"
    inventory.write_text('[hosts.here]\nssh = "local"\n')
    run = Run.create(tmp_path / "runs", "killed", experiment, {"inventory": str(inventory)})
    run.update(controller={"pid": 2**22 + 1, "host": "elsewhere"})  # no such controller alive
    proc = labkit("runs", "cleanup", run.run_id, "--runs-dir", str(tmp_path / "runs"), check=True)
    assert f"continue it with `labkit {command} --resume {run.run_id}`" in proc.stdout
    assert Run.open(run.path).status == "interrupted"


def test_raw_outputs_are_read_back_as_written_gzipped_or_not(tmp_path):
    import gzip

    run = Run.create(tmp_path, "raw", "import-ping", {})
    run.write_raw("ping.txt", "64 bytes from 198.18.0.2\n")
    (run.raw_dir / "log.tsv.gz").write_bytes(gzip.compress("a\tb\n".encode()))
    assert run.raw_text("ping.txt") == "64 bytes from 198.18.0.2\n"
    assert run.raw_text("log.tsv.gz") == "a\tb\n"


def test_runs_created_at_once_with_one_name_never_collide(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from labkit.store import Run

    with ThreadPoolExecutor(max_workers=16) as pool:
        runs = list(pool.map(lambda i: Run.create(tmp_path, "same", "idle-step", {"i": i}), range(40)))
    assert len({run.path for run in runs}) == 40 and all((run.path / "manifest.json").exists() for run in runs)
    # Each directory is the run that made it.
    assert sorted(Run.open(run.path).manifest["config"]["i"] for run in runs) == list(range(40))


@pytest.mark.parametrize("field, value, message", [
    ("kernel_originals", ["b->198.18.0.1"], "refused kernel_originals: is not an object"),
    ("kernel_originals", {"b->198.18.0.1": "0"}, "refused kernel_originals['b->198.18.0.1']: is not an object"),
    ("capture_dirs", {"dir": "/"}, "refused capture_dirs: is not a list"),
])
def test_cleanup_refuses_manifest_fields_of_shapes_labkit_never_writes(tmp_path, field, value, message):
    """Issue 23, item 4: a run directory's manifest is read as data, not trusted: a field of another shape is one line,
    exit 2, not a traceback."""
    inventory = tmp_path / "inventory.toml"
    inventory.write_text('[hosts.a]\nssh = "local"\n[hosts.b]\nssh = "local"\n')
    run = Run.create(tmp_path / "runs", "crafted", "idle-step", {"inventory": str(inventory)})
    run.update(**{field: value})
    proc = labkit("runs", "cleanup", "--runs-dir", str(tmp_path / "runs"))
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"labkit: error: {run.run_id}: {message}; nothing of this run was changed"]
    assert Run.open(run.path).status == "running"


def test_server_stamps_read_back_to_the_ns_with_nulls_kept(tmp_path):
    """A 2026 UTC stamp in ns needs 61 bits: read as float64 (pandas' way with a nullable int64 column) it lands on a
    multiple of 256 ns. The one-way delays subtract two such stamps, so they are read back exact, nulls kept, from
    the journal of an unfinished run and from the Parquet file of a finished one."""
    stamp = 1_795_916_449_375_670_149  # odd, and not a multiple of 256
    schema = pa.schema([("cell_id", pa.string()), ("attempt", pa.int64()), ("seq", pa.int64()),
                        ("server_recv_utc_ns", pa.int64()), ("server_send_utc_ns", pa.int64())])
    run = Run.create(tmp_path, "stamps", "series", {})
    attempt = run.begin_cell("A")
    run.append([{"cell_id": "A", "attempt": attempt, "seq": 0, "server_recv_utc_ns": stamp, "server_send_utc_ns": stamp + 1},
                {"cell_id": "A", "attempt": attempt, "seq": 1, "server_recv_utc_ns": None, "server_send_utc_ns": None}])
    run.complete_cell("A", attempt, 2)
    for source in ("journal", "parquet"):
        if source == "parquet":
            run.finalize(schema)
        samples = run.samples().sort_values("seq")
        # int(): a float compares equal to the int it rounds from, so == alone would pass a float64 column
        first = samples.iloc[0]
        assert (int(first["server_recv_utc_ns"]), int(first["server_send_utc_ns"])) == (stamp, stamp + 1), source
        assert samples["server_recv_utc_ns"].isna().tolist() == [False, True], source

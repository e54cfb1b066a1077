"""`labkit compare` and `labkit runs query` on the shipped samples (the two sweeps that differ by a sysctl set
outside labkit are in tests/test_sweep.py, on a testbed).

The A/A pairs are real: runs of the same settings, recorded one after another (`--runs N`)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import labkit
from conftest import labkit as run_labkit
from labkit.analysis.before_after import KINDS, compare_frames
from labkit.analysis.inference import min_samples_for_percentile
from labkit.comparison import compare
from labkit.errors import LabkitError
from labkit.plots import layout_problems
from labkit.store import Run

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "samples"
CALLED = ("higher", "lower")


def samples(name: str):
    return Run.open(SAMPLES / name).samples()


def replicates(name: str, count: int) -> list[str]:
    return [name] + [f"{name}-{i}" for i in range(2, count + 1)]


def uncalled_share(tables) -> float:
    verdicts = np.concatenate([table["verdict"].to_numpy() for table in tables])
    return float(np.mean(~np.isin(verdicts, CALLED)))


@pytest.mark.parametrize("name, experiment", [("idle-step-cubic", "idle-step"), ("series-wan", "series"),
                                              ("upload-wan", "upload")])
def test_a_a_pairs_of_single_runs_call_no_difference_in_95_percent_of_cells(name, experiment):
    """Every pair of the group's three runs, over five bootstrap seeds: a cell called different is a false call."""
    frames = [samples(run) for run in replicates(name, 3)]
    tables = [compare_frames([a], [b], KINDS[experiment], seed=seed, n_resamples=500).table
              for a, b in itertools.combinations(frames, 2) for seed in range(5)]
    assert sum(len(t) for t in tables) >= 30
    assert uncalled_share(tables) >= 0.95


@pytest.mark.parametrize("name", ["tuning-ladder-lan", "tuning-messages-lan"])
def test_a_a_groups_split_at_random_call_no_difference_in_95_percent_of_cells(name):
    """Ten runs of one setting split into two groups of five, in ten seeded ways: the runs are the units."""
    frames = [samples(run) for run in replicates(name, 10)]
    rng = np.random.default_rng(28)
    tables = []
    for _ in range(10):
        order = rng.permutation(10)
        compared = compare_frames([frames[i] for i in order[:5]], [frames[i] for i in order[5:]], KINDS["load"])
        assert compared.level == "runs" and set(compared.table["n_a"]) <= {5}
        tables.append(compared.table)
    assert sum(len(t) for t in tables) >= 50
    assert uncalled_share(tables) >= 0.95


def test_single_runs_say_their_intervals_hold_no_run_to_run_variation():
    """Two runs of one upload setting on the unshaped LAN differ by a quarter in MB/s in cell after cell: a real
    difference between runs, which one run a side cannot tell from a change. The comparison says so."""
    compared = compare(SAMPLES / "upload-lan", SAMPLES / "upload-lan-2", group=False)
    assert compared.compared.level == "calls" and len(compared.compared.called()) >= 5
    assert any("one run a side" in line and "--runs" in line for line in compared.caveats())
    grouped = compare(SAMPLES / "upload-lan", SAMPLES / "upload-wan", force=True)
    assert grouped.compared.level == "runs" and set(grouped.table["n_a"]) == {3}
    assert not any("one run a side" in line for line in grouped.caveats())


def test_single_load_runs_say_a_cell_is_one_value_which_nothing_can_test():
    compared = compare(SAMPLES / "tuning-ladder-lan", SAMPLES / "tuning-ladder-lan-2", group=False)
    assert set(compared.table["verdict"]) == {"not testable"} and set(compared.table["n_a"]) == {1}
    assert any("a load cell is one value a run" in line for line in compared.caveats())


def test_a_percentile_is_compared_only_from_enough_calls():
    compared = compare(SAMPLES / "series-wan", SAMPLES / "series-wan-2", group=False)
    assert set(compared.table["measure"]) == {"median RTT", "p90 RTT"}  # 120 calls a probe: p99 needs 299
    assert (compared.table["n_a"] >= min_samples_for_percentile(90)).all()
    assert compared.compared.too_few == 4 and any("left out" in line for line in compared.caveats())


def test_what_changed_lists_settings_and_versions_and_cells_of_one_side():
    compared = compare(SAMPLES / "idle-step-cubic", SAMPLES / "idle-step-knobs", group=False)
    changes = compared.changes.set_index("what")
    assert changes.loc["config order", "b"] == "sequential" and changes.loc["host a kernel", "a"] == "6.18.44-fc-v657"
    assert changes.loc["library grpcio"].tolist() == ["1.85.3", "1.85.1"]
    assert "link a>b" in changes.index  # the knobs run predates the emulator's record: "–" on its side
    shared = set(compared.table["cell"])
    only_a, only_b = compared.compared.only_a, compared.compared.only_b
    assert only_a and only_b and not shared & (set(only_a) | set(only_b))
    assert len(shared) + len(only_a) == samples("idle-step-cubic").groupby(
        ["slow_start_after_idle", "payload_bytes"]).ngroups


def test_a_replicate_stands_for_its_group_and_a_group_lists_its_seeds_as_varying():
    compared = compare(SAMPLES / "tuning-ladder-lan", SAMPLES / "tuning-messages-lan-4")
    assert [len(compared.runs_a), len(compared.runs_b)] == [10, 10]
    assert compared.side_names()[0].endswith("(10 runs)")
    seeds = compared.changes.set_index("what").loc["config seed"]
    assert seeds["a"] == seeds["b"] == " | ".join(str(i) for i in range(1, 11))
    assert compare(SAMPLES / "tuning-ladder-lan", SAMPLES / "tuning-messages-lan-4", group=False).runs_b[0].path.name \
        == "tuning-messages-lan-4"


@pytest.mark.parametrize("a, b, reason", [
    ("upload-lan", "series-wan", "experiment upload vs series"),
    ("upload-lan", "upload-wan", "link delay a>b 0 ms one way vs 100 ms one way"),
    # The LAN series predates the emulator's record and a series has no ping baseline: its ping probe says.
    ("series-lan", "series-wan", "link delay ping probe min RTT 2.12 vs 200 ms"),
])
def test_incomparable_runs_are_one_line_and_exit_2_unless_forced(a, b, reason, tmp_path):
    proc = run_labkit("compare", str(SAMPLES / a), str(SAMPLES / b))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and reason in proc.stderr and "--force" in proc.stderr
    with pytest.raises(LabkitError, match="not comparable"):
        labkit.compare(SAMPLES / a, SAMPLES / b)
    forced = labkit.compare(SAMPLES / a, SAMPLES / b, force=True)
    assert any(reason in line for line in forced.caveats())


def test_a_side_may_be_the_runs_a_filter_selects():
    proc = run_labkit("compare", "where name = 'tuning-ladder-lan' and replicate_index <= 5",
                      "where name = 'tuning-ladder-lan' and replicate_index > 5", "--runs-dir", str(SAMPLES))
    assert proc.returncode == 0, proc.stderr
    assert "(runs 1, 2, 3, 4, 5)" in proc.stdout and "(runs 6, 7, 8, 9, 10)" in proc.stdout
    assert "config seed: 1 | 2 | 3 | 4 | 5 -> 6 | 7 | 8 | 9 | 10" in proc.stdout and "units: runs" in proc.stdout
    none = run_labkit("compare", "where name = 'nothing'", "series-wan", "--runs-dir", str(SAMPLES))
    assert none.returncode == 2 and "matches \"where name = 'nothing'\"" in none.stderr


def test_a_run_against_itself_and_a_missing_run_are_one_line_and_exit_2(tmp_path):
    same = run_labkit("compare", str(SAMPLES / "series-wan"), str(SAMPLES / "series-wan-2"))
    assert same.returncode == 2 and "share 3 run(s)" in same.stderr  # a replicate stands for its whole group
    missing = run_labkit("compare", "nope", str(SAMPLES / "series-wan"), "--runs-dir", str(tmp_path))
    assert missing.returncode == 2 and missing.stderr.startswith("labkit: error: no run 'nope'")


def test_the_command_prints_changes_table_and_writes_csv_and_a_figure_that_passes_the_layout_check(tmp_path):
    csv, figure, cdfs = tmp_path / "diff.csv", tmp_path / "diff.png", tmp_path / "cdfs.svg"
    proc = run_labkit("compare", str(SAMPLES / "idle-step-cubic"), str(SAMPLES / "idle-step-cubic-2"), "--single",
                      "--all", "--csv", str(csv), "--figure", str(figure), "--distributions", str(cdfs),
                      env={**os.environ, "COLUMNS": "200"})  # a terminal wide enough for the table's rows
    assert proc.returncode == 0, proc.stderr
    assert "config seed: 1 -> 2" in proc.stdout and "20 comparisons (Holm)" in proc.stdout
    assert "units: calls" in proc.stdout and "one run a side" in proc.stdout
    # What every cell shares is said once above the table; each row names what sets its cell apart.
    assert "every cell: src=a dst=b cc=cubic gap_s=1" in proc.stdout
    assert [line.split()[0] for line in proc.stdout.splitlines() if "median RTT" in line][:2] == [
        "slow_start_after_idle=0", "slow_start_after_idle=0"]
    import pandas as pd

    table = pd.read_csv(csv)
    assert len(table) == 20 and {"difference", "low", "high", "p_holm", "verdict", "n_a", "n_b"} <= set(table.columns)
    assert figure.stat().st_size > 10_000 and cdfs.read_text().startswith("<?xml")
    compared = compare(SAMPLES / "idle-step-cubic", SAMPLES / "idle-step-cubic-2", group=False)
    assert layout_problems(compared.figure()) == []
    html = compared._repr_html_()
    assert "config seed" in html and "one run a side" in html and "20 comparisons (Holm)" in html


@pytest.mark.parametrize("flag, path, expected", [("--figure", "diff.gif", "is not a .png, .svg or .pdf file"),
                                                   ("--csv", "no/such/dir/diff.csv", "cannot write")])
def test_an_output_labkit_cannot_write_is_one_line_and_exit_2(flag, path, expected, tmp_path):
    proc = run_labkit("compare", str(SAMPLES / "idle-step-cubic"), str(SAMPLES / "idle-step-cubic-2"), "--single",
                      flag, str(tmp_path / path))
    assert proc.returncode == 2 and expected in proc.stderr and "Traceback" not in proc.stderr


def test_the_distributions_show_the_called_cells_first_and_pass_the_layout_check():
    compared = compare(SAMPLES / "upload-lan", SAMPLES / "upload-lan-2", group=False)
    cells = compared.compared.cells_to_show()
    called = set(compared.compared.called().query("measure == 'median MB/s'")["cell"])
    assert len(cells) == 4 and set(cells) <= called
    figure = compared.distributions()
    assert layout_problems(figure) == [] and sum(ax.get_visible() for ax in figure.axes) == 4
    assert [len(line.get_xdata()) for line in figure.axes[0].lines] == [20, 20]  # 20 uploads a side
    with pytest.raises(LabkitError, match="load and hop rows are cells"):
        compare(SAMPLES / "tuning-ladder-lan", SAMPLES / "tuning-messages-lan").distributions()


def test_runs_query_reads_every_manifest_and_every_sample(tmp_path):
    rows = {Run.open(path.parent).run_id: pq.read_metadata(path).num_rows for path in SAMPLES.glob("*/samples.parquet")}
    counted = labkit.query("select run_id, count(*) n from samples s join runs r using (run_id) group by 1", SAMPLES)
    assert dict(zip(counted["run_id"], counted["n"])) == rows
    warm = labkit.query("select r.labkit_version, r.link, count(*) n, median(s.rtt_ms) p50 from samples s "
                        "join runs r using (run_id) where s.probe = 'echo-warm' and r.link like '%100 ms%' "
                        "group by all", SAMPLES)
    assert warm["n"].tolist() == [480 // 4 * 3] and 200 < warm["p50"].iat[0] < 205
    facts = labkit.query("select count(distinct run_id) filter (what = 'experiment') every_run, count(distinct run_id) "
                         "filter (what = 'host a net.ipv4.tcp_slow_start_after_idle') measured from facts", SAMPLES)
    assert facts.iloc[0].tolist() == [len(rows), len(rows) - 1]  # the 2016 logs, imported, have no host facts
    proc = run_labkit("runs", "query", "--runs-dir", str(SAMPLES), "--csv",
                      "select experiment, count(*) n from runs group by 1 order by 1")
    assert proc.returncode == 0 and proc.stdout.splitlines()[0] == "experiment,n"
    bad = run_labkit("runs", "query", "--runs-dir", str(SAMPLES), "select nope from runs")
    assert bad.returncode == 2 and bad.stderr.startswith("labkit: error: query failed: Binder Error")
    empty = run_labkit("runs", "query", "--runs-dir", str(tmp_path), "select 1")
    assert empty.returncode == 2 and "no runs in" in empty.stderr


@pytest.mark.parametrize("other, expected", [("upload-wan", "--compare-with: not comparable: experiment upload vs idle-step"),
                                             ("nothing-of-that-name", "no run 'nothing-of-that-name'")])
def test_report_refuses_a_compare_with_it_cannot_use_before_any_notebook_runs(other, expected, tmp_path):
    run = tmp_path / "idle-step-cubic"
    shutil.copytree(SAMPLES / "idle-step-cubic", run, ignore=shutil.ignore_patterns("figures", "report"))
    proc = run_labkit("report", str(run), "--compare-with", other, "--runs-dir", str(SAMPLES))
    assert proc.returncode == 2 and expected in proc.stderr and proc.stderr.count("\n") == 1
    assert not (run / "report").exists()


# --- a bad run directory is skipped, and a query only reads, within limits -------------------------------------


def _address_space_at_most_4_gib():
    """A child's address space capped (DuckDB's 1 GiB limit fits well within): a regression that reads /dev/zero
    whole is then a MemoryError, not the shared machine's memory."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))


def _deep_manifest(run: Path) -> None:
    (run / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)


def _parquet_of(content: bytes):
    def spoil(run: Path) -> None:
        (run / "samples.parquet").write_bytes(content)
    return spoil


def _parquet_fifo(run: Path) -> None:
    (run / "samples.parquet").unlink()
    os.mkfifo(run / "samples.parquet")


def _manifest_to_dev_zero(run: Path) -> None:
    (run / "manifest.json").unlink()
    (run / "manifest.json").symlink_to("/dev/zero")


def _foreign_manifest(run: Path) -> None:
    """JSON of a manifest's fields, but not of the types labkit writes them as (a time as a number, a list for an
    object)."""
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "started_utc": 20261124, "provenance": ["labkit"]}))


BAD_RUNS = {"deep-manifest": _deep_manifest, "foreign-manifest": _foreign_manifest,
            "random-parquet": _parquet_of(bytes(range(256)) * 64), "text-parquet": _parquet_of(b"run_id,rtt_ms\nx,1.0\n"),
            "empty-parquet": _parquet_of(b""),
            "fifo-parquet": _parquet_fifo, "dev-zero-manifest": _manifest_to_dev_zero}


def _runs_with_bad_ones(runs: Path, bad_ones) -> set[str]:
    """Three good runs (two of a --runs group) in ``runs``, beside a spoiled copy of a fourth per name in ``bad_ones``
    (:data:`BAD_RUNS`); the good runs' ids."""
    for name in ("upload-small", "upload-small-2", "upload-wan"):
        shutil.copytree(SAMPLES / name, runs / name)
    for bad in bad_ones:
        shutil.copytree(SAMPLES / "upload-small-3", runs / bad)
        BAD_RUNS[bad](runs / bad)
    return {Run.open(runs / name).run_id for name in ("upload-small", "upload-small-2", "upload-wan")}


def _skipped(proc, runs: Path) -> list[str]:
    """The run directories a command's stderr names as skipped, one line each (a line of anything else: itself)."""
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return sorted(line.removeprefix("labkit: warning: skipped ").split(": ")[0] for line in proc.stderr.splitlines())


@pytest.mark.parametrize("bad", sorted(BAD_RUNS))
def test_runs_list_skips_a_run_directory_labkit_did_not_write_naming_it(tmp_path, bad):
    """It ends (the subprocess's timeout: a FIFO once blocked it, /dev/zero filled memory), exit 0, with the good runs
    and one line naming the bad one, where it was a traceback."""
    runs = tmp_path / "runs"
    good = _runs_with_bad_ones(runs, [bad])
    proc = run_labkit("runs", "list", "--runs-dir", str(runs), timeout=60, preexec_fn=_address_space_at_most_4_gib,
                      env={**os.environ, "COLUMNS": "200"})
    assert _skipped(proc, runs) == [str(runs / bad)]
    assert all(run_id in proc.stdout for run_id in good)


@pytest.mark.parametrize("command", ["query", "compare"])
def test_runs_query_and_compare_skip_the_run_directories_labkit_did_not_write_naming_each(tmp_path, command):
    """The same for a query over every run and a comparison of two others (each side's --runs group: every run read):
    each bad directory named once."""
    runs = tmp_path / "runs"
    good = _runs_with_bad_ones(runs, BAD_RUNS)
    args = {"query": ("runs", "query", "--csv", "select run_id, count(*) n from samples group by 1 order by 1"),
            "compare": ("compare", "upload-small", "upload-wan", "--force")}[command]
    proc = run_labkit(*args, "--runs-dir", str(runs), timeout=60, preexec_fn=_address_space_at_most_4_gib)
    assert _skipped(proc, runs) == sorted(str(runs / bad) for bad in BAD_RUNS)
    if command == "query":
        assert {line.split(",")[0] for line in proc.stdout.splitlines()[1:]} == good
    else:
        assert "only in B" in proc.stdout


@pytest.mark.parametrize("sql, refused", [
    ("", "no query given"),
    ("copy (select * from runs) to '{runs}/copied.csv'", "only reads, in one SELECT statement (this is COPY)"),
    ("attach '{runs}/attached.duckdb' as written", "only reads, in one SELECT statement (this is ATTACH)"),
    ("select 1; copy (select 1) to '{runs}/copied.csv'", "(this is SELECT, COPY)"),
    ("select * from read_csv('{secret}', header = false)", "Permission Error: Cannot access file"),
    ("select * from read_text('{runs}/../secret.key')", "Permission Error: Cannot access file"),
    ("select * from range(100000000)", "more than 1,000,000 rows: aggregate, or add a LIMIT"),
    ("select length(string_agg(repeat('x', 1000), '')) from range(2000000)", "more than DuckDB's 1 GiB of memory"),
], ids=["empty", "copy-to", "attach", "two-statements", "read-csv-outside", "read-text-dotdot", "huge-range", "memory"])
def test_runs_query_only_reads_the_runs_directory_within_limits(tmp_path, sql, refused):
    """One line and exit 2, nothing written, nothing of a file outside the runs directory shown; a query once ran
    any SQL, and range(100000000) 245 s into a MemoryError (the subprocess's timeout makes that a failure)."""
    runs = tmp_path / "runs"
    shutil.copytree(SAMPLES / "upload-small", runs / "upload-small")
    secret = tmp_path / "secret.key"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    files = sorted(tmp_path.rglob("*"))
    proc = run_labkit("runs", "query", "--runs-dir", str(runs), sql.format(runs=runs, secret=secret), timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and refused in proc.stderr, proc.stderr
    assert "PRIVATE KEY" not in proc.stdout + proc.stderr and sorted(tmp_path.rglob("*")) == files


def test_runs_query_stops_at_its_timeout(tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(SAMPLES / "upload-small", runs / "upload-small")
    proc = run_labkit("runs", "query", "--runs-dir", str(runs), "--timeout", "1s",
                      "select count(*) from range(10000000000000)", timeout=60)
    assert proc.returncode == 2 and proc.stderr == "labkit: error: query stopped after 1 s, its time limit\n"
    zero = run_labkit("runs", "query", "--runs-dir", str(runs), "--timeout", "0s", "select 1")
    assert zero.returncode == 2 and "--timeout" in zero.stderr and zero.stderr.count("\n") == 1

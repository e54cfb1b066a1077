"""labkit from a notebook's cells: ``labkit.testbed(...)``, ``resume="auto"``, the interrupt a cell raises, how runs
and summaries show inline, and the "run it yourself" section of each experiment notebook.

The testbed tests bring up small testbeds of their own (1–10 ms one way); the notebook test records a real ping log
on one and runs the ping_vs_echo notebook on it in the kernel named labkit.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import labkit
from conftest import REPO, own_testbed, own_testbed_name, require_testbed
from labkit.errors import LabkitError, RunInterrupted
from labkit.results import Run
from labkit.store import find_resumable

SAMPLES = REPO / "data" / "samples"


def namespaces(name: str) -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return sorted(line.split()[0] for line in listed.splitlines() if line.startswith(f"labkit-{name}-"))


# --- labkit.testbed(...) ---------------------------------------------------------------------------------------------


def test_the_testbed_package_stays_callable_once_its_modules_are_imported():
    import labkit.testbed.lab  # binds labkit.testbed to the package, as importing any submodule does

    assert callable(labkit.testbed) and labkit.testbed.lab.Testbed.__name__ == "Testbed"


def test_link_values_are_read_as_a_person_types_them():
    from labkit.testbed.context import link_config

    link = link_config("50ms", "100mbit", 1460, "cubic", "auto")
    assert (link.one_way_delay_s, link.rate_bps, link.mtu) == (0.05, 100e6, 1460)
    assert link_config(0.1, None, 1500, "bbr", "tun").rate_bps is None
    for bad, message in [(("5 parsecs", None), "not a duration"), (("20s", None), "between 0 and 10 s"),
                         (("1ms", "fast"), "not a rate")]:
        with pytest.raises(LabkitError, match=message):
            link_config(*bad, 1460, "cubic", "auto")


def test_an_interrupt_during_teardown_is_raised_when_the_teardown_is_done():
    from labkit.interrupts import interrupts_deferred

    # Python's own handler, also when pytest was started in the background with SIGINT ignored (as labkit's CLI does).
    ignored = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        before, finished = signal.getsignal(signal.SIGINT), []
        with pytest.raises(KeyboardInterrupt):
            with interrupts_deferred():
                # raise_signal runs the Python handler before it returns: without the deferral, KeyboardInterrupt here.
                signal.raise_signal(signal.SIGINT)
                finished.append(True)
        assert finished == [True] and signal.getsignal(signal.SIGINT) is before
    finally:
        signal.signal(signal.SIGINT, ignored)


@pytest.mark.testbed
def test_a_with_block_takes_its_testbed_down_also_when_interrupted():
    require_testbed()
    name = own_testbed_name("cm")
    with pytest.raises(KeyboardInterrupt):
        with labkit.testbed(one_way_delay="1ms", rate=None, emulator="tun", name=name) as lab:
            assert lab.owned and set(lab.hosts) == {"a", "b"} and Path(lab.inventory).is_file()
            assert namespaces(name) == [f"labkit-{name}-a", f"labkit-{name}-b"]
            ping = subprocess.run(["ip", "netns", "exec", lab.hosts["a"].netns, "ping", "-c", "1", "-W", "2",
                                   lab.hosts["b"].data_address], capture_output=True, text=True)
            assert ping.returncode == 0, ping.stdout + ping.stderr
            assert f"testbed {name}</b> (up" in lab._repr_html_()
            raise KeyboardInterrupt  # as a kernel interrupt arrives
    assert namespaces(name) == [] and "(down)" in repr(lab)


@pytest.mark.testbed
def test_a_testbed_that_was_already_up_is_left_up_and_one_left_in_a_cell_goes_with_the_process():
    require_testbed()
    name = own_testbed_name("cm")
    with own_testbed("cm", 0.001):  # someone else's testbed, e.g. from `labkit testbed up`
        with labkit.testbed(one_way_delay="1ms", rate=None, emulator="tun", name=name) as lab:
            assert not lab.owned
        assert namespaces(name) != []
    # A notebook that never reaches its lab.down() cell: the testbed goes when the kernel process exits.
    code = f"import labkit; print(labkit.testbed(one_way_delay='1ms', rate=None, name={name!r}).inventory)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith(f"{name}/inventory.toml") and not Path(proc.stdout.strip()).exists()
    assert namespaces(name) == []


# --- resume="auto" and the interrupt a cell raises --------------------------------------------------------------------


def test_resume_auto_finds_the_newest_unfinished_run_of_the_same_settings(tmp_path, capsys):
    from labkit.experiments import _resumable, spec
    from labkit.experiments.sweep import SweepConfig

    config = SweepConfig(inventory="lab.toml", client="a", server="b", sizes=(14000, 16000), repeats=2, name="q")
    settings = dataclasses.asdict(config)  # sizes a tuple here, a list once stored
    runs = []
    for status, changes in [("interrupted", {}), ("failed", {}), ("complete", {}), ("interrupted", {"repeats": 3})]:
        runs.append(Run.create(tmp_path, "q", "idle-step", {**settings, **changes}))
        runs[-1].set_status(status)
    assert find_resumable("idle-step", settings, tmp_path).path == runs[1].path
    assert find_resumable("series", settings, tmp_path) is None
    assert find_resumable("idle-step", {**settings, "repeats": 3}, tmp_path).path == runs[3].path
    assert find_resumable("idle-step", {**settings, "repeats": 4}, tmp_path) is None
    assert _resumable(spec("sweep"), config, tmp_path, quiet=False) == str(runs[1].path)
    assert capsys.readouterr().out == f"resuming {runs[1].run_id} (failed, 0 cells complete)\n"
    with pytest.raises(LabkitError, match="repeats must be between 1 and"):  # checked as a new run's would be
        _resumable(spec("sweep"), dataclasses.replace(config, repeats=0), tmp_path, quiet=True)


def test_an_interrupted_run_says_what_it_kept_and_how_to_finish_it(tmp_path):
    run = Run.create(tmp_path, "q", "idle-step", {})
    first = run.begin_cell("c1")
    run.append([{"cell_id": "c1", "attempt": first, "seq": seq} for seq in range(3)])
    run.complete_cell("c1", first, 3)
    run.append([{"cell_id": "c2", "attempt": run.begin_cell("c2"), "seq": 0}])
    run.close()
    interrupted = RunInterrupted(run, "sweep")
    assert isinstance(interrupted, KeyboardInterrupt) and interrupted.run is run
    assert str(interrupted) == (
        f"run {run.run_id} interrupted: 4 rows kept (1 cell complete); run the same call again with resume='auto' "
        f"(or resume='{run.run_id}'), or `labkit sweep --resume {run.run_id}`, to finish it")


# --- inline output ----------------------------------------------------------------------------------------------------


def test_a_run_shows_as_a_short_summary():
    from labkit.inline import run_facts

    run = Run.open(SAMPLES / "idle-step-cubic")
    facts = run_facts(run)
    assert {k: facts[k] for k in ("experiment", "status", "hosts", "cells", "cells_skipped", "rows", "resumed")} == {
        "experiment": "idle-step", "status": "complete", "hosts": "client a, server b", "cells": 2, "cells_skipped": 0,
        "rows": 200, "resumed": 0}
    page = run._repr_html_()
    for shown in (run.run_id, "<code>idle-step</code>", "client a, server b", "2 complete", ">200<", ">complete<"):
        assert shown in page
    assert repr(run) == f"<labkit Run {run.run_id}: idle-step, complete>"
    assert run_facts(Run.open(SAMPLES / "orca-2016"))["hosts"] == "none (imported)"
    assert run_facts(Run.open(SAMPLES / "hop-small"))["hosts"] == "load a, front a, back b"


def test_the_step_table_is_the_sweeps_own_with_the_extra_round_trips_shaded():
    run = Run.open(SAMPLES / "idle-step-cubic")
    styler, summary = run.summary(styled=True), run.summary()
    table = styler.data
    assert list(table.columns) == sorted(summary["payload_bytes"].unique())
    assert list(table.index) == [("a→b", "cc=cubic ssai=0 gap=1s"), ("a→b", "cc=cubic ssai=1 gap=1s")]
    at = summary.set_index(["slow_start_after_idle", "payload_bytes"])["rtt_multiple"]
    assert table.loc[("a→b", "cc=cubic ssai=1 gap=1s"), 16000] == at[(1, 16000)]
    page = styler.to_html()
    shaded = {(int(r), int(c)) for r, c in re.findall(r"#T_\w+_row(\d+)_col(\d+)", page.split("</style>")[0])}
    assert shaded == {(r, c) for r in range(2) for c in range(len(table.columns)) if table.iat[r, c] >= 1.5}
    assert shaded and all(r == 1 for r, _ in shaded)  # only the sysctl at 1 steps
    assert "n = 10 calls per cell" in page and f"{at[(1, 16000)]:.2f}×" in page


def test_other_summaries_are_styled_tables_with_their_size():
    run = Run.open(SAMPLES / "upload-small")
    styler = run.summary(styled=True)
    assert styler.data.equals(run.summary().dropna(axis="columns", how="all"))
    page = styler.to_html()
    assert f"upload run {run.run_id}: 20 rows" in page
    assert f"{run.summary()['median_mb_per_s'].iat[0]:,.3g}" in page


def test_the_quickstart_figure_is_every_call_in_round_trips_with_the_initial_window():
    from labkit.notebooks import step_figure

    fig = step_figure(Run.open(SAMPLES / "idle-step-cubic"))
    (ax,) = fig.axes
    assert len(ax.collections) == 2 and sum(len(c.get_offsets()) for c in ax.collections) == 200
    assert [t.get_text() for t in ax.get_legend().get_texts()][-1] == "10 × 1408 B = 14080 B"
    assert ax.get_ylabel() == "latency / ping RTT (round trips)" and fig.get_size_inches().tolist() == [7.0, 3.8]
    assert 7.0 * fig.dpi >= 700  # a readable width inline


# --- run it yourself ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["idle_step", "series", "upload", "load", "tuning", "hop", "ping_vs_echo"])
def test_run_it_yourself_makes_the_shipped_samples_kind_of_run_with_its_settings(name):
    from labkit.experiments import spec
    from labkit.notebooks import RUN_IT_YOURSELF, testbed_name_for
    from labkit.testbed.lab import validate_name

    yourself = RUN_IT_YOURSELF[name]
    sample = Run.open(SAMPLES / yourself.sample)
    if yourself.command == "ping":
        assert sample.manifest["experiment"] == "ping-vs-echo"  # an import; the new one is its ping half
    else:
        assert spec(yourself.command).experiment == sample.manifest["experiment"]
        spec(yourself.command).config_type(inventory="lab.toml", **yourself.options).validate()
        recorded = sample.manifest["config"]
        assert {k: v for k, v in yourself.options.items() if k != "name"} == {
            k: recorded[k] for k in yourself.options if k != "name"}
    code = yourself.code(testbed_name_for(name))
    compile(code, name, "exec")
    assert code.startswith("with labkit.testbed(") and ("lab.deploy()" in code) == (yourself.command != "ping")
    validate_name(testbed_name_for(name))


def test_run_it_yourself_off_leaves_the_notebook_on_its_run():
    from labkit.notebooks import run_it_yourself

    assert run_it_yourself("idle_step", False, "") == ""
    assert run_it_yourself("series", {}, "runs/x") == "runs/x"


@pytest.mark.testbed
def test_the_ping_vs_echo_notebook_records_a_ping_log_of_its_own_and_reads_it(tmp_path, monkeypatch, labkit_kernel):
    require_testbed()
    from labkit.report import execute_notebook

    monkeypatch.setenv("MPLBACKEND", "agg")
    name, runs = own_testbed_name("yours"), tmp_path / "runs"
    changes = {"count": 5, "interval_s": 0.2, "testbed_name": name, "runs_dir": str(runs)}
    (tmp_path / "report").mkdir()
    result = execute_notebook("ping_vs_echo", SAMPLES / "orca-2016", tmp_path / "report", ["png"],
                              parameters={"run_dir": "", "run_it_yourself": changes}, kernel_name=labkit_kernel)
    (run_path,) = runs.iterdir()
    data = json.loads(result.headline_path.read_text())
    assert data["run_path"] == str(run_path) and data["experiment"] == "import-ping"
    assert (data["headline"]["samples.ping"], data["headline"]["lost.ping"]) == (5, 0)
    rtt = Run.open(run_path).samples()["rtt_ms"]
    assert rtt.min() >= 12.0  # 6 ms each way through the delay line
    assert namespaces(name) == [] and not (Path.home() / ".labkit" / f"{name}-a").exists()  # ping needs no deploy

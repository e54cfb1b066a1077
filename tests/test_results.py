"""The run labkit hands out (labkit.results.Run): the store's run directory, with its summary, report and look."""

from __future__ import annotations

from conftest import REPO
from labkit import notebooks, store
from labkit.results import Run, find_run

SAMPLES = REPO / "data" / "samples"


def test_a_run_of_the_store_becomes_the_run_labkit_hands_out_without_reading_it_again():
    stored = store.Run.open(SAMPLES / "idle-step-cubic")
    assert not hasattr(stored, "summary") and not hasattr(stored, "_repr_html_")  # the store knows nothing above it
    run = Run.of(stored)
    assert isinstance(run, Run) and run.path == stored.path and run.manifest is stored.manifest
    assert Run.of(run) is run
    assert run.summary().equals(Run.open(SAMPLES / "idle-step-cubic").summary())
    assert f"labkit run {run.run_id}" in run._repr_html_()


def test_notebooks_and_run_references_open_results(tmp_path):
    sample = notebooks.open_run("", sample="upload-small", experiment="upload")
    assert type(sample) is Run and sample.summary()["median_mb_per_s"].notna().all()
    (tmp_path / sample.run_id).symlink_to(sample.path)
    assert type(find_run(sample.run_id, tmp_path)) is Run
    assert type(notebooks.open_run(sample.run_id, sample="unused", runs_dir=tmp_path)) is Run


def test_the_runs_of_a_group_are_results_too(tmp_path):
    first = store.Run.create(tmp_path, "group", "idle-step", {})
    second = store.Run.create(tmp_path, "group", "idle-step", {})
    for index, run in enumerate((first, second), 1):
        run.update(replicate={"group": first.run_id, "index": index, "of": 2})
    replicates = Run.open(second.path).replicates()
    assert [r.run_id for r in replicates] == [first.run_id, second.run_id]
    assert {type(r) for r in replicates} == {Run}
    assert {type(r) for r in store.Run.open(first.path).replicates()} == {store.Run}


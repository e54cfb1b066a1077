"""Every experiment's cells in an order shuffled from the run's seed, recorded in the manifest (no testbed: the plans
and a real run directory)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from labkit.errors import LabkitError
from labkit.experiments import latency_under_load, load, series, upload
from labkit.experiments.order import arrange, record
from labkit.store import Run


def load_config(**options):
    config = load.LoadConfig(inventory="x", client="a", server="b", concurrency=[1, 8], payload_bytes=[64, 1024],
                             connections=[1, 4], keepalive_ms=[None, 10000], **options)
    config.validate()
    return config


def upload_config(**options):
    config = upload.UploadConfig(inventory="x", client="a", server="b", chunk_sizes=[16, 256, 4096, 65536], **options)
    config.validate()
    return config


def under_load_config(**options):
    config = latency_under_load.UnderLoadConfig(inventory="x", client="a", server="b", queues=["keep", "bdp", "codel:bdp"],
                                                cc=["cubic", "bbr"], loads=["tcp-up", "grpc-up"], **options)
    config.validate()
    return config


PLANS = {
    "load": (load_config, lambda config: [cell.id for cell in load.plan_cells(config)[0]]),
    "upload": (upload_config, lambda config: [cell.id for cell in upload.plan_cells(config)]),
    "latency-under-load": (under_load_config, lambda config: [cell.id for cell in latency_under_load.plan_cells(config)]),
}


@pytest.mark.parametrize("experiment", sorted(PLANS))
def test_each_seed_shuffles_the_same_cells_into_its_own_order(experiment):
    make, ids = PLANS[experiment]
    planned = ids(make(order="planned"))
    first, again, second = ids(make(seed=1)), ids(make(seed=1)), ids(make(seed=2))
    assert sorted(first) == sorted(planned) == sorted(second) and len(set(planned)) == len(planned)
    assert first == again  # a resumed run replans the order it started with
    assert first != second and first != planned
    # A replicate (labkit.experiments.run_replicates advances the seed by its index) takes another order.
    replicates = {tuple(ids(dataclasses.replace(make(), seed=1 + index))) for index in range(3)}
    assert len(replicates) == 3


def test_a_series_shuffles_its_probes_slots_within_a_tick_and_keeps_its_cells_in_times_order():
    def config(**options):
        made = series.SeriesConfig(inventory="x", client="a", server="b", duration_s=4, interval_s=1, cell_s=2,
                                   probes=["ping", "echo-warm", "echo-cold", "tcp-echo", "irtt"], **options)
        made.validate()
        return made

    assert config(order="planned").probe_slots == ["ping", "echo-warm", "echo-cold", "tcp-echo"]
    slots = {tuple(config(seed=seed).probe_slots) for seed in range(1, 6)}
    assert len(slots) > 1 and all(sorted(s) == sorted(["ping", "echo-warm", "echo-cold", "tcp-echo"]) for s in slots)
    assert [cell.first for cell in series.plan_cells(config(seed=3))] == [0, 2]
    with pytest.raises(LabkitError, match="--order is shuffled or planned, not 'random'"):
        config(order="random")


def test_a_load_runs_stacks_in_a_shuffled_order_and_its_ladder_starts_from_the_plain_default():
    config = load.LoadConfig(inventory="x", client="a", server="b", transports=["grpc", "grpc-conns"], concurrency=[8],
                             payload_bytes=[64, 1024], connections=[1, 4], keepalive_ms=[None, 10000],
                             rpc=["unary", "stream"], server_impl=["go"], grpc_tool="labkit-go",
                             grpc_option=["codec=default,vtproto"], design="ladder")
    config.validate()
    cells, _ = load.plan_cells(config)
    # The two payloads' steps come mixed, the vtproto steps among the others: no step always runs at one place.
    assert [c.ladder_step for c in cells] != sorted((c.ladder_step for c in cells),
                                                    key=load.ladder_step_names(config).index)
    default = [c for c in cells if c.ladder_step == "default"]
    assert default and all(c.stack.grpc_options == () and c.keepalive_ms is None and c.connections == 1
                           and c.rpc == "unary" and c.compression == "none" for c in default)
    steps = load.ladder_record(cells, config)
    assert [step["step"] for step in steps] == ["default", "+keepalive_ms=10000", "+connections=4", "+codec=vtproto",
                                                "+rpc=stream"]
    assert steps[0]["settings"] == {"option:codec": None, "connections": 1, "server_impl": "go", "keepalive_ms": None,
                                    "compression": "none", "rpc": "unary"}
    assert steps[3]["settings"]["option:codec"] == "vtproto" and steps[4]["settings"]["rpc"] == "stream"
    # A first value that sets something would carry it into every step, the "default" too: refused in one line.
    for change, flag in ((dict(grpc_option=["codec=proto,vtproto"]), "--grpc-option codec=default,vtproto"),
                         (dict(keepalive_ms=[10000, None]), "--keepalive-ms none,10000"),
                         (dict(connections=[4, 1]), "--connections 1,4")):
        with pytest.raises(LabkitError, match=f"starts from the plain default.*give {flag}$"):
            dataclasses.replace(config, **change).validate()


def test_the_manifest_keeps_the_realised_order_and_a_resume_continues_it(tmp_path):
    config = load_config(seed=5)
    ids = [cell.id for cell in load.plan_cells(config)[0]]
    run = Run.create(tmp_path, "order", "load", dataclasses.asdict(config))
    record(run, ids, config.seed, config.order)
    kept = json.loads((run.path / "manifest.json").read_text())["cell_order"]
    assert kept == {"seed": 5, "shuffled": True, "cells": ids}
    # Resuming replans from the recorded config: the same order, recorded once.
    resumed = Run.open(run.path)
    record(resumed, [cell.id for cell in load.plan_cells(load.LoadConfig(**resumed.manifest["config"]))[0]], 5)
    assert resumed.manifest["cell_order"] == kept
    # An order the run did not start with is refused in one line, not run as a second order.
    with pytest.raises(LabkitError, match="recorded another cell order"):
        record(resumed, arrange(ids, 6), 6)


def test_arrange_shuffles_as_hop_does():
    import random

    items = list(range(20))
    expected = list(items)
    random.Random(3).shuffle(expected)
    assert arrange(items, 3) == expected and arrange(items, 3, "planned") == items and items == list(range(20))

"""The gRPC stack as an experiment dimension: which cells a stack list makes, and what each side is given."""

from __future__ import annotations

import pytest

from labkit.errors import LabkitError
from labkit.experiments.stacks import Stack, go_tools, option_values, plan_stacks
from labkit.experiments.sweep import SweepConfig, plan_cells


def test_the_default_stack_changes_no_cell_id():
    config = SweepConfig(inventory="x", client="a", server="b", slow_start_after_idle=[1, 0])
    cells = plan_cells(config, [("a", "b")])
    assert [cell.id for cell in cells] == ["a->b|cc=keep|ssai=1|gap=1|bg=none|ka=none",
                                           "a->b|cc=keep|ssai=0|gap=1|bg=none|ka=none"]
    assert cells[0].columns()["client_impl"] == "python" and cells[0].columns()["grpc_options"] is None


def test_stacks_multiply_the_cells_grouped_by_server():
    stacks, left_out = plan_stacks(["python", "go"], ["go"], ["static-stream-window=64KiB,32MiB"])
    # grpcio has no static windows: the Python client's stacks are left out, with the reason.
    assert [s.label() for s in stacks] == ["go→go static-stream-window=64KiB", "go→go static-stream-window=32MiB"]
    assert len(left_out) == 2 and all("grpcio has no equivalent of --grpc-option static-stream-window" in line
                                      for line in left_out)
    config = SweepConfig(inventory="x", client="a", server="b", slow_start_after_idle=[1, 0])
    cells = plan_cells(config, [("a", "b")], stacks)
    assert len(cells) == 4
    assert cells[0].id == "a->b|cc=keep|ssai=1|gap=1|bg=none|ka=none|client=go|server=go|opt=static-stream-window=64KiB"
    # Each server (implementation and server-side options) gets one run of consecutive cells.
    keys = [cell.stack.server_key for cell in cells]
    assert keys == sorted(keys, key=keys.index) and len(set(keys)) == 2


def test_labkit_go_goes_only_to_the_hosts_that_run_a_go_side():
    """What a sweep's plan states its hosts need (Plan.tools): nothing for Python at both ends (labkit demo's sweep)."""
    config = SweepConfig(inventory="x", client="a", server="b")
    assert go_tools((c.src, c.dst, c.stack) for c in plan_cells(config, [("a", "b")])) == {}
    stacks, _ = plan_stacks(["python", "go"], ["python"], [])
    cells = plan_cells(config, [("a", "b")], stacks)
    assert go_tools((c.src, c.dst, c.stack) for c in cells) == {"a": {"labkit-go"}}  # the Go client's host only


def test_each_side_gets_the_options_it_takes():
    stack = Stack("go", "python", ("keepalive-time=10s", "max-concurrent-streams=8", "pool=4"))
    assert stack.client_options() == ("keepalive-time=10s", "pool=4")
    assert stack.server_options() == ("keepalive-time=10s", "max-concurrent-streams=8")
    assert stack.server_key == ("python", ("keepalive-time=10s", "max-concurrent-streams=8"))
    assert Stack().client_options() == () and Stack().server_options() == () and Stack().id_suffix == ""


def test_options_are_checked_before_anything_runs():
    assert option_values(["pool=1,4", "compression=gzip"]) == {"pool": ["1", "4"], "compression": ["gzip"]}
    for items, message in ((["bogus=1"], "unknown"), (["pool"], "KEY=VALUE"), (["pool=0"], "at least 1"),
                           (["pool=1", "pool=2"], "given twice")):
        with pytest.raises(LabkitError, match=message):
            option_values(items)
    with pytest.raises(LabkitError, match="takes python, go"):
        plan_stacks(["rust"], ["python"], [])
    with pytest.raises(LabkitError, match="no go client"):
        plan_stacks(["go"], ["python"], [], clients=("python",))
    with pytest.raises(LabkitError, match="no stack is left"):
        plan_stacks(["python"], ["python"], ["static-conn-window=1MiB"])


def test_default_leaves_an_option_unset_and_joined_keys_are_one_knob():
    stacks, _ = plan_stacks(["go"], ["go"], ["static-stream-window+static-conn-window=default,32MiB"])
    assert [s.grpc_options for s in stacks] == [(), ("static-conn-window=32MiB", "static-stream-window=32MiB")]
    assert stacks[0] == Stack("go", "go")  # unset: the default stack, with the default stack's cell ids
    for items, message in ((["static-stream-window+bogus=1MiB"], "bogus: unknown"),
                           (["pool+pool=2"], "given twice"), (["initial-window+pool=1MiB"], "pool: .1MiB. is not a whole number")):
        with pytest.raises(LabkitError, match=message):
            option_values(items)


def test_a_sweep_config_refuses_a_bad_stack_at_validation():
    with pytest.raises(LabkitError, match="unknown"):
        SweepConfig(inventory="x", client="a", server="b", grpc_option=["nope=1"]).validate()


def test_codec_values_are_stacks_and_vtproto_is_go_only():
    """codec=proto,vtproto is two stacks per server; grpcio cannot marshal with vtprotobuf's generated Go, so a
    Python end given codec=vtproto is left out at plan time with one line, and refused when nothing else is left."""
    stacks, left_out = plan_stacks(["go"], ["python", "go"], ["codec=proto,vtproto"])
    assert [s.label() for s in stacks] == ["go→python codec=proto", "go→go codec=proto", "go→go codec=vtproto"]
    assert left_out == ["go→python codec=vtproto: grpcio has no equivalent of --grpc-option codec=vtproto; "
                        "left out for a Python server"]
    assert Stack("go", "go", ("codec=vtproto",)).server_options() == ("codec=vtproto",) == \
        Stack("go", "go", ("codec=vtproto",)).client_options()
    with pytest.raises(LabkitError, match="codec=vtproto; left out for a Python server") as refused:
        plan_stacks(["go"], ["python"], ["codec=vtproto"])
    assert "\n" not in refused.value.message
    with pytest.raises(LabkitError, match="'json' is not proto or vtproto"):
        option_values(["codec=proto,json"])

"""Keepalive measured for what it is for (issue 29, item 3): labkit-go dead-peer, and one partition on the testbed.

The Go tests (go/internal/deadpeer) cover the client against a relay on loopback; here the command line of the
real binary (bad flags, a signal) and one measurement through labkit on a testbed of this module's own, whose
link the emulator partitions on schedule.
"""

from __future__ import annotations

import json
import signal

import pytest

from conftest import deployed_inventory, leftover_processes, own_testbed

from labkit.echo.plans import DeadPeerPlan, ServePlan, dead_peer_argv, serve_argv
from labkit.echo.remote import local_labkit_argv, wait_until_ready
from labkit.errors import LabkitError
from labkit.experiments.dead_peer import KEEPALIVE, measure
from labkit.hosts.layout import local_tool
from labkit.hosts.local import LocalHost
from labkit.limits import MAX_DURATION_S
from labkit.testbed.lab import Testbed

GO_BINARY = local_tool("labkit-go")
HOST = LocalHost()
#: Generous: for a loaded machine and the emulator's reload, not a tolerance of the mechanism.
SLACK_S = 10.0


def test_a_bad_flag_or_a_keepalive_grpc_go_would_raise_is_one_line_and_exit_2():
    for args in (["--target", "h:1", "--wait", "2x"], ["--target", "h:1", "--grpc-option", "keepalive-time=5s"],
                 ["--target", "h:1", "--grpc-option", "pool=2"], ["--wait", "1s"], ["--target", "h:1", "extra"]):
        proc = HOST.run([str(GO_BINARY), "dead-peer", *args], timeout=30)
        assert proc.returncode == 2 and proc.stdout == "", args
        assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("labkit-go dead-peer: "), proc.stderr


def test_the_builder_refuses_what_the_command_would():
    for plan, flag in ((DeadPeerPlan(target=""), "--target"), (DeadPeerPlan(target="h:1", wait_s=0), "--wait"),
                       (DeadPeerPlan(target="h:1", timeout_s=MAX_DURATION_S + 1), "--timeout"),
                       (DeadPeerPlan(target="h:1", probe_every_s=0), "--probe-every")):
        with pytest.raises(LabkitError, match=flag):
            dead_peer_argv(plan)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_the_wait_at_once_with_the_shells_status(sig):
    """On loopback, at the bounds of the builder: the ready line says what the plan asked, then a signal ends it."""
    with HOST.start([*local_labkit_argv(), *serve_argv(ServePlan(bind="127.0.0.1:0"), "go")]) as server:
        port = wait_until_ready(server, timeout=30)["port"]
        plan = DeadPeerPlan(target=f"127.0.0.1:{port}", wait_s=MAX_DURATION_S, timeout_s=MAX_DURATION_S,
                            probe_every_s=MAX_DURATION_S, grpc_options=KEEPALIVE)
        with HOST.start([str(GO_BINARY), *dead_peer_argv(plan)]) as client:
            ready = json.loads(client.wait_for_line(lambda line: '"ready"' in line, timeout=30))
            assert ready["keepalive"] == {"time_s": 10.0, "timeout_s": 3.0, "permit_without_stream": True}
            assert (ready["wait_s"], ready["probe_every_s"]) == (MAX_DURATION_S, MAX_DURATION_S)
            # grpc-go's keepalive timeout is also the socket's TCP_USER_TIMEOUT; its dialer turns TCP keepalive on.
            assert ready["tcp"]["user_timeout_ms"] == 3000 and ready["tcp"]["keepalive"] is True
            client.popen.send_signal(sig)
            assert client.wait(timeout=10) == 128 + sig
            assert client.stderr_lines == ["labkit-go dead-peer: interrupted"]


def test_keepalive_notices_a_partition_of_the_testbeds_link(tmp_path):
    """The article's keepalive (10 s, 3 s) on a 100 ms link: noticed after the partition began and within the
    keepalive time + timeout (+ slack), and nothing left running on the hosts."""
    with own_testbed("ka-dead", 0.100) as state:
        inventory = deployed_inventory(state, tmp_path)
        detection = measure(inventory, grpc_options=KEEPALIVE, wait_s=40, partition_after_s=1.0)
        assert detection.noticed, detection.end
        assert detection.code == "UNAVAILABLE" and detection.partition_source == "emulator", detection
        assert 0 < detection.detection_s <= 10 + 3 + SLACK_S, detection
        assert "keepalive" in detection.detail, detection.detail
        assert leftover_processes(state, ("labkit-go", "echo serve", "dead-peer")) == []
        assert Testbed(state.name).load_state().schedule == []  # the link healed

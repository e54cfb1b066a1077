"""What one run leaves to the next on the same hosts: a killed run's processes are stopped before its --resume
measures, and a second run does not measure alongside one still running unless asked to."""

from __future__ import annotations

import os
import signal
import subprocess
from contextlib import contextmanager

import pytest

from conftest import deployed_inventory, labkit as run_labkit, leftover_processes, own_testbed, running_labkit, \
    wait_for, wait_for_cell_start, wait_for_rows
from labkit.store import Run

pytestmark = pytest.mark.testbed

SSAI = "/proc/sys/net/ipv4/tcp_slow_start_after_idle"
LABKIT_WORDS = ("echo serve", "echo call", "labkit-go", "iperf3")
QUICK = ["--ping-count", "1", "--iperf-seconds", "1", "--quiet"]


@pytest.fixture(scope="module")
def lab():
    with own_testbed("t-hosts", 0.002, cc="cubic") as state:
        yield state


@pytest.fixture(scope="module")
def inventory(lab, tmp_path_factory):
    return deployed_inventory(lab, tmp_path_factory.mktemp("hosts"))


def ssai(lab) -> tuple[str, ...]:
    return tuple(subprocess.run(["ip", "netns", "exec", lab.hosts[h].netns, "cat", SSAI], capture_output=True,
                                text=True, check=True).stdout.strip() for h in ("a", "b"))


def sweep(inventory, name: str, runs, *extra: str) -> list[str]:
    return ["sweep", str(inventory), "--client", "a", "--server", "b", "--sizes", "1000", *QUICK, "--name", name,
            "--runs-dir", str(runs), *extra]


def echo_servers(lab) -> list[int]:
    return [int(line.split(":")[1]) for line in leftover_processes(lab, ("echo serve",)) if line.startswith("b:")]


def alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_resume_of_a_killed_run_first_stops_the_echo_server_it_left(lab, inventory, tmp_path):
    before = ssai(lab)
    # Long enough (60 calls 0.2 s apart) to be measuring when it is killed, however slowly it starts.
    args = sweep(inventory, "killed", tmp_path, "--gaps", "0.2s", "--repeats", "60", "--slow-start-after-idle", "0")
    with running_labkit(*args) as proc:
        run_path = wait_for_cell_start(tmp_path, "killed")
        left = wait_for(lambda: echo_servers(lab), 60, "the run's echo server on b")
        proc.kill()
        proc.communicate(timeout=60)
    assert all(alive(pid) for pid in left) and ssai(lab) == ("0", "0")  # what SIGKILL leaves behind
    # No `runs cleanup`: the resume does it first.
    resumed = run_labkit("sweep", "--resume", run_path.name, "--runs-dir", str(tmp_path), "--quiet", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert not any(alive(pid) for pid in left)
    assert f"{run_path.name}: stopped process group {left[0]} on b" in resumed.stderr
    run = Run.open(run_path)
    assert run.status == "complete" and len(run.samples()) == 60 and run.processes() == []
    assert leftover_processes(lab, LABKIT_WORDS) == [] and ssai(lab) == before


def test_a_second_run_on_the_same_hosts_is_refused_naming_the_first_unless_it_shares(lab, inventory, tmp_path):
    # The first runs for minutes (600 calls 0.2 s apart) and is stopped by SIGINT once the second is done: it is
    # surely still measuring whenever the second asks.
    first = sweep(inventory, "first", tmp_path, "--gaps", "0.2s", "--repeats", "600")
    with running_labkit(*first) as proc:
        run_path = wait_for_cell_start(tmp_path, "first")
        second = run_labkit(*sweep(inventory, "second", tmp_path, "--gaps", "0s", "--repeats", "1"), timeout=180)
        shared = run_labkit(*sweep(inventory, "shared", tmp_path, "--gaps", "0s", "--repeats", "1", "--share-hosts"),
                            timeout=180)
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    errors = [line for line in second.stderr.splitlines() if line.startswith("labkit: error: ")]
    assert second.returncode == 2 and len(errors) == 1 and "Traceback" not in second.stderr, second.stderr
    assert f"hosts a and b are in use by run {run_path.name} (pid {proc.pid} " in errors[0]
    assert "--share-hosts" in errors[0]
    assert not list(tmp_path.glob("*-second"))  # refused before it became a run
    assert shared.returncode == 0, shared.stderr
    assert Run.open(next(tmp_path.glob("*-shared"))).status == "complete"
    assert proc.returncode == 130, stderr
    # The first has let go of its hosts: a run without the flag may use them now.
    again = run_labkit(*sweep(inventory, "again", tmp_path, "--gaps", "0s", "--repeats", "1"), timeout=180)
    assert again.returncode == 0, again.stderr
    assert leftover_processes(lab, LABKIT_WORDS) == []
    assert not [path for path in os.listdir("/tmp") if path.startswith("labkit-runs-")
                and any(name.startswith(run_path.name) for name in os.listdir(f"/tmp/{path}"))]


def established_to(lab, host: str, address: str) -> str:
    """ss's established TCP connections from a host's namespace to ``address`` (empty when there is none)."""
    return subprocess.run(["ss", "-N", lab.hosts[host].netns, "-Htn", "state", "established", "dst", address],
                          capture_output=True, text=True, check=True).stdout.strip()


@contextmanager
def flapped_mid_run(lab, runs, name: str, args: list[str]):
    """``labkit ARGS``, an experiment from a to b, running (a cell started, its client connected) when b's data device
    is taken down and up again, which loses b's route back to a for good; yields (the running labkit, its run
    directory). The testbed is repaired after, for the next test."""
    from labkit.testbed.lab import Testbed

    try:
        with running_labkit(*args) as proc:
            run_path = wait_for_cell_start(runs, name)
            # The first measured row, not only a connection: a flap during the client's warm-up ends the agent in
            # its warm-up, before the measured calls whose deadline the tests follow.
            wait_for_rows(run_path, 1, timeout=60)
            wait_for(lambda: established_to(lab, "a", lab.hosts["b"].data_address), 60, "the echo client's connection")
            for state in ("down", "up"):
                subprocess.run(["ip", "-n", lab.hosts["b"].netns, "link", "set", "lkdata", state], check=True)
            yield proc, run_path
    finally:
        Testbed(lab.name, log=lambda message: None).repair()


def _assert_ended_at_its_first_deadline(proc) -> None:
    """The run ended (exit 2) in one error line: its first call past the 3 s deadline failed the cell."""
    _, stderr = proc.communicate(timeout=120)
    errors = [line for line in stderr.splitlines() if line.startswith("labkit: error: ")]
    assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in stderr, stderr
    assert "a call from a to b got no answer within its 3 s deadline" in errors[0]


def test_a_sweep_over_a_flapped_link_fails_its_cell_at_the_first_deadline_and_resume_finishes_it(
        lab, inventory, tmp_path):
    before = ssai(lab)
    # 100 calls of 3 s deadlines: without its own end the run would go on for 5 minutes.
    args = sweep(inventory, "dead", tmp_path, "--gaps", "0.2s", "--repeats", "100", "--slow-start-after-idle", "0",
                 "--call-timeout", "3s")
    with flapped_mid_run(lab, tmp_path, "dead", args) as (proc, run_path):
        _assert_ended_at_its_first_deadline(proc)
        run = Run.open(run_path)
        assert run.status == "failed" and run.finished_cells() == {}  # left for --resume to redo
        assert leftover_processes(lab, LABKIT_WORDS) == [] and ssai(lab) == before and run.processes() == []
        # The sweep put back the sysctl it set, and only that: the route the flap took from b was none of its
        # doing, and is left to `testbed repair` (after this block).
        assert all(entry["restored"] for entry in run.manifest["kernel_originals"].values())
        status = run_labkit("testbed", "status", "--name", lab.name, "--no-ping")
        assert f"fault: b: no route to a's data address {lab.hosts['a'].data_address}" in status.stdout, status.stdout
    resumed = run_labkit("sweep", "--resume", run_path.name, "--runs-dir", str(tmp_path), "--quiet", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    samples = Run.open(run_path).samples()
    assert len(samples) == 100 and samples["ok"].all() and samples["attempt"].nunique() == 1
    assert leftover_processes(lab, LABKIT_WORDS) == [] and ssai(lab) == before


def test_an_upload_over_a_flapped_link_fails_its_cell_at_the_first_deadline(lab, inventory, tmp_path):
    # 1000 uploads of 1 MiB with 3 s deadlines: still uploading when the link flaps, and 50 minutes of waiting out
    # deadlines without the cell's own end.
    args = ["upload", str(inventory), "--client", "a", "--server", "b", "--file-size", "1MiB", "--chunk-sizes", "64KiB",
            "--transports", "grpc", "--tls", "off", "--repeats", "1000", "--timeout", "3s", "--ping-count", "1",
            "--quiet", "--name", "up", "--runs-dir", str(tmp_path)]
    with flapped_mid_run(lab, tmp_path, "up", args) as (proc, run_path):
        _assert_ended_at_its_first_deadline(proc)
    run = Run.open(run_path)
    assert run.status == "failed" and run.finished_cells() == {} and run.processes() == []
    assert leftover_processes(lab, LABKIT_WORDS + ("upload-agent",)) == []

"""Faults mid-run, for every experiment: a killed server, a host whose sshd goes away, a data link that goes down,
and SIGINT, SIGTERM or SIGKILL to labkit itself. After each: the exit status, the rows kept, nothing left running
(after `labkit runs cleanup` where the run could not clean up itself), the kernel as it was, and `--resume`
completing every planned cell exactly once."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import deployed_inventory, labkit as run_labkit, leftover_processes, own_testbed, running_labkit, \
    wait_for, wait_for_cell_start, wait_for_rows
from labkit.store import Run

pytestmark = pytest.mark.testbed

ONE_WAY_S = 0.005
SSAI = "/proc/sys/net/ipv4/tcp_slow_start_after_idle"
LABKIT_WORDS = ("echo serve", "echo call", "series-agent", "upload-agent", "labkit-go", "ghz", "h2load", "iperf3")
QUICK = ["--ping-count", "1", "--quiet"]
#: One short run of each experiment: the arguments, and what its complete dataset holds (cells, rows).
EXPERIMENTS = {
    "sweep": (["--sizes", "1000", "--gaps", "0.2s", "--repeats", "6", "--slow-start-after-idle", "1,0", "--cc", "cubic",
               "--iperf-seconds", "1", *QUICK], 2, 12),
    "series": (["--duration", "6s", "--cell", "3s", "--probes", "ping,echo-warm,tcp-echo", "--quiet"], 2, 18),
    "upload": (["--file-size", "256KiB", "--chunk-sizes", "16KiB,64KiB", "--transports", "grpc", "--tls", "off",
                "--repeats", "4", *QUICK], 2, 8),
    "load": (["--transports", "grpc", "--concurrency", "2", "--payload-bytes", "64", "--keepalive-ms", "none,1000",
              "--duration", "1.5s", "--warmup", "0.5s", *QUICK], 2, 2),
}
#: The signals the other modules do not already send to each experiment (test_sweep: INT and KILL; test_series:
#: INT; test_upload: INT; test_load: TERM).
SIGNALS = [("sweep", signal.SIGTERM), ("series", signal.SIGTERM), ("series", signal.SIGKILL), ("upload", signal.SIGTERM),
           ("upload", signal.SIGKILL), ("load", signal.SIGINT), ("load", signal.SIGKILL)]


@pytest.fixture(scope="module")
def lab():
    with own_testbed("t-faults", ONE_WAY_S, cc="cubic") as state:
        yield state


@pytest.fixture(scope="module")
def inventory(lab, tmp_path_factory):
    return deployed_inventory(lab, tmp_path_factory.mktemp("faults"))


def ssai(lab) -> tuple[str, str]:
    return tuple(subprocess.run(["ip", "netns", "exec", lab.hosts[h].netns, "cat", SSAI], capture_output=True,
                                text=True, check=True).stdout.strip() for h in ("a", "b"))


def netns_pids(lab, host: str, word: str) -> list[int]:
    """Processes in a host's namespace whose command line has ``word``."""
    return [int(line.split(":")[1]) for line in leftover_processes(lab, (word,)) if line.startswith(f"{host}:")]


def established_to(lab, host: str, address: str) -> str:
    """ss's established TCP connections from a host's namespace to ``address`` (empty when there is none)."""
    return subprocess.run(["ss", "-N", lab.hosts[host].netns, "-Htn", "state", "established", "dst", address],
                          capture_output=True, text=True, check=True).stdout.strip()


def experiment_args(inventory: Path, experiment: str, name: str, runs: Path) -> list[str]:
    return [experiment, str(inventory), "--client", "a", "--server", "b", *EXPERIMENTS[experiment][0],
            "--name", name, "--runs-dir", str(runs)]


def assert_complete_once(run: Run, experiment: str) -> None:
    """Every planned cell in the dataset, each with all its rows, each from one attempt."""
    _, cells, rows = EXPERIMENTS[experiment]
    samples = run.samples()
    assert run.status == "complete" and samples["cell_id"].nunique() == cells and len(samples) == rows
    assert (samples.groupby("cell_id")["attempt"].nunique() == 1).all()


@pytest.mark.parametrize("experiment", ["sweep", "upload"])
def test_a_killed_server_is_restarted_and_its_cell_redone(lab, inventory, tmp_path, experiment):
    before = ssai(lab)
    with running_labkit(*experiment_args(inventory, experiment, "killed", tmp_path)) as proc:
        wait_for_cell_start(tmp_path, "killed")
        time.sleep(0.3)
        pids = netns_pids(lab, "b", "echo serve")
        assert pids, "no echo server in b"
        subprocess.run(["kill", "-KILL", *map(str, pids)], check=True)
        stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stderr
    run = Run.open(next(tmp_path.glob("*-killed")))
    assert_complete_once(run, experiment)
    assert run.samples()["ok"].all() and len(run.manifest["server_exits"]) == 1
    assert "exited with status" in stdout and leftover_processes(lab, LABKIT_WORDS) == [] and ssai(lab) == before


def test_a_host_whose_sshd_dies_ends_the_run_in_one_line_and_cleanup_finishes_what_it_left(lab, inventory, tmp_path):
    from labkit.testbed import sshd

    before = ssai(lab)
    args = ["sweep", str(inventory), "--client", "a", "--server", "b", "--sizes", "1000", "--gaps", "0.2s",
            "--repeats", "10", "--slow-start-after-idle", "0,1", "--cc", "cubic", "--iperf-seconds", "1", *QUICK,
            "--name", "nossh", "--runs-dir", str(tmp_path)]
    with running_labkit(*args) as proc:
        run_path = wait_for_cell_start(tmp_path, "nossh")
        time.sleep(0.5)
        assert ssai(lab) == ("0", "0")  # the first cell's setting, on both hosts
        sshds = netns_pids(lab, "b", "sshd")
        subprocess.run(["kill", "-KILL", *map(str, sshds)], check=True)  # b's sshd and every session of it
        _, stderr = proc.communicate(timeout=180)
    # Its attempts to reconnect are said as they happen; then one line of error, naming the host.
    errors = [line for line in stderr.splitlines() if line.startswith("labkit: error: ")]
    assert proc.returncode == 2 and len(errors) == 1 and "b: cannot reach" in errors[0] and "Traceback" not in stderr
    run = Run.open(run_path)
    assert run.status == "failed"
    # The host still reachable (a) is back as it was; b is not, and the run says so; its echo server is still
    # running there, and the run knows it.
    assert ssai(lab)[0] == before[0] and ssai(lab)[1] == "0"
    originals = run.manifest["kernel_originals"]
    assert [v["restored"] for k, v in sorted(originals.items())] == [True, False]
    left = netns_pids(lab, "b", "echo serve")
    assert left and {e["pid"] for e in run.processes() if e["host"] == "b"} & set(left)

    host = lab.hosts["b"]  # b's sshd again, as it was: the same config, key and log, and known to the testbed
    lab.sshd_pids["b"] = sshd.start_sshd(host.netns, lab.dir / "b" / "sshd_config", lab.dir / "b" / "sshd.log")
    lab.save()
    sshd.wait_for_port(host.mgmt_address)
    cleanup = run_labkit("runs", "cleanup", "--runs-dir", str(tmp_path), timeout=120)
    assert cleanup.returncode == 0, cleanup.stderr
    assert netns_pids(lab, "b", "echo serve") == [] and ssai(lab) == before and Run.open(run_path).processes() == []
    resumed = run_labkit("sweep", "--resume", run_path.name, "--runs-dir", str(tmp_path), "--quiet", timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    run = Run.open(run_path)
    samples = run.samples()
    assert run.status == "complete" and len(samples) == 20 and samples["cell_id"].nunique() == 2
    assert leftover_processes(lab, LABKIT_WORDS) == [] and ssai(lab) == before


def test_a_data_link_down_for_a_while_keeps_every_call_and_the_run_ends_clean(lab, inventory, tmp_path):
    before = ssai(lab)
    host = lab.hosts["b"]
    route = subprocess.run(["ip", "-n", host.netns, "route", "show", f"{lab.hosts['a'].data_address}/32"],
                           capture_output=True, text=True, check=True).stdout.split()
    args = ["sweep", str(inventory), "--client", "a", "--server", "b", "--sizes", "1000", "--gaps", "0.2s",
            "--repeats", "20", "--slow-start-after-idle", "1", "--cc", "cubic", "--iperf-seconds", "1",
            *QUICK, "--name", "flap", "--runs-dir", str(tmp_path)]
    with running_labkit(*args) as proc:
        wait_for_cell_start(tmp_path, "flap")
        # Down once the client's connection to b is up (however long it took to start on a busy machine), for 2 s
        # of its 20 calls' 4 s: some call waits out the outage.
        wait_for(lambda: established_to(lab, "a", lab.hosts["b"].data_address), 60, "the echo client's connection")
        time.sleep(0.3)
        device = route[route.index("dev") + 1]
        subprocess.run(["ip", "-n", host.netns, "link", "set", device, "down"], check=True)
        time.sleep(2)
        subprocess.run(["ip", "-n", host.netns, "link", "set", device, "up"], check=True)
        subprocess.run(["ip", "-n", host.netns, "route", "replace", *route], check=True)  # down dropped it
        stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stderr
    run = Run.open(next(tmp_path.glob("*-flap")))
    samples = run.samples()
    # Every call is a row; those that waited out the outage took over a second, and say how long.
    assert run.status == "complete" and len(samples) == 20 and samples["ok"].all()
    assert samples["rtt_ms"].max() > 1000
    assert leftover_processes(lab, LABKIT_WORDS) == [] and ssai(lab) == before


@pytest.mark.parametrize("experiment, signum", SIGNALS, ids=[f"{e}-{s.name}" for e, s in SIGNALS])
def test_a_signal_keeps_the_rows_leaves_nothing_and_resume_completes_each_cell_once(lab, inventory, tmp_path,
                                                                                    experiment, signum):
    before = ssai(lab)
    with running_labkit(*experiment_args(inventory, experiment, "sig", tmp_path)) as proc:
        run_path = wait_for_cell_start(tmp_path, "sig")
        if experiment == "series":
            # At its first row, with most of its 6 s still to run: a 4 s series once ended, on a busy machine,
            # before a signal sent 0.4 s after its first cell started reached it.
            wait_for_rows(run_path, 1)
        else:
            time.sleep(0.4)
        proc.send_signal(signum)
        proc.communicate(timeout=120)
    assert proc.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGKILL: -9}[signum]
    rows_before = len(Run.open(run_path).journal_rows())
    if signum == signal.SIGKILL:  # nothing could clean up: `labkit runs cleanup` does
        cleanup = run_labkit("runs", "cleanup", "--runs-dir", str(tmp_path), timeout=120)
        assert cleanup.returncode == 0, cleanup.stderr
    run = Run.open(run_path)
    assert run.status == "interrupted" and len(run.journal_rows()) == rows_before
    assert leftover_processes(lab, LABKIT_WORDS) == [] and ssai(lab) == before
    resumed = run_labkit(experiment, "--resume", run_path.name, "--runs-dir", str(tmp_path), "--quiet", timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    assert_complete_once(Run.open(run_path), experiment)
    assert leftover_processes(lab, LABKIT_WORDS) == [] and ssai(lab) == before


def test_a_second_run_cannot_take_the_kernel_knobs_a_first_one_holds(lab, inventory, tmp_path):
    before = ssai(lab)
    # 1000 calls 0.2 s apart: still running when the second, refused, returns, however slowly either starts on a
    # busy machine (50 calls, 10 s, once ended first); the test then stops it, as a user would.
    first = ["sweep", str(inventory), "--client", "a", "--server", "b", "--sizes", "1000", "--gaps", "0.2s",
             "--repeats", "1000", "--slow-start-after-idle", "0", "--iperf-seconds", "1", *QUICK, "--name", "first",
             "--runs-dir", str(tmp_path)]
    with running_labkit(*first) as proc:
        run_path = wait_for_cell_start(tmp_path, "first")
        # --share-hosts: past the refusal of a second run on busy hosts (test_run_hosts), to the knobs' own lock.
        second = run_labkit("sweep", str(inventory), "--client", "a", "--server", "b", "--sizes", "1000", "--gaps", "0s",
                            "--repeats", "1", "--slow-start-after-idle", "1", *QUICK, "--name", "second",
                            "--runs-dir", str(tmp_path), "--share-hosts", timeout=120)
        assert proc.poll() is None and ssai(lab) == ("0", "0")  # the first run's setting, untouched by the second
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    errors = [line for line in second.stderr.splitlines() if line.startswith("labkit: error: ")]
    assert second.returncode == 2 and len(errors) == 1, second.stderr
    assert f"its kernel knobs are held by run {run_path.name}" in errors[0]
    # The first ends as it began, and lets go: now the second may run.
    assert ssai(lab) == before and not any(Path(lock).exists() for lock in Run.open(run_path).manifest["knob_locks_held"])
    again = run_labkit("sweep", str(inventory), "--client", "a", "--server", "b", "--sizes", "1000", "--gaps", "0s",
                       "--repeats", "1", "--slow-start-after-idle", "1", *QUICK, "--name", "second",
                       "--runs-dir", str(tmp_path), timeout=120)
    assert again.returncode == 0, again.stderr


def test_a_link_changed_mid_run_fails_the_cell_it_spoiled(lab, inventory, tmp_path):
    from labkit.testbed.lab import LinkConfig, Testbed

    testbed = Testbed(lab.name, log=lambda message: None)
    args = ["series", str(inventory), "--client", "a", "--server", "b", "--duration", "6s", "--cell", "3s",
            "--probes", "ping,echo-warm", "--quiet", "--name", "relinked", "--runs-dir", str(tmp_path)]
    try:
        with running_labkit(*args) as proc:
            run_path = wait_for_cell_start(tmp_path, "relinked")
            # Ten times the delay: a ping on the changed link takes at least its 100 ms, far from the 10 ms one's
            # round trip however late a busy machine makes the emulator (5 ms once), so the two never mix up.
            testbed.up(LinkConfig(one_way_delay_s=10 * ONE_WAY_S, rate_bps=None, emulator="tun", cc="cubic"))
            _, stderr = proc.communicate(timeout=120)
    finally:
        testbed.up(lab.link)  # as the module's other tests expect it
    errors = [line for line in stderr.splitlines() if line.startswith("labkit: error: ")]
    assert proc.returncode == 2 and len(errors) == 1 and "the testbed's link changed during" in errors[0], stderr
    run = Run.open(run_path)
    assert run.status == "failed" and leftover_processes(lab, LABKIT_WORDS) == []
    resumed = run_labkit("series", "--resume", run_path.name, "--runs-dir", str(tmp_path), "--quiet", timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    samples = Run.open(run_path).samples()
    # Every tick measured on one link: none of ping's round trips on the changed one, which cannot take less than
    # its 100 ms (an echo call may be slow for reasons of its own on a busy machine; ping's kernel-to-kernel round
    # trip shows the link alone).
    pings = samples[samples["probe"] == "ping"]["rtt_ms"]
    assert len(samples) == 12 and len(pings) == 6 and pings.max() < 20 * ONE_WAY_S * 1e3, samples


#: The Go servers (and load's Go tool) of each experiment that runs them: `labkit echo serve --impl go` execs into
#: labkit-go under the pid the run recorded.
GO_RUNS = {"sweep": ["--client-impl", "go", "--server-impl", "go"],
           "load": ["--grpc-tool", "labkit-go", "--server-impl", "go"]}


@pytest.mark.parametrize("experiment", GO_RUNS)
def test_a_sigkilled_run_of_go_servers_is_cleaned_up_and_resumed_as_a_python_one_is(lab, inventory, tmp_path,
                                                                                     experiment):
    """Issue 45, item 2: after a SIGKILL, the Go echo server (labkit-go, exec'd by the `labkit echo serve` the run
    started) is still the run's: `runs cleanup` (load, whose work directory on a goes too) and `--resume` (sweep, which
    cleans up first) stop it, and nothing of the run is left running."""
    before = ssai(lab)
    with running_labkit(*experiment_args(inventory, experiment, "gokill", tmp_path), *GO_RUNS[experiment]) as proc:
        run_path = wait_for_cell_start(tmp_path, "gokill")
        wait_for(lambda: netns_pids(lab, "b", "labkit-go serve"), 60, "the Go echo server")
        proc.kill()
        proc.communicate(timeout=60)
    assert netns_pids(lab, "b", "labkit-go serve")  # what the kill left
    if experiment == "load":
        workdir = Run.open(run_path).manifest["client_workdir"]
        assert Path(workdir).is_dir()
        cleanup = run_labkit("runs", "cleanup", run_path.name, "--runs-dir", str(tmp_path), timeout=120)
        assert cleanup.returncode == 0 and "alone" not in cleanup.stdout, cleanup.stdout + cleanup.stderr
        assert f"removed a:{workdir}" in cleanup.stdout
        assert leftover_processes(lab, LABKIT_WORDS) == [] and not Path(workdir).exists()
    resumed = run_labkit(experiment, "--resume", run_path.name, "--runs-dir", str(tmp_path), "--quiet", timeout=180)
    assert resumed.returncode == 0 and "alone" not in resumed.stderr, resumed.stderr
    assert_complete_once(Run.open(run_path), experiment)
    assert leftover_processes(lab, LABKIT_WORDS) == [] and ssai(lab) == before

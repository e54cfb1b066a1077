"""A testbed host in a Debian 11 minbase root beside one in this machine's Debian 12: what a user's older server is.

One testbed for the module (hosts a: this machine's userland, b: a bullseye root, built by scripts/bootstrap.sh and
found in the cache). Over SSH, b must be Debian 11 with Python 3.9, no venv (no ensurepip) and no pip, served by its
own OpenSSH 8.4; its writes stay in its own tree; the testbed's health checks hold; and its mounts live only in its
sshd's namespace, so none is left after a kill and `testbed down`.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from conftest import labkit, root_host_inventory, root_testbed, wait_for
from labkit.experiments import run_command
from labkit.store import Run

pytestmark = pytest.mark.testbed


@pytest.fixture(scope="module")
def mixed():
    with root_testbed("r2-mixed", {"b": "bullseye"}) as state:
        yield state


def _ssh(state, host: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    # ssh sends one command line to the login shell: the argv is quoted word by word.
    proc = subprocess.run(["ssh", "-F", str(state.ssh_config), "-o", "BatchMode=yes", state.hosts[host].ssh_alias,
                           shlex.join(argv)], capture_output=True, text=True, timeout=60)
    if check:
        assert proc.returncode == 0, f"{argv} on {host}: exit {proc.returncode}: {proc.stderr}"
    return proc


def _banner(address: str) -> str:
    with socket.create_connection((address, 22), timeout=5) as sock:
        return sock.recv(256).decode().strip()


def _mount_names(tag: str) -> list[str]:
    """The sources the testbed gives a root host's mounts (labkit.testbed.sshd.HostRoot)."""
    return [f"labkit-{kind}-{tag} " for kind in ("root", "proc", "sys", "shm", "run")]


def _mount_lines(*words: str) -> list[str]:
    """Every mount, in any process's mount namespace on this machine, whose line names one of ``words``."""
    found = []
    for mountinfo in Path("/proc").glob("[0-9]*/mountinfo"):
        try:
            lines = mountinfo.read_text().splitlines()
        except OSError:  # the process ended while we looked
            continue
        found += [f"{mountinfo.parent.name}: {line}" for line in lines if any(word in line for word in words)]
    return found


def test_the_minbase_host_is_debian_11_with_python_39_no_venv_no_pip_and_openssh_84(mixed):
    assert _ssh(mixed, "b", "cat", "/etc/debian_version").stdout.startswith("11.")
    assert _ssh(mixed, "a", "cat", "/etc/debian_version").stdout.startswith("12.")
    version = _ssh(mixed, "b", "python3", "-c", "import platform; print(platform.python_version())").stdout
    assert version.startswith("3.9."), version
    glibc = _ssh(mixed, "b", "python3", "-c", "import platform; print(platform.libc_ver()[1])").stdout.strip()
    assert glibc == "2.31"
    venv = _ssh(mixed, "b", "python3", "-m", "venv", "/root/v", check=False)
    assert venv.returncode != 0 and "ensurepip is not" in venv.stdout + venv.stderr
    pip = _ssh(mixed, "b", "python3", "-m", "pip", "--version", check=False)
    assert pip.returncode != 0 and "No module named pip" in pip.stderr
    # The banner is the sshd that answers: the root's own, not this machine's OpenSSH 9.2.
    assert _banner(mixed.hosts["b"].mgmt_address).startswith("SSH-2.0-OpenSSH_8.4")
    assert _banner(mixed.hosts["a"].mgmt_address).startswith("SSH-2.0-OpenSSH_9.")
    for tool in ("ip", "ss", "ping", "iperf3", "irtt", "tcpdump", "sysctl"):
        assert _ssh(mixed, "b", "sh", "-c", f"command -v {tool}").stdout.strip(), tool


def test_state_inventory_and_status_name_the_root_and_the_health_checks_hold(mixed):
    root = mixed.roots["b"]
    assert (root["release"], root["debian"]) == ("bullseye", "11") and "a" not in mixed.roots
    testbed = tomllib.loads(mixed.inventory.read_text())["testbed"]
    assert testbed["roots"]["b"]["release"] == "bullseye" and testbed["roots"]["b"]["mode"] == root["mode"]
    status = labkit("testbed", "status", "--name", mixed.name, "--json", check=True)
    assert '"up": true' in status.stdout
    # The data link between the two userlands carries pings both ways.
    for src, dst in (("a", "b"), ("b", "a")):
        ping = _ssh(mixed, src, "ping", "-n", "-c", "2", "-i", "0.2", mixed.hosts[dst].data_address)
        assert " 0% packet loss" in ping.stdout


def test_a_hosts_writes_stay_in_its_own_tree_and_the_cached_root_is_untouched(mixed):
    root = mixed.roots["b"]
    _ssh(mixed, "b", "sh", "-c", "echo b-was-here > /root/mark")
    assert not (Path(root["lower"]) / "root" / "mark").exists()
    own = Path(mixed.dir) / "roots" / "b" / ("upper" if root["mode"] == "overlay" else "tree") / "root" / "mark"
    assert own.read_text() == "b-was-here\n"
    # The mounts are the sshd's namespace's alone: this process's mount table has none of them. (A chrooted
    # process's table shows them from its own root: "/proc", not the tree's path.)
    tag = f"{mixed.name}-b"
    assert not [line for line in Path("/proc/self/mountinfo").read_text().splitlines()
                if any(word in line for word in _mount_names(tag))]
    sshd_mounts = Path(f"/proc/{mixed.sshd_pids['b']}/mountinfo").read_text().splitlines()
    mounted = {line.split(" - ")[0].split()[4]: line.split(" - ")[1].split()[1] for line in sshd_mounts}
    assert mounted["/proc"] == f"labkit-proc-{tag}" and mounted["/sys"] == f"labkit-sys-{tag}"
    assert "/dev/pts" in mounted and mounted["/run"] == f"labkit-run-{tag}"


def test_deploy_then_a_sweep_in_each_stack_a_series_and_an_upload_between_debian_12_and_the_bullseye_host(
        mixed, tmp_path_factory):
    """What a user with an older server does: deploy (b has no venv or pip, so its 3.9 wheels are unpacked), then a
    sweep with a Python and a Go server on b, a series from b to a and an upload from b to a, each complete with
    every call ok, and each manifest recording the interpreter b really ran."""
    base = tmp_path_factory.mktemp("rootfs-deploy")
    inventory = root_host_inventory(mixed, base)
    proc = labkit("deploy", "--tools", "none", str(inventory), timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^b: deployed: .*\(unpacked, no venv or pip there", proc.stderr, re.M), proc.stderr
    # a keeps its labkit_dir in this machine's home, so an earlier run of this module may have deployed it already.
    assert re.search(r"^a: (deployed: .*\(offline, |skipped: )", proc.stderr, re.M), proc.stderr
    runs = base / "runs"

    sweep = run_command("sweep", inventory, client="a", server="b", server_impl=["python", "go"], sizes=[1000],
                        repeats=1, gaps_s=[0.1], ping_count=1, iperf_seconds=1, name="bullseye-sweep", runs_dir=runs,
                        quiet=True)
    samples = sweep.samples()
    assert sweep.status == "complete" and samples["ok"].all()
    assert set(samples["server_impl"]) == {"python", "go"}
    assert Run.open(sweep.path).manifest["hosts"]["b"]["python"]["python"].startswith("3.9.")

    series = labkit("series", str(inventory), "--client", "b", "--server", "a", "--duration", "4s", "--interval",
                    "1s", "--cell", "2s", "--name", "bullseye-series", "--runs-dir", str(runs), "--quiet", timeout=180)
    assert series.returncode == 0, series.stderr
    run = Run.open(next(runs.glob("*-bullseye-series")))
    assert run.status == "complete"
    probes = pd.read_parquet(run.path / "samples.parquet")
    assert set(probes["probe"]) >= {"ping", "echo-warm", "echo-cold", "tcp-echo"} and probes["ok"].all()

    upload = labkit("upload", str(inventory), "--client", "b", "--server", "a", "--file-size", "256KiB",
                    "--chunk-sizes", "16384", "--repeats", "1", "--ping-count", "1", "--tls", "off",
                    "--name", "bullseye-upload", "--runs-dir", str(runs), "--quiet", timeout=300)
    assert upload.returncode == 0, upload.stderr
    run = Run.open(next(runs.glob("*-bullseye-upload")))
    uploads = pd.read_parquet(run.path / "samples.parquet")
    assert run.status == "complete" and uploads["ok"].all() and set(uploads["transport"]) == {"grpc", "http2"}
    assert (uploads["bytes_acked"] == 256 * 1024).all()


def test_after_a_kill_and_down_no_mount_of_any_root_is_left(mixed):
    # Last in the module: it takes the testbed down itself (the fixture's down then finds nothing to do).
    names = _mount_names(f"{mixed.name}-b")
    assert _mount_lines(*names)
    os.kill(mixed.sshd_pids["b"], signal.SIGKILL)
    status = labkit("testbed", "status", "--name", mixed.name, "--no-ping")
    assert "b: its sshd" in status.stdout + status.stderr
    labkit("testbed", "down", "--name", mixed.name, check=True)
    wait_for(lambda: not _mount_lines(*names, mixed.roots["b"]["lower"]), 10, "the root's mounts to go")
    assert not Path(mixed.dir).exists()

"""Root through sudo: the inventory's become, what sudo answers (recorded), and the testbed as a cloud VM.

The testbed tests log in as `lab`, a user that exists only inside the
testbed's sshds (`labkit testbed up --login-user lab --sudo`), deploy labkit
into its home, and run the idle-step sweep with the sysctl and the route's
congctl set and restored through `sudo -n`; then take sudo away and check that
the sweep refuses before its first cell.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import tomllib
from pathlib import Path

import pytest
import tomli_w

from conftest import leftover_processes, DATA, labkit, own_testbed, own_testbed_name
from labkit.errors import LabkitError
from labkit.explain import explain_run
from labkit.hosts.check import knobs_of_experiment
from labkit.hosts.inventory import load_inventory, parse_inventory
from labkit.hosts.local import Result
from labkit.hosts.privilege import (NEEDS_PASSWORD, NONE, PASSWORDLESS, ROOT, classify_privilege,
                                    sudo_complaint)
from labkit.store import Run
from labkit.testbed.login import LoginUser, free_uid, with_user

SUDO_DATA = DATA / "sudo"
ONE_WAY_S = 0.050
SSAI = "/proc/sys/net/ipv4/tcp_slow_start_after_idle"


def recorded(case: str, name: str) -> Result:
    """A command's recorded result (tests/data/tools/record_sudo.sh)."""
    base = SUDO_DATA / case / name
    return Result([name], int(Path(f"{base}.status").read_text()), Path(f"{base}.txt").read_text(),
                  Path(f"{base}.stderr").read_text())


# --- what sudo answered, recorded on the testbed ----------------------------------------------------


@pytest.mark.parametrize("case, expected", [("passwordless", PASSWORDLESS), ("password", NEEDS_PASSWORD),
                                            ("some", NEEDS_PASSWORD), ("none", NONE)])
def test_recorded_sudo_answers_are_classified(case, expected):
    uid = recorded(case, "id-u").stdout
    assert uid.strip() != "0"
    assert classify_privilege(uid, recorded(case, "sudo-n-true"), recorded(case, "sudo-n-l"),
                              recorded(case, "id-Gn").stdout) == expected


def test_root_needs_no_sudo_and_a_host_without_sudo_has_none():
    assert classify_privilege("0\n", None, None, "root") == ROOT
    assert classify_privilege("1000\n", None, None, "ubuntu sudo") == NONE


def test_sudo_says_why_it_refused_and_which_commands_a_partial_rule_allows():
    assert sudo_complaint(recorded("none", "sudo-n-true").stderr) == "a password is required"
    assert sudo_complaint(recorded("passwordless", "sudo-n-true").stderr) is None
    # A rule for sysctl alone: sudo -l names it, and refuses ip without a word.
    assert recorded("some", "sudo-n-l-sysctl").stdout.strip().startswith("/usr/sbin/sysctl -q -w ")
    ip = recorded("some", "sudo-n-l-ip")
    assert ip.returncode == 1 and sudo_complaint(ip.stderr) is None


# --- the inventory and experiment files -----------------------------------------------------------


def test_become_in_the_inventory_wraps_only_what_needs_root():
    inventory = parse_inventory('[hosts.vm]\nssh = "198.18.250.1"\nuser = "ubuntu"\nbecome = "sudo"\n'
                                '[hosts.box]\nssh = "198.18.250.2"\nuser = "root"\nbecome = "sudo"\n'
                                '[hosts.plain]\nssh = "198.18.250.3"\nuser = "ubuntu"\n')
    assert [inventory.host(name).become for name in ("vm", "box", "plain")] == ["sudo", "sudo", None]
    vm, box, plain = (inventory.open(name) for name in ("vm", "box", "plain"))
    argv = ["sysctl", "-q", "-w", "net.ipv4.tcp_slow_start_after_idle=0"]
    assert vm.privileged_argv(argv) == ["sudo", "-n", "--", *argv]
    assert box.privileged_argv(argv) == argv and plain.privileged_argv(argv) == argv  # root needs nothing


def test_a_bad_become_is_one_line():
    with pytest.raises(LabkitError) as caught:
        parse_inventory('[hosts.vm]\nbecome = "su"\n')
    assert caught.value.message == "inventory: hosts.vm.become must be 'sudo' or 'none', not 'su'"


def test_knobs_of_an_experiment_file():
    assert knobs_of_experiment(tomllib.loads('[sweep]\nslow_start_after_idle = [1, 0]\ncc = "keep"\n')) == [
        "slow-start-after-idle"]
    assert knobs_of_experiment(tomllib.loads('slow-start-after-idle = "keep"\ncc = "cubic,bbr"\n')) == ["cc"]
    assert knobs_of_experiment(tomllib.loads('[load]\nconnections = [1]\n')) == []


def test_the_login_user_goes_into_private_copies_with_a_free_id():
    passwd = "root:x:0:0:root:/root:/bin/bash\nsomeone:x:59999:59999::/home/someone:/bin/sh\n"
    group = "root:x:0:\nother:x:59998:\n"
    uid = free_uid(passwd, group)
    assert uid == 59997
    new_passwd, new_shadow, new_group = with_user(passwd, "root:*:1::::::\n", group, "lab", uid, "/bin/bash")
    assert new_passwd.endswith("lab:x:59997:59997:labkit testbed login user:/home/lab:/bin/bash\n")
    assert new_shadow.endswith("lab:*:19000:0:99999:7:::\n") and new_group.endswith("lab:x:59997:\n")


@pytest.mark.parametrize("args, expected", [
    (["--sudo"], "--sudo/--no-sudo go with --login-user"),
    (["--login-user", "root"], "login user 'root' must be"),
    (["--login-user", "Bad User"], "login user 'Bad User' must be"),
])
def test_bad_login_options_are_one_line_exit_2(args, expected):
    name = own_testbed_name("p14-never")
    proc = labkit("testbed", "up", "--name", name, *args)
    assert proc.returncode == 2 and expected in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert f"labkit-{name}-a" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


# --- the testbed as a cloud VM: user lab, passwordless sudo, then none -----------------------------


@pytest.fixture(scope="module")
def machine_files():
    """The machine's own user and sudo files, before the testbed exists."""
    return {path: Path(path).read_bytes() for path in ("/etc/passwd", "/etc/shadow", "/etc/group")} | {
        "sudoers.d": sorted(os.listdir("/etc/sudoers.d")) if os.path.isdir("/etc/sudoers.d") else None}


@pytest.fixture(scope="module")
def lab(machine_files):
    with own_testbed("p14-sudo", ONE_WAY_S, login=LoginUser("lab", sudo=True), cc="cubic") as state:
        yield state


@pytest.fixture(scope="module")
def inventory(lab):
    """The testbed's own inventory (user lab, become = "sudo"), labkit deployed into lab's home."""
    labkit("deploy", str(lab.inventory), "--offline", check=True, timeout=600)
    return lab.inventory


def in_netns(lab, host: str, *argv: str) -> str:
    return subprocess.run(["ip", "netns", "exec", lab.hosts[host].netns, *argv],
                          capture_output=True, text=True, check=True).stdout.strip()


def kernel_state(lab) -> dict:
    return {host: (in_netns(lab, host, "cat", SSAI),
                   in_netns(lab, host, "ip", "-o", "route", "show", f"{lab.hosts['b' if host == 'a' else 'a'].data_address}/32"))
            for host in ("a", "b")}


@pytest.mark.testbed
def test_lab_exists_only_inside_the_testbed_and_has_passwordless_sudo(lab, machine_files):
    with pytest.raises(KeyError):
        pwd.getpwnam("lab")
    assert Path("/etc/passwd").read_bytes() == machine_files["/etc/passwd"]
    ssh = ["ssh", "-F", str(lab.ssh_config), lab.hosts["a"].ssh_alias, "--"]
    # ssh(1) hands sshd one command line, run by the user's login shell.
    seen = subprocess.run([*ssh, "id -un; echo $HOME; sudo -n -- id -u"], capture_output=True, text=True, timeout=30)
    assert seen.stdout.split() == ["lab", "/home/lab", "0"], seen.stderr
    root = subprocess.run([*ssh[:2], str(lab.ssh_config), "-l", "root", lab.hosts["a"].ssh_alias, "true"],
                          capture_output=True, text=True, timeout=30)
    assert root.returncode == 255 and "Permission denied" in root.stderr  # a cloud VM: no root login
    status = json.loads(labkit("testbed", "status", "--name", lab.name, "--json", "--no-ping", check=True).stdout)
    assert status["login"] == {"user": "lab", "sudo": True}


@pytest.mark.testbed
def test_hosts_check_reports_sudo_and_the_knobs_it_can_set(lab):
    proc = labkit("hosts", "check", str(lab.inventory), "--knob", "slow-start-after-idle", "--knob", "cc", timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith(("│ a ", "│ b "))]
    assert len(rows) == 2 and all("sudo (passwordless)" in row for row in rows)
    assert all(row.rstrip("│ ").endswith("│ -") for row in rows)  # "cannot set": nothing


@pytest.mark.testbed
def test_the_idle_step_sweep_runs_through_sudo_and_restores_the_kernel(lab, inventory, tmp_path):
    before = kernel_state(lab)
    # Two warm-up calls (one of each size) let the connection's window grow first, so with the sysctl
    # at 0 even the first recorded 30000 B call fits in one round trip.
    proc = labkit("sweep", str(inventory), "--client", "a", "--server", "b", "--sizes", "1000,30000", "--gaps", "1s",
                  "--repeats", "2", "--warmup", "2", "--slow-start-after-idle", "1,0", "--cc", "cubic",
                  "--ping-count", "3", "--iperf-seconds", "1", "--name", "sudo", "--runs-dir", str(tmp_path), "--quiet",
                  "--capture", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert kernel_state(lab) == before

    run = Run.open(next(tmp_path.glob("*-sudo")))
    samples = run.samples()
    assert run.status == "complete" and len(samples) == 8 and samples["ok"].all()
    # Round trips counted from the captured packets (labkit explain's flights), not from wall time, which a loaded
    # machine stretches: in a suite run both 1000 B calls with the sysctl at 1 took 1.44 RTT and more (and before,
    # one took 2.1), though each sent its one segment in one flight. The restart's extra round trip in every
    # 30000 B call with the sysctl at 1; one round for every 1000 B call, and for a 30000 B call with it at 0
    # (its window grown by the warm-up calls).
    explained = explain_run(run)
    assert len(explained) == 8 and (explained["evidence"] == "capture").all()
    rounds = explained.assign(ssai=explained["cell_id"].str.extract(r"ssai=(\d)")[0].astype(int)).groupby(
        ["ssai", "payload_bytes"])["rounds"]
    fewest, most = rounds.min(), rounds.max()
    assert fewest[(1, 30000)] >= 2 and fewest[(0, 30000)] == 1
    assert most[(1, 1000)] == most[(0, 1000)] == 1
    assert set(samples["tcp_cc"]) == {"cubic"}
    for host in ("a", "b"):
        assert run.manifest["hosts"][host]["login"] == {"user": "lab", "become": "sudo"}
    # tcpdump ran through sudo on both hosts, and its files came back to the run through lab's own SFTP.
    captures = run.manifest["captures"]
    assert sorted(c["host"] for c in captures) == ["a", "b"] and all(c["bytes"] > 0 for c in captures)
    assert leftover_processes(lab, ("tcpdump",)) == []


@pytest.mark.testbed
def test_restoring_after_a_crash_goes_through_sudo_too(lab, inventory):
    from labkit.hosts.kernel import KernelConditions, restore_from_manifest

    before = kernel_state(lab)
    inv = load_inventory(inventory)
    with inv.open("a") as host:
        conditions = KernelConditions(host, lab.hosts["b"].data_address)
        originals = conditions.capture()
        conditions.set_slow_start_after_idle(0)
        conditions.set_congestion_control("reno")
    assert kernel_state(lab)["a"][0] == "0" and "congctl reno" in kernel_state(lab)["a"][1]
    with inv.open("a") as host:  # as `labkit runs cleanup` does: a new connection, the manifest's originals
        assert restore_from_manifest(host, originals) == []
    assert kernel_state(lab) == before


@pytest.mark.testbed
def test_without_sudo_the_sweep_refuses_before_its_first_cell(lab, inventory, tmp_path):
    from labkit.testbed.lab import Testbed

    before = kernel_state(lab)
    Testbed(lab.name, log=lambda message: None).up(lab.link, LoginUser("lab", sudo=False))
    assert "become" not in lab.inventory.read_text()
    sweep = ["sweep", "--client", "a", "--server", "b", "--sizes", "1000", "--gaps", "0s", "--repeats", "1",
             "--slow-start-after-idle", "0", "--runs-dir", str(tmp_path), "--quiet"]
    proc = labkit(sweep[0], str(lab.inventory), *sweep[1:], timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("labkit: error: a cannot set slow-start-after-idle (net.ipv4.tcp_slow_start_after_idle): "
                               "logs in as lab, not root, and has no become = \"sudo\" in the inventory; b cannot set ")
    # With become = "sudo" but no sudo rule, sudo itself refuses: still before anything runs.
    data = tomllib.loads(lab.inventory.read_text())
    for table in data["hosts"].values():
        table["become"] = "sudo"
    asking = tmp_path / "become.toml"
    asking.write_text(tomli_w.dumps(data))
    proc = labkit(sweep[0], str(asking), *sweep[1:], "--cc", "cubic", timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert ("a cannot set slow-start-after-idle (net.ipv4.tcp_slow_start_after_idle): sudo -n refuses lab "
            "`sysctl -q -w net.ipv4.tcp_slow_start_after_idle=1` (a password is required)") in proc.stderr
    assert "a cannot set cc (the route's congctl): sudo -n refuses lab `ip route replace" in proc.stderr
    assert list(tmp_path.glob("*-sweep")) == [] and kernel_state(lab) == before

    # Nor can it capture packets: refused before the run exists, naming the hosts.
    capture = labkit("series", str(lab.inventory), "--client", "a", "--server", "b", "--duration", "2s", "--capture",
                     "--runs-dir", str(tmp_path), "--quiet", timeout=120)
    assert capture.returncode == 2 and len(capture.stderr.strip().splitlines()) == 1, capture.stderr
    assert "a cannot capture: logs in as lab, not root, and has no become" in capture.stderr
    assert list(tmp_path.glob("*-series")) == []

    check = labkit("hosts", "check", str(asking), "--knob", "cc", timeout=60)
    assert check.returncode == 1
    assert [line for line in check.stdout.splitlines() if line.startswith("│ a ")][0].split("│")[4].strip() == "none"
    assert "a: cannot set cc (the route's congctl): sudo -n refuses lab" in check.stdout


@pytest.mark.testbed
def test_down_takes_the_login_user_with_it(lab, machine_files):
    """Last in this module: takes the module's testbed down (the fixture's own down then finds nothing)."""
    from labkit.testbed.lab import Testbed

    Testbed(lab.name, log=lambda message: None).down()
    assert not lab.dir.exists()
    for path in ("/etc/passwd", "/etc/shadow", "/etc/group"):
        assert Path(path).read_bytes() == machine_files[path]
    if machine_files["sudoers.d"] is not None:
        assert sorted(os.listdir("/etc/sudoers.d")) == machine_files["sudoers.d"]
    assert not any(line.startswith(f"labkit-{lab.name}-")
                   for line in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines())

"""`labkit deploy` to a testbed of our own, over SSH, offline (the namespaces have no index), and the static tools a
run sends to the hosts that need them.

The wheel and the wheelhouse are cached in ~/.cache/labkit across runs; the
first run on a fresh machine builds and downloads them once.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest
import tomli_w
import tomllib

from conftest import LABKIT, labkit, own_testbed
from labkit import __version__
from labkit.deploy import build_hash, build_wheel, source_tree
from labkit.experiments import run_command
from labkit.hosts.layout import check_remote_labkit, remote_labkit_argv
from labkit.errors import LabkitError
from labkit.hosts import SSHHost, load_inventory, open_host

pytestmark = pytest.mark.testbed


@pytest.fixture(scope="module")
def lab():
    with own_testbed("h3-deploy", 0.005) as state:
        yield state


@pytest.fixture(scope="module")
def inventory(lab, tmp_path_factory):
    """The testbed's inventory with a fresh labkit_dir per host and a known_hosts that starts empty."""
    base = tmp_path_factory.mktemp("deploy")
    data = tomllib.loads(lab.inventory.read_text())
    data["known_hosts"] = str(base / "known_hosts")
    for name, table in data["hosts"].items():
        table["labkit_dir"] = str(base / "hosts" / name)
    path = base / "inventory.toml"
    path.write_text(tomli_w.dumps(data))
    return path


@pytest.fixture(scope="module")
def wheel():
    """This tree's wheel, built (or taken from the cache) once; the deploys below send exactly it."""
    return build_wheel()


def test_the_wheel_is_built_once_per_content():
    first, logged = build_wheel(), []
    second = build_wheel(log=logged.append)
    assert second == first and logged == []  # from the cache, no build
    assert first.path.name == f"labkit-{__version__}-py3-none-any.whl"
    # The cache key is the content of the package files; the build id is the wheel's own hash.
    assert first.path.parent.name == f"{__version__}-{build_hash(source_tree())[:16]}"
    assert first.build == hashlib.sha256(first.path.read_bytes()).hexdigest()


def test_unknown_host_keys_stop_the_deploy_and_labkit_is_missing(lab, inventory):
    proc = labkit("deploy", str(inventory), timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "labkit: error: deploy failed on a, b"
    assert re.search(r"a: failed: host key of \S+ \(ssh-ed25519 SHA256:\S+\) is not in .*--accept-new-host-keys",
                     proc.stderr)
    inv = load_inventory(inventory)
    assert not (inventory.parent / "hosts").exists()
    # What a sweep sees on a host with no labkit: one line that says what to run.
    with SSHHost("a", ssh=lab.hosts["a"].ssh_alias, ssh_config=lab.ssh_config) as host:
        with pytest.raises(LabkitError) as caught:
            check_remote_labkit(host, inv.host("a"), inventory)
    assert caught.value.message == (
        f"labkit is not deployed on a (in {inventory.parent / 'hosts' / 'a'}); run `labkit deploy {inventory} a`"
    )


def test_deploy_offline_then_skip(lab, inventory, wheel):
    # No static tool: the next test has the run send the one it needs.
    proc = labkit("deploy", "--accept-new-host-keys", "--wheel", str(wheel.path), "--tools", "none", str(inventory),
                  timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert not any((inventory.parent / "hosts" / name / "bin").exists() for name in ("a", "b")), proc.stderr
    results = dict(re.findall(r"^(a|b): ((?:deployed|skipped|failed): .*)$", proc.stderr, re.M))
    assert set(results) == {"a", "b"}, proc.stderr
    for name in ("a", "b"):
        assert results[name].startswith("deployed"), proc.stderr
        assert "(offline, " in results[name]  # auto mode on a testbed inventory
    assert "recorded new host key" in proc.stderr

    inv = load_inventory(inventory)
    build = wheel.short_build
    assert f"labkit {__version__} build {build}: deploying to a, b" in proc.stderr
    for name in ("a", "b"):
        entry = inv.host(name)
        marker = json.loads((inventory.parent / "hosts" / name / "build.json").read_text())
        assert marker["build"] == wheel.build and marker["version"] == __version__
        assert marker["mode"] == "offline"
        with open_host(inv, name) as host:
            # The argv the sweep will use, run over SSH.
            result = host.run([*remote_labkit_argv(entry), "--version"], check=True)
            assert result.stdout.strip() == f"labkit, version {__version__}"
            assert check_remote_labkit(host, entry) == __version__
            # Only the agent set is installed there: no pandas in the host's venv.
            assert not host.run([*remote_labkit_argv(entry)[:1], "-c", "import pandas"]).ok

    again = labkit("deploy", "--wheel", str(wheel.path), "--tools", "none", str(inventory), timeout=120)
    assert again.returncode == 0, again.stderr
    assert re.search(rf"^a: skipped: already has labkit {re.escape(__version__)} build {build}", again.stderr, re.M)
    assert re.search(rf"^b: skipped: already has labkit {re.escape(__version__)} build {build}", again.stderr, re.M)
    assert "downloading" not in again.stderr  # the local wheelhouse cache was used

    # Forced: reinstalled, but every file is already on the host, so nothing is sent again.
    forced = labkit("deploy", "--force", "--offline", "--wheel", str(wheel.path), "--tools", "none", str(inventory), "a",
                    timeout=120)
    assert forced.returncode == 0, forced.stderr
    assert re.search(r"^a: deployed: .*\(offline, nothing new sent\)", forced.stderr, re.M)
    assert f"build {wheel.short_build}: deploying to a\n" in forced.stderr and not re.search("^b: ", forced.stderr, re.M)
    assert not any((inventory.parent / "hosts" / name / "bin").exists() for name in ("a", "b"))


def test_a_host_without_labkit_go_is_told_what_would_send_it(lab, inventory):
    # As a Go sweep finds a host whose tools were not sent (deployed with --tools none, before any run sent them):
    # `labkit deploy` sends no more than a run would, so the line names what does.
    inv = load_inventory(inventory)
    with open_host(inv, "b") as host:
        result = host.run([*remote_labkit_argv(inv.host("b")), "echo", "serve", "--impl", "go",
                           "--bind", f"{inv.peer_address('b')}:0"], timeout=60)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("labkit: error: labkit-go is not installed here: build it with scripts/bootstrap.sh")
    assert "sends its copy to each host a run needs it on" in lines[0] and "labkit deploy" not in lines[0]


#: Run by an interpreter on a host: its real path and its minor version.
_WHICH_PYTHON = "import os, sys; print(os.path.realpath(sys._base_executable), *sys.version_info[:2])"


def _another_python(host, python: str) -> tuple[str, str] | None:
    """(path, real path) of an interpreter on this machine (which the testbed's hosts share) of the same minor
    version as ``python`` on the host, but another program: the offline wheelhouse deploy sends is per minor
    version, so a deploy with it needs no download."""
    real, *version = host.run([python, "-c", _WHICH_PYTHON], check=True).stdout.split()
    for candidate in sorted(Path("/root/.pyenv/versions").glob("3.*/bin/python3")) + [Path("/usr/bin/python3"),
                                                                                      Path("/usr/local/bin/python3")]:
        if candidate.exists():
            other, *other_version = host.run([str(candidate), "-c", _WHICH_PYTHON], check=True).stdout.split()
            if other_version == version and other != real:
                return str(candidate), other
    return None


def test_deploy_force_with_another_python_makes_the_venv_again(lab, inventory, wheel, tmp_path):
    """`python =` changed, then `deploy --force`: the venv is made again with the new interpreter (it said
    "deployed" and wrote the new python into build.json while the venv kept running the old one)."""
    data = tomllib.loads(inventory.read_text())
    data["hosts"]["a"]["labkit_dir"] = str(tmp_path / "a")  # a deployment of this test's own, on host a
    own = tmp_path / "inventory.toml"
    own.write_text(tomli_w.dumps(data))
    entry = load_inventory(own).host("a")
    with open_host(load_inventory(own), "a") as host:
        other = _another_python(host, entry.python)
    if other is None:
        pytest.skip(f"no second Python of the minor version of the hosts' {entry.python} on this machine "
                    "(looked in /root/.pyenv/versions, /usr/bin, /usr/local/bin)")
    first = labkit("deploy", "--wheel", str(wheel.path), "--tools", "none", str(own), "a", timeout=300)
    assert first.returncode == 0 and re.search(r"^a: deployed: ", first.stderr, re.M), first.stderr

    data["hosts"]["a"]["python"] = other[0]
    own.write_text(tomli_w.dumps(data))
    forced = labkit("deploy", "--force", "--wheel", str(wheel.path), "--tools", "none", str(own), "a", timeout=300)
    assert forced.returncode == 0 and re.search(r"^a: deployed: ", forced.stderr, re.M), forced.stderr
    assert json.loads((tmp_path / "a" / "build.json").read_text())["python"] == other[0]
    with open_host(load_inventory(own), "a") as host:
        venv_python = host.run([str(tmp_path / "a" / "venv" / "bin" / "python"), "-c", _WHICH_PYTHON], check=True)
        assert venv_python.stdout.split()[0] == other[1]
        assert check_remote_labkit(host, load_inventory(own).host("a")) == __version__


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_run_sends_labkit_go_to_the_host_whose_side_is_go_and_nothing_to_the_other(lab, inventory, wheel, tmp_path):
    """A sweep from a Python client on a to a Go server on b: b gets labkit-go as the run starts, a gets nothing; then
    `labkit deploy --tools labkit-go` sends it to a and not again to b, which has the same file."""
    bin_dir = {name: inventory.parent / "hosts" / name / "bin" for name in ("a", "b")}
    run = run_command("sweep", inventory, client="a", server="b", server_impl=["go"], sizes=[1000], repeats=1,
                      gaps_s=[0.1], ping_count=1, iperf_seconds=1, name="tools", runs_dir=tmp_path, quiet=True)
    assert run.status == "complete" and set(run.samples()["server_impl"]) == {"go"}
    local = _sha256(Path(LABKIT).with_name("labkit-go"))
    assert _sha256(bin_dir["b"] / "labkit-go") == local and not bin_dir["a"].exists()
    sent = (bin_dir["b"] / "labkit-go").stat()

    again = labkit("deploy", "--wheel", str(wheel.path), "--tools", "labkit-go", str(inventory), timeout=120)
    assert again.returncode == 0, again.stderr
    assert re.search(r"^a: skipped: .*; labkit-go sent \(", again.stderr, re.M), again.stderr
    assert re.search(r"^b: skipped: already has labkit \S+ build \S+ \(", again.stderr, re.M), again.stderr
    assert _sha256(bin_dir["a"] / "labkit-go") == local
    assert (bin_dir["b"] / "labkit-go").stat().st_ino == sent.st_ino  # not replaced: a new copy is renamed over it


def test_the_deployed_agent_serves_and_calls_across_the_link(lab, inventory):
    inv = load_inventory(inventory)
    with open_host(inv, "a") as a, open_host(inv, "b") as b:
        server = b.start([*remote_labkit_argv(inv.host("b")), "echo", "serve", "--bind", f"{inv.peer_address('b')}:0"])
        with server:
            port = json.loads(server.wait_for_line(lambda line: '"ready"' in line, timeout=30))["port"]
            call = a.run([*remote_labkit_argv(inv.host("a")), "echo", "call", "--target", f"{inv.peer_address('b')}:{port}",
                          "--sizes", "1000", "--repeats", "2", "--gap", "0s"], timeout=60, check=True)
        calls = [json.loads(line) for line in call.stdout.splitlines()]
        assert [c["ok"] for c in calls] == [True, True]
        # Each call crossed the 5 ms + 5 ms link.
        assert all(c["rtt_ns"] >= 10e6 for c in calls)
    listed = subprocess.run(["ip", "netns", "pids", lab.hosts["b"].netns], capture_output=True, text=True).stdout.split()
    assert server.pid not in map(int, listed)


def test_deploy_unknown_host_is_exit_2(inventory):
    proc = labkit("deploy", str(inventory), "a", "nosuch")
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"labkit: error: no host 'nosuch' in inventory {inventory}; known hosts: a, b"
    for tools, message in (("wrk", "'wrk' is not one of all, none, ghz, labkit-go, nats-server, vegeta"),
                           ("none,ghz", "give all, none, or tool names")):
        proc = labkit("deploy", str(inventory), "--tools", tools)
        assert proc.returncode == 2 and proc.stderr.strip() == (
            f"labkit: error: Invalid value for '--tools': {message} (see 'labkit deploy --help')"), proc.stderr

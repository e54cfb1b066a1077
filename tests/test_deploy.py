"""`labkit deploy` to a testbed of our own, over SSH, offline (the namespaces have no index), the static tools a
run sends to the hosts that need them, and hosts whose interpreter is Python 3.9 without venv or pip (deploy unpacks
the wheels there), or 3.13, or none, as `labkit hosts check` reports them.

The wheel and the wheelhouse are cached in ~/.cache/labkit across runs; the
first run on a fresh machine builds and downloads them once.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import tomli_w
import tomllib

from conftest import LABKIT, labkit, own_testbed
from labkit import __version__
from labkit.deploy import build_hash, build_wheel, source_tree
from labkit.store import Run
from labkit.experiments import run_command
from labkit.hosts.layout import check_remote_labkit, remote_labkit_argv
from labkit.errors import LabkitError
from labkit.hosts import SSHHost, load_inventory, open_host

pytestmark = pytest.mark.testbed


@pytest.fixture(scope="module")
def lab():
    with own_testbed("h1-deploy", 0.005) as state:
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


# -- hosts with other interpreters ------------------------------------------------------------
PYENV = Path("/root/.pyenv/versions")
#: What a stock Debian or Ubuntu image's python3 lacks until python3-venv and python3-pip are installed.
LEFT_OUT = ("venv", "ensurepip", "site-packages")


def _pyenv(minor: int) -> Path | None:
    found = sorted(PYENV.glob(f"3.{minor}.*/bin/python3.{minor}"))
    return found[-1] if found else None


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    """A real CPython 3.9 with no venv, no ensurepip and no pip, as a stock cloud image's python3: pyenv's 3.9 binary
    copied into a prefix of its own whose lib/python3.9 links every entry of pyenv's standard library but those
    (site-packages, where pip lives, is an empty directory). The interpreter finds its standard library from where
    its binary is (the copy's prefix), so nothing in pyenv's own tree is changed or seen."""
    real = _pyenv(9)
    if real is None:
        pytest.skip(f"no Python 3.9 in {PYENV}")
    prefix = tmp_path_factory.mktemp("bare-python39")
    stdlib = real.parent.parent / "lib" / "python3.9"
    (prefix / "bin").mkdir()
    (prefix / "lib" / "python3.9" / "site-packages").mkdir(parents=True)
    shutil.copy2(real, prefix / "bin" / "python3.9")
    for entry in stdlib.iterdir():
        if entry.name not in LEFT_OUT:
            os.symlink(entry, prefix / "lib" / "python3.9" / entry.name)
    python = prefix / "bin" / "python3.9"
    probe = subprocess.run([str(python), "-c", "import sys, importlib.util as u; print(sys.prefix, "
                            "*(u.find_spec(m) is None for m in ('venv', 'ensurepip', 'pip')))"],
                           capture_output=True, text=True, check=True)
    assert probe.stdout.split() == [str(prefix), "True", "True", "True"], probe.stdout
    refused = subprocess.run([str(python), "-m", "venv", str(prefix / "try")], capture_output=True, text=True)
    assert refused.returncode != 0 and "No module named venv" in refused.stderr
    return python


def _inventory_with(inventory: Path, path: Path, pythons: dict[str, str], labkit_dirs: dict[str, Path] = {}) -> Path:
    """The module's inventory with ``python =`` set per host (a name not in it: another entry for b's sshd)."""
    data = tomllib.loads(inventory.read_text())
    for name, python in pythons.items():
        table = data["hosts"].setdefault(name, dict(data["hosts"]["b"]))
        table["python"] = python
    for name, directory in labkit_dirs.items():
        data["hosts"][name]["labkit_dir"] = str(directory)
    path.write_text(tomli_w.dumps(data))
    return path


def test_hosts_check_says_what_deploy_will_do_with_python_3_9_3_13_and_none(lab, inventory, bare_python, tmp_path):
    """One line per host: a with the bare 3.9 (the wheels unpacked), b with 3.13 (a venv), c with no interpreter
    at all (refused, naming the fix): exit 2."""
    py313 = _pyenv(13)
    if py313 is None:
        pytest.skip(f"no Python 3.13 in {PYENV}")
    checked = _inventory_with(inventory, tmp_path / "inventory.toml",
                              {"a": str(bare_python), "b": str(py313), "c": "python3.0-not-installed"})
    proc = labkit("hosts", "check", "--accept-new-host-keys", str(checked), timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = {line.split(":")[0]: line for line in proc.stdout.splitlines() if re.match(r"^[abc]: ", line)}
    machine = os.uname().machine
    assert set(lines) == {"a", "b", "c"}, proc.stdout
    assert lines["a"].startswith(f"a: deploy makes the wheels unpacked (no venv or ensurepip there) with {bare_python} "
                                 f"(Python 3.9.18, {machine}); root: root; clock ")
    assert lines["b"].startswith(f"b: deploy makes a venv (venv and pip there) with {py313.resolve()} "
                                 f"(Python 3.13.0, {machine}); root: root; clock ")
    stacks = "python and go stacks" if Path(LABKIT).with_name("labkit-go").exists() else "python stack"
    assert lines["a"].endswith(f"serves the {stacks}") or "(no labkit-go here" in lines["a"]
    assert lines["c"] == ("c: python3.0-not-installed is not on the host's PATH; install Python >= 3.9 there or set "
                          'python = "/path/to/python3" in the inventory')
    rows = {line.split("│")[1].strip(): line for line in proc.stdout.splitlines() if line.startswith("│ ")}
    assert rows["a"].split("│")[5].strip() == "3.9.18" and rows["c"].split("│")[5].strip() == "-"


def test_deploy_unpacks_the_wheels_where_python_has_no_venv_or_pip_and_a_sweep_runs_there(lab, inventory, wheel,
                                                                                         bare_python, tmp_path):
    """a's interpreter is the bare 3.9: deploy unzips the 3.9 wheels into a's labkit_dir and nothing outside it, the
    marker says so, and a sweep from a to b (the controller's Python 3.11, deployed with pip into a venv) runs in
    both stacks, recording the versions a really ran."""
    own = _inventory_with(inventory, tmp_path / "inventory.toml", {"a": str(bare_python)}, {"a": tmp_path / "a"})
    prefix = bare_python.parent.parent
    before = sorted(str(path) for path in prefix.rglob("*"))
    proc = labkit("deploy", "--accept-new-host-keys", "--wheel", str(wheel.path), "--tools", "none", str(own),
                  timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^a: deployed: labkit \S+ build \S+ \(unpacked, no venv or pip there, \d+ file\(s\)", proc.stderr,
                     re.M), proc.stderr
    marker = json.loads((tmp_path / "a" / "build.json").read_text())
    assert (marker["install"], marker["mode"], marker["python"]) == ("unpacked", "offline", str(bare_python))
    assert marker["target"].startswith("cpython 3.9 ")
    assert sorted(str(path) for path in prefix.rglob("*")) == before  # nothing written beside the interpreter
    venv = tmp_path / "a" / "venv"
    assert (venv / "bin" / "python").resolve() == bare_python.resolve()
    assert not (venv / "bin" / "pip").exists()
    inv = load_inventory(own)
    with open_host(inv, "a") as host:
        assert not host.run([*remote_labkit_argv(inv.host("a"))[:1], "-m", "pip", "--version"]).ok

    go = Path(LABKIT).with_name("labkit-go").exists()
    run = run_command("sweep", own, client="a", server="b", server_impl=["python", "go"] if go else ["python"],
                      sizes=[1000], repeats=1, gaps_s=[0.1], ping_count=1, iperf_seconds=1, name="py39",
                      runs_dir=tmp_path / "runs", quiet=True)
    samples = run.samples()
    assert run.status == "complete" and samples["ok"].all()
    assert set(samples["server_impl"]) == ({"python", "go"} if go else {"python"})
    # The provenance says what a ran: its own interpreter and the 3.9 agent set, not this machine's.
    recorded = Run.open(run.path).manifest["hosts"]["a"]["python"]
    assert (recorded["python"], recorded["grpcio"], recorded["protobuf"]) == ("3.9.18", "1.80.1", "6.33.6")
    on_b = Run.open(run.path).manifest["hosts"]["b"]["python"]
    assert (on_b["grpcio"], on_b["protobuf"]) == (importlib.metadata.version("grpcio"), importlib.metadata.version("protobuf"))

    # The Python server on the 3.9 host, called from b.
    with open_host(inv, "a") as a, open_host(inv, "b") as b:
        server = a.start([*remote_labkit_argv(inv.host("a")), "echo", "serve", "--bind", f"{inv.peer_address('a')}:0"])
        with server:
            port = json.loads(server.wait_for_line(lambda line: '"ready"' in line, timeout=30))["port"]
            call = b.run([*remote_labkit_argv(inv.host("b")), "echo", "call", "--target", f"{inv.peer_address('a')}:{port}",
                          "--sizes", "1000", "--repeats", "2", "--gap", "0s"], timeout=60, check=True)
        assert [json.loads(line)["ok"] for line in call.stdout.splitlines()] == [True, True]

    # Deployed again with the same build: skipped; with the controller's interpreter instead: a venv again.
    again = labkit("deploy", "--wheel", str(wheel.path), "--tools", "none", str(own), "a", timeout=300)
    assert re.search(r"^a: skipped: ", again.stderr, re.M), again.stderr
    data = tomllib.loads(own.read_text())
    del data["hosts"]["a"]["python"]
    own.write_text(tomli_w.dumps(data))
    venv_again = labkit("deploy", "--wheel", str(wheel.path), "--tools", "none", str(own), "a", timeout=300)
    assert re.search(r"^a: deployed: .*\(offline, ", venv_again.stderr, re.M), venv_again.stderr
    assert json.loads((tmp_path / "a" / "build.json").read_text())["install"] == "venv"
    assert (venv / "bin" / "pip").exists()

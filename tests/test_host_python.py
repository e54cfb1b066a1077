"""labkit's host side on every interpreter a host may have (Python 3.9 to 3.13), installed as deploy installs it
without venv or pip: the agent set's pins resolve to wheels for each interpreter and architecture, and the host's
modules import, and the scripts deploy and the checks run there run, under real interpreters of each version.

The interpreters are pyenv's (/root/.pyenv/versions, as on CI); a version this machine lacks is skipped, naming it.
The wheels are downloaded once per target into ~/.cache/labkit (the first run on a fresh machine fetches them).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from labkit import __version__
from labkit.deploy import (AGENT_MODULES, AGENT_REQUIREMENTS_FILE, _LIST_SCRIPT, _UNPACK_SCRIPT, Target,
                           agent_requirements, build_wheel, build_wheelhouse, cache_home, parse_agent_requirements)
from labkit.errors import LabkitError
from labkit.hosts.facts import CLOCK_CODE, PYTHON_VERSIONS_CODE
from labkit.hosts.layout import PYTHON_FACTS_SCRIPT, TESTED_PYTHONS

PYENV = Path("/root/.pyenv/versions")
ARCHES = ("x86_64", "aarch64")
# The oldest glibc the pins must have wheels for: manylinux2014's (CentOS 7), below every image the docs name.
FLOOR_GLIBC = ("glibc", "2.17")


def interpreter(version: tuple[int, int]) -> Path | None:
    """A real CPython of ``version`` on this machine: pyenv's, else this one."""
    if sys.version_info[:2] == version:
        return Path(sys.executable)
    found = sorted(PYENV.glob(f"{version[0]}.{version[1]}.*/bin/python{version[0]}.{version[1]}"))
    return found[-1] if found else None


def _names(pins: list[str]) -> set[str]:
    return {re.sub(r"[-_.]+", "-", pin.split("==")[0]).lower() for pin in pins}


def _wheel_name(path: Path) -> str:
    return re.sub(r"[-_.]+", "-", path.name.split("-")[0]).lower()


# -- the pins -----------------------------------------------------------------------------
def test_the_agent_set_of_python_3_10_and_later_is_what_the_controller_runs():
    """Both ends run the same grpc where the host's Python allows: the >= 3.10 pins are this machine's versions."""
    for pin in agent_requirements(sys.version_info[:2]):
        name, version = pin.split("==")
        assert importlib.metadata.version(name) == version, (
            f"{AGENT_REQUIREMENTS_FILE} pins {pin}, this machine runs {importlib.metadata.version(name)}")
    # Python 3.9 gets other releases of the gRPC stack, and only where it must.
    old, new = dict(p.split("==") for p in agent_requirements((3, 9))), dict(p.split("==") for p in agent_requirements((3, 13)))
    assert set(old) == set(new)
    assert old["grpcio"] == "1.80.1" and old["protobuf"].startswith("6.") and new["protobuf"].startswith("7.")


def test_markers_are_evaluated_for_the_host_interpreter():
    text = 'a==1; python_version < "3.10"\na==2; python_version >= "3.10"\nb==3  # any\n'
    assert parse_agent_requirements(text, (3, 9)) == ["a==1", "b==3"]
    assert parse_agent_requirements(text, (3, 12)) == ["a==2", "b==3"]
    with pytest.raises(LabkitError, match=r"line 1: only python_version < or >= \"X.Y\" markers .*platform_machine"):
        parse_agent_requirements('a==1; platform_machine == "x86_64"', (3, 9))
    with pytest.raises(LabkitError, match="line 1: not NAME==VERSION"):
        parse_agent_requirements("a>=1", (3, 9))


def _resolved(version: tuple[int, int], arch: str) -> list[str]:
    """The wheel file names pip resolves (dependencies included) for the agent set on ``version`` and ``arch``;
    cached per pins and target, so a run after the first asks the index nothing."""
    target = Target(version, "cpython", arch, FLOOR_GLIBC)
    pins = agent_requirements(version)
    key = hashlib.sha256(json.dumps([pins, target.pip_options()]).encode()).hexdigest()[:16]
    record = cache_home() / "resolved" / f"cp{version[0]}{version[1]}-{arch}-{key}.json"
    if record.exists():
        return json.loads(record.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "requirements.txt").write_text("\n".join(pins) + "\n")
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "--dest", f"{tmp}/wheels",
             *target.pip_options(), "-r", f"{tmp}/requirements.txt"],
            capture_output=True, text=True, timeout=900,
        )
        assert proc.returncode == 0, f"cp{version[0]}{version[1]} {arch}: {proc.stderr.strip()[-2000:]}"
        names = sorted(path.name for path in Path(tmp, "wheels").iterdir())
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(names))
    return names


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("version", TESTED_PYTHONS, ids=lambda v: f"py{v[0]}{v[1]}")
def test_the_agent_set_resolves_to_wheels_for_each_python_and_architecture(version, arch):
    """pip resolves the pins, dependencies included, to binary wheels for the target: the file pins the whole set
    (nothing unpinned is pulled in), and every compiled wheel is for that interpreter and architecture."""
    wheels = _resolved(version, arch)
    pins = agent_requirements(version)
    assert {_wheel_name(Path(name)) for name in wheels} == _names(pins)
    for name in wheels:
        assert (name, name.split("-")[1]) in {(name, pin.split("==")[1]) for pin in pins if
                                              _names([pin]) == {_wheel_name(Path(name))}}
        tags = name[:-4].split("-")[-3:]
        if tags[2] != "any":
            assert arch in tags[2] and "manylinux" in tags[2], name
            assert tags[1] in (f"cp{version[0]}{version[1]}", "abi3"), name


# -- the host side under each interpreter --------------------------------------------------
@pytest.fixture(scope="module")
def wheel():
    return build_wheel()


_IMPORT_ALL = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(name for name in sys.modules if name == "labkit" or name.startswith("labkit."))))
"""


@pytest.mark.parametrize("version", TESTED_PYTHONS, ids=lambda v: f"py{v[0]}{v[1]}")
def test_the_host_side_runs_unpacked_under_each_python(version, wheel, tmp_path):
    """As deploy installs on a host without venv or pip: the wheels for this interpreter unpacked by it into a venv
    of deploy's making; then every agent module imports, every module of labkit it pulls in compiles, the scripts
    deploy and the checks run on a host run, and the facts a run records are the versions really there."""
    python = interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version[0]}.{version[1]} here (looked in {PYENV})")
    machine = subprocess.run([str(python), "-c", "import platform; print(platform.machine())"], capture_output=True,
                             text=True, check=True).stdout.strip()
    libc = subprocess.run([str(python), "-c", "import platform; print(*platform.libc_ver())"], capture_output=True,
                          text=True, check=True).stdout.split()
    house = build_wheelhouse(Target(version, "cpython", machine, tuple(libc)))
    wheels = [str(wheel.path), *map(str, sorted(house.glob("*.whl")))]
    subprocess.run([str(python), "-c", _UNPACK_SCRIPT, str(tmp_path), *wheels], check=True, timeout=300)
    venv_python = tmp_path / "venv" / "bin" / "python"

    def run(*argv, **kwargs):
        # cwd: `-c` puts the working directory first on sys.path, and this checkout's labkit must not be found there.
        return subprocess.run([str(venv_python), *argv], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              **kwargs)

    # The interpreter is the host's own, isolated from its system site-packages.
    where = json.loads(run("-c", "import json, sys; print(json.dumps([sys.prefix, sys.base_prefix, sys.path]))").stdout)
    assert where[0] == str(tmp_path / "venv") and where[1] != where[0]
    assert not any("site-packages" in entry and not entry.startswith(str(tmp_path)) for entry in where[2])

    imported = run("-W", "error::SyntaxWarning", "-c", _IMPORT_ALL, *AGENT_MODULES)
    assert imported.returncode == 0, imported.stderr
    assert imported.stderr == ""  # no warning at import (protobuf's gencode/runtime check among them)
    modules = set(json.loads(imported.stdout))
    assert set(AGENT_MODULES) <= modules and "labkit.proto.echo_pb2" in modules
    assert not {"labkit.store", "labkit.analysis", "pandas"} & modules  # the host side stays small

    site = tmp_path / "venv" / "lib" / f"python{version[0]}.{version[1]}" / "site-packages"
    compiled = run("-m", "compileall", "-q", str(site / "labkit" / "echo"), str(site / "labkit" / "proto"),
                   str(site / "labkit" / "hosts"), str(site / "labkit" / "cli" / "echo.py"))
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr

    assert run("-m", "labkit", "--version").stdout.strip() == f"labkit, version {__version__}"
    facts = json.loads(run("-c", PYTHON_FACTS_SCRIPT).stdout)
    assert facts["version"][:2] == list(version) and facts["machine"] == machine
    listed = json.loads(run("-c", _LIST_SCRIPT, str(house)).stdout)
    assert set(listed) >= {Path(w).name for w in wheels[1:]}
    assert "synchronized" not in run("-c", CLOCK_CODE, check=True).stdout  # the raw adjtimex line: it ran
    # What a run's provenance records of the host: the versions that were really imported there.
    recorded = json.loads(run("-c", PYTHON_VERSIONS_CODE, check=True).stdout)
    pins = dict(pin.split("==") for pin in agent_requirements(version))
    assert recorded["python"].startswith(f"{version[0]}.{version[1]}.")
    assert (recorded["grpcio"], recorded["protobuf"], recorded["labkit"]) == (pins["grpcio"], pins["protobuf"], __version__)


def test_an_echo_round_trip_under_the_oldest_python(wheel, tmp_path):
    """The agents, not only their imports, on Python 3.9: `labkit echo serve` and `echo call` on loopback."""
    version = TESTED_PYTHONS[0]
    python = interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version[0]}.{version[1]} here (looked in {PYENV})")
    libc = subprocess.run([str(python), "-c", "import platform; print(*platform.libc_ver())"], capture_output=True,
                          text=True, check=True).stdout.split()
    import platform

    house = build_wheelhouse(Target(version, "cpython", platform.machine(), tuple(libc)))
    subprocess.run([str(python), "-c", _UNPACK_SCRIPT, str(tmp_path), str(wheel.path),
                    *map(str, sorted(house.glob("*.whl")))], check=True, timeout=300)
    labkit = [str(tmp_path / "venv" / "bin" / "python"), "-m", "labkit", "echo"]
    server = subprocess.Popen([*labkit, "serve", "--bind", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True,
                              cwd=tmp_path)
    try:
        line = server.stdout.readline()
        while line and '"ready"' not in line:
            line = server.stdout.readline()
        ready = json.loads(line)  # the line the server prints once it listens
        call = subprocess.run([*labkit, "call", "--target", f"127.0.0.1:{ready['port']}", "--sizes", "1000,100000",
                               "--repeats", "2", "--gap", "0s"], capture_output=True, text=True, timeout=120,
                              cwd=tmp_path)
        assert call.returncode == 0, call.stderr
        calls = [json.loads(line) for line in call.stdout.splitlines()]
        assert [c["ok"] for c in calls] == [True] * 4
    finally:
        server.terminate()
        server.wait(timeout=30)


_FORK_WHILE_A_CHANNEL_IS_BUSY = """
import json, subprocess, sys, threading
import labkit.echo  # what every agent imports before grpc
from concurrent import futures
import grpc

server = grpc.server(futures.ThreadPoolExecutor(2))
port = server.add_insecure_port("127.0.0.1:0")
server.start()
channel = grpc.insecure_channel(f"127.0.0.1:{port}")
done = threading.Event()

def busy():
    while not done.is_set():
        try:
            channel.unary_unary("/labkit.Nothing/Here")(b"", timeout=0.05)
        except grpc.RpcError:
            pass

threading.Thread(target=busy, daemon=True).start()
failed = []
for _ in range(int(sys.argv[1])):
    child = subprocess.run([sys.executable, "-c", ""], capture_output=True, text=True)
    if child.returncode != 0:
        failed.append([child.returncode, child.stderr[-200:]])
done.set()
print(json.dumps(failed))
"""


def test_the_oldest_pythons_subprocesses_start_while_an_agents_channel_is_busy(wheel, tmp_path):
    """Python 3.9 starts a subprocess with fork(), which runs gRPC core's fork handlers: left on, they aborted one
    child in seven (-6, "epoll_wait error: Bad file descriptor") while a channel was in use, which is how a series
    agent's ping died on a bullseye host. With the agents' setting, 200 children forked beside a busy channel all
    run."""
    version = TESTED_PYTHONS[0]
    python = interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version[0]}.{version[1]} here (looked in {PYENV})")
    import platform

    libc = subprocess.run([str(python), "-c", "import platform; print(*platform.libc_ver())"], capture_output=True,
                          text=True, check=True).stdout.split()
    house = build_wheelhouse(Target(version, "cpython", platform.machine(), tuple(libc)))
    subprocess.run([str(python), "-c", _UNPACK_SCRIPT, str(tmp_path), str(wheel.path),
                    *map(str, sorted(house.glob("*.whl")))], check=True, timeout=300)
    proc = subprocess.run([str(tmp_path / "venv" / "bin" / "python"), "-c", _FORK_WHILE_A_CHANNEL_IS_BUSY, "200"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == []

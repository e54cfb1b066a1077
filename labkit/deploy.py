"""Make this labkit runnable on every host of an inventory: ``labkit deploy``.

Per host, in ``labkit_dir`` (default ``~/.labkit/NAME``)::

    wheelhouse/               the labkit wheel, and (offline, or without venv and pip) the agent's wheels
    agent-requirements.txt    the agent set for the host's interpreter (labkit/echo/agent-requirements.txt)
    venv/                     where the interpreter has venv and ensurepip: python3 -m venv (made again when the
                              inventory's python is another interpreter), the agent set installed with pip and
                              labkit with --no-deps; else ("unpacked") a venv deploy lays out itself, its
                              site-packages the wheels unpacked (a wheel is a zip), by the host's own interpreter
    build.json                marker: which build is installed, and how (a host with the same build is skipped)
    bin/ghz, bin/labkit-go,   the static tools of this machine (hosts.layout.TOOLS): ghz (labkit load's
    bin/nats-server,          gRPC load generator), labkit-go (the grpc-go echo, and hop's back and
    bin/vegeta                front), nats-server and vegeta (labkit hop's NATS server and open-loop
                              load generator), when it has them: those ``tools`` names (all by default,
                              none for ``labkit demo``, whose sweep needs none); each sent again only when
                              its SHA-256 differs. An experiment sends the ones its plan needs itself
                              (labkit.hosts.tools), so a host gets a tool the first time a run needs it.

A host only runs the agent side of labkit (echo serve/call and the tool
wrappers), so the venv gets the labkit wheel with ``--no-deps`` plus the small
agent set, not pandas or matplotlib; that side runs on Python >= 3.9
(:data:`labkit.hosts.layout.MIN_PYTHON`), the controller on >= 3.11. The wheel is built once per content hash
of the package files and cached under ``~/.cache/labkit/wheels``; the offline
wheelhouse is downloaded once per target (Python version, platform) under
``~/.cache/labkit/wheelhouse``, and only files a host lacks are uploaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from labkit.errors import LabkitError
from labkit.hosts.inventory import HostEntry, Inventory, load_inventory, open_host
from labkit.hosts.layout import TOOLS, host_path, python_facts, python_refusal, remote_labkit_version
from labkit.hosts.tools import send_tools
from labkit.provenance import REPO_ROOT
from labkit.version import __version__

# What runs on a host: the echo service and client, and the CLI around them, pinned per interpreter range.
AGENT_REQUIREMENTS_FILE = Path(__file__).resolve().parent / "echo" / "agent-requirements.txt"
# Imported on the host after installing, so a missing agent dependency fails the deploy, not the sweep.
AGENT_MODULES = ("labkit.cli", "labkit.cli.echo", "labkit.echo.server", "labkit.echo.client", "labkit.echo.tcpinfo",
                 "labkit.echo.tcp_echo", "labkit.echo.series_agent",
                 "labkit.echo.http2", "labkit.echo.upload_agent")
MARKER = "build.json"
INSTALLS = ("venv", "unpacked")
MODES = ("auto", "offline", "online")
# Where auto mode checks that a host can reach the package index.
INDEX_HOST = ("pypi.org", 443)

# Run by the host's interpreter, with the labkit_dir and the wheels: lays out labkit_dir/venv as `python -m venv
# --without-pip` would (pyvenv.cfg beside bin/, bin/python a symlink to this interpreter, which Python's start-up
# then reads as a venv with its own site-packages and not the system's), unpacks every wheel into its
# site-packages, and only then puts it in place of the old one, so a failed deploy leaves the last one working.
# Nothing outside labkit_dir is written, and it needs neither venv nor pip.
_UNPACK_SCRIPT = """
import os, platform, shutil, sys, zipfile
base, wheels = sys.argv[1], sys.argv[2:]
venv, new, old = (os.path.join(base, name) for name in ("venv", ".venv.new", ".venv.old"))
for path in (new, old):
    shutil.rmtree(path, ignore_errors=True)
executable = os.path.abspath(sys._base_executable)
short = "python%d.%d" % sys.version_info[:2]
site = os.path.join(new, "lib", short, "site-packages")
os.makedirs(site)
os.makedirs(os.path.join(new, "bin"))
for name in ("python", "python3", short):
    os.symlink(executable, os.path.join(new, "bin", name))
with open(os.path.join(new, "pyvenv.cfg"), "w") as cfg:
    cfg.write("home = %s\\ninclude-system-site-packages = false\\nversion = %s\\n"
              % (os.path.dirname(executable), platform.python_version()))
for wheel in wheels:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
for name in os.listdir(site):
    if name.endswith(".data"):
        # A wheel's NAME.data/purelib and platlib belong in site-packages; its scripts and headers are not needed.
        for scheme in ("purelib", "platlib"):
            tree = os.path.join(site, name, scheme)
            if os.path.isdir(tree):
                for item in os.listdir(tree):
                    os.rename(os.path.join(tree, item), os.path.join(site, item))
        shutil.rmtree(os.path.join(site, name))
if os.path.lexists(venv):
    os.rename(venv, old)
os.rename(new, venv)
shutil.rmtree(old, ignore_errors=True)
"""
# Run by an interpreter: the real path of the interpreter it is (in a venv, of the one the venv was made with).
_BASE_INTERPRETER_SCRIPT = "import os, sys; print(os.path.realpath(sys._base_executable))"
# Run by the host's interpreter: name -> size of each file in a directory (empty if missing).
_LIST_SCRIPT = """
import json, os, sys
d = sys.argv[1]
print(json.dumps({n: os.path.getsize(os.path.join(d, n)) for n in os.listdir(d)} if os.path.isdir(d) else {}))
"""
_INDEX_PROBE_SCRIPT = """
import socket, sys
socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
"""


def cache_home() -> Path:
    """``$LABKIT_CACHE_HOME``, else ``$XDG_CACHE_HOME/labkit``, else ``~/.cache/labkit``."""
    if os.environ.get("LABKIT_CACHE_HOME"):
        return Path(os.environ["LABKIT_CACHE_HOME"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "labkit"


# -- the wheel ---------------------------------------------------------------------------
@dataclass(frozen=True)
class LabkitWheel:
    path: Path
    version: str
    build: str  # SHA-256 of the wheel file: what the host's marker records

    @property
    def short_build(self) -> str:
        return self.build[:12]

    @classmethod
    def from_file(cls, path: Path) -> "LabkitWheel":
        return cls(path, path.name.split("-")[1], hashlib.sha256(path.read_bytes()).hexdigest())


def source_tree() -> Path:
    """The checkout labkit runs from; deploy builds the wheel from it."""
    root = REPO_ROOT
    pyproject = root / "pyproject.toml"
    if not pyproject.exists() or not re.search(r'^name\s*=\s*"labkit"', pyproject.read_text(), re.M):
        raise LabkitError(
            f"labkit deploy builds its wheel from the source tree, and {root} is not one; "
            "install labkit from a checkout (pip install -e .)"
        )
    return root


def build_hash(root: Path) -> str:
    """SHA-256 over the names and contents of every file that goes into the wheel (not what a build leaves in
    the tree, such as the compiled log reader, which hosts do not run)."""
    digest = hashlib.sha256()
    files = [root / "pyproject.toml", root / "README.md"]
    files += sorted(
        path for path in (root / "labkit").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo", ".so")
    )
    for path in files:
        if path.exists():
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def existing_wheel(path: str | os.PathLike) -> LabkitWheel:
    """A labkit wheel built elsewhere (a release, or a CI artifact)."""
    path = Path(path).expanduser().resolve()
    if not re.fullmatch(r"labkit-[^-]+-.+\.whl", path.name) or not path.is_file():
        raise LabkitError(f"{path} is not a labkit wheel file (labkit-VERSION-...whl)")
    return LabkitWheel.from_file(path)


def build_wheel(log=lambda message: None) -> LabkitWheel:
    """The labkit wheel of the current source tree, built once per content hash (:func:`build_hash`) and cached."""
    root = source_tree()
    for _ in range(2):
        build = build_hash(root)
        cache = cache_home() / "wheels" / f"{__version__}-{build[:16]}"
        found = sorted(cache.glob("labkit-*.whl"))
        if found:
            return LabkitWheel.from_file(found[0])
        log(f"building the labkit wheel from {root} (cached in {cache})")
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = tempfile.mkdtemp(dir=cache.parent, prefix=".build-")
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q",
                 "--wheel-dir", tmp, str(root)],
                capture_output=True, text=True,
            )
            if proc.returncode != 0:
                detail = (proc.stderr or proc.stdout).strip().splitlines()
                raise LabkitError(f"building the labkit wheel failed: {detail[-1] if detail else proc.returncode}")
            # A file edited during the build would make the wheel disagree with its hash: build again.
            if build_hash(root) != build:
                continue
            try:
                os.rename(tmp, cache)
            except OSError:
                pass  # a concurrent deploy cached the same build first
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    found = sorted(cache.glob("labkit-*.whl"))
    if not found:
        raise LabkitError(f"the labkit source tree {root} kept changing during the wheel build; try again")
    return LabkitWheel.from_file(found[0])


# -- the agent set and the offline wheelhouse ----------------------------------------------
_REQUIREMENT = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)\s*(?:;\s*(.+))?")
_MARKER = re.compile(r'python_version\s*(<|>=)\s*"(\d+)\.(\d+)"')


def parse_agent_requirements(text: str, version: tuple[int, int]) -> list[str]:
    """The ``name==version`` pins of an agent-requirements file that apply to Python ``version``.

    Its markers are evaluated here, for the host's interpreter: pip download evaluates them for the interpreter
    it runs on, whatever --python-version says. Only ``python_version`` with < or >= (joined by ``and``) is allowed.
    """
    pins = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = _REQUIREMENT.fullmatch(line)
        if not match:
            raise LabkitError(f"{AGENT_REQUIREMENTS_FILE.name} line {number}: not NAME==VERSION[; MARKER]: {line}")
        name, pinned, marker = match.groups()
        applies = True
        for clause in (marker.split(" and ") if marker else []):
            test = _MARKER.fullmatch(clause.strip())
            if not test:
                raise LabkitError(f"{AGENT_REQUIREMENTS_FILE.name} line {number}: only python_version < or >= "
                                  f"\"X.Y\" markers are evaluated, not {clause.strip()}")
            bound = (int(test.group(2)), int(test.group(3)))
            applies &= version < bound if test.group(1) == "<" else version >= bound
        if applies:
            pins.append(f"{name}=={pinned}")
    return pins


def agent_requirements(version: tuple[int, int]) -> list[str]:
    """The agent set for a host whose interpreter is Python ``version``."""
    return parse_agent_requirements(AGENT_REQUIREMENTS_FILE.read_text(), tuple(version[:2]))


@dataclass(frozen=True)
class Target:
    """What a host's interpreter accepts, as pip download's --python-version/--platform options."""

    version: tuple[int, int]
    implementation: str
    machine: str
    libc: tuple[str, str]

    def describe(self) -> str:
        return f"{self.implementation} {self.version[0]}.{self.version[1]} {self.machine} {' '.join(self.libc)}"

    def pip_options(self) -> list[str]:
        if self.implementation != "cpython":
            raise LabkitError(f"offline deploy needs CPython on the host, not {self.implementation}; use --online")
        if self.libc[0] != "glibc":
            raise LabkitError(f"offline deploy needs a glibc host, not {self.libc[0] or 'an unknown libc'}; use --online")
        major, minor = self.version
        glibc_minor = int(self.libc[1].split(".")[1])
        # Every manylinux tag this glibc accepts, newest first (PEP 600 and the legacy aliases).
        platforms = [f"manylinux_2_{n}_{self.machine}" for n in range(glibc_minor, 4, -1)]
        platforms += [f"manylinux{alias}_{self.machine}" for alias in ("2014", "2010", "1")]
        options = ["--only-binary=:all:", "--implementation", "cp", "--python-version", f"{major}{minor}",
                   "--abi", f"cp{major}{minor}"]
        for tag in platforms:
            options += ["--platform", tag]
        return options


def build_wheelhouse(target: Target, log=lambda message: None) -> Path:
    """The agent set's wheels for ``target``, downloaded once and cached."""
    requirements = agent_requirements(target.version)
    key = hashlib.sha256(json.dumps([requirements, target.pip_options()]).encode()).hexdigest()[:16]
    house = cache_home() / "wheelhouse" / f"cp{target.version[0]}{target.version[1]}-{target.machine}-{key}"
    if (house / ".complete").exists():
        return house
    log(f"downloading the agent wheels for {target.describe()} (cached in {house})")
    house.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=house.parent) as tmp:
        (Path(tmp) / "requirements.txt").write_text("\n".join(requirements) + "\n")
        wheels = Path(tmp) / "wheels"
        # --no-deps: the file pins the whole set (tests/test_host_python.py resolves it with dependencies).
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "--no-deps",
             "--dest", str(wheels), *target.pip_options(), "-r", str(Path(tmp) / "requirements.txt")],
            capture_output=True, text=True,
        )
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            raise LabkitError(f"downloading the agent wheels failed: {detail[-1] if detail else proc.returncode}")
        (wheels / ".complete").write_text(json.dumps(sorted(p.name for p in wheels.glob("*.whl"))))
        try:
            os.rename(wheels, house)
        except OSError:
            pass  # a concurrent deploy filled the cache first
    return house


@dataclass
class DeployResult:
    host: str
    status: str  # "deployed", "skipped" or "failed"
    detail: str = ""
    seconds: float = 0.0


class _Deployer:
    """Deploys one wheel to many hosts; shares the local caches between them."""

    def __init__(self, inventory: Inventory, wheel: LabkitWheel, mode: str, accept_new_host_keys: bool,
                 force: bool, say, progress=None, tools: tuple[str, ...] = TOOLS):
        self.inventory = inventory
        self.tools = tools
        self.wheel = wheel
        self.mode = mode
        self.accept_new_host_keys = accept_new_host_keys
        self.force = force
        self.say = say
        self.progress = progress
        self._tasks: dict[str, int] = {}
        self._wheelhouse_lock = threading.Lock()

    def _step(self, name: str, text: str, total: float | None = None) -> None:
        if self.progress is not None:
            self.progress.update(self._tasks[name], description=f"{name}: {text}", completed=0, total=total)

    def deploy(self, name: str) -> DeployResult:
        start = time.monotonic()
        if self.progress is not None:
            self._tasks[name] = self.progress.add_task(f"{name}: connecting", total=None)
        host = None
        try:
            entry = self.inventory.host(name)
            host = open_host(self.inventory, name, accept_new_host_keys=self.accept_new_host_keys)
            result = self._deploy(host, entry)
        except LabkitError as exc:
            # Host errors start with the host's name, which the result line already shows.
            result = DeployResult(name, "failed", exc.message.removeprefix(f"{name}: "))
        finally:
            if host is not None:
                host.close()
            if self.progress is not None:
                self.progress.remove_task(self._tasks[name])
        result.seconds = time.monotonic() - start
        return result

    def _run(self, host, argv: list[str], what: str, timeout: float = 600):
        result = host.run(argv, timeout=timeout)
        if not result.ok:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise LabkitError(f"{host.name}: {what} failed: {detail[-1] if detail else f'exit {result.returncode}'}")
        return result

    def _deploy(self, host, entry: HostEntry) -> DeployResult:
        name = entry.name
        base = host_path(entry, entry.labkit_dir)
        self._step(name, "checking what is installed")
        if not self.force:
            installed = self._read_marker(host, base)
            # The same build made with another interpreter is deployed again: the venv runs the one it was made with.
            if (installed.get("build") == self.wheel.build and installed.get("python") == entry.python
                    and remote_labkit_version(host, entry) == self.wheel.version):
                tools = self._send_tools(host, entry)
                return DeployResult(name, "skipped", f"already has labkit {self.wheel.version} build {self.wheel.short_build}{tools}")
        target, install = self._target(host, entry)
        # Without venv and pip the host cannot install from an index: the wheels come from here.
        mode = self._mode(host, entry) if install == "venv" else "offline"
        host.make_dir(f"{base}/wheelhouse")
        files = [self.wheel.path]
        if mode == "offline":
            with self._wheelhouse_lock:  # hosts with the same target share one download
                house = build_wheelhouse(target, log=self.say)
            files += sorted(house.glob("*.whl"))
        present = json.loads(self._run(host, [entry.python, "-c", _LIST_SCRIPT, f"{base}/wheelhouse"], "listing the wheelhouse").stdout)
        missing = [path for path in files if present.get(path.name) != path.stat().st_size]
        sent = sum(path.stat().st_size for path in missing)
        self._step(name, f"uploading {len(missing)} of {len(files)} file(s)", total=sent or None)
        for path in missing:
            host.put(path, f"{base}/wheelhouse/{path.name}")
            if self.progress is not None:
                self.progress.advance(self._tasks[name], path.stat().st_size)
        with tempfile.TemporaryDirectory() as tmp:
            requirements = Path(tmp) / "agent-requirements.txt"
            requirements.write_text("\n".join(agent_requirements(target.version)) + "\n")
            host.put(requirements, f"{base}/agent-requirements.txt")
        python = f"{base}/venv/bin/python"
        if install == "unpacked":
            self._step(name, f"unpacking {len(files)} wheel(s) with {entry.python}")
            self._run(host, [entry.python, "-c", _UNPACK_SCRIPT, base,
                             *(f"{base}/wheelhouse/{path.name}" for path in files)], "unpacking the wheels")
        else:
            if not host.exists(python):
                self._step(name, f"creating the venv with {entry.python}")
                self._make_venv(host, entry, base)
            elif (self._base_interpreter(host, python) != self._base_interpreter(host, entry.python)
                  or not host.exists(f"{base}/venv/bin/pip")):
                # A venv runs the interpreter it was made with, whatever is installed into it: another `python =` in
                # the inventory needs a new venv (so does one deploy unpacked, which has no pip).
                self._step(name, f"making the venv again with {entry.python}")
                self._make_venv(host, entry, base, clear=True)
            self._step(name, f"installing ({mode})")
            pip = [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-q"]
            index = ["--no-index", "--find-links", f"{base}/wheelhouse"] if mode == "offline" else []
            self._run(host, [*pip, *index, "-r", f"{base}/agent-requirements.txt"], "installing the agent requirements")
            # Same version number, new build: --force-reinstall replaces the files. --ignore-requires-python: the
            # wheel's Requires-Python is the controller's (>= 3.11); a host runs only its agent side, which is >= 3.9.
            self._run(host, [*pip, "--no-deps", "--force-reinstall", "--ignore-requires-python", "--no-index",
                             f"{base}/wheelhouse/{self.wheel.path.name}"], "installing the labkit wheel")
        self._step(name, "checking")
        # The argv every experiment runs labkit with: the venv's python -m labkit, never the venv/bin/labkit
        # script (pip may write it as a shell wrapper that embeds the path).
        version = remote_labkit_version(host, entry)
        if version != self.wheel.version:
            found = f"version {version}" if version else "no version"
            raise LabkitError(f"{name}: after installing, `{python} -m labkit --version` there gives {found}, "
                              f"not version {self.wheel.version}")
        self._run(host, [python, "-c", f"import {', '.join(AGENT_MODULES)}"], "importing labkit's agent modules")
        self._write_marker(host, entry, base, mode, target, install)
        tools = self._send_tools(host, entry)
        sent_text = f"{len(missing)} file(s), {sent / 1e6:.1f} MB sent" if missing else "nothing new sent"
        how = mode if install == "venv" else "unpacked, no venv or pip there"
        return DeployResult(name, "deployed", f"labkit {version} build {self.wheel.short_build} ({how}, {sent_text}){tools}")

    def _send_tools(self, host, entry: HostEntry) -> str:
        """Copy the tools asked for that this machine has into the host's bin/ unless the same file is there; say what
        happened."""
        notes = send_tools(host, entry, self.tools, step=lambda text: self._step(entry.name, text))
        return "; " + "; ".join(notes) if notes else ""

    def _read_marker(self, host, base: str) -> dict:
        try:
            return json.loads(host.read_bytes(f"{base}/{MARKER}"))
        except (LabkitError, ValueError):
            return {}

    def _write_marker(self, host, entry: HostEntry, base: str, mode: str, target: Target, install: str) -> None:
        marker = {
            "build": self.wheel.build,
            "version": self.wheel.version,
            "wheel": self.wheel.path.name,
            "mode": mode,
            "install": install,  # "venv" (python -m venv and pip) or "unpacked" (the wheels unzipped, no venv or pip)
            "python": entry.python,
            "target": target.describe(),
            "deployed_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / MARKER
            path.write_text(json.dumps(marker, indent=2) + "\n")
            host.put(path, f"{base}/{MARKER}")

    def _target(self, host, entry: HostEntry) -> tuple[Target, str]:
        """The host interpreter's wheel target and how labkit is installed there (:data:`INSTALLS`)."""
        facts = python_facts(host, entry)
        refusal = python_refusal(entry, facts)
        if refusal:
            raise LabkitError(f"{entry.name}: {refusal}")
        return (Target(tuple(facts["version"][:2]), facts["implementation"], facts["machine"], tuple(facts["libc"])),
                facts["install"])

    def _mode(self, host, entry: HostEntry) -> str:
        if self.mode != "auto":
            return self.mode
        if self.inventory.testbed is not None:
            return "offline"  # the testbed's namespaces have no route to a package index
        probe = host.run([entry.python, "-c", _INDEX_PROBE_SCRIPT, *map(str, INDEX_HOST)], timeout=30)
        if probe.ok:
            return "online"
        self.say(f"{entry.name}: cannot reach {INDEX_HOST[0]}; installing from an uploaded wheelhouse (--offline)")
        return "offline"

    def _base_interpreter(self, host, python: str) -> str | None:
        """The real path of the interpreter ``python`` runs on the host (a venv's: the one it was made with); None
        when it does not run."""
        result = host.run([python, "-c", _BASE_INTERPRETER_SCRIPT], timeout=60)
        return result.stdout.strip() if result.ok else None

    def _make_venv(self, host, entry: HostEntry, base: str, clear: bool = False) -> None:
        result = host.run([entry.python, "-m", "venv", *(["--clear"] if clear else []), f"{base}/venv"], timeout=300)
        if not result.ok:
            text = result.stderr + result.stdout
            if "ensurepip" in text or "No module named venv" in text:
                raise LabkitError(
                    f"{entry.name}: {entry.python} cannot create a venv (no venv/ensurepip); "
                    "install the python3-venv package there"
                )
            detail = text.strip().splitlines()
            raise LabkitError(f"{entry.name}: creating the venv failed: {detail[-1] if detail else result.returncode}")


def deploy(
    inventory: Inventory | str | os.PathLike,
    hosts: list[str] | None = None,
    *,
    mode: str = "auto",
    accept_new_host_keys: bool = False,
    force: bool = False,
    wheel: str | os.PathLike | None = None,
    tools: Sequence[str] | None = None,
    console=None,
) -> list[DeployResult]:
    """Deploy this labkit to ``hosts`` (default: all) in parallel; one result per host.

    ``mode`` is "offline" (upload a wheelhouse), "online" (install from the
    index) or "auto" (offline on the testbed or where the index is unreachable).
    ``wheel`` deploys that labkit wheel instead of building one from this source tree.
    ``tools``: the static tools to send with it (None: every one of :data:`TOOLS` this machine has; ``()``: none,
    each experiment then sends what its plan needs as it starts).
    """
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, DownloadColumn, Progress, SpinnerColumn, TextColumn

    if mode not in MODES:
        raise LabkitError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    tools = TOOLS if tools is None else tuple(dict.fromkeys(tools))
    unknown = [name for name in tools if name not in TOOLS]
    if unknown:
        raise LabkitError(f"tools are {', '.join(TOOLS)}, not {unknown[0]!r}")
    if not isinstance(inventory, Inventory):
        inventory = load_inventory(inventory)
    names = list(hosts) if hosts else inventory.names
    for name in names:
        inventory.host(name)  # unknown names fail before anything is built
    if console is None:
        console = Console(stderr=True)
        if not console.is_terminal:
            console = Console(stderr=True, width=200)  # a log or a pipe: keep paths on one line
    wheel = existing_wheel(wheel) if wheel else build_wheel(log=console.print)
    console.print(f"labkit {wheel.version} build {wheel.short_build}: deploying to {', '.join(names)}")
    # A live progress display only on a terminal; logs get the result lines alone.
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                        console=console, transient=True) if console.is_terminal else None
    with progress or contextlib.nullcontext():
        deployer = _Deployer(inventory, wheel, mode, accept_new_host_keys, force, console.print, progress, tools)
        with ThreadPoolExecutor(max_workers=min(8, len(names))) as pool:
            results = list(pool.map(deployer.deploy, names))
    for result in results:
        style = {"deployed": "green", "skipped": "cyan", "failed": "red"}[result.status]
        console.print(f"[{style}]{result.host}: {result.status}[/]: {escape(result.detail)} ({result.seconds:.1f} s)",
                      highlight=False, soft_wrap=True)
    return results

"""Shared fixtures: the real local testbed, and the labkit console script.

Testbed tests need root, network namespaces and /dev/net/tun. Where those are
missing they skip with the reason, except under LABKIT_REQUIRE_TESTBED=1 (set
by CI), where a missing testbed is a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
from contextlib import contextmanager
from pathlib import Path

import pytest
import tomli_w

REPO = Path(__file__).resolve().parent.parent
LABKIT = str(Path(sys.executable).with_name("labkit"))
DATA = Path(__file__).resolve().parent / "data"

# Testbeds made by tests keep their state apart from a user's testbeds.
os.environ.setdefault("LABKIT_STATE_HOME", f"/tmp/labkit-test-state-{os.getuid()}")
# Where this test run deploys labkit for every module's hosts (deployed_inventory). Set here, in the process that
# loads this file first (xdist's controller), so its workers inherit one directory; removed when the run ends.
SHARED_DEPLOY_ENV = "LABKIT_TEST_DEPLOY_DIR"
os.environ.setdefault(SHARED_DEPLOY_ENV, f"/tmp/labkit-test-deploy-{os.getpid()}")


# The modules that take longest (their tests' summed time in a run of make test, 2026-11-29), collected first: xdist's loadfile hands modules to its
# workers in collection order (with --no-loadscope-reorder, as make test runs it; by default it orders them by their
# number of tests), and a long module handed out last ran on alone while the other workers idled: the two
# JupyterLab tests, two minutes, at the very end.
LONGEST_FIRST = ("test_notebooks.py", "test_sweep.py", "test_faults.py", "test_jupyterlab.py", "test_load.py",
                 "test_compare.py", "test_hop.py", "test_run_hosts.py", "test_explain.py", "test_series.py",
                 "test_analysis_tuning.py", "test_privilege.py", "test_upload.py", "test_under_load.py",
                 "test_import.py", "test_oneway.py", "test_go_units.py", "test_link_fidelity.py", "test_go_echo.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: position for position, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each module keeps its own order


def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):  # the controller (or a run without xdist): after every worker
        import shutil

        shutil.rmtree(os.environ[SHARED_DEPLOY_ENV], ignore_errors=True)


def labkit(*args: str, check: bool = False, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    """Run the real console script and capture its output."""
    proc = subprocess.run([LABKIT, *args], capture_output=True, text=True, timeout=timeout, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(f"labkit {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def require_testbed() -> None:
    """Skip (or, under LABKIT_REQUIRE_TESTBED=1, fail) when this machine cannot host the testbed."""
    from labkit.errors import TestbedUnavailable
    from labkit.testbed.netns import check_can_host_testbed

    try:
        check_can_host_testbed()
    except TestbedUnavailable as exc:
        if os.environ.get("LABKIT_REQUIRE_TESTBED") == "1":
            pytest.fail(f"LABKIT_REQUIRE_TESTBED=1 but the testbed is unavailable: {exc.message}")
        pytest.skip(f"testbed unavailable: {exc.message}")


@pytest.fixture(scope="session")
def wan_testbed():
    """A testbed shared by the tests that only use it: 50 ms one way, cubic, no rate limit.

    50 ms keeps the idle-connection tests quick while the RTT stays far above
    every other source of latency on this machine.
    """
    # A session fixture is made once per xdist worker: two workers on one name would each bring the same
    # testbed up, and the first to finish would take it down under the other's running test.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    with own_testbed(f"t-wan{worker.removeprefix('gw')}", 0.050, cc="cubic") as state:
        yield state


def own_testbed_name(name: str) -> str:
    """A test module's testbed name, after $LABKIT_TEST_TESTBED_PREFIX (so runs from several worktrees at once
    never share a testbed)."""
    return os.environ.get("LABKIT_TEST_TESTBED_PREFIX", "") + name


@contextmanager
def own_testbed(name: str, one_way_delay_s: float, login=None, topology=None, **link):
    """A testbed of the calling test module's own (no rate limit unless given), torn down at the end.

    ``login``: a :class:`labkit.testbed.login.LoginUser` to log in as instead of root; ``topology``: a
    :class:`labkit.testbed.topology.Topology` (per-direction links).
    """
    require_testbed()
    from labkit.testbed.lab import LinkConfig, Testbed

    testbed = Testbed(own_testbed_name(name), log=lambda message: None)
    state = testbed.up(LinkConfig(one_way_delay_s=one_way_delay_s, **{"rate_bps": None, "emulator": "tun", **link}),
                       login, topology=topology)
    try:
        yield state
    finally:
        testbed.down(quiet=True)


def deployed_inventory(state, base: Path, *deploy_args: str) -> Path:
    """The testbed's inventory (written under ``base``) with labkit deployed (offline) on its hosts.

    Every module's hosts share one deployment per host name for the test run: a testbed's namespaces see this
    machine's files, and deploying the same build again took each module ~30 s of the run's two cores. The first
    module to get here deploys, under a lock that other xdist workers wait on; the others find the build there and
    deploy skips it (as it would on any host), so every module still runs ``labkit deploy`` against its own testbed.
    Nothing a run does writes into a labkit_dir, so no module depends on what another did there.
    """
    import fcntl

    shared = Path(os.environ[SHARED_DEPLOY_ENV])
    shared.mkdir(parents=True, exist_ok=True)
    data = tomllib.loads(state.inventory.read_text())
    for name, table in data["hosts"].items():
        table["labkit_dir"] = str(shared / name)
    path = base / "inventory.toml"
    path.write_text(tomli_w.dumps(data))
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        labkit("deploy", str(path), "--offline", *deploy_args, check=True, timeout=600)
    return path


def leftover_processes(state, words: tuple[str, ...]) -> list[str]:
    """Command lines, in the testbed's namespaces, that contain any of ``words`` (e.g. leftover servers)."""
    found = []
    for host in state.hosts.values():
        pids = subprocess.run(["ip", "netns", "pids", host.netns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if any(word in cmdline for word in words):
                found.append(f"{host.name}:{pid}: {cmdline}")
    return found


@pytest.fixture(scope="session")
def jupyter_dirs(tmp_path_factory) -> dict[str, str]:
    """Jupyter's data, config and runtime directories for the test session (as environment variables), with the
    kernel named labkit registered in them by the README's set-up itself (scripts/bootstrap.sh, which also installs
    what the JupyterLab test needs): no test reads or writes the user's own Jupyter directories."""
    base = tmp_path_factory.mktemp("jupyter")
    dirs = {f"JUPYTER_{kind.upper()}_DIR": str(base / kind) for kind in ("data", "config", "runtime")}
    proc = subprocess.run([str(REPO / "scripts" / "bootstrap.sh")], env={**os.environ, **dirs}, capture_output=True,
                          text=True, timeout=1800)
    assert proc.returncode == 0, f"scripts/bootstrap.sh failed:\n{proc.stdout}\n{proc.stderr}"
    return dirs


@pytest.fixture
def labkit_kernel(jupyter_dirs, monkeypatch) -> str:
    """The kernelspec name notebooks ask for, registered as the set-up registers it; Jupyter in this test finds it."""
    for key, value in jupyter_dirs.items():
        monkeypatch.setenv(key, value)
    return "labkit"


@contextmanager
def running_labkit(*args: str):
    """`labkit ARGS` in the background (stdout and stderr piped, text) for a ``with`` block; killed after it if still running."""
    proc = subprocess.Popen([LABKIT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def wait_for_rows(run_path: Path, count: int, timeout: float = 120, **columns) -> list[dict]:
    """The rows of a running run's journal once ``count`` of them have ``columns`` (e.g. ``probe="echo-cold"``): an
    event the run itself writes, where a sleep would guess how far a busy machine got."""
    from labkit.store import Run

    def matching():
        rows = [row for row in Run.open(run_path).journal_rows()
                if all(row.get(key) == value for key, value in columns.items())]
        return rows if len(rows) >= count else None

    return wait_for(matching, timeout, f"{count} journal rows with {columns}")


def as_a_background_job() -> None:
    """A Popen ``preexec_fn``: start the child as a shell starts `cmd &`, with SIGINT ignored. A program that does
    not install its own handler then never sees Ctrl-C or `kill -INT` (issue 23, item 3)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


#: How a test starts a command that it will interrupt: as a shell's foreground command, or as its background job.
STARTED = {"foreground": None, "background": as_a_background_job}


def wait_for(predicate, timeout: float = 60, what: str = "condition"):
    """Poll ``predicate`` every 0.1 s until it returns something true, and return that; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def wait_for_cell_start(runs_dir: Path, name: str, timeout: float = 90) -> Path:
    """The run directory ``*-<name>`` under ``runs_dir`` once its first cell has started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for cells in runs_dir.glob(f"*-{name}/cells.jsonl"):
            if '"start"' in cells.read_text():
                return cells.parent
        time.sleep(0.05)
    raise AssertionError(f"no cell started within {timeout} s")


def assert_says_what_the_document_says(notebook: str, headline_json: dict) -> None:
    """The notebook, executed on its shipped sample with labkit.reproductions.SAMPLES' parameters, said of it exactly
    what its page docs/reproductions/<notebook>.md says it does (else: run scripts/reproductions.py), and said
    something."""
    from labkit import reproductions

    said = reproductions.said(headline_json)
    assert said, f"{notebook} said nothing of its sample"
    assert said == reproductions.generated_sentences(notebook), (
        f"docs/reproductions/{notebook}.md no longer says what {notebook} says of its sample: run "
        f"`.venv/bin/python scripts/reproductions.py {notebook}`")


def assert_speaks_of_its_own_run(notebook: str, headline_json: dict, executed: Path | None = None) -> list[str]:
    """The notebook, executed on a run that is not its shipped sample, said something of that run and none of what
    it says of the sample (its page's block in docs/reproductions/), in its sentences or anywhere in the executed notebook;
    returns what it said, for the caller to check against the run's own numbers."""
    from labkit import reproductions

    said = reproductions.said(headline_json)
    assert said, f"{notebook} said nothing of the run it opened"
    of_the_sample = set(reproductions.generated_sentences(notebook))
    assert not of_the_sample & set(said), f"{notebook} said of this run what it says of its sample"
    if executed is not None:
        text = executed.read_text()
        shown = [s for s in of_the_sample if json.dumps(s)[1:-1] in text or s in text]
        assert not shown, f"the executed {notebook} notebook shows sentences about its sample: {shown}"
    return said


def require_host_root(release: str) -> Path:
    """The cached Debian minbase root of ``release`` (``bullseye``, ``trixie``) a testbed host can run in; skips with
    the reason (fails under LABKIT_REQUIRE_TESTBED=1) where it was not built: scripts/bootstrap.sh builds them as
    root when debootstrap works, since a cold build costs minutes that no test should spend."""
    from labkit.testbed import rootfs

    spec = rootfs.RootSpec.parse(release)
    found = rootfs.find_root(spec)
    if found is None:
        if os.environ.get("LABKIT_REQUIRE_TESTBED") == "1":
            pytest.fail(f"LABKIT_REQUIRE_TESTBED=1 but {rootfs.missing_root_reason(spec)}")
        pytest.skip(rootfs.missing_root_reason(spec))
    return found


@contextmanager
def root_testbed(name: str, roots: dict[str, str], hosts: tuple[str, ...] = ("a", "b"), one_way_delay_s: float = 0.002,
                 **link):
    """A testbed of the calling module's own whose hosts ``roots`` names (host -> release) run in Debian minbase
    roots, the others in this machine's userland; torn down at the end."""
    require_testbed()
    for release in roots.values():
        require_host_root(release)
    from labkit.testbed.topology import Topology

    with own_testbed(name, one_way_delay_s, topology=Topology(hosts=hosts, roots=dict(roots)), **link) as state:
        yield state


def root_host_inventory(state, base: Path) -> Path:
    """The testbed's inventory (written under ``base``) for hosts that may run in roots of their own: unlike
    :func:`deployed_inventory`, every host keeps the labkit_dir inside its own tree (a root's host sees none of this
    machine's /tmp), and nothing is deployed yet: the caller runs ``labkit deploy`` (no venv or pip on a root's
    host)."""
    data = tomllib.loads(state.inventory.read_text())
    path = base / "inventory.toml"
    path.write_text(tomli_w.dumps(data))
    return path

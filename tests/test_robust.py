"""Issue 15: nothing executed, nothing silently wrong, the conventions kept (real files, real processes, no testbed).

Each test reproduces one reported failure: a path in the inventory that a shell would run, a known_hosts line
that crashed the SSH host, a value that made a run measure something else than asked, a process labkit
signalled without knowing it was its own, an exit status a shell reads the wrong way.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import LABKIT, STARTED, labkit, wait_for
from test_echo import ServerProcess

LOCAL_PAIR = '[hosts.a]\nssh = "local"\n\n[hosts.b]\nssh = "local"\n'
#: A run on this machine's own network namespace claims it (labkit.hosts.claims) like any host: a test's loopback runs
#: share it with those of tests in other xdist workers, which measure nothing of each other's path.
SHARED_LOOPBACK = ("--share-hosts",)


def _signal_and_collect(proc: subprocess.Popen, stop_signal, timeout: float) -> str:
    """Send ``stop_signal`` to ``proc`` and return its stderr once it ended (killed if it did not)."""
    try:
        proc.send_signal(stop_signal)
        return proc.communicate(timeout=timeout)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


# --- item 10: a signal's exit status is 128 + the signal -------------------------------------------------------


@pytest.mark.parametrize("started", sorted(STARTED))
@pytest.mark.parametrize("stop_signal, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_an_experiment_stopped_by_a_signal_exits_128_plus_the_signal(tmp_path, stop_signal, status, started):
    """Also when started as a shell's background job, with SIGINT ignored (issue 23, item 3): it stops as in the
    foreground, interrupted and resumable, where it once ran to its end and exited 0."""
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(LOCAL_PAIR)
    runs = tmp_path / "runs"
    proc = subprocess.Popen([LABKIT, "series", str(inventory), "--client", "a", "--server", "b", "--duration", "60s",
                             "--interval", "200ms", "--probes", "echo-warm", "--name", "sig", "--runs-dir", str(runs),
                             "--quiet", *SHARED_LOOPBACK], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=STARTED[started])
    journal = wait_for(lambda: next(iter(runs.glob("*-sig/samples.jsonl")), None), 60, "the first sample")
    stderr = _signal_and_collect(proc, stop_signal, 60)
    assert proc.returncode == status, stderr
    assert stderr.strip().splitlines()[-1] == "labkit: interrupted"
    assert json.loads((journal.parent / "manifest.json").read_text())["status"] == "interrupted"


@pytest.mark.parametrize("started", sorted(STARTED))
@pytest.mark.parametrize("impl", ["python", "go"])
@pytest.mark.parametrize("stop_signal, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_echo_call_stopped_by_a_signal_prints_its_summary_and_exits_128_plus_the_signal(impl, stop_signal, status,
                                                                                        started):
    server = ServerProcess()
    try:
        proc = subprocess.Popen([LABKIT, "echo", "call", "--target", server.target, "--impl", impl, "--sizes", "10",
                                 "--repeats", "1000", "--gap", "200ms"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, preexec_fn=STARTED[started])
        assert json.loads(proc.stdout.readline())["ok"]
        stderr = _signal_and_collect(proc, stop_signal, 30)
    finally:
        server.stop()
    assert proc.returncode == status, stderr
    assert "interrupted after" in stderr


# --- item 8: values a tool would misread are refused --------------------------------------------------------------


@pytest.mark.parametrize("rate", ["zzz", "1M;x", "0", "-5M", "M", "5X", "10M/0"])
def test_an_iperf3_rate_iperf3_would_read_as_unlimited_is_refused_before_anything_runs(tmp_path, rate):
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(LOCAL_PAIR)
    proc = labkit("sweep", str(inventory), "--client", "a", "--server", "b", "--iperf-rate", rate,
                  "--runs-dir", str(tmp_path / "runs"), timeout=60)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "--iperf-rate" in proc.stderr and "not a positive iperf3 rate" in proc.stderr
    assert not (tmp_path / "runs").exists()
    # The same value from an experiment file, or the Python API, is refused the same way.
    config = tmp_path / "sweep.toml"
    config.write_text(f'iperf_rate = "{rate}"\n')
    proc = labkit("sweep", str(inventory), "--client", "a", "--server", "b", "--config", str(config),
                  "--runs-dir", str(tmp_path / "runs"), timeout=60)
    assert proc.returncode == 2 and "not a positive iperf3 rate" in proc.stderr, proc.stderr
    from labkit.errors import LabkitError
    from labkit.experiments.sweep import SweepConfig

    with pytest.raises(LabkitError, match="--iperf-rate"):
        SweepConfig(inventory=str(inventory), client="a", server="b", iperf_rate=rate).validate()


def test_iperf3_rates_as_iperf3_reads_them():
    from labkit.parsers.iperf3 import iperf3_client_argv, iperf3_rate

    for rate in ("50M", "1.5G", "100k", "10M/100", "2000000", " 1g "):
        assert iperf3_rate(rate) == rate.strip()
    assert iperf3_client_argv("198.18.0.2", 5201, 3, "50M")[-3:] == ["-b", "50M", "-J"]
    with pytest.raises(ValueError):
        iperf3_client_argv("198.18.0.2", 5201, 3, "fast")


# --- item 3: nothing in an inventory is executed ---------------------------------------------------------------


@pytest.mark.parametrize("labkit_dir", ["{tmp}/$(touch {tmp}/pwned)", "{tmp}/`touch {tmp}/pwned`",
                                        "{tmp}/$(touch${{IFS}}{tmp}/pwned)/" + "x" * 120, "{tmp}/a b"])
@pytest.mark.parametrize("command", [["deploy"], ["hosts", "check"], ["series", "--client", "a", "--server", "b"]])
def test_a_labkit_dir_a_shell_would_expand_is_refused_before_anything_runs(tmp_path, labkit_dir, command):
    labkit_dir = labkit_dir.format(tmp=tmp_path)
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(f'[hosts.a]\nssh = "local"\nlabkit_dir = {json.dumps(labkit_dir)}\n\n'
                         '[hosts.b]\nssh = "local"\n')
    runs = ["--runs-dir", str(tmp_path / "runs")] if command[0] == "series" else []
    proc = labkit(*command, str(inventory), *runs, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and "hosts.a.labkit_dir" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inventory.toml"]  # no pwned, no directory, no run


def test_labkit_runs_itself_on_hosts_as_python_dash_m_labkit():
    from labkit.hosts.inventory import parse_inventory
    from labkit.hosts.layout import remote_labkit_argv

    entry = parse_inventory('[hosts.a]\nssh = "gw"\nlabkit_dir = "/opt/lab-kit_1.0+x"\n').host("a")
    assert remote_labkit_argv(entry) == ["/opt/lab-kit_1.0+x/venv/bin/python", "-m", "labkit"]
    deploy_source = Path(__file__).resolve().parent.parent.joinpath("labkit", "deploy.py").read_text()
    assert '/venv/bin/labkit"' not in deploy_source  # pip's console script is never what labkit runs


@pytest.mark.parametrize("name", ["a/b", "a b", "../a", "-a"])
def test_a_host_name_that_cannot_name_a_file_is_refused_in_one_line(tmp_path, name):
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(f'[hosts.{json.dumps(name)}]\nssh = "local"\n\n[hosts.b]\nssh = "local"\n')
    proc = labkit("hosts", "check", str(inventory), timeout=60)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stdout + proc.stderr
    assert f"host name {name!r} must be letters, digits" in proc.stderr


# --- item 6: known_hosts as OpenSSH reads it ----------------------------------------------------------------------


def _keygen(directory: Path, name: str, *extra: str) -> str:
    """A real ed25519 key made by ssh-keygen; its public ``type base64``."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(directory / name), *extra], check=True)
    return " ".join((directory / f"{name}.pub").read_text().split()[:2])


def test_known_hosts_markers_patterns_and_hashes_as_openssh_reads_them(tmp_path):
    from labkit.hosts.known_hosts import read_known_hosts

    host, other, ca = (_keygen(tmp_path, n) for n in ("host", "other", "ca"))
    known = tmp_path / "known_hosts"
    known.write_text(f"# comment\n@cert-authority *.lab {ca}\nweb.lab,10.0.0.1 {host}\n[10.0.0.1]:2222 {other}\n"
                     f"*.dev,!db.dev {other}\n@revoked 10.0.0.9 {host}\n10.0.0.9 {host}\n"
                     f"10.0.0.7 sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29t\n")
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(known)], check=True, capture_output=True)  # HashKnownHosts
    parsed = read_known_hosts(known)

    def keys(name):
        return sorted(key.get_base64() for key in parsed.host_keys(name).lookup(name).values()) \
            if parsed.host_keys(name).lookup(name) else []

    b64 = {name: text.split()[1] for name, text in (("host", host), ("other", other))}
    assert keys("web.lab") == keys("10.0.0.1") == [b64["host"]] and keys("[10.0.0.1]:2222") == [b64["other"]]
    assert keys("api.dev") == [b64["other"]] and keys("db.dev") == []  # negated
    assert keys("api.lab") == []  # only a CA for it: no plain key
    assert keys("10.0.0.9") == []  # listed, but revoked: it reaches the policy, which refuses it
    revoked = parsed.revoked("10.0.0.9", parsed.lines[-1].key)
    assert revoked is not None and revoked.marker == "@revoked"
    assert parsed.authority("api.lab").marker == "@cert-authority" and parsed.authority("10.0.0.1") is None
    assert all(line.key.get_name() == "ssh-ed25519" for line in parsed.lines)  # the CA is not a host's key


@pytest.mark.parametrize("content, message", [
    (b"10.0.0.1 ssh-ed25519 AAAA!!!!notbase64\n", "line 1: the ssh-ed25519 key is not base64"),
    (b"# ok\n\xff\xfe\x00\x01binary junk\x00\n", "holds binary data (line 2), not text"),
    (b"@trusted 10.0.0.1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG\n", "line 1: unknown marker '@trusted'"),
    (b"10.0.0.1 ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQAB\n", "line 1: not a valid ssh-ed25519 key"),
])
def test_a_broken_known_hosts_line_is_one_line_naming_it(tmp_path, content, message):
    from labkit.errors import LabkitError
    from labkit.hosts.known_hosts import read_known_hosts

    known = tmp_path / "known_hosts"
    known.write_bytes(content)
    with pytest.raises(LabkitError) as caught:
        read_known_hosts(known)
    assert message in caught.value.message and "\n" not in caught.value.message
    # And through a command: hosts check names the host and the line, and exits 1 (a host it cannot use).
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(f'known_hosts = "{known}"\n[hosts.gw]\nssh = "127.0.0.1"\nport = 1\n')
    proc = labkit("hosts", "check", str(inventory), "--timeout", "2", timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert any(line.startswith("gw: ") and message in line for line in proc.stdout.splitlines()), proc.stdout


# --- item 10: runs cleanup signals only labkit's own processes ----------------------------------------------------


def test_runs_cleanup_leaves_alone_a_process_that_took_a_recorded_pid(tmp_path):
    from labkit.echo.cputime import start_ticks_of
    from labkit.store import Run

    inventory = tmp_path / "inventory.toml"
    inventory.write_text(LOCAL_PAIR)
    run = Run.create(tmp_path / "runs", "killed", "series", {"inventory": str(inventory)})
    # Two of what a run starts (cleanup refuses a recorded command labkit does not start), on ports of their own.
    serve = [sys.executable, "-m", "labkit", "echo", "serve", "--bind", "127.0.0.1:0"]
    ours = subprocess.Popen(serve, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stranger = subprocess.Popen(serve, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        run.register_process("a", ours.pid, serve, start_ticks_of(ours.pid))
        # What a reused pid looks like: the pid recorded, but the process under it started at another time.
        run.register_process("b", stranger.pid, serve, start_ticks_of(stranger.pid) - 1)
        proc = labkit("runs", "cleanup", run.run_id, "--runs-dir", str(tmp_path / "runs"), timeout=60)
        assert proc.returncode == 0, proc.stderr
        ours.wait(timeout=10)  # stopped
        assert stranger.poll() is None, "a process labkit did not start was signalled"
        assert f"left process group {stranger.pid} on b ({' '.join(serve[-6:])}) alone: pid {stranger.pid} is now " \
               "another process" in proc.stdout
        assert Run.open(run.path).processes() == [] and Run.open(run.path).status == "interrupted"
    finally:
        for process in (ours, stranger):
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.mark.parametrize("with_start_time", [False, True], ids=["older-run", "crafted-start-time"])
def test_runs_cleanup_checks_a_recorded_pids_command_line(tmp_path, with_start_time):
    """A processes.json entry with labkit's command and no start time (an older labkit), or with the real start time
    of another process (issue 23, item 4: anyone can read it from /proc), still needs that process's command line
    to be the recorded one."""
    from labkit.echo.cputime import start_ticks_of
    from labkit.store import Run

    inventory = tmp_path / "inventory.toml"
    inventory.write_text(LOCAL_PAIR)
    run = Run.create(tmp_path / "runs", "old", "series", {"inventory": str(inventory)})
    stranger = subprocess.Popen(["sleep", "302"], start_new_session=True)
    try:
        started = start_ticks_of(stranger.pid) if with_start_time else None
        run.register_process("a", stranger.pid, ["labkit", "echo", "serve"], *([started] if started else []))
        proc = labkit("runs", "cleanup", run.run_id, "--runs-dir", str(tmp_path / "runs"), timeout=60)
        assert proc.returncode == 0 and stranger.poll() is None, proc.stdout + proc.stderr
        assert f"pid {stranger.pid} now runs 'sleep 302'" in proc.stdout
    finally:
        stranger.kill()
        stranger.wait()


def test_runs_cleanup_leaves_alone_a_group_whose_leader_is_gone_and_whose_members_are_not_labkits(tmp_path):
    """A recorded pid with no process left may still name a process group: cleanup signals it only when what is left
    in it looks like labkit's."""
    from labkit.store import Run

    inventory = tmp_path / "inventory.toml"
    inventory.write_text(LOCAL_PAIR)
    run = Run.create(tmp_path / "runs", "leaderless", "series", {"inventory": str(inventory)})
    # The leader starts a member of its group, says so, and exits: the group outlives it.
    leader = subprocess.Popen(["sh", "-c", "sleep 304 & echo $!"], start_new_session=True, stdout=subprocess.PIPE,
                              text=True)
    member = int(leader.stdout.readline())
    leader.wait()
    try:
        run.register_process("a", leader.pid, [sys.executable, "-m", "labkit", "echo", "serve"])
        proc = labkit("runs", "cleanup", run.run_id, "--runs-dir", str(tmp_path / "runs"), timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        state = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert state in "RSD", f"a process labkit did not start was signalled (state {state})"
        assert f"process group {leader.pid} now holds pid {member} running 'sleep 304'" in proc.stdout
    finally:
        os.kill(member, signal.SIGKILL)


def test_hosts_check_of_a_local_host_whose_namespace_is_missing_fails(tmp_path):
    inventory = tmp_path / "inventory.toml"
    inventory.write_text('[hosts.gone]\nssh = "local"\nnetns = "labkit-h15a-never-a"\n')
    proc = labkit("hosts", "check", str(inventory), timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ('gone: cannot run commands in network namespace labkit-h15a-never-a: Cannot open network namespace '
            '"labkit-h15a-never-a": No such file or directory') in proc.stdout


# --- an interrupted run stops its processes newest first ---------------------------------------------------------

#: A process that says it is ready, and on SIGTERM takes a moment (as an agent finishing its call does) before it
#: writes its name to the file of stops and exits.
_STOPS_IN_TURN = (
    "import pathlib, signal, sys, time\n"
    "name, stops = sys.argv[1], pathlib.Path(sys.argv[2])\n"
    "def stop(*_):\n"
    "    time.sleep(0.1)\n"
    "    with stops.open('a') as f: f.write(name + '\\n')\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, stop)\n"
    "pathlib.Path(str(stops) + '.' + name).touch()\n"
    "while True: time.sleep(1)\n"
)


def test_an_interrupted_session_stops_the_newest_process_first(tmp_path):
    # The order a run starts things in: the echo server, the tcpdump that follows it, then the client agent. The
    # agent ends the call it is in when stopped; stopped after tcpdump, that call was kept without its packets.
    import sys

    from labkit.experiments.base import HostPool, Progress, Session
    from labkit.hosts.inventory import parse_inventory
    from labkit.store import Run

    inventory = parse_inventory(LOCAL_PAIR)
    run = Run.create(tmp_path / "runs", "order", "series", {})
    pool = HostPool(inventory, accept_new_host_keys=False)
    session = Session(run, inventory, pool, Progress(total=1, quiet=True))
    stops = tmp_path / "stops"
    names = ["server", "tcpdump", "agent", "ping"]
    try:
        for name in names:
            session.start("a", [sys.executable, "-c", _STOPS_IN_TURN, name, str(stops)])
            wait_for(lambda: Path(f"{stops}.{name}").exists(), timeout=30, what=f"{name} to start")
        session.stop_everything()
        assert stops.read_text().split() == names[::-1]
        assert session.stopping.is_set()
    finally:
        session.stop_everything()
        pool.close()


#: A process that says it is ready and, on SIGTERM, says so and goes on: stopping it takes the whole grace period.
_SLOW_TO_STOP = (
    "import pathlib, signal, sys\n"
    "ready = pathlib.Path(sys.argv[1])\n"
    "signal.signal(signal.SIGTERM, lambda *_: pathlib.Path(str(ready) + '.term').touch())\n"
    "ready.touch()\n"
    "while True: signal.pause()\n"
)


def test_an_interrupt_while_a_process_is_being_stopped_leaves_it_neither_running_nor_registered(tmp_path):
    """Issue 23, item 7: a clean SIGINT left a stale iperf3 entry in processes.json. The interrupt came while the
    session was stopping the baseline's iperf3 server: the stop was cut short, the process was forgotten by the
    session, and no one stopped or unregistered it. Here the interrupt comes exactly there (once the process got
    its SIGTERM), and the interrupt's stop_everything must stop it and leave processes.json empty."""
    import sys
    import threading

    from labkit.experiments.base import HostPool, Progress, Session
    from labkit.hosts.inventory import parse_inventory
    from labkit.store import Run

    inventory = parse_inventory(LOCAL_PAIR)
    run = Run.create(tmp_path / "runs", "stale", "sweep", {})
    pool = HostPool(inventory, accept_new_host_keys=False)
    session = Session(run, inventory, pool, Progress(total=1, quiet=True))
    ready = tmp_path / "ready"
    # Python's own SIGINT handler, also when pytest itself was started in the background with SIGINT ignored.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = session.start("b", [sys.executable, "-c", _SLOW_TO_STOP, str(ready)])
        wait_for(ready.exists, timeout=30, what="the process to start")
        assert [entry["pid"] for entry in run.processes()] == [proc.pid]

        def interrupt_once_it_got_sigterm():
            wait_for(Path(f"{ready}.term").exists, timeout=60, what="the SIGTERM to arrive")
            os.kill(os.getpid(), signal.SIGINT)

        interrupter = threading.Thread(target=interrupt_once_it_got_sigterm, daemon=True)
        interrupter.start()
        with pytest.raises(KeyboardInterrupt):
            session.stop("b", proc)  # waits its 3 s grace: the SIGINT lands in it
        interrupter.join()
        session.stop_everything()  # what session() does on KeyboardInterrupt
        assert proc.poll() is not None
        assert run.processes() == []
    finally:
        signal.signal(signal.SIGINT, previous)
        session.stop_everything()
        pool.close()


def test_an_interrupt_as_a_process_is_started_leaves_it_recorded_and_then_stopped(tmp_path):
    """A SIGINT that came after a host started a process and before the session recorded it left the process
    running and unknown to the run (a ghz on host a, once, after a background SIGINT). Here it comes exactly there:
    as the host's start returns. The process must be recorded, and the interrupt's stop_everything stop it."""
    import sys

    from labkit.experiments.base import HostPool, Progress, Session
    from labkit.hosts.inventory import parse_inventory
    from labkit.hosts.local import LocalHost
    from labkit.store import Run

    inventory = parse_inventory(LOCAL_PAIR)
    run = Run.create(tmp_path / "runs", "racing", "sweep", {})
    pool = HostPool(inventory, accept_new_host_keys=False)
    session = Session(run, inventory, pool, Progress(total=1, quiet=True))
    ready = tmp_path / "ready"

    def on_the_hosts_start(frame, event, arg):  # a trace function: SIGINT sent as LocalHost.start returns
        if event == "call" and frame.f_code is LocalHost.start.__code__:
            def at_its_return(frame, event, arg):
                if event == "return":
                    os.kill(os.getpid(), signal.SIGINT)
                return at_its_return
            return at_its_return
        return None

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # also in a suite started in the background
    try:
        sys.settrace(on_the_hosts_start)
        try:
            with pytest.raises(KeyboardInterrupt):
                session.start("b", [sys.executable, "-c", _SLOW_TO_STOP, str(ready)])
        finally:
            sys.settrace(None)
        started = list(session.live_processes)
        assert len(started) == 1 and [entry["pid"] for entry in run.processes()] == [started[0].pid]
        session.stop_everything()  # what session() does on KeyboardInterrupt
        assert run.processes() == [] and started[0].poll() is not None
    finally:
        signal.signal(signal.SIGINT, previous)
        session.stop_everything()
        pool.close()

"""`labkit sweep` across a testbed of its own, over SSH to a deployed labkit (real parts throughout)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import tomli_w
import tomllib

import labkit
from conftest import LABKIT, STARTED, deployed_inventory, labkit as run_labkit, own_testbed, leftover_processes
from labkit.schemas import SWEEP_SCHEMA
from labkit.explain import explain_run
from labkit.store import Run

pytestmark = pytest.mark.testbed

ONE_WAY_S = 0.050
SSAI = "/proc/sys/net/ipv4/tcp_slow_start_after_idle"
QUICK_BASELINES = ["--ping-count", "3", "--iperf-seconds", "1"]


@pytest.fixture(scope="module")
def lab():
    with own_testbed("t-sweep", ONE_WAY_S, cc="cubic") as state:
        yield state


@pytest.fixture(scope="module")
def inventory(lab, tmp_path_factory):
    """The testbed's inventory, with labkit deployed (offline) into directories of this test module."""
    return deployed_inventory(lab, tmp_path_factory.mktemp("sweep"))


def netns_read(lab, host: str, path: str) -> str:
    return subprocess.run(["ip", "netns", "exec", lab.hosts[host].netns, "cat", path],
                          capture_output=True, text=True, check=True).stdout.strip()


def route_to_peer(lab, host: str, peer: str) -> str:
    return subprocess.run(["ip", "-n", lab.hosts[host].netns, "-o", "route", "show", f"{lab.hosts[peer].data_address}/32"],
                          capture_output=True, text=True, check=True).stdout.strip()


def echo_processes(lab) -> list[str]:
    return leftover_processes(lab, ("echo serve", "echo call", "labkit-go", "iperf3"))


def kernel_state(lab) -> dict:
    return {
        "ssai": (netns_read(lab, "a", SSAI), netns_read(lab, "b", SSAI)),
        "routes": (route_to_peer(lab, "a", "b"), route_to_peer(lab, "b", "a")),
    }


def set_slow_start_after_idle(lab, value: str) -> None:
    """What a user does outside labkit: the sysctl set by hand in both hosts' namespaces."""
    for host in ("a", "b"):
        subprocess.run(["ip", "netns", "exec", lab.hosts[host].netns, "sysctl", "-qw",
                        f"net.ipv4.tcp_slow_start_after_idle={value}"], check=True)


def test_the_idle_step_with_tcp_state_and_compare_names_the_sysctl_a_user_set_outside_labkit(lab, inventory, tmp_path):
    before = kernel_state(lab)
    assert before["ssai"] == ("1", "1")
    # Two warm-up calls (one of each size) grow the connection's window first: in shuffled order a 30000 B call
    # that came before any other large one would otherwise need two round trips with the sysctl at 0 too.
    sweep = ["sweep", str(inventory), "--client", "a", "--server", "b", "--sizes", "1000,30000", "--gaps", "1s",
             "--repeats", "3", "--warmup", "2", *QUICK_BASELINES, "--runs-dir", str(tmp_path), "--quiet"]
    proc = run_labkit(*sweep, "--name", "default", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert kernel_state(lab) == before  # no knob asked for: labkit changed nothing
    set_slow_start_after_idle(lab, "0")
    try:
        proc = run_labkit(*sweep, "--name", "no-restart", timeout=300)
    finally:
        set_slow_start_after_idle(lab, before["ssai"][0])
    assert proc.returncode == 0, proc.stderr

    default, no_restart = (Run.open(next(tmp_path.glob(f"*-{name}"))) for name in ("default", "no-restart"))
    table = pq.read_table(default.path / "samples.parquet")
    assert table.schema.equals(SWEEP_SCHEMA, check_metadata=False)
    samples = table.to_pandas()
    assert len(samples) == 6 and samples["ok"].all()
    rtt_ms = 2 * ONE_WAY_S * 1e3
    warm = samples[~samples["cold"]]
    # Round trips from the fastest call of each size: a loaded machine only adds time to a call (a run of the suite
    # once slowed two of three 1000 B calls past 1.3 RTT), it never takes a round trip away. With the restart every
    # 30000 B call needs a second round; without it, and for 1000 B either way, a call can finish in one.
    fastest = warm.groupby("payload_bytes")["rtt_ms"].min() / rtt_ms
    other = no_restart.samples()
    other_fastest = other[~other["cold"]].groupby("payload_bytes")["rtt_ms"].min() / rtt_ms
    calls = f"warm calls (ms): {warm[['payload_bytes', 'rtt_ms']].values.tolist()}, without the restart: " \
            f"{other[['payload_bytes', 'rtt_ms']].values.tolist()}"
    assert fastest[30000] > 1.6 and fastest[1000] < 1.3, calls
    assert (other_fastest < 1.3).all(), calls

    # The kernel's own view: each call followed more than one RTO of silence, on
    # a cubic connection with the MSS of a 1460-byte MTU.
    assert set(samples["mss"]) == {1408} and set(samples["tcp_cc"]) == {"cubic"}
    assert (warm["lastsnd_ms_before"] > warm["rto_ms_before"]).all()
    assert (warm[warm["payload_bytes"] == 30000]["cwnd_after"] >= 10).all()
    # The warm-up calls' own time, kept with the cell (a sweep's plan, as its gaps are: bench/sweep_overhead.py tells
    # labkit's overhead from both): at least a new connection's handshake and a round trip for each of the two.
    (complete,) = [event for event in default.cell_events() if event["event"] == "complete"]
    assert complete["warmup_s"] >= 3 * rtt_ms / 1e3

    manifest = default.manifest
    for host in ("a", "b"):
        facts = manifest["hosts"][host]
        assert facts["kernel"] and facts["sysctl"]["net.ipv4.tcp_slow_start_after_idle"] == "1"
        assert no_restart.manifest["hosts"][host]["sysctl"]["net.ipv4.tcp_slow_start_after_idle"] == "0"
        assert facts["interface_mtu"] == 1460 and facts["route_to_peer"]["congctl"] == "cubic"
        assert facts["python"]["labkit"] == labkit.__version__
        assert facts["cpus_online"] == os.cpu_count()  # the testbed's hosts share this machine's cores
    raw = {path.name for path in default.raw_dir.iterdir()}
    assert {"ping-a-b-before.txt", "ping-a-b-after.txt", "iperf3-a-b.json"} <= raw
    iperf = json.loads((default.raw_dir / "iperf3-a-b.json").read_text())
    assert iperf["end"]["sum_received"]["bits_per_second"] > 0
    assert manifest["baselines"]["a-b"]["ping_before_0"]["received"] == 3

    # labkit compare: the sysctl is what changed, and it took a round trip off the 30000 B call only.
    proc = run_labkit("compare", "default", "no-restart", "--all", "--runs-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    for host in ("a", "b"):
        assert f"host {host} net.ipv4.tcp_slow_start_after_idle: 1 -> 0" in proc.stdout
    compared = labkit.compare(default.path, no_restart.path)
    changed = set(compared.changes["what"])
    assert {"host a net.ipv4.tcp_slow_start_after_idle", "host b net.ipv4.tcp_slow_start_after_idle"} <= changed
    assert not {what for what in changed if what.startswith(("host", "link", "config", "labkit", "git"))
                and not what.endswith("slow_start_after_idle")}
    # What compare says of each size is the runs' own calls (below ten a side: Welch's t on their means), and it
    # calls a change only where its interval leaves out zero. The round trips themselves are judged above, on the
    # fastest calls: beside two CPU hogs one 1000 B call of the second run took two round trips (the emulator, late,
    # held a packet 92 ms on the 50 ms link), which moved the means by a third of an RTT and is no fault of compare's.
    medians = compared.table[compared.table["measure"] == "median RTT"].set_index("payload_bytes")
    for size, cell in medians.iterrows():
        means = [run[~run["cold"] & (run["payload_bytes"] == size)]["rtt_ms"].mean() for run in (warm, other)]
        assert cell["a"] == pytest.approx(means[0]) and cell["difference"] == pytest.approx(means[1] - means[0])
        assert cell["low"] <= cell["difference"] <= cell["high"], cell.to_dict()
        assert cell["verdict"] not in ("higher", "lower") or cell["high"] < 0 or cell["low"] > 0, cell.to_dict()


def _start_sweep(inventory, runs_dir, name: str, *extra: str, preexec_fn=None) -> subprocess.Popen:
    return subprocess.Popen(
        [LABKIT, "sweep", str(inventory), "--client", "a", "--server", "b", "--sizes", "1000",
         "--gaps", "0.3s", "--repeats", "8", "--name", name, "--runs-dir", str(runs_dir), "--quiet",
         *QUICK_BASELINES, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=preexec_fn,
    )


def _wait_for_journal_rows(runs_dir: Path, name: str, rows: int, timeout: float = 90) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for journal in runs_dir.glob(f"*-{name}/samples.jsonl"):
            if len(journal.read_text().splitlines()) >= rows:
                return journal.parent
        time.sleep(0.1)
    raise AssertionError(f"the sweep wrote fewer than {rows} rows in {timeout} s")


def _assert_every_cell_once(run_path: Path, cells: int, calls: int) -> None:
    samples = pq.read_table(run_path / "samples.parquet").to_pandas()
    per_cell = samples.groupby("cell_id").agg(rows=("seq", "size"), attempts=("attempt", "nunique"), seqs=("seq", "nunique"))
    assert len(per_cell) == cells
    assert (per_cell["rows"] == calls).all() and (per_cell["attempts"] == 1).all() and (per_cell["seqs"] == calls).all()


def test_sigint_stops_everything_keeps_the_journal_and_resume_completes(lab, inventory, tmp_path):
    """Started as a shell's background job, with SIGINT ignored (issue 23, item 3), where it once ran to its end. (The
    foreground case takes the same handler, installed either way: tests/test_robust.py has both on loopback; here,
    where a run costs 40 s, the harder one.)"""
    before = kernel_state(lab)
    sweep = _start_sweep(inventory, tmp_path, "sigint", "--slow-start-after-idle", "0,1", preexec_fn=STARTED["background"])
    run_path = _wait_for_journal_rows(tmp_path, "sigint", 3)
    sweep.send_signal(signal.SIGINT)
    _, stderr = sweep.communicate(timeout=60)
    assert sweep.returncode == 130, stderr
    assert echo_processes(lab) == []
    assert kernel_state(lab) == before
    run = Run.open(run_path)
    assert run.status == "interrupted" and len(run.journal_rows()) >= 3
    assert run.processes() == []  # everything it started is stopped: nothing for `labkit runs cleanup` to do

    resumed = run_labkit("sweep", "--resume", run.run_id, "--runs-dir", str(tmp_path), "--quiet", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert Run.open(run_path).status == "complete"
    _assert_every_cell_once(run_path, cells=2, calls=8)
    assert echo_processes(lab) == [] and kernel_state(lab) == before


def test_sigkill_then_cleanup_stops_remote_processes_restores_the_kernel_and_resume_completes(lab, inventory, tmp_path):
    before = kernel_state(lab)
    assert before["ssai"] == ("1", "1")
    sweep = _start_sweep(inventory, tmp_path, "sigkill", "--slow-start-after-idle", "0")
    run_path = _wait_for_journal_rows(tmp_path, "sigkill", 3)
    sweep.kill()
    sweep.communicate(timeout=30)
    journal_rows = len(Run.open(run_path).journal_rows())
    assert journal_rows >= 3
    # The controller died without its finally blocks: the sysctl is still changed.
    assert kernel_state(lab)["ssai"] == ("0", "0")

    cleaned = run_labkit("runs", "cleanup", run_path.name, "--runs-dir", str(tmp_path), timeout=120)
    assert cleaned.returncode == 0, cleaned.stderr
    time.sleep(0.5)
    assert echo_processes(lab) == []
    assert kernel_state(lab) == before
    run = Run.open(run_path)
    assert run.status == "interrupted" and run.processes() == []
    assert len(run.journal_rows()) >= journal_rows

    resumed = run_labkit("sweep", "--resume", run.run_id, "--runs-dir", str(tmp_path), "--quiet", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    _assert_every_cell_once(run_path, cells=1, calls=8)
    assert kernel_state(lab) == before


def test_experiment_file_python_api_and_mesh(lab, inventory, tmp_path):
    experiment = tmp_path / "quick.toml"
    experiment.write_text(tomli_w.dumps({
        "sweep": {"inventory": str(inventory), "client": "b", "server": "a", "sizes": [100, 2000],
                  "gaps": "0s", "repeats": 2, "name": "fromfile", "ping_count": 2, "iperf_seconds": 1},
    }))
    from_file = run_labkit("sweep", "--config", str(experiment), "--repeats", "3", "--runs-dir", str(tmp_path), "--quiet", timeout=300)
    assert from_file.returncode == 0, from_file.stderr
    samples = Run.open(next(tmp_path.glob("*-fromfile"))).samples()
    # The flag overrides the file: 2 sizes × 3 repeats, from b to a.
    assert len(samples) == 6 and set(samples["src"]) == {"b"} and set(samples["dst"]) == {"a"}

    run = labkit.sweep(inventory, mesh=True, sizes=[100], gaps_s=[0.0], repeats=2, name="mesh",
                       ping_count=2, iperf_seconds=1, runs_dir=tmp_path, quiet=True)
    pairs = run.samples().groupby(["src", "dst"]).size().to_dict()
    assert pairs == {("a", "b"): 2, ("b", "a"): 2}
    assert run.status == "complete"


def test_runs_are_independent_replicates_of_the_whole_matrix_grouped_and_each_shuffled(lab, inventory, tmp_path):
    """Issue 16: --runs 2 makes two complete runs, each with its own servers, seed and manifest, found as one group;
    the cells and calls of each in an order of their own (shuffled, the default for new runs)."""
    proc = run_labkit("sweep", str(inventory), "--client", "a", "--server", "b", "--sizes", "100,2000,3000",
                      "--gaps", "0s", "--repeats", "2", "--keepalive-ms", "none,60000", *QUICK_BASELINES, "--runs", "2",
                      "--name", "twice", "--runs-dir", str(tmp_path), "--quiet", timeout=300)
    assert proc.returncode == 0, proc.stderr
    first, second = sorted((Run.open(path) for path in tmp_path.glob("*-twice*")),
                           key=lambda run: run.manifest["replicate"]["index"])
    assert proc.stdout.count("median RTT of warm calls") == 2 and proc.stdout.count("written to") == 2
    assert [r.manifest["replicate"] for r in (first, second)] == [
        {"group": first.run_id, "index": 1, "of": 2}, {"group": first.run_id, "index": 2, "of": 2}]
    assert [r.run_id for r in second.replicates()] == [first.run_id, second.run_id]
    assert [r.manifest["config"]["seed"] for r in (first, second)] == [1, 2]
    assert {r.manifest["config"]["order"] for r in (first, second)} == {"shuffled"}
    orders = []
    for run in (first, second):
        samples = run.samples()
        assert run.status == "complete" and len(samples) == 2 * 3 * 2 and run.processes() == []
        orders.append(list(samples.sort_values("t_start_utc_ns")[["cell_id", "payload_bytes"]].itertuples(index=False)))
    assert orders[0] != orders[1]
    assert leftover_processes(lab, ("echo serve", "echo call")) == []
    resumed = run_labkit("sweep", "--resume", first.run_id, "--runs", "3", "--runs-dir", str(tmp_path), "--quiet")
    assert resumed.returncode == 2 and "drop --runs" in resumed.stderr
    # From Python: runs= gives the list of replicates.
    again = labkit.sweep(inventory, client="a", server="b", sizes=[100], gaps_s=[0.0], repeats=1, ping_count=1,
                         iperf_seconds=1, runs=2, name="twice-py", runs_dir=tmp_path, quiet=True)
    assert [run.manifest["replicate"]["index"] for run in again] == [1, 2]
    assert again[1].replicates()[0].run_id == again[0].run_id


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--client", "a", "--server", "zz"], "no host 'zz'"),
        (["--client", "a", "--server", "a"], "different hosts"),
        (["--client", "a", "--server", "b", "--sizes", "100,999999999"], "out of range"),
        (["--client", "a", "--server", "b", "--sizes", "100,4MiB"], "out of range [0, 4193280]"),
        (["--client", "a", "--server", "b", "--gaps", "soon"], "not a duration"),
        (["--client", "a"], "give --client and --server"),
    ],
)
def test_bad_sweep_input_is_one_line_exit_2(inventory, tmp_path, args, expected):
    proc = run_labkit("sweep", str(inventory), *args, "--runs-dir", str(tmp_path), "--quiet")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in proc.stderr


def test_bad_inventories_and_hosts_are_one_line_exit_2(lab, inventory, tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text('[hosts.a]\nssh = "x"\n[hosts.b\n')
    proc = run_labkit("sweep", str(broken), "--client", "a", "--server", "b", "--runs-dir", str(tmp_path))
    assert proc.returncode == 2 and "line 3" in proc.stderr and proc.stderr.count("\n") == 1

    data = tomllib.loads(inventory.read_text())
    # An SSH server that is not there, on an address inside our own testbed (port 9
    # of host a's management address, where nothing listens): no traffic leaves it.
    gone = {"ssh": lab.hosts["a"].mgmt_address, "port": 9, "connect_timeout": 2}
    unreachable = dict(data, hosts={**data["hosts"], "gone": gone})
    path = tmp_path / "unreachable.toml"
    path.write_text(tomli_w.dumps(unreachable))
    proc = run_labkit("sweep", str(path), "--client", "a", "--server", "gone", "--runs-dir", str(tmp_path), "--quiet")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "gone" in proc.stderr, proc.stderr

    missing = dict(data, hosts={**data["hosts"], "b": {**data["hosts"]["b"], "labkit_dir": str(tmp_path / "nowhere")}})
    path = tmp_path / "missing.toml"
    path.write_text(tomli_w.dumps(missing))
    proc = run_labkit("sweep", str(path), "--client", "a", "--server", "b", "--runs-dir", str(tmp_path), "--quiet")
    assert proc.returncode == 2 and "labkit deploy" in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_go_client_and_server_show_the_step_and_static_windows_leave_it(lab, inventory, tmp_path):
    """grpc-go #8436's reporter found 32 MiB static windows (stream and connection, both sides) do not remove the
    step: now a sweep reproduces it, against grpc-go's default dynamic windows."""
    proc = run_labkit("sweep", str(inventory), "--client", "a", "--server", "b", "--sizes", "1000,30000",
                      "--gaps", "1s", "--repeats", "3", "--warmup", "2", "--slow-start-after-idle", "1,0", "--cc", "cubic",
                      "--client-impl", "go", "--server-impl", "go",
                      "--grpc-option", "static-stream-window+static-conn-window=default,32MiB",
                      "--name", "gostep", "--runs-dir", str(tmp_path), "--quiet", *QUICK_BASELINES, timeout=300)
    assert proc.returncode == 0, proc.stderr
    run = Run.open(next(tmp_path.glob("*-gostep")))
    samples = run.samples().assign(windows=lambda f: f["grpc_options"].fillna("default"))
    assert set(samples["client_impl"]) == {"go"} and set(samples["server_impl"]) == {"go"}
    static = "static-conn-window=32MiB;static-stream-window=32MiB"
    assert set(samples["windows"]) == {"default", static}
    assert samples["cell_id"].nunique() == 4 and samples["ok"].all()
    assert set(samples["mss"]) == {1408} and set(samples["tcp_cc"]) == {"cubic"}
    # The warm-up's 30000 B call grew the window, so with the sysctl at 0 every 30000 B call fits in one round trip.
    warm = samples[~samples["cold"]]
    medians = warm.groupby(["windows", "slow_start_after_idle", "payload_bytes"])["rtt_ms"].median() / (2 * ONE_WAY_S * 1e3)
    for windows in ("default", static):
        assert medians[(windows, 1, 30000)] > 1.6 and medians[(windows, 0, 30000)] < 1.3, medians
    servers = run.manifest["servers"]
    assert {s["impl"] for s in servers} == {"go"} and all(s["grpc_go_version"] for s in servers)
    assert sorted(s["grpc_options"].get("static-conn-window", 0) for s in servers) == [0, 32 * 2**20]
    assert sorted(s["grpc_options"].get("static-stream-window", 0) for s in servers) == [0, 32 * 2**20]
    assert echo_processes(lab) == []


@pytest.mark.parametrize("impl", ["go", "python"])
def test_a_cold_call_is_counted_in_round_trips(lab, inventory, tmp_path, impl):
    """The brief reports about 4 RTT for a cold grpc-go call of 16 KiB: handshake, HTTP/2 preface, two flights.

    Counted from the call's packets (``--capture``, then ``labkit explain``), not from its wall time divided by the
    RTT: a cold Python call spends tens of ms of its own CPU on a busy 2-core machine (4.7 RTT once), which is the
    host's, not the network's."""
    proc = run_labkit("sweep", str(inventory), "--client", "a", "--server", "b", "--sizes", "16000", "--gaps", "0",
                      "--repeats", "2", "--warmup", "0", "--cc", "cubic", "--client-impl", impl, "--server-impl", impl,
                      "--capture", "--name", f"cold-{impl}", "--runs-dir", str(tmp_path), "--quiet", *QUICK_BASELINES,
                      timeout=300)
    assert proc.returncode == 0, proc.stderr
    run = Run.open(next(tmp_path.glob(f"*-cold-{impl}")))
    samples = run.samples()
    cold_seq = samples.loc[samples["cold"], "seq"].tolist()
    assert len(cold_seq) == 1
    explained = explain_run(run).set_index("seq")
    assert (explained["evidence"] == "capture").all(), explained
    cold, warm = explained.loc[cold_seq[0]], explained.drop(index=cold_seq[0]).iloc[0]
    parts = {c["name"]: c["ms"] for c in cold["components"]}
    # TCP's handshake and HTTP/2's preface and SETTINGS, a round trip each, then 16000 B (+ framing): more than the
    # 10 x 1408 B of a fresh window, so two flights: 4 round trips. Runs of grpc-go have also sent it in one flight,
    # and grpc-go may send its request without waiting for the server's SETTINGS, so that no round trip is spent on
    # the preface: 3 in either case. The preface is then a whole round trip or none, never part of one.
    base = cold["base_rtt_ms"]
    assert parts["handshake"] >= 0.9 * base, parts
    assert parts["http2-setup"] >= 0.9 * base or parts["http2-setup"] <= 0.1 * base, parts
    setup_rounds = 1 if parts["http2-setup"] >= 0.9 * base else 0
    assert cold["rounds"] in (1, 2), cold
    assert 1 + setup_rounds + cold["rounds"] in (3, 4), (parts, cold)
    assert cold["rtt_ms"] >= (1 + setup_rounds + cold["rounds"]) * 0.98 * base  # nothing arrives before its time
    # Right after it the window has grown and nothing restarted (no gap): one round trip.
    assert warm["rounds"] == 1, warm


# -- issue 23, item 4: `runs cleanup` acts only on what labkit itself recorded -------------------------------------

@pytest.fixture(scope="module")
def knob_run(lab, inventory, tmp_path_factory) -> Path:
    """A real sweep that changed both knobs on both hosts, and put them back: the run the tests below copy as a
    SIGKILL would have left it, and tamper with."""
    runs = tmp_path_factory.mktemp("knob-run")
    proc = run_labkit("sweep", str(inventory), "--client", "a", "--server", "b", "--sizes", "100", "--gaps", "0s",
                      "--repeats", "1", "--slow-start-after-idle", "0", "--cc", "reno", "--name", "knobs",
                      "--runs-dir", str(runs), "--quiet", *QUICK_BASELINES, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return next(runs.glob("*-knobs"))


def host_kernel(lab) -> dict:
    """Every route (all tables) and the sysctls cleanup could change, in each host's namespace, read back with ip."""
    state = {}
    for name, host in lab.hosts.items():
        routes = subprocess.run(["ip", "netns", "exec", host.netns, "ip", "-o", "route", "show", "table", "all"],
                                capture_output=True, text=True, check=True).stdout
        state[name] = (routes, netns_read(lab, name, SSAI),
                       netns_read(lab, name, "/proc/sys/net/ipv4/tcp_congestion_control"))
    return state


def killed_copy(knob_run: Path, runs: Path, edit=lambda manifest, processes: None) -> Path:
    """``knob_run`` copied into ``runs`` as a SIGKILL leaves a run (running, nothing restored), then ``edit``ed."""
    import shutil

    copy = runs / knob_run.name
    shutil.copytree(knob_run, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest.update(status="running", ended_utc=None)
    for entry in manifest["kernel_originals"].values():
        entry.pop("restored")
    processes: list = []
    edit(manifest, processes)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    (copy / "processes.json").write_text(json.dumps(processes))
    return copy


def side(manifest: dict, host: str) -> dict:
    """The kernel originals ``host`` recorded."""
    return next(entry for entry in manifest["kernel_originals"].values() if entry["host"] == host)


def _set(who: str, **values):
    return lambda manifest, processes: side(manifest, who).update(values)


def _to_peer(route: str):
    """A route to b's peer (a's data address), ``{peer}`` filled in."""
    return lambda manifest, processes: side(manifest, "b").update(
        route_to_peer=route.format(peer=side(manifest, "b")["peer"], src=side(manifest, "a")["peer"]))


CRAFTED = {
    # The issue's case: a default route through the data device, and the sysctl at 0, "restored" through sudo.
    "default-route": (lambda m, p: side(m, "b").update(route_to_peer="default dev lkdata", slow_start_after_idle="0"),
                      r"kernel_originals\['b->[0-9.]+'\]\.route_to_peer: 'default dev lkdata' is not a route to "),
    "foreign-device": (_to_peer("{peer} dev lo scope link"), r"route_to_peer: device 'lo' is not the one b reaches "),
    "foreign-source": (_to_peer("{peer} dev lkdata src 198.18.99.98"),
                       r"route_to_peer: src 198.18.99.98 is not the source address b reaches [0-9.]+ with \([0-9.]+\)"),
    "words-labkit-never-writes": (_to_peer("{peer} dev lkdata nexthop via 198.18.9.9"),
                                  r"route_to_peer: 'nexthop' is not part of a route labkit records"),
    "unknown-congestion-control": (_to_peer("{peer} dev lkdata scope link src {src} congctl nosuchcc"),
                                   r"route_to_peer: congestion control 'nosuchcc' is not one b has"),
    # Recorded as absent before the run, where the run replaced the route that was there: deleting today's would
    # take away a route the run never added.
    "route-recorded-absent": (_set("b", route_to_peer=""),
                              r"route_to_peer: b's route to [0-9.]+/32 is now '[0-9.]+ dev lkdata .*congctl cubic', "
                              r"neither the one recorded before the run \('absent'\) nor one it set; left as it is"),
    "sysctl-out-of-domain": (_set("b", slow_start_after_idle="2"), r"slow_start_after_idle: '2' is neither 0 nor 1"),
    "host-not-in-inventory": (_set("b", host="gateway"), r"\.host: 'gateway' is not a host of the run's inventory"),
    "peer-not-a-host": (_set("b", peer="198.18.99.99"), r"\.peer: '198.18.99.99' is not the data address of "),
    "process-labkit-never-starts": (lambda m, p: p.append({"host": "b", "pid": 4242, "argv": ["/usr/sbin/sshd", "-D"],
                                                           "start_ticks": None}),
                                    r"processes\.json\[0\]\.argv: \['/usr/sbin/sshd', '-D'\] is not a command labkit "),
    "lock-not-labkits": (lambda m, p: m.update(knob_locks={"b": "/etc"}), r"knob_locks\['b'\]: '/etc' on b is not a "),
    "capture-dir-not-labkits": (lambda m, p: m.update(capture_dirs=[{"host": "b", "role": "client", "peer": "198.18.0.1",
                                                                     "ports": {"grpc": 1}, "dir": "/root"}]),
                                r"capture_dirs\[0\]\.dir: '/root' is not a directory labkit captures into"),
}


@pytest.mark.parametrize("crafted", CRAFTED)
def test_cleanup_refuses_a_crafted_manifest_in_one_line_and_changes_nothing(lab, knob_run, tmp_path, crafted):
    """A run directory dropped into the runs directory, each with one value labkit would not have recorded: cleanup
    with no argument (every run that needs it) refuses it in one line naming the run and the field, exit 2, and the
    hosts' route tables and sysctls are as they were."""
    import re

    edit, message = CRAFTED[crafted]
    copy = killed_copy(knob_run, tmp_path / "runs", edit)
    before = host_kernel(lab)
    proc = run_labkit("runs", "cleanup", "--runs-dir", str(tmp_path / "runs"), timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"labkit: error: {copy.name}: refused "), proc.stderr
    assert re.search(message, lines[0]) and lines[0].endswith("nothing of this run was changed"), lines[0]
    assert host_kernel(lab) == before
    assert Run.open(copy).status == "running"


def test_cleanup_of_a_run_made_on_another_machine_needs_force(lab, knob_run, tmp_path):
    """The same run, sound but for its machine: refused without --force; with it, restored (the route rebuilt from
    its recorded parts) and marked interrupted."""
    other = {"machine_id": "0" * 32, "hostname": "elsewhere"}
    copy = killed_copy(knob_run, tmp_path / "runs", lambda manifest, processes: manifest.update(machine=other))
    before = host_kernel(lab)
    refused = run_labkit("runs", "cleanup", copy.name, "--runs-dir", str(tmp_path / "runs"), timeout=120)
    assert refused.returncode == 2 and refused.stdout == "", refused.stdout + refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"labkit: error: {copy.name}: refused machine: the run was made on elsewhere (machine id {'0' * 32}), not on "
        "this one; clean it up where it was made, or give --force if its hosts are yours to change from here; nothing "
        "of this run was changed"]
    assert Run.open(copy).status == "running"

    forced = run_labkit("runs", "cleanup", copy.name, "--force", "--runs-dir", str(tmp_path / "runs"), timeout=120)
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.count("restored kernel settings on") == 2 and "could not" not in forced.stdout, forced.stdout
    assert host_kernel(lab) == before
    assert Run.open(copy).status == "interrupted"


def _ip(lab, host: str, *args: str) -> None:
    subprocess.run(["ip", "-n", lab.hosts[host].netns, *args], check=True)


def test_a_host_reaching_its_peer_through_a_subnet_keeps_its_routes_through_runs_and_cleanup(lab, inventory, tmp_path):
    """Issue 45, item 1: where b reaches a through a subnet route (no /32 of its own, as on many VMs), a sweep that
    sets only the sysctl leaves the routes alone and ends with everything restored; one that sets the congestion
    control adds a /32 route and deletes exactly that one. After the /32 route is put back (`testbed repair`),
    cleanup with no argument finds nothing to do, and a killed copy of the run that added the route is refused:
    the route there now is neither the run's nor absent, as recorded."""
    a_address, b_address = lab.hosts["a"].data_address, lab.hosts["b"].data_address
    subnet = f"{a_address.rsplit('.', 1)[0]}.0/24"
    _ip(lab, "b", "route", "add", subnet, "dev", "lkdata", "src", b_address)
    _ip(lab, "b", "route", "del", f"{a_address}/32")
    try:
        before = host_kernel(lab)
        assert route_to_peer(lab, "b", "a") == ""
        runs = tmp_path / "runs"
        for name, knob in (("subnet-ssai", ["--slow-start-after-idle", "0"]), ("subnet-cc", ["--cc", "reno"])):
            proc = run_labkit("sweep", str(inventory), "--client", "a", "--server", "b", "--sizes", "100", "--gaps",
                              "0s", "--repeats", "1", *knob, "--name", name, "--runs-dir", str(runs), "--quiet",
                              *QUICK_BASELINES, timeout=300)
            assert proc.returncode == 0, proc.stderr
            run = Run.open(next(runs.glob(f"*-{name}")))
            assert run.status == "complete"
            assert all(entry["restored"] is True for entry in run.manifest["kernel_originals"].values()), run.manifest
            assert host_kernel(lab) == before
        added = side(Run.open(next(runs.glob("*-subnet-cc"))).manifest, "b")
        assert added["route_to_peer"] == "" and added["written"]["route_to_peer"] == [
            f"{a_address}/32 dev lkdata src {b_address} congctl reno"]
    finally:  # what `testbed repair` puts back
        _ip(lab, "b", "route", "replace", f"{a_address}/32", "dev", "lkdata", "src", b_address, "congctl", "cubic")
        _ip(lab, "b", "route", "del", subnet)
    repaired = host_kernel(lab)
    proc = run_labkit("runs", "cleanup", "--runs-dir", str(runs), timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "nothing to clean up", proc.stdout + proc.stderr
    assert host_kernel(lab) == repaired

    killed = killed_copy(next(runs.glob("*-subnet-cc")), tmp_path / "killed")
    proc = run_labkit("runs", "cleanup", "--runs-dir", str(tmp_path / "killed"), timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"labkit: error: {killed.name}: refused kernel_originals['b->{a_address}'].route_to_peer: "
                           f"b's route to {a_address}/32 is now '{a_address} dev lkdata") and "neither" in line, line
    assert host_kernel(lab) == repaired and Run.open(killed).status == "running"


def test_a_sweep_that_cannot_put_back_a_route_changed_under_it_says_so_and_cleanup_finishes(lab, inventory, tmp_path):
    """Issue 45, item 1: a route someone changed while the sweep measured is neither the one recorded before the run
    nor one the run set: the sweep leaves it, says so in one line and exits 1 (the run failed, its cells measured);
    cleanup refuses it too, and finishes once the route is back as it was."""
    a_address, b_address = lab.hosts["a"].data_address, lab.hosts["b"].data_address
    before = host_kernel(lab)
    sweep = _start_sweep(inventory, tmp_path, "moved", "--cc", "reno", "--repeats", "30")
    run_path = _wait_for_journal_rows(tmp_path, "moved", 1)
    try:
        _ip(lab, "b", "route", "replace", f"{a_address}/32", "dev", "lkdata", "src", b_address, "congctl", "cubic",
            "mtu", "1400")
        _, stderr = sweep.communicate(timeout=300)
        errors = [line for line in stderr.splitlines() if line.startswith("labkit: error: ")]
        assert sweep.returncode == 1 and len(errors) == 1, stderr
        assert "its cells are measured, but not every kernel setting it changed is back: b: could not restore " \
               f"route_to_peer: b's route to {a_address}/32 is now '{a_address} dev lkdata" in errors[0], errors[0]
        assert f"`labkit runs cleanup {run_path.name}`" in errors[0]
        run = Run.open(run_path)
        assert run.status == "failed" and len(run.journal_rows()) == 30
        assert "mtu 1400" in route_to_peer(lab, "b", "a") and "congctl reno" not in route_to_peer(lab, "a", "b")
        refused = run_labkit("runs", "cleanup", "--runs-dir", str(tmp_path), timeout=120)
        assert refused.returncode == 2 and "neither the one recorded before the run" in refused.stderr, refused.stderr
        assert "mtu 1400" in route_to_peer(lab, "b", "a")
    finally:  # the route as it was, as its owner would put it back
        _ip(lab, "b", "route", "replace", f"{a_address}/32", "dev", "lkdata", "src", b_address, "congctl", "cubic")
    cleaned = run_labkit("runs", "cleanup", "--runs-dir", str(tmp_path), timeout=120)
    assert cleaned.returncode == 0 and f"restored kernel settings on b->{a_address}" in cleaned.stdout, cleaned.stderr
    assert host_kernel(lab) == before
    resumed = run_labkit("sweep", "--resume", run_path.name, "--runs-dir", str(tmp_path), "--quiet", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    _assert_every_cell_once(run_path, cells=1, calls=30)
    assert host_kernel(lab) == before

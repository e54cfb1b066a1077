"""`labkit series` across a testbed of its own (s4-series: 50 ms one way, no rate limit), over SSH to a deployed labkit.

Plus the pure conversion of a ping run into series rows, on real recorded
single-probe ping output (tests/data/ping/series/).
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pandas as pd
import pytest
import tomli_w

import labkit
from conftest import DATA, LABKIT, deployed_inventory, labkit as run_labkit, own_testbed, leftover_processes, wait_for
from labkit.echo.plans import PROBES, SeriesPlan
from labkit.echo.series_agent import SKIPPED, run_agent
from labkit.echo.server import running_server
from labkit.echo.tcp_echo import TcpEchoServer
from labkit.schemas import SERIES_SCHEMA
from labkit.analysis.tables import summarize_series
from labkit.cli.series import print_summary
from labkit.experiments.series import ping_rows, sample_row
from labkit.store import Run

ONE_WAY_S = 0.050
RTT_MS = 2 * ONE_WAY_S * 1e3
FOUR = ["ping", "echo-warm", "echo-cold", "tcp-echo"]


# -- the pure part: real recorded ping runs ---------------------------------------------------


def _ping_event(name: str, tick: int = 7, started: int = 1_795_338_526_000_000_000) -> dict:
    base = DATA / "ping" / "series" / name
    return {"event": "ping", "tick": tick, "t_utc_ns": started, "argv": ["ping"],
            "status": int((base.with_suffix(".status")).read_text()),
            "stdout": base.with_suffix(".txt").read_text(), "stderr": base.with_suffix(".stderr").read_text()}


def test_a_ping_reply_is_one_row_sent_one_rtt_before_its_stamp():
    [row] = ping_rows(_ping_event("reply"), "ping-x.txt")
    # [1795338526.062047] ... time=0.023 ms
    assert row["ok"] and row["error"] == "" and row["seq"] == 7 and row["rtt_ms"] == 0.023
    assert row["t_utc_ns"] == 1_795_338_526_062_047_000 - 23_000
    assert row["payload_bytes"] == 56 and row["unit"] == "ms" and row["source_file"] == "ping-x.txt"


def test_a_ping_reply_above_100_ms_keeps_its_microseconds_from_the_summary_line():
    """Issue 16: time=200 ms on the reply line (three significant digits), 200.145 on the summary line."""
    [row] = ping_rows(_ping_event("reply_200ms"))
    assert row["ok"] and row["rtt_ms"] == 200.145
    assert row["t_utc_ns"] == 1_795_545_455_021_925_000 - 200_145_000


def test_a_lost_ping_is_a_row_with_no_reply():
    [row] = ping_rows(_ping_event("lost"))
    assert not row["ok"] and row["error"] == "no reply" and row["rtt_ms"] is None and row["unit"] is None
    assert row["t_utc_ns"] == 1_795_338_526_000_000_000  # when its run started: nothing else says when it left


def test_a_ping_that_could_not_send_still_gives_its_row_with_the_reason():
    [row] = ping_rows(_ping_event("no_route"))
    assert not row["ok"] and row["seq"] == 7
    assert row["error"] == "ping exited with status 2: ping: connect: Network is unreachable"


def test_agent_samples_become_rows_in_ms():
    row = sample_row({"event": "sample", "probe": "echo-cold", "tick": 3, "t_utc_ns": 5, "rtt_ns": 201_500_000,
                      "ok": True, "error": "", "cold": True, "payload_bytes": 50})
    assert row["rtt_ms"] == 201.5 and row["seq"] == 3 and row["cold"] and row["unit"] == "ns"
    skipped = sample_row({"event": "sample", "probe": "tcp-echo", "tick": 4, "t_utc_ns": 6, "rtt_ns": None,
                          "ok": False, "error": "skipped: previous call still in flight", "cold": False, "payload_bytes": 50})
    assert skipped["rtt_ms"] is None and skipped["unit"] is None and not skipped["ok"]


# -- the agent on loopback: every tick of every probe reported, in process ----------------------


def _agent_events(plan) -> list[dict]:
    out = io.StringIO()
    assert run_agent(plan, out=out) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_the_agent_reports_every_tick_of_every_probe_on_loopback():
    with running_server("127.0.0.1:0") as grpc_port, TcpEchoServer("127.0.0.1", 0, max_message_bytes=1000) as tcp:
        plan = SeriesPlan(address="127.0.0.1", probes=PROBES, first_tick=20, ticks=3, interval_s=0.1, payload_bytes=100,
                         timeout_s=2, grpc_port=grpc_port, tcp_echo_port=tcp.port)
        events = _agent_events(plan)
    start, end = events[0], events[-1]
    assert start["event"] == "start" and end == {"event": "end", "samples": 12, "pings": 3}
    assert start["offsets_s"] == pytest.approx({"ping": 0, "echo-warm": 0.02, "echo-cold": 0.04, "tcp-echo": 0.06, "tcp-connect": 0.08})
    samples = [e for e in events if e["event"] == "sample"]
    assert sorted((e["probe"], e["tick"]) for e in samples) == sorted(
        (probe, tick) for probe in PROBES if probe != "ping" for tick in (20, 21, 22))
    # A call that outlasts its probe's 100 ms interval on a busy machine turns the probe's next tick into a skipped
    # row (the test below is about those): only a first tick is sure to be a call.
    answered = [e for e in samples if e["error"] != SKIPPED]
    assert {e["probe"] for e in answered if e["tick"] == 20} == set(PROBES) - {"ping"}
    assert all(e["ok"] and e["rtt_ns"] > 0 and e["error"] == "" for e in answered), answered
    for e in answered:  # each probe sends at its offset after its tick, within its tick's interval
        due = start["t0_utc_ns"] + (e["tick"] - 20) * 100_000_000 + round(start["offsets_s"][e["probe"]] * 1e9)
        # Both stamps are clock_pair midpoints, each within half its bracket of the true instant (tens of µs on a
        # busy machine): 1 ms covers them. Late is bounded by the interval only: a busy machine may wake the agent
        # late, and a call later than that would have been a skipped row, not a sample.
        assert -1_000_000 <= e["t_utc_ns"] - due < 100_000_000, e
    pings = [e for e in events if e["event"] == "ping"]
    assert [e["tick"] for e in sorted(pings, key=lambda e: e["tick"])] == [20, 21, 22]
    assert all(ping_rows(e)[0]["ok"] for e in pings)
    assert tcp.requests == 1 + sum(e["probe"] == "tcp-echo" for e in answered)  # an unrecorded warm-up, then each call


def test_a_call_still_in_flight_turns_the_ticks_it_covers_into_skipped_rows():
    # A real listener that accepts and never answers: every TCP echo call runs into its deadline.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        plan = SeriesPlan(address="127.0.0.1", probes=("tcp-echo",), ticks=6, first_tick=0, interval_s=0.1,
                         payload_bytes=10, timeout_s=0.25, tcp_echo_port=silent.getsockname()[1])
        events = _agent_events(plan)
    assert events[0]["warmup"] == {"tcp-echo": "timed out"}
    rows = [e for e in events if e["event"] == "sample"]
    assert [e["tick"] for e in rows] == [0, 1, 2, 3, 4, 5]  # none missing, in order
    assert not any(e["ok"] for e in rows)
    skipped = [e for e in rows if e["error"] == SKIPPED]
    timed_out = [e for e in rows if e["error"] == "timed out"]
    assert len(skipped) >= 2 and len(timed_out) >= 2 and len(skipped) + len(timed_out) == 6
    assert all(e["rtt_ns"] is None for e in skipped)


# -- the testbed ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab():
    with own_testbed("s4-series", ONE_WAY_S, cc="cubic") as state:
        yield state


@pytest.fixture(scope="module")
def inventory(lab, tmp_path_factory):
    """The testbed's inventory, with labkit deployed (offline) into directories of this test module."""
    return deployed_inventory(lab, tmp_path_factory.mktemp("series"))


def series_processes(lab) -> list[str]:
    return leftover_processes(lab, ("echo serve", "labkit-go", "series-agent", "ping "))


def _samples(run: Run):
    table = pq.read_table(run.path / "samples.parquet")
    assert table.schema.equals(SERIES_SCHEMA, check_metadata=False)
    return table.to_pandas()


def test_a_series_runs_every_probe_on_one_schedule(lab, inventory, tmp_path):
    proc = run_labkit("series", str(inventory), "--client", "a", "--server", "b", "--duration", "10s",
                      "--interval", "1s", "--cell", "5s", "--probes", ",".join([*FOUR, "tcp-connect"]),
                      "--name", "aligned", "--runs-dir", str(tmp_path), "--quiet", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "× ping" in proc.stdout and "tcp-connect" in proc.stdout
    # 10 ticks: enough for a median, not for p5 and p95 (59 each), and the summary says so.
    printed = " ".join(proc.stdout.split())
    assert "warning: 5 of 5 p95 values rest on fewer than 59 ok samples (fewest 10)" in printed
    assert "median values rest" not in printed
    run = Run.open(next(tmp_path.glob("*-aligned")))
    assert run.status == "complete" and run.processes() == []
    assert series_processes(lab) == []
    samples = _samples(run)

    # Every probe, every tick, once; nothing failed on a healthy link.
    counts = samples.groupby("probe")["seq"].agg(["size", "nunique", "min", "max"])
    assert set(counts.index) == {*FOUR, "tcp-connect"}
    assert (counts["size"] == 10).all() and (counts["nunique"] == 10).all()
    assert (counts["min"] == 0).all() and (counts["max"] == 9).all()
    assert samples["ok"].all() and not samples["duplicate"].any()
    assert samples.groupby("cell_id").size().tolist() == [25, 25]

    # Aligned: the sends of one tick lie within one interval (each probe at its own place in it), and each probe's
    # tick k is sent near its tick 0 + k s: a schedule, not a period that drifts with each late send (a busy
    # machine may start one send late, not all).
    by_tick = samples.groupby("seq")["t_utc_ns"]
    assert ((by_tick.max() - by_tick.min()) < 0.95e9).all()
    for probe, rows in samples.groupby("probe"):
        offsets = rows["t_utc_ns"] - rows["seq"] * 1e9
        offsets -= offsets.min()
        assert (offsets < 0.3e9).all(), (probe, offsets.tolist())

    # The gRPC probes carry the echo server's own time on each call; the others have none.
    grpc_probe = samples["probe"].str.startswith("echo-")
    assert (samples.loc[grpc_probe, "server_ns"] >= 0).all() and samples.loc[~grpc_probe, "server_ns"].isna().all()
    assert (samples.loc[grpc_probe, "server_ns"] / 1e6 < samples.loc[grpc_probe, "rtt_ms"]).all()
    medians = samples.groupby("probe")["rtt_ms"].median()
    assert RTT_MS <= medians["ping"] < RTT_MS + 10
    # A new channel pays for the TCP handshake (one RTT) before its call.
    assert medians["echo-cold"] - medians["echo-warm"] > 0.7 * RTT_MS
    # The raw TCP echo is the floor: no faster than the link, no slower than gRPC on a warm channel.
    assert RTT_MS <= medians["tcp-echo"] <= medians["echo-warm"] + 3
    assert RTT_MS <= medians["tcp-connect"] < RTT_MS + 10
    assert samples.loc[samples["probe"] == "echo-cold", "cold"].all()
    assert not samples.loc[samples["probe"].isin(["ping", "echo-warm", "tcp-echo"]), "cold"].any()
    summary = summarize_series(samples)
    assert summary.loc["echo-warm", "vs_ping"] > 1 and summary.loc["ping", "vs_ping"] == 1

    # Raw ping output kept, one file per cell, with the run that each row came from.
    raw = sorted(path.name for path in run.raw_dir.glob("ping-*.txt"))
    assert raw == ["ping-ticks0000000-0000004-a1.txt", "ping-ticks0000005-0000009-a1.txt"]
    assert set(samples.loc[samples["probe"] == "ping", "source_file"]) == set(raw)
    text = (run.raw_dir / raw[0]).read_text()
    assert text.count("# tick ") == 5 and text.count("1 packets transmitted, 1 received") == 5
    manifest = run.manifest
    for host in ("a", "b"):
        assert manifest["hosts"][host]["python"]["labkit"] == labkit.__version__
    assert manifest["servers"]["0"]["tcp_echo_port"] > 0
    assert manifest["agents"][0]["ticks"] == 10 and manifest["agents"][0]["warmup"] == {"echo-warm": "", "tcp-echo": ""}


def test_a_reply_slower_than_the_timeout_is_not_an_ok_sample(lab, inventory, tmp_path):
    """Issue 15: ping waits whole seconds (-W 1 for an 80 ms timeout), so a 100 ms reply was recorded as ok."""
    proc = run_labkit("series", str(inventory), "--client", "a", "--server", "b", "--duration", "2s", "--interval",
                      "500ms", "--timeout", "80ms", "--probes", "ping,tcp-echo", "--name", "slow", "--runs-dir",
                      str(tmp_path), "--quiet", timeout=120)
    # Every request of the cell failed: the run is complete, and says so in a warning and exit status 1.
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("labkit: warning: ")]
    assert proc.returncode == 1 and len(warnings) == 1 and "8 of 8 requests failed" in warnings[0], proc.stderr
    samples = _samples(Run.open(next(tmp_path.glob("*-slow"))))
    ping = samples[samples["probe"] == "ping"]
    assert len(ping) == 4 and not ping["ok"].any()
    assert ping["error"].str.startswith("slower than the timeout (80 ms)").all()
    assert (ping["rtt_ms"] >= RTT_MS).all()  # the time is kept, for whoever wants to look
    tcp = samples[samples["probe"] == "tcp-echo"]
    assert not tcp["ok"].any() and tcp["error"].str.contains("timed out").all()


def _journal_ticks(runs_dir: Path, name: str) -> tuple[Path | None, int]:
    for journal in runs_dir.glob(f"*-{name}/samples.jsonl"):
        rows = [json.loads(line) for line in journal.read_text().splitlines() if line.endswith("}")]
        return journal.parent, max((row["seq"] for row in rows), default=-1)
    return None, -1


def test_a_killed_echo_server_is_restarted_and_its_unfinished_cell_redone(lab, inventory, tmp_path, capsys):
    # From Python this time (labkit.series), in a thread, while the test kills the server.
    outcome = {}

    def measure():
        try:
            outcome["run"] = labkit.series(inventory, client="a", server="b", duration_s=6.0, cell_s=3.0, name="killed",
                                           runs_dir=tmp_path, quiet=True)
        except BaseException as exc:  # handed to the test below
            outcome["error"] = exc

    thread = threading.Thread(target=measure)
    thread.start()
    try:
        run_path = wait_for(lambda: _journal_ticks(tmp_path, "killed")[1] >= 1 and _journal_ticks(tmp_path, "killed")[0],
                             what="two ticks")
        server_pid = Run.open(run_path).manifest["servers"]["0"]["pid"]
        os.kill(server_pid, signal.SIGKILL)
    finally:
        thread.join(timeout=120)
    assert "error" not in outcome, outcome.get("error")
    run = outcome["run"]
    assert run.status == "complete" and series_processes(lab) == []
    exits = run.manifest["server_exits"]
    assert len(exits) == 1 and exits[0]["pid"] == server_pid and exits[0]["status"] != 0
    assert run.manifest["servers"]["0"]["pid"] != server_pid  # the restarted one
    # The cell the dead server spoiled was measured again: every probe of every tick, all of them answered.
    samples = _samples(run)
    assert (samples.groupby("probe")["seq"].agg(["size", "max"]) == [6, 5]).all().all()
    assert samples["ok"].all()
    # The spoiled attempt stays in the journal, as evidence; the dataset holds the redo. A call the dead server
    # failed, if the agent made one before the run noticed the exit and stopped it, says why.
    journal = pd.DataFrame(run.journal_rows())
    assert journal.groupby("cell_id")["attempt"].nunique().max() == 2
    failed = journal[~journal["ok"].astype(bool)]
    assert failed["error"].str.contains("UNAVAILABLE|refused|reset", regex=True).all()
    assert journal["attempt"].max() > samples["attempt"].min()
    print_summary(run)
    assert f"the echo server on b (pid {server_pid}) exited" in capsys.readouterr().out


def test_sigint_then_resume_redoes_only_the_missing_cells(lab, inventory, tmp_path):
    series = subprocess.Popen(
        [LABKIT, "series", str(inventory), "--client", "a", "--server", "b", "--duration", "6s",
         "--cell", "2s", "--probes", "ping,echo-warm", "--name", "resumed", "--runs-dir", str(tmp_path), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        run_path = wait_for(lambda: _journal_ticks(tmp_path, "resumed")[1] >= 2 and _journal_ticks(tmp_path, "resumed")[0],
                             what="the third tick")
        series.send_signal(signal.SIGINT)
        _, stderr = series.communicate(timeout=60)
    finally:
        if series.poll() is None:
            series.kill()
            series.communicate()
    assert series.returncode == 130, stderr
    assert series_processes(lab) == []
    run = Run.open(run_path)
    assert run.status == "interrupted" and run.processes() == []
    first_cells = {e["cell"] for e in run.cell_events() if e["event"] == "complete"}
    # The first cell ended before the third tick; a loaded machine may deliver the signal after the second cell
    # ended too (a run behind its schedule catches up at once), never after the third, which was still to come.
    assert "a->b|ticks=0-1" in first_cells and "a->b|ticks=4-5" not in first_cells, first_cells

    resumed_at = time.time_ns()
    resumed = run_labkit("series", "--resume", run.run_id, "--runs-dir", str(tmp_path), "--quiet", timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    run = Run.open(run_path)
    samples = _samples(run)
    assert run.status == "complete"
    assert (samples.groupby("probe")["seq"].agg(["size", "nunique"]) == 6).all().all()
    # Cells completed before the interruption were kept, not run again.
    kept = samples[samples["cell_id"].isin(first_cells)]
    assert len(kept) == 4 * len(first_cells) and (kept["t_utc_ns"] < resumed_at).all() and (kept["attempt"] == 1).all()
    redone = samples[~samples["cell_id"].isin(first_cells)]
    assert (redone["t_utc_ns"] > resumed_at).all()


def test_an_experiment_file_with_flags_over_it(lab, inventory, tmp_path):
    experiment = tmp_path / "series.toml"
    experiment.write_text(tomli_w.dumps({"series": {
        "inventory": str(inventory), "client": "b", "server": "a", "duration": "2s", "interval": "500ms",
        "probes": ["ping", "tcp-echo"], "name": "fromfile"}}))
    proc = run_labkit("series", "--config", str(experiment), "--payload-bytes", "1000", "--runs-dir", str(tmp_path),
                      "--quiet", timeout=120)
    assert proc.returncode == 0, proc.stderr
    samples = Run.open(next(tmp_path.glob("*-fromfile"))).samples()
    assert samples.groupby("probe").size().to_dict() == {"ping": 4, "tcp-echo": 4}
    assert set(samples["src"]) == {"b"} and set(samples["dst"]) == {"a"}
    assert set(samples.loc[samples["probe"] == "tcp-echo", "payload_bytes"]) == {1000}


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--client", "a", "--server", "zz"], "no host 'zz'"),
        (["--client", "a", "--server", "a"], "different hosts"),
        (["--client", "a", "--server", "b", "--duration", "soon"], "not a duration"),
        (["--client", "a", "--server", "b", "--probes", "ping,icmp"], "'icmp' is not one of"),
        (["--client", "a", "--server", "b", "--duration", "1s", "--interval", "2s"], "at least one --interval"),
        (["--client", "a", "--server", "b", "--payload-bytes", "99999999"], "99999999"),
        (["--client", "a"], "give --client and --server"),
        (["--client", "a", "--server", "b", "--server-impl", "python,go"], "a series runs one stack"),
        (["--client", "a", "--server", "b", "--client-impl", "go,python"], "a series runs one stack"),
        (["--client", "a", "--server", "b", "--grpc-option", "pool=2"], "pool is a client option"),
        (["--client", "a", "--server", "b", "--grpc-option", "static-conn-window=1MiB"], "grpcio has no equivalent"),
    ],
)
def test_bad_series_input_is_one_line_exit_2(inventory, tmp_path, args, expected):
    proc = run_labkit("series", str(inventory), *args, "--runs-dir", str(tmp_path), "--quiet")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in proc.stderr
    assert not list(tmp_path.glob("*/manifest.json"))  # refused before any run was made


def test_a_series_of_the_go_agent_against_the_go_server(lab, inventory, tmp_path):
    proc = run_labkit("series", str(inventory), "--client", "a", "--server", "b", "--duration", "4s", "--interval", "1s",
                      "--client-impl", "go", "--server-impl", "go", "--grpc-option", "max-concurrent-streams=16",
                      "--name", "goserver", "--runs-dir", str(tmp_path), "--quiet", timeout=120)
    assert proc.returncode == 0, proc.stderr
    run = Run.open(next(tmp_path.glob("*-goserver")))
    _samples(run)  # the schema every series shares with imports
    samples = run.samples()  # with the series' one stack, from its config
    assert set(samples["server_impl"]) == {"go"} and set(samples["client_impl"]) == {"go"}
    # A cold call pays at least the TCP handshake before its own round trip; a warm one only the latter.
    medians = samples[samples["ok"]].groupby("probe")["rtt_ms"].median()
    assert medians["echo-cold"] > 1.8 * medians["ping"] and medians["echo-warm"] < 1.3 * medians["ping"]
    assert set(samples["grpc_options"]) == {"max-concurrent-streams=16"}
    assert samples[~samples["duplicate"]].groupby("probe")["ok"].all().all()
    assert set(samples["probe"]) == set(FOUR)
    server = next(iter(run.manifest["servers"].values()))
    assert server["impl"] == "go" and server["grpc_options"] == {"max-concurrent-streams": 16}
    assert series_processes(lab) == []

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
import time
from pathlib import Path

import pytest

from conftest import LABKIT, labkit
from test_echo import ServerProcess

LOCAL_PAIR = '[hosts.a]\nssh = "local"\n\n[hosts.b]\nssh = "local"\n'


def _wait_for(predicate, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {timeout} s")


# --- item 10: a signal's exit status is 128 + the signal -------------------------------------------------------


@pytest.mark.parametrize("stop_signal, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_an_experiment_stopped_by_a_signal_exits_128_plus_the_signal(tmp_path, stop_signal, status):
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(LOCAL_PAIR)
    runs = tmp_path / "runs"
    proc = subprocess.Popen([LABKIT, "series", str(inventory), "--client", "a", "--server", "b", "--duration", "60s",
                             "--interval", "200ms", "--probes", "echo-warm", "--name", "sig", "--runs-dir", str(runs),
                             "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        journal = _wait_for(lambda: next(iter(runs.glob("*-sig/samples.jsonl")), None), "the first sample")
        proc.send_signal(stop_signal)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == status, stderr
    assert stderr.strip().splitlines()[-1] == "labkit: interrupted"
    assert json.loads((journal.parent / "manifest.json").read_text())["status"] == "interrupted"


@pytest.mark.parametrize("impl", ["python", "go"])
@pytest.mark.parametrize("stop_signal, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_echo_call_stopped_by_a_signal_prints_its_summary_and_exits_128_plus_the_signal(impl, stop_signal, status):
    server = ServerProcess()
    try:
        proc = subprocess.Popen([LABKIT, "echo", "call", "--target", server.target, "--impl", impl, "--sizes", "10",
                                 "--repeats", "1000", "--gap", "200ms"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            assert json.loads(proc.stdout.readline())["ok"]
            proc.send_signal(stop_signal)
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    finally:
        server.stop()
    assert proc.returncode == status, stderr
    assert "interrupted after" in stderr

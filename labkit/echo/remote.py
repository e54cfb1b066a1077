"""One echo exchange between two hosts: a server on one, a client on the other, rows streamed back.

The smallest unit the testbed checks and benchmarks are built from; `labkit
sweep` adds the run store, kernel conditions and resume on top.
"""

from __future__ import annotations

import json
import sys

from labkit.echo.plans import CallPlan, ServePlan, call_argv, serve_argv
from labkit.errors import LabkitError


def local_labkit_argv(*args: str) -> list[str]:
    """argv that runs this same labkit (testbed namespaces share this filesystem)."""
    return [sys.executable, "-m", "labkit", *args]


def wait_until_ready(server, timeout: float = 60) -> dict:
    """The ready line of a starting ``labkit echo serve`` process (see :mod:`labkit.echo.server`), as a dict.

    It comes once every endpoint listens; a server that exits first is an
    error carrying its last stderr line.
    """
    ready = json.loads(server.wait_for_line(lambda line: '"ready"' in line, timeout=timeout))
    ready.pop("event", None)
    return ready


def echo_exchange(client, server, server_address: str, *, sizes: list[int], repeats: int, gap_s: float,
                  warmup: int = 1, labkit_argv=local_labkit_argv):
    """Start an echo server on ``server``, run the client on ``client``, and yield one dict per call.

    Both processes are stopped when the generator finishes, fails or is closed.
    """
    with server.start(labkit_argv(*serve_argv(ServePlan(bind=f"{server_address}:0")))) as server_proc:
        ready = wait_until_ready(server_proc, timeout=30)
        calls = CallPlan(target=f"{server_address}:{ready['port']}", sizes=sizes, repeats=repeats, gap_s=gap_s,
                         warmup=warmup)
        with client.start(labkit_argv(*call_argv(calls))) as client_proc:
            for line in client_proc.lines(timeout=60 + 5 * gap_s):
                if line.startswith("{"):
                    yield json.loads(line)
            if client_proc.wait() != 0:
                detail = client_proc.stderr_lines[-1] if client_proc.stderr_lines else ""
                raise LabkitError(f"the echo client failed on {client.name}: {detail}")

"""Shared fixtures: the real local testbed, and the labkit console script.

Testbed tests need root, network namespaces and /dev/net/tun. Where those are
missing they skip with the reason, except under LABKIT_REQUIRE_TESTBED=1 (set
by CI), where a missing testbed is a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LABKIT = str(Path(sys.executable).with_name("labkit"))
DATA = Path(__file__).resolve().parent / "data"

# Testbeds made by tests keep their state apart from a user's testbeds.
os.environ.setdefault("LABKIT_STATE_HOME", f"/tmp/labkit-test-state-{os.getuid()}")


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
    require_testbed()
    from labkit.testbed.lab import LinkConfig, Testbed

    lab = Testbed("t-wan", log=lambda message: None)
    state = lab.up(LinkConfig(one_way_delay_s=0.050, rate_bps=None, cc="cubic", emulator="tun"))
    try:
        yield state
    finally:
        lab.down(quiet=True)

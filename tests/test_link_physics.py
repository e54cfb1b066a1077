"""gRPC echo across the testbed link, and the idle-connection step reproduced for real.

These check that the lab reproduces the physics of the research brief (a cwnd
reset after idle costs one extra round trip); they are not speed targets.
"""

from __future__ import annotations

import json

import pytest

from labkit.echo.remote import echo_exchange, local_labkit_argv, wait_until_ready
from labkit.hosts import LocalHost
from labkit.hosts.kernel import SSAI, KernelConditions


@pytest.fixture(scope="module")
def hosts(wan_testbed):
    a, b = wan_testbed.hosts["a"], wan_testbed.hosts["b"]
    return LocalHost("a", netns=a.netns), LocalHost("b", netns=b.netns), b.data_address


def _rtt_ms(wan_testbed) -> float:
    return 2 * wan_testbed.link.one_way_delay_s * 1e3


def test_echo_across_the_link_returns_the_right_lengths(hosts, wan_testbed):
    client, server, address = hosts
    rows = list(echo_exchange(client, server, address, sizes=[1, 1000, 20000], repeats=2, gap_s=0.0))
    assert [row["payload_bytes"] for row in rows] == [1, 1, 1000, 1000, 20000, 20000]
    assert all(row["ok"] and row["grpc_code"] == "OK" for row in rows)
    # Every call crosses the link twice: it cannot be faster than one RTT.
    assert min(row["rtt_ns"] for row in rows) / 1e6 >= _rtt_ms(wan_testbed) * 0.99


def test_an_oversize_message_across_the_link_gets_resource_exhausted(hosts):
    client, server, address = hosts
    with server.start(local_labkit_argv("echo", "serve", "--bind", f"{address}:0", "--max-message-bytes", "4096")) as proc:
        port = wait_until_ready(proc, timeout=30)["port"]
        result = client.run(
            local_labkit_argv("echo", "call", "--target", f"{address}:{port}", "--sizes", "100,10000,100", "--repeats", "1", "--gap", "0"),
            timeout=60,
        )
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [(row["payload_bytes"], row["grpc_code"]) for row in rows] == [
        (100, "OK"), (10000, "RESOURCE_EXHAUSTED"), (100, "OK"),
    ]


def _rtt_ratios(client, server, address, *, size: int, value: int, rtt_ms: float) -> list[float]:
    sides = [KernelConditions(client, address), KernelConditions(server, address)]
    try:
        for side in sides:
            side.set_slow_start_after_idle(value)
        rows = list(echo_exchange(client, server, address, sizes=[size], repeats=6, gap_s=1.0, warmup=2))
    finally:
        for side in sides:
            side.restore()
    assert len(rows) == 6 and all(row["ok"] for row in rows)
    return [row["rtt_ns"] / 1e6 / rtt_ms for row in rows]


def test_idle_connection_step_appears_and_the_sysctl_removes_it(hosts, wan_testbed):
    client, server, address = hosts
    before = client.read_sysctl(SSAI)
    rtt_ms = _rtt_ms(wan_testbed)
    # A loaded machine only adds time to a call, never takes a round trip away: with the reset every call needs two
    # (so the fastest does), without it one call in one round trip shows that none is needed.
    with_reset = min(_rtt_ratios(client, server, address, size=30000, value=1, rtt_ms=rtt_ms))
    without_reset = min(_rtt_ratios(client, server, address, size=30000, value=0, rtt_ms=rtt_ms))
    assert with_reset > 1.6, f"30000 B after 1 s idle took {with_reset:.2f} RTT at fastest with the sysctl at 1"
    assert without_reset < 1.3, f"30000 B after 1 s idle took {without_reset:.2f} RTT at fastest with the sysctl at 0"
    assert client.read_sysctl(SSAI) == before, "the sysctl was not restored"

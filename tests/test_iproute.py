"""iproute2, tc and sysctl parsers on output recorded on this kernel (tests/data/iproute/).

Recorded 2026-11-22, kernel 6.18: in a testbed namespace (route with a per-route
congctl, the TUN data link), and in a throwaway namespace with a veth route
carrying ``mtu lock 1400 advmss 1360 initcwnd 20 congctl cubic``.
"""

from __future__ import annotations

from conftest import DATA

from labkit.parsers.iproute import parse_link_mtu, parse_qdisc, parse_route_get, parse_sysctl_output

RECORDED = DATA / "iproute"


def read(name: str) -> str:
    return (RECORDED / name).read_text()


def test_route_on_the_testbed_has_congctl_and_no_mtu():
    assert parse_route_get(read("route-get-testbed-congctl.txt")) == {
        "dev": "lkdata", "src": "198.18.0.1", "congctl": "cubic",
    }


def test_route_with_a_gateway_locked_mtu_and_initcwnd_in_both_layouts():
    expected = {"dev": "v0", "src": "198.18.201.2", "via": "198.18.201.1", "congctl": "cubic",
                "mtu": 1400, "initcwnd": 20, "advmss": 1360}
    assert parse_route_get(read("route-get-via-mtu-lock-initcwnd.txt")) == expected
    # `ip -o` folds the cache line into the first with a backslash.
    assert parse_route_get(read("route-get-oneline-via-mtu-lock-initcwnd.txt")) == expected


def test_link_mtu_and_qdiscs():
    assert parse_link_mtu(read("link-show-testbed-tun.txt")) == 1460
    assert parse_link_mtu(read("link-show-veth.txt")) == 1500
    assert parse_qdisc(read("qdisc-show-testbed-tun.txt")) == ["pfifo_fast 0:"]
    assert parse_qdisc(read("qdisc-show-veth.txt")) == ["noqueue 0:"]


def test_sysctls_of_a_namespace_with_tab_separated_values():
    values = parse_sysctl_output(read("sysctl-testbed-namespace.txt"))
    assert values == {
        "net.ipv4.tcp_slow_start_after_idle": "1",
        "net.ipv4.tcp_congestion_control": "bbr",
        "net.ipv4.tcp_available_congestion_control": "reno bbr cubic",
        "net.ipv4.tcp_wmem": "4096 16384 4194304",
    }

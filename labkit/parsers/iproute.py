"""iproute2 and sysctl output: the route to a peer, an interface's MTU, its qdiscs, TCP sysctls.

Pure functions over the text the tools print, used for host facts and
``labkit hosts check``; tested on output recorded on this kernel
(tests/data/iproute/).
"""

from __future__ import annotations

import re


def parse_route_get(text: str) -> dict:
    """Fields of ``ip route get ADDR`` (plain or ``-o``): dev, src, via, congctl, mtu, initcwnd, advmss.

    Only the fields present are returned; ``mtu lock 1400`` reads as 1400
    (``lock`` only pins the value against path-MTU discovery).
    """
    route: dict = {}
    words = text.split()
    for key in ("dev", "src", "via", "congctl"):
        if key in words[:-1]:
            value = words[words.index(key) + 1]
            if key == "congctl" and value == "lock" and words.index(key) + 2 < len(words):
                value = words[words.index(key) + 2]
            route[key] = value
    for key in ("mtu", "initcwnd", "advmss"):
        match = re.search(rf"\b{key}\s+(?:lock\s+)?(\d+)", text)
        if match:
            route[key] = int(match.group(1))
    return route


def parse_link_mtu(text: str) -> int | None:
    """The MTU in ``ip -o link show dev IF`` output."""
    match = re.search(r"\bmtu (\d+)", text)
    return int(match.group(1)) if match else None


def parse_qdisc(text: str) -> list[str]:
    """One entry per qdisc line of ``tc qdisc show dev IF`` (kind and handle), e.g. ``pfifo_fast 0:``."""
    return [" ".join(line.split()[1:3]) for line in text.splitlines() if line.startswith("qdisc ")]


def parse_sysctl_output(text: str) -> dict[str, str]:
    """``key = value`` lines of ``sysctl KEY...`` into a dict (tabs inside values become single spaces)."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition(" = ")
        if sep:
            values[key.strip()] = " ".join(value.split())
    return values

"""A testbed's hosts and the parameters of each link between them (``labkit testbed up --topology FILE``).

::

    # Three regions, RTTs of real cloud regions (us-east1 - europe-west1 ~ 80-90 ms ...)
    [hosts.us]
    [hosts.eu]
    [hosts.ap]

    [links.us-eu]                # both directions; keys are testbed up's flags
    one_way_delay = "42ms"
    rate = "1gbit"

    [links.eu-ap]
    one_way_delay = "120ms"
    loss = "0.1%"

    [links."ap->us"]             # one direction only, over [links.ap-us] and the defaults
    jitter = "3ms"
    jitter_distribution = "normal"

Every pair of hosts is linked; a pair without a table gets the command line's values,
and a table's keys override them. Without a topology the testbed has hosts ``a`` and ``b``.

A host's table may name the root filesystem the host runs in (:mod:`labkit.testbed.rootfs`), a Debian
minbase root instead of this machine's own userland::

    [hosts.old]
    root = "bullseye"            # Debian 11: Python 3.9, OpenSSH 8.4; or "trixie" (Debian 13)
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path

from labkit.errors import LabkitError
from labkit.files import MAX_TOPOLOGY_BYTES, parse_toml, read_text_file
from labkit.testbed.linkspec import LinkSpec, overrides
from labkit.testbed.rootfs import RootSpec

HOST_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")
MAX_HOSTS = 16
DEFAULT_HOSTS = ("a", "b")


def direction_key(src: str, dst: str) -> str:
    """How a direction is named in the emulator's counters and in state: ``a>b``."""
    return f"{src}>{dst}"


@dataclass
class Topology:
    """Host names in order, and LinkSpec overrides per pair (``a-b``, sorted) and per direction (``a>b``)."""

    hosts: tuple[str, ...] = DEFAULT_HOSTS
    links: dict[str, dict] = field(default_factory=dict)
    source: str | None = None
    roots: dict[str, str] = field(default_factory=dict)  # host -> its root (``bullseye``); absent: this machine's

    def with_roots(self, roots: dict[str, str], where: str = "--host-root") -> "Topology":
        """This topology with ``roots`` (host -> release) over its own; a one-line error for an unknown host or
        release."""
        for host, root in roots.items():
            if host not in self.hosts:
                raise LabkitError(f"{where}: no host {host!r} in the testbed (its hosts: {', '.join(self.hosts)})")
            RootSpec.parse(root)
        return dataclasses.replace(self, roots={**self.roots, **roots})

    def directions(self) -> list[tuple[str, str]]:
        return [(src, dst) for src in self.hosts for dst in self.hosts if src != dst]

    def spec(self, default: LinkSpec, src: str, dst: str) -> LinkSpec:
        """The direction src -> dst: the defaults, then its pair's table, then its own."""
        pair = "-".join(sorted((src, dst)))
        return dataclasses.replace(default.spec(), **self.links.get(pair, {}), **self.links.get(direction_key(src, dst), {}))

    def to_dict(self) -> dict:
        return {"hosts": list(self.hosts), "links": self.links, "source": self.source, "roots": self.roots}

    @classmethod
    def from_dict(cls, data: dict | None) -> "Topology":
        if not data:
            return cls()
        return cls(hosts=tuple(data["hosts"]), links=dict(data.get("links", {})), source=data.get("source"),
                   roots=dict(data.get("roots") or {}))


def _link_key(key: str, hosts: tuple[str, ...], where: str) -> str:
    match = re.fullmatch(r"([a-z0-9]+)(->|-)([a-z0-9]+)", key)
    if not match:
        raise LabkitError(f"{where}: link {key!r} must be named HOST-HOST (both directions) or HOST->HOST (one)")
    src, arrow, dst = match.groups()
    for name in (src, dst):
        if name not in hosts:
            raise LabkitError(f"{where}: link {key!r} names host {name!r}, which has no [hosts.{name}] table")
    if src == dst:
        raise LabkitError(f"{where}: link {key!r} joins a host to itself")
    return direction_key(src, dst) if arrow == "->" else "-".join(sorted((src, dst)))


def parse_topology(text: str, path: Path | None = None) -> Topology:
    """Read a topology file's TOML; every mistake is one LabkitError naming the file."""
    where = f"topology {path}" if path else "topology"
    data = parse_toml(text, where)
    unknown = set(data) - {"hosts", "links"}
    if unknown:
        raise LabkitError(f"{where}: unknown table {sorted(unknown)[0]!r} (a topology has [hosts.NAME] and [links.A-B])")
    hosts = tuple(data.get("hosts", {}))
    if not 2 <= len(hosts) <= MAX_HOSTS:
        raise LabkitError(f"{where}: needs 2 to {MAX_HOSTS} [hosts.NAME] tables, not {len(hosts)}")
    for name, table in data["hosts"].items():
        if not HOST_RE.match(name):
            raise LabkitError(f"{where}: host name {name!r} must be 1-8 characters of a-z and 0-9, starting with a letter")
        unknown = sorted(set(table) - {"root"})
        if unknown:
            raise LabkitError(f"{where}: [hosts.{name}] takes no keys but root = \"RELEASE\", not {unknown[0]!r} (link "
                              f"parameters go in [links.{name}-OTHER])")
        if "root" in table:
            if not isinstance(table["root"], str):
                raise LabkitError(f"{where}: hosts.{name}.root must be a string such as \"bullseye\"")
            try:
                RootSpec.parse(table["root"])
            except LabkitError as exc:
                raise LabkitError(f"{where}: [hosts.{name}] {exc.message}") from None
    links: dict[str, dict] = {}
    base_dir = path.parent if path else None
    for key, table in data.get("links", {}).items():
        name = _link_key(key, hosts, where)
        if name in links:
            raise LabkitError(f"{where}: link {key!r} is given twice")
        if not isinstance(table, dict):
            raise LabkitError(f"{where}: links.{key} must be a table")
        links[name] = overrides(table, f"{where} [links.{key}]", base_dir)
    roots = {name: table["root"] for name, table in data["hosts"].items() if "root" in table}
    return Topology(hosts=hosts, links=links, source=str(path) if path else None, roots=roots)


def read_topology(path: str | Path) -> Topology:
    path = Path(path)
    text = read_text_file(path, "topology", max_bytes=MAX_TOPOLOGY_BYTES)
    return parse_topology(text, path.resolve())

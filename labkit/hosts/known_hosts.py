"""known_hosts read as OpenSSH reads it (sshd(8), SSH_KNOWN_HOSTS FILE FORMAT), for paramiko's host key check.

A line is ``[@marker] patterns keytype base64-key [comment]``:

- no marker: the key of the hosts the patterns match;
- ``@revoked``: that key must never be accepted for those hosts, whatever other line lists it;
- ``@cert-authority``: that key is a CA whose host *certificates* those hosts present. paramiko checks plain
  host keys, not certificates, so such a line vouches for no plain key: a host known only through its CA is
  unknown to labkit, and the error says so.

Patterns are host names or addresses (``[host]:port`` off port 22), ``*`` and ``?`` wildcards, ``!`` negations
and hashed names (``|1|salt|hash``, ``HashKnownHosts``). paramiko's own reader takes a marker for a host name
and stops at a line of bad base64 with an exception of its own; here a line that is not a host key line is
one clear error naming the file and the line, and key types paramiko does not know are skipped as before.
"""

from __future__ import annotations

import binascii
import fnmatch
from base64 import b64decode
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from labkit.errors import LabkitError
from labkit.files import read_text_file

MARKERS = ("@revoked", "@cert-authority")


@dataclass(frozen=True)
class KnownLine:
    """One host key line: its number, marker ("" for a plain key), host patterns and key."""

    number: int
    marker: str
    patterns: tuple[str, ...]
    key: paramiko.PKey

    def matches(self, name: str) -> bool:
        """Whether the line is about host ``name`` (as paramiko names it: ``host`` or ``[host]:port``)."""
        positive = False
        for pattern in self.patterns:
            negated = pattern.startswith("!")
            if _pattern_matches(pattern[1:] if negated else pattern, name):
                if negated:
                    return False
                positive = True
        return positive


def _pattern_matches(pattern: str, name: str) -> bool:
    if pattern.startswith("|1|"):
        return paramiko.HostKeys.hash_host(name, pattern) == pattern
    return fnmatch.fnmatchcase(name.lower(), pattern.lower())


@dataclass
class KnownHosts:
    """The lines of one known_hosts file; ``path`` names it in messages."""

    path: Path
    lines: list[KnownLine] = field(default_factory=list)

    def host_keys(self, name: str) -> paramiko.HostKeys:
        """The plain keys paramiko may accept for ``name``: revoked ones left out, so they reach the policy."""
        keys = paramiko.HostKeys()
        for line in self.lines:
            if line.marker == "" and line.matches(name) and self.revoked(name, line.key) is None:
                keys.add(name, line.key.get_name(), line.key)
        return keys

    def revoked(self, name: str, key: paramiko.PKey) -> KnownLine | None:
        """The ``@revoked`` line that refuses ``key`` for ``name``, or None."""
        return next((line for line in self.lines if line.marker == "@revoked" and line.matches(name)
                     and line.key.asbytes() == key.asbytes()), None)

    def authority(self, name: str) -> KnownLine | None:
        """The first ``@cert-authority`` line for ``name``, or None."""
        return next((line for line in self.lines if line.marker == "@cert-authority" and line.matches(name)), None)


def parse_known_hosts(text: str, path: Path) -> KnownHosts:
    """Every host key line of a known_hosts file's text; a line that is not one is a :class:`LabkitError`."""
    known = KnownHosts(Path(path))
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        marker = fields.pop(0) if fields[0].startswith("@") else ""
        if marker and marker not in MARKERS:
            raise LabkitError(f"{path} line {number}: unknown marker {marker!r} (OpenSSH knows "
                              f"{' and '.join(MARKERS)}); fix or remove that line")
        if len(fields) < 3:
            continue  # as OpenSSH and paramiko: a line without a key names nothing
        patterns, key_type, blob = fields[0], fields[1], fields[2]
        try:
            key_bytes = b64decode(blob, validate=True)
        except (binascii.Error, ValueError):
            raise LabkitError(f"{path} line {number}: the {key_type} key is not base64 "
                              f"({blob[:20]!r}...); fix or remove that line") from None
        try:
            key = paramiko.PKey.from_type_string(key_type, key_bytes)
        except paramiko.UnknownKeyType:
            continue  # a key type paramiko cannot check (e.g. sk-ssh-ed25519@openssh.com) vouches for nothing
        except (paramiko.SSHException, ValueError, TypeError) as exc:
            raise LabkitError(f"{path} line {number}: not a valid {key_type} key ({exc}); "
                              "fix or remove that line") from None
        known.lines.append(KnownLine(number, marker, tuple(patterns.split(",")), key))
    return known


def read_known_hosts(path: str | Path) -> KnownHosts:
    """Read and parse a known_hosts file; a missing one has no lines; anything unreadable is one line."""
    path = Path(path)
    if not path.exists():
        return KnownHosts(path)
    return parse_known_hosts(read_text_file(path, "known_hosts"), path)

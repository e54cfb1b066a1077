"""Parsing of the human units used on the command line and in experiment files.

These are pure functions that raise ``ValueError`` with a message fit to show a
user; the click parameter types of :mod:`labkit.cli.params` turn that into a
usage error (exit 2).
"""

from __future__ import annotations

import re
from decimal import Decimal

_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s|m|h)?\s*$")


def parse_duration(text: str, default_unit: str = "s") -> float:
    """Return seconds for strings such as ``100ms``, ``1.5s``, ``250us`` or ``2``.

    A bare number is read in ``default_unit``.
    """
    match = _DURATION_RE.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a duration (examples: 100ms, 1.5s, 250us)")
    number, unit = match.groups()
    return float(number) * _DURATION_UNITS[unit or default_unit]


def format_duration(seconds: float) -> str:
    """``1e-05`` -> ``0.00001s``: the flag text :func:`parse_duration` (and labkit-go's units) reads back as exactly
    ``seconds``. Plain decimal seconds, never an exponent: ``f"{1e-05!r}s"`` is ``1e-05s``, which neither parser
    reads, so a 10 µs gap would make an agent refuse its command line."""
    return f"{Decimal(repr(float(seconds))):f}s"


def parse_duration_with_unit(text: str) -> float:
    """Seconds for a duration that names its unit (``5ms``); a bare number is refused, since tools disagree on
    what it means (tc reads ``delay 5`` as 5 µs, labkit's other flags as 5 s)."""
    seconds = parse_duration(text)
    if _DURATION_RE.match(str(text)).group(2) is None:
        raise ValueError(f"{str(text).strip()!r} has no unit (examples: 5ms, 1.5s, 250us)")
    return seconds


_RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9}
_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([kmg]?(?:bit|bps))\s*$", re.IGNORECASE)


def parse_rate(text: str) -> float | None:
    """Return bits per second for ``100mbit``, ``1gbit``, ``12.5mbps`` (bytes), or None for ``none``.

    Units follow tc(8): ``bit`` suffixes are bits, ``bps`` suffixes are bytes.
    """
    if str(text).strip().lower() in {"none", "unlimited"}:
        return None
    if re.fullmatch(r"0+(?:\.0*)?", str(text).strip()):  # no limit is said as "none", never as 0
        raise ValueError(f"rate {str(text).strip()!r} would let nothing through; give 'none' for no rate limit")
    match = _RATE_RE.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a rate (examples: 100mbit, 1gbit, none)")
    number, unit = match.groups()
    bits = float(number) * _RATE_UNITS[unit.lower()]
    if bits <= 0:
        raise ValueError(f"rate {text!r} must be positive, or 'none'")
    return bits


_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 10**6, "mb": 10**6, "mib": 2**20}
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Return bytes for ``1000``, ``14k``, ``16KiB``, ``2MiB`` (k = 1000, KiB = 1024)."""
    match = _SIZE_RE.match(str(text))
    if not match or match.group(2).lower() not in _SIZE_UNITS:
        raise ValueError(f"{text!r} is not a size in bytes (examples: 1000, 14k, 16KiB)")
    number, unit = match.groups()
    return int(number) * _SIZE_UNITS[unit.lower()]


def parse_size_list(text: str, *, minimum: int = 0, maximum: int | None = None) -> list[int]:
    """Return the sizes of a comma-separated list such as ``1000,14000,16k``, each within bounds."""
    items = [item for item in str(text).split(",") if item.strip()]
    if not items:
        raise ValueError("expected a comma-separated list of sizes, e.g. 1000,14000,16000")
    sizes = [parse_size(item) for item in items]
    for size in sizes:
        if size < minimum or (maximum is not None and size > maximum):
            upper = f"{maximum}" if maximum is not None else "∞"
            raise ValueError(f"size {size} is out of range [{minimum}, {upper}] bytes")
    return sizes


#: Words that mean "leave unset" in a list of values, e.g. ``--keepalive-ms none,1000``.
NONE_WORDS = frozenset({"none", "off", "keep"})


def parse_list(text: str, item_parser, *, none_words: set[str] = frozenset()) -> list:
    """Parse ``a,b,c`` with ``item_parser``; items in ``none_words`` (e.g. ``none``, ``keep``) become None."""
    items = [item.strip() for item in str(text).split(",") if item.strip()]
    if not items:
        raise ValueError("expected a comma-separated list")
    return [None if item.lower() in none_words else item_parser(item) for item in items]


def choice(choices: tuple[str, ...]):
    """An item parser (for :func:`parse_list`) that accepts only ``choices``."""

    def parse(item: str) -> str:
        if item not in choices:
            raise ValueError(f"{item!r} is not one of {', '.join(choices)}")
        return item

    return parse


def int_in(low: int, high: int):
    """An item parser (for :func:`parse_list`) that accepts integers within ``[low, high]``."""

    def parse(item: str) -> int:
        try:
            value = int(item)
        except ValueError:
            raise ValueError(f"{item!r} is not an integer") from None
        if not low <= value <= high:
            raise ValueError(f"{value} is not between {low} and {high}")
        return value

    return parse


def format_size(size: int) -> str:
    """``1048576`` -> ``1MiB``, ``1024`` -> ``1KiB``, ``1000`` -> ``1000B``: exact binary units only, as the CLI and figures label sizes."""
    for unit, factor in (("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"

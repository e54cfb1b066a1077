"""Go's duration text (``time.Duration.String`` and ``time.ParseDuration``).

Go writes durations with the unit that suits their size: ``999ns``, ``1.5µs``,
``27.355185ms``, ``1.868983839s``, ``1m2.5s``, ``1h0m0s``. A log parser that
assumes one unit silently loses or misreads samples (the 2016 notebook dropped
every sample written in seconds), so this module reads the full grammar that
``time.ParseDuration`` accepts: an optional sign, then one or more
``<decimal><unit>`` terms with units ns, us, µs (U+00B5), μs (U+03BC), ms, s,
m and h; a bare ``0`` is zero.
"""

from __future__ import annotations

import re

NS_PER_UNIT = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign, what Go writes
    "\u03bcs": 1_000,  # Greek small mu, also accepted by Go
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}

_TERM = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_INT64_MAX = 2**63 - 1


def parse_go_duration_ns(text: str) -> int:
    """Return the integer nanoseconds of a Go duration string, as ``time.ParseDuration`` does.

    Raises ``ValueError`` for text Go would reject (``"1"``, ``"1d"``, ``"1 s"``).
    """
    s = text
    if not isinstance(s, str):
        raise ValueError(f"{text!r} is not a Go duration")
    sign = 1
    if s and s[0] in "+-":
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError(f"{text!r} is not a Go duration")
    total = 0
    pos = 0
    while pos < len(s):
        match = _TERM.match(s, pos)
        if not match:
            raise ValueError(f"{text!r} is not a Go duration (expected e.g. 27.3ms, 1.8s, 1m2.5s)")
        number, unit = match.groups()
        whole, _, frac = number.partition(".")
        scale = NS_PER_UNIT[unit]
        # Exact integer arithmetic; Go truncates the fractional part to whole ns.
        value = int(whole or "0") * scale
        if frac:
            value += int(frac) * scale // 10 ** len(frac)
        total += value
        pos = match.end()
    if total > _INT64_MAX + (1 if sign < 0 else 0):
        raise ValueError(f"{text!r} overflows a Go duration (int64 nanoseconds)")
    return sign * total


def parse_go_duration_ms(text: str) -> float:
    """Return milliseconds (float) of a Go duration string such as ``1.868983839s``."""
    return parse_go_duration_ns(text) / 1e6


def go_duration_unit(text: str) -> str:
    """Return the largest unit a Go duration string is written in (``ms`` for ``27.3ms``, ``m`` for ``1m2.5s``)."""
    match = _TERM.search(text)
    if not match:
        raise ValueError(f"{text!r} is not a Go duration")
    return {"\u03bcs": "µs", "us": "µs", "\u00b5s": "µs"}.get(match.group(2), match.group(2))

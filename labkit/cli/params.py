"""click parameter types for labkit's units: each delegates to a pure parser of :mod:`labkit.units`.

A parser's ``ValueError`` becomes a usage error (one line, exit 2) naming the flag.
"""

from __future__ import annotations

import click

from labkit.echo.address import parse_host_port
from labkit.limits import MAX_DURATION_S, duration_text
from labkit.units import NONE_WORDS, choice, int_in, parse_duration, parse_duration_with_unit, parse_list, parse_rate, parse_size, parse_size_list


class ParsingParam(click.ParamType):
    """A click parameter type that delegates to a parser raising ``ValueError``."""

    def __init__(self, name: str, parser):
        self.name = name
        self._parser = parser

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            return value
        try:
            return self._parser(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


DURATION = ParsingParam("duration", parse_duration)


def _at_most(parser, maximum_s: float):
    """``parser`` refusing a duration longer than ``maximum_s`` (labkit.limits)."""
    def parse(text: str) -> float:
        seconds = parser(text)
        if seconds > maximum_s:
            raise ValueError(f"{text!r} is longer than {duration_text(maximum_s)}")
        return seconds

    return parse


def duration_at_most(maximum_s: float) -> click.ParamType:
    """A click type for one duration of at most ``maximum_s`` seconds (state the bound in the option's help)."""
    return ParsingParam("duration", _at_most(parse_duration, maximum_s))


#: Any gap, interval or deadline a user gives: at most labkit.limits.MAX_DURATION_S.
BOUNDED_DURATION = duration_at_most(MAX_DURATION_S)
#: A duration whose unit must be written (a link's delay: tc reads a bare number as µs, labkit as s).
DURATION_WITH_UNIT = ParsingParam("duration", parse_duration_with_unit)
RATE = ParsingParam("rate", parse_rate)
SIZE = ParsingParam("size", parse_size)


def _iperf3_rate(text: str) -> str:
    from labkit.parsers.iperf3 import iperf3_rate  # the parser module imports pandas: only when the flag is used

    return iperf3_rate(text)


IPERF3_RATE = ParsingParam("rate", _iperf3_rate)


def size_list(minimum: int = 0, maximum: int | None = None) -> click.ParamType:
    """A click type for a comma-separated list of byte sizes within ``[minimum, maximum]``."""
    return ParsingParam("sizes", lambda text: parse_size_list(text, minimum=minimum, maximum=maximum))


def duration_list(allow_none: bool = False, maximum_s: float = MAX_DURATION_S) -> click.ParamType:
    """A click type for ``1s,100ms`` (and ``none`` when allowed) → seconds, each at most ``maximum_s``."""
    words = NONE_WORDS if allow_none else frozenset()
    item = _at_most(parse_duration, maximum_s)
    return ParsingParam("durations", lambda text: parse_list(text, item, none_words=words))


def int_list(low: int, high: int, allow_none: bool = False) -> click.ParamType:
    """A click type for ``1,0`` or ``1000,none`` → ints within ``[low, high]``."""
    words = NONE_WORDS if allow_none else frozenset()
    return ParsingParam("integers", lambda text: parse_list(text, int_in(low, high), none_words=words))


def choice_list(choices: tuple[str, ...], allow_none: bool = False) -> click.ParamType:
    """A click type for ``cubic,bbr`` (and ``keep`` when allowed)."""
    words = NONE_WORDS if allow_none else frozenset()
    return ParsingParam("choices", lambda text: parse_list(text, choice(choices), none_words=words))


def host_port(*, allow_port_zero: bool) -> click.ParamType:
    """A click type for ``HOST:PORT``; the value stays a string that grpc accepts as is."""

    def parse(text: str) -> str:
        host, port = parse_host_port(text, allow_port_zero=allow_port_zero)
        return f"{host}:{port}"

    return ParsingParam("host:port", parse)


BIND_ADDRESS = host_port(allow_port_zero=True)
TARGET_ADDRESS = host_port(allow_port_zero=False)

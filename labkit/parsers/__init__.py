"""Pure parsers: tool output as text in, tidy rows and counts out (no I/O).

Each parser takes the whole text of one tool run and returns a
:class:`ParseResult` whose counts account for every line, so an importer can
say how many lines were parsed, lost or unrecognised and never drops a sample
silently. Tests feed them real recorded output (tests/data/, data/external/).
"""

from labkit.parsers.base import ParseError, ParseResult
from labkit.parsers.ghz import parse_ghz_json
from labkit.parsers.goclient import parse_go_echo_log, parse_idle_step_output
from labkit.parsers.godur import go_duration_unit, parse_go_duration_ms, parse_go_duration_ns
from labkit.parsers.iperf3 import parse_iperf3_json
from labkit.parsers.ping import parse_ping
from labkit.parsers.ss import parse_ss, parse_ss_tcp_info

__all__ = [
    "ParseError",
    "ParseResult",
    "go_duration_unit",
    "parse_ghz_json",
    "parse_go_duration_ms",
    "parse_go_duration_ns",
    "parse_go_echo_log",
    "parse_idle_step_output",
    "parse_iperf3_json",
    "parse_ping",
    "parse_ss",
    "parse_ss_tcp_info",
]

"""Pure parsers: tool output as text in, tidy rows and counts out (no I/O).

Each parser takes the whole text of one tool run and returns a
:class:`ParseResult` whose counts account for every line, so an importer can
say how many lines were parsed, lost or unrecognised and never drops a sample
silently. Tests feed them real recorded output (tests/data/, data/external/).
"""

import importlib

# name -> module that defines it. Imported on first use: the echo client on a
# remote host reads ss output without pandas, which the other parsers need.
_EXPORTS = {
    "ParseError": "base",
    "ParseResult": "base",
    "parse_ghz_json": "ghz",
    "parse_h2load": "h2load",
    "parse_h2load_log": "h2load",
    "parse_go_echo_log": "goclient",
    "parse_idle_step_output": "goclient",
    "go_duration_unit": "godur",
    "parse_go_duration_ms": "godur",
    "parse_go_duration_ns": "godur",
    "parse_iperf3_json": "iperf3",
    "parse_irtt": "irtt",
    "parse_ping": "ping",
    "parse_ss": "ss",
    "parse_ss_tcp_info": "ss",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"labkit.parsers.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'labkit.parsers' has no attribute {name!r}")


__all__ = [
    "ParseError",
    "ParseResult",
    "go_duration_unit",
    "parse_ghz_json",
    "parse_h2load",
    "parse_h2load_log",
    "parse_go_duration_ms",
    "parse_go_duration_ns",
    "parse_go_echo_log",
    "parse_idle_step_output",
    "parse_iperf3_json",
    "parse_irtt",
    "parse_ping",
    "parse_ss",
    "parse_ss_tcp_info",
]

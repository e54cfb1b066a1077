"""``labkit import``: logs collected elsewhere become a labkit run.

Old experiments (the 2016 ping-vs-gRPC logs, ping output saved from any
machine, iperf3 and ghz JSON reports) are analysed with the same notebooks as
runs labkit made itself once they are imported::

    from labkit.importers import import_files, read_log

    result = import_files([("ping", "ping.txt.gz"), ("go-echo", "echo.txt.gz")], out="orca-2016")
    result.run.samples()          # rows of labkit.schemas.SERIES_SCHEMA

    parsed = read_log("ping", "ping.txt")   # parse only, no run: parsed.rows, parsed.describe()

Every line of every file is either parsed or counted as unrecognised, lost
probes are ``ok=False`` rows, duplicate replies are flagged: nothing is
dropped silently.
"""

from labkit.importers.core import (
    ImportResult,
    ParsedFile,
    experiment_for,
    import_files,
    read_log,
    read_source,
)
from labkit.importers.kinds import KINDS, guess_kind

__all__ = [
    "ImportResult",
    "KINDS",
    "ParsedFile",
    "experiment_for",
    "guess_kind",
    "import_files",
    "read_log",
    "read_source",
]

"""The compiled reader of the two large logs' commonest lines (``_lines.c`` beside this file), through ctypes.

``labkit import`` of a 200 MB ping or Go echo log spends most of its time on lines of one shape. Read by
regular expressions and numpy, those lines went at 55-70 MB/s; read by ``_lines.c`` (one pass over each
line, the GIL released), the import runs at disk speed (bench/import_throughput.py). What that code does not
read exactly as the plain shape, or cannot hold as nanoseconds (a time before 1677-09-21 or after 2262-04-11), it
leaves to the parser's regex and line-by-line code, which read every shape and refuse such a time naming its line;
so the rows, and the errors, are the same with or without it (tests/test_parsers_stream.py holds both ways to the
same rows and errors).

scripts/bootstrap.sh builds ``_lines.so`` with the system's C compiler; without it (labkit installed from a
wheel, no compiler), :func:`library` is None and the parsers read every line the other way.
"""

from __future__ import annotations

import ctypes
import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from labkit.parsers.stream import Lines

SOURCE = Path(__file__).with_name("_lines.c")
LIBRARY = Path(__file__).with_name("_lines.so")
#: What ``labkit_lines_version()`` must return: a library built from an older ``_lines.c`` is not used.
VERSION = 2
#: Set to 1 to read every line with the regex and line-by-line code (the tests compare the two ways).
DISABLE_ENV = "LABKIT_NO_COMPILED_PARSER"


@cache
def library() -> ctypes.CDLL | None:
    """The built library, or None when it is missing, of another version, or turned off by the environment."""
    if os.environ.get(DISABLE_ENV) == "1" or not LIBRARY.exists():
        return None
    try:
        lib = ctypes.CDLL(str(LIBRARY))
    except OSError:
        return None
    if lib.labkit_lines_version() != VERSION:
        return None
    pointer, count = ctypes.c_void_p, ctypes.c_int64
    lib.ping_plain.argtypes = [pointer, pointer, pointer, count] + [pointer] * 10
    lib.echo_plain.argtypes = [pointer, pointer, pointer, count] + [pointer] * 9
    lib.ping_plain.restype = lib.echo_plain.restype = count
    return lib


def _address(array) -> int:
    return array.ctypes.data


def _strings(offsets, data, count: int) -> "pa.Array":
    """The first ``count`` strings written as 64-bit offsets into ``data``, as an Arrow string array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    used = int(offsets[count])
    array = pa.LargeStringArray.from_buffers(count, pa.py_buffer(offsets[:count + 1]), pa.py_buffer(data[:used]))
    return pc.cast(array, pa.string())


def ping_replies(lines: "Lines", schema: "pa.Schema") -> "tuple[pa.Table, np.ndarray] | None":
    """The plain replies of a chunk's lines as pending rows of ``schema`` (``line`` numbered from 1 within the
    chunk), and which lines they are (0-based); None without the library."""
    import numpy as np
    import pyarrow as pa

    lib = library()
    if lib is None:
        return None
    n = len(lines)
    line, seq, ttl, size, stamp_ns = (np.empty(n, np.int64) for _ in range(5))
    rtt_ms = np.empty(n, np.float64)
    stamped, dup = np.empty(n, np.uint8), np.empty(n, np.uint8)
    offsets, data = np.empty(n + 1, np.int64), np.empty(len(lines.bytes), np.uint8)
    count = lib.ping_plain(_address(lines.bytes), _address(lines.starts), _address(lines.ends), n, _address(line),
                           _address(seq), _address(ttl), _address(size), _address(rtt_ms), _address(stamp_ns),
                           _address(stamped), _address(dup), _address(offsets), _address(data))
    line = line[:count]
    table = pa.table({
        "seq": seq[:count], "line": line + 1, "rtt_ms": rtt_ms[:count], "dup": dup[:count].astype(bool),
        "t_utc_ns": pa.array(stamp_ns[:count], mask=stamped[:count] == 0), "ttl": ttl[:count],
        "bytes": size[:count], "source": _strings(offsets, data, count),
    }, schema=schema)
    return table, line


#: The unit codes of ``echo_plain``, as labkit names units (Go's own spelling: µs for us, µs and μs).
ECHO_UNITS = ("s", "ms", "µs", "ns")


def echo_calls(lines: "Lines") -> "dict | None":
    """The plain ``received`` lines of a chunk's lines as columns: ``line`` (0-based), ``naive_ns`` (the stamp's
    wall-clock time read as UTC), ``bytes``, ``order``, ``seq``, ``nanos`` (the duration), ``unit`` (an index into
    :data:`ECHO_UNITS`) and ``peer``; None without the library."""
    import numpy as np

    lib = library()
    if lib is None:
        return None
    n = len(lines)
    line, naive_ns, size, order, seq, nanos = (np.empty(n, np.int64) for _ in range(6))
    unit = np.empty(n, np.uint8)
    offsets, data = np.empty(n + 1, np.int64), np.empty(len(lines.bytes), np.uint8)
    count = lib.echo_plain(_address(lines.bytes), _address(lines.starts), _address(lines.ends), n, _address(line),
                           _address(naive_ns), _address(size), _address(order), _address(seq), _address(nanos),
                           _address(unit), _address(offsets), _address(data))
    return {"line": line[:count], "naive_ns": naive_ns[:count], "bytes": size[:count], "order": order[:count],
            "seq": seq[:count], "nanos": nanos[:count], "unit": unit[:count], "peer": _strings(offsets, data, count)}

"""The small text files a user hands labkit (inventory, experiment file, known_hosts), read with one-line errors.

Whatever the path holds (nothing, a directory, a file this user may not read, binary data, gigabytes) the
problem is one :class:`LabkitError` naming the file, never a traceback; a file far larger than any such file
can be is refused before it is read.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from labkit.errors import LabkitError

#: No inventory, experiment file or known_hosts file comes near this; a larger one is the wrong file.
MAX_TEXT_BYTES = 16 * 2**20


def read_text_file(path: str | os.PathLike, what: str, *, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of ``path``, ``what`` naming it in errors ("inventory", "experiment file", ...)."""
    path = Path(path).expanduser()
    with read_errors(f"{what} {path}", missing=f"{what} {path} does not exist"):
        size = path.stat().st_size
        if path.is_dir():
            raise LabkitError(f"{what} {path} is a directory, not a file")
        if size > max_bytes:
            raise LabkitError(f"{what} {path} is {_size(size)}, not a {what} (at most {_size(max_bytes)})")
        data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise LabkitError(f"{what} {path} holds binary data (line {line}), not text: is it the right file?") from None


@contextmanager
def read_errors(name: str, *, missing: str) -> Iterator[None]:
    """Reading ``name`` (a file, as the message names it): an OSError inside becomes one :class:`LabkitError`,
    ``missing`` when the file does not exist."""
    try:
        yield
    except FileNotFoundError:
        raise LabkitError(missing) from None
    except PermissionError:
        raise LabkitError(f"cannot read {name}: permission denied") from None
    except OSError as exc:
        raise LabkitError(f"cannot read {name}: {exc.strerror or exc}") from None


def parse_toml(text: str, where: str) -> dict:
    """The table of TOML ``text``, or one line saying where it is not TOML (``where``: "inventory PATH", ...)."""
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message ends with "(at line N, column M)".
        raise LabkitError(f"{where} is not valid TOML: {exc}") from None


def _size(size: int) -> str:
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size} bytes"

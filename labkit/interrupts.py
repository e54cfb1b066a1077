"""Blocks that an interrupt does not cut short: SIGINT (Ctrl-C, a notebook kernel's interrupt) and SIGTERM are
taken when the block ends, by the handlers in force before it.

A step that must finish once started (a testbed's teardown; a process started on a host and recorded in its run)
runs in such a block: cut in the middle, it left namespaces, or a process no one knew of, behind.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

#: The signals labkit stops on (labkit.cli installs both handlers explicitly).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def interrupts_deferred():
    """Hold SIGINT and SIGTERM for the block; each that came is raised again when it ends, to the handler in force
    before it (which, for labkit, raises KeyboardInterrupt there). Outside the main thread, where Python takes no
    signals, the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {signum: signal.signal(signum, lambda signum, frame: pending.append(signum)) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(pending):
            signal.raise_signal(signum)  # its Python handler runs here, before raise_signal returns

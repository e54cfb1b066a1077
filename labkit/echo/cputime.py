"""CPU time of this whole process (every thread), for experiments that report what a transfer cost.

Two sources, read together by :func:`cpu_now`:

- ``/proc/self/stat`` fields 14 and 15 (utime, stime): user and kernel time of
  the process, in clock ticks (1/100 s on Linux). The split tells per-chunk
  system calls (kernel time) from per-chunk Python work (user time), but a
  tick is coarse next to a 50 ms transfer.
- ``CLOCK_PROCESS_CPUTIME_ID`` (``time.process_time``): the same total, summed
  over every thread by the kernel's scheduler at nanosecond resolution. It is
  what ``cpu_s`` columns report; the user/kernel split comes from the ticks.

Both count the whole process: gRPC's and h2's I/O threads included, which is
what a transfer costs the process.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


@dataclass(frozen=True)
class CpuSample:
    """One reading of the process's CPU time, in seconds since it started."""

    total_s: float
    user_s: float | None
    sys_s: float | None

    def since(self, earlier: "CpuSample") -> dict[str, float | None]:
        """CPU seconds spent between ``earlier`` and this sample: ``cpu_s``, ``cpu_user_s``, ``cpu_sys_s``."""

        def delta(now, then):
            return None if now is None or then is None else round(now - then, 6)

        return {
            "cpu_s": delta(self.total_s, earlier.total_s),
            "cpu_user_s": delta(self.user_s, earlier.user_s),
            "cpu_sys_s": delta(self.sys_s, earlier.sys_s),
        }


def _stat_fields(text: str) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` from field 3 (state) on.

    The command name (field 2) is in parentheses and may contain spaces or
    parentheses itself, so fields are counted after its last ``)``.
    """
    return text[text.rindex(")") + 2:].split()


def parse_proc_stat(text: str) -> tuple[float, float]:
    """(user, system) CPU seconds from the text of ``/proc/<pid>/stat``."""
    fields = _stat_fields(text)
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return int(fields[11]) * _TICK_S, int(fields[12]) * _TICK_S


def parse_start_ticks(text: str) -> int:
    """When the process started, in clock ticks since boot (field 22 of ``/proc/<pid>/stat``).

    A pid and its start time name one process for as long as the machine is up: a pid reused by another
    process has another start time.
    """
    return int(_stat_fields(text)[19])


def cpu_now() -> CpuSample:
    """This process's CPU time now (user/system are None where there is no /proc)."""
    total = time.process_time()
    try:
        with open("/proc/self/stat") as stat:
            user, system = parse_proc_stat(stat.read())
    except (OSError, ValueError, IndexError):
        user = system = None
    return CpuSample(total, user, system)


def start_ticks_of(pid: int | str = "self") -> int | None:
    """When a process of this machine started (:func:`parse_start_ticks`); None if it is gone or there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return parse_start_ticks(stat.read())
    except (OSError, ValueError, IndexError):
        return None


"""The local testbed from Python: ``labkit.testbed(...)``, for a notebook's cells or a script.

``labkit.testbed(one_way_delay="100ms")`` brings the testbed up at once (as
``labkit testbed up``) and returns a :class:`Lab`: ``lab.inventory`` (the
path every experiment takes), ``lab.hosts`` (a and b, with their addresses),
``lab.deploy()`` (labkit onto both hosts, offline) and ``lab.down()``. Used as
a context manager it tears the testbed down when the block ends, also when the
block is interrupted (a kernel interrupt is a KeyboardInterrupt)::

    with labkit.testbed(one_way_delay="50ms") as lab:
        lab.deploy()
        run = labkit.sweep(lab.inventory, client="a", server="b", sizes=[1000, 32000])

A notebook that spreads the same steps over cells calls ``lab.down()`` in its
last one; a testbed the process brought up is also taken down when the
process exits (the kernel shuts down or restarts), unless ``keep=True``. A
testbed of that name that was already up is reused and, since this process
did not make it, left up on exit (``lab.down()`` still removes it).
"""

from __future__ import annotations

import atexit
import html
from contextlib import contextmanager
from typing import Callable

from labkit.errors import LabkitError
from labkit.interrupts import interrupts_deferred
from labkit.testbed.lab import LinkConfig, Testbed, validate_name
from labkit.units import parse_duration_with_unit, parse_rate


def link_config(one_way_delay, rate, mtu: int, cc: str, emulator: str):
    """A :class:`labkit.testbed.lab.LinkConfig` from the values a person types ("100ms", "100mbit", None), checked."""
    try:
        delay = float(one_way_delay) if isinstance(one_way_delay, (int, float)) else parse_duration_with_unit(one_way_delay)
        rate_bps = None if rate is None else float(rate) if isinstance(rate, (int, float)) else parse_rate(rate)
    except ValueError as exc:
        raise LabkitError(str(exc)) from None
    link = LinkConfig(one_way_delay_s=delay, rate_bps=rate_bps, mtu=int(mtu), cc=cc, emulator=emulator)
    link.validate()
    return link


class Lab:
    """A testbed brought up from Python; see the module docstring. Made by ``labkit.testbed(...)``."""

    def __init__(self, name: str, link, *, keep: bool = False, log: Callable[[str], None] | None = None):
        self._testbed = Testbed(name, log=log or (lambda message: None))
        self.name = name
        self.keep = keep
        # Only what this process brought up is taken down for it: a testbed already up (from the command line,
        # another notebook) is someone else's.
        self.owned = self._testbed.load_state() is None
        self.state = self._testbed.up(link)
        self._down = False
        if self.owned and not keep:
            atexit.register(self._down_at_exit)

    # -- what a notebook reads ------------------------------------------------------------------------
    @property
    def inventory(self) -> str:
        """The testbed's inventory file (what ``labkit.sweep(lab.inventory, ...)`` and the CLI take)."""
        return str(self.state.inventory)

    @property
    def hosts(self) -> dict:
        """Host name -> :class:`labkit.testbed.lab.HostInfo` (namespace, SSH alias, management and data addresses)."""
        return dict(self.state.hosts)

    @property
    def link(self):
        return self.state.link

    # -- deploy and down --------------------------------------------------------------------------------
    def deploy(self, *, force: bool = False, tools=(), console=None) -> list:
        """Install this labkit on both hosts (offline: the testbed has no route to a package index); raise if one fails.

        A host that already has this build is skipped, so running the cell again costs a few seconds. ``tools``: the
        static tools to send now (None: all); by default none, as each experiment sends those it needs as it starts.
        """
        # Imported here: labkit.deploy builds wheels and reads every installed package's metadata, which a
        # testbed that is never deployed to should not load.
        from labkit.deploy import deploy

        results = deploy(self.inventory, mode="offline", force=force, tools=tools, console=console)
        failed = [result for result in results if result.status == "failed"]
        if failed:
            raise LabkitError(f"deploy failed on {failed[0].host}: {failed[0].detail}")
        return results

    def down(self) -> list[str]:
        """Remove the testbed (namespaces, delay line, sshds, state); what was removed. A second interrupt waits."""
        with interrupts_deferred():
            removed = self._testbed.down(quiet=True)
            self._down = True
            atexit.unregister(self._down_at_exit)
        return removed

    def _down_at_exit(self) -> None:
        if not self._down:
            self._testbed.down(quiet=True)

    def __enter__(self) -> "Lab":
        return self

    def __exit__(self, *exc_info) -> None:
        if self.owned and not self.keep:
            self.down()

    # -- how it shows ----------------------------------------------------------------------------------
    def __repr__(self) -> str:
        state = "down" if self._down else "up"
        return f"<labkit testbed {self.name} ({state}): {self.link.describe()}; inventory {self.inventory}>"

    def _repr_html_(self) -> str:
        e = html.escape
        rows = "".join(
            f"<tr><td>{e(h.name)}</td><td><code>{e(h.netns)}</code></td><td>{e(h.mgmt_address)}</td>"
            f"<td>{e(h.data_address)}</td></tr>" for h in self.state.hosts.values())
        status = "down" if self._down else "up"
        return (f"<p><b>testbed {e(self.name)}</b> ({status}, {e(self.state.emulator)} emulator): "
                f"{e(self.link.describe())}<br>inventory <code>{e(self.inventory)}</code></p>"
                "<table><tr><th>host</th><th>namespace</th><th>SSH (management)</th><th>data address</th></tr>"
                f"{rows}</table>")


def open_testbed(one_way_delay="100ms", *, rate="100mbit", mtu: int = 1460, cc: str = "cubic",
                 emulator: str = "auto", name: str = "lab", keep: bool = False,
                 log: Callable[[str], None] | None = None) -> Lab:
    """Bring up (or reuse) testbed ``name`` with this link and return its :class:`Lab`; see the module docstring.

    ``one_way_delay`` is "100ms", "1.5s" or seconds; ``rate`` "100mbit", "1gbit" or None (no limit); ``keep``
    leaves it up when the process exits. Needs root, like ``labkit testbed up``.
    """
    return Lab(validate_name(name), link_config(one_way_delay, rate, mtu, cc, emulator), keep=keep, log=log)

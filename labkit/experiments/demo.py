"""The main job: the idle-connection experiment of the research brief on a fresh local testbed.

Brings up the testbed (100 ms one way, 100 Mbit/s, MTU 1460, cubic: the cloud
link of the brief), deploys labkit to its two hosts over SSH (no static tools:
the sweep's Python echo needs none, and a run sends those it needs), runs the sweep
from host a to host b with request sizes around the step, 1 s idle gaps and
``tcp_slow_start_after_idle`` at 1 and 0, and tears the testbed down (also on
failure and Ctrl-C). ``labkit demo`` (:mod:`labkit.cli.demo`) then prints the
summary and runs ``labkit report`` on the run.
"""

from __future__ import annotations

from typing import Callable

from labkit.errors import LabkitError
from labkit.experiments import run_command
from labkit.hosts.inventory import load_inventory
from labkit.testbed.lab import LinkConfig, Testbed

TESTBED = "demo"
DEFAULT_SIZES = (1000, 10000, 14000, 16000, 32000, 64000)


def run_demo(*, one_way_delay_s: float = 0.100, sizes=DEFAULT_SIZES, repeats: int = 3, gap_s: float = 1.0,
             runs_dir=None, keep_testbed: bool = False, quiet: bool = False, console=None,
             log: Callable[[str], None] = lambda message: None):
    """Run the idle-step sweep of the brief on a fresh testbed named "demo"; return the run."""
    # Imported here: labkit.deploy builds wheels and reads every installed package's metadata, which the commands
    # that never deploy should not load.
    from labkit.deploy import deploy

    lab = Testbed(TESTBED, log=log)
    link = LinkConfig(one_way_delay_s=one_way_delay_s, rate_bps=100e6, mtu=1460, cc="cubic")
    try:
        log(f"bringing up the local testbed: {link.describe()}")
        state = lab.up(link)
        log("deploying labkit to the testbed hosts (offline: they have no route to a package index)")
        results = deploy(load_inventory(state.inventory), mode="offline", tools=(), console=console)
        failed = [result for result in results if result.status == "failed"]
        if failed:
            raise LabkitError(f"deploy failed on {failed[0].host}: {failed[0].detail}")
        return run_command("sweep", str(state.inventory), client="a", server="b", sizes=list(sizes), gaps_s=[gap_s],
                           repeats=repeats, slow_start_after_idle=[1, 0], cc=["cubic"], name="demo",
                           runs_dir=runs_dir, quiet=quiet)
    finally:
        if not keep_testbed:
            lab.down(quiet=True)

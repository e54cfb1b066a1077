"""The main job: the idle-connection experiment of the research brief on a fresh local testbed.

Brings up the testbed (100 ms one way, 100 Mbit/s, MTU 1460, cubic: the cloud
link of the brief), deploys labkit to its two hosts over SSH, runs `labkit
sweep` from host a to host b with request sizes around the step, 1 s idle gaps
and ``tcp_slow_start_after_idle`` at 1 and 0, prints the median RTT per size
and condition as a multiple of the ping RTT, tears the testbed down, and ends
with ``labkit report`` on the run: the idle-step notebook executed on it, its
figures and an HTML summary in the run's ``report/``.
"""

from __future__ import annotations

import os

import click

from labkit.units import DURATION, size_list

DEFAULT_SIZES = "1000,10000,14000,16000,32000,64000"


@click.command()
@click.option("--one-way-delay", "delay", type=DURATION, default="100ms", show_default=True,
              help="One-way delay of the emulated link.")
@click.option("--sizes", type=size_list(1, 4 * 2**20), default=DEFAULT_SIZES, show_default=True,
              help="Request sizes in bytes; the step is expected just above 10 segments × MSS ≈ 14 KB.")
@click.option("--repeats", type=click.IntRange(1, 1000), default=3, show_default=True, help="Calls per size and condition.")
@click.option("--gap", type=DURATION, default="1s", show_default=True,
              help="Idle time between calls; longer than one RTO (≈ RTT + 200 ms) triggers the cwnd reset.")
@click.option("--runs-dir", type=click.Path(file_okay=False),
              default=lambda: os.environ.get("LABKIT_RUNS", "data/runs"), show_default="data/runs or $LABKIT_RUNS",
              help="Where the run directory is written.")
@click.option("--keep-testbed", is_flag=True, help="Leave the testbed (named 'demo') up afterwards.")
@click.option("--no-report", is_flag=True, help="Do not run `labkit report` on the run afterwards.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
def demo(delay, sizes, repeats, gap, runs_dir, keep_testbed, no_report, quiet):
    """The main job: reproduce the idle-connection step on the local testbed.

    With 1 s between calls, Linux resets an idle connection's congestion
    window to 10 segments when tcp_slow_start_after_idle=1, so requests larger
    than ~14 KB take 2 RTT instead of 1; with the sysctl at 0 they take 1 RTT.
    Ends with `labkit report` on the run (the idle-step notebook, its figures
    and an HTML page in RUN/report/) unless --no-report.
    """
    from rich.console import Console

    from labkit.deploy import deploy
    from labkit.hosts.inventory import load_inventory
    from labkit.idle_step import SweepConfig, run_sweep
    from labkit.sweep_cli import print_summary
    from labkit.testbed.lab import LinkConfig, Testbed

    console = Console(stderr=True)
    lab = Testbed("demo", log=lambda message: console.print(message))
    link = LinkConfig(one_way_delay_s=delay, rate_bps=100e6, mtu=1460, cc="cubic")
    try:
        console.print(f"bringing up the local testbed: {link.describe()}")
        state = lab.up(link)
        console.print("deploying labkit to the testbed hosts (offline: they have no route to a package index)")
        results = deploy(load_inventory(state.inventory), mode="offline", console=console)
        failed = [result for result in results if result.status == "failed"]
        if failed:
            raise click.ClickException(f"deploy failed on {failed[0].host}: {failed[0].detail}")
        config = SweepConfig(
            inventory=str(state.inventory), client="a", server="b", sizes=sizes, gaps_s=[gap], repeats=repeats,
            slow_start_after_idle=[1, 0], cc=["cubic"], name="demo",
        )
        run = run_sweep(config, runs_dir=runs_dir, quiet=quiet)
    finally:
        if not keep_testbed:
            lab.down(quiet=True)
    print_summary(run)
    if not no_report:
        report_run(run, console)


def report_run(run, console) -> bool:
    """``labkit report`` on ``run``: print where the report and figures are; True when it worked.

    The testbed is down and the run complete by now, so a report failure (a
    notebook error, the notebooks extra not installed) is one line on stderr
    and the measured result printed above stands.
    """
    from rich.markup import escape

    from labkit.report import make_report, print_report

    console.print(f"labkit report {escape(str(run.path))}: executing the notebooks of the run", soft_wrap=True)
    try:
        result = make_report(run, on_step=lambda name, state: console.print(
            f"notebook {name}: {'executing' if state == 'start' else 'done'}"))
    except Exception as exc:  # noqa: BLE001 (any failure: one line, the run stays as measured)
        text = getattr(exc, "message", None) or str(exc)
        reason = f"{type(exc).__name__}: {text.strip().splitlines()[0]}" if text.strip() else type(exc).__name__
        console.print(f"[red]report failed[/red] ({escape(reason)}); the run is complete in {escape(str(run.path))}; "
                      f"retry with: labkit report {escape(str(run.path))}", soft_wrap=True, highlight=False)
        return False
    print_report(result)
    return True

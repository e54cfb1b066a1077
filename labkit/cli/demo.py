"""``labkit demo``: the main job (:mod:`labkit.experiments.demo`), its summary, and ``labkit report`` on its run."""

from __future__ import annotations

import os

import click

from labkit.cli.options import stop_cleanly_on_sigterm
from labkit.cli.params import BOUNDED_DURATION, DURATION, size_list
from labkit.cli.sweep import print_summary
from labkit.limits import AT_MOST, MAX_ECHO_PAYLOAD_BYTES
from labkit.experiments.demo import DEFAULT_SIZES, run_demo
from labkit.report import make_report, print_report
from labkit.results import Run


@click.command()
@click.option("--one-way-delay", "delay", type=DURATION, default="100ms", show_default=True,
              help="One-way delay of the emulated link.")
# The sweep's server keeps its default message bound.
@click.option("--sizes", type=size_list(1, MAX_ECHO_PAYLOAD_BYTES), default=",".join(map(str, DEFAULT_SIZES)), show_default=True,
              help="Request sizes in bytes; the step is expected just above 10 segments × MSS ≈ 14 KB.")
@click.option("--repeats", type=click.IntRange(1, 1000), default=3, show_default=True, help="Calls per size and condition.")
@click.option("--gap", type=BOUNDED_DURATION, default="1s", show_default=True,
              help=f"Idle time between calls; longer than one RTO (≈ RTT + 200 ms) triggers the cwnd reset ({AT_MOST}).")
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

    stop_cleanly_on_sigterm()
    console = Console(stderr=True)
    run = Run.of(run_demo(one_way_delay_s=delay, sizes=sizes, repeats=repeats, gap_s=gap, runs_dir=runs_dir,
                          keep_testbed=keep_testbed, quiet=quiet, console=console, log=console.print))
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
    print_report(result, click.echo)
    return True

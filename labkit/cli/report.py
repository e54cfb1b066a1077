"""``labkit report RUN``: the command line of :mod:`labkit.report`."""

from __future__ import annotations

from typing import Any

import click

from labkit.comparison import comparable_with
from labkit.errors import LabkitError
from labkit.report import FIGURE_FORMATS, applicable_notebooks, make_report, parse_formats, print_report
from labkit.store import find_run


@click.command()
@click.argument("run")
@click.option("--formats", default=",".join(FIGURE_FORMATS), show_default=True, metavar="LIST",
              help="Figure formats, comma-separated (png, svg, pdf).")
@click.option("--runs-dir", type=click.Path(file_okay=False), help="Where runs live. [default: $LABKIT_RUNS or data/runs]")
@click.option("--compare-with", metavar="RUNS", help="Each notebook's last section compares RUN with these (`labkit "
              "compare`): a run (with its --runs group), an id or a unique part of one, or runs joined with commas.")
def report(run, formats, runs_dir, compare_with):
    """Execute the notebooks that apply to RUN; executed notebooks, figures and an HTML summary into RUN/report/.

    RUN is a run directory, a run id, or a unique part of one. Which notebooks
    apply follows from the run's experiment (ping-vs-echo and import-ping runs
    get the ping-vs-echo notebook). Prints the files written and each
    notebook's headline numbers.
    """
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    try:
        chosen = parse_formats(formats)
    except LabkitError as exc:
        raise click.BadParameter(exc.message, param_hint="--formats") from None
    found = find_run(run, runs_dir)
    applicable_notebooks(found)  # refuse before showing any progress
    parameters = {"compare_with": comparable_with(found, compare_with, runs_dir)} if compare_with else None
    console = Console(stderr=True)
    if console.is_terminal:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                      transient=True) as progress:
            tasks: dict[str, Any] = {}

            def on_step(name: str, state: str) -> None:
                if state == "start":
                    tasks[name] = progress.add_task(f"notebook {name}: executing", total=1)
                else:
                    progress.update(tasks[name], description=f"notebook {name}: done", completed=1)

            result = make_report(found, chosen, parameters=parameters, on_step=on_step)
    else:
        # Not a terminal (CI, a pipe): one plain line per step instead of a live display.
        result = make_report(found, chosen, parameters=parameters, on_step=lambda name, state: click.echo(
            f"notebook {name}: {'executing' if state == 'start' else 'done'}", err=True))
    print_report(result, click.echo)

"""``labkit compare A B``: the command line of :mod:`labkit.comparison`."""

from __future__ import annotations

from pathlib import Path

import click

from labkit.cli.runs import RUNS_DIR
from labkit.comparison import compare as compare_runs
from labkit.errors import LabkitError

FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


@click.command()
@click.argument("a")
@click.argument("b")
@RUNS_DIR
@click.option("--single", is_flag=True, help="A run of a --runs group stands for itself, not for its group.")
@click.option("--force", is_flag=True, help="Compare although the runs are of another experiment or link delay.")
@click.option("--all", "show_all", is_flag=True, help="Every row of the table, not only the differences called.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, writable=True),
              help="Also write the whole table to this CSV file.")
@click.option("--figure", "figure_path", type=click.Path(dir_okay=False, writable=True),
              help="Also draw the differences to this file (.png, .svg or .pdf).")
@click.option("--distributions", "cdf_path", type=click.Path(dir_okay=False, writable=True),
              help="Also draw both sides' distributions (ECDFs) in the cells that differ most to this file.")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True, help="The bootstrap's seed.")
def compare(a, b, runs_dir, single, force, show_all, csv_path, figure_path, cdf_path, seed):
    """What changed between two runs, and what it did: B against A, cell by cell.

    A and B are each a run (a path, a run id or a unique part of one), standing for its whole --runs group unless
    --single; several runs joined with commas; or "where CONDITION" over the runs view of `labkit runs query`
    (e.g. "where name = 'before'"). First what the runs' manifests say differs (link, each host's
    kernel, sysctls, congestion control, MTU, tools, library versions, git commit, config); then, for every cell
    the two sides share, each statistic the experiment's notebook reports (median, p90 and p99 where there are
    enough calls to bound them, req/s, MB/s): B − A with a 95 % interval and a verdict after Holm's correction
    over the whole table ("within noise": called, but within 1 % of A). With one run a side the calls are the
    units (resampled in blocks, as they are time-ordered); with groups, the runs; one run against a group is judged
    against the group's spread from run to run. Cells on one side only are listed. Runs of different experiments or
    link delays are refused unless --force.
    """
    from rich.console import Console

    for flag, path in (("--figure", figure_path), ("--distributions", cdf_path)):
        if path and Path(path).suffix.lower() not in FIGURE_SUFFIXES:
            raise click.BadParameter(f"{path!r} is not a .png, .svg or .pdf file", param_hint=flag)
    comparison = compare_runs(a, b, runs_dir=runs_dir, force=force, group=not single, seed=seed)
    console = Console()
    print_comparison(console, comparison, show_all)
    try:
        if csv_path and comparison.table is not None:
            comparison.table.to_csv(csv_path, index=False)
            console.print(f"table: {csv_path}")
        if figure_path and comparison.table is not None and not comparison.table.empty:
            comparison.figure().savefig(figure_path, dpi=300)
            console.print(f"figure: {figure_path}")
        if cdf_path and comparison.table is not None and not comparison.table.empty:
            comparison.distributions().savefig(cdf_path, dpi=300)  # load and hop: one line, their rows are cells
            console.print(f"distributions: {cdf_path}")
    except OSError as exc:
        raise LabkitError(f"cannot write {exc.filename or 'the output'}: {exc.strerror or exc}") from None


def print_comparison(console, comparison, show_all: bool) -> None:
    """The sides, what changed, the caveats, the differences (the called ones unless ``show_all``), the cells of one
    side only."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from labkit.analysis.before_after import distinct_parts, verdict_counts

    name_a, name_b = comparison.side_names()
    console.print(f"A: {escape(name_a)}\nB: {escape(name_b)}")
    if comparison.changes.empty:
        console.print("what changed: nothing the manifests record")
    else:
        console.print("what changed:")
        for row in comparison.changes.itertuples():
            console.print(f"  {escape(row.what)}: {escape(row.a)} -> {escape(row.b)}")
    for line in comparison.caveats():
        console.print(f"[yellow]note: {escape(line)}[/yellow]")
    compared = comparison.compared
    if compared is None:
        return
    table = compared.table if show_all else compared.called()
    console.print(f"{verdict_counts(compared.table)}; units: {compared.level}"
                  + ("" if show_all or table.empty else "; the differences called (--all: every row)"))
    common, names = distinct_parts([*compared.table["cell"], *compared.only_a, *compared.only_b])
    if common and not table.empty:
        console.print(f"every cell: {escape(common)}")
    if not table.empty:
        out = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for column in ("cell", "measure", "A", "B", "n", "B − A [95%] verdict"):
            out.add_column(column, justify="right" if column in ("A", "B", "n") else "left")
        for row in table.itertuples():
            out.add_row(escape(names[row.cell]), row.measure, f"{row.a:.4g}", f"{row.b:.4g}", f"{row.n_a}/{row.n_b}",
                        escape(row.text))
        console.print(out)
    for side, cells in (("A", compared.only_a), ("B", compared.only_b)):
        for cell in cells:
            console.print(f"only in {side}: {escape(names[cell])}")

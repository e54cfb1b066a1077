"""The small helpers every notebook uses.

The notebooks live in ``notebooks/`` at the top of the repository, each as a
jupytext ``py:percent`` file (the reviewed source) paired with an output-free
``.ipynb``. :data:`labkit.report.NOTEBOOKS` maps a run's experiment to the
notebooks that apply to it; ``labkit report`` runs them.

Every notebook follows one contract, so that ``labkit report`` and the tests
can drive any of them:

- a cell tagged ``parameters`` with at least ``run_dir`` (a run path or id;
  ``""`` means the notebook's shipped sample run), ``formats`` (comma-separated
  figure formats), ``output_dir`` (where figures go; ``""`` means the run's
  ``figures/``) and ``headline_path`` (the JSON file of headline numbers;
  ``""`` means ``<output_dir>/<notebook>.json``);
- it writes its figures with :func:`labkit.plots.export` into ``output_dir``
  and its headline numbers with :func:`write_headline`: a JSON object whose
  ``headline`` member is a flat mapping of names to numbers or strings (what
  ``labkit report`` prints), next to any detail the notebook wants to keep,
  and whose ``figures`` member lists the figure files it wrote.

:func:`setup` and :meth:`Notebook.finish` are that contract in two calls: the
first cell after the parameters opens the run and the figure writer, the last
writes the headline JSON.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

# The package's own entry points (labkit.sweep(...), labkit.testbed(...)): a notebook's first section runs what it
# shows the reader.
import labkit
from labkit.comparison import compare
from labkit.errors import LabkitError
from labkit.hosts.inventory import load_inventory, open_host
from labkit.importers import import_files
from labkit.inline import readable_figures
from labkit.parsers.ping import log_ping_argv
from labkit.provenance import REPO_ROOT
from labkit.report import parse_formats
from labkit.results import Run, find_run


def default_runs_dir() -> Path:
    """Where a notebook's runs go: ``$LABKIT_RUNS``, else ``data/runs`` of the checkout labkit runs from (a kernel runs
    in ``notebooks/``, where the store's relative default ``data/runs`` would put them), else of the working directory."""
    if os.environ.get("LABKIT_RUNS"):
        return Path(os.environ["LABKIT_RUNS"])
    return (REPO_ROOT if (REPO_ROOT / "data").is_dir() else Path.cwd()) / "data" / "runs"


def samples_dir() -> Path:
    """The shipped sample runs: ``data/samples/`` of the checkout (or of the working directory)."""
    for base in (REPO_ROOT, Path.cwd(), *Path.cwd().parents):
        candidate = base / "data" / "samples"
        if candidate.is_dir():
            return candidate
    raise LabkitError("no data/samples/ directory found beside labkit or above the working directory")


def open_run(run_dir: str | os.PathLike | None, *, sample: str, experiment: str | None = None,
             runs_dir: str | os.PathLike | None = None):
    """The run a notebook analyses: ``run_dir`` (a path, run id or unique part of one), else the shipped sample ``sample``.

    With ``experiment``, a run of another experiment is refused with a message
    saying which it is, instead of failing later on a missing column.
    """
    run = find_run(str(run_dir), runs_dir) if run_dir else Run.open(samples_dir() / sample)
    if experiment is not None and run.manifest.get("experiment") != experiment:
        raise LabkitError(f"{run.path} is a {run.manifest.get('experiment')!r} run, not a {experiment!r} run")
    return run


def _headline_file(headline_path: str | os.PathLike | None, figures_dir: Path, name: str) -> Path:
    """Where a notebook writes its headline JSON: ``headline_path``, else ``<figures_dir>/<name>.json``."""
    return Path(headline_path) if headline_path else Path(figures_dir) / f"{name}.json"


def _figures_dir(run, output_dir: str | os.PathLike | None) -> Path:
    """Where a notebook writes figures: ``output_dir``, else the run's ``figures/`` (created)."""
    path = Path(output_dir) if output_dir else Path(run.path) / "figures"
    path.mkdir(parents=True, exist_ok=True)
    return path


class FigureWriter:
    """Exports each figure a notebook draws (``export(fig, "latency")``), shows it, and closes it.

    Files are named ``<notebook>_<name>.<format>`` in the notebook's output
    directory; :attr:`files` lists them, for the headline JSON's ``figures``.
    Each figure's legends are moved off its data (:func:`labkit.plots.settle_legends`)
    and it is checked (:func:`labkit.plots.layout_problems`): what a
    reviewer would circle is shown as a warning under the figure and kept in
    :attr:`problems`, for the headline JSON's ``figure_problems``.
    """

    def __init__(self, directory: str | os.PathLike, notebook: str, formats: Iterable[str]):
        self.directory = Path(directory)
        self.notebook = notebook
        self.formats = tuple(formats)
        self.files: list[str] = []
        self.problems: dict[str, list[str]] = {}

    def __call__(self, fig, name: str) -> None:
        import matplotlib.pyplot as plt
        from IPython.display import display

        from labkit import plots

        plots.settle_legends(fig)
        with plots.frozen_layout(fig):  # the layout checked is the layout written
            problems = plots.layout_problems(fig, fig.canvas.get_renderer())
            paths = plots.export(fig, self.directory / f"{self.notebook}_{name}", self.formats)
        if problems:
            self.problems[name] = problems
            warnings.warn(f"figure {name}: " + "; ".join(problems), stacklevel=2)
        self.files.extend(path.name for path in paths)
        display(fig)
        plt.close(fig)


def plain(value: Any) -> Any:
    """JSON-ready: numpy scalars to Python, NaN/inf to None, tuples to lists, dict keys to str."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def write_headline(path: str | os.PathLike, data: dict[str, Any]) -> Path:
    """Write a notebook's headline JSON (in the order given, no NaN) atomically; ``data`` must have a flat ``headline`` dict."""
    headline = data.get("headline")
    if not isinstance(headline, dict) or any(isinstance(v, (dict, list)) for v in headline.values()):
        raise ValueError("data['headline'] must be a flat dict of names to numbers or strings")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(plain(data), indent=2, allow_nan=False) + "\n")
    os.replace(tmp, path)
    return path


class Notebook:
    """One notebook's run, figure writer and headline file; made by :func:`setup`.

    ``export(fig, "latency")`` writes a figure (see :class:`FigureWriter`);
    :meth:`finish` writes the headline JSON and returns the headline as a table.
    """

    def __init__(self, name: str, run, figures_dir: Path, formats: Iterable[str], headline_path: Path):
        self.name = name
        self.run = run
        self.figures_dir = figures_dir
        self.export = FigureWriter(figures_dir, name, formats)
        self.headline_file = headline_path
        self.comparison: dict[str, Any] | None = None  # what compare_section found, for the headline JSON
        self.sentences: list[dict[str, str]] = []  # what say() printed, for the headline JSON's ``sentences``

    def say(self, sentences: str | Iterable[str], *, section: str) -> None:
        """Show findings generated from this run (by a function of :mod:`labkit.analysis`) as a list, and keep them
        for the headline JSON: a notebook's markdown states the question and the method, and what the run shows is
        only ever said here, so it is true of the run the notebook opened."""
        from IPython.display import Markdown, display

        # A string is one sentence, or a markdown list of them (one "- " line each).
        lines = re.split(r"\n(?=- )", sentences) if isinstance(sentences, str) else list(sentences)
        lines = [line.strip() for line in lines if line and line.strip()]
        self.sentences.extend({"section": section, "text": line} for line in lines)
        display(Markdown("\n".join(line if line.startswith("- ") else f"- {line}" for line in lines)
                         if lines else "*This run shows none of the findings this section looks for.*"))

    def finish(self, headline: dict[str, Any], *, settings: dict[str, Any] | None = None, **detail: Any):
        """Write the headline JSON (run identity, ``settings``, ``headline``, ``detail``, figures); show where it went."""
        from IPython.display import Markdown, display
        import pandas as pd

        data = {"notebook": self.name, "run_id": self.run.run_id, "run_path": str(self.run.path),
                "experiment": self.run.manifest.get("experiment")}
        if settings is not None:
            data["settings"] = settings
        data.update(headline=headline, **detail)
        if self.comparison is not None:
            data["compare"] = self.comparison
        data["sentences"] = self.sentences
        data.update(figures=self.export.files, figure_problems=self.export.problems)
        write_headline(self.headline_file, data)
        display(Markdown(f"Figures in `{self.figures_dir}`; headline numbers in `{self.headline_file}`."))
        return pd.Series(headline, name="value").to_frame()


def replicate_samples(run) -> tuple[list, Any]:
    """The runs of ``run``'s ``--runs`` group (:meth:`labkit.store.Run.replicates`; just ``run`` when it was made
    alone) and their samples in one frame, each row with its run's number (``replicate``, from 1) and the mean RTT
    of that run's ping baseline before the cells for its host pair (``ping_ms``): runs are measured against their
    own ping, as the link may have moved between them."""
    import pandas as pd

    replicates = run.replicates()
    parts = []
    for number, replicate in enumerate(replicates, 1):
        part = replicate.samples().assign(replicate=number)
        pairs = part[["src", "dst"]].drop_duplicates().itertuples(index=False)
        ping = {(src, dst): (replicate.ping_baseline(src, dst) or {}).get("rtt_avg_ms") for src, dst in pairs}
        part["ping_ms"] = [ping[(src, dst)] for src, dst in zip(part["src"], part["dst"])]
        parts.append(part)
    return replicates, pd.concat(parts, ignore_index=True)


def made_alone(command: str) -> str:
    """What a notebook's *Between runs* section says of a run made without ``--runs``."""
    return (f"This run was made alone (`--runs 1`): nothing in it tells how much another run would differ. "
            f"`labkit {command} --runs 3` makes three, and this section then compares them.")


def ping_baselines(manifest: dict):
    """The ping baselines a run recorded before its cells, one row per host pair and ping (``a-b ping_...``): mean
    and deviation of the RTT (ms), and the replies received."""
    import pandas as pd

    return pd.DataFrame({f"{pair} {key}": {field: values.get(field) for field in ("rtt_avg_ms", "rtt_mdev_ms", "received")}
                         for pair, baseline in manifest.get("baselines", {}).items()
                         for key, values in sorted(baseline.items()) if key.startswith("ping_")}).T


def iperf3_baselines(manifest: dict) -> str:
    """One line on the iperf3 baseline of each host pair: the rate received, the retransmits, the congestion control."""
    return "iperf3 baseline: " + "; ".join(
        f"{pair}: {values.get('received_bps', float('nan')) / 1e6:.1f} Mbit/s received, {values.get('retransmits')} "
        f"retransmits, {values.get('sender_tcp_congestion')}"
        for pair, values in ((pair, baseline.get("iperf3", {})) for pair, baseline in manifest.get("baselines", {}).items())
    ) + "."


def runs_section(command: str, replicates: list, frame, value: str, by, what: str, order=None, statistic=None):
    """A notebook's *Between runs* table: ``what`` (the statistic and its unit) per group of ``by`` in each run of
    ``replicates``, pooled, and the runs' mean with its interval over runs (:func:`labkit.analysis.between_runs` of
    ``frame``, whose ``replicate`` column numbers the runs; each run summarised by ``statistic``, the median unless
    given), shown and returned; for a run made alone, the sentence that says so (:func:`made_alone`) and None."""
    from IPython.display import Markdown, display

    from labkit.analysis import between_runs

    if len(replicates) < 2:
        display(Markdown(made_alone(command)))
        return None
    table = between_runs(frame, value, by) if statistic is None else between_runs(frame, value, by, statistic=statistic)
    if order is not None:
        table = table.reindex(order, level=0) if table.index.nlevels > 1 else table.reindex(order)
    display(Markdown(f"{what} in each of the {len(replicates)} runs ({', '.join(f'`{r.run_id}`' for r in replicates)}),"
                     " pooled, and the runs' mean with its interval over runs (`lo`, `hi`); `n`: values:"), table)
    return table


def series_runs_section(nb: Notebook, this, probes: list[str]) -> dict:
    """The series notebook's *Between runs*: each probe's median per run (:func:`runs_section`) and each split per
    run with its interval over runs (:func:`labkit.analysis.probes.splits_between_runs`; ``this`` is the analysis of
    the run ``nb`` opened), shown, and what they say over the runs (:func:`labkit.analysis.probes.runs_findings`,
    through :meth:`Notebook.say`); returns the headline fields."""
    from IPython.display import Markdown, display

    from labkit.analysis import probes as series_probes

    run = nb.run
    replicates, recorded = replicate_samples(run)
    if runs_section("series", replicates, series_probes.answered(recorded), "rtt_ms", "probe", "Median RTT (ms)", order=probes) is None:
        return {"runs": 1}
    analyses = [this if r.run_id == run.run_id else series_probes.analyse_series(r.samples()) for r in replicates]
    splits = series_probes.splits_between_runs(analyses)
    display(Markdown("The split (B − A, ms) in each run, their mean and its interval over runs:"), splits)
    nb.say(series_probes.runs_findings(analyses, splits), section="Between runs")
    return series_probes.runs_headline(splits)


def upload_runs_section(replicates: list, every_run, conditions: list[str], sizes: tuple[int, int],
                        drop_first_upload: bool) -> dict:
    """The upload notebook's *Between runs*: each cell's MB/s per run (:func:`runs_section`, the uploads the notebook
    keeps, each run's cell summarised as the small-sample rule summarises a cell: the mean of a few uploads,
    :func:`labkit.analysis.inference.rule_statistic`), shown; returns the headline fields (``runs`` and the
    intervals over runs at ``sizes``). ``replicates`` and ``every_run`` are :func:`replicate_samples`' (the uploads
    labelled by :func:`labkit.analysis.upload.label_uploads`), read once for the whole notebook."""
    from labkit.analysis import rule_statistic, upload

    kept = upload.kept_uploads(every_run, drop_first_upload)
    statistic = rule_statistic(int(kept.groupby(["replicate", "condition", "chunk_bytes"]).size().min()))
    table = runs_section("upload", replicates, kept, "mb_per_s", ["condition", "chunk_bytes"],
                         f"{statistic.__name__.capitalize()} MB/s", order=conditions, statistic=statistic)
    return {"runs": len(replicates), **upload.runs_headline(table, sizes)}


def upload_wire_section(uploads, conditions: list[str], sizes: tuple[int, int], export, chunk_axis) -> tuple[Any, dict]:
    """The upload notebook's *What the chunks become*: per condition and chunk size the medians of the frames,
    writes and system calls per MB (:func:`labkit.analysis.upload.wire_table` of ``uploads``, which carry
    :func:`labkit.analysis.upload.with_wire_costs`' columns), shown as a table and a figure (one panel per count,
    ``wire``); returns the table and the headline fields (:func:`labkit.analysis.upload_report.wire_headline`), none
    for a run that counted nothing (a Python side's, or one recorded before labkit counted)."""
    from IPython.display import Markdown, display

    from labkit import plots
    from labkit.analysis import upload, upload_report

    table = upload.wire_table(uploads, conditions)
    counted = [label for label in table.columns if label != "chunks / MB"]
    if not counted:
        display(Markdown("This run counted no frames or system calls: its ends are Python's, or it was recorded "
                         "before labkit counted them."))
        return table, {}
    display(Markdown("Medians per condition and chunk size, per MB of file:"), table)
    with plots.theme():
        columns = min(2, len(counted))  # two panels a row fit the page's width
        fig, axes = plots.figure(-(-len(counted) // columns), columns, squeeze=False)
        for unused in axes.flat[len(counted):]:
            unused.set_visible(False)
        for ax, label in zip(axes.flat, counted):
            plots.lines_with_ci(table.reset_index(), "chunk_bytes", label, by="condition", order=conditions, logx=True,
                                logy=True, ax=ax, xlabel="chunk size", ylabel=f"{label} (median)")
            chunk_axis(ax)
            if ax is not axes.flat[0]:
                ax.get_legend().remove()  # the conditions' colours are named once
    export(fig, "wire")
    return table, upload_report.wire_headline(table, sizes)


def upload_pairs_over_runs_section(every_run, pairs: dict, confidence: float) -> tuple[Any, dict]:
    """The upload notebook's TLS and transport differences over the runs of its group
    (:func:`labkit.analysis.upload.pairs_over_runs` of ``every_run``, their successful uploads, labelled), shown per
    comparison and chunk size; (the table, the headline fields). For a run made alone, the sentence that says so."""
    from IPython.display import Markdown, display

    from labkit.analysis import upload

    if every_run["replicate"].nunique() < 2:
        display(Markdown(made_alone("upload")))
        return None, {}
    table = upload.pairs_over_runs(every_run, pairs, confidence)
    display(Markdown(
        f"Over the {every_run['replicate'].nunique()} runs: B − A in MB/s, each run's cells summarised from their later "
        f"uploads, the runs' mean [{confidence:.0%} Student-t interval over the runs] and the verdict after "
        f"{table['correction'].iloc[0]} over all {len(table)} comparisons:"),
        table.pivot(index="comparison", columns="chunk_bytes", values="cell"))
    return table, upload.runs_pairs_headline(table)


def tuning_runs_section(run, diffs, knobs: dict, *, n_bins: int, bin_s: float, n_resamples: int):
    """The tuning notebook's *Between runs*: every comparison of ``diffs`` (this run's
    :func:`labkit.analysis.tuning.compare_knobs`) made again in each other run of the group, tested over the runs
    (:func:`labkit.analysis.tuning.diffs_between_runs`), shown as a table; returns (that table, or None for a run
    made alone, the runs, the headline fields). What it shows is said by
    :func:`labkit.analysis.tuning_report.runs_findings`."""
    from IPython.display import Markdown, display

    from labkit.analysis import tuning, tuning_report

    replicates = run.replicates()
    if len(replicates) < 2:
        display(Markdown(made_alone("load")))
        return None, replicates, {"runs": 1}
    per_run = []
    for replicate in replicates:
        cells, _ = tuning.ghz_cells(replicate.samples())
        per_run.append(diffs if replicate.run_id == run.run_id else tuning.compare_knobs(
            cells, tuning_calls(replicate, cells, bin_s), knobs, n_bins=n_bins, bin_s=bin_s, n_resamples=n_resamples))
    between = tuning.diffs_between_runs(per_run)
    display(Markdown(f"p50 (ms) in each of the {len(replicates)} runs, their mean and 95 % t interval over the runs, "
                     "and the verdict after Holm's correction over the table:"), tuning_report.runs_table(between, "p50"))
    return between, replicates, tuning.runs_verdict_headline(between)


#: The tuning notebook's message-timed runs (``labkit load --grpc-tool labkit-go``): table -> (shipped sample, its
#: kind in :data:`labkit.analysis.message_load.KINDS`, what the table compares). The second table of a kind is for
#: another link; which link each run was on is read from its manifest, never from here.
FAIR_RUNS = {
    "streams": ("tuning-messages", "streams", "streams and unary calls, at the same messages and calls in flight"),
    "streams_lan": ("tuning-messages-lan", "streams", "streams and unary calls, on a second link"),
    "compression": ("tuning-compression", "compression", "gzip and none, on random and on text payloads"),
    "compression_100m": ("tuning-compression-100m", "compression", "gzip and none, on a second link"),
    "ladder": ("tuning-ladder", "ladder", "the article's cumulative ladder"),
    "ladder_lan": ("tuning-ladder-lan", "ladder", "the article's cumulative ladder, on a second link"),
}


def tuning_beside_its_sample(run) -> bool:
    """Whether ``run`` is the tuning notebook's shipped sample (``tuning-go``, any run of its group): only beside it
    does the notebook read the other shipped runs (the idle-step and message-timed ones) when none is given, so that
    on a run of a user's own it speaks of that run and of the runs the user names, never of the shipped ones."""
    sample = Run.open(samples_dir() / "tuning-go")
    group = (sample.manifest.get("replicate") or {}).get("group")
    return run.path.resolve() == sample.path.resolve() or (
        group is not None and (run.manifest.get("replicate") or {}).get("group") == group)


def tuning_fair_section(fair_runs: dict, confidence: float, export, *, use_samples: bool = True):
    """The tuning notebook's *Every message timed*: for each table of :data:`FAIR_RUNS` (its run from ``fair_runs``,
    else, with ``use_samples``, the shipped sample), the comparisons over the runs of its group
    (:func:`labkit.analysis.message_load.over_runs`, Holm over each table), shown, and the ladders in one figure
    (``ladder``); returns (table name -> (table, where it was measured, its cells), the sentences that say what they
    show, each with its link, its runs and the order its cells ran in, the headline fields)."""
    from IPython.display import Markdown, display

    from labkit.analysis import load, message_load

    tables, lines, ladders, fair = {}, [], {}, {}
    names = [name for name in FAIR_RUNS if fair_runs.get(name) or use_samples]
    if not names:
        display(Markdown("No message-timed runs named (`fair_runs`): this section reads the shipped ones only beside "
                         "the notebook's own shipped sample, so it is left out."))
    for name in names:
        sample, kind, what = FAIR_RUNS[name]
        run = open_run(fair_runs.get(name), sample=sample, experiment="load")
        replicates, every = replicate_samples(run)
        cells = message_load.message_cells(every)
        where = message_load.measured_on(run.manifest, len(replicates))
        if cells.empty:
            display(Markdown(f"`{run.run_id}` has no cell of labkit-go's load (`--grpc-tool labkit-go`): no message was timed."))
            continue
        pairs, sentences = message_load.KINDS[kind]
        table = tables[name] = message_load.over_runs(cells, pairs(cells), confidence)
        fair[name] = (table, where, cells)
        display(Markdown(f"### {what[0].upper() + what[1:]}\n\n`{run.run_id}`, {where}, "
                         f"{int(cells['messages_ok'].sum())} messages timed. B − A, the runs' mean [{confidence:.0%} "
                         f"Student-t interval over the runs], verdict after Holm's correction over the {len(table)} rows:"),
                table.pivot_table(index=["comparison", "where", "A", "B"], columns="metric", values="cell", aggfunc="first",
                                  sort=False))
        order = load.cell_order([(r.manifest, every[every["replicate"] == i]) for i, r in enumerate(replicates, 1)])
        lines.append(f"`{run.run_id}` ({what}, {where}): {order[0].lower() + order[1:]}")
        if kind == "ladder":
            ladders[where] = message_load.ladder_means(cells, confidence)
            lines += message_load.ladder_default_lines(cells, where)
        lines += sentences(table, where)
    for name, (table, where, cells) in fair.items():
        if FAIR_RUNS[name][1] != "ladder":
            continue
        for other, (_, other_where, other_cells) in fair.items():
            if other != name and FAIR_RUNS[other][1] == "streams" and \
                    other_where.rsplit(", ", 1)[0] == where.rsplit(", ", 1)[0]:  # the same link
                compared = message_load.same_load_elsewhere(cells, other_cells, confidence)
                lines += message_load.same_load_lines(compared, where.rsplit(", ", 1)[0], other_cells["run_id"].iat[0],
                                                      cells)
    if ladders:
        export(ladder_figure(ladders), "ladder")
    return fair, lines, message_load.headline(tables)


def ladder_figure(ladders: dict):
    """The tuning article's ladder on each link (a row each; ``ladders``: where it was measured, as
    :func:`labkit.analysis.message_load.measured_on` says it, -> its :func:`~labkit.analysis.message_load.ladder_means`):
    messages per second and a message's p50 per step, the mean over the runs with its Student-t interval, the link
    and n (the runs) in each panel's title."""
    from labkit import plots
    from labkit.analysis import message_load

    with plots.theme():
        fig, axes = plots.figure(len(ladders), 2, height=3.0 * len(ladders), squeeze=False)
        for row, (where, means) in zip(axes, ladders.items()):
            for ax, metric in zip(row, ("messages_per_s", "message_p50_ms")):
                what, unit = message_load.METRICS[metric]
                table = means[means["metric"] == metric]
                plots.bars_with_ci(table, "step", "mean", "lo", "hi", ax=ax, ylabel=f"{what} ({unit})")
                ax.set_title(where, fontsize="small")  # the link and n, the runs each bar is the mean of
    return fig


def idle_keepalive_calls(idle_run) -> tuple[Any, dict[str, float]]:
    """The calls of an idle-step run that isolate keepalive on an idle connection
    (:func:`labkit.analysis.tuning_report.idle_keepalive_calls`), and the ping RTT (ms) of each of its host pairs."""
    from labkit.analysis import idle, tuning_report

    samples, _ = idle.label_conditions(idle_run.samples())
    ping_ms = {f"{src}-{dst}": (idle_run.ping_baseline(src, dst) or {}).get("rtt_avg_ms")
               for src, dst in samples[["src", "dst"]].drop_duplicates().itertuples(index=False)}
    return tuning_report.idle_keepalive_calls(samples, ping_ms), ping_ms


def tuning_calls(run, cells, bin_s: float) -> dict:
    """Every call of each ghz cell of ``run`` (:func:`labkit.analysis.tuning.binned_calls` of its raw report), by
    cell id; a ValueError when a cell's raw calls do not give back its recorded row."""
    from labkit.analysis import tuning, tuning_report

    per_call = {row["cell_id"]: tuning.binned_calls(run.raw_text(tuning.per_request_file(row["raw_files"], "ghz")), row,
                                                    bin_s)
                for _, row in cells.iterrows()}
    if mismatch := tuning_report.window_mismatches(cells, per_call):
        raise ValueError(f"{run.run_id}: the raw calls do not match the recorded rows (cell, calls, requests): {mismatch}")
    return per_call


def hop_cdfs(run, samples):
    """Every hop cell's latency CDF from its raw output (:func:`labkit.analysis.hop.cell_cdf`), averaged per series
    over its repeats (:func:`labkit.analysis.hop.transport_cdf`); None when no cell kept one. ``samples`` are the run's
    rows with their ``series`` (:func:`labkit.analysis.hop.with_series`)."""
    import pandas as pd

    from labkit.analysis import hop

    cdfs = []
    for _, row in samples.iterrows():
        names = [n for n in str(row["raw_files"]).split(",") if n.startswith(row["tool"])]
        if names and (run.raw_dir / names[0]).exists():
            cdfs.append(hop.cell_cdf(row["tool"], run.raw_text(names[0])).assign(series=row["series"],
                                                                                 repeat=row["repeat"]))
    return hop.transport_cdf(pd.concat(cdfs, ignore_index=True)) if cdfs else None


def explain_section(nb: Notebook, by: tuple[str, ...] = ("cell",)) -> dict[str, Any]:
    """The section every experiment's notebook shows of ``labkit explain``: causes per group of calls, the components
    as stacked bars per group, and the call with the most request rounds in time and sequence when the run has its
    packets. ``by`` names what makes a group (:func:`labkit.explain.group_labels`). Returns headline numbers."""
    import pandas as pd
    from IPython.display import Markdown, display

    from labkit import plots
    from labkit.analysis.explain import COMPONENTS, explain_headline, flights, showcase_call
    from labkit.explain import component_table, explain_run, group_labels, layout, run_calls, run_packets

    explained = explain_run(nb.run)
    if explained.empty:
        display(Markdown("No call of this run has a time to explain."))
        return explain_headline(explained)
    wide = component_table(explained)
    wide["group"] = group_labels(explained, by)
    evidence = ", ".join(f"{n} from {e}" for e, n in explained["evidence"].value_counts().items())
    display(Markdown(f"{len(explained)} calls ({evidence}); base RTT {explained['base_rtt_ms'].iat[0]:.2f} ms. "
                     "Calls per cause and group:"))
    display(pd.crosstab(wide["group"], wide["cause"]))
    placed = layout(explained, by)
    wide["panel"], wide["x"] = placed.panel, placed.x
    with plots.theme():
        drawn = plots.components_facets(wide, "panel", "x", [c for c in COMPONENTS if wide[c].abs().max() > 0],
                                        x_order=placed.x_order, x_label=placed.x_label)
        fig = drawn[0].figure
        fig.suptitle("each call's latency, cut into round trips (median per group)"
                     + (f": {placed.common}" if placed.common else ""), x=0.01, ha="left", fontsize="small")
    nb.export(fig, "explain_components")
    call = showcase_call(explained)
    packets = run_packets(nb.run) if call is not None else None
    if call is not None and packets is not None:
        own = packets[(packets["cell_id"] == call["cell_id"]) & (packets["call"] == call["seq"])
                      & (packets["probe"] == call["probe"])].sort_values("t_ns")
        calls = run_calls(nb.run)
        start = int(calls[(calls["cell_id"] == call["cell_id"]) & (calls["seq"] == call["seq"])
                          & (calls["probe"] == call["probe"])]["t_start_utc_ns"].iat[0])
        with plots.theme():
            fig, ax = plots.figure(height=3.8)
            plots.time_sequence(own, start, flights=[(f.start_ns, f.kind) for f in flights(own, call["base_rtt_ms"])],
                                ax=ax)
            ax.set_title(f"call {call['seq']} ({group_labels(explained.loc[[call.name]], by).iat[0]}): "
                         f"{call['rounds']} request rounds, {call['cause']}", loc="left", fontsize="small")
        nb.export(fig, "explain_time_sequence")
    return explain_headline(explained)


def under_load_explain_section(nb: Notebook, samples) -> dict[str, Any]:
    """The latency_under_load notebook's ``labkit explain`` section: the probes sent while the load ran, per cause
    and the direction they queued in, their components stacked per condition, and what they say
    (:func:`labkit.analysis.under_load.explained_findings`, through :meth:`Notebook.say`). Returns headline numbers."""
    import pandas as pd
    from IPython.display import Markdown, display

    from labkit import plots
    from labkit.analysis.explain import COMPONENTS, explain_headline
    from labkit.analysis.under_load import explained_findings, explained_under_load
    from labkit.explain import component_table, explain_run

    explained = explained_under_load(explain_run(nb.run), samples)
    if explained.empty:
        display(Markdown("No probe sent under the load has a time to explain."))
        nb.say([], section="explain")
        return explain_headline(explained)
    loaded = component_table(explained)
    evidence = ", ".join(f"{n} from {e}" for e, n in loaded["evidence"].value_counts().items())
    display(Markdown(f"{len(loaded)} probes under load ({evidence}); base RTT {loaded['base_rtt_ms'].iat[0]:.2f} ms. "
                     "Probes per cause and direction:"))
    display(pd.crosstab(loaded["condition"], [loaded["cause"], loaded["queued"]]))
    fig, ax = plots.figure(height=3.4)
    plots.components_stacked(loaded, "condition", [c for c in COMPONENTS if loaded[c].abs().max() > 0], ax=ax,
                             legend=False)
    ax.set_title("each probe under load, cut into round trips (median per condition)", loc="left", fontsize="small")
    plots.legend_right(ax)
    nb.export(fig, "explain_components")
    nb.say(explained_findings(explained), section="explain")
    return explain_headline(explained)


def compare_section(nb: Notebook, compare_with: str) -> None:
    """The section every experiment notebook ends with: this run (B, with its ``--runs`` group) against
    ``compare_with`` (A: a run, its id or a unique part of one, or runs joined with commas) by :func:`labkit.compare`:
    what changed between them, the caveats, the table, the figure of every difference and, where rows are calls, both
    sides' distributions in the cells that differ most. Empty
    ``compare_with``: one sentence on how to ask for it. Runs labkit refuses to compare (another experiment, another
    link delay) are said in one line, and the notebook goes on. What it finds goes to the headline JSON's
    ``compare``."""
    from IPython.display import Markdown, display

    from labkit.analysis.before_after import verdict_counts

    if not compare_with.strip():
        display(Markdown("Set `compare_with` to another run (an id, a path, or runs joined with commas; "
                         "`labkit report RUN --compare-with OTHER`) to see what changed between them and what it did, "
                         "cell by cell (`labkit compare`)."))
        return
    try:
        comparison = compare(compare_with, nb.run, runs_dir=default_runs_dir())
    except LabkitError as exc:
        display(Markdown(f"No comparison: {exc.message}"))
        nb.comparison = {"refused": exc.message}
        return
    display(comparison)
    compared = comparison.compared
    nb.comparison = {"a": comparison.side_names()[0], "b": comparison.side_names()[1],
                     "changed": comparison.changes["what"].tolist(), "caveats": comparison.caveats(),
                     "family": verdict_counts(compared.table), "units": compared.level,
                     "called": compared.called()[["cell", "measure", "difference", "low", "high", "verdict"]]
                     .to_dict("records")}
    if not compared.table.empty:
        nb.export(comparison.figure(), "compare_differences")
        if compared.kind.per_sample:  # the calls behind the largest differences, side by side
            nb.export(comparison.distributions(), "compare_distributions")


def setup(name: str, run_dir: str, *, sample: str, experiment: str | None, formats: str | Iterable[str],
          output_dir: str | os.PathLike | None = None, headline_path: str | os.PathLike | None = None) -> Notebook:
    """Everything a notebook's parameters decide: the run (see :func:`open_run`), where figures and headline go.

    Also sets pandas' display options every notebook wants (3 decimals, wide tables, long enough listings) and the
    inline figures' resolution (:func:`labkit.inline.readable_figures`).
    """
    import pandas as pd

    run = open_run(run_dir, sample=sample, experiment=experiment)
    figures_dir = _figures_dir(run, output_dir)
    readable_figures()
    pd.set_option("display.precision", 3)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 400)
    return Notebook(name, run, figures_dir, parse_formats(formats), _headline_file(headline_path, figures_dir, name))


# -- run it yourself: the first section of every experiment notebook -----------------------------------------------


@dataclass(frozen=True)
class Yourself:
    """How a notebook's kind of run is made on the local testbed: a link, then one call; the settings of the shipped
    sample the notebook reads otherwise (data/samples/README.md says how each was recorded)."""

    sample: str  # the shipped sample under data/samples/
    link: dict[str, Any]  # labkit.testbed(...) arguments
    command: str  # an experiment's Python entry point (labkit.<command>), or "ping": a ping log, imported (record_ping)
    options: dict[str, Any]

    def code(self, testbed_name: str) -> str:
        """The Python :func:`run_it_yourself` runs, as the notebook shows it."""
        link = ", ".join(f"{key}={value!r}" for key, value in {**self.link, "name": testbed_name}.items())
        call = "labkit.notebooks.record_ping" if self.command == "ping" else f"labkit.{self.command}"
        options = ", ".join(f"{key}={value!r}" for key, value in self.options.items())
        resume = "" if self.command == "ping" else ', resume="auto"'
        deploy = "" if self.command == "ping" else "    lab.deploy()\n"  # ping needs nothing of labkit's on the hosts
        return f"with labkit.testbed({link}) as lab:\n{deploy}    run = {call}(lab.inventory, {options}{resume})"

    def make(self, inventory: str, *, runs_dir=None, **changes):
        """Run it on the hosts of ``inventory``, ``changes`` over the options; the run. An experiment resumes the newest
        interrupted run of the same settings (``resume="auto"``), so the cell run again after an interrupt finishes it."""
        options = {**self.options, **changes}
        if self.command == "ping":
            return record_ping(inventory, runs_dir=runs_dir or default_runs_dir(), **options)
        return getattr(labkit, self.command)(inventory, runs_dir=runs_dir or default_runs_dir(), resume="auto", **options)


_TWO_HOSTS = {"client": "a", "server": "b"}
#: notebook -> how its kind of run is made. Each is the recording of its shipped sample, on a testbed of the same link.
RUN_IT_YOURSELF: dict[str, Yourself] = {
    "idle_step": Yourself("idle-step-cubic", {"one_way_delay": "100ms"}, "sweep", {
        **_TWO_HOSTS, "sizes": [1000, 8000, 12000, 14000, 15000, 16000, 20000, 32000, 64000, 100000], "gaps_s": [1.0],
        "repeats": 10, "slow_start_after_idle": [1, 0], "cc": ["cubic"], "name": "idle-step"}),
    "series": Yourself("series-wan", {"one_way_delay": "100ms"}, "series", {
        **_TWO_HOSTS, "duration_s": 120.0, "interval_s": 1.0, "name": "series"}),
    # The published design: both ends on one host, over its loopback, in grpc-go (labkit-go).
    "upload": Yourself("upload-loopback", {"one_way_delay": "0ms", "rate": None}, "upload", {
        "client": "a", "server": "a", "client_impl": ["go"], "server_impl": ["go"], "file_size": 4 * 2**20,
        "repeats": 50, "tls": "both", "transports": ["grpc", "http2"], "name": "upload"}),
    "load": Yourself("load-small", {"one_way_delay": "5ms", "rate": None}, "load", {
        **_TWO_HOSTS, "transports": ["grpc", "grpc-conns", "http2"], "concurrency": [1, 10, 50], "payload_bytes": [64],
        "connections": [1, 4], "duration_s": 3.0, "warmup_s": 1.0, "name": "load"}),
    "tuning": Yourself("tuning-go", {"one_way_delay": "25ms", "rate": None}, "load", {
        **_TWO_HOSTS, "server_impl": ["go"], "transports": ["grpc", "grpc-conns"], "concurrency": [10, 50],
        "payload_bytes": [64, 131072], "connections": [1, 2, 4, 8], "keepalive_ms": [None, 10000],
        "compression": ["none", "gzip"], "rpc": ["unary", "stream"], "stream_messages": 10,
        "grpc_option": ["static-stream-window+static-conn-window=default,32MiB"], "design": "one-at-a-time",
        "duration_s": 3.0, "warmup_s": 1.0, "name": "tuning"}),
    "hop": Yourself("hop-small", {"one_way_delay": "0ms", "rate": None}, "hop", {
        "load_host": "a", "front": "a", "back": "b", "via": ["direct", "grpc", "http2", "nats"],
        "tool": ["wrk", "labkit-go", "vegeta"], "rate": [500, 2000], "threads": 2, "connections": 10, "duration_s": 10.0, "repeats": 5, "name": "hop"}),
    # One bulk flow each way through a droptail queue of 5 BDP (250 ms at 100 Mbit/s, which the hosts' default TCP
    # buffers can fill) and through CoDel over the same buffer.
    "latency_under_load": Yourself("under-load", {"one_way_delay": "25ms"}, "latency_under_load", {
        **_TWO_HOSTS, "duration_s": 30.0, "interval_s": 0.1, "load_start_s": 5.0, "load_s": 20.0, "ramp_s": 3.0,
        "probes": ["ping", "echo-warm", "tcp-echo"], "queues": ["5bdp", "codel:5bdp"], "loads": ["tcp-up", "tcp-down"],
        "cc": ["cubic"], "name": "under-load"}),
    # The 2016 logs were a ping and a Go echo client a second apart for an hour over a ~12 ms path; labkit records
    # the ping side the same way (a live ping vs echo comparison is `labkit series`, the series notebook's).
    "ping_vs_echo": Yourself("orca-2016", {"one_way_delay": "6ms", "rate": None}, "ping", {
        **_TWO_HOSTS, "count": 300, "interval_s": 0.2, "name": "ping"}),
}


def testbed_name_for(notebook: str) -> str:
    """The testbed a notebook's first section brings up: ``nb-<notebook>`` (so two notebooks never share one)."""
    return f"nb-{notebook.replace('_', '-')}"[:16]


def run_it_yourself(notebook: str, run_it: bool | dict[str, Any], run_dir: str = "") -> str:
    """The first section of every experiment notebook; returns the run the notebook then analyses.

    ``run_it`` false: say which run the notebook reads (``run_dir``, or its shipped sample) and show what
    ``run_it_yourself = True`` would run. True: bring up the local testbed (root), deploy, make the notebook's kind of
    run (:data:`RUN_IT_YOURSELF`), tear the testbed down (also on an interrupt) and return the new run's path. A dict
    is True with changes: options of the call (``{"repeats": 1}``), ``testbed_name``, ``runs_dir``.
    """
    from IPython.display import Markdown, display

    spec = RUN_IT_YOURSELF[notebook]
    changes = dict(run_it) if isinstance(run_it, dict) else {}
    testbed_name = changes.pop("testbed_name", testbed_name_for(notebook))
    runs_dir = changes.pop("runs_dir", None)
    if not run_it:
        reads = f"`{run_dir}`" if run_dir else f"the shipped sample `data/samples/{spec.sample}`"
        display(Markdown(f"This notebook reads {reads}. With `run_it_yourself = True` (as root: it brings up the local "
                         f"testbed) this cell first runs\n\n```python\n{spec.code(testbed_name)}\n```\n\n"
                         "and the notebook reads that run instead."))
        return run_dir
    with labkit.testbed(**spec.link, name=testbed_name) as lab:
        if spec.command != "ping":
            lab.deploy()
        run = spec.make(lab.inventory, runs_dir=runs_dir, **changes)
    display(run)
    return str(run.path)


def record_ping(inventory: str, *, client: str = "a", server: str = "b", count: int = 300, interval_s: float = 0.2,
                name: str = "ping", runs_dir=None):
    """Ping ``server``'s data address from ``client`` and import the log as a run (``import-ping``), as the 2016 ping
    log was: the kind of run the ping_vs_echo notebook reads. The raw log is kept in the run's ``raw/``."""
    hosts = load_inventory(inventory)
    host = open_host(hosts, client)
    try:
        result = host.run(log_ping_argv(hosts.peer_address(server), count, interval_s), timeout=count * interval_s + 30)
    finally:
        host.close()
    if result.returncode not in (0, 1):  # 1: some probes were lost, which the run records
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise LabkitError(f"ping on {client} failed: {detail[-1] if detail else result.returncode}")
    with tempfile.TemporaryDirectory(prefix="labkit-ping-") as tmp:
        log = Path(tmp) / f"ping-{client}-{server}.txt"
        log.write_text(result.stdout)
        return Run.of(import_files([("ping", log)], out=name, runs_dir=runs_dir, src=client, dst=server).run)


def step_figure(run):
    """The quickstart's figure of an idle-step run: each warm call's latency in round trips (over its pair's ping RTT)
    against request size, a colour per condition; a closed figure (a notebook shows it once, as the cell's value)."""
    import matplotlib.pyplot as plt

    from labkit import plots
    from labkit.analysis import idle

    host_sysctls = {name: facts.get("sysctl", {}) for name, facts in run.manifest.get("hosts", {}).items()}
    samples, knobs = idle.label_conditions(run.samples(), host_sysctls)
    ping = {pair: (run.ping_baseline(*pair.split("-")) or {}).get("rtt_avg_ms") for pair in samples["pair"].unique()}
    calls = samples[samples["ok"] & ~samples["cold"]].assign(rtt_multiple=lambda f: f["rtt_ms"] / f["pair"].map(ping))
    with plots.theme():
        fig, ax = plots.figure(height=3.8)
        plots.latency_vs_size(calls, value="rtt_multiple", by="condition", order=list(knobs.index), ax=ax)
        ax.axhline(1, color="0.5", linewidth=0.8, linestyle=":")
        ax.margins(x=0.08)  # the smallest and largest sizes off the frame
        if mss := idle.recorded_mss(calls):  # the initial window: 10 segments of the MSS ss recorded
            ax.axvline(10 * mss, color="tab:red", linewidth=0.8, linestyle="--", label=f"10 × {mss} B = {10 * mss} B")
            ax.legend(fontsize="small")
        ax.set(xlabel="request payload (bytes)", ylabel="latency / ping RTT (round trips)", ylim=(0, None))
        ax.set_title(f"{len(calls)} calls, {calls.groupby(['condition', 'payload_bytes']).size().max()} per size and "
                     f"condition; ping RTT {', '.join(f'{v:.1f} ms' for v in ping.values() if v)}", loc="left",
                     fontsize="small")
    plots.settle_legends(fig)  # off the initial window's line and the calls, wherever they fall
    plt.close(fig)
    return fig

"""Which notebook analyses which experiment, and the small helpers every notebook uses.

The notebooks live in ``notebooks/`` at the top of the repository, each as a
jupytext ``py:percent`` file (the reviewed source) paired with an output-free
``.ipynb``. :data:`NOTEBOOKS` maps a run's experiment to the notebooks that
apply to it; ``labkit report`` runs them. Adding the notebook of a new
experiment is one line there, e.g. ``"idle-step": ("idle_step",),``.

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
from pathlib import Path
from typing import Any, Iterable

from labkit.errors import LabkitError

#: experiment (the run manifest's ``experiment``) -> notebooks (names in notebooks/, without suffix).
NOTEBOOKS: dict[str, tuple[str, ...]] = {
    "ping-vs-echo": ("ping_vs_echo",),
    "import-ping": ("ping_vs_echo",),
    "idle-step": ("idle_step",),
    "series": ("series",),
    "upload": ("upload",),
    "load": ("load",),
    "hop": ("hop",),
}
# The tuning notebook (experiment 5's knobs) reads load runs too, beside whatever else is registered for them.
NOTEBOOKS["load"] = tuple(dict.fromkeys([*NOTEBOOKS.get("load", ()), "tuning"]))

FIGURE_FORMATS = ("png", "svg", "pdf")
_REPO = Path(__file__).resolve().parent.parent


def notebooks_dir() -> Path:
    """Where the notebooks are: ``$LABKIT_NOTEBOOKS``, else ``notebooks/`` beside the labkit package."""
    path = Path(os.environ.get("LABKIT_NOTEBOOKS") or _REPO / "notebooks").resolve()
    if not path.is_dir():
        raise LabkitError(f"no notebooks directory at {path} (set LABKIT_NOTEBOOKS to a checkout's notebooks/)")
    return path


def notebook_source(name: str) -> Path:
    """The reviewed source of notebook ``name``: ``notebooks/<name>.py``."""
    path = notebooks_dir() / f"{name}.py"
    if not path.exists():
        raise LabkitError(f"notebook {name!r} is registered but {path} does not exist")
    return path


def notebooks_for(experiment: str | None) -> tuple[str, ...]:
    """The notebooks that apply to runs of ``experiment`` (empty when none does)."""
    return NOTEBOOKS.get(experiment or "", ())


def samples_dir() -> Path:
    """The shipped sample runs: ``data/samples/`` of the checkout (or of the working directory)."""
    for base in (_REPO, Path.cwd(), *Path.cwd().parents):
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
    from labkit.store import Run, find_run

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


def parse_formats(formats: str | Iterable[str]) -> tuple[str, ...]:
    """``"png,svg"`` or ``["png", "svg"]`` -> ``("png", "svg")``, refusing unknown formats."""
    items = formats.split(",") if isinstance(formats, str) else list(formats)
    chosen = tuple(dict.fromkeys(item.strip().lower() for item in items if item.strip()))
    unknown = [f for f in chosen if f not in FIGURE_FORMATS]
    if unknown or not chosen:
        raise LabkitError(f"figure formats must be some of {','.join(FIGURE_FORMATS)}, not {formats!r}")
    return chosen


class FigureWriter:
    """Exports each figure a notebook draws (``export(fig, "latency")``), shows it, and closes it.

    Files are named ``<notebook>_<name>.<format>`` in the notebook's output
    directory; :attr:`files` lists them, for the headline JSON's ``figures``.
    """

    def __init__(self, directory: str | os.PathLike, notebook: str, formats: Iterable[str]):
        self.directory = Path(directory)
        self.notebook = notebook
        self.formats = tuple(formats)
        self.files: list[str] = []

    def __call__(self, fig, name: str) -> None:
        import matplotlib.pyplot as plt
        from IPython.display import display

        from labkit import plots

        paths = plots.export(fig, self.directory / f"{self.notebook}_{name}", self.formats)
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

    def finish(self, headline: dict[str, Any], *, settings: dict[str, Any] | None = None, **detail: Any):
        """Write the headline JSON (run identity, ``settings``, ``headline``, ``detail``, figures); show where it went."""
        from IPython.display import Markdown, display
        import pandas as pd

        data = {"notebook": self.name, "run_id": self.run.run_id, "run_path": str(self.run.path),
                "experiment": self.run.manifest.get("experiment")}
        if settings is not None:
            data["settings"] = settings
        data.update(headline=headline, **detail, figures=self.export.files)
        write_headline(self.headline_file, data)
        display(Markdown(f"Figures in `{self.figures_dir}`; headline numbers in `{self.headline_file}`."))
        return pd.Series(headline, name="value").to_frame()


def explain_section(nb: Notebook, by: tuple[str, ...] = ("cell",)) -> dict[str, Any]:
    """The section every experiment's notebook shows of ``labkit explain``: causes per group of calls, the components
    as stacked bars per group, and the call with the most request rounds in time and sequence when the run has its
    packets. ``by`` names what makes a group (:func:`labkit.explain.group_labels`). Returns headline numbers."""
    import pandas as pd
    from IPython.display import Markdown, display

    from labkit import plots
    from labkit.analysis.explain import COMPONENTS, explain_headline, flights, showcase_call
    from labkit.explain import component_table, explain_run, group_labels, run_calls, run_packets

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
    with plots.theme():
        fig, ax = plots.figure(figsize=(max(6.4, 0.5 * wide["group"].nunique() + 3), 4.2))
        plots.components_stacked(wide, "group", [c for c in COMPONENTS if wide[c].abs().max() > 0], ax=ax)
        ax.set_title("each call's latency, cut into round trips (median per group)", loc="left", fontsize="small")
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
            fig, ax = plots.figure(figsize=(7, 4.2))
            plots.time_sequence(own, start, flights=[(f.start_ns, f.kind) for f in flights(own, call["base_rtt_ms"])],
                                ax=ax)
            ax.set_title(f"call {call['seq']} ({group_labels(explained.loc[[call.name]], by).iat[0]}): "
                         f"{call['rounds']} request rounds, {call['cause']}", loc="left", fontsize="small")
        nb.export(fig, "explain_time_sequence")
    return explain_headline(explained)


def setup(name: str, run_dir: str, *, sample: str, experiment: str | None, formats: str | Iterable[str],
          output_dir: str | os.PathLike | None = None, headline_path: str | os.PathLike | None = None) -> Notebook:
    """Everything a notebook's parameters decide: the run (see :func:`open_run`), where figures and headline go.

    Also sets pandas' display options every notebook wants (3 decimals, wide tables, long enough listings).
    """
    import pandas as pd

    run = open_run(run_dir, sample=sample, experiment=experiment)
    figures_dir = _figures_dir(run, output_dir)
    pd.set_option("display.precision", 3)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 400)
    return Notebook(name, run, figures_dir, parse_formats(formats), _headline_file(headline_path, figures_dir, name))

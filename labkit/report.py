"""``labkit report RUN``: run the notebooks that apply to a run and collect what they made in ``RUN/report/``.

Which notebooks apply is :data:`NOTEBOOKS` (experiment -> notebooks; adding
the notebook of a new experiment is one line there, e.g.
``"idle-step": ("idle_step",),``; what a notebook must do is in
:mod:`labkit.notebooks`). Each is read from its reviewed ``py:percent`` source with
jupytext, executed with papermill in a kernel on this very Python interpreter
(so no user-wide kernelspec is needed, and none can substitute another
environment), and given the run, the figure formats and where to write. The
report directory then holds::

    report/index.html          the summary: headline numbers and every figure
    report/<notebook>.ipynb    the executed notebook, outputs included
    report/<notebook>.html     the same as a page (nbconvert)
    report/<notebook>.json     the notebook's headline numbers
    report/figures/            the notebook's figures in each format
    report/kernel.log          what the kernels wrote on stderr

The directory is rebuilt on every report.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from labkit.errors import LabkitError
from labkit.provenance import REPO_ROOT
from labkit.testbed.emulator import late_messages

#: experiment (the run manifest's ``experiment``) -> notebooks (names in notebooks/, without suffix).
NOTEBOOKS: dict[str, tuple[str, ...]] = {
    "ping-vs-echo": ("ping_vs_echo",),
    "import-ping": ("ping_vs_echo",),
    "idle-step": ("idle_step",),
    "series": ("series",),
    "upload": ("upload",),
    "load": ("load",),
    "hop": ("hop",),
    "latency-under-load": ("latency_under_load",),
}
# The tuning notebook (experiment 5's knobs) reads load runs too, beside whatever else is registered for them.
NOTEBOOKS["load"] = tuple(dict.fromkeys([*NOTEBOOKS.get("load", ()), "tuning"]))

FIGURE_FORMATS = ("png", "svg", "pdf")


def notebooks_dir() -> Path:
    """Where the notebooks are: ``$LABKIT_NOTEBOOKS``, else ``notebooks/`` beside the labkit package."""
    path = Path(os.environ.get("LABKIT_NOTEBOOKS") or REPO_ROOT / "notebooks").resolve()
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


def parse_formats(formats: str | Iterable[str]) -> tuple[str, ...]:
    """``"png,svg"`` or ``["png", "svg"]`` -> ``("png", "svg")``, refusing unknown formats."""
    items = formats.split(",") if isinstance(formats, str) else list(formats)
    chosen = tuple(dict.fromkeys(item.strip().lower() for item in items if item.strip()))
    unknown = [f for f in chosen if f not in FIGURE_FORMATS]
    if unknown or not chosen:
        raise LabkitError(f"figure formats must be some of {','.join(FIGURE_FORMATS)}, not {formats!r}")
    return chosen


@dataclass
class NotebookReport:
    """What one executed notebook left in the report directory."""

    name: str
    executed: Path
    html: Path
    headline_path: Path
    headline: dict[str, Any]
    figures: list[Path]
    seconds: float


@dataclass
class Report:
    run_path: Path
    directory: Path
    index: Path
    notebooks: list[NotebookReport] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # e.g. the link emulator was late during the run

    def _repr_html_(self) -> str:
        """In a notebook: where the report is, and each notebook's headline numbers and figures."""
        e = html.escape
        parts = [f"<p><b>labkit report</b> <code>{e(str(self.index))}</code></p>"]
        for nb in self.notebooks:
            rows = "".join(f'<tr><td style="text-align:left">{e(key)}</td><td>{e(_fmt(value))}</td></tr>'
                           for key, value in nb.headline.items())
            figures = ", ".join(f"<code>{e(f.name)}</code>" for f in nb.figures) or "none"
            parts.append(f"<details open><summary>notebook <b>{e(nb.name)}</b> ({nb.seconds:.1f} s): "
                         f"{len(nb.headline)} headline numbers, {len(nb.figures)} figures</summary>"
                         f"<p>executed: <code>{e(str(nb.html))}</code>; figures: {figures}</p>"
                         f"<table><tr><th>headline</th><th>value</th></tr>{rows}</table></details>")
        return "".join(parts)


def _kernel_manager_class(log_path: Path):
    """A jupyter KernelManager that starts ipykernel on ``sys.executable``, its stderr into ``log_path``.

    papermill looks kernels up by name in the user's and system's kernelspecs,
    where ``python3`` may well be another interpreter, or missing in CI. The
    notebooks must run in the environment labkit runs in, so the spec is made
    here from ipykernel's own description of this interpreter.
    """
    from jupyter_client.kernelspec import KernelSpec
    from jupyter_client.manager import KernelManager

    class ThisPythonKernelManager(KernelManager):
        @property
        def kernel_spec(self):
            if self._kernel_spec is None:
                from ipykernel.kernelspec import get_kernel_dict

                self._kernel_spec = KernelSpec(resource_dir="", **get_kernel_dict())
            return self._kernel_spec

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            # ipykernel logs start-up notices on stderr; keep them out of the terminal.
            kw["stderr"] = open(log_path, "ab")  # noqa: SIM115 (closed when the process object is)
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return ThisPythonKernelManager


def execute_notebook(name: str, run_path: Path, report_dir: Path, formats: Sequence[str],
                     parameters: dict[str, Any] | None = None, kernel_name: str | None = None) -> NotebookReport:
    """Execute notebook ``name`` on the run at ``run_path``; executed notebook, HTML, JSON and figures into ``report_dir``.

    ``kernel_name``: a registered kernelspec to run it in (``"labkit"``, as JupyterLab would), instead of ipykernel
    on this very interpreter.
    """
    import jupytext
    import nbformat
    import papermill
    from nbconvert import HTMLExporter

    started = time.monotonic()
    # papermill changes the working directory while it executes: only absolute paths from here on.
    run_path, report_dir = Path(run_path).resolve(), Path(report_dir).resolve()
    source = notebook_source(name)
    figures_dir = report_dir / "figures"
    headline_path = report_dir / f"{name}.json"
    executed = report_dir / f"{name}.ipynb"
    params = {
        "run_dir": str(run_path),
        "formats": ",".join(formats),
        "output_dir": str(figures_dir),
        "headline_path": str(headline_path),
        **(parameters or {}),
    }
    notebook = jupytext.read(source)
    try:
        papermill.execute_notebook(
            notebook,
            str(executed),
            parameters=params,
            kernel_name=kernel_name or "python3",
            progress_bar=False,
            log_output=False,
            cwd=str(report_dir),
            start_timeout=120,
            **({} if kernel_name else {"kernel_manager_class": _kernel_manager_class(report_dir / "kernel.log")}),
        )
    except papermill.PapermillExecutionError as exc:
        raise LabkitError(
            f"notebook {name} failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue.splitlines()[0] if exc.evalue else ''} "
            f"(traceback in {executed})"
        ) from None
    if not headline_path.exists():
        raise LabkitError(f"notebook {name} ran but wrote no headline JSON at {headline_path}")
    data = json.loads(headline_path.read_text())
    page, _ = HTMLExporter().from_notebook_node(nbformat.read(executed, as_version=4))
    html_path = report_dir / f"{name}.html"
    html_path.write_text(page, encoding="utf-8")
    return NotebookReport(
        name=name,
        executed=executed,
        html=html_path,
        headline_path=headline_path,
        headline=data.get("headline", {}),
        figures=[figures_dir / f for f in data.get("figures", [])],
        seconds=time.monotonic() - started,
    )


def applicable_notebooks(run) -> tuple[str, ...]:
    """The notebooks for ``run``'s experiment, each checked to exist; a clear error when none applies."""
    experiment = run.manifest.get("experiment")
    names = notebooks_for(experiment)
    if not names:
        known = ", ".join(sorted(NOTEBOOKS))
        raise LabkitError(f"no notebook applies to {run.path.name}: its experiment is {experiment!r} (notebooks exist for: {known})")
    for name in names:
        notebook_source(name)
    return names


def make_report(run, formats: Sequence[str] = FIGURE_FORMATS, *, parameters: dict[str, Any] | None = None,
                on_step: Callable[[str, str], None] | None = None) -> Report:
    """Run every notebook that applies to ``run`` (a :class:`labkit.store.Run`) and write ``RUN/report/``.

    ``on_step(notebook, state)`` is called with ``"start"`` and ``"done"`` around each notebook.
    """
    names = applicable_notebooks(run)
    formats = parse_formats(formats)
    report_dir = Path(run.path).resolve() / "report"
    if report_dir.exists():
        shutil.rmtree(report_dir)
    (report_dir / "figures").mkdir(parents=True)
    report = Report(run_path=Path(run.path).resolve(), directory=report_dir, index=report_dir / "index.html")
    for name in names:
        if on_step:
            on_step(name, "start")
        report.notebooks.append(execute_notebook(name, report.run_path, report_dir, formats, parameters))
        if on_step:
            on_step(name, "done")
    report.warnings = emulator_warnings(run)
    write_index(report, run)
    return report


def write_index(report: Report, run) -> Path:
    """A small self-contained HTML page: the run, each notebook's headline numbers, and its figures."""
    e = html.escape
    manifest = run.manifest
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>labkit report: {e(run.run_id)}</title>",
        "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse}td,th{border-bottom:1px solid #ddd;padding:.2em .8em;text-align:left}"
        "td.num{text-align:right;font-variant-numeric:tabular-nums}img{max-width:100%;border:1px solid #eee}"
        "figure{margin:1.5em 0}.warning{background:#fff3cd;padding:.5em}</style></head><body>",
        f"<h1>Run {e(run.run_id)}</h1>",
        f"<p>Experiment <code>{e(str(manifest.get('experiment')))}</code>, status {e(str(manifest.get('status')))}, "
        f"started {e(str(manifest.get('started_utc')))}. Run directory: <code>{e(str(run.path))}</code>.</p>",
        *(f'<p class="warning"><strong>Warning:</strong> {e(message)}.</p>' for message in emulator_warnings(run)),
    ]
    for nb in report.notebooks:
        parts.append(f"<h2>{e(nb.name)}</h2>")
        parts.append(
            f'<p>Executed notebook: <a href="{e(nb.html.name)}">{e(nb.html.name)}</a> '
            f'(<a href="{e(nb.executed.name)}">ipynb</a>); headline numbers: '
            f'<a href="{e(nb.headline_path.name)}">{e(nb.headline_path.name)}</a>; ran in {nb.seconds:.1f} s.</p>'
        )
        parts.append("<table><tr><th>headline</th><th>value</th></tr>")
        for key, value in nb.headline.items():
            parts.append(f'<tr><td>{e(key)}</td><td class="num">{e(_fmt(value))}</td></tr>')
        parts.append("</table>")
        for stem, files in _group_figures(nb.figures).items():
            shown = next((f for f in files if f.suffix in (".png", ".svg")), None)
            links = " · ".join(f'<a href="figures/{e(f.name)}">{e(f.suffix[1:])}</a>' for f in files)
            image = f'<img src="figures/{e(shown.name)}" alt="{e(stem)}">' if shown else ""
            parts.append(f"<figure>{image}<figcaption>{e(stem)}: {links}</figcaption></figure>")
    parts.append("</body></html>")
    report.index.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return report.index


def emulator_warnings(run) -> list[str]:
    """Why a run's delays may not be the configured ones: the testbed's emulator was late (p99 above
    max(50 µs, 1 % of the one-way delay)) in a window of the run, as its manifest recorded."""
    return late_messages(run.manifest)


def _group_figures(paths: list[Path]) -> dict[str, list[Path]]:
    groups: dict[str, list[Path]] = {}
    for path in paths:
        groups.setdefault(path.stem, []).append(path)
    return groups


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def print_report(result: Report, echo: Callable[[str], None] = print) -> None:
    """Print where a report's files are (relative to the working directory) and each notebook's headline numbers."""
    cwd = Path.cwd()
    for message in result.warnings:
        echo(f"warning: {message}")
    echo(f"report: {_short(result.index, cwd)}")
    for nb in result.notebooks:
        echo(f"notebook {nb.name} ({nb.seconds:.1f} s): {_short(nb.executed, cwd)}, {_short(nb.html, cwd)}")
        echo(f"figures ({len(nb.figures)}): {_short(nb.figures[0].parent, cwd) if nb.figures else '-'}/")
        for figure in nb.figures:
            echo(f"  {figure.name}")
        echo(f"headline numbers ({_short(nb.headline_path, cwd)}):")
        width = max((len(k) for k in nb.headline), default=0)
        for key, value in nb.headline.items():
            echo(f"  {key:<{width}}  {_fmt(value)}")


def _short(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)

"""Draw the README's figure, docs/idle-step.png, from the shipped sample data/samples/idle-step-cubic.

It is the quickstart's figure (labkit.notebooks.step_figure) of the sample the idle_step notebook reads,
exported by labkit.plots.export, so the front page shows what labkit itself draws from data in the repository.
tests/test_docs.py draws it again and compares. Run from the checkout, with its venv:

    .venv/bin/python scripts/docs_figure.py [OUT_DIR]     # OUT_DIR defaults to docs/
"""

from __future__ import annotations

import sys
from pathlib import Path

from labkit import notebooks, plots

SAMPLE = "idle-step-cubic"
STEM = "idle-step"


def draw(out_dir: Path) -> Path:
    """Export the figure as OUT_DIR/idle-step.png; return its path."""
    run = notebooks.open_run("", sample=SAMPLE, experiment="idle-step")
    (path,) = plots.export(notebooks.step_figure(run), out_dir / STEM, ["png"])
    return path


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "docs"
    print(draw(out))

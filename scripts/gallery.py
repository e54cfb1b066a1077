"""The figure gallery, docs/figures.md: every figure the notebooks export from the shipped samples, to review by eye.

Each notebook runs (papermill, as `labkit report` runs it) on the shipped samples that show all of its figures; the
figures are copied into docs/figures/ at a screen's resolution and listed in docs/figures.md with the layout check
each passed (labkit.plots.layout_problems). Look at every one before a release, at the size it would be printed.
Run from the checkout, with its venv (about five minutes on two cores):

    .venv/bin/python scripts/gallery.py [OUT_DIR [NOTEBOOK...]]   # OUT_DIR defaults to docs/; every notebook
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: (notebook, shipped sample): each notebook on the sample it opens by default, and on the one that adds the
#: figures its default does not draw (explained calls need a capture; the knobs run is compared with the cubic runs).
GALLERY = (
    ("ping_vs_echo", "orca-2016"),
    ("series", "series-wan"),
    ("series", "series-lan"),
    ("idle_step", "idle-step-cubic"),
    ("idle_step", "idle-step-knobs"),
    ("tuning", "tuning-go"),
    ("upload", "upload-loopback"),
    ("load", "load-small"),
    ("hop", "hop-small"),
    ("latency_under_load", "under-load"),
)

#: Gallery images are for a screen: 1000 pixels wide at most, in 96 colours (the exported PNGs are 300 dpi, for
#: print); the page's 32 figures then take about 2 MB of the repository rather than 6.
WIDTH_PX = 1000
COLOURS = 96


#: The notebook parameters a gallery run takes beyond its sample.
PARAMETERS = {("idle_step", "idle-step-knobs"): {"compare_with": str(REPO / "data" / "samples" / "idle-step-cubic")}}


def _run_one(notebook: str, sample: str, work: Path) -> tuple[str, str, dict]:
    from labkit.report import execute_notebook

    out = work / f"{notebook}--{sample}"
    out.mkdir(parents=True)
    result = execute_notebook(notebook, REPO / "data" / "samples" / sample, out, ["png"],
                              PARAMETERS.get((notebook, sample)))
    return notebook, sample, json.loads(result.headline_path.read_text())


def build(out_dir: Path, only: set[str] | None = None) -> Path:
    """Run the notebooks (``only`` those named), write OUT_DIR/figures/*.png and OUT_DIR/figures.md; return the
    page's path."""
    from PIL import Image

    images = out_dir / "figures"
    if images.exists():
        shutil.rmtree(images)
    images.mkdir(parents=True)
    lines = ["# Figure gallery", "",
             "Every figure the notebooks export from the shipped samples, drawn by `scripts/gallery.py` (which "
             "regenerates this page). Review each by eye before a release, at the size it would be printed: the "
             "suite checks text and legends by machine (`labkit.plots.layout_problems`), not whether a figure shows "
             "its finding.", ""]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:  # two cores: two kernels at a time
        jobs = [job for job in GALLERY if not only or job[0] in only]
        results = list(pool.map(lambda job: _run_one(*job, Path(tmp)), jobs))
        for notebook, sample, data in results:
            lines += [f"## `{notebook}` on `{sample}`", ""]
            problems = data.get("figure_problems", {})
            for name in data["figures"]:
                stem = name.rsplit(".", 1)[0]
                target = images / f"{sample}--{name}"
                with Image.open(Path(tmp) / f"{notebook}--{sample}" / "figures" / name) as image:
                    image.thumbnail((WIDTH_PX, WIDTH_PX * 4))
                    image.convert("RGB").quantize(COLOURS).save(target, optimize=True)
                check = "; ".join(problems.get(stem.removeprefix(f"{notebook}_"), [])) or "no overlapping text, no legend over data"
                lines += [f"### {stem}", "", f"![{stem} from {sample}](figures/{target.name})", "", f"Layout check: {check}.", ""]
    page = out_dir / "figures.md"
    page.write_text("\n".join(lines))
    return page


if __name__ == "__main__":
    print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs", set(sys.argv[2:]) or None))

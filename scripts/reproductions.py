"""Rewrite the generated block of each docs/reproductions/<notebook>.md: what the notebook says of its shipped sample.

Each notebook runs (papermill, as `labkit report` runs it) on the sample labkit.reproductions.SAMPLES gives it, with
the parameters given there (the suite's, so that the suite's own execution checks the document), and the sentences
it said (its headline JSON's ``sentences``) replace its block. The hand-written text around the block, each
published claim and how labkit tests it, is left as it is. Run from the checkout, with its venv, after changing a
notebook's findings or a sample:

    .venv/bin/python scripts/reproductions.py [NOTEBOOK...]   # every notebook with a page when none is named
"""

from __future__ import annotations

import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from labkit import reproductions  # noqa: E402


def sentences_of(notebook: str, work: Path) -> list[str]:
    from labkit.report import execute_notebook

    sample, parameters = reproductions.SAMPLES[notebook]
    out = work / notebook
    out.mkdir()
    result = execute_notebook(notebook, REPO / "data" / "samples" / sample, out, ["png"], parameters)
    return reproductions.said(json.loads(result.headline_path.read_text()))


def main(only: list[str]) -> None:
    notebooks = only or sorted(path.stem for path in reproductions.PAGES.glob("*.md") if path.stem in reproductions.SAMPLES)
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:  # two cores: two kernels at a time
        said = dict(zip(notebooks, pool.map(lambda name: sentences_of(name, Path(tmp)), notebooks)))
    for notebook, sentences in said.items():
        page = reproductions.page(notebook)
        page.write_text(reproductions.with_sentences(page.read_text(), notebook, sentences))
        print(f"{page.relative_to(REPO)}: {len(sentences)} sentences")


if __name__ == "__main__":
    main(sys.argv[1:])

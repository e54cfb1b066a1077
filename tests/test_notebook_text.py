"""A notebook's markdown states the question and the method; what a run shows is printed by code from the run.

A user opens a notebook on their own run. Any measured figure or finding written into the markdown is about the
shipped sample it was written beside, and reads as if it were about theirs. So the static text may name the sample
the notebook reads by default (once, to say so), the published claims it tests and the method's own constants
(95 % intervals, an initial window of 10 segments), but not what any run measured: no counts of calls out of a
total, no figures with decimals or signs, no sentence about what "the sample" shows.
"""

from __future__ import annotations

import re

import jupytext
import pytest

from conftest import REPO

NOTEBOOKS_DIR = REPO / "notebooks"

# What a measured figure looks like in prose: a count out of a total ("in 27 of 30 calls"), a signed difference
# ("+400 ms", "−0.49 ms"), a decimal with a unit ("2.2 ms", "0.76 of the drain time"), a rate or count with a
# thousands separator ("14,378 msg/s"), an interval ("[29, 58]").
MEASURED = [
    (re.compile(r"\b\d+ of (?:the )?\d+\b"), "a count out of a total"),
    (re.compile(r"(?<![\w.])[+−-]\d[\d.,]*\s?(?:ms|µs|s|%|MB/s|Mbit/s|msg/s|req/s|B|KiB|KB)\b"), "a signed difference"),
    (re.compile(r"(?<![\w.])\d+\.\d+\s?(?:ms|µs|s|%|MB/s|Mbit/s|Gbit/s|msg/s|req/s|RTTs?|round trips?|of)\b"),
     "a decimal figure"),
    (re.compile(r"(?<![\w.])\d{1,3},\d{3}\s?(?:msg/s|req/s|calls|messages|uploads)\b"), "a measured rate or count"),
    (re.compile(r"\[\s?[+−-]?\d[\d.]*,\s?[+−-]?\d[\d.]*\s?\]"), "an interval"),
]
# Sentences about what a sample shows, not what the method is.
ABOUT_A_SAMPLE = re.compile(r"\b(?:in|on|of|from) (?:the|both|each|these|two|three) (?:\w+ ){0,3}samples?\b"
                            r"(?!['’]s? (?:path|directory))", re.IGNORECASE)
# The one place a notebook names what it reads when no run is given.
NAMES_ITS_DEFAULT = re.compile(r"\bBy default it reads\b|\bshipped sample `", re.IGNORECASE)


def markdown_cells(name: str) -> list[str]:
    notebook = jupytext.read(NOTEBOOKS_DIR / f"{name}.py")
    return [cell.source for cell in notebook.cells if cell.cell_type == "markdown"]


def problems(text: str) -> list[str]:
    found = [f"{why}: {match.group(0)!r}" for pattern, why in MEASURED for match in pattern.finditer(text)]
    for sentence in re.split(r"(?<=[.:;!?])\s+", text):
        if ABOUT_A_SAMPLE.search(sentence) and not NAMES_ITS_DEFAULT.search(sentence):
            found.append(f"a sentence about a sample: {' '.join(sentence.split())[:120]!r}")
    return found


# The notebooks rewritten so far: those whose findings are generated, with a reproduction page of their own. The
# others still carry their samples' findings in their text and are rewritten the same way next.
REWRITTEN = sorted(p.stem for p in (REPO / "docs" / "reproductions").glob("*.md") if (NOTEBOOKS_DIR / p.name).with_suffix(".py").exists())


@pytest.mark.parametrize("name", REWRITTEN)
def test_markdown_states_the_question_and_the_method_and_nothing_measured(name):
    found = [problem for text in markdown_cells(name) for problem in problems(text)]
    assert not found, f"notebooks/{name}.py's markdown states what a run measured:\n  " + "\n  ".join(found)


@pytest.mark.parametrize("text, caught", [
    ("64000 B took three round trips in 27 of 30 calls and two in 3", True),
    ("the shipped sample (5 BDP) gives 0.76 of the drain time and CoDel +2.2 ms", True),
    ("in the same run wrk (−0.49 ms [−0.79, −0.19], Holm p 0.011) calls NATS faster", True),
    ("On the 25 ms link of the sample, only streaming moved anything.", True),
    ("ran at 14,378 msg/s against 18,558", True),
    ("Each difference gets a seeded 95 % bootstrap interval; the window starts at 10 segments.", False),
    ("By default it reads the shipped sample `data/samples/tuning-go/`: 25 ms each way.", False),
    ("The claim: messages under 100 KB, connection pools of 2–4× the number of cores.", False),
])
def test_the_check_catches_measured_figures_and_passes_the_method(text, caught):
    assert bool(problems(text)) is caught, problems(text)

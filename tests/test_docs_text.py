"""The prose of README.md, docs/ and data/samples/README.md: it describes what is, and what it says of the shipped
samples is what their files hold.

- No page names an issue of this project ("issue 27", "issue #27", a bare "#27") or reads as the history of the
  code ("had been tried", "used to", "previously", "was changed", "until now", "since issue ..."): the git log keeps
  the history, the pages say what labkit is and does. A reference to another project's issue names that project
  (``grpc/grpc-go#5599``).
- data/samples/README.md's table of samples states, for each sample, what its manifests and journals record: the
  experiment, the runs and their seeds, the order the cells ran in, when, at which labkit commit (and whether the
  work tree was dirty), on which kernel, and how large the shipped files are.

Pure: reads files only (well under a second).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pytest

from conftest import REPO

SAMPLES = REPO / "data" / "samples"
SAMPLES_README = SAMPLES / "README.md"
PAGES = sorted({REPO / "README.md", SAMPLES_README, *(REPO / "docs").rglob("*.md")})

# What names an issue of this project, or tells the pages' history. Each pattern is shown below to catch a sentence
# the docs carried (test_each_pattern_catches_the_sentence_it_was_written_for).
FORBIDDEN = {
    "an issue number": re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE),
    # A bare #27; another project's issue is written with its repository (grpc/grpc-go#5599), and a URL's or a
    # heading's # is not followed by digits and a word boundary alone.
    "a bare #number": re.compile(r"(?<![\w/.#-])#\d+\b"),
    "history": re.compile(
        r"\b(had been tried|(?<!is )(?<!are )(?<!be )(?<!been )used to (?!\w+ing\b)(?=\w)|previously|"
        r"was changed|were changed|until now|since issue|no longer|formerly|of the time\b|"
        r"the sample (?:this one replaced|before this one)|an earlier \w+(?:-only)? sample|"
        r"\(was \d[^)]*\))", re.IGNORECASE),
}
# Sentences the docs carried, one per pattern, that the test must catch.
CAUGHT = {
    "an issue number": "At the limit (issue 27, 2026-11-28): `labkit import` reads a 200 MB ping log",
    "a bare #number": "the second report; #5599 saw 240 ms below 16 KB",
    "history": "Four had been tried before; the emulator used to drop packets; "
               "the user-space delay line over TUN of the time; is what `labkit load` measured until now;"
               " since issue 27, the warm-up call's own time; 16.80 Gbit/s (was 0.83)",
}
# Sentences that describe and must pass.
PASSED = ("grpc-go's reports (grpc/grpc-go#5599, grpc/grpc-go#8436)", "the seed is used to shuffle the cells",
          "a colour #1f77b4", "see [the step](#the-step)", "labkit-go is used to time every message",
          "the first issue a user meets")


def offences(text: str) -> list[tuple[str, str]]:
    """(what, the words) for each phrase of ``text`` that names an issue or tells history."""
    flat = " ".join(text.split())
    return [(what, m.group(0)) for what, pattern in FORBIDDEN.items() for m in pattern.finditer(flat)]


def test_each_pattern_catches_the_sentence_it_was_written_for():
    for what, sentence in CAUGHT.items():
        assert what in {w for w, _ in offences(sentence)}, (what, sentence)
    assert len(offences(CAUGHT["history"])) == 6
    for sentence in PASSED:
        assert offences(sentence) == [], sentence


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_page_names_an_issue_or_tells_history(page):
    found = offences(page.read_text())
    assert not found, f"{page.relative_to(REPO)}: {found}"


# --- data/samples/README.md against the samples' own files -------------------------------------------------------


def groups() -> dict[str, list[Path]]:
    """Each shipped sample: its first run's directory name -> the directories of its runs, in replicate order."""
    by_group: dict[str, list[tuple[int, Path]]] = {}
    for path in sorted(p for p in SAMPLES.iterdir() if (p / "manifest.json").exists()):
        replicate = json.loads((path / "manifest.json").read_text()).get("replicate") or {}
        by_group.setdefault(replicate.get("group", path.name), []).append((replicate.get("index", 1), path))
    return {min(paths)[1].name: [p for _, p in sorted(paths)] for paths in by_group.values()}


def started_cells(path: Path) -> list[str]:
    rows = [json.loads(line) for line in (path / "cells.jsonl").read_text().splitlines() if line.strip()]
    return [row["cell"] for row in rows if row.get("event") == "start" and row.get("attempt", 1) == 1]


def runs_label(indices: list[int]) -> str:
    """"runs 2–3" of the runs whose indices are given (1-based), "runs 1, 3" where they are not consecutive."""
    consecutive = indices == list(range(indices[0], indices[-1] + 1))
    return f"runs {indices[0]}–{indices[-1]}" if consecutive and len(indices) > 1 else \
        f"run{'s' if len(indices) > 1 else ''} {', '.join(map(str, indices))}"


def facts(paths: list[Path]) -> dict[str, str]:
    """What the table states of a sample, as its files give it."""
    manifests = [json.loads((p / "manifest.json").read_text()) for p in paths]
    first = manifests[0]
    experiment = first["experiment"]
    seeds = [m["config"].get("seed") for m in manifests]
    runs = f"{len(paths)}"
    if None not in seeds:
        runs += f" (seeds {seeds[0]}–{seeds[-1]})" if seeds == list(range(seeds[0], seeds[0] + len(seeds))) and \
            len(seeds) > 1 else f" (seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))})"
    orders = [started_cells(p) for p in paths]
    if experiment == "ping-vs-echo":
        order = "imported"
    elif experiment == "idle-step":
        order = {"shuffled": "calls shuffled", "sequential": "sequential"}[first["config"]["order"]]
    elif experiment == "hop":
        order = "shuffled"
    else:
        order = "as planned"
    if len(paths) > 1 and experiment != "idle-step":
        order += ", the same in every run" if all(o == orders[0] for o in orders) else ", differs between runs"
    start = datetime.fromisoformat(first["started_utc"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(manifests[-1]["ended_utc"].replace("Z", "+00:00"))
    recorded = f"{start:%Y-%m-%d %H:%M}–" + (f"{end:%H:%M}" if end.date() == start.date() else f"{end:%m-%d %H:%M}")
    commits = {m["provenance"]["git"]["commit"][:7] for m in manifests}
    dirty = [i for i, m in enumerate(manifests, 1) if m["provenance"]["git"]["dirty"]]
    dirty_label = "no" if not dirty else "yes" if len(dirty) == len(paths) else runs_label(dirty)
    kernels = {h["kernel"] for m in manifests for h in m["hosts"].values() if h.get("kernel")}
    size = sum(f.stat().st_size for p in paths for f in p.rglob("*") if f.is_file() and f.name != ".gitignore")
    return {"experiment": f"`{experiment}`", "runs": runs, "cell order": order, "recorded (UTC)": recorded,
            "labkit": ", ".join(f"`{c}`" for c in sorted(commits)), "dirty": dirty_label,
            "kernel": ", ".join(sorted(kernels)) or "—", "size": f"{size / 1000:.0f} kB"}


def readme_table(text: str) -> dict[str, dict[str, str]]:
    """The README's table of what the samples' files record (its header names the cell order): sample (its first
    run's name) -> column -> cell text."""
    tables = re.findall(r"(?:^\|.*\n)+", text, re.MULTILINE)
    lines = next(t for t in tables if "| cell order |" in t.splitlines()[0]).splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    table = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) != len(header) or not (name := re.match(r"\[`([\w.-]+)/`", cells[0])):
            continue
        table[name.group(1)] = dict(zip(header, cells))
    return table


def test_the_samples_table_states_what_each_samples_files_record():
    table = readme_table(SAMPLES_README.read_text())
    shipped = groups()
    assert set(table) == set(shipped), "the table lists every shipped sample, and only those"
    for name, paths in shipped.items():
        given, stated = facts(paths), table[name]
        size = float(stated.pop("size").removesuffix(" kB"))
        assert abs(size - float(given.pop("size").removesuffix(" kB"))) <= max(2, 0.05 * size), name
        assert {k: stated[k] for k in given} == given, name


def test_the_samples_readme_has_a_section_per_sample_and_links_what_each_shows():
    text = SAMPLES_README.read_text()
    for name in groups():
        assert f"## `{name}/`" in text or re.search(rf"## [^\n]*`{re.escape(name)}/`", text), name
    for target in re.findall(r"\]\((\.\./\.\./docs/reproductions/[\w.]+\.md)\)", text):
        assert (SAMPLES / target).resolve().exists(), target
    # A shuffled hop sample interleaves its transports: not one block of repeats per transport.
    cells = started_cells(SAMPLES / "hop-small")
    vias = [re.search(r"via=(\w+)", cell).group(1) if "via=" in cell else cell.split("|")[1] for cell in cells]
    assert sum(a != b for a, b in zip(vias, vias[1:])) > 2 * len(set(vias))

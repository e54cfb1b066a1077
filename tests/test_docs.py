"""The README and docs/ against what labkit is: the flags the real console script lists, the files of the repository,
and the figure labkit draws from its shipped sample.

A page that documents commands flag by flag (REFERENCE) names every flag their ``--help`` lists; no page names a flag
its command does not have (a flag renamed or removed in the code fails here, not in a reader's shell); every relative
link resolves; the README stays a front page; its one picture is what ``scripts/docs_figure.py`` draws.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest

from conftest import REPO, labkit

README = REPO / "README.md"
# data/samples/README.md: the commands that record each sample again.
PAGES = sorted([README, *(REPO / "docs").glob("*.md"), REPO / "data" / "samples" / "README.md"])
README_MAX_LINES = 200
# The commands each page documents flag by flag: every flag their --help lists is on the page.
REFERENCE = {
    "docs/testbed.md": ("testbed up", "testbed status", "testbed repair", "testbed down"),
    "docs/echo.md": ("echo serve", "echo call"),
    "docs/compare.md": ("compare", "runs query"),
}
FIGURE = REPO / "docs" / "idle-step.png"
SHELL_FENCES = {"", "sh", "bash", "shell", "console"}
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


# --- reading --help and Markdown (pure) ------------------------------------------------------------


def help_section(text: str, title: str) -> list[str]:
    """The lines of a click help section ("Options", "Commands"): from its title to the blank line that ends it."""
    lines = text.splitlines()
    if f"{title}:" not in lines:
        return []
    section = lines[lines.index(f"{title}:") + 1:]
    return section[:section.index("")] if "" in section else section


def help_flags(text: str) -> set[str]:
    """The long flags a --help lists: each option's own column (``--sudo / --no-sudo``), not its wrapped help."""
    declarations = [re.split(r"\s{2,}", line.strip())[0] for line in help_section(text, "Options")
                    if re.match(r"^  -", line)]
    return {flag for declaration in declarations for flag in FLAG.findall(declaration)}


def help_commands(text: str) -> list[str]:
    """The subcommands a group's --help lists (continuation lines of a long description are indented further)."""
    return [m.group(1) for line in help_section(text, "Commands") if (m := re.match(r"^  ([\w-]+)\s", line))]


def code_spans(markdown: str) -> list[str]:
    """What a page shows as code a reader may type: each command of a shell block (continuations joined, comments
    dropped) and each inline code span (across a line break, not across a paragraph), whitespace collapsed."""
    spans, prose, fence, block = [], [], None, []
    for line in markdown.splitlines():
        marker = re.match(r"^\s*```(\w*)", line)
        if marker and fence is None:
            fence, block = marker.group(1), []
        elif marker:
            if fence in SHELL_FENCES:
                joined = re.sub(r"\\\n", " ", "\n".join(block))
                spans += [re.sub(r"\s+#\s.*$", "", command) for command in joined.splitlines()
                          if command.strip() and not command.lstrip().startswith("#")]
            fence = None
        elif fence is not None:
            block.append(line)
        else:
            prose.append(line)
    spans += re.findall(r"`((?:[^`\n]|\n(?!\s*\n))+)`", "\n".join(prose))
    return [" ".join(span.split()) for span in spans]


@dataclass
class Cli:
    """labkit's commands as its --help tells them: each leaf command's flags, each group's subcommands."""

    flags: dict[tuple[str, ...], set[str]]
    groups: dict[tuple[str, ...], list[str]]

    def command_of(self, span: str) -> tuple[str, ...] | None:
        """The command a code span's flags belong to: ``()`` for bare flags (``--jitter '5ms'``), the words of
        ``labkit testbed up ...`` up to its last subcommand, None for anything else (``make lab``, ``ping -D``)."""
        words = span.split()
        if not words or words[0].startswith("--"):
            return ()
        if words[0] != "labkit":
            return None
        path: tuple[str, ...] = ()
        for word in words[1:]:
            if word not in self.groups.get(path, ()):
                break
            path += (word,)
        return path

    def flags_under(self, path: tuple[str, ...]) -> set[str]:
        """Every flag of the command ``path`` or, for a group (``labkit echo ... --impl go``), of its commands."""
        return set().union(*(flags for leaf, flags in self.flags.items() if leaf[:len(path)] == path))


def named_flags(markdown: str, cli: Cli) -> list[tuple[tuple[str, ...], str, str]]:
    """(command, flag, span) for each labkit flag a page names in its code; command ``()`` for a bare flag."""
    named = []
    for span in code_spans(markdown):
        command = cli.command_of(span)
        if command is not None:
            named += [(command, flag, span) for flag in FLAG.findall(span)]
    return named


def relative_links(markdown: str) -> list[str]:
    """The targets of a page's links and images that point into the repository (no scheme, not a bare #anchor)."""
    targets = re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", markdown)
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


# --- the real console script -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli() -> Cli:
    flags, groups, pending = {}, {}, [()]
    while pending:
        path = pending.pop()
        text = labkit(*path, "--help", check=True).stdout
        if subcommands := help_commands(text):
            groups[path] = subcommands
            pending += [path + (name,) for name in subcommands]
        else:
            flags[path] = help_flags(text)
    return Cli(flags, groups)


def test_the_readers_take_click_help_and_markdown_as_they_are_written():
    help_text = """Usage: labkit testbed up [OPTIONS]

Options:
  --name TEXT                     Testbed name.  [default:
                                  labkit]
  --jitter 'TIME [CORR%]'         The scale of --jitter-
                                  distribution.
  --jitter-distribution uniform|normal|pareto|paretonormal|FILE
                                  netem's distributions, see --loss.
  --sudo / --no-sudo              With --login-user: sudo.
  -h, --help                      Show this message and exit.

  Examples:
    labkit testbed up --frobnicate
"""
    assert help_flags(help_text) == {"--name", "--jitter", "--jitter-distribution", "--sudo", "--no-sudo", "--help"}
    assert help_commands("Commands:\n  call   Time calls and\n         print.\n  series-agent  Agent.\n") == [
        "call", "series-agent"]
    page = """Run `labkit testbed up --one-way-delay 50ms` or `make lab LAB_ARGS="--port 8899"`, with
`--seed` and `labkit
echo serve --bind A`.

```sh
labkit testbed up [--rate 1gbit] \\
                  [--mtu 1460]   # --not-a-flag
# labkit --comment
```

```toml
key = "--in-toml"
```
"""
    cli = Cli({("testbed", "up"): {"--one-way-delay", "--rate", "--mtu", "--seed"}, ("echo", "serve"): {"--bind"}},
              {(): ["testbed", "echo"], ("testbed",): ["up"], ("echo",): ["serve"]})
    assert [(c, f) for c, f, _ in named_flags(page, cli)] == [
        (("testbed", "up"), "--rate"), (("testbed", "up"), "--mtu"), (("testbed", "up"), "--one-way-delay"),
        ((), "--seed"), (("echo", "serve"), "--bind")]
    assert relative_links("[a](docs/x.md#part) ![b\nc](docs/y.png) [d](https://e.org/f) [g](#h)") == [
        "docs/x.md#part", "docs/y.png"]


@pytest.mark.parametrize("page", sorted(REFERENCE))
def test_a_reference_page_names_every_flag_its_commands_list(cli, page):
    named = named_flags((REPO / page).read_text(), cli)
    for command in [tuple(words.split()) for words in REFERENCE[page]]:
        listed = cli.flags[command] - {"--help"}
        assert listed, f"labkit {' '.join(command)} --help lists no flags"
        # Named for it: on its own command line, on its group's (labkit echo ... --impl go), or bare.
        on_page = {flag for named_for, flag, _ in named if command[:len(named_for)] == named_for}
        assert listed - on_page == set(), f"{page} leaves out flags of labkit {' '.join(command)}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_flag_a_page_names_is_a_flag_of_its_command(cli, page):
    relative = str(page.relative_to(REPO))
    own = [tuple(command.split()) for command in REFERENCE.get(relative, ())]
    bare = set().union(*(cli.flags[c] for c in own)) if own else cli.flags_under(())
    unknown = [(f"labkit {' '.join(command)}" if command else "bare", flag, span)
               for command, flag, span in named_flags(page.read_text(), cli)
               if flag not in (cli.flags_under(command) if command else bare)]
    assert not unknown, f"{relative} names flags its commands do not have (command, flag, where): {unknown}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves_to_a_file_of_the_repository(page):
    targets = {link: (page.parent / link.split("#")[0]).resolve() for link in relative_links(page.read_text())}
    broken = [link for link, path in targets.items() if not path.is_relative_to(REPO) or not path.exists()]
    assert not broken, f"{page.relative_to(REPO)} links to nothing in the repository: {broken}"


def test_the_readme_is_a_front_page_that_links_every_docs_page():
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    linked = {(REPO / t.split("#")[0]).resolve() for t in relative_links(text)}
    assert {p.resolve() for p in (REPO / "docs").glob("*.md")} - linked == set(), "a docs page no README link reaches"
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text)
    assert images == [str(FIGURE.relative_to(REPO))]


def test_the_readme_figure_is_labkits_own_drawing_of_the_shipped_sample(tmp_path):
    from matplotlib.testing.compare import compare_images

    drawn = subprocess.run([sys.executable, str(REPO / "scripts" / "docs_figure.py"), str(tmp_path)],
                           capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "agg"}, cwd=tmp_path)
    assert drawn.returncode == 0, drawn.stderr
    fresh = tmp_path / FIGURE.name
    assert drawn.stdout.strip() == str(fresh)
    # Pixel for pixel: the same figure of another run of the same experiment (idle-step-cubic-2) differs by an RMS
    # of only 3.3, so no tolerance is safe. After a matplotlib or FreeType upgrade, redraw it:
    # .venv/bin/python scripts/docs_figure.py
    assert compare_images(str(FIGURE), str(fresh), tol=0) is None

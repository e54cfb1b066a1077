"""Where code lives: every command found under its own name, click only in the CLI, short functions.

These read labkit's own source (with ast), so a newcomer's promise of the
layout (ARCHITECTURE.md) cannot silently stop being true.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from labkit.cli import _SUBCOMMANDS

PACKAGE = Path(__file__).resolve().parent.parent / "labkit"
EXPERIMENT_COMMANDS = ("sweep", "series", "upload", "load", "hop")
MAX_FUNCTION_LINES = 80
# The findings functions written with the notebooks' rewrite, over the limit and to be split next (each claim its own
# function); named here so that no other function grows past it meanwhile.
TO_SPLIT = {("analysis/idle.py", "condition_findings"), ("analysis/load.py", "findings"),
            ("analysis/tuning_report.py", "findings"), ("analysis/upload_report.py", "findings"),
            ("analysis/upload_report.py", "beyond_the_original")}


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "proto" and path.name.startswith("echo_pb2"):
            continue  # generated stubs
        yield path, ast.parse(path.read_text(), filename=str(path))


def imported_modules(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("command", EXPERIMENT_COMMANDS)
def test_each_experiment_command_lives_under_its_own_name(command):
    from labkit.experiments import spec

    assert (PACKAGE / "experiments" / f"{command}.py").is_file()
    assert (PACKAGE / "cli" / f"{command}.py").is_file()
    assert _SUBCOMMANDS[command][0] == f"labkit.cli.{command}:{command}"
    assert spec(command).command == command


def test_every_command_module_is_under_cli():
    assert not list(PACKAGE.glob("*_cli.py"))
    for name, (target, _) in _SUBCOMMANDS.items():
        module = target.split(":")[0]
        assert module.startswith("labkit.cli."), (name, target)
        assert (PACKAGE / "cli" / f"{module.rsplit('.', 1)[1]}.py").is_file()


def test_click_is_imported_by_the_cli_only():
    offenders = [str(path.relative_to(PACKAGE)) for path, tree in modules()
                 if path.parent.name != "cli" and "click" in imported_modules(tree)]
    assert offenders == []


def test_nothing_but_the_deploy_command_the_main_job_and_the_python_testbed_imports_deploy():
    # An experiment never deploys behind the user's back (the static tools its plan needs it sends through
    # labkit.hosts.tools, into the deployed labkit's bin/); `lab.deploy()` is `labkit deploy` from Python.
    importers = sorted(str(path.relative_to(PACKAGE)) for path, tree in modules() if "labkit.deploy" in imported_modules(tree))
    # testbed/rootfs.py reads only deploy.cache_home(), where the roots are kept beside the wheels.
    assert importers == ["cli/deploy.py", "experiments/demo.py", "testbed/context.py", "testbed/rootfs.py"]


def test_no_function_is_longer_than_the_limit():
    long = []
    for path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES and (str(path.relative_to(PACKAGE)), node.name) not in TO_SPLIT:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


def test_python_entry_points_are_the_experiment_commands():
    import inspect

    import labkit

    for command in EXPERIMENT_COMMANDS:
        entry = getattr(labkit, command)
        assert entry.__name__ == command and "Run" in entry.__doc__
        assert {"inventory", "runs_dir", "resume", "quiet"} <= set(inspect.signature(entry).parameters)


MAX_NOTEBOOK_CODE_LINES = 955  # 900, the compare section of seven notebooks (two lines each), latency_under_load's 40


def notebook_code_lines(source: str) -> int:
    """Non-blank, non-comment lines of the code cells of a jupytext py:percent notebook (markdown cells do not count)."""
    count, in_markdown = 0, False
    for line in source.splitlines():
        if line.startswith("# %%"):
            in_markdown = "[markdown]" in line
            continue
        stripped = line.strip()
        if not in_markdown and stripped and not stripped.startswith("#"):
            count += 1
    return count


def test_notebooks_show_and_explain_while_labkit_analysis_computes():
    """Rules belong in labkit.analysis, tested; notebooks that grow past this budget are computing again."""
    sources = sorted((PACKAGE.parent / "notebooks").glob("*.py"))
    lines = {path.name: notebook_code_lines(path.read_text()) for path in sources}
    assert len(lines) == 9 and sum(lines.values()) <= MAX_NOTEBOOK_CODE_LINES, lines


def test_the_notebook_line_count_skips_markdown_and_comments():
    source = "# %% [markdown]\n# prose\nnot code\n# %%\nx = 1\n\n# a comment\ny = 2\n# %% tags=['parameters']\nz = 3\n"
    assert notebook_code_lines(source) == 3

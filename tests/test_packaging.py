"""Packaging: one source of dependencies, a fast CLI, and the CI entry point."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

from conftest import REPO, labkit


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].lower().replace("_", "-") for req in requirements}


def test_every_runtime_dependency_is_in_environment_yml():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    runtime = _names(pyproject["project"]["dependencies"])
    listed = set()
    for line in (REPO / "environment.yml").read_text().splitlines():
        match = re.match(r"^\s*-\s+([A-Za-z0-9_.-]+)\s*(?:[<>=].*)?$", line)
        if match:
            listed.add(match.group(1).lower().replace("_", "-"))
    assert runtime, "pyproject lists no runtime dependencies"
    assert runtime - listed == set(), f"missing from environment.yml: {sorted(runtime - listed)}"


def test_the_notebooks_extra_pins_are_the_same_in_environment_yml():
    """JupyterLab, jupytext and ipywidgets: a conda user gets the versions the browser test drives."""
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["notebooks"]
    pinned = dict(req.split("==") for req in extra if "==" in req)
    assert {"jupyterlab", "jupytext", "ipywidgets"} <= set(pinned)
    yml = (REPO / "environment.yml").read_text()
    for name, version in pinned.items():
        assert re.search(rf"^\s*-\s+{re.escape(name)}==({re.escape(version)})\s*$", yml, flags=re.MULTILINE), name


def test_version_and_help_do_not_import_the_heavy_stack():
    # `labkit --version` must stay fast: grpc, pandas, paramiko load only when a
    # subcommand needs them.
    code = (
        "import sys; from labkit.cli import cli; "
        "cli.main(['--help'], standalone_mode=False); "
        "heavy = [m for m in ('grpc', 'pandas', 'paramiko', 'matplotlib', 'scipy') if m in sys.modules]; "
        "print('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out


def test_console_script_reports_the_package_version():
    from labkit import __version__

    proc = labkit("--version", check=True)
    assert proc.stdout.strip() == f"labkit, version {__version__}"


def test_every_subcommand_explains_itself():
    top = labkit("--help", check=True).stdout
    commands = re.findall(r"^  (\w+)\s", top.split("Commands:")[1], flags=re.MULTILINE)
    assert {"echo", "testbed", "demo"} <= set(commands)
    for command in commands:
        proc = labkit(command, "--help")
        assert proc.returncode == 0, proc.stderr
        assert "Usage: labkit " + command in proc.stdout


def test_unknown_command_is_one_line_exit_2():
    proc = labkit("frobnicate")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["labkit: error: No such command 'frobnicate'. (see 'labkit --help')"]


def test_ci_runs_the_readme_test_command_with_the_testbed_required():
    ci = (REPO / ".ci" / "run").read_text()
    readme = (REPO / "README.md").read_text()
    assert "LABKIT_REQUIRE_TESTBED=1" in ci
    assert "make test" in ci and "make test" in readme
    assert "make demo" in readme

"""The quickstart notebook as a person runs it: `make lab`'s JupyterLab, Debian's chromium, the Run menu, the testbed.

JupyterLab is started the way `make lab` starts it (scripts/lab.sh), on loopback with a random port and the token it
prints, and the Jupyter directories of the test session, where the README's set-up registered the kernel named labkit
(the ``jupyter_dirs`` fixture runs scripts/bootstrap.sh, which also installs chromium and chromium-driver). Selenium drives
Debian's chromium through Debian's chromedriver: it opens a copy of notebooks/quickstart.ipynb (its parameters set
to this test's testbed name and runs directory, as papermill sets them), clicks Run All Cells, interrupts the kernel
in the sweep, runs again from the sweep's cell to the last, and reads the page and the saved notebook. A screenshot of the step goes into the test's output.
"""

from __future__ import annotations

import base64
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from conftest import REPO, leftover_processes, own_testbed_name, require_testbed, wait_for

pytestmark = pytest.mark.testbed

QUICKSTART = REPO / "notebooks" / "quickstart.ipynb"
SSAI = "/proc/sys/net/ipv4/tcp_slow_start_after_idle"
# What the brief's machine needs for chromium as root with no network: no sandbox (root), no GPU, and none of the
# connections chromium makes by itself (refused here, many at a time), in a profile of its own.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1400,1050")
LABKIT_PROCESSES = ("echo serve", "echo call", "labkit-go", "iperf3")
#: Run beside the browser: waits for SIGTERM, which the kernel sends it when the test process dies (however it dies,
#: SIGKILL too, when no teardown runs), then kills the browser's process group and removes its profile. chromedriver
#: alone is no guard: sent SIGTERM it leaves chromium running (a killed suite run left both behind for good).
GROUP_WATCHER = """
import os, shutil, signal, sys
group, parent, profile = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if os.getppid() == parent:  # else the test process is already gone
    signal.sigwait({signal.SIGTERM})  # blocked since before exec, so it waits here instead of ending the watcher
os.killpg(group, signal.SIGKILL)
shutil.rmtree(profile, ignore_errors=True)
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def jupyterlab(jupyter_dirs, tmp_path_factory):
    """`make lab`'s JupyterLab (scripts/lab.sh) on a directory of this module's own: (base URL, token, directory)."""
    require_testbed()
    root = tmp_path_factory.mktemp("lab")
    port = free_port()
    # No display, and no MPLBACKEND: tests/test_plots.py sets it to agg for the whole test process (every xdist
    # worker imports it), and a kernel started with it shows a returned figure as "<Figure ...>", not as a PNG.
    env = {key: value for key, value in os.environ.items() if key not in ("DISPLAY", "WAYLAND_DISPLAY", "MPLBACKEND")}
    log_path = root.parent / f"{root.name}-jupyterlab.log"
    with open(log_path, "w") as log:
        lab = subprocess.Popen([str(REPO / "scripts" / "lab.sh"), f"--port={port}", "--ServerApp.port_retries=0"],
                               env={**env, **jupyter_dirs, "LABKIT_LAB_ROOT": str(root)}, stdout=log,
                               stderr=subprocess.STDOUT)
    try:
        # What a person copies from the terminal: the URL with the token JupyterLab made up for this server.
        printed = re.compile(rf"http://127\.0\.0\.1:{port}/lab\?token=([0-9a-f]{{32,}})")
        found = wait_for(lambda: printed.search(log_path.read_text()) or lab.poll() is not None, 60,
                         "JupyterLab to print its URL")
        assert lab.poll() is None, log_path.read_text()
        yield f"http://127.0.0.1:{port}", found.group(1), root
    finally:
        lab.send_signal(signal.SIGTERM)  # JupyterLab shuts its kernels down on SIGTERM
        try:
            lab.wait(30)
        except subprocess.TimeoutExpired:
            lab.kill()
            lab.wait()


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, headless, through Debian's chromedriver, with a fresh profile."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="labkit-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    # chromedriver in a session of its own: chromium and its helpers share its process group, which the watcher kills.
    service = Service(shutil.which("chromedriver") or "/usr/bin/chromedriver", popen_kw={"start_new_session": True})
    driver = webdriver.Chrome(options=options, service=service)
    watcher = subprocess.Popen(
        [sys.executable, "-c", GROUP_WATCHER, str(service.process.pid), str(os.getpid()), profile],
        preexec_fn=_signalled_when_parent_dies)
    try:
        yield driver
    finally:
        driver.quit()
        watcher.kill()
        watcher.wait()
        shutil.rmtree(profile, ignore_errors=True)


def _signalled_when_parent_dies() -> None:
    """Popen ``preexec_fn``: SIGTERM blocked (for the watcher's sigwait) and sent to the child when its parent dies."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


# --- the page -------------------------------------------------------------------------------------------------------


class Notebook:
    """The notebook open in the browser, read and driven as a person would: menus, prompts, outputs."""

    def __init__(self, driver, path: Path):
        self.driver, self.path = driver, path

    def find(self, css: str) -> list:
        """Elements of the page (menus, dialogs) matching ``css``."""
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def within(self, css: str) -> list:
        """Elements matching ``css`` in this notebook's panel (the tab in front; other tabs stay in the page)."""
        return self.find(f".jp-NotebookPanel:not(.lm-mod-hidden) {css}")

    def text(self, element) -> str:
        # textContent: cells out of view are in the page but not painted, so Selenium's .text would be empty.
        return element.get_attribute("textContent") or ""

    def menu(self, top: str, item: str) -> None:
        """Click ``top`` in the menu bar, then ``item`` in its menu."""
        wait_for(lambda: [e for e in self.find(".lm-MenuBar-itemLabel") if self.text(e) == top], 10, f"menu {top}")[0].click()
        wait_for(lambda: [e for e in self.find(".lm-Menu-itemLabel") if self.text(e) == item], 10, f"{top} → {item}")[0].click()

    def status(self) -> str:
        indicators = self.within(".jp-Notebook-ExecutionIndicator")
        return indicators[0].get_attribute("data-status") if indicators else ""

    def code_cells(self) -> list:
        return self.within(".jp-Notebook .jp-CodeCell")

    def cell_with(self, code: str):
        return next(c for c in self.code_cells() if code in self.text(c.find_element("css selector", ".jp-InputArea-editor")))

    def prompts(self) -> list[str]:
        return [self.text(p).strip() for p in self.within(".jp-Notebook .jp-CodeCell .jp-InputPrompt")]

    def wait_until_done(self, timeout: float, last: bool = True) -> None:
        """The kernel idle and no cell queued or running ([*]); with ``last``, the last cell has run too."""
        def done():
            prompts = self.prompts()
            return (self.status() == "idle" and prompts and not any("*" in p for p in prompts)
                    and (not last or any(ch.isdigit() for ch in prompts[-1])))

        wait_for(done, timeout, "the cells to finish")

    def run_from(self, code: str) -> None:
        """Select the cell whose code contains ``code`` (a click on its prompt) and run it and every cell below it from
        the Run menu."""
        self.cell_with(code).find_element("css selector", ".jp-InputPrompt").click()
        self.menu("Run", "Run Selected Cell and All Below")

    def saved(self) -> nbformat.NotebookNode:
        """Save from the File menu and read the file: what the cells produced, as JupyterLab recorded it."""
        before = self.path.stat().st_mtime_ns
        self.menu("File", "Save Notebook")
        wait_for(lambda: self.path.stat().st_mtime_ns != before, 30, "the notebook to be saved")
        time.sleep(0.3)  # the file is replaced as a whole; let the rename land
        return nbformat.read(self.path, as_version=4)

    def screenshot(self, element, path: Path) -> Path:
        """The page with ``element`` at the top and the file browser folded away (the notebook at full width)."""
        for tab in self.find(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current"):
            tab.click()
        # The notebook scrolls inside its panel: the element at the top, with a little of what comes before it.
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'start'});"
                                   "arguments[0].closest('.jp-WindowedPanel-outer').scrollBy(0, -40);", element)
        time.sleep(0.5)
        self.driver.save_screenshot(str(path))
        return path


def open_quickstart(browser, jupyterlab, name: str, runs_dir: Path) -> Notebook:
    """A copy of the quickstart (parameters: this test's testbed and runs directory) opened in JupyterLab."""
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    base, token, root = jupyterlab
    notebook = load_notebook_node(str(QUICKSTART))
    notebook.metadata.pop("jupytext", None)  # a copy, not paired with a .py of its own
    notebook = parameterize_notebook(notebook, {"testbed_name": own_testbed_name("quick"), "runs_dir": str(runs_dir)})
    path = root / f"{name}.ipynb"
    nbformat.write(notebook, path)
    browser.get(f"{base}/lab/tree/{path.name}?reset&token={token}")  # reset: only this notebook open
    page = Notebook(browser, path)
    from labkit import __version__

    def kernel_name() -> str:
        return " ".join(page.text(e).strip() for e in page.within(".jp-Toolbar-kernelName")).strip()

    # The kernel the notebook asks for by name, as the set-up registered it. Until its kernel has started, the
    # toolbar says "Kernel" or "No Kernel" and the status indicator already says idle: on a busy machine the first
    # look came before the kernel (JupyterLab's log: "Kernel started" a second after the page had loaded).
    try:
        wait_for(lambda: len(page.code_cells()) >= 8 and kernel_name() == f"labkit {__version__}"
                 and page.status() == "idle", 120, "the notebook and its kernel")
    except AssertionError as exc:
        log = (root.parent / f"{root.name}-jupyterlab.log").read_text().splitlines()
        raise AssertionError(f"{exc}; the toolbar names the kernel {kernel_name()!r}; JupyterLab's log ends:\n"
                             + "\n".join(log[-30:])) from None
    return page


@pytest.fixture(scope="module")
def deployed_here():
    """The quickstart deploys into ~/.labkit/<testbed>-a and -b (the testbed's inventory says so); gone after the module."""
    yield
    for host in ("a", "b"):
        shutil.rmtree(Path.home() / ".labkit" / f"{own_testbed_name('quick')}-{host}", ignore_errors=True)


@pytest.fixture
def quick_testbed(deployed_here):
    """The quickstart's testbed name in these tests; whatever a failed notebook left up goes afterwards."""
    from labkit.testbed.lab import Testbed

    name = own_testbed_name("quick")
    yield name
    Testbed(name, log=lambda message: None).down(quiet=True)


def namespaces(name: str) -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return sorted(line.split()[0] for line in listed.splitlines() if line.startswith(f"labkit-{name}-"))


def ssai(name: str, host: str) -> str:
    return subprocess.run(["ip", "netns", "exec", f"labkit-{name}-{host}", "cat", SSAI], capture_output=True, text=True,
                          check=True).stdout.strip()


def errors(notebook: nbformat.NotebookNode) -> list[str]:
    return [f"{o.ename}: {o.evalue}" for c in notebook.cells for o in c.get("outputs", []) if o.output_type == "error"]


def png_width(data_url: str) -> int:
    """The width in a PNG data URL's IHDR chunk (bytes 16-19 of the file)."""
    head = base64.b64decode(data_url.split(",", 1)[1][:32])
    assert head.startswith(b"\x89PNG\r\n\x1a\n"), head[:8]
    return int.from_bytes(head[16:20], "big")


def assert_the_step_is_shown(page: Notebook, run_path: Path, executed: nbformat.NotebookNode) -> None:
    """The step table (the sweep's own, styled) and the figure of every call are in the page; the run shows the step."""
    from labkit.results import Run

    tables = [t for t in page.within(".jp-OutputArea-output table")
              if page.text(t).strip().startswith("median RTT of warm calls ÷ ping RTT")]
    assert len(tables) == 1 and "×" in page.text(tables[0])
    assert "ssai=1" in page.text(tables[0]) and "ssai=0" in page.text(tables[0])
    # What JupyterLab recorded for the figure's cell: one PNG of the figure's width.
    (figure_cell,) = [c for c in executed.cells if "notebooks.step_figure(run)" in c.source]
    pngs = [o["data"]["image/png"] for o in figure_cell.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(pngs) == 1 and png_width("data:image/png;base64," + pngs[0]) >= 700
    # And the page shows it: the image element holds the PNG as a data URL (its width read from the PNG's own
    # header: a headless browser may never decode an image out of view, so naturalWidth would say nothing). The cell
    # is brought into view at each look, in case the page moved meanwhile.
    cell = page.cell_with("notebooks.step_figure(run)")

    def shown():
        page.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", cell)
        return [i for i in cell.find_elements("css selector", ".jp-OutputArea-output img")
                if (i.get_attribute("src") or "").startswith("data:image/png;base64,")]

    try:
        images = wait_for(shown, 120, "the figure to show")
    except AssertionError:
        outputs = [o.get_attribute("outerHTML")[:300] for o in cell.find_elements("css selector", ".jp-OutputArea-output")]
        raise AssertionError(f"the figure's cell shows no PNG; its outputs: {outputs}") from None
    assert len(images) == 1 and png_width(images[0].get_attribute("src")) >= 700
    steps = Run.open(run_path).summary()
    at_16000 = steps[steps["payload_bytes"] == 16000].set_index("slow_start_after_idle")["rtt_multiple"]
    # Two round trips after idle with the reset: a loaded machine cannot take one away. That the sysctl's 0 gives one
    # round trip is tests/test_link_physics.py's to show: in one run beside two CPU hogs both 16000 B calls at 0 took
    # two as well (with a window of 32 segments), which says nothing of what the page shows.
    assert at_16000[1] >= 1.6, at_16000


def test_quickstart_interrupted_in_its_sweep_stops_everything_and_run_again_from_there_shows_the_step(
        browser, jupyterlab, quick_testbed, tmp_path):
    """A person's whole session with the quickstart: Run All Cells, Interrupt Kernel in the middle of the sweep, then
    Run Selected Cell and All Below from the sweep's cell, which resumes the run and goes on to the last cell. One
    session for both paths: each of them brought up the testbed, deployed and swept, the suite's longest minutes."""
    from labkit.store import Run

    runs = tmp_path / "runs"
    page = open_quickstart(browser, jupyterlab, "quickstart", runs)
    page.menu("Run", "Run All Cells")
    # Interrupt in the middle of the first cell of the sweep, whose sysctl (0) is not the host's own (1).
    run_path = wait_for(lambda: next(iter(runs.glob("*-quickstart")), None), 120, "the sweep's run directory")
    wait_for(lambda: (run_path / "samples.jsonl").exists() and (run_path / "samples.jsonl").read_text().count("\n") >= 1,
             120, "the first call of the sweep")
    assert ssai(quick_testbed, "a") == ssai(quick_testbed, "b") == "0"
    page.menu("Kernel", "Interrupt Kernel")
    page.wait_until_done(timeout=60, last=False)

    # As Ctrl-C on the command line: every process stopped, the sysctl back, the rows kept, the run resumable.
    assert leftover_processes(_state(quick_testbed), LABKIT_PROCESSES) == []
    assert ssai(quick_testbed, "a") == ssai(quick_testbed, "b") == "1"
    run = Run.open(run_path)
    kept = len(run.journal_rows())
    assert run.status == "interrupted" and kept >= 1
    sweep_cell = page.text(page.cell_with("labkit.sweep("))
    assert "RunInterrupted" in sweep_cell and "resume='auto'" in sweep_cell
    assert namespaces(quick_testbed) != []  # the cells below the sweep did not run

    # From the sweep's cell to the end: the same run is finished, nothing measured twice, the step shown, the report
    # written, and the last cell takes the testbed down.
    page.run_from("labkit.sweep(")
    page.wait_until_done(timeout=240)
    assert "resuming " in page.text(page.cell_with("labkit.sweep("))
    executed = page.saved()
    # The interrupted cell's output is gone with its rerun.
    assert errors(executed) == [] and not any("Traceback" in page.text(o) for o in page.within(".jp-OutputArea-output"))
    run = Run.open(run_path)
    assert [p.name for p in runs.iterdir()] == [run_path.name] and run.status == "complete"
    assert len(run.manifest["resumed_utc"]) == 1 and len(run.journal_rows()) >= kept
    samples = run.samples()
    assert len(samples) == 8 and (samples.groupby("cell_id").size() == 4).all()
    assert_the_step_is_shown(page, run_path, executed)
    report = page.text(page.cell_with("run.report("))
    assert "labkit report" in report and "notebook idle_step" in report and "step.window_bytes" in report
    assert leftover_processes_anywhere(quick_testbed) == [] and namespaces(quick_testbed) == []
    table = next(t for t in page.within(".jp-OutputArea-output table") if "median RTT" in page.text(t))
    shot = page.screenshot(table.find_element("xpath", "./ancestor::div[contains(@class, 'jp-CodeCell')]"),
                           tmp_path / "quickstart.png")
    assert shot.read_bytes().startswith(b"\x89PNG")
    print(f"screenshot: {shot}")


def leftover_processes_anywhere(name: str) -> list[str]:
    """labkit's processes of this testbed still running anywhere (after its namespaces are gone)."""
    found = subprocess.run(["pgrep", "-af", f"labkit-{name}-|testbeds/{name}/"], capture_output=True, text=True).stdout
    return [line for line in found.splitlines() if "pgrep" not in line]


def _state(name: str):
    from labkit.testbed.lab import Testbed

    state = Testbed(name, log=lambda message: None).load_state()
    assert state is not None, f"testbed {name} is not up"
    return state

"""labkit-go's own unit tests (`go test ./...` in go/), run by the suite so that CI runs them.

Among them go/internal/link's: the link emulator's model (delay, jitter distributions and correlation, loss and
Gilbert-Elliott, duplication, reordering, packet and byte queues, CoDel, rate and delay traces, timelines and
partitions) driven on a virtual clock with seeded randomness, so each gives one answer on any machine at any load.
"""

from __future__ import annotations

import os
import re
import subprocess

from conftest import REPO

GO_DIR = REPO / "go"


def go_command() -> str:
    """The go the set-up builds with (scripts/find-go, which scripts/bootstrap.sh asks too)."""
    found = subprocess.run([str(REPO / "scripts" / "find-go")], capture_output=True, text=True)
    assert found.returncode == 0, "no go new enough for go/go.mod: run scripts/bootstrap.sh"
    return found.stdout.strip()


def test_labkit_go_vets_clean_and_its_unit_tests_pass_the_link_model_among_them():
    """go vet, then go test, over every package. Go reuses a package's result only while the package, what it
    imports, the environment and the files it reads are unchanged: the model's tests run on a virtual clock with
    seeded randomness, so a rerun could not answer otherwise, and a changed package is tested again."""
    env = {**os.environ, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}
    go = go_command()
    # -trimpath leaves the checkout's directory out of what Go caches by, so a second clone reuses the first's
    # vetting and test builds (a fresh clone otherwise spent 40 s of CPU on them) as bootstrap's builds do.
    vet = subprocess.run([go, "vet", "-trimpath", "./..."], cwd=GO_DIR, env=env, capture_output=True, text=True, timeout=600)
    assert vet.returncode == 0, vet.stdout[-4000:] + vet.stderr[-4000:]
    proc = subprocess.run([go, "test", "-trimpath", "./..."], cwd=GO_DIR, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    passed = set(re.findall(r"^ok\s+(\S+)", proc.stdout, re.M))
    # The model's tests ran (a package with no test files says "?", not "ok").
    assert {"labkit/go/internal/link", "labkit/go/internal/linkpath"} <= passed, proc.stdout

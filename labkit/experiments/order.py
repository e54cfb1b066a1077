"""The order an experiment runs its cells in: shuffled from the run's seed, and recorded in its manifest.

A fixed order ties whatever drifts during a run (a link's moment, a host's warm caches, a connection's history) to
the cells that always come at the same place in it; replicates that all take one order repeat that tie instead of
averaging it out. So ``load``, ``upload``, ``latency-under-load`` and ``series`` (its probes' slots within a tick)
shuffle with ``random.Random(seed)``, as ``hop`` and ``sweep`` do, and replicates (``--runs``) advance the seed
(:func:`labkit.experiments.run_replicates`), so each run of a group takes another order.

The realised order goes into the manifest's ``cell_order``: ``{"seed": S, "shuffled": true, "cells": [ids...]}``.
A resumed run replans from its recorded config and seed, which gives the same order again; :func:`record` checks
that it does, so ``--resume`` continues the order the run started, never a second one.
"""

from __future__ import annotations

import random
from typing import Sequence, TypeVar

from labkit.errors import LabkitError

ORDERS = ("shuffled", "planned")
T = TypeVar("T")


def check_order(order: str) -> None:
    """Refuse, in one line, an order that is not one of :data:`ORDERS`."""
    if order not in ORDERS:
        raise LabkitError(f"--order is {' or '.join(ORDERS)}, not {order!r}")


def arrange(items: Sequence[T], seed: int, order: str = "shuffled") -> list[T]:
    """``items`` in the order a run takes them: shuffled with ``random.Random(seed)``, or as planned (pure)."""
    arranged = list(items)
    if order == "shuffled":
        random.Random(seed).shuffle(arranged)
    return arranged


def manifest_entry(ids: Sequence[str], seed: int, order: str = "shuffled", **more: Sequence[str]) -> dict:
    """What the manifest's ``cell_order`` says of a run: its seed, whether it shuffled, the realised order of its cells
    and of anything else ``more`` names (a series' probe slots within a tick)."""
    return {"seed": seed, "shuffled": order == "shuffled", "cells": list(ids),
            **{key: list(value) for key, value in more.items()}}


def record(run, ids: Sequence[str], seed: int, order: str = "shuffled", **more: Sequence[str]) -> None:
    """Keep the realised order in ``run``'s manifest (``cell_order``); a resumed run must plan the order it recorded
    (its config and seed are the recorded ones, so it does, unless labkit's planning changed between the two)."""
    entry = manifest_entry(ids, seed, order, **more)
    recorded = run.manifest.get("cell_order")
    if recorded is not None and recorded != entry:
        raise LabkitError(f"{run.run_id} recorded another cell order than this labkit plans for its config: "
                          "it cannot be resumed in the order it started; start a new run")
    if recorded != entry:
        run.manifest["cell_order"] = entry
        run.save_manifest()

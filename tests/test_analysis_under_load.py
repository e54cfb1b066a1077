"""What the latency_under_load notebook says of a run (labkit.analysis.under_load.claims and findings): each sentence
where its predicate holds on the run's own numbers, with those numbers, on the shipped sample and on its tables made
to disagree with it."""

from pathlib import Path

import pandas as pd
import pytest

from labkit.analysis import under_load
from labkit.analysis.oneway import share_a_clock
from labkit.results import Run

UNDER_LOAD = Path(__file__).resolve().parent.parent / "data" / "samples" / "under-load"


@pytest.fixture(scope="module")
def tables():
    run = Run.open(UNDER_LOAD)
    config = run.manifest["config"]
    added = under_load.added_latency(run.samples(), shared_clock=share_a_clock(run.manifest, config["client"],
                                                                                config["server"]))
    return added, under_load.queue_table(run.cell_events())


def row(added: pd.DataFrame, queue: str, load: str, probe: str, measure: str) -> pd.Series:
    return added.set_index(["queue", "load", "probe", "measure"]).loc[(queue, load, probe, measure)]


def test_on_the_sample_the_queue_is_the_loads_way_less_than_its_drain_time_and_codel_keeps_it_short(tables):
    """under-load: one cubic flow up and one down through droptail of 5 BDP (250 ms to drain) and CoDel. The queue
    shows on the load's way alone and is the link's; the probes' way rose by less than the drain time, every stamped
    probe's interval below it; CoDel keeps every round trip within 15 ms and the path responsive."""
    added, queues = tables
    held = under_load.claims(added, queues)
    assert held == {"deep_queue_way": True, "deep_queue_fill": True, "drain_time": False, "codel_target": True,
                    "codel_responsiveness": True, "transport_little": True}
    lines = under_load.findings(added, queues)
    assert [line.split("**")[1] for line in lines] == [
        "The queue is in one direction, the load's", "What the probes waited is what the link's queue held",
        "Less than the drain time", "What the probes waited is what the link's queue held", "Less than the drain time",
        "CoDel keeps the same buffer short", "CoDel keeps the path responsive", "The probe's own transport changes little"]
    # Each rise with the interval its verdict was taken from, its n, and the family it was corrected in.
    up = row(added, "5bdp", "tcp-up", "echo-warm", "out")
    assert (f"tcp-up through droptail 5bdp: echo-warm's way out {up['added_ms']:+.0f} ms, 95 % block-bootstrap interval "
            f"[{up['added_low_ms']:+.0f}, {up['added_high_ms']:+.0f}], n = {up['n_before']} before and "
            f"{up['n_during']} during, its way back "
            f"{row(added, '5bdp', 'tcp-up', 'echo-warm', 'back')['added_ms']:+.1f} ms") in lines[0]
    assert f"Holm's correction over the {added['p'].notna().sum()} comparisons of this run's table" in lines[0]
    assert up["p_holm"] < 0.05
    # The drain time: the emulator's 250 ms limit, and the share of it the loaded way rose by.
    down = [row(added, "5bdp", "tcp-down", probe, "back") for probe in ("echo-warm", "tcp-echo")]
    drain = queues.loc[(queues["queue"] == "5bdp") & (queues["load"] == "tcp-down"), "drain_ms"].max()
    assert drain == pytest.approx(250) and all(r["added_high_ms"] < drain for r in down)
    shares = sorted(f"{r['added_ms'] / drain:.2f}" for r in down)
    span = shares[0] if shares[0] == shares[-1] else f"{shares[0]} to {shares[-1]}"
    assert (f"under tcp-down through 5bdp the way back rose by {span} of the 250 ms drain time, the 95 % interval of "
            "2 of its 2 stamped probes below it") in lines[2]
    worst = added[(added["queue"] == "codel:5bdp") & (added["measure"] == "rtt")].sort_values("added_ms").iloc[-1]
    assert worst["added_ms"] <= 15 and f"the most: {worst['probe']} under {worst['load']} through codel:5bdp: " \
        f"{worst['added_ms']:+.1f} ms" in lines[5]


def test_a_sentence_goes_where_its_predicate_fails_and_the_drain_time_is_said_either_way(tables):
    """The sample's tables made to disagree with it, one predicate at a time."""
    added, queues = tables
    index = ["queue", "load", "probe", "measure"]

    def changed(key, **values) -> pd.DataFrame:
        frame = added.set_index(index).copy()
        for column, value in values.items():
            frame.loc[key, column] = value
        return frame.reset_index()

    # The way back moving by 10 ms under an upload: the queue is no longer on one way alone.
    both = changed(("5bdp", "tcp-up", "echo-warm", "back"), added_ms=10.0)
    assert not under_load.claims(both, queues)["deep_queue_way"]
    assert not any("The queue is in one direction" in line for line in under_load.findings(both, queues))
    # Every stamped probe's interval reaching the drain time: the classic account holds, and the sentence says so.
    full = added.copy()
    full.loc[full["measure"].isin(["out", "back"]) & (full["queue"] == "5bdp"), "added_high_ms"] = 260.0
    assert under_load.claims(full, queues)["drain_time"]
    said = under_load.findings(full, queues)
    assert sum("**A full droptail queue adds its drain time**" in line for line in said) == 2
    assert not any("Less than the drain time" in line for line in said)
    # A probe rising by 20 ms under CoDel: no sentence that CoDel kept the queue short.
    long = changed(("codel:5bdp", "tcp-up", "ping", "rtt"), added_ms=20.0)
    assert not under_load.claims(long, queues)["codel_target"]
    assert not any("CoDel keeps the same buffer short" in line for line in under_load.findings(long, queues))
    # One probe kept no more responsiveness through CoDel than through droptail.
    slow = changed(("codel:5bdp", "tcp-down", "tcp-echo", "rtt"), rpm_during=300.0)
    assert not under_load.claims(slow, queues)["codel_responsiveness"]
    assert not any("CoDel keeps the path responsive" in line for line in under_load.findings(slow, queues))
    # ping gaining half as much as the echoes: the transport mattered.
    apart = changed(("5bdp", "tcp-up", "ping", "rtt"), added_ms=95.0)
    assert not under_load.claims(apart, queues)["transport_little"]
    # Without the emulator's record (hosts that are not a testbed): nothing about the link's queue, or its drain time.
    bare = under_load.findings(added, pd.DataFrame())
    assert not any("queue held" in line or "drain time" in line for line in bare) and len(bare) == 4
    assert under_load.findings(pd.DataFrame(), pd.DataFrame()) == []


def test_explain_counts_the_probes_queued_on_the_loads_way():
    explained = pd.DataFrame({
        "queue": ["5bdp"] * 4 + ["codel:5bdp"], "load": ["tcp-up", "tcp-up", "tcp-up", "tcp-down", "tcp-up"],
        "cause": ["queueing", "queueing", "remainder", "queueing", "queueing"],
        "queued": ["out", "back", "none", "back", "out"], "evidence": ["emulator"] * 4 + ["one-way"]})
    assert under_load.explained_findings(explained) == [
        "Under tcp-down through droptail 5bdp, 1 of the 1 explained probes are queueing on the way back, the load's "
        "(1 from emulator).",
        "Under tcp-up through droptail 5bdp, 1 of the 3 explained probes are queueing on the way out, the load's "
        "(3 from emulator)."]
    assert under_load.explained_findings(explained.iloc[:0]) == []

"""What the upload notebook says of its default sample, upload-loopback (grpc-go at both ends over loopback, 2^4 …
2^21 B, 50 uploads a cell, three runs), and of the LAN and WAN samples: each sentence of
:func:`labkit.analysis.upload_report.findings` and :func:`~labkit.analysis.upload_report.beyond_the_original`
appears where its predicate holds on a run's numbers, with that run's numbers, and says so where it does not."""

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest

from labkit import notebooks
from labkit.analysis import upload, upload_report
from labkit.analysis.inference import adjust
from labkit.store import Run

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "samples"
SMALLEST, LARGEST = 16, 2 * 2**20


class Group:
    """A sample's --runs group as the notebook reads it by default: the first upload of each cell apart."""

    def __init__(self, name: str):
        self.run = Run.open(SAMPLES / name)
        every = upload.label_uploads(notebooks.replicate_samples(self.run)[1])[0]
        self.every, self.ok = every, every[every["ok"]]
        self.conditions = upload.label_uploads(self.run.samples())[1]
        tls, transport = upload.condition_pairs(self.conditions)
        self.pairs = {**tls, **transport}
        self.cells = upload.run_cells(self.ok, drop_first_upload=True)
        self.compared = upload.compare_by_run(self.ok, self.pairs, drop_first_upload=True)
        self.over_runs = upload.pairs_over_runs(self.ok, self.pairs)
        self.ping_ms = float(self.run.ping_baseline("a", self.run.manifest["config"]["server"])["rtt_avg_ms"])

    def findings(self, this: int = 1) -> list[str]:
        return upload_report.findings(self.cells, self.compared, self.over_runs, this)

    def beyond(self, this: int = 1) -> list[str]:
        return upload_report.beyond_the_original(self.cells, self.compared, upload.first_against_later(self.every),
                                                 this, self.ping_ms)

    def kept(self, replicate: int):
        part = self.ok[self.ok["replicate"] == replicate]
        return upload.with_cpu_costs(upload.kept_uploads(part, True), int(part["file_bytes"].iloc[0]))


def one(sentences: list[str], start: str) -> str:
    (found,) = [s for s in sentences if s.startswith(start)]
    return found


@pytest.fixture(scope="module")
def loopback():
    return Group("upload-loopback")


def test_the_sample_is_the_published_design_in_the_published_stack(loopback):
    samples = loopback.run.samples()
    assert loopback.conditions == ["grpc", "grpc+TLS", "http2", "http2+TLS"]
    assert sorted(samples["chunk_bytes"].unique()) == [2**n for n in range(4, 22)]
    assert (samples.groupby(["transport", "tls", "chunk_bytes"]).size() == 50).all() and samples["ok"].all()
    assert set(samples["client_impl"]) == {"go"} == set(samples["server_impl"])
    assert set(samples["src"]) == {"a"} == set(samples["dst"])
    assert {server["bind"].rsplit(":", 1)[0] for server in loopback.run.manifest["servers"]} == {"127.0.0.1"}
    assert len(loopback.run.replicates()) == 3


def test_run_cells_are_each_runs_cells_by_the_small_sample_rule(loopback):
    kept = loopback.kept(2)
    cell = kept[(kept["condition"] == "http2+TLS") & (kept["chunk_bytes"] == 1024)]
    row = loopback.cells.loc[(2, "http2+TLS", 1024)]
    assert row["uploads"] == len(cell) == 49 and row["statistic"] == "median"
    assert row["mb_per_s"] == pytest.approx(cell["mb_per_s"].median())
    assert row["cv"] == pytest.approx(cell["mb_per_s"].std() / cell["mb_per_s"].mean())
    assert row["server_cpu_util"] == pytest.approx(cell["server_cpu_util"].median())
    assert len(loopback.cells) == 3 * 72


def test_no_finding_of_the_original_holds_whole_in_any_of_the_three_runs(loopback):
    held = upload_report.claims(loopback.cells, loopback.compared)
    assert held == {name: {1: False, 2: False, 3: False} for name in
                    ("cpu_bound", "decent_at_1kib", "variance_at_32kib", "tls_variance_only", "http2_beats_grpc")}
    assert upload_report.claims_headline(held, 2)["claim.cpu_bound"] is False
    assert upload_report.claims_headline(held, 2)["runs.claim.http2_beats_grpc"] == 0


def test_tiny_chunks_keep_a_core_busy_in_three_conditions_and_not_over_http2_with_tls(loopback):
    """At 16 B every process stays below one core, and over HTTP/2 with TLS neither reaches nine tenths of one."""
    medians = loopback.kept(1).groupby(["condition", "chunk_bytes"])[["client_cpu_util", "server_cpu_util"]].median()
    said = one(loopback.findings(), "**Tiny chunks are CPU-bound**")
    assert said.startswith("**Tiny chunks are CPU-bound** (the original: about 200 % CPU per process) holds only in "
                           "part in this run: at 16 B the client or the server kept at least 0.9 of a core busy in "
                           "grpc, grpc+TLS, http2 (")
    at_16 = medians.xs(SMALLEST, level="chunk_bytes")
    assert at_16.loc["http2+TLS"].max() < 0.9 <= at_16.drop(index="http2+TLS").max(axis=1).min()
    for condition, row in at_16.iterrows():
        assert f"{condition} {row['client_cpu_util']:.2f} and {row['server_cpu_util']:.2f}" in said
    assert f"no process used more than {at_16.max().max():.2f} of a core, short of the original's 200 %." in said


def test_the_client_cpu_per_mb_at_16_b_over_2_mib_run_by_run(loopback):
    """Not "over fifty times on both transports": gRPC with TLS is below fifty in two of the three runs."""
    ratios = {}
    for replicate in (1, 2, 3):
        medians = loopback.kept(replicate).groupby(["condition", "chunk_bytes"])["client_cpu_s_per_mb"].median()
        ratios[replicate] = {c: medians[(c, SMALLEST)] / medians[(c, LARGEST)] for c in loopback.conditions}
    tls = sorted(ratios[r]["grpc+TLS"] for r in ratios)
    assert tls[0] < 50 < tls[-1]
    findings = loopback.findings()
    assert one(findings, "The client's CPU per MB").endswith(
        ": " + ", ".join(f"{c} {ratios[1][c]:.0f}×" for c in loopback.conditions) + ".")
    assert f"grpc+TLS {tls[0]:.0f}–{tls[-1]:.0f}×" in one(findings, "Over the 3 runs of this group, tiny chunks")
    assert "in 0 of 3 runs" in one(findings, "Over the 3 runs of this group, tiny chunks")


def test_1_kib_reaches_half_the_best_over_grpc_with_tls_in_one_run_only(loopback):
    findings = loopback.findings()
    share = loopback.cells["mb_per_s"].xs(1024, level="chunk_bytes") / loopback.cells["mb_per_s"].groupby(
        level=["replicate", "condition"]).max()
    assert (share.xs("grpc+TLS", level="condition") >= 0.5).sum() == 1
    assert (share.xs("http2", level="condition") < 0.3).all()
    assert "over grpc+TLS in 1 of 3 runs" in one(findings, "Over the 3 runs, 1 KiB reached half")
    assert one(findings, "**About 1 KiB was already decent**").endswith("half or more in no condition.")


def test_32_kib_has_not_the_largest_variance_anywhere(loopback):
    cv = loopback.cells["cv"].unstack("chunk_bytes")
    assert (cv[32768] < cv.max(axis=1)).all()
    rank = (cv.rank(axis=1, ascending=False, method="min")[32768]).xs(1, level="replicate")
    said = one(loopback.findings(), "**32 KiB had a large variance**")
    assert "does not hold in this run" in said and "in no condition" in said
    assert "its rank, 1 the largest: " + ", ".join(f"{c} {int(rank[c])}" for c in loopback.conditions) in said


def test_tls_is_called_slower_within_each_run_and_over_the_runs_with_its_correction_named(loopback):
    run_1 = loopback.compared[(loopback.compared["replicate"] == 1) & loopback.compared["comparison"].str.startswith("TLS")]
    http2 = run_1[run_1["comparison"] == "TLS on − off, http2"]
    assert (http2["verdict"] == "lower").all()
    said = one(loopback.findings(), "**TLS shifted the variance only**")
    assert "slower over http2 at 18 of 18 chunk sizes (16 B–2 MiB)" in said
    assert "Holm's correction over the 72 comparisons of this run" in said
    # In run 2 TLS was also called *faster* over gRPC at some sizes: the sentence of run 2 says where.
    run_2 = loopback.compared[(loopback.compared["replicate"] == 2) & (loopback.compared["comparison"] == "TLS on − off, grpc")]
    faster = sorted(int(s) for s in run_2.loc[run_2["verdict"] == "higher", "chunk_bytes"])
    assert faster and f"and faster over grpc at {len(faster)} of 18 chunk sizes (" in one(
        loopback.findings(this=2), "**TLS shifted the variance only**")


def test_http2_against_grpc_differs_from_run_to_run(loopback):
    """Not "slower up to 2 KiB and faster only at 16-256 KiB": run 1 also calls HTTP/2 faster at 8 KiB, run 2 at
    2 KiB; and each run's sentence says its own."""
    plain = loopback.compared[loopback.compared["comparison"] == "http2 − grpc"].set_index(["replicate", "chunk_bytes"])
    assert plain.loc[(1, 8192), "verdict"] == "higher" and plain.loc[(2, 2048), "verdict"] == "higher"
    first, second = (one(loopback.findings(this=r), "**Raw HTTP/2 beat gRPC**") for r in (1, 2))
    assert "holds only in part in this run: HTTP/2 was called without TLS faster at 8 KiB–256 KiB" in first
    assert "and slower at 16 B–2 KiB" in first
    assert "without TLS faster at 2 KiB, 8 KiB, 32 KiB–64 KiB" in second and "2 MiB" in second
    runs = one(loopback.findings(), "Each of the 3 runs on its own (Holm's correction over its own comparisons): "
                                    "without TLS")
    faster = plain[plain["verdict"] == "higher"].groupby(level="chunk_bytes").size()
    assert faster[32768] == faster[65536] == 3 and faster[2048] == 1
    assert "HTTP/2 called faster in 3 of 3 runs at 32 KiB–64 KiB" in runs and "in 1 at 2 KiB" in runs
    assert runs.endswith("the original's claim holds in 0 of 3 runs.")


def test_over_the_runs_benjamini_hochberg_is_named_and_holm_counted(loopback):
    over = loopback.over_runs
    called = int(over["verdict"].isin(("higher", "lower")).sum())
    holm = int(adjust(over["p"].to_list(), "holm")[0].sum())
    assert holm < called and len(over) == 72
    tls, transport = (s for s in loopback.findings() if s.startswith("Over the 3 runs as units"))
    assert (f"Benjamini–Hochberg's correction over the 72 comparisons, which holds the expected share of false calls "
            f"among the differences called at 5 % but not the chance of any false call: Holm's correction, which "
            f"does, would call {holm} of the {called} called here") in tls
    assert "Benjamini–Hochberg's correction over the same 72 comparisons" in transport
    lower = over[(over["comparison"] == "http2 − grpc") & (over["verdict"] == "lower")]
    assert upload_report.sizes_text(lower["chunk_bytes"], [2**n for n in range(4, 22)]) in transport
    assert not (over.loc[~over["comparison"].str.startswith("TLS"), "verdict"] == "higher").any()


def test_the_first_upload_is_slower_only_at_some_sizes_by_a_sign_test_over_runs_and_conditions(loopback):
    """Not "slower from 64 B": per run × condition it is slower in about half the cells at 64-512 B."""
    first = upload.first_against_later(loopback.every)
    per_size = first.groupby(level="chunk_bytes")["slower"].agg(["sum", "size"])
    assert (per_size["size"] == 12).all() and per_size.loc[[64, 128, 256, 512], "sum"].between(5, 7).all()
    p = [binomtest(int(k), 12).pvalue for k in per_size["sum"]]
    called = per_size.index[adjust(p, "holm")[0]]
    said = one(loopback.beyond(), "**The first upload of a cell**")
    assert f"called slower at {upload_report.sizes_text(called, per_size.index)} (slower in 12 of 12 cells)" in said
    assert f"not called at the other {18 - len(called)} sizes" in said


def test_what_the_chunks_became_beside_where_http2_was_called_slower(loopback):
    """Not "over a hundred times the system calls per MB" at every size: the ratio falls with the chunk size."""
    server = loopback.cells["server_rw_syscalls_per_mb"].xs(1, level="replicate").unstack("condition")
    ratio = server["http2"] / server["grpc"]
    assert ratio[16] > 500 and ratio[1024] < 100 and ratio[2048] < 50
    said = one(loopback.beyond(), "**What the chunks became**")
    assert f"{ratio[16]:.0f}× without TLS" in said
    assert "where HTTP/2 was called slower than gRPC (16 B–2 KiB)" in said
    frames = loopback.cells.xs((1, SMALLEST), level=["replicate", "chunk_bytes"])
    per_write = frames["client_data_frames_per_mb"] / frames["client_writes_per_mb"]
    assert per_write[["http2", "http2+TLS"]].max() < 1.01 and per_write[["grpc", "grpc+TLS"]].min() > 50
    assert (f"carried DATA frames: {per_write[['grpc', 'grpc+TLS']].min():.0f}–{per_write[['grpc', 'grpc+TLS']].max():.0f} "
            "over gRPC; 1.00 over HTTP/2.") in said


def test_the_timer_sentence_is_this_runs_ping_over_its_upload_times(loopback):
    said = one(loopback.beyond(), "**The original's timer**")
    seconds = loopback.cells["seconds"].xs(1, level="replicate")
    assert f"({loopback.ping_ms:.3g} ms)" in said
    assert upload_report.percent(loopback.ping_ms / 1e3 / seconds.max()) in said


@pytest.fixture(scope="module")
def lan():
    return Group("upload-lan")


def test_across_the_lan_no_process_keeps_a_core_busy(lan):
    """Not "for the same reason" (CPU-bound): over HTTP/2 at 16 B the two processes together use under one core."""
    at_16 = lan.cells.xs(SMALLEST, level="chunk_bytes")[["client_cpu_util", "server_cpu_util"]]
    assert at_16.max().max() < 0.9
    assert (at_16.xs("http2", level="condition").sum(axis=1) < 0.75).all()
    held = upload_report.claims(lan.cells, lan.compared)
    assert held["cpu_bound"] == {1: False, 2: False, 3: False}
    said = one(lan.findings(), "**Tiny chunks are CPU-bound**")
    assert "does not hold in this run" in said and "in no condition" in said
    http2 = at_16.loc[(1, "http2")]
    assert f"http2 {http2['client_cpu_util']:.2f} and {http2['server_cpu_util']:.2f}" in said


def test_over_the_wan_the_link_sets_the_pace_and_20_uploads_pin_each_median():
    run = Run.open(SAMPLES / "upload-wan")
    samples = upload.label_uploads(run.samples())[0]
    kept = upload.kept_uploads(samples, True)
    ping_s = run.ping_baseline("a", "b")["rtt_avg_ms"] / 1e3
    medians = kept.groupby(["condition", "chunk_bytes"])[["mb_per_s", "seconds"]].median()
    assert medians["mb_per_s"].between(9.5, 10.5).all()
    assert medians["seconds"].between(1.8 * ping_s, 2.2 * ping_s).all()
    firsts = samples[samples["seq"] == 0].groupby(["condition", "chunk_bytes"])["seconds"].median()
    assert (firsts > 4 * medians["seconds"]).all() and (firsts < 8 * medians["seconds"]).all()
    cells = upload.cell_summary(kept, "mb_per_s")
    assert ((cells["hi"] - cells["lo"]) / 2 < 0.01 * cells["value"]).all() and (cells["count"] == 19).all()
    # One ping RTT is close to half of every upload there: the timer's sentence says so of this run.
    alone = samples.assign(replicate=1)  # this run alone, not its group
    tls, transport = upload.condition_pairs(upload.label_uploads(run.samples())[1])
    said = upload_report.beyond_the_original(
        upload.run_cells(alone[alone["ok"]], True), upload.compare_by_run(alone[alone["ok"]], {**tls, **transport}, True),
        upload.first_against_later(alone), 1, ping_s * 1e3)
    share = ping_s / kept.groupby(["condition", "chunk_bytes"])["seconds"].median()
    assert f"is {upload_report.percent(share.min())} (" in one(said, "**The original's timer**")
    assert np.isclose(share.max(), 0.5, atol=0.05)

"""`labkit hop`: wrk's, vegeta's and labkit-go load's parsers on recorded output, and the relay on a testbed of its own (real parts).

The recorded output (tests/data/wrk/, tests/data/vegeta/, tests/data/goload/) comes from
tests/data/tools/record_hop.sh: labkit-go back and front on loopback, through
a nats-server on loopback.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import tomli_w
import tomllib

import labkit
from conftest import (DATA, LABKIT, deployed_inventory, labkit as run_labkit, leftover_processes, own_testbed,
                      running_labkit, wait_for_cell_start)
from labkit.experiments.hop import HopConfig, goload_cell_stats, plan_cells, tools_needed, vegeta_cell_stats, wrk_cell_stats
from labkit.parsers import ParseError
from labkit.analysis import hop as hop_analysis
from labkit.parsers.goload import goload_argv, parse_goload_csv
from labkit.parsers.vegeta import parse_vegeta_csv, vegeta_attack_argv
from labkit.parsers.wrk import SCRIPT_PERCENTILES, parse_wrk, wrk_argv
from labkit.schemas import HOP_SCHEMA
from labkit.store import Run

VERSIONS = dict(line.split(": ", 1) for line in (DATA / "wrk" / "versions.txt").read_text().splitlines())
BACK_SHA256 = VERSIONS["back body sha256"]


def read(name: str) -> str:
    return (DATA / name).read_text()


# --- wrk's report, with and without labkit's script ----------------------------------------------


@pytest.mark.parametrize("name", ["direct_plain", "front_grpc_script", "nats_killed"])
def test_every_line_of_a_wrk_report_is_accounted_for(name):
    result = parse_wrk(read(f"wrk/{name}.txt"))
    assert result.counts["unrecognised"] == 0 and result.counts["lines"] == result.counts["parsed"]
    assert result.summary["threads"] == 2 and result.summary["connections"] == 10


def test_the_published_shape_gives_366_bytes_per_response():
    """The report the post printed: wrk's own lines only. Its MB are MiB, and a response is the 366 B the post read."""
    summary = parse_wrk(read("wrk/direct_plain.txt")).summary
    assert summary["url"].endswith("/products") and summary["planned_s"] == 2.0
    assert summary["requests"] == 78915 and summary["duration_s"] == 2.0 and summary["rps"] == 39429.98
    assert summary["latency_ms"] == {"mean": pytest.approx(0.89), "stdev": pytest.approx(1.90), "max": pytest.approx(20.56),
                                     "within_stdev_pct": 90.35}
    assert summary["thread_rps"]["mean"] == pytest.approx(19810) and summary["thread_rps"]["max"] == pytest.approx(27340)
    assert summary["percentiles_ms"] == {50: pytest.approx(0.189), 75: pytest.approx(0.622), 90: pytest.approx(2.70),
                                         99: pytest.approx(9.59)}
    assert summary["bytes_read"] / summary["requests"] == pytest.approx(366, abs=1)
    assert summary["errors"] == {"connect": 0, "read": 0, "write": 0, "timeout": 0, "status": 0}
    assert parse_wrk(read("wrk/direct_plain.txt")).rows.empty  # no script: no CDF


def test_the_script_lines_are_the_reports_numbers_unrounded():
    result = parse_wrk(read("wrk/front_grpc_script.txt"))
    summary, exact = result.summary, result.summary["exact"]
    assert exact["requests"] == summary["requests"] and exact["duration_us"] / 1e6 == pytest.approx(summary["duration_s"], abs=0.005)
    assert exact["bytes"] == pytest.approx(summary["bytes_read"], rel=0.001)
    assert exact["latency_mean_us"] / 1e3 == pytest.approx(summary["latency_ms"]["mean"], abs=0.005)
    assert exact["latency_max_us"] / 1e3 == pytest.approx(summary["latency_ms"]["max"], abs=0.005)
    # The CDF: every 0.1 % and the far tail, non-decreasing, its quartiles the printed Latency Distribution.
    rows = result.rows
    assert list(rows["percent"]) == list(SCRIPT_PERCENTILES) and rows["latency_ms"].is_monotonic_increasing
    cdf = dict(zip(rows["percent"], rows["latency_ms"]))
    for p, printed in summary["percentiles_ms"].items():
        assert cdf[float(p)] == pytest.approx(printed, abs=0.006)
    assert cdf[100.0] == exact["latency_max_us"] / 1e3
    stats = wrk_cell_stats(read("wrk/front_grpc_script.txt"), 2.0)
    assert stats["ok"] == stats["requests"] == 21617 and stats["errors"] == 0
    assert stats["rps"] == pytest.approx(21617 / 2.008633) and stats["bytes_read"] == 7911822


def test_a_nats_server_killed_under_wrk_shows_as_non_2xx_answers():
    summary = parse_wrk(read("wrk/nats_killed.txt")).summary
    assert summary["errors"]["status"] == summary["exact"]["status"] == 59035
    stats = wrk_cell_stats(read("wrk/nats_killed.txt"), 3.0)
    assert stats["requests"] == 71841 and stats["errors"] == 59035 and stats["ok"] == 71841 - 59035
    assert stats["rps"] < summary["rps"]  # wrk's own req/s counts the 502s too
    assert json.loads(stats["error_kinds"]) == {"status": 59035}


def test_wrk_that_cannot_connect_prints_no_report():
    text = read("wrk/refused.txt")
    assert text.strip() == "unable to connect to 127.0.0.1:1 Connection refused"
    with pytest.raises(ParseError, match="not wrk output"):
        parse_wrk(text)


def test_wrk_argv_takes_whole_seconds_and_the_script():
    argv = wrk_argv("wrk", "http://h:1/via/grpc", threads=2, connections=10, seconds=10, timeout_s=5.4, script="s.lua")
    assert argv == ["wrk", "-t", "2", "-c", "10", "-d", "10s", "--timeout", "5s", "--latency", "-s", "s.lua",
                    "http://h:1/via/grpc"]


# --- vegeta's CSV encoding --------------------------------------------------------------------------


def test_vegeta_sends_at_the_rate_and_every_body_is_the_backs():
    result = parse_vegeta_csv(read("vegeta/front_http2.csv"))
    rows = result.rows
    assert result.counts["unrecognised"] == 0 and result.counts["requests"] == result.counts["ok"] == 200
    assert list(rows["seq"]) == list(range(200)) and (rows["body_sha256"] == BACK_SHA256).all()
    # 100 requests a second: the starts are 10 ms apart whatever the answers took (the open loop).
    gaps = rows["t_utc"].diff().dt.total_seconds().dropna()
    assert gaps.median() == pytest.approx(0.010, abs=0.0005)
    stats = vegeta_cell_stats(read("vegeta/front_http2.csv"), 2.0, BACK_SHA256)
    assert stats["ok"] == 200 and stats["rps"] == 100.0 and stats["bytes_read"] == 200 * 257
    # The same answers checked against another body are all errors.
    wrong = vegeta_cell_stats(read("vegeta/front_http2.csv"), 2.0, "0" * 64)
    assert wrong["ok"] == 0 and json.loads(wrong["error_kinds"]) == {"a body other than the back's": 200}


def test_vegeta_records_502s_and_refused_connections_as_errors():
    gone = parse_vegeta_csv(read("vegeta/nats_gone.csv")).rows
    assert (gone["status"] == 502).all() and (gone["error"] == "502 Bad Gateway").all() and not gone["ok"].any()
    refused = parse_vegeta_csv(read("vegeta/refused.csv"))
    assert refused.counts["no_response"] == 10 and refused.rows["error"].str.contains("connection refused").all()
    with pytest.raises(ParseError, match="not vegeta's CSV"):
        parse_vegeta_csv(read("wrk/direct_plain.txt"))


# --- labkit-go load's CSV ---------------------------------------------------------------------------


def test_labkit_go_load_keeps_each_connection_busy_and_every_body_is_the_backs():
    result = parse_goload_csv(read("goload/front_grpc.csv"))
    rows = result.rows
    assert result.counts["unrecognised"] == 0 and result.counts["requests"] == result.counts["ok"] > 100
    assert set(rows["connection"]) == {0, 1} and (rows["status"] == 200).all() and (rows["bytes_in"] == 257).all()
    # A closed loop: on each connection the next request leaves once the last has been answered.
    for _, sent in rows.sort_values("t_utc").groupby("connection"):
        ends = sent["t_utc"] + pd.to_timedelta(sent["latency_ms"], unit="ms")
        assert (sent["t_utc"].iloc[1:].to_numpy() >= ends.iloc[:-1].to_numpy()).all()
    stats = goload_cell_stats(read("goload/front_grpc.csv"), 0.2)
    assert stats["ok"] == len(rows) and stats["rps"] == len(rows) / 0.2 and stats["bytes_read"] == 257 * len(rows)
    assert stats["latency_mean_ms"] == pytest.approx(rows["latency_ms"].mean())


def test_labkit_go_load_records_502s_wrong_bodies_and_refused_connections_as_errors():
    gone = parse_goload_csv(read("goload/nats_gone.csv")).rows
    assert len(gone) and (gone["status"] == 502).all() and (gone["error"] == "HTTP 502").all() and not gone["ok"].any()
    wrong = goload_cell_stats(read("goload/wrong_body.csv"), 0.02)
    assert wrong["requests"] > 0 and wrong["ok"] == 0
    assert json.loads(wrong["error_kinds"]) == {"a body other than the back's": wrong["requests"]}
    refused = parse_goload_csv(read("goload/refused.csv"))
    assert refused.counts["no_response"] == refused.counts["requests"] > 0
    assert refused.rows["error"].str.contains("connection refused").all()
    with pytest.raises(ParseError, match="not labkit-go load's CSV"):
        parse_goload_csv(read("vegeta/refused.csv"))
    assert goload_argv("labkit-go", "http://h:1/p", connections=10, seconds=10.0, timeout_s=6.0, body_sha256="ab",
                       out="o.csv") == ["labkit-go", "load", "-url", "http://h:1/p", "-connections", "10", "-duration",
                                        "10s", "-timeout", "6s", "-out", "o.csv", "-body-sha256", "ab"]


# --- the plan ----------------------------------------------------------------------------------------


def test_cells_are_every_transport_and_repeat_in_a_seeded_shuffle():
    config = HopConfig(inventory="x", load_host="a", front="a", back="b", tool="wrk", repeats=3)
    config.validate()
    cells = plan_cells(config)
    assert sorted((c.via, c.repeat) for c in cells) == sorted((v, r) for v in config.via for r in range(3))
    assert [c.order for c in cells] == list(range(12))
    assert [c.id for c in cells] == [c.id for c in plan_cells(config)]  # same seed, same order
    assert [c.id for c in cells] != [c.id for c in plan_cells(HopConfig(**{**config.__dict__, "seed": 2}))]
    assert [c.via for c in cells[:4]] != config.via or [c.via for c in cells[4:8]] != config.via  # shuffled
    assert config.host_names() == ["a", "b"]
    three = HopConfig(inventory="x", load_host="c", front="a", back="b", nats_host="d")
    assert three.host_names() == ["c", "a", "b", "d"]
    rates = plan_cells(HopConfig(inventory="x", load_host="a", back="b", via=["direct"], rate=[100, 200], repeats=2))
    assert sorted((c.rate, c.repeat) for c in rates) == [(100, 0), (100, 1), (200, 0), (200, 1)]
    assert {c.tool for c in rates} == {"vegeta"}
    # With --tool too: the closed loops and the open-loop rates in one shuffled run (capacity and light load).
    both = HopConfig(inventory="x", load_host="a", back="b", via=["direct"], tool="labkit-go", rate=[100], repeats=2)
    both.validate()
    mixed = plan_cells(both)
    assert sorted((c.tool, c.rate, c.repeat) for c in mixed) == [("labkit-go", None, 0), ("labkit-go", None, 1),
                                                                 ("vegeta", 100, 0), ("vegeta", 100, 1)]
    assert {c.id for c in mixed} >= {"a|direct|labkit-go|rate=closed|r=0", "a|direct|vegeta|rate=100/s|r=1"}


def test_the_plan_names_the_tools_each_host_runs_for_the_run_to_send():
    config = HopConfig(inventory="x", load_host="c", front="a", back="b", via=["direct", "grpc", "nats"],
                       tool="wrk,labkit-go", rate=[100])
    config.validate()
    assert tools_needed(config, plan_cells(config)) == {"a": {"labkit-go"}, "b": {"labkit-go", "nats-server"},
                                                        "c": {"labkit-go", "vegeta"}}  # wrk is Debian's
    direct = HopConfig(inventory="x", load_host="a", back="b", via=["direct"], tool="wrk,ghz", ghz="/opt/ghz")
    direct.validate()
    assert tools_needed(direct, plan_cells(direct)) == {"b": {"labkit-go"}}  # no front; ghz given by path is the host's


def test_several_closed_loop_tools_are_shuffled_together_and_vegetas_closed_loop_has_a_worker_per_connection():
    config = HopConfig(inventory="x", load_host="a", front="a", back="b", via=["direct", "grpc"], tool="wrk,vegeta",
                       repeats=2)
    config.validate()
    cells = plan_cells(config)
    assert sorted((c.via, c.tool, c.repeat) for c in cells) == sorted(
        (v, t, r) for v in ("direct", "grpc") for t in ("wrk", "vegeta") for r in range(2))
    assert [c.tool for c in cells] not in (["wrk"] * 4 + ["vegeta"] * 4, ["vegeta"] * 4 + ["wrk"] * 4)
    assert "a|grpc|vegeta|rate=closed|r=1" in {c.id for c in cells}
    argv = vegeta_attack_argv("vegeta", "t.txt", rate=0, seconds=10, timeout_s=6, out="o.bin", workers=10)
    assert argv[argv.index("-rate") + 1] == "0" and argv[argv.index("-max-workers") + 1] == "10"
    assert argv[argv.index("-workers") + 1] == "10"
    with pytest.raises(ValueError, match="workers"):
        vegeta_attack_argv("vegeta", "t.txt", rate=0, seconds=10, timeout_s=6, out="o.bin")


# --- on the testbed ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab():
    with own_testbed("h10-test", 0.0) as state:
        yield state


@pytest.fixture(scope="module")
def inventory(lab, tmp_path_factory):
    """The testbed's inventory with labkit deployed offline (nats-server and vegeta with it), plus host `c`: this
    machine inside a's namespace under a name of its own, so that a run can use three inventory hosts."""
    path = deployed_inventory(lab, tmp_path_factory.mktemp("hop"))
    data = tomllib.loads(path.read_text())
    data["hosts"]["c"] = {"ssh": "local", "netns": lab.hosts["a"].netns, "data_address": lab.hosts["a"].data_address}
    path.write_text(tomli_w.dumps(data))
    return path


def lab_processes(lab) -> list[str]:
    return leftover_processes(lab, ("labkit-go", "nats-server", "wrk", "vegeta", "ghz"))


def test_deploy_sent_nats_server_and_vegeta(inventory):
    for host in ("a", "b"):
        bin_dir = Path(tomllib.loads(inventory.read_text())["hosts"][host]["labkit_dir"]) / "bin"
        for tool in ("nats-server", "vegeta", "labkit-go"):
            local = hashlib.sha256((Path(LABKIT).parent / tool).read_bytes()).hexdigest()
            assert hashlib.sha256((bin_dir / tool).read_bytes()).hexdigest() == local, (host, tool)


def _netns_python(lab, host: str, code: str, *args: str) -> str:
    proc = subprocess.run(["ip", "netns", "exec", lab.hosts[host].netns, sys.executable, "-c", code, *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


FETCH = """
import hashlib, sys, urllib.request
for url in sys.argv[1:]:
    with urllib.request.urlopen(url, timeout=10) as reply:
        body = reply.read()
    print(reply.status, len(body), hashlib.sha256(body).hexdigest())
"""


def test_a_relay_over_each_transport_returns_the_backs_exact_body(lab, inventory, tmp_path):
    """A 100 KB body of every byte value, served by the back on b, fetched through the front on a over each transport."""
    from labkit.hosts.local import LocalHost
    from labkit.pki import write_throwaway_pki

    body = bytes(range(256)) * 400
    (tmp_path / "body").write_bytes(body)
    pki = write_throwaway_pki(tmp_path / "tls", lab.hosts["b"].data_address)
    a, b = (LocalHost(name, netns=lab.hosts[name].netns) for name in ("a", "b"))
    go, nats = str(Path(LABKIT).parent / "labkit-go"), str(Path(LABKIT).parent / "nats-server")
    address_a, address_b = lab.hosts["a"].data_address, lab.hosts["b"].data_address
    from labkit.parsers.nats import nats_client_url, nats_server_argv

    with b.start(nats_server_argv(nats, address_b)) as nats_proc:
        deadline = time.monotonic() + 10
        while (url := nats_client_url(nats_proc.stderr_lines)) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        with b.start([go, "back", "--bind", f"{address_b}:0", "--body-file", str(tmp_path / "body"), "--nats-url", url,
                      "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)]) as back:
            ready = json.loads(back.wait_for_line(lambda line: '"ready"' in line, timeout=10))
            with a.start([go, "front", "--bind", f"{address_a}:0", "--back-grpc", f"{address_b}:{ready['grpc_port']}",
                          "--back-http2", f"http://{address_b}:{ready['http_port']}",
                          "--back-http2-tls", f"https://{address_b}:{ready['tls_port']}", "--back-ca", str(pki.ca_cert),
                          "--nats-url", url]) as front:
                front_ready = json.loads(front.wait_for_line(lambda line: '"ready"' in line, timeout=10))
                vias = ["grpc", "http2", "http2-tls", "nats"]
                urls = [f"http://{address_a}:{front_ready['http_port']}/via/{via}" for via in vias]
                fetched = _netns_python(lab, "a", FETCH, f"http://{address_b}:{ready['http_port']}/products", *urls)
    expected = f"200 {len(body)} {hashlib.sha256(body).hexdigest()}"
    assert fetched.splitlines() == [expected] * 5
    assert ready["body_sha256"] == hashlib.sha256(body).hexdigest() and front_ready["via"] == vias
    assert lab_processes(lab) == []


def test_all_four_transports_on_three_hosts_with_zero_errors_and_every_row_filled(lab, inventory, tmp_path):
    """Load on c (this machine in a's namespace), front on a, back on b, nats-server on a: four inventory roles."""
    run = labkit.hop(inventory, load_host="c", front="a", back="b", nats_host="a", tool="wrk", duration_s=2, repeats=1,
                     ping_count=2, name="four", runs_dir=tmp_path, quiet=True, capture=True)
    assert run.status == "complete"
    # --capture: on the back (callers a and c) and the front (caller c), each side, for every start of the services.
    captured = {(c["host"], c["role"]) for c in run.manifest["captures"]}
    assert captured == {("b", "server"), ("a", "client"), ("c", "client"), ("a", "server")}
    assert all(c["bytes"] > 0 for c in run.manifest["captures"])
    packets = pd.read_parquet(run.path / "packets.parquet")
    assert len(packets) > 1000 and packets["call"].isna().all()  # wrk's requests are not calls labkit times
    assert set(run.manifest["captures"][0]["ports"]) >= {"grpc", "http"}
    table = pq.read_table(run.path / "samples.parquet")
    assert table.schema.equals(HOP_SCHEMA, check_metadata=False)
    rows = table.to_pandas().set_index("via")
    assert sorted(rows.index) == ["direct", "grpc", "http2", "nats"]
    assert (rows["errors"] == 0).all() and rows["error"].isna().all() and rows["services_alive_after"].all()
    for column in ("rps", "latency_mean_ms", "latency_max_ms", "latency_p50_ms", "latency_p90_ms", "latency_p99_ms",
                   "transfer_bytes_per_s", "back_cpu_s", "front_cpu_s", "nats_cpu_s", "load_cpu_s", "tool_version"):
        assert rows[column].notna().all(), column
    assert (rows["requests"] > 100).all() and (rows["bytes_read"] / rows["requests"]).round().eq(366).all()
    assert (rows["back_cpu_s"] > 0).all() and (rows.drop("direct")["front_cpu_s"] > 0).all()
    assert (rows["load_cpu_s"] > 0).all() and (rows["load_cpu_s"] < 2 * 2 + 0.5).all()  # wrk, at most 2 cores × 2 s
    assert rows.loc["nats", "nats_cpu_s"] > rows.loc["grpc", "nats_cpu_s"]  # the NATS server works for nats cells only
    assert pd.isna(rows.loc["direct", "front"]) and rows.loc["grpc", "front"] == "a" and rows.loc["nats", "nats_host"] == "a"
    assert set(run.manifest["tools"]) == {"wrk", "labkit-go", "nats-server"}
    services = run.manifest["services"][0]
    assert {role: services[role]["host"] for role in services} == {"nats": "a", "back": "b", "front": "a"}
    assert run.ping_baseline("c", "a")["received"] == run.ping_baseline("a", "b")["received"] == 2
    assert lab_processes(lab) == []
    report = run_labkit("report", str(run.path), "--formats", "png", timeout=300)
    assert report.returncode == 0, report.stderr
    data = json.loads((run.path / "report" / "hop.json").read_text())
    headline = data["headline"]
    assert headline["errors"] == 0 and headline["cells"] == 4 and headline["bytes_per_request"] == pytest.approx(366, abs=1)
    # It speaks of this run, none of the shipped sample's sentences, with this run's own numbers: its 4 wrk cells,
    # its requests, and pairs it cannot test with one repeat a side.
    from conftest import assert_speaks_of_its_own_run

    said = assert_speaks_of_its_own_run("hop", data, run.path / "report" / "hop.ipynb")
    assert f"0 of the run's {headline['requests']:,} requests failed, over its 4 cells." in said
    assert any(line.startswith("wrk read ") and "B per request (median over its 4 cells)" in line for line in said)
    assert any(line.startswith("Little's law on wrk's closed loop: 4 cells") for line in said)
    pair = [line for line in said if line.startswith("gRPC cannot be tested against direct (fewer than two repeats on "
                                                     "a side) on wrk, this run's only load tool: ")]
    assert len(pair) == 1 and pair[0].endswith(" ms, no interval (1 repeat a side).")
    assert float(pair[0].rsplit(": ", 1)[1].split(" ms")[0]) == pytest.approx(headline["cost_ms.grpc"], abs=0.006)
    # One repeat per transport: a cost, but no interval, and no ordering the data could support: with one value a
    # side nothing can be tested (the small-sample rule, inference.method_for), which the headline says as such.
    assert "cost_ms.nats" in headline and headline["cost_ms.nats_lo"] is None
    orders = {headline[f"order.{b}_vs_{a}"] for a, b in (("direct", "grpc"), ("grpc", "http2"), ("http2", "nats"))}
    assert orders == {"not testable"}


def test_labkit_go_and_vegeta_keep_every_request_beside_wrks_corrected_view(lab, inventory, tmp_path):
    """Issue 29: wrk's latencies hold synthetic samples; labkit-go's and vegeta's closed loops time each request and
    keep it, and the costs are measured on labkit-go's."""
    run = labkit.hop(inventory, load_host="a", front="a", back="b", via=["direct", "grpc"],
                     tool=["wrk", "labkit-go", "vegeta"], duration_s=2, repeats=1, ping_count=1, name="tools",
                     runs_dir=tmp_path, quiet=True)
    assert run.status == "complete"
    samples = run.samples()
    assert sorted(zip(samples["via"], samples["tool"])) == [
        (via, tool) for via in ("direct", "grpc") for tool in ("labkit-go", "vegeta", "wrk")]
    assert (samples["errors"] == 0).all() and (samples["connections"] == 10).all() and (samples["load_cpu_s"] > 0).all()
    for _, cell in samples[samples["tool"] != "wrk"].iterrows():
        text = run.raw_text(cell["raw_files"].split(",")[0])
        kept = (parse_goload_csv(text) if cell["tool"] == "labkit-go" else parse_vegeta_csv(text)).rows
        assert len(kept) == cell["requests"] > 100 and kept["ok"].all()
        assert kept["latency_ms"].mean() == pytest.approx(cell["latency_mean_ms"])
        assert (kept["bytes_in"] == cell["body_bytes"]).all()
        if cell["tool"] == "labkit-go":
            # Ten connections, each busy with one request at a time: no connection's requests add up to more
            # than the load's two seconds and the last request's deadline.
            assert sorted(kept["connection"].unique()) == list(range(10))
            assert kept.groupby("connection")["latency_ms"].sum().max() <= (2 + 6) * 1e3
    # Ten requests in flight: req/s × each request's own mean latency cannot exceed 10 (Little's law).
    law = hop_analysis.littles_law(samples)
    assert set(law["series"]) == {f"{via} ({tool})" for via in ("direct", "grpc") for tool in ("labkit-go", "vegeta", "wrk")}
    assert (law.loc[law["tool"] != "wrk", "ratio"] <= hop_analysis.LITTLE_BAND[1]).all(), law
    # The costs are measured on labkit-go's cells; the published table's layout stays wrk's.
    assert hop_analysis.measuring_tool(samples) == "labkit-go"
    assert hop_analysis.hop_cost(samples).loc["grpc", "via_mean"] == pytest.approx(
        samples.query("via == 'grpc' and tool == 'labkit-go'")["latency_mean_ms"].iat[0])
    assert hop_analysis.published_layout(samples).loc["grpc", "labkit rps"] == pytest.approx(
        samples.query("via == 'grpc' and tool == 'wrk'")["rps"].iat[0])
    assert lab_processes(lab) == []


def test_killing_the_nats_server_mid_run_gives_error_rows_and_a_summary_line(lab, inventory, tmp_path):
    experiment = tmp_path / "killed.toml"
    experiment.write_text(tomli_w.dumps({"hop": {
        "inventory": str(inventory), "load_host": "a", "front": "a", "back": "b", "via": "nats", "tool": "wrk", "duration": "3s",
        "repeats": 2, "ping_count": 1, "name": "killed"}}))
    with running_labkit("hop", "--config", str(experiment), "--runs-dir", str(tmp_path), "--quiet") as proc:
        run_path = wait_for_cell_start(tmp_path, "killed")
        nats_pid = json.loads((run_path / "manifest.json").read_text())["services"][0]["nats"]["pid"]
        time.sleep(1.5)  # half of the first cell
        subprocess.run(["kill", "-9", str(nats_pid)], check=True)
        stdout, stderr = proc.communicate(timeout=120)
    rows = Run.open(run_path).samples().sort_values("order").reset_index(drop=True)
    killed, after = rows.iloc[0], rows.iloc[1]
    # Exit status 1 and a warning when more than half of the killed cell's requests failed (where in the cell the
    # kill fell decides that; the next test makes it certain).
    mostly_failed = killed["errors"] > killed["requests"] / 2
    assert proc.returncode == (1 if mostly_failed else 0), stderr
    assert ("requests failed" in stderr) == mostly_failed, stderr
    assert killed["errors"] > 0 and killed["ok"] > 0 and not killed["services_alive_after"]
    assert f"the NATS server (pid {nats_pid} on b) died during the cell" in killed["error"]
    assert json.loads(killed["error_kinds"]).get("status", 0) > 0  # the front's 502s
    # Everything was restarted for the next cell, which had no error.
    assert after["errors"] == 0 and after["services_alive_after"] and pd.isna(after["error"])
    assert len(Run.open(run_path).manifest["services"]) == 2
    summary_line = [line for line in stdout.splitlines() if line.startswith("nats:")]
    assert summary_line and "requests failed; the NATS server" in summary_line[0], stdout
    assert lab_processes(lab) == []


def test_a_hop_cell_whose_nats_server_died_at_its_start_warns_with_its_counts_and_exits_1(lab, inventory, tmp_path):
    # nats-server killed as the cell starts: every request after fails, so more than half of the cell's do.
    with running_labkit("hop", str(inventory), "--load-host", "a", "--front", "a", "--back", "b", "--via", "nats",
                        "--tool", "wrk", "--duration", "3s", "--repeats", "1", "--ping-count", "1", "--name", "dead",
                        "--runs-dir", str(tmp_path), "--quiet") as proc:
        run_path = wait_for_cell_start(tmp_path, "dead")
        nats_pid = json.loads((run_path / "manifest.json").read_text())["services"][0]["nats"]["pid"]
        subprocess.run(["kill", "-9", str(nats_pid)], check=True)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr
    run = Run.open(run_path)
    row = run.samples().iloc[0]
    assert row["errors"] > row["requests"] / 2
    assert (f"labkit: warning: run {run.run_id} cell {row['cell_id']}: {int(row['errors']):,} of "
            f"{int(row['requests']):,} requests failed") in stderr
    assert lab_processes(lab) == []


def test_sigterm_stops_everything_and_resume_runs_what_is_missing(lab, inventory, tmp_path):
    with running_labkit("hop", str(inventory), "--load-host", "a", "--front", "a", "--back", "b", "--via", "direct,grpc",
                        "--tool", "wrk", "--duration", "2s", "--repeats", "1", "--ping-count", "1", "--name", "resumed", "--runs-dir",
                        str(tmp_path), "--quiet") as proc:
        run_path = wait_for_cell_start(tmp_path, "resumed")
        time.sleep(1.0)  # into the first cell
        proc.terminate()
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert lab_processes(lab) == [] and Run.open(run_path).status == "interrupted"
    resumed = run_labkit("hop", "--resume", run_path.name, "--runs-dir", str(tmp_path), "--quiet", timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    run = Run.open(run_path)
    assert run.status == "complete" and sorted(run.samples()["via"]) == ["direct", "grpc"]
    assert (run.samples()["errors"] == 0).all() and lab_processes(lab) == []


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--wrk", "/nonexistent/wrk"], "wrk is not on a (looked for /nonexistent/wrk); install Debian's wrk there "
                                        "(`apt-get install wrk`)"),
        (["--via", "grpc,quic"], "'quic' is not one of direct, grpc, http2, http2-tls, nats"),
        (["--duration", "1.5s"], "--duration must be whole seconds"),
        (["--tool", "ghz,iperf3"], "'iperf3' is not one of wrk, labkit-go, vegeta, ghz"),
        (["--tool", "wrk,wrk"], "--tool names a tool twice"),
        (["--front", "nowhere"], "nowhere"),
    ],
)
def test_bad_hop_input_is_one_line_exit_2(lab, inventory, tmp_path, args, expected):
    base = ["--load-host", "a", "--back", "b", "--duration", "1s", "--repeats", "1"]
    if "--front" not in args:
        base += ["--front", "a"]
    proc = run_labkit("hop", str(inventory), *base, *args, "--runs-dir", str(tmp_path), "--quiet", timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in proc.stderr, lines
    assert lab_processes(lab) == []

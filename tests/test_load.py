"""`labkit load`: h2load's parsers on recorded output."""

from __future__ import annotations

import pytest

from conftest import DATA
from labkit.parsers import ParseError
from labkit.parsers.h2load import parse_h2load, parse_h2load_log


def read(name: str) -> str:
    return (DATA / name).read_text()


# --- h2load's report and --log-file, recorded against `labkit echo serve` on loopback ------------


@pytest.mark.parametrize("name", ["timing_warmup", "timing_unpaced", "server_killed", "count_reset", "refused_timing",
                                  "refused_count"])
def test_every_line_of_an_h2load_report_is_accounted_for(name):
    result = parse_h2load(read(f"h2load/{name}.txt"))
    counts = result.counts
    assert counts["unrecognised"] == 0 and counts["lines"] == counts["blank"] + counts["parsed"]
    summary = result.summary
    requests = summary["requests"]
    assert requests["done"] == requests["succeeded"] + requests["failed"] or requests["started"] == 0
    assert set(summary["status_codes"]) == {"2xx", "3xx", "4xx", "5xx"}


def test_h2load_timing_report_with_warmup():
    summary = parse_h2load(read("h2load/timing_warmup.txt")).summary
    assert summary["mode"] == "timing" and summary["warmup_s"] == 1.0 and summary["duration_s"] == 2.0
    assert summary["clients"] == 2 and summary["threads"] == 1 and summary["protocol"] == "h2c"
    # Four streams were still open at the end: started, never done, and not counted as failed.
    assert summary["requests"] == {"total": 800, "started": 804, "done": 800, "succeeded": 800, "failed": 0,
                                   "errored": 0, "timeout": 0}
    assert summary["status_codes"]["2xx"] == 800
    assert summary["finished_s"] == 3.0 and summary["rps"] == 400.0  # succeeded over the 2 s measured, not the 3 s run
    assert summary["request_ms"] == {"min": pytest.approx(0.327), "max": pytest.approx(4.30), "mean": pytest.approx(0.937),
                                     "sd": pytest.approx(0.484), "within_sd_pct": 85.0}
    assert summary["traffic_bytes"] == {"total": 47736, "headers": 3744, "data": 8386}
    assert summary["client_rps"]["mean"] == pytest.approx(199.90)


@pytest.mark.parametrize("name", ["timing_warmup", "server_killed"])
def test_the_h2load_log_holds_the_measured_requests_and_agrees_with_the_report(name):
    summary = parse_h2load(read(f"h2load/{name}.txt")).summary
    log = parse_h2load_log(read(f"h2load/{name}.log.tsv"))
    rows = log.rows
    assert log.counts["unrecognised"] == 0 and len(rows) == summary["requests"]["total"]
    assert rows["ok"].all() and (rows["status"] == 200).all()
    # h2load prints three significant digits; the log has microseconds.
    printed = summary["request_ms"]
    assert rows["latency_ms"].min() == pytest.approx(printed["min"], abs=0.0005)
    assert rows["latency_ms"].max() == pytest.approx(printed["max"], abs=0.005)
    assert rows["latency_ms"].mean() == pytest.approx(printed["mean"], abs=0.0005)
    # The warm-up's requests are not in the log: every logged start lies within the measured 2 s.
    span_s = (rows["start_us"].max() - rows["start_us"].min()) / 1e6
    assert span_s < summary["duration_s"]
    assert rows["ok"].sum() / summary["duration_s"] == pytest.approx(summary["rps"])


def test_a_server_killed_under_h2load_shows_only_as_silence():
    """What h2load reports when the server dies 1 s into 2 s: nothing failed, just no answers after the kill."""
    summary = parse_h2load(read("h2load/server_killed.txt")).summary
    rows = parse_h2load_log(read("h2load/server_killed.log.tsv")).rows
    assert summary["requests"]["failed"] == 0 and summary["requests"]["errored"] == 0
    span_s = (rows["start_us"].max() - rows["start_us"].min()) / 1e6
    assert span_s < 1.1  # 200 paced requests answered in the first second, none after


def test_h2load_failed_streams_and_refused_connections():
    reset = parse_h2load(read("h2load/count_reset.txt")).summary
    assert reset["mode"] == "count" and reset["planned_requests"] == 5
    assert reset["requests"]["failed"] == 5 and reset["requests"]["succeeded"] == 0
    log = parse_h2load_log(read("h2load/count_reset.log.tsv"))
    assert log.counts["failed_streams"] == 5 and log.counts["ok"] == 0 and (log.rows["status"] == -1).all()

    refused = parse_h2load(read("h2load/refused_timing.txt")).summary
    # Refused in a timing-based run: no request, no failure, no protocol negotiated.
    assert refused["requests"]["total"] == 0 and refused["requests"]["failed"] == 0 and "protocol" not in refused
    counted = parse_h2load(read("h2load/refused_count.txt")).summary
    assert counted["requests"]["failed"] == 10 and counted["requests"]["started"] == 0
    assert counted["finished_s"] == pytest.approx(211e-6)


def test_h2load_parsers_refuse_other_text():
    with pytest.raises(ParseError, match="not h2load output"):
        parse_h2load(read("ghz/echo_ok.json"))
    with pytest.raises(ParseError, match="not an h2load --log-file"):
        parse_h2load_log(read("h2load/timing_warmup.txt"))

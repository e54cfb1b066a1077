"""`labkit import` on real logs: the 2016 ping-vs-gRPC logs and output recorded on this project's machines.

The expected counts come from the files' own descriptions (data/external/orca-2016/README.md,
tests/data/README.md) and the tools' closing statistics, not from running the importer.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import DATA, REPO, labkit, wait_for

from labkit.errors import LabkitError
from labkit.importers import experiment_for, guess_kind, import_files, read_log
from labkit.schemas import IPERF3_SCHEMA, SERIES_SCHEMA, describe

ORCA = REPO / "data" / "external" / "orca-2016"
PING = DATA / "ping"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def orca_run(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    lines: list[str] = []
    result = import_files([("ping", ORCA / "ping.txt.gz"), ("go-echo", ORCA / "echo.txt.gz")], out="orca", runs_dir=runs,
                          tz="America/New_York", log=lines.append)
    return result, lines


def test_the_2016_logs_become_one_ping_vs_echo_run(orca_run):
    result, _ = orca_run
    run = result.run
    assert result.experiment == run.manifest["experiment"] == "ping-vs-echo"
    assert run.status == "complete"
    table = pq.read_table(result.parquet)
    assert table.schema.equals(SERIES_SCHEMA, check_metadata=False)
    assert [f.name for f in table.schema] == [f.name for f in SERIES_SCHEMA]
    df = table.to_pandas()
    assert set(df["experiment"]) == {"ping-vs-echo"} and set(df["run_id"]) == {run.run_id}
    # ping -c 3600: one row per probe; the log's own statistics say 3593 received.
    ping = df[df["probe"] == "ping"]
    assert len(ping) == 3600 and ping["ok"].sum() == 3593
    lost = ping[~ping["ok"]]
    assert sorted(lost["seq"]) == [32, 403, 527, 2752, 2876, 2877, 3120]  # README: the lost probes
    assert lost["rtt_ms"].isna().all() and set(lost["error"]) == {"no reply"} and lost["unit"].isna().all()
    assert (ping["payload_bytes"] == 56).all() and set(ping["dst"]) == {"128.8.126.120"}
    # Every echo dialled a new connection: cold. 3600 calls, two written in seconds, kept in ms.
    echo = df[df["probe"] == "echo-cold"]
    assert len(echo) == 3600 and echo["ok"].all() and echo["cold"].all() and not ping["cold"].any()
    seconds = echo[echo["unit"] == "s"].sort_values("seq")
    assert seconds["seq"].tolist() == [2786, 3021]
    assert seconds["rtt_ms"].tolist() == pytest.approx([1868.983839, 2079.863882])
    assert (echo["unit"] == "ms").sum() == 3598
    # Go's log wrote local time; read as America/New_York (EDT, UTC-4) the first line is 12:24:56Z.
    first = echo.sort_values("seq").iloc[0]
    assert first["t_utc_ns"] == 1478089496 * 10**9
    assert not df["duplicate"].any()


def test_the_manifest_says_where_every_file_came_from(orca_run):
    result, _ = orca_run
    run = result.run
    imports = {i["kind"]: i for i in run.manifest["imports"]}
    for kind, name in (("ping", "ping.txt.gz"), ("go-echo", "echo.txt.gz")):
        record = imports[kind]
        source = ORCA / name
        assert record["source"]["path"] == str(source.absolute())
        assert record["source"]["sha256"] == sha256(source)
        assert record["source"]["size_bytes"] == source.stat().st_size and record["source"]["gzip"] is True
        copy = run.path / record["raw"]
        assert copy.parent == run.path / "raw" / kind and sha256(copy) == sha256(source)  # byte for byte
        tally = record["tally"]
        assert tally["lines"] == tally["parsed"] + tally["unrecognised"] + tally["blank"]
    assert imports["ping"]["tally"] == {"lines": 3605, "parsed": 3604, "unrecognised": 0, "blank": 1,
                                        "rows": 3600, "samples": 3593, "duplicates": 0, "lost": 7}
    assert imports["go-echo"]["tally"]["samples"] == 3600 and imports["go-echo"]["tally"]["unrecognised"] == 1
    assert imports["go-echo"]["unrecognised_lines"] == [[1, "go run cmd/orca.go ping -n 3600 128.8.126.120:3265"]]
    assert imports["go-echo"]["parser_counts"]["unit_s"] == 2
    assert imports["go-echo"]["options"] == {"tz": "America/New_York", "tz_assumed_utc": False, "src": None, "dst": None}
    assert run.samples()["source_file"].isin([imports["ping"]["raw"], imports["go-echo"]["raw"]]).all()


def test_every_file_gets_a_count_line(orca_run):
    _, lines = orca_run
    assert lines[0].startswith("ping.txt.gz: 3605 lines: 3604 parsed, 0 unrecognised, 1 blank; 3600 rows: 3593 samples, 7 lost")
    assert lines[1].startswith("echo.txt.gz: 3603 lines: 3602 parsed, 1 unrecognised")
    assert "(times written in ms ×3598, s ×2)" in lines[1]
    assert "unrecognised line 1: 'go run cmd/orca.go" in lines[2]


def test_schema_fields_are_documented():
    for schema in (SERIES_SCHEMA, IPERF3_SCHEMA):
        meanings = describe(schema)
        assert all(len(text) > 20 for text in meanings.values()), meanings
    assert SERIES_SCHEMA.field("rtt_ms").nullable and SERIES_SCHEMA.field("t_utc_ns").nullable
    assert not SERIES_SCHEMA.field("ok").nullable and not SERIES_SCHEMA.field("probe").nullable


# (file, rows, samples, lost, duplicates, unrecognised) — see tests/data/README.md for what each shows.
IPUTILS = [
    ("linux_lo.txt", 20, 20, 0, 0, 0),
    ("linux_lo_D.txt", 20, 20, 0, 0, 0),
    ("linux_loss_O_D.txt", 25, 19, 6, 0, 0),
    ("linux_loss_plain.txt", 25, 19, 6, 0, 0),
    ("linux_unreachable.txt", 8, 0, 8, 0, 0),
    ("linux_broadcast_dup.txt", 19, 10, 0, 9, 0),
    ("linux_broadcast_dup_v.txt", 19, 10, 0, 9, 2),  # -v prints two debug lines ping's parser does not know
]


@pytest.fixture(scope="module")
def iputils_run(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    return import_files([("ping", PING / name) for name, *_ in IPUTILS], out="iputils", runs_dir=runs, src="lab-a")


@pytest.mark.parametrize("name,rows,samples,lost,duplicates,unrecognised", IPUTILS)
def test_recorded_iputils_output(iputils_run, name, rows, samples, lost, duplicates, unrecognised):
    record = next(i for i in iputils_run.run.manifest["imports"] if i["cell_id"] == f"ping:{name}")
    tally = record["tally"]
    assert (tally["rows"], tally["samples"], tally["lost"], tally["duplicates"], tally["unrecognised"]) == (
        rows, samples, lost, duplicates, unrecognised)
    assert tally["lines"] == len((PING / name).read_text().splitlines())
    df = iputils_run.run.samples()
    cell = df[df["cell_id"] == record["cell_id"]]
    assert len(cell) == rows and set(cell["src"]) == {"lab-a"}
    assert cell["duplicate"].sum() == duplicates and (cell["error"] == "duplicate").sum() == duplicates
    if name.startswith("linux_loss"):
        assert sorted(cell.loc[~cell["ok"], "seq"]) == list(range(8, 14))  # README: seq 8–13 lost
    if name == "linux_unreachable.txt":
        assert cell["error"].str.contains("Destination Host Unreachable").all()
    if name in ("linux_lo_D.txt", "linux_loss_O_D.txt", "linux_broadcast_dup.txt"):  # recorded with -D
        assert cell.loc[cell["ok"], "t_utc_ns"].notna().all()  # -D stamps each reply
    else:
        assert cell["t_utc_ns"].isna().all()


# Recorded on the testbed with real losses (tests/data/README.md): the probes lost while the receiver was down.
LOSSES = {
    "busybox_loss.txt": (25, range(6, 13)), "busybox_loss_s.txt": (25, range(6, 13)),
    "busybox_tail_loss.txt": (10, range(7, 10)), "inetutils_loss.txt": (25, range(6, 13)),
    "inetutils_tail_loss.txt": (10, range(7, 10)), "iputils_loss.txt": (25, range(7, 14)),
    "iputils_loss_D.txt": (25, range(7, 14)), "iputils_loss_O.txt": (25, range(7, 14)),
    "iputils_loss_O_D.txt": (25, range(7, 14)), "iputils_loss_s.txt": (25, range(7, 14)),
}


@pytest.fixture(scope="module")
def implementations_run(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    return import_files([("ping", PING / name) for name in LOSSES], out="implementations", runs_dir=runs)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_every_ping_implementation_imports_replies_and_each_lost_probe_once(implementations_run, name):
    probes, lost = LOSSES[name]
    first = 1 if name.startswith("iputils") else 0  # iputils numbers from 1, busybox and inetutils from 0
    text = (PING / name).read_text()
    df = implementations_run.run.samples()
    cell = df[df["cell_id"] == f"ping:{name}"].sort_values("seq")
    assert cell["seq"].tolist() == list(range(first, first + probes))
    replies = [int(n) for n in re.findall(r" bytes from [^:]+: (?:icmp_)?seq=(\d+) ", text)]
    assert cell.loc[cell["ok"], "seq"].tolist() == replies
    assert cell.loc[cell["ok"], "rtt_ms"].tolist() == [float(t) for t in re.findall(r"time=([\d.]+) ms", text)]
    assert cell.loc[~cell["ok"], "seq"].tolist() == list(lost)
    assert set(cell.loc[~cell["ok"], "error"]) == {"no reply"} and not cell["duplicate"].any()
    if "_D" in name:  # -D stamps each reply
        assert cell.loc[cell["ok"], "t_utc_ns"].notna().all()


def test_a_gzipped_log_imports_like_the_plain_one(tmp_path):
    packed = tmp_path / "loss.txt.gz"
    packed.write_bytes(gzip.compress((PING / "linux_loss_O_D.txt").read_bytes()))
    plain, zipped = read_log("ping", PING / "linux_loss_O_D.txt"), read_log("ping", packed)
    assert zipped.rows == plain.rows and zipped.tally() == plain.tally()


def test_a_header_met_after_rows_were_spooled_is_every_rows(tmp_path):
    """Two recorded ping runs one after the other in a file: the second's header comes after the first's
    rows were spooled (its 100,000 probes are more than a chunk of text, and icmp_seq's half range), and every row of the import names
    the file's last target, as the run's summary does, whether the spool became the run as it was or not."""
    lines = gzip.decompress((ORCA / "ping.txt.gz").read_bytes()).decode().splitlines()
    replies = [re.sub(r"icmp_seq=\d+", "icmp_seq={}", line) for line in lines if " bytes from " in line]
    first = "".join(replies[seq % len(replies)].format(seq % 65536) + "\n" for seq in range(100_000))
    second = (PING / "busybox_loss.txt").read_text()  # a header, replies from seq 0, statistics
    log = tmp_path / "two.txt"
    log.write_text(lines[0] + "\n" + first + second)
    result = import_files([("ping", log)], out="two", runs_dir=tmp_path / "runs")
    assert result.files[0].late_columns() == {"dst": "198.18.1.2", "payload_bytes": 56}  # spooled before it
    rows = pq.read_table(result.parquet, columns=["dst", "payload_bytes"])
    assert set(rows["dst"].to_pylist()) == {"198.18.1.2"} and set(rows["payload_bytes"].to_pylist()) == {56}
    assert result.run.manifest["imports"][0]["parser_summary"]["target_address"] == "198.18.1.2"


def test_ghz_calls_and_failures(tmp_path):
    result = import_files([("ghz", DATA / "ghz" / n) for n in ("echo_ok.json", "echo_errors.json", "echo_refused.json")],
                          out="ghz", runs_dir=tmp_path)
    assert result.experiment == "import-ghz"
    df = result.run.samples()
    by_cell = df.groupby("cell_id")["ok"].agg(["size", "sum"])
    assert by_cell.loc["ghz:echo_ok.json"].tolist() == [200, 200]
    assert by_cell.loc["ghz:echo_errors.json"].tolist() == [200, 180]
    assert by_cell.loc["ghz:echo_refused.json"].tolist() == [20, 0]
    failed = df[~df["ok"]]
    assert failed["error"].str.startswith(("ResourceExhausted", "Unavailable")).all()
    assert set(df.loc[df["cell_id"] == "ghz:echo_refused.json", "dst"]) == {"127.0.0.1:5319"}  # the report's options.host
    summary = next(i for i in result.run.manifest["imports"] if i["cell_id"] == "ghz:echo_errors.json")["parser_summary"]
    assert summary["status_codes"] == {"OK": 180, "ResourceExhausted": 20}


def test_iperf3_reports_get_their_own_table(tmp_path):
    names = ["client_100M.json", "tcp_50M.json", "tcp_50M_R.json", "udp_10M_loss.json", "udp_10M_R_loss.json"]
    result = import_files([("iperf3", DATA / "iperf3" / n) for n in names], out="iperf", runs_dir=tmp_path)
    table = pq.read_table(result.parquet)
    assert table.schema.equals(IPERF3_SCHEMA, check_metadata=False)
    df = table.to_pandas()
    raw = {n: json.loads((DATA / "iperf3" / n).read_text()) for n in names}
    for name in names:  # every interval of every report
        cell = df[df["cell_id"] == f"iperf3:{name}"]
        assert cell["interval"].tolist() == list(range(len(raw[name]["intervals"])))
    assert set(df.loc[df["cell_id"] == "iperf3:client_100M.json", "dst"]) == {"127.0.0.1"}
    # UDP received with -R: the client's intervals keep the receiver's jitter and losses.
    udp = df[df["cell_id"] == "iperf3:udp_10M_R_loss.json"]
    streams = [i["streams"][0] for i in raw["udp_10M_R_loss.json"]["intervals"]]
    for column in ("jitter_ms", "lost_packets", "packets", "lost_percent"):
        assert udp[column].tolist() == [s[column] for s in streams]
    assert udp["lost_packets"].sum() == 893  # README
    tcp = df[df["cell_id"] == "iperf3:tcp_50M.json"]
    assert tcp["snd_wnd_bytes"].tolist() == [i["streams"][0]["snd_wnd"] for i in raw["tcp_50M.json"]["intervals"]]
    assert tcp["jitter_ms"].isna().all()
    # The end summary of each report is a fact of its file: in the manifest.
    records = {i["cell_id"]: i for i in result.run.manifest["imports"]}
    summary = records["iperf3:udp_10M_loss.json"]["parser_summary"]
    end = raw["udp_10M_loss.json"]["end"]
    assert summary["sum_sent"] == end["sum_sent"] and summary["sum_received"] == end["sum_received"]
    assert (summary["lost_packets"], summary["packets"]) == (891, 3551)
    assert summary["sender_cpu_percent"]["total"] == end["cpu_utilization_percent"]["host_total"]
    assert summary["receiver_cpu_percent"]["total"] == end["cpu_utilization_percent"]["remote_total"]
    reverse = records["iperf3:tcp_50M_R.json"]["parser_summary"]
    assert reverse["sender_cpu_percent"]["total"] == raw["tcp_50M_R.json"]["end"]["cpu_utilization_percent"]["remote_total"]
    with pytest.raises(LabkitError, match="do not share a run"):
        import_files([("ping", PING / "linux_lo.txt")], out=str(result.run.path), append=True)


@pytest.mark.parametrize("name", ["client_refused.json", "testbed_refused.json"])
def test_an_iperf3_report_with_an_error_is_not_an_empty_run(tmp_path, name):
    with pytest.raises(LabkitError, match="iperf3 reported an error: unable to connect to server: Connection refused"):
        import_files([("iperf3", DATA / "iperf3" / name)], out="refused", runs_dir=tmp_path)
    assert not any(tmp_path.iterdir())


def test_appending_go_echo_to_a_ping_import_makes_it_ping_vs_echo(tmp_path):
    first = import_files([("ping", PING / "linux_loss_plain.txt")], out="pair", runs_dir=tmp_path)
    assert first.experiment == "import-ping"
    second = import_files([("go-echo", ORCA / "echo.txt.gz")], out="pair", runs_dir=tmp_path, append=True)
    assert second.run.path == first.run.path and second.experiment == "ping-vs-echo"
    df = second.run.samples()
    assert len(df) == 25 + 3600 and set(df["experiment"]) == {"ping-vs-echo"}
    assert df.loc[df["probe"] == "ping", "attempt"].eq(2).all()  # relabelled as a second attempt of its cell
    # No journal: the rows go straight to samples.parquet, which each import replaces whole.
    assert not (second.run.path / "samples.jsonl").exists()
    assert [(e["cell"], e["attempt"], e["event"]) for e in second.run.cell_events()] == [
        ("ping:linux_loss_plain.txt", 1, "start"), ("ping:linux_loss_plain.txt", 1, "complete"),
        ("ping:linux_loss_plain.txt", 2, "start"), ("go-echo:echo.txt.gz", 1, "start"),
        ("ping:linux_loss_plain.txt", 2, "complete"), ("go-echo:echo.txt.gz", 1, "complete")]
    with pytest.raises(LabkitError, match="already in"):
        import_files([("go-echo", ORCA / "echo.txt.gz")], out="pair", runs_dir=tmp_path, append=True)


def test_experiment_names():
    assert experiment_for(["ping"]) == "import-ping"
    assert experiment_for(["ping", "go-echo", "ping"]) == "ping-vs-echo"
    assert experiment_for(["ghz", "idle-step"]) == "import-ghz+idle-step"


def test_guess_kind_on_recorded_output():
    assert guess_kind((DATA / "iperf3" / "client_100M.json").read_text()) == "iperf3"
    assert guess_kind((DATA / "ghz" / "echo_ok.json").read_text()) == "ghz"
    assert guess_kind((PING / "linux_lo.txt").read_text()) == "ping"
    assert guess_kind((PING / "busybox_loss.txt").read_text()) == "ping"  # seq=, not icmp_seq=
    assert guess_kind((DATA / "idle_step" / "standin_loopback.txt").read_text()) == "idle-step"
    assert guess_kind(gzip.decompress((ORCA / "echo.txt.gz").read_bytes()).decode()) == "go-echo"


# --- through the console script --------------------------------------------------------------------


def test_console_script_imports_and_prints_counts(tmp_path):
    proc = labkit("import", "ping", str(PING / "linux_loss_O_D.txt"), "idle-step", str(DATA / "idle_step" / "standin_loopback.txt"),
                  "--out", "cli", "--runs-dir", str(tmp_path), check=True)
    out = proc.stdout.splitlines()
    assert out[0] == "linux_loss_O_D.txt: 30 lines: 29 parsed, 0 unrecognised, 1 blank; 25 rows: 19 samples, 6 lost, 0 duplicates"
    assert out[1].startswith("standin_loopback.txt: 16 lines: 16 parsed, 0 unrecognised")
    assert "experiment import-idle-step+ping, 2 file(s) imported, 37 rows" in out[-1]
    (run_dir,) = tmp_path.iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and [i["kind"] for i in manifest["imports"]] == ["ping", "idle-step"]


def test_console_script_prints_an_iperf3_reports_end_summary(tmp_path):
    proc = labkit("import", "iperf3", str(DATA / "iperf3" / "udp_10M_loss.json"), str(DATA / "iperf3" / "tcp_50M.json"),
                  "--out", "cli", "--runs-dir", str(tmp_path), check=True)
    out = proc.stdout.splitlines()
    # README: 891 of 3551 datagrams lost; 25.09 % and 0 retransmits as sum_received / sum_sent say.
    assert out[0].startswith("udp_10M_loss.json: iperf3 report, 4 intervals, 4 rows; UDP sent 4999808 bytes (10.0 Mbit/s), "
                             "received 3745280 bytes (7.5 Mbit/s), 891 of 3551 datagrams lost (25.09 %), jitter ")
    assert out[1].startswith("tcp_50M.json: iperf3 report, 3 intervals, 3 rows; TCP sent 18874368 bytes (50.3 Mbit/s)")
    assert out[1].endswith(", 0 retransmits")


@pytest.mark.parametrize(
    "args,message",
    [
        (["ping", str(DATA / "iperf3" / "client_100M.json")], "no ping output found (0 of 149 lines parsed, 149 unrecognised"),
        (["ping", "/nonexistent/ping.txt"], "no such file: /nonexistent/ping.txt"),
        (["ghz", str(DATA / "iperf3" / "client_100M.json")], "not ghz JSON"),
        (["go-echo", str(PING / "linux_lo.txt")], "it looks like ping output: labkit import ping"),
        (["pong", str(PING / "linux_lo.txt")], "expected a KIND before 'pong'"),
        (["ping"], "no FILE given after ping"),
        # A reply line labkit cannot read (inetutils in de_DE writes time=10,236 ms) is not a loss.
        (["ping", str(PING / "iputils_loss.txt"), str(PING / "inetutils_loss_de_DE.txt")],
         "inetutils_loss_de_DE.txt: line 2 cannot be read as ping output and may be a reply: "
         "'64 bytes from 198.18.1.2: icmp_seq=0 ttl=64 time=10,236 ms'; nothing imported"),
        (["ping", str(PING / "busybox_loss_q.txt")],
         "busybox_loss_q.txt: ping counted 18 replies but printed 0 (was it run with -q?); nothing imported"),
        (["iperf3", str(DATA / "iperf3" / "testbed_refused.json")],
         "testbed_refused.json: iperf3 reported an error: unable to connect to server: Connection refused; nothing imported"),
    ],
)
def test_console_script_errors_are_one_line_and_exit_2(tmp_path, args, message):
    proc = labkit("import", *args, "--out", "bad", "--runs-dir", str(tmp_path))
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("labkit: error:")
    assert message in proc.stderr
    assert not any(tmp_path.iterdir())  # nothing was written


def test_the_shipped_sample_is_what_import_makes_today(orca_run):
    """data/samples/orca-2016 was made by `labkit import` (see its README); re-importing gives the same rows."""
    from labkit.store import Run

    result, _ = orca_run
    sample = Run.open(REPO / "data" / "samples" / "orca-2016")
    assert sample.manifest["experiment"] == "ping-vs-echo"
    shipped = sample.samples().drop(columns="run_id")
    fresh = result.run.samples().drop(columns="run_id")
    assert shipped.equals(fresh), "the shipped sample is stale: regenerate it (data/samples/orca-2016/README.md)"
    assert [i["tally"] for i in sample.manifest["imports"]] == [i["tally"] for i in result.run.manifest["imports"]]
    assert pq.read_schema(sample.path / "samples.parquet").equals(SERIES_SCHEMA, check_metadata=False)


def test_appending_to_a_run_without_a_journal_keeps_its_rows(tmp_path):
    """A shipped sample has no journal (it is removed); its rows are in samples.parquet, which an append keeps."""
    import shutil

    from labkit.store import Run

    copy = tmp_path / "orca-2016"
    shutil.copytree(REPO / "data" / "samples" / "orca-2016", copy)
    before = Run.open(copy).samples()
    after = import_files([("ping", PING / "linux_lo.txt")], out=str(copy), append=True).run.samples()
    assert len(after) == len(before) + 20
    assert after.iloc[:len(before)].drop(columns=["attempt", "experiment"]).equals(
        before.drop(columns=["attempt", "experiment"]))
    assert set(after["experiment"]) == {"ping-vs-echo"}


# --- bad input: every importer, one line and exit 2 ---------------------------------------------------------

#: A real recorded file of each kind, and one of another kind (the wrong format).
RECORDED = {
    "ping": PING / "linux_lo.txt",
    "go-echo": ORCA / "echo.txt.gz",
    "idle-step": DATA / "idle_step" / "standin_loopback.txt",
    "iperf3": DATA / "iperf3" / "tcp_50M.json",
    "ghz": DATA / "ghz" / "echo_ok.json",
}
WRONG = {"ping": "go-echo", "go-echo": "ping", "idle-step": "ping", "iperf3": "ghz", "ghz": "iperf3"}
LOGS = ("ping", "go-echo", "idle-step")


def _recorded_text(kind: str) -> bytes:
    data = RECORDED[kind].read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _cut_mid_line(data: bytes) -> bytes:
    """The file as a copy cut short leaves it: ending halfway through its middle line."""
    lines = data.splitlines(keepends=True)
    middle = len(lines) // 2
    return b"".join(lines[:middle]) + lines[middle][: len(lines[middle]) // 2]


def _bad_input(kind: str, case: str, where: Path) -> tuple[Path, str]:
    """A file of ``case`` for ``kind``, and what the one line about it must say."""
    import random

    path = where / f"{kind}-{case}"
    log = kind in LOGS
    if case == "empty":
        path.write_bytes(b"")
        return path, "the file is empty"
    if case == "binary":
        path.write_bytes(random.Random(15).randbytes(2**16))
        return path, f"no {kind} output found" if log else "not JSON"
    if case == "truncated":
        path.write_bytes(_cut_mid_line(_recorded_text(kind)))
        return path, f"cannot be read as {kind} output and may be a reply" if log else "invalid JSON"
    if case == "truncated-gzip":
        packed = gzip.compress(_recorded_text(kind))
        path.write_bytes(packed[: len(packed) // 2])
        return path, "damaged gzip file"
    if case == "wrong-format":
        path.write_bytes(_recorded_text(WRONG[kind]))
        return path, f"it looks like {WRONG[kind]} output: labkit import {WRONG[kind]}"
    assert case == "huge"  # 2 GiB (sparse): refused long before its end
    with open(path, "wb") as out:
        if log:  # 17 MiB of another tool's real output, then zeros
            line = _recorded_text(WRONG[kind] if WRONG[kind] in LOGS else "iperf3")
            while out.tell() < 17 * 2**20:
                out.write(line)
        else:
            out.write(b"{")
        out.truncate(2 * 2**30)
    return path, f"no {kind} output in its first 16 MiB" if log else "more than 32 MiB of text"


@pytest.mark.parametrize("case", ["empty", "binary", "truncated", "truncated-gzip", "wrong-format", "huge"])
@pytest.mark.parametrize("kind", list(RECORDED))
def test_every_importer_answers_bad_input_in_one_line_with_exit_2(tmp_path, kind, case):
    """Issue 15: any input file (empty, binary, truncated, wrong format, gigabytes) gets one line and exit 2."""
    from labkit.importers import KINDS

    assert set(RECORDED) == set(KINDS)  # a new kind gets these inputs too
    path, message = _bad_input(kind, case, tmp_path)
    runs = tmp_path / "runs"
    proc = labkit("import", kind, str(path), "--out", "bad", "--runs-dir", str(runs))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("labkit: error:"), proc.stderr
    assert str(path) in proc.stderr and message in proc.stderr, proc.stderr
    assert not runs.exists() or not any(runs.iterdir())  # nothing was written


def test_the_recorded_files_of_every_kind_import(tmp_path):
    """The files the bad inputs are made from are good ones: each imports as its kind."""
    for kind, path in RECORDED.items():
        assert read_log(kind, path).tally()["rows"] > 0


@pytest.mark.parametrize("stop_signal,status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_an_import_stopped_by_a_signal_leaves_nothing(tmp_path, stop_signal, status):
    """Ctrl-C or SIGTERM while a large log is read: one line, 128 + the signal, no spool and no run left.

    The log is the 2016 ping log's recorded replies, 65,536 of them numbered as ping numbers them (icmp_seq 0 to
    65535), that block repeated as a long run wraps icmp_seq: about 130 MB, which labkit reads in about a second on
    an idle machine (a loaded one had read 60 MB before the signal could come). The signal is sent once the
    import's spool exists, i.e. while it reads."""
    import os
    import signal
    import subprocess

    from conftest import LABKIT

    lines = gzip.decompress((ORCA / "ping.txt.gz").read_bytes()).decode().splitlines()
    replies = [re.sub(r"icmp_seq=\d+", "icmp_seq={}", line) for line in lines if " bytes from " in line]
    block = "".join(replies[seq % len(replies)].format(seq) + "\n" for seq in range(65536)).encode()
    # A machine busy enough can keep this test from running between the spool's start and the import's end (the
    # import finished, exit 0, before its signal came, once in a fresh clone's suite): that run tested nothing, and
    # the next is three times as long. The signal's handling is what is asserted, on a run it reached.
    for blocks in (32, 96):
        attempt = tmp_path / str(blocks)
        attempt.mkdir()
        log = attempt / "ping.txt"
        log.write_bytes((lines[0] + "\n").encode() + block * blocks)
        spools, runs = attempt / "tmp", attempt / "runs"
        spools.mkdir()
        proc = subprocess.Popen([LABKIT, "import", "ping", str(log), "--out", "stopped", "--runs-dir", str(runs)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "TMPDIR": str(spools)})
        wait_for(lambda: any(spools.iterdir()) or proc.poll() is not None, 120, "the import's spool file or its end")
        proc.send_signal(getattr(signal, stop_signal))
        _, err = proc.communicate(timeout=60)
        if proc.returncode != 0:
            break
        log.unlink()
    assert proc.returncode == status and err.strip().splitlines() == ["labkit: interrupted"]
    assert not any(spools.iterdir()) and not (runs.exists() and any(runs.iterdir()))


def test_progress_is_told_each_files_bytes_as_they_are_read(tmp_path):
    """What the terminal's bar shows (`labkit import` on a terminal): bytes read so far, per file, up to its size."""
    seen: dict[Path, list[int]] = {}
    files = [("ping", ORCA / "ping.txt.gz"), ("go-echo", ORCA / "echo.txt.gz")]
    import_files(files, out="progress", runs_dir=tmp_path, progress=lambda path, done: seen.setdefault(path, []).append(done))
    assert list(seen) == [path for _, path in files]
    for path, counts in seen.items():
        assert counts == sorted(counts) and counts[-1] == path.stat().st_size


def test_a_reader_whose_caller_stopped_ends_though_its_queue_is_full():
    """The read-ahead thread fills its queue and reaches the log's end while the caller, which refused the file
    after the first chunk, takes nothing more: closing the caller's side must end the thread, not wait on it
    for ever (a 2 GiB log refused after 16 MiB hung the import this way)."""
    import threading

    from labkit.importers.source import ahead

    reached_the_end = threading.Event()

    def chunks():
        yield from ("first", "second", "third")  # the caller takes one; two fill the queue
        reached_the_end.set()

    stream = ahead(chunks(), depth=2)
    assert next(stream) == "first"
    assert reached_the_end.wait(timeout=60)
    closing = threading.Thread(target=stream.close, daemon=True)
    closing.start()
    closing.join(timeout=60)
    assert not closing.is_alive(), "the caller waited for a reader that waited for room in the queue"


# --- what a number inside a log may make: bounded by the file -------------------------------------------------------

#: The address space an import of a few lines gets (its libraries take about 500 MB of it with one BLAS thread): a
#: gap of a billion seqs made as rows, or as an array over the gap, fails at once instead of eating the machine.
IMPORT_ADDRESS_SPACE = 768 * 2**20


def _limit_address_space() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (IMPORT_ADDRESS_SPACE, IMPORT_ADDRESS_SPACE))


def _import_bounded(tmp_path: Path, kind: str, text: str, compiled: bool):
    """``labkit import KIND`` of ``text`` in a process of bounded memory, with or without the compiled reader."""
    import os

    from labkit.parsers.compiled import DISABLE_ENV

    path, runs = tmp_path / f"{kind}.txt", tmp_path / "runs"
    path.write_text(text)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", DISABLE_ENV: "0" if compiled else "1"}
    proc = labkit("import", kind, str(path), "--out", "bounded", "--runs-dir", str(runs), env=env,
                  preexec_fn=_limit_address_space)
    return path, runs, proc


def _three_lines(kind: str, last_seq: int) -> str:
    """Three lines of a 2016 log (ping: its header and first two replies; go-echo: its first three calls), the last
    one's sequence number made ``last_seq``."""
    if kind == "ping":
        lines = gzip.decompress((ORCA / "ping.txt.gz").read_bytes()).decode().splitlines()[:3]
        lines[2] = re.sub(r"icmp_seq=\d+", f"icmp_seq={last_seq}", lines[2])
    else:
        lines = gzip.decompress((ORCA / "echo.txt.gz").read_bytes()).decode().splitlines()[1:4]
        lines[2] = re.sub(r" seq=\d+", f" seq={last_seq}", lines[2])
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "regex"])
@pytest.mark.parametrize("kind", ["ping", "go-echo"])
def test_a_gap_in_the_numbers_makes_rows_bounded_by_the_file(tmp_path, kind, compiled):
    """A three-line log whose last seq is 100,002 imports every probe (call) it skips as a lost row; one whose
    last seq is 999,999,999 (which once took 24 GB) is refused in one line naming it, in bounded memory, with or
    without the compiled reader."""
    _, runs, proc = _import_bounded(tmp_path, kind, _three_lines(kind, 100_002), compiled)
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = runs.iterdir()
    (record,) = json.loads((run_dir / "manifest.json").read_text())["imports"]
    # ping: seq 0 to 100,002 (BSD's ping numbers from 0), two replies; go-echo: seq 1 to 100,002, three calls.
    first, rows, samples = {"ping": (0, 100_003, 2), "go-echo": (1, 100_002, 3)}[kind]
    assert {k: record["tally"][k] for k in ("rows", "samples", "lost")} == {
        "rows": rows, "samples": samples, "lost": rows - samples}
    assert record["parser_counts"]["lost" if kind == "ping" else "missing"] == rows - samples
    assert pq.read_metadata(run_dir / "samples.parquet").num_rows == rows

    for seq in (999_999_999, 9_999_999_999):
        where = tmp_path / str(seq)
        where.mkdir()
        path, runs, proc = _import_bounded(where, kind, _three_lines(kind, seq), compiled)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith(f"labkit: error: {path}: line 3"), proc.stderr
        if kind == "go-echo" or seq < 10**9:  # ping's pattern takes nine digits: a tenth makes the line unreadable
            assert f"seq {seq} leaves {seq - first - 2} " in proc.stderr and "not " in proc.stderr, proc.stderr
        assert not runs.exists()


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "regex"])
def test_a_ping_count_far_past_its_lines_is_refused_in_bounded_memory(tmp_path, compiled):
    """ping's closing statistics, from the 2016 log, saying 50,000,000 probes were sent after three lines: the
    probes without a line are rows only up to what a log of its size may infer, so this is one line, exit 2."""
    lines = gzip.decompress((ORCA / "ping.txt.gz").read_bytes()).decode().splitlines()
    footer = [re.sub(r"^\d+ packets transmitted", "50000000 packets transmitted", line) for line in lines[-3:]]
    assert footer[1].startswith("50000000 packets transmitted")
    path, runs, proc = _import_bounded(tmp_path, "ping", "\n".join(lines[:3] + footer) + "\n", compiled)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "ping statistics say 50000000 packets were transmitted, far more than the output shows" in proc.stderr
    assert not runs.exists()


# --- times the tables cannot hold ----------------------------------------------------------------------------------

@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "regex"])
@pytest.mark.parametrize("kind,stamp", [("go-echo", "9999/12/31 23:59:59"), ("ping", "[99999999999.5]")])
def test_a_time_the_tables_cannot_hold_is_one_line_and_exit_2_both_ways(tmp_path, kind, stamp, compiled):
    """A real log with line 4 dated past 2262 (which the compiled reader once stored as 1816, and a ping stamp both
    ways as another time): one line naming line 4, exit 2, nothing written, with or without the compiled reader."""
    if kind == "go-echo":
        lines = gzip.decompress((ORCA / "echo.txt.gz").read_bytes()).decode().splitlines()[:8]
        lines[3] = stamp + lines[3][len(stamp):]
    else:
        lines = (PING / "linux_lo_D.txt").read_text().splitlines()
        lines[3] = re.sub(r"^\[[\d.]+\]", lambda _: stamp, lines[3])
    path, runs, proc = _import_bounded(tmp_path, kind, "\n".join(lines) + "\n", compiled)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"labkit: error: {path}: line 4: ") and stamp in proc.stderr
    assert "is outside the times labkit can store (1677-09-21 00:12:43.145224193 to 2262-04-11" in proc.stderr
    assert not runs.exists()

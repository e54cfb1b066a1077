"""Every run in a runs directory as tables to query (``labkit runs query``, :func:`query`), through DuckDB.

Three views, joined on ``run_id``:

- ``runs``: one row per run, from its manifest: ``run_id``, ``name``, ``experiment``, ``status``, ``started_utc``
  and ``ended_utc`` (timestamps, UTC), ``labkit_version``, ``git_commit``, ``git_dirty``, ``replicate_group``,
  ``replicate_index``, ``link`` (the emulated link's settings, each direction), ``kernel``, ``cc`` and
  ``slow_start_after_idle`` (the first host's), ``grpcio``, ``grpc_go``, ``go`` (the server's), ``path``, and the
  whole ``manifest`` as JSON text (DuckDB's ``->>`` reads into it);
- ``facts``: ``run_id``, ``what``, ``value``: every fact :func:`run_facts` reads from a manifest (what ``labkit
  compare`` diffs), one row each;
- ``samples``: every finished run's ``samples.parquet``, their columns united by name (a column a run's experiment
  does not have is NULL in its rows). A run still running has no Parquet file yet and no rows here.

The Parquet files are read by DuckDB where they lie, never loaded whole into Python. A run directory whose files
are not what labkit writes is left out, and named on stderr (:func:`labkit.store.list_runs`).

A query only reads: it is one SELECT statement; DuckDB reads no file outside the runs directory (nor loads
extensions, nor spills to disk), holds at most :data:`QUERY_MEMORY_GIB` GiB, stops after a timeout
(:data:`QUERY_TIMEOUT_S` unless given) and answers at most :data:`MAX_RESULT_ROWS` rows; the connection's settings
are locked before the query runs.
"""

from __future__ import annotations

import json
import os
from typing import Any

from labkit.errors import LabkitError
from labkit.store import list_runs, runs_root

#: Config fields that name or locate a run rather than set what it measures.
NOT_SETTINGS = {"name", "inventory"}
#: The limits of a query: DuckDB's memory (a query that needs more fails, naming the limit), its time, and the rows
#: it answers with (a DataFrame, outside DuckDB's memory: ten million rows of samples would be gigabytes).
QUERY_MEMORY_GIB = 1
QUERY_TIMEOUT_S = 60.0
MAX_RESULT_ROWS = 1_000_000


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def servers(manifest: dict) -> list[dict]:
    """The echo servers a run started, as a list (a series keeps them by cell)."""
    found = manifest.get("servers") or []
    return list(found.values()) if isinstance(found, dict) else list(found)


def run_facts(manifest: dict) -> dict[str, str]:
    """What a run's manifest says it was made with, flat, ``what -> value`` (values as text): the experiment and its
    config, the emulated link and the emulator's drops and lateness flag, each host's kernel, sysctls, route
    congestion control, MTU, qdisc, tools and Python libraries, labkit's version and git commit, the controller's
    libraries, and each echo server's versions."""
    facts: dict[str, str] = {"experiment": str(manifest.get("experiment"))}
    for key, value in sorted((manifest.get("config") or {}).items()):
        if key not in NOT_SETTINGS:
            facts[f"config {key}"] = _text(value)
    for window in (manifest.get("emulator") or {}).get("windows", [])[:1]:
        for direction, link in sorted((window.get("links") or {}).items()):
            facts[f"link {direction}"] = link
        for direction, d in sorted((window.get("directions") or {}).items()):
            facts[f"emulator {direction} late"] = _text(bool(d.get("late")))
            facts[f"emulator {direction} drops"] = _text(sum((d.get("drops") or {}).values()))
    for name, host in sorted((manifest.get("hosts") or {}).items()):
        facts[f"host {name} kernel"] = str(host.get("kernel"))
        for key, value in sorted((host.get("sysctl") or {}).items()):
            facts[f"host {name} {key}"] = str(value)
        route = host.get("route_to_peer") or {}
        facts[f"host {name} route congctl"] = str(route.get("congctl") or "default")
        facts[f"host {name} MTU"] = str(route.get("mtu") or host.get("interface_mtu"))
        facts[f"host {name} qdisc"] = _text(host.get("qdisc"))
        for tool, version in sorted({**(host.get("tools") or {}), **(host.get("python") or {})}.items()):
            facts[f"host {name} {tool}"] = str(version)
    provenance = manifest.get("provenance") or {}
    git = provenance.get("git") or {}
    facts["labkit"] = str(provenance.get("labkit_version"))
    facts["git commit"] = str(git.get("commit"))
    facts["git dirty"] = _text(bool(git.get("dirty")))
    facts["python"] = str(provenance.get("python"))
    for library, version in sorted((provenance.get("libraries") or {}).items()):
        facts[f"library {library}"] = str(version)
    for server in servers(manifest):
        for key in ("labkit_version", "grpcio_version", "grpc_go_version", "go_version"):
            if server.get(key):
                facts[f"server {server.get('host', '?')} {server.get('impl')} {key.removesuffix('_version')}"] = \
                    str(server[key])
    return facts


def _run_row(run) -> dict[str, Any]:
    manifest = run.manifest
    provenance = manifest.get("provenance") or {}
    replicate = manifest.get("replicate") or {}
    hosts = list((manifest.get("hosts") or {}).values())
    first = hosts[0] if hosts else {}
    sysctl = first.get("sysctl") or {}
    windows = (manifest.get("emulator") or {}).get("windows") or []
    links = (windows[0].get("links") or {}) if windows else {}
    server = next(iter(servers(manifest)), {})
    return {
        "run_id": run.run_id, "name": manifest.get("name"), "experiment": manifest.get("experiment"),
        "status": manifest.get("status"), "started_utc": manifest.get("started_utc"),
        "ended_utc": manifest.get("ended_utc"), "labkit_version": provenance.get("labkit_version"),
        "git_commit": (provenance.get("git") or {}).get("commit"),
        "git_dirty": (provenance.get("git") or {}).get("dirty"),
        "replicate_group": replicate.get("group"), "replicate_index": replicate.get("index"),
        "link": "; ".join(f"{d} {text}" for d, text in sorted(links.items())) or None,
        "kernel": first.get("kernel"),
        "cc": ((first.get("route_to_peer") or {}).get("congctl") or sysctl.get("net.ipv4.tcp_congestion_control")),
        "slow_start_after_idle": sysctl.get("net.ipv4.tcp_slow_start_after_idle"),
        "grpcio": server.get("grpcio_version") or (provenance.get("libraries") or {}).get("grpcio"),
        "grpc_go": server.get("grpc_go_version"), "go": server.get("go_version"),
        "path": str(run.path), "manifest": json.dumps(manifest, sort_keys=True, default=str),
    }


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def connect(runs_dir: str | os.PathLike | None = None, timeout_s: float = QUERY_TIMEOUT_S):
    """A DuckDB connection (in memory) with the ``runs``, ``facts`` and ``samples`` views over ``runs_dir``, reading
    no file outside it, within :data:`QUERY_MEMORY_GIB` GiB and ``timeout_s`` a query, its settings locked."""
    import duckdb
    import pandas as pd

    found = list_runs(runs_dir)
    if not found:
        raise LabkitError(f"no runs in {runs_root(runs_dir)}")
    runs = pd.DataFrame([_run_row(run) for run in found])
    for column in ("started_utc", "ended_utc"):
        runs[column] = pd.to_datetime(runs[column], utc=True, errors="coerce", format="ISO8601")
    facts = pd.DataFrame([{"run_id": run.run_id, "what": what, "value": value}
                          for run in found for what, value in run_facts(run.manifest).items()])
    connection = duckdb.connect(config={"memory_limit": f"{QUERY_MEMORY_GIB}GiB",
                                        "max_execution_time": max(1, round(timeout_s * 1000)),
                                        "autoinstall_known_extensions": False, "autoload_known_extensions": False})
    connection.register("runs_frame", runs)
    connection.register("facts_frame", facts)
    connection.execute("CREATE VIEW runs AS SELECT * FROM runs_frame")
    connection.execute("CREATE VIEW facts AS SELECT * FROM facts_frame")
    # The files by absolute path, under the one directory DuckDB may read below (a path's ".." is refused there).
    root = os.path.join(os.path.abspath(runs_root(runs_dir)), "")
    files = [os.path.join(root, run.path.name, "samples.parquet") for run in found
             if (run.path / "samples.parquet").exists()]
    try:
        if files:
            connection.read_parquet(files, union_by_name=True).create_view("samples")
        else:
            connection.execute("CREATE VIEW samples AS SELECT NULL::VARCHAR AS run_id WHERE false")
    except duckdb.Error as exc:
        connection.close()
        raise LabkitError(f"cannot read the runs' samples: {str(exc).splitlines()[0]}") from None
    connection.execute(f"SET allowed_directories = [{_sql_text(root)}]")
    connection.execute("SET temp_directory = ''")  # nothing spilled to disk: a query beyond the memory limit fails
    connection.execute("SET enable_external_access = false")
    connection.execute("SET lock_configuration = true")
    return connection


def query(sql: str, runs_dir: str | os.PathLike | None = None, timeout_s: float = QUERY_TIMEOUT_S):
    """``sql`` (DuckDB's SQL, one SELECT statement) over the ``runs``, ``facts`` and ``samples`` views of every run
    in ``runs_dir``; its result as a DataFrame. A query DuckDB refuses, another statement than a SELECT, a query
    past the limits (``timeout_s`` seconds, :data:`QUERY_MEMORY_GIB` GiB, :data:`MAX_RESULT_ROWS` rows) is a
    :class:`LabkitError` in one line."""
    import duckdb

    try:
        statements = duckdb.connect().extract_statements(sql)  # parsed only: nothing runs on this connection
    except duckdb.Error as exc:
        raise LabkitError(f"query failed: {str(exc).splitlines()[0]}") from None
    if not statements:
        raise LabkitError("no query given: one SELECT statement over the runs, facts and samples views")
    if len(statements) > 1 or statements[0].type != duckdb.StatementType.SELECT:
        kinds = ", ".join(statement.type.name for statement in statements)
        raise LabkitError(f"a query only reads, in one SELECT statement (this is {kinds})")
    connection = connect(runs_dir, timeout_s)
    try:
        result = connection.sql(sql).limit(MAX_RESULT_ROWS + 1).df()
    except duckdb.InterruptException:
        raise LabkitError(f"query stopped after {timeout_s:g} s, its time limit") from None
    except duckdb.OutOfMemoryException:
        raise LabkitError(f"query needs more than DuckDB's {QUERY_MEMORY_GIB} GiB of memory") from None
    except duckdb.Error as exc:
        raise LabkitError(f"query failed: {str(exc).splitlines()[0]}") from None
    finally:
        connection.close()
    if len(result) > MAX_RESULT_ROWS:
        raise LabkitError(f"the query's answer has more than {MAX_RESULT_ROWS:,} rows: aggregate, or add a LIMIT")
    return result

"""The table each experiment prints at the end of a run, and ``Run.summary()`` returns.

Each function takes a run's samples (a DataFrame of its schema) and returns
the DataFrame a person reads first; the CLI only renders it.
"""

from __future__ import annotations

import math

import pandas as pd

from labkit.analysis.probes import probes_of

#: The knobs of an idle-step condition, in the order a condition's label names them (the gRPC stack last).
SWEEP_CONDITION = ["src", "dst", "cc", "slow_start_after_idle", "gap_s", "background_gap_s", "keepalive_ms",
                   "client_impl", "server_impl", "grpc_options"]


def _given(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def shared_words(names) -> str:
    """The words every one of several condition names has (``ssai=1``), in the first name's order: what a table or a
    figure can say once instead of in every name; empty when they share none (or there is one name)."""
    words = [str(name).split() for name in dict.fromkeys(names)]
    if len(words) < 2:
        return ""
    common = set.intersection(*(set(w) for w in words))
    return " ".join(w for w in words[0] if w in common)


def condition_label(cc=None, slow_start_after_idle=None, gap_s=None, background_gap_s=None, keepalive_ms=None,
                    client_impl=None, server_impl=None, grpc_options=None) -> str:
    """``cc=cubic ssai=1 gap=1s bg=0.25s ka=1000ms go→python``: one idle-step condition, unset knobs as ``keep`` or
    left out, the gRPC stack only when it is not Python on both sides without options."""
    label = f"cc={cc if isinstance(cc, str) else 'keep'} ssai={int(slow_start_after_idle) if _given(slow_start_after_idle) else 'keep'}"
    if _given(gap_s):
        label += f" gap={gap_s:g}s"
    if _given(background_gap_s):
        label += f" bg={background_gap_s:g}s"
    if _given(keepalive_ms):
        label += f" ka={int(keepalive_ms)}ms"
    if (client_impl or "python", server_impl or "python") != ("python", "python"):
        label += f" {client_impl or 'python'}→{server_impl or 'python'}"
    if _given(grpc_options):
        label += f" {grpc_options}"
    return label


def summarize_sweep(samples: pd.DataFrame, ping_ms: dict[str, float] | None = None) -> pd.DataFrame:
    """Median RTT per condition and size over warm, successful calls.

    With ``ping_ms`` (pair label ``src-dst`` → ping mean), adds the median as a
    multiple of the pair's ping RTT (``rtt_multiple``).
    """
    warm = samples[samples["ok"] & ~samples["cold"]]
    table = (
        warm.groupby([*SWEEP_CONDITION, "payload_bytes"], dropna=False)["rtt_ms"].agg(["count", "median"])
        .reset_index().rename(columns={"median": "median_ms"})
    )
    if ping_ms:
        table["ping_ms"] = [ping_ms.get(f"{s}-{d}") for s, d in zip(table["src"], table["dst"])]
        table["rtt_multiple"] = table["median_ms"] / table["ping_ms"]
    return table


def summarize_series(samples: pd.DataFrame) -> pd.DataFrame:
    """Per probe: rows, samples (ok), failed, and the RTT distribution of the ok samples in ms.

    ``vs_ping`` is each probe's median over ping's median (when ping ran).
    """
    table = []
    for probe in probes_of(samples):
        rows = samples[(samples["probe"] == probe) & ~samples["duplicate"]]
        ok = rows[rows["ok"]]["rtt_ms"]
        table.append({
            "probe": probe, "ticks": len(rows), "ok": int(len(ok)), "failed": int(len(rows) - len(ok)),
            "p5_ms": ok.quantile(0.05) if len(ok) else None, "median_ms": ok.median() if len(ok) else None,
            "p95_ms": ok.quantile(0.95) if len(ok) else None, "max_ms": ok.max() if len(ok) else None,
        })
    table = pd.DataFrame(table, columns=["probe", "ticks", "ok", "failed", "p5_ms", "median_ms", "p95_ms", "max_ms"])
    ping = table.loc[table["probe"] == "ping", "median_ms"]
    ping_median = ping.iloc[0] if len(ping) and ping.iloc[0] == ping.iloc[0] else None
    table["vs_ping"] = table["median_ms"] / ping_median if ping_median else None
    return table.set_index("probe")


#: A cell in which more than this share of the requests failed measured failures, not the path: the command that
#: ran it warns and exits 1, as `labkit echo call` exits 1 when every call failed.
MOSTLY_FAILED_SHARE = 0.5


def failures_by_cell(samples: pd.DataFrame) -> pd.DataFrame:
    """Per cell: ``requests`` and ``failed`` ones, and ``mostly_failed`` (more than :data:`MOSTLY_FAILED_SHARE`).

    A row is one request when ``ok`` is a flag (a call, a probe's sample); rows that count requests (hop, load:
    ``requests`` and ``errors``) are summed.
    """
    if not len(samples):
        return pd.DataFrame(columns=["cell_id", "requests", "failed", "mostly_failed"])
    if "errors" in samples and "requests" in samples:
        counts = samples.assign(_failed=samples["errors"], _requests=samples["requests"])
    else:
        counts = samples.assign(_failed=~samples["ok"].astype(bool), _requests=1)
    table = counts.groupby("cell_id", sort=False).agg(requests=("_requests", "sum"), failed=("_failed", "sum"))
    table = table.astype(int).reset_index()
    table["mostly_failed"] = table["failed"] > MOSTLY_FAILED_SHARE * table["requests"]
    return table


def summarize_upload(samples: pd.DataFrame) -> pd.DataFrame:
    """Per transport × TLS × chunk size: uploads, failures, median MB/s and median CPU seconds."""
    keys = ["transport", "tls", "chunk_bytes"]
    ok = samples[samples["ok"]]
    table = ok.groupby(keys).agg(
        uploads=("seq", "size"),
        median_mb_per_s=("mb_per_s", "median"),
        median_seconds=("seconds", "median"),
        median_client_cpu_s=("client_cpu_s", "median"),
        median_server_cpu_s=("server_cpu_s", "median"),
    )
    failed = samples[~samples["ok"]].groupby(keys).size().rename("failed")
    table = table.join(failed, how="outer").reset_index()
    table["failed"] = table["failed"].fillna(0).astype(int)
    table["uploads"] = table["uploads"].fillna(0).astype(int)
    return table.sort_values(keys, ignore_index=True)


def summarize_load(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: transport, knobs, req/s, p50/p90/p99/max, errors, server CPU, and why a row is partial.

    ``calls`` names what is not a plain unary call of random bytes: ``gz`` for gzip, ``s10`` for streams of 10
    messages (whose req/s and latencies are per stream), ``text`` for text payloads, the ladder's step, and the
    server's implementation and options where the run has several. ``message_p50_ms`` is each message's own
    median latency where labkit-go's load timed it (NaN for ghz and h2load).
    """
    columns = ["transport", "concurrency", "connections", "keepalive_ms", "payload_bytes", "rps", "latency_p50_ms",
               "latency_p90_ms", "latency_p99_ms", "latency_max_ms", "message_p50_ms", "errors", "server_cpu_util",
               "error"]
    stacks = samples["server_impl"].fillna("") + " " + samples["grpc_options"].fillna("")
    calls = [" ".join(part for part in (
        "gz" if compression == "gzip" else "", f"s{messages}" if rpc == "stream" else "",
        "text" if kind == "text" else "", step if isinstance(step, str) else "",
        stack.strip() if stacks.nunique() > 1 and not isinstance(step, str) else "") if part)
        for compression, rpc, messages, kind, step, stack in zip(
            samples["compression"], samples["rpc"], samples["messages_per_call"], samples["payload_kind"],
            samples["ladder_step"], stacks)]
    return samples[columns].assign(calls=calls).reset_index(drop=True)

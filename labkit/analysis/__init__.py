"""Pure analysis on DataFrames: trim, summarize, compare, fit.

Nothing here knows about hosts, runs or files: every function takes a
DataFrame (or arrays) and returns new data, so notebooks, the CLI and
``labkit report`` compute the same numbers and tests can check them against
numpy/scipy. Submodules are imported on first use (scipy is slow to import),
so ``from labkit.analysis import window_stats`` costs only what it needs.
"""

import importlib

# name -> the submodule that defines it.
_EXPORTS = {
    "Fit": "fits",
    "fit_linear": "fits",
    "fit_slow_start": "fits",
    "locate_change_point": "fits",
    "locate_change_points": "fits",
    "slow_start_rounds": "fits",
    "step_edges": "fits",
    "Stats": "stats",
    "Comparison": "summary",
    "bootstrap_ci": "summary",
    "compare": "summary",
    "compare_groups": "summary",
    "summarize": "summary",
    "summarize_with_ci": "summary",
    "summarize_with_location": "summary",
    "TrimResult": "trim",
    "zscore_scores": "trim",
    "zscore_trim": "trim",
    "SWEEP_CONDITION": "tables",
    "condition_label": "tables",
    "summarize_load": "tables",
    "summarize_series": "tables",
    "summarize_sweep": "tables",
    "summarize_upload": "tables",
    "h2load_errors": "windows",
    "measured_window": "windows",
    "nearest_rank": "windows",
    "window_stats": "windows",
    "SeriesAnalysis": "probes",
    "analyse_series": "probes",
    "trim_variants": "ping_vs_echo",
    "idle_keepalive_calls": "tuning_report",
    "keepalive_label": "tuning_report",
    "window_mismatches": "tuning_report",
    "location_grid": "upload_report",
    "Calls": "inference",
    "Location": "inference",
    "SMALL_SAMPLE": "inference",
    "SampleSize": "inference",
    "adjust": "inference",
    "block_draws": "inference",
    "call_differences": "inference",
    "call_family": "inference",
    "call_table": "inference",
    "location_interval": "inference",
    "method_for": "inference",
    "minimum_detectable_effect": "inference",
    "one_sample_t": "inference",
    "rule_statistic": "inference",
    "statistics_named": "inference",
    "two_sample_difference": "inference",
    "verdict_text": "inference",
    "welch_t": "inference",
    "between_runs": "inference",
    "block_bootstrap": "inference",
    "block_bootstrap_difference": "inference",
    "block_length": "inference",
    "min_samples_for_percentile": "inference",
    "normal_pvalue": "inference",
    "paired_block_difference": "inference",
    "percentile_if_enough": "inference",
    "runs_bootstrap": "inference",
    "runs_t_interval": "inference",
    "samples_for_median": "inference",
    "samples_for_proportion": "inference",
    "thin_statistics": "inference",
    "data_needs": "inference",
    "data_needs_in_short": "inference",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"labkit.analysis.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'labkit.analysis' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_EXPORTS])


__all__ = sorted(_EXPORTS)

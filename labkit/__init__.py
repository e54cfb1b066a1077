"""labkit: measure network and RPC latency on real hosts and on a local WAN testbed.

Heavy dependencies (grpc, pandas, paramiko) are imported lazily by the modules
that need them, so that ``import labkit`` and ``labkit --version`` stay fast.
"""

__version__ = "0.1.0"


def sweep(inventory: str, *, runs_dir=None, quiet: bool = False, accept_new_host_keys: bool = False, **options):
    """Run the idle-connection sweep from Python and return its :class:`labkit.store.Run`.

    ``options`` are the fields of :class:`labkit.idle_step.SweepConfig`
    (``client``, ``server``, ``sizes``, ``gaps_s``, ``repeats``,
    ``slow_start_after_idle``, ``cc``, ...), e.g.::

        run = labkit.sweep("inventory.toml", client="a", server="b",
                           sizes=[1000, 14000, 16000], gaps_s=[1.0], repeats=5,
                           slow_start_after_idle=[1, 0])
        run.samples()  # a DataFrame, one row per call
    """
    from labkit.idle_step import SweepConfig, run_sweep

    return run_sweep(
        SweepConfig(inventory=str(inventory), **options),
        runs_dir=runs_dir, quiet=quiet, accept_new_host_keys=accept_new_host_keys,
    )


def series(inventory: str, *, runs_dir=None, quiet: bool = False, accept_new_host_keys: bool = False, **options):
    """Run ping vs echo over time from Python and return its :class:`labkit.store.Run`.

    ``options`` are the fields of :class:`labkit.latency_series.SeriesConfig`
    (``client``, ``server``, ``duration_s``, ``interval_s``, ``probes``,
    ``payload_bytes``, ``cell_s``, ``timeout_s``, ``spread``, ``name``), e.g.::

        run = labkit.series("inventory.toml", client="a", server="b",
                            duration_s=3600, interval_s=1.0)
        run.samples()  # a DataFrame, one row per probe per tick
    """
    from labkit.latency_series import SeriesConfig, run_series

    return run_series(
        SeriesConfig(inventory=str(inventory), **options),
        runs_dir=runs_dir, quiet=quiet, accept_new_host_keys=accept_new_host_keys,
    )


def upload(inventory: str, *, runs_dir=None, quiet: bool = False, accept_new_host_keys: bool = False, **options):
    """Run the chunked-upload experiment (gRPC streaming vs HTTP/2) from Python and return its Run.

    ``options`` are the fields of :class:`labkit.chunked_upload.UploadConfig`
    (``client``, ``server``, ``file_size`` or ``file``, ``chunk_sizes``,
    ``repeats``, ``tls`` ("both", "on", "off"), ``transports``, ...), e.g.::

        run = labkit.upload("inventory.toml", client="a", server="b",
                            file_size=16 * 2**20, chunk_sizes=[1024, 32768, 2**20], repeats=5)
        run.samples()  # a DataFrame, one row per upload
    """
    from labkit.chunked_upload import UploadConfig, run_upload

    return run_upload(
        UploadConfig(inventory=str(inventory), **options),
        runs_dir=runs_dir, quiet=quiet, accept_new_host_keys=accept_new_host_keys,
    )


def load(inventory: str, *, runs_dir=None, quiet: bool = False, accept_new_host_keys: bool = False, **options):
    """Run the cost-of-a-call-under-load matrix (ghz, h2load) from Python and return its Run.

    ``options`` are the fields of :class:`labkit.under_load.LoadConfig`
    (``client``, ``server``, ``transports``, ``concurrency``, ``payload_bytes``,
    ``connections``, ``keepalive_ms``, ``duration_s``, ``warmup_s``, ...), e.g.::

        run = labkit.load("inventory.toml", client="a", server="b",
                          concurrency=[1, 10, 50], payload_bytes=[64, 1024], duration_s=10)
        run.samples()  # a DataFrame, one row per cell: rps, latency_p50_ms, ..., server_cpu_s
    """
    from labkit.under_load import LoadConfig, run_load

    return run_load(
        LoadConfig(inventory=str(inventory), **options),
        runs_dir=runs_dir, quiet=quiet, accept_new_host_keys=accept_new_host_keys,
    )

"""labkit: measure network and RPC latency on real hosts and on a local WAN testbed.

Heavy dependencies (grpc, pandas, paramiko) are imported lazily by the modules
that need them, so that ``import labkit`` and ``labkit --version`` stay fast.

Every experiment command has a Python twin that returns its
:class:`labkit.results.Run` (``run.samples()`` is a DataFrame, ``run.summary()``
the table the command prints, ``run.report()`` the notebooks that apply to it);
``resume="RUN"`` continues an interrupted run, ``resume="auto"`` the newest
interrupted run of the same settings if there is one (a notebook cell run again
after a kernel interrupt picks up where it stopped); ``runs=N`` makes N
independent runs of the whole matrix and returns the list (``--runs``). ``labkit.testbed(...)``
brings the local testbed up from Python (:mod:`labkit.testbed.context`).
"""

from labkit.errors import LabkitError
from labkit.version import __version__  # noqa: F401 (labkit.__version__)


def _entry_point(command: str, doc: str):
    """``labkit.<command>(inventory, **options)``: the experiment of that command, from Python."""

    def entry(inventory=None, *, runs_dir=None, resume=None, quiet: bool = False, accept_new_host_keys: bool = False,
              runs: int = 1, share_hosts: bool = False, **options):
        # Not at the top: this __init__ runs before any of labkit's modules loads (for `labkit --help` too), and the
        # experiments and results load when an entry point is called.
        from labkit.experiments import run_command, run_replicates, spec
        from labkit.results import Run

        if runs == 1 or resume:
            if runs != 1:
                raise LabkitError("resume takes the run's own settings; runs= goes with a new run only")
            return Run.of(run_command(command, inventory, runs_dir=runs_dir, resume=resume, quiet=quiet,
                                      accept_new_host_keys=accept_new_host_keys, share_hosts=share_hosts, **options))
        if not isinstance(runs, int) or runs < 1:
            raise LabkitError(f"runs must be a whole number of at least 1, not {runs!r}")
        config = spec(command).config_type(inventory=str(inventory), **options)
        config.validate()
        return [Run.of(run) for run in run_replicates(command, config, runs, runs_dir=runs_dir, quiet=quiet,
                                                      accept_new_host_keys=accept_new_host_keys,
                                                      share_hosts=share_hosts)]

    entry.__name__ = entry.__qualname__ = command
    entry.__doc__ = doc
    return entry


sweep = _entry_point("sweep", """Run the idle-connection sweep from Python and return its :class:`labkit.results.Run`.

``options`` are the fields of :class:`labkit.experiments.sweep.SweepConfig`
(``client``, ``server``, ``sizes``, ``gaps_s``, ``repeats``,
``slow_start_after_idle``, ``cc``, ...), e.g.::

    run = labkit.sweep("inventory.toml", client="a", server="b",
                       sizes=[1000, 14000, 16000], gaps_s=[1.0], repeats=5,
                       slow_start_after_idle=[1, 0])
    run.samples()  # a DataFrame, one row per call
""")

series = _entry_point("series", """Run ping vs echo over time from Python and return its :class:`labkit.results.Run`.

``options`` are the fields of :class:`labkit.experiments.series.SeriesConfig`
(``client``, ``server``, ``duration_s``, ``interval_s``, ``probes``,
``payload_bytes``, ``cell_s``, ``timeout_s``, ``spread``, ``name``), e.g.::

    run = labkit.series("inventory.toml", client="a", server="b",
                        duration_s=3600, interval_s=1.0)
    run.samples()  # a DataFrame, one row per probe per tick
""")

upload = _entry_point("upload", """Run the chunked-upload experiment (gRPC streaming vs HTTP/2) from Python and return its Run.

``options`` are the fields of :class:`labkit.experiments.upload.UploadConfig`
(``client``, ``server``, ``file_size`` or ``file``, ``chunk_sizes``,
``repeats``, ``tls`` ("both", "on", "off"), ``transports``, ...), e.g.::

    run = labkit.upload("inventory.toml", client="a", server="b",
                        file_size=16 * 2**20, chunk_sizes=[1024, 32768, 2**20], repeats=5)
    run.samples()  # a DataFrame, one row per upload
""")

load = _entry_point("load", """Run the cost-of-a-call-under-load matrix (ghz, h2load) from Python and return its Run.

``options`` are the fields of :class:`labkit.experiments.load.LoadConfig`
(``client``, ``server``, ``transports``, ``concurrency``, ``payload_bytes``,
``connections``, ``keepalive_ms``, ``duration_s``, ``warmup_s``, ...), e.g.::

    run = labkit.load("inventory.toml", client="a", server="b",
                      concurrency=[1, 10, 50], payload_bytes=[64, 1024], duration_s=10)
    run.samples()  # a DataFrame, one row per cell: rps, latency_p50_ms, ..., server_cpu_s
""")

hop = _entry_point("hop", """Run the cost-of-one-call experiment (a relay hop over gRPC, HTTP/2, NATS vs direct) and return its Run.

``options`` are the fields of :class:`labkit.experiments.hop.HopConfig`
(``load_host``, ``front``, ``back``, ``nats_host``, ``via``, ``tool``,
``threads``, ``connections``, ``duration_s``, ``repeats``, ``rate``, ...), e.g.::

    run = labkit.hop("inventory.toml", load_host="a", front="a", back="b",
                     via=["direct", "grpc", "http2", "nats"], duration_s=10, repeats=5)
    run.samples()  # a DataFrame, one row per cell: rps, latency_mean_ms, ..., front_cpu_s, back_cpu_s, nats_cpu_s
""")

latency_under_load = _entry_point("latency-under-load", """Run probes before, during and after a saturating load and
return its Run: what a queue shared with other traffic adds to each probe, per direction.

``options`` are the fields of :class:`labkit.experiments.latency_under_load.UnderLoadConfig`
(``client``, ``server``, ``duration_s``, ``interval_s``, ``probes``, ``load_start_s``, ``load_s``,
``ramp_s``, ``loads``, ``queues``, ``cc``, ...), e.g.::

    run = labkit.latency_under_load("inventory.toml", client="a", server="b",
                                    queues=["10bdp", "codel:10bdp"], loads=["tcp-up"])
    run.summary()  # what the load added, per probe and direction, with intervals and RPM
""")
latency_under_load.__name__ = latency_under_load.__qualname__ = "latency_under_load"


def compare(a, b, *, runs_dir=None, force: bool = False, group: bool = True, seed: int = 0):
    """``labkit compare`` from Python: side B against side A, each a run (standing for its ``--runs`` group unless
    ``group=False``) or a list of runs, as a :class:`labkit.comparison.Comparison` (in a notebook: what changed, the
    caveats and the table; ``.table`` a DataFrame, ``.figure()`` the differences drawn)::

        labkit.compare("before", "after").table
    """
    # Not at the top: pandas and the analysis load when a comparison is made, not with `import labkit`.
    from labkit.comparison import compare as compare_runs

    return compare_runs(a, b, runs_dir=runs_dir, force=force, group=group, seed=seed)


def query(sql: str, runs_dir=None):
    """``labkit runs query`` from Python: ``sql`` over the ``runs``, ``facts`` and ``samples`` views of every run in
    ``runs_dir`` (:mod:`labkit.catalog`), as a DataFrame."""
    # Not at the top: DuckDB loads with the first query.
    from labkit.catalog import query as run_query

    return run_query(sql, runs_dir)


# The testbed package is callable: labkit.testbed(one_way_delay="100ms") -> a Lab (labkit/testbed/__init__.py says
# why a package and not a function). Importing it costs nothing: its modules load when called.
from labkit import testbed  # noqa: E402

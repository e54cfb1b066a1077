"""labkit: measure network and RPC latency on real hosts and on a local WAN testbed.

Heavy dependencies (grpc, pandas, paramiko) are imported lazily by the modules
that need them, so that ``import labkit`` and ``labkit --version`` stay fast.
"""

__version__ = "0.1.0"

"""Machines labkit can use: run an argv, start a long-running argv, stop it, read facts.

A probe never knows how a host is reached; it hands the host an argv.
"""

from labkit.hosts.local import LocalHost, Process, Result

__all__ = ["LocalHost", "Process", "Result"]

"""The gRPC echo service of proto/echo.proto: ``server`` serves it, ``client`` times calls to it.

``cli`` holds the ``labkit echo serve`` and ``labkit echo call`` commands;
``address`` parses their HOST:PORT flags without importing grpc; ``plans`` states
what each agent labkit starts on a host is asked to do, and its command line; ``stamps`` what a server stamps
on each call (its own time, and its wall clock at the request and the reply).
"""

import os

# gRPC core's fork handlers, left to their default, restart its poller in a child forked while a channel is busy;
# the child's close of its inherited descriptors then makes that poller abort the child before it execs
# ("epoll_wait error: Bad file descriptor", exit -6). Python before 3.10 starts every subprocess (the series agent's
# ping, the wrappers' tools) with fork(), which runs them; later Pythons use vfork, which does not. Nothing in labkit
# forks a process that goes on using gRPC, so the handlers are only harm: off before any agent imports grpc.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")


"""The gRPC echo service of proto/echo.proto: ``server`` serves it, ``client`` times calls to it.

``cli`` holds the ``labkit echo serve`` and ``labkit echo call`` commands;
``address`` parses their HOST:PORT flags without importing grpc; ``plans`` states
what each agent labkit starts on a host is asked to do, and its command line; ``stamps`` what a server stamps
on each call (its own time, and its wall clock at the request and the reply).
"""

"""The gRPC echo service of proto/echo.proto: ``server`` serves it, ``client`` times calls to it.

``cli`` holds the ``labkit echo serve`` and ``labkit echo call`` commands;
``address`` parses their HOST:PORT flags without importing grpc.
"""

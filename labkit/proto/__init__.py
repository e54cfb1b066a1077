"""Generated gRPC stubs for ``proto/echo.proto`` (do not edit; see ``regenerate.py``).

Import them as ``from labkit.proto import echo_pb2, echo_pb2_grpc``.
"""

"""labkit's version, in a module of its own: what records it (provenance, the echo server's ready line, deploy's
check of a host) imports this and not the ``labkit`` package, whose ``__init__`` is the Python API at the top of the
layers. pyproject.toml reads it here too (``[tool.hatch.version]``)."""

__version__ = "0.1.0"

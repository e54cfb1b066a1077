"""``python -m labkit``: the same CLI as the ``labkit`` console script."""

from labkit.cli import main

main()

"""The few domain exceptions labkit raises.

Every error a user can cause (bad flags, a missing tool, no root for the
testbed) is a :class:`LabkitError`: the CLI prints it as one line and exits 2,
never with a traceback.
"""

import click


class LabkitError(click.ClickException):
    """A problem the user can fix; shown as one line, exit status 2."""

    exit_code = 2


class TestbedUnavailable(LabkitError):
    """This machine cannot host the local testbed (no root, netns or TUN)."""

    __test__ = False  # not a pytest test class despite the name

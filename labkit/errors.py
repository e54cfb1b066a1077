"""The few domain exceptions labkit raises.

Every error a user can cause (bad flags, a missing tool, no root for the
testbed) is a :class:`LabkitError`: the CLI (:func:`labkit.cli.main`) prints
it as one line and exits 2, never with a traceback. Library code raises it
without knowing about the CLI.
"""


class LabkitError(Exception):
    """A problem the user can fix; shown as one line, exit status 2."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def format_message(self) -> str:
        return self.message

    def __str__(self) -> str:
        return self.message


class TestbedUnavailable(LabkitError):
    """This machine cannot host the local testbed (no root, netns or TUN)."""

    __test__ = False  # not a pytest test class despite the name

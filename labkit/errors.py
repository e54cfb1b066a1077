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


class RunInterrupted(KeyboardInterrupt):
    """An experiment stopped by Ctrl-C, SIGTERM or a notebook's kernel interrupt, after it kept its rows, stopped its
    processes and restored its kernel settings; ``run`` is the interrupted :class:`labkit.store.Run`.

    A KeyboardInterrupt still (the CLI exits 130 on it, a notebook stops running the cells below), whose message says
    what was kept and how to finish the run.
    """

    def __init__(self, run, command: str):
        counts = run.row_counts()
        cells = counts["cells_complete"]
        super().__init__(
            f"run {run.run_id} interrupted: {counts['journal_rows']} rows kept ({cells} cell{'' if cells == 1 else 's'} "
            f"complete); run the same call again with resume='auto' (or resume={run.run_id!r}), or "
            f"`labkit {command} --resume {run.run_id}`, to finish it")
        self.run = run

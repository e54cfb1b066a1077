"""The local WAN testbed: namespaces (netns.py), per-namespace sshd (sshd.py), the links (``labkit-go link``, driven
by datapath.py and emulator.py), the testbed itself (lab.py: ``labkit testbed up|down|status``) and its login user
(login.py).

This package can be called: ``labkit.testbed(one_way_delay="100ms")`` brings a testbed up from Python and returns a
:class:`labkit.testbed.context.Lab`, a context manager (see context.py). A package and not a function of that name,
because ``import labkit.testbed.lab`` rebinds ``labkit.testbed`` to the package whatever ``labkit`` defined.
"""

import sys
import types


class _CallablePackage(types.ModuleType):
    def __call__(self, one_way_delay="100ms", **options):
        """``labkit.testbed(one_way_delay="100ms", rate="100mbit", mtu=1460, cc="cubic", emulator="auto", name="lab",
        keep=False)``: bring testbed ``name`` up and return its Lab (see :func:`labkit.testbed.context.open_testbed`)."""
        # Not at the top: `import labkit` imports this package, and the testbed's modules load when it is called.
        from labkit.testbed.context import open_testbed

        return open_testbed(one_way_delay, **options)


sys.modules[__name__].__class__ = _CallablePackage

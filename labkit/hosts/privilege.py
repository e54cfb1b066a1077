"""Root on a host: ``become = "sudo"`` in the inventory, and what a host's user may do.

A host that logs in as root needs nothing. A host that logs in as another user
(a cloud VM's ``ubuntu``) and has ``become = "sudo"`` runs the commands that
need root (sysctl writes, ``ip route replace``; later tcpdump, ``tc``) as
``sudo -n -- ARGV``: still an argv, never a shell string, and ``-n`` so sudo
fails at once instead of waiting for a password no one will type. Reading
state never goes through sudo.

:func:`probe_privilege` says what a host's user has (``root``, ``sudo
(passwordless)``, ``sudo (needs a password)`` or ``none``);
:func:`knob_blockers` says which kernel knobs an experiment wants that labkit
could not set there, asking sudo's policy (``sudo -n -l ARGV``) without
running anything.
"""

from __future__ import annotations

import shlex

from labkit.errors import LabkitError

SUDO = ("sudo", "-n", "--")
BECOME_VALUES = ("sudo", "none")
ROOT = "root"
PASSWORDLESS = "sudo (passwordless)"
NEEDS_PASSWORD = "sudo (needs a password)"
NONE = "none"
# Groups that Debian/Ubuntu (sudo, admin) and Red Hat (wheel) sudoers grant sudo to: with
# -n, sudo says "a password is required" to a user with no sudo rights at all as well.
ADMIN_GROUPS = ("sudo", "admin", "wheel")


class PrivilegeRefused(LabkitError):
    """sudo would not run a command for the host's user (no rule, or a password needed)."""


def sudo_complaint(stderr: str) -> str | None:
    """sudo's own reason for not running a command (its ``sudo: ...`` line), None if it ran it."""
    for line in stderr.splitlines():
        if line.startswith("sudo: "):
            return line.removeprefix("sudo: ").strip()
    return None


def classify_privilege(uid: str, sudo_true, sudo_list, groups: str) -> str:
    """What a host's user has, from ``id -u``, ``sudo -n true``, ``sudo -n -l`` and ``id -Gn`` (results or None).

    ``sudo -n`` cannot tell "needs a password" from "no rule at all" (it asks
    for the password first either way); a user with some passwordless rule
    (``sudo -n -l`` lists them) or in an admin group counts as needing one.
    """
    if uid.strip() == "0":
        return ROOT
    if sudo_true is None:  # no sudo on the host
        return NONE
    if sudo_true.returncode == 0:
        return PASSWORDLESS
    if (sudo_list is not None and sudo_list.returncode == 0) or set(groups.split()) & set(ADMIN_GROUPS):
        return NEEDS_PASSWORD
    return NONE


def _run_or_none(host, argv: list[str]):
    """``host.run(argv)``, or None when its program is not installed there."""
    try:
        return host.run(argv, timeout=30)
    except LabkitError as exc:
        if "is not installed on" in exc.message:
            return None
        raise


def probe_privilege(host) -> str:
    """Ask ``host`` what its user may do (see :func:`classify_privilege`); runs nothing as root."""
    uid = host.run(["id", "-u"], timeout=30).stdout
    if uid.strip() == "0":
        return ROOT
    sudo_true = _run_or_none(host, [*SUDO, "true"])
    sudo_list = _run_or_none(host, ["sudo", "-n", "-l"]) if sudo_true is not None and not sudo_true.ok else None
    groups = host.run(["id", "-Gn"], timeout=30).stdout
    return classify_privilege(uid, sudo_true, sudo_list, groups)


def knob_blockers(host, knobs: dict[str, list[str]]) -> dict[str, str]:
    """Of ``knobs`` (name -> a command that sets it), those labkit cannot set on ``host``, with the reason.

    Root can set everything; otherwise the host needs ``become = "sudo"`` and a
    sudo rule that lets its user run the command without a password.
    """
    if not knobs or host.logs_in_as_root():
        return {}
    user = getattr(host, "user", None) or "its user"
    if host.become != "sudo":
        reason = f"logs in as {user}, not root, and has no become = \"sudo\" in the inventory"
        return {knob: reason for knob in knobs}
    blockers = {}
    for knob, argv in knobs.items():
        result = _run_or_none(host, ["sudo", "-n", "-l", *argv])
        if result is None:
            blockers[knob] = f"logs in as {user} and has no sudo"
        elif not result.ok:
            said = sudo_complaint(result.stderr) or "not allowed"
            blockers[knob] = f"sudo -n refuses {user} `{shlex.join(argv)}` ({said})"
    return blockers


class Becomes:
    """What every host adds to run a command as root: ``become``, :meth:`privileged_argv`, :meth:`run_privileged`.

    A host class sets ``self.become`` and implements ``logs_in_as_root()``.
    """

    become: str | None = None

    def logs_in_as_root(self) -> bool:
        raise NotImplementedError

    def privileged_argv(self, argv: list[str]) -> list[str]:
        """``argv`` as the host runs it with root's privilege: as is for root, else through ``sudo -n --``."""
        if self.become == "sudo" and not self.logs_in_as_root():
            return [*SUDO, *argv]
        return list(argv)

    def run_privileged(self, argv: list[str], *, timeout: float = 60, check: bool = False):
        """Run ``argv`` as root; PrivilegeRefused (one line naming the host and the command) when sudo refuses."""
        wrapped = self.privileged_argv(argv)
        result = self.run(wrapped, timeout=timeout)
        if wrapped[0] == SUDO[0] and not result.ok:
            said = sudo_complaint(result.stderr)
            if said is not None and said.endswith("command not found"):
                raise LabkitError(f"{argv[0]} is not installed on {self.name}")
            if said is not None:
                raise PrivilegeRefused(f"{self.name}: sudo refused `{shlex.join(argv)}`: {said}")
        result.argv = list(argv)
        if check and not result.ok:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise LabkitError(f"`{shlex.join(argv)}` failed on {self.name}: {detail[-1] if detail else result.returncode}")
        return result

"""A non-root login user on the testbed's hosts, so the testbed can play a cloud VM (``ubuntu``, sudo or not).

The user exists **only inside the testbed's sshds**: each sshd already runs in
a private mount namespace (see :mod:`labkit.testbed.sshd`), and there a copy
of the machine's ``/etc`` with the user added to ``passwd``, ``shadow`` and
``group`` is bind-mounted over ``/etc``, and a private ``/home`` holding the
user's home over ``/home``. Every SSH session (and every sudo inside one) sees
those; the machine's own files are never written, so nothing is left behind
when the sshds end, even after a crash, and ``testbed down`` only has to
remove the state directory.

Why all of ``/etc`` and not just the three files: a file bind mount is
detached as soon as the machine replaces the file it covers (Linux does that
to mounts on a renamed-over file in every namespace), and installing a
package that adds a system user (tcpdump's, say) replaces ``/etc/passwd``.
A mount on the directory survives that. The hosts see ``/etc`` as it was at
``up``, like a VM's image.

Everything lives in the testbed's state directory under ``login/``::

    etc/                  the copy of /etc (cp -a), plus the user; etc/sudoers.d/labkit-testbed-NAME with --sudo
    home/USER/            the user's home: .ssh/authorized_keys, and what labkit deploys

With ``--sudo`` the user may run anything as root without a password (like a
cloud VM's default user): one line in ``sudoers.d/labkit-testbed-NAME``,
checked with ``visudo -cf`` before it is put in place. The copy is
bind-mounted, so adding or removing that file changes a running testbed.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from labkit.errors import LabkitError, TestbedUnavailable
from labkit.testbed.netns import run

USER_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,30}$")
# Private uids are taken from here down, skipping any the machine uses: files the user
# leaves in the shared /tmp must not belong to one of the machine's own users.
UID_TOP = 59999
# The files of the /etc copy that get the login user.
ETC_FILES = ("passwd", "shadow", "group")


@dataclass(frozen=True)
class LoginUser:
    """The testbed's login user: its name and whether it has passwordless sudo."""

    name: str
    sudo: bool = True

    def validate(self) -> None:
        if not USER_RE.match(self.name) or self.name == "root":
            raise LabkitError(f"login user {self.name!r} must be 1-31 characters of a-z, 0-9, '_' and '-', "
                              "starting with a letter or '_', and not root")
        if _exists_on_machine(self.name):
            raise LabkitError(f"user {self.name!r} exists on this machine; pick a name of the testbed's own")
        if self.sudo and (visudo() is None or shutil.which("sudo") is None):
            raise TestbedUnavailable("--sudo needs sudo on this machine: run `make bootstrap` or apt-get install sudo")


def visudo() -> str | None:
    """visudo's path; Debian keeps it in /usr/sbin, which is not on every PATH."""
    return shutil.which("visudo", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def _exists_on_machine(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def sudoers_name(testbed: str) -> str:
    """The testbed's own file in sudoers.d (sudo skips names with a dot, so none here)."""
    return f"labkit-testbed-{testbed}"


def free_uid(passwd: str, group: str) -> int:
    """The highest id at or below :data:`UID_TOP` that no user and no group of the machine has."""
    taken = {int(line.split(":")[2]) for text in (passwd, group) for line in text.splitlines()
             if line.count(":") >= 3 and line.split(":")[2].isdigit()}
    uid = UID_TOP
    while uid in taken:
        uid -= 1
    return uid


def with_user(passwd: str, shadow: str, group: str, name: str, uid: int, shell: str) -> tuple[str, str, str]:
    """The three files with ``name`` added: home /home/NAME, no password (``*``: key login only, not locked)."""
    def add(text: str, line: str) -> str:
        return (text if text.endswith("\n") or not text else text + "\n") + line + "\n"

    return (add(passwd, f"{name}:x:{uid}:{uid}:labkit testbed login user:/home/{name}:{shell}"),
            add(shadow, f"{name}:*:19000:0:99999:7:::"),
            add(group, f"{name}:x:{uid}:"))


class LoginFiles:
    """The private files of one testbed's login user, under ``STATE/login``."""

    def __init__(self, state_dir: Path, testbed: str):
        self.dir = state_dir / "login"
        self.testbed = testbed

    @property
    def etc(self) -> Path:
        return self.dir / "etc"

    @property
    def home_root(self) -> Path:
        return self.dir / "home"

    @property
    def sudoers_dir(self) -> Path:
        return self.etc / "sudoers.d"

    def create(self, user: LoginUser, public_key: str) -> int:
        """Copy /etc with the user added, make the user's home with ``public_key`` authorized; return the uid."""
        self.dir.mkdir(mode=0o755, exist_ok=True)
        run(["cp", "-a", "--", "/etc", str(self.etc)])  # modes, owners and symlinks as they are
        texts = {name: (self.etc / name).read_text() for name in ETC_FILES}
        uid = free_uid(texts["passwd"], texts["group"])
        shell = "/bin/bash" if os.access("/bin/bash", os.X_OK) else "/bin/sh"
        for name, text in zip(ETC_FILES, with_user(*texts.values(), user.name, uid, shell)):
            with open(self.etc / name, "r+") as handle:  # in place: keeps the file's owner and mode
                handle.write(text)
                handle.truncate()
        home = self.home_root / user.name
        (home / ".ssh").mkdir(parents=True, mode=0o700)
        (home / ".ssh" / "authorized_keys").write_text(public_key + "\n")
        os.chmod(self.home_root, 0o755)
        for path in (home, home / ".ssh", home / ".ssh" / "authorized_keys"):
            os.chown(path, uid, uid)
        os.chmod(home, 0o750)
        os.chmod(home / ".ssh" / "authorized_keys", 0o600)
        self.set_sudo(user)
        return uid

    def set_sudo(self, user: LoginUser) -> None:
        """Give ``user`` passwordless sudo (checked with visudo -cf), or take it away."""
        target = self.sudoers_dir / sudoers_name(self.testbed)
        if not user.sudo:
            target.unlink(missing_ok=True)
            return
        self.sudoers_dir.mkdir(mode=0o755, exist_ok=True)
        staged = self.sudoers_dir / f".{target.name}.new"  # a dot: sudo skips it until it is checked
        staged.write_text(f"# labkit testbed {self.testbed}: its login user may do anything as root, like a "
                          f"cloud VM's.\n{user.name} ALL=(ALL:ALL) NOPASSWD: ALL\n")
        os.chmod(staged, 0o440)
        check = run([visudo() or "visudo", "-cf", str(staged)], check=False)
        if check.returncode != 0:
            staged.unlink()
            raise LabkitError(f"visudo refused the testbed's sudoers line: {(check.stderr or check.stdout).strip()}")
        os.replace(staged, target)

    def bind_mounts(self) -> list[tuple[str, str]]:
        """(private, machine path) pairs for the sshd's mount namespace: directories, never single files."""
        return [(str(self.etc), "/etc"), (str(self.home_root), "/home")]

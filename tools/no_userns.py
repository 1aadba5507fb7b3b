"""Run a command as this (unprivileged) user where the kernel refuses it user namespaces.

    python tools/no_userns.py COMMAND [ARGS...]

What Ubuntu 24.04's AppArmor default does to GitHub's runner user, simulated without AppArmor:
`user.max_user_namespaces` counts per user namespace, so the command runs in a user namespace that maps this
user to itself (same uid, gid and files) and allows none below it. Creating a user namespace then fails, and
the other namespaces need a capability the command does not hold (the namespace's capabilities end at exec,
since the command's uid is not 0 there). Landlock, seccomp and resource limits work as on the runner.
"""
from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWUSER = 0x10000000


def refuse_user_namespaces() -> None:
    uid, gid = os.geteuid(), os.getegid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER): this user may not create a user namespace")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)
    with open("/proc/sys/user/max_user_namespaces", "w") as fh:  # this namespace's own limit, for all below it
        fh.write("0")


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit(__doc__)
    if os.geteuid() == 0:
        sys.exit("run this as the unprivileged user (root is not refused namespaces)")
    refuse_user_namespaces()
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])

"""The Linux system calls confinement needs, through ctypes (no compiled code, no helper binary)."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 0x2
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217, "riscv64": 41}
SYS_MOUNT_SETATTR = 442  # the same number on every architecture (system calls added after 5.1 share numbers)
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
ENOSYS = 38

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def check(ret: int, what: str) -> None:
    """Raise OSError with errno's code and message, naming `what`, where a libc call returned non-zero."""
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def write_file(path: str, text: str) -> None:
    """Write `text` to a /proc or /sys file in one write (uid_map, setgroups: the kernel takes them whole, once)."""
    with open(path, "w") as fh:
        fh.write(text)


def unshare(flags: int) -> None:
    """unshare(2) with CLONE_* `flags`: the calling process enters new namespaces; OSError where refused."""
    check(_libc.unshare(flags), "unshare")


def enter_user_namespace(extra_flags: int = 0, inside_id: int | None = None) -> None:
    """New user namespace (plus `extra_flags` namespaces) mapping `inside_id` (default: the same ids) to
    this process's uid and gid."""
    uid, gid = os.geteuid(), os.getegid()
    unshare(CLONE_NEWUSER | extra_flags)
    write_file("/proc/self/setgroups", "deny")
    write_file("/proc/self/uid_map", f"{uid if inside_id is None else inside_id} {uid} 1")
    write_file("/proc/self/gid_map", f"{gid if inside_id is None else inside_id} {gid} 1")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    """mount(2); OSError naming `target` where refused."""
    enc = lambda s: None if s is None else s.encode()  # noqa: E731 - a one-line converter, local to this call
    check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def umount(target: str) -> None:
    """Detach the mount at `target` lazily (MNT_DETACH); OSError where refused."""
    check(_libc.umount2(target.encode(), MNT_DETACH), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    """pivot_root(2) by its system call number; OSError (ENOSYS) on a machine whose number is not known here."""
    import platform

    number = SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise OSError(ENOSYS, f"pivot_root: unknown system call number on {platform.machine()}")
    check(_libc.syscall(ctypes.c_long(number), new_root.encode(), put_old.encode()), "pivot_root")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def mount_setattr(path: str, set_flags: int, clear_flags: int = 0, recursive: bool = True) -> None:
    """Change the attributes (MOUNT_ATTR_*) of the mount at `path`, and of every mount below it."""
    attr = _MountAttr(set_flags, clear_flags, 0, 0)
    check(_libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), path.encode(),
                        ctypes.c_uint(AT_RECURSIVE if recursive else 0), ctypes.byref(attr),
                        ctypes.c_size_t(ctypes.sizeof(attr))), f"mount_setattr {path}")


def set_pdeathsig(expected_parent: int = 0) -> None:
    """SIGKILL when the parent (thread) that started this process ends; exit now if it already has."""
    check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    if expected_parent and os.getppid() != expected_parent:
        os._exit(70)


def set_dumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 1): /proc/self is the process's own again after a change of uid (its uid_map and
    setgroups are written there for a nested user namespace)."""
    check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(DUMPABLE)")


def set_no_new_privs() -> None:
    """prctl(PR_SET_NO_NEW_PRIVS, 1): nothing this process or its children execute gains privileges (setuid, file
    capabilities); it cannot be undone."""
    check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """No capability left, not even over the process's own user namespace."""
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()  # _LINUX_CAPABILITY_VERSION_3
    check(_libc.capset(ctypes.byref(header), data), "capset")

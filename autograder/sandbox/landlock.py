"""Landlock: a file allowlist an unprivileged process puts on itself, without namespaces or privileges.

Where the kernel refuses the namespaces that give a worker a root of its own (sandbox/rootfs.py), Landlock
(Linux 5.13 and later, enabled on Ubuntu, Debian, Fedora and GitHub's runners) still lets the worker hide the
machine's files from itself: once `restrict` has run, this process and everything it starts may read only
the paths given as readable, write only beneath the paths given as writable, and nothing else, whatever their
Unix permissions say. It cannot be undone, not even by root, and it survives fork and exec.

What each kernel's Landlock ABI adds, and `restrict` uses when there:

- 1: files (read, write, execute, list, create, remove);  2: renaming or linking across folders;
  3: truncation;  5: ioctl on device files;
- 4: TCP: no bind, no connect (UDP and other sockets are not covered);
- 6: no signal to a process outside the restricted ones, no connection to an abstract UNIX socket outside.

The system calls are made through ctypes: no compiled code, no helper binary.
"""
from __future__ import annotations

import ctypes
import os

from autograder.sandbox import linux

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same on every architecture
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
TRUNCATE, IOCTL_DEV = 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
READ = EXECUTE | READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the rights a rule on a file may hold


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _syscall(number: int, *args) -> int:
    return int(linux._libc.syscall(ctypes.c_long(number), *args))


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 where Landlock is missing or disabled."""
    version = _syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(version, 0)


def handled_file_rights(abi: int) -> int:
    """Every file right this ABI knows: each one not granted by a rule is denied."""
    rights = (1 << 13) - 1  # ABI 1: execute ... make symbolic link
    for since, right in ((2, 1 << 13), (3, TRUNCATE), (5, IOCTL_DEV)):
        if abi >= since:
            rights |= right
    return rights


def _ruleset(abi: int) -> tuple[int, list[str]]:
    """A new ruleset handling every right the ABI knows; returns its descriptor and what it denies beyond files."""
    attr = _RulesetAttr(handled_file_rights(abi), 0, 0)
    denies, size = [], 8
    if abi >= 4:
        attr.handled_access_net, size = NET_BIND_TCP | NET_CONNECT_TCP, 16
        denies.append("no TCP")
    if abi >= 6:
        attr.scoped, size = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL, 24
        denies.append("no signal to other processes")
    fd = _syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    linux.check(0 if fd >= 0 else -1, "landlock_create_ruleset")
    return fd, denies


def _allow(ruleset: int, path: str, rights: int) -> bool:
    """Grant `rights` beneath `path` (a file: the file rights among them); False when it does not exist."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        linux.check(_syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
                             ctypes.byref(rule), ctypes.c_uint32(0)), f"landlock_add_rule {path}")
    finally:
        os.close(fd)
    return True


def restrict(readable: list[str], writable: list[str], abi: int) -> tuple[int, list[str]]:
    """From now on this process reads only beneath `readable` and `writable`, writes only beneath `writable`.
    Needs no_new_privs (set here). Returns how many paths were granted and what else it denies."""
    ruleset, denies = _ruleset(abi)
    try:
        every = handled_file_rights(abi)
        granted = sum(_allow(ruleset, p, READ) for p in readable)
        granted += sum(_allow(ruleset, p, every) for p in writable)
        linux.set_no_new_privs()
        linux.check(_syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return granted, denies

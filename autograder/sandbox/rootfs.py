"""The worker's file system: an allowlist, built the way bubblewrap builds one.

Inside its own mount namespace the worker mounts a fresh tmpfs as its new root and puts there, bound
read-only from the machine, only what it needs (`visible_paths`):

- the interpreter and its packages, wherever they live: `sys.prefix`, `sys.base_prefix`, every entry of
  `sys.path` (site-packages, `.pth` additions) except the current directory, and the folder of every
  shared library loaded into the process (libraries loaded from an LD_LIBRARY_PATH folder);
- the `autograder` package itself (its folder only, never the project around it);
- the system's programs and libraries: /usr, /bin, /sbin, /lib* (symbolic links kept as links);
- a minimal /etc: the dynamic loader's cache and configuration, the time zone, `alternatives`, and a
  passwd, group and hosts file written for the worker (user `student`, uid 1000);
- /dev with null, zero, full, random, urandom and the /proc/self/fd links; a private tmpfs on /dev/shm;
  the NVIDIA device files when the worker may use CUDA;
- /sys/devices/system/cpu and /node (CPU topology read by torch's thread pools); all of /sys with CUDA;
- model caches named by HF_HOME, HF_HUB_CACHE, TRANSFORMERS_CACHE, HF_DATASETS_CACHE and TORCH_HOME;
- the paths the grader exposes on purpose (`Confinement.expose`: the rubric's encoder and cache);
- a private, size-limited tmpfs on /tmp holding the working directory /tmp/work (also HOME and TMPDIR),
  where the assignment's declared input files appear read-only under their own names;
- its own /proc (the worker builds its root as the first process of its PID namespace).

Everything else (home directories, other checkouts of the course, the release bundle, the results,
other submissions, /root, /opt, /srv, /var, /mnt, /media) does not exist for it. Then the old root is
detached, every mount becomes read-only and nosuid, and only /tmp, /dev/shm and /proc are made writable again.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from autograder.sandbox import linux

SCRATCH_DIR = "/tmp/work"  # the worker's working directory, HOME and TMPDIR
OLD_ROOT = "/oldroot"  # where the machine's root is reachable while the new one is built
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_PATHS = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives",
             "/etc/nsswitch.conf")
CACHE_VARIABLES = ("HF_HOME", "HF_HUB_CACHE", "TRANSFORMERS_CACHE", "HF_DATASETS_CACHE", "TORCH_HOME")
DEVICES = ("null", "zero", "full", "random", "urandom")
MAX_SYMLINKS = 40
WRITABLE = ("/tmp", "/dev/shm", "/proc")  # mounts left writable (/proc: the nested user namespace's id maps)
PASSWD = "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nstudent:x:1000:1000:student:/tmp/work:/usr/sbin/nologin\n"
GROUP = "root:x:0:\nstudent:x:1000:\n"
HOSTS = "127.0.0.1 localhost\n::1 localhost\n"


def package_dir() -> str:
    """The `autograder` package's own folder."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_paths() -> list[str]:
    """The interpreter, its standard library and packages, as this process finds them."""
    import site

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable)),
             *site.getsitepackages(), package_dir()}
    user = site.getusersitepackages()
    if isinstance(user, str) and os.path.isdir(user):
        paths.add(user)
    project = os.path.dirname(package_dir())  # the folder holding the package: a checkout, never shown whole
    # sys.path[0] is where the process was started from (a script's folder, the working folder of -m): not a part
    # of the installation, perhaps a course's folder, perhaps /tmp
    launch = sys.path[0] if sys.path and not sys.flags.safe_path else None
    for entry in sys.path:
        if entry and os.path.isabs(entry) and entry not in ("/", project, launch) and entry != os.getcwd():
            paths.add(entry)
    return sorted(p for p in paths if os.path.exists(p))


def library_dirs() -> list[str]:
    """Folders of the shared libraries mapped into this process (found again when a module loads lazily)."""
    found = set()
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                fields = line.split(maxsplit=5)
                path = fields[5].strip() if len(fields) == 6 else ""
                if path.startswith("/") and ".so" in os.path.basename(path) and not path.endswith(" (deleted)"):
                    found.add(os.path.dirname(path))
    except OSError:
        pass
    return sorted(found)


def cache_paths() -> list[str]:
    """The model and data caches named in the environment (HF_HOME, TORCH_HOME...): a worker sees them read-only."""
    return [os.environ[v] for v in CACHE_VARIABLES if os.environ.get(v)]


def visible_paths(expose: Sequence[str] = ()) -> list[str]:
    """Every path bound read-only into the worker's root (the special ones, /dev, /etc, /tmp, /proc and
    /sys, come on top). Outer paths first; paths inside another one are left out."""
    wanted = [*SYSTEM_PATHS, *python_paths(), *library_dirs(), *cache_paths(), *expose]
    out: list[str] = []
    for p in sorted({os.path.normpath(p) for p in wanted if p and os.path.isabs(p)}, key=lambda p: (p.count("/"), p)):
        if any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            continue
        if p in ("/", "/tmp", "/dev", "/proc", "/sys", "/etc") or SCRATCH_DIR.startswith(p.rstrip("/") + "/"):
            continue  # whole folders the worker has its own of: never the machine's
        out.append(p)
    return [p for p in out if os.path.lexists(p)]


# -- building it ----------------------------------------------------------------------------------------

def _old(path: str) -> str:
    return OLD_ROOT + path


def _make_mount_point(path: str, is_dir: bool) -> None:
    if is_dir:
        os.makedirs(path, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        if not os.path.lexists(path):
            open(path, "w").close()


class _Binder:
    """Makes paths of the machine (reachable under OLD_ROOT) appear at the same place in the new root."""

    def __init__(self):
        self.bound: list[str] = []  # paths bound from the machine: nothing is ever created inside them

    def covered(self, path: str) -> bool:
        return any(path == b or path.startswith(b + "/") for b in self.bound)

    def add(self, path: str, target: str | None = None, depth: int = 0) -> None:
        """Bind the machine's `path` (with everything mounted below it) at `target` (default: the same
        place); symbolic links on the way are recreated as links and their targets added too."""
        if depth > MAX_SYMLINKS:
            raise OSError(40, f"{path}: too many levels of symbolic links")
        if target is None:
            path = os.path.normpath(path)
            parts = [p for p in path.split("/") if p]
            current = ""
            for i, name in enumerate(parts[:-1]):
                current += "/" + name
                if self.covered(current):
                    return  # an outer path is bound already: this one is there with it
                if os.path.islink(_old(current)):
                    self._link(current)
                    resolved = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(_old(current))))
                    return self.add(os.path.join(resolved, *parts[i + 1:]), depth=depth + 1)
            if self.covered(path) or not os.path.lexists(_old(path)):
                return
            if os.path.islink(_old(path)):
                self._link(path)
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(_old(path))))
                return self.add(resolved, depth=depth + 1)
            target = path
        _make_mount_point(target, os.path.isdir(_old(path)))
        linux.mount(_old(path), target, None, linux.MS_BIND | linux.MS_REC)
        self.bound.append(target)

    @staticmethod
    def _link(path: str) -> None:
        if not os.path.lexists(path):
            os.makedirs(os.path.dirname(path) or "/", mode=0o755, exist_ok=True)
            os.symlink(os.readlink(_old(path)), path)


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)
    os.chmod(path, 0o644)


def _group_of(owner: int) -> int:
    """The gid that goes with `owner`: a root grader's worker takes gid = uid; any other keeps its own gid (the only
    one its user namespace maps)."""
    return os.getegid() if owner == os.geteuid() else owner


def _dev(binder: _Binder, shm_bytes: int, owner: int, cuda: bool) -> None:
    os.makedirs("/dev", mode=0o755, exist_ok=True)
    linux.mount("tmpfs", "/dev", "tmpfs", linux.MS_NOSUID | linux.MS_NOEXEC, "size=64k,mode=0755")
    names = list(DEVICES)
    if cuda:
        names += sorted(n for n in os.listdir(_old("/dev")) if n.startswith("nvidia"))
    for name in names:
        if os.path.exists(_old(f"/dev/{name}")):
            binder.add(f"/dev/{name}")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"/dev/{name}")
    os.mkdir("/dev/shm")
    linux.mount("tmpfs", "/dev/shm", "tmpfs", linux.MS_NOSUID | linux.MS_NODEV,
                f"size={shm_bytes},mode=0700,uid={owner},gid={_group_of(owner)}")


def _tmp(binder: _Binder, scratch_bytes: int, owner: int, inputs: dict[str, str]) -> None:
    os.makedirs("/tmp", mode=0o755, exist_ok=True)
    linux.mount("tmpfs", "/tmp", "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, f"size={scratch_bytes},mode=1777")
    os.makedirs(SCRATCH_DIR, mode=0o700)
    for name, source in sorted(inputs.items()):  # declared input files, read-only, under their own names
        target = os.path.normpath(os.path.join(SCRATCH_DIR, name))
        if target.startswith(SCRATCH_DIR + "/") and os.path.exists(_old(source)):
            binder.add(os.path.realpath(_old(source))[len(OLD_ROOT):], target)
    for dirpath, dirnames, _ in os.walk(SCRATCH_DIR):  # the folders made for the inputs belong to the worker
        os.chown(dirpath, owner, _group_of(owner))
        dirnames[:] = [d for d in dirnames if not os.path.ismount(os.path.join(dirpath, d))]


def _mount_points() -> list[str]:
    """Mount points of this namespace outside OLD_ROOT, outer ones first."""
    with open(_old("/proc/self/mountinfo")) as fh:
        points = {line.split()[4].replace("\\040", " ") for line in fh}
    return sorted((p for p in points if p != OLD_ROOT and not p.startswith(OLD_ROOT + "/")), key=lambda p: p.count("/"))


def _make_read_only(points: list[str]) -> None:
    """Every mount read-only and nosuid, then /tmp and /dev/shm (their own mounts only) writable again.
    `points`: every mount point, for kernels older than 5.12 (no mount_setattr: one remount each)."""
    try:
        linux.mount_setattr("/", linux.MOUNT_ATTR_RDONLY | linux.MOUNT_ATTR_NOSUID)
        for writable in WRITABLE:
            linux.mount_setattr(writable, 0, linux.MOUNT_ATTR_RDONLY, recursive=False)
        return
    except OSError as exc:
        if exc.errno != linux.ENOSYS:
            raise
    for point in points:
        if point in WRITABLE:
            continue
        try:
            linux.mount(None, point, None, linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY | linux.MS_NOSUID)
        except OSError:
            if point == "/":
                raise


def build(owner: int, scratch_bytes: int, shm_bytes: int, expose: Sequence[str] = (), inputs: dict[str, str] | None = None,
          cuda: bool = False) -> int:
    """Replace this mount namespace's root by the allowlist root described above; returns how many paths
    were bound from the machine. `owner`: the uid that will own /tmp/work and /dev/shm."""
    paths = visible_paths(list(expose))  # found in the machine's root, before it moves
    base = "/tmp" if os.path.isdir("/tmp") else "/mnt"  # the new root's tmpfs is mounted here first
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    linux.mount("tmpfs", base, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, "size=1m,mode=0755")
    os.mkdir(base + OLD_ROOT)
    linux.pivot_root(base, base + OLD_ROOT)
    os.chdir("/")
    binder = _Binder()
    _tmp(binder, scratch_bytes, owner, dict(inputs or {}))  # first: an interpreter under /tmp is bound inside it
    for path in paths:
        binder.add(path)
    for path in ETC_PATHS:
        binder.add(path)
    _write("/etc/passwd", PASSWD)
    _write("/etc/group", GROUP)
    _write("/etc/hosts", HOSTS)
    _dev(binder, shm_bytes, owner, cuda)
    for path in (["/sys"] if cuda else ["/sys/devices/system/cpu", "/sys/devices/system/node"]):
        binder.add(path)
    os.makedirs("/proc", mode=0o555, exist_ok=True)
    # Its own /proc now, as the first process of its PID namespace: a user namespace may mount a procfs only
    # while one of the machine's is fully visible in the mount namespace, that is before the old root goes.
    linux.mount("proc", "/proc", "proc", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC)
    points = _mount_points()
    linux.umount(OLD_ROOT)
    os.rmdir(OLD_ROOT)
    _make_read_only(points)
    return len(binder.bound)

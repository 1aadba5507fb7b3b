"""The worker's confinement and the wire format, tested directly."""
import os

import nbformat
import pytest
import torch

from autograder.judge import Program
from autograder.notebook.extract import extract
from autograder.sandbox.client import StudentError, WorkerSpec
from autograder.sandbox.remote import keep, remote_attr, remote_isinstance
from autograder.sandbox.isolation import Confinement
from autograder.sandbox.rootfs import SYSTEM_PATHS, visible_paths
from autograder.sandbox.protocol import Decoder, Encoder, Handle, ProtocolError


def program(source: str, **confinement) -> Program:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    ex = extract(nb)
    return Program(ex, WorkerSpec([u.to_wire() for u in ex.units], confinement=Confinement(**confinement),
                                  import_seconds=30))


PROBE = '''
import os, signal
def read(path):
    try:
        return open(path).read()
    except OSError as exc:
        return type(exc).__name__
def listing(path):
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        return type(exc).__name__
def parent():
    return os.getppid()
def kill_parent():
    try:
        os.kill(int(open("/proc/self/status").read().split("PPid:")[1].split()[0]), signal.SIGKILL)
    except Exception as exc:
        return type(exc).__name__
    return "sent"
def write(path):
    try:
        with open(path, "w") as fh:
            fh.write("x")
        return "written"
    except OSError as exc:
        return type(exc).__name__
'''


@pytest.fixture(scope="module")
def private_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("private")
    (d / "reference.py").write_text("SECRET = 42\n")
    return d


def test_private_paths_are_invisible_and_the_judge_is_out_of_reach(private_dir):
    p = program(PROBE)
    try:
        sub = p.proxy()
        assert p.start().status.startswith("isolated")
        assert sub.read(str(private_dir / "reference.py")) == "FileNotFoundError"
        assert sub.listing(str(private_dir)) == "FileNotFoundError"
        assert sub.parent() == 0  # its own PID namespace: the judge has no pid there
        sub.kill_parent()
        assert os.getpid() > 0 and sub.read("/proc/self/status") != ""  # judge alive, worker still answers
        assert sub.write(str(private_dir / "results.json")) in ("FileNotFoundError", "OSError", "PermissionError")
        assert not (private_dir / "results.json").exists()
    finally:
        p.close()


def test_remote_objects_stay_in_the_worker():
    p = program("import torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                "        self.w = torch.nn.Parameter(torch.ones(3))\n    def forward(self, x):\n"
                "        return (self.w * x).sum()\n")
    try:
        sub = p.proxy()
        m = sub.M()
        assert remote_isinstance(m, "torch.nn.Module")
        loss = keep(m, torch.tensor([1.0, 2.0, 3.0]))
        loss.backward()
        assert torch.equal(remote_attr(m, "w.grad"), torch.tensor([1.0, 2.0, 3.0]))
        assert m.w.grad is None  # `m.w` is a copy in the judge: no gradient travels with it
        assert list(m.state_dict()) == ["w"]
        with pytest.raises(StudentError, match="raised RuntimeError"):
            m(torch.ones(4))
    finally:
        p.close()


def test_the_root_holds_only_what_the_worker_needs():
    """An allowlist: the top level of the worker's root, /etc, /dev and the working directory hold what
    rootfs.py lists, nothing else of the machine."""
    p = program(PROBE)
    try:
        sub = p.proxy()
        top = set(sub.listing("/"))
        # the system folders, and the first folder of each installation path (a checkout or a virtual
        # environment may live anywhere: /check, /builds, /opt)
        bound = [p for p in visible_paths() if p not in SYSTEM_PATHS]
        assert top <= {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "dev", "proc", "sys",
                       "tmp", *(p.split("/")[1] for p in bound)}, (top, bound)
        assert {"usr", "etc", "dev", "proc", "tmp"} <= top
        assert set(sub.listing("/etc")) <= {"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives",
                                           "nsswitch.conf", "passwd", "group", "hosts"}
        assert "student:x:1000:1000" in sub.read("/etc/passwd") and "shadow" not in sub.listing("/etc")
        assert set(sub.listing("/dev")) == {"null", "zero", "full", "random", "urandom", "fd", "stdin", "stdout",
                                           "stderr", "shm"}
        assert sub.listing("/tmp/work") == [] and sub.write("/tmp/work/x") == "written"
        for hidden in ("/root/.bash_history", "/etc/shadow", "/var/log", "/home"):
            if any(p == hidden or p.startswith(hidden + "/") for p in bound):
                continue  # the installation lives there: only its own folders are shown
            assert sub.listing(hidden) in ("FileNotFoundError", "NotADirectoryError"), hidden
    finally:
        p.close()


def test_protocol_round_trip_and_refusals():
    value = {"a": (1, 2.5, float("nan")), 3: [None, True, "s", torch.arange(4)], "dt": torch.float16}
    enc = Encoder(on_unknown=lambda o: Handle(7, type(o).__name__))
    data = enc.encode({**value, "obj": object()})
    out = Decoder(enc.tensors, lambda h: ("handle", h.id)).decode(data)
    assert out["a"][:2] == (1, 2.5) and out["a"][2] != out["a"][2]
    assert torch.equal(out[3][3], torch.arange(4)) and out["dt"] is torch.float16 and out["obj"] == ("handle", 7)
    with pytest.raises(ProtocolError):
        Decoder({}, None).decode({"__tensor__": "t0"})
    with pytest.raises(ProtocolError):
        Decoder({}, None).decode({"__dtype__": "not_a_dtype"})

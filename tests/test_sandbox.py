"""The worker's confinement and the wire format, tested directly."""
import os

import nbformat
import pytest
import torch

from autograder.program import Program
from autograder.notebook.extract import extract
from autograder.sandbox.client import StudentError, WorkerSpec
from autograder.sandbox.remote import keep, remote_attr, remote_isinstance
from autograder.sandbox.isolation import Confinement
from autograder.sandbox.rootfs import SYSTEM_PATHS, visible_paths
from autograder.sandbox.protocol import Handle, ProtocolError
from autograder.sandbox.values import Decoder, ValueEncoder


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
        copy = m.w  # a copy in the judge that reads as the student's tensor: requiring grad, its .grad copied too
        assert copy.requires_grad and copy.is_leaf and torch.equal(copy.grad, torch.tensor([1.0, 2.0, 3.0]))
        assert list(m.state_dict()) == ["w"]
        with pytest.raises(StudentError, match="raised RuntimeError"):
            m(torch.ones(4))
    finally:
        p.close()


def test_the_memory_limit_is_what_code_may_allocate_beyond_the_libraries_already_mapped():
    # A worker starts with torch mapped: some 0.6 GB of address space for a CPU build, 3 GB for a CUDA build on a
    # machine without a GPU. A limit below that must still leave the notebook its 256 MB, and no more.
    p = program("import torch\ndef allocate(mb):\n    return int(torch.ones(mb << 18).sum())  # mb MB of float32\n",
                memory_bytes=256 << 20)
    try:
        sub = p.proxy()
        assert sub.allocate(128) == 128 << 18
        with pytest.raises(StudentError, match="raised (RuntimeError|MemoryError)"):
            sub.allocate(512)
    finally:
        p.close()


def test_functions_are_called_in_one_request_and_values_still_come_back_as_data():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import math\nLIMIT = 3\nSCALE = torch = None\ndef f(x):\n    return x + LIMIT\nclass C:\n    k = 2\n")])
    ex = extract(nb)
    helpers = ["import math\nTABLE = [1, 2]\ndef g(x):\n    return submission.f(x) * 10\n"]
    p = Program(ex, WorkerSpec([u.to_wire() for u in ex.units], import_seconds=30), helpers)
    sent = []
    original = p.worker.roundtrip
    p.worker.roundtrip = lambda header, tensors, what: (sent.append(header["op"]), original(header, tensors, what))[1]
    try:
        sub = p.proxy()
        p.start()
        sent.clear()
        assert sub.f(1) == 4 and sent == ["call"]  # no getattr first
        assert sub.helpers.g(1) == 40 and sent == ["call", "call"]
        assert sub.LIMIT == 3 and sub.helpers.TABLE == [1, 2]  # data: fetched, and it arrives as data
        assert sub.C.k == 2 and sub.math.sqrt(4.0) == 2.0 and sub.helpers.math.floor(2.5) == 2
        assert sub.SCALE is None
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
    enc = ValueEncoder(on_unknown=lambda o: Handle(7, type(o).__name__))
    data = enc.encode({**value, "obj": object()})
    out = Decoder(enc.tensors, lambda h: ("handle", h.id)).decode(data)
    assert out["a"][:2] == (1, 2.5) and out["a"][2] != out["a"][2]
    assert torch.equal(out[3][3], torch.arange(4)) and out["dt"] is torch.float16 and out["obj"] == ("handle", 7)
    with pytest.raises(ProtocolError):
        Decoder({}, None).decode({"__tensor__": "t0"})
    with pytest.raises(ProtocolError):
        Decoder({}, None).decode({"__dtype__": "not_a_dtype"})


def _through_a_pipe(frames: list[bytes]) -> list:
    """What the judge reads (pipes.Replies) from a worker's pipe that carries these frames back to back."""
    import threading
    import time

    from autograder.sandbox.pipes import Replies

    r, w = os.pipe()
    writer = threading.Thread(target=lambda: (_write_all(w, b"".join(frames)), os.close(w)))
    writer.start()
    replies = Replies(r)
    got = [replies.get(time.monotonic() + 30) for _ in frames]
    writer.join()
    replies.close()
    return got


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _wire(header, tensors):
    """A message written as a worker writes it, then read back as the worker reads it (a stream) and as the
    judge reads it (a pipe, twice in a row: frames that arrive together are told apart)."""
    import io

    from autograder.sandbox.protocol import read_message, write_message

    class Gathering:  # a stream that gathers what it is given with `+=` (a bytes-like object, not an array)
        data = bytearray()

        def write(self, part):
            self.data += part

        def flush(self):
            pass

    buf, gathered = io.BytesIO(), Gathering()
    write_message(buf, header, tensors)
    write_message(gathered, header, tensors)
    frame = buf.getvalue()
    assert bytes(gathered.data) == frame
    return [read_message(io.BytesIO(frame)), *_through_a_pipe([frame, frame])]


def test_tensors_travel_as_their_bytes():
    base = torch.arange(24, dtype=torch.float64).reshape(4, 6)
    sent = {"f64": base, "large": torch.arange(3 << 20, dtype=torch.int32),  # 12 MB: many reads "strided": base[:, ::2], "scalar": torch.tensor(3.5), "empty": torch.zeros(0, 5),
            "bool": torch.tensor([[True, False], [False, True]]), "bf16": torch.arange(3, dtype=torch.bfloat16),
            "c64": torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64), "i8": torch.tensor([-128, 127], dtype=torch.int8),
            "long": torch.arange(7) * (2 ** 40)}
    for header, got in _wire({"ok": 1}, sent):
        assert header == {"ok": 1} and set(got) == set(sent)
        for name, t in sent.items():
            assert type(got[name]) is torch.Tensor and got[name].dtype == t.dtype and got[name].shape == t.shape
            assert torch.equal(got[name], t), name
            if got[name].numel():
                assert got[name].data_ptr() % 16 == 0  # aligned for vectorised kernels
        got["f64"][0, 0] = -1.0  # writable, and not the sender's memory
        assert base[0, 0] == 0 and got["f64"][0, 0] == -1


def test_the_judge_encoder_snapshots_tensors_a_worker_sends_at_once():
    t = torch.ones(3)
    judge, worker = ValueEncoder(on_unknown=None), ValueEncoder(on_unknown=None, snapshot=False)
    judge.encode(t), worker.encode(t)
    t.add_(1)  # a check changing its input after sending it: what the judge recorded stays as sent
    assert torch.equal(judge.tensors["t0"], torch.ones(3)) and torch.equal(worker.tensors["t0"], t)
    with pytest.raises(TypeError, match="cannot be sent"):
        ValueEncoder(on_unknown=None).encode(torch.zeros(2, dtype=torch.float8_e5m2fnuz))


def _forged(table: dict, data: bytes) -> bytes:
    import json
    import struct

    head = json.dumps(table).encode()
    pad = -(8 + len(head)) % 64
    blob = struct.pack("<Q", len(head)) + head + bytes(pad) + data
    header = b'{"ok": 1}'
    return struct.pack("<Q", len(header)) + header + struct.pack("<Q", len(blob)) + blob


@pytest.mark.parametrize("table, data, why", [
    ({"t0": ["float32", [2], 0, 8]}, b"\0" * 4, "past the end"),
    ({"t0": ["float32", [3], 0, 8]}, b"\0" * 16, "size disagrees with the shape"),
    ({"t0": ["object", [1], 0, 8]}, b"\0" * 8, "a dtype not on the list"),
    ({"t0": ["float32", [-1], 0, 0]}, b"", "a negative dimension"),
    ({"t0": ["float32", [1] * 65, 0, 4]}, b"\0" * 4, "too many dimensions"),
    ({"t0": ["float32", [2.0], 0, 8]}, b"\0" * 8, "a float dimension"),
    ({"t0": ["float32", [2], 0, 8], "t1": ["float32", [2], 4, 8]}, b"\0" * 16, "overlapping tensors"),
    ({"t0": ["bool", [2], 0, 2]}, b"\x01\x02", "a boolean that is not 0 or 1"),
    ({"t0": "float32"}, b"", "an entry that is not a list"),
    ([1, 2], b"", "a table that is not an object"),
])
def test_forged_tensor_tables_are_refused(table, data, why):
    import io

    from autograder.sandbox.protocol import read_message

    frame = _forged(table, data)
    with pytest.raises(ProtocolError):
        read_message(io.BytesIO(frame))
    assert isinstance(_through_a_pipe([frame])[0], ProtocolError)


def test_sets_and_complex_numbers_travel_as_data_and_functions_only_from_the_judge():
    from autograder.sandbox.protocol import JudgeFunction

    def round_trip(value, **decoder):
        enc = ValueEncoder(on_unknown=lambda obj: Handle(7, type(obj).__name__))
        return Decoder(enc.tensors, lambda h: h, **decoder).decode(enc.encode(value))

    assert round_trip({1, "a", (2, 3.5)}) == {1, "a", (2, 3.5)}
    assert round_trip(frozenset({1})) == frozenset({1}) and type(round_trip(frozenset({1}))) is frozenset
    assert round_trip(complex(1, float("nan"))).real == 1 and round_trip(-2j) == -2j
    assert round_trip({object()}) == Handle(7, "set")  # elements that are not data: the set stays in the worker
    enc = ValueEncoder(on_unknown=lambda obj: JudgeFunction(0, "f", 1))
    data = enc.encode(lambda x: x)
    with pytest.raises(ProtocolError, match="a function in a message to the judge"):
        Decoder({}, lambda h: h).decode(data)  # a worker never hands the judge a function to run
    assert Decoder({}, lambda h: h, judge_function=lambda i, name: (i, name)).decode(data) == (0, "f")
    with pytest.raises(ProtocolError):
        Decoder({}, lambda h: h).decode({"__set__": [[1]]})  # an unhashable element


def test_a_reply_nested_past_the_parsers_depth_is_a_malformed_message_not_a_grader_error():
    from autograder.sandbox.protocol import decode_message

    with pytest.raises(ProtocolError, match="nested too deeply"):
        decode_message(b'{"ok": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", bytearray())


def test_progress_a_statement_repeats_buys_it_no_more_time():
    spam = ("import gc, time\nfrom autograder.sandbox.worker import Worker\n"
            "from autograder.sandbox.protocol import write_message\n"
            "def _spam():\n    w = next(o for o in gc.get_objects() if isinstance(o, Worker))\n"
            "    for _ in range(8):\n        write_message(w.out, {'progress': 0})\n        time.sleep(1)\n"
            "_x = _spam()\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(spam + "\ndef f():\n    return 1\n")])
    ex = extract(nb, {"_x"})
    prog = Program(ex, WorkerSpec([u.to_wire() for u in ex.units], confinement=Confinement(), import_seconds=3))
    try:
        report = prog.start()
        assert any("did not finish within 3 s" in why for why in report.errors.values()), report.errors
        assert report.defined.get("f") == "callable"
    finally:
        prog.close()


def test_a_shipped_python_file_imports_as_beside_a_notebook(tmp_path):
    from autograder.program import ProgramProxy

    (tmp_path / "bars.py").write_text("def make_bars(n):\n    return [1] * n\n")
    prog = program("from bars import make_bars\n", inputs={"bars.py": str(tmp_path / "bars.py")})
    try:
        assert prog.start().errors == {} and ProgramProxy(prog).make_bars(3) == [1, 1, 1]
    finally:
        prog.close()


def test_a_stub_reached_through_another_function_is_named():
    p = program("def step(x):\n    raise NotImplementedError()\n\ndef train(x):\n    return step(x) + 1\n\n"
                "class Model:\n    def __init__(self):\n        raise NotImplementedError()\n\n"
                "class Value:\n    def __add__(self, other):\n        raise NotImplementedError()\n\n"
                "def build():\n    return Model()\n\ndef total():\n    return Value() + 1\n")
    try:
        sub = p.proxy()
        p.start()
        messages = []
        for call in (sub.train, sub.step, sub.build, sub.total):
            with pytest.raises(StudentError) as caught:
                call(*([1] if call in (sub.train, sub.step) else []))
            assert caught.value.stub
            messages.append(caught.value.describe())
        stub = "which is not implemented yet (it raised NotImplementedError)"
        expected = ["your train calls step, " + stub, "your step is not implemented yet (it raised "
                    "NotImplementedError)", "your build calls Model, " + stub, "your total calls Value.__add__, " + stub]
        # each says where: a `raise NotImplementedError()` left among written code is found there
        assert [m.split(", at cell")[0] for m in messages] == expected, messages
        assert all(", at cell 1, line " in m and m.endswith("raise NotImplementedError()") for m in messages), messages
    finally:
        p.close()


def test_a_notimplementederror_raised_by_a_library_is_no_stub():
    # nn.Module raises NotImplementedError for a forward that is missing (here misspelt): the student's code is
    # written, and the message must say what torch said, not that a part is "not implemented yet"
    p = program("import torch\nfrom torch import nn\n\nclass Net(nn.Module):\n    def foward(self, x):\n"
                "        return x\n\ndef run():\n    return Net()(torch.zeros(1))\n\n"
                "def todo():\n    raise NotImplementedError(\n        'replace this line')\n")
    try:
        sub = p.proxy()
        p.start()
        with pytest.raises(StudentError) as caught:
            sub.run()
        assert not caught.value.stub and "not implemented yet" not in caught.value.describe()
        assert "forward" in caught.value.describe(), caught.value.describe()
        with pytest.raises(StudentError) as caught:
            sub.todo()
        assert caught.value.stub  # a raise spread over two lines is still the notebook's stub
    finally:
        p.close()


OBJECTS = '''
import math
class Value:
    def __init__(self, data, _children=()):
        self.data = data
        self.grad = 0.0
        self._prev = set(_children)
    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        return Value(self.data + other.data, (self, other))
    def __radd__(self, other):
        return self + other
    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        return Value(self.data * other.data, (self, other))
    def __rmul__(self, other):
        return self * other
    def __neg__(self):
        return self * -1
    def __sub__(self, other):
        return self + (-other)
    def __pow__(self, k):
        return Value(self.data ** k, (self,))
    def __lt__(self, other):
        return self.data < (other.data if isinstance(other, Value) else other)
    def __repr__(self):
        return f"Value(data={self.data})"
    def __float__(self):
        return float(self.data)
class Neuron:
    def __init__(self, n):
        self.w = [Value(0.5 * i) for i in range(n)]
        self.b = Value(0.0)
    def parameters(self):
        return self.w + [self.b]
'''


def test_operators_conversions_and_type_questions_are_answered_by_the_object_in_its_worker():
    p = program(OBJECTS)
    try:
        sub = p.proxy()
        p.start()
        a, b = keep(sub.Value, 2.0), keep(sub.Value, 3.0)
        assert (a + b).data == 5.0 and (a * b).data == 6.0 and (2 * a).data == 4.0 and (a + 1).data == 3.0
        assert (-a).data == -2.0 and (a - b).data == -1.0 and (a ** 2).data == 4.0 and sum([a, b]).data == 5.0
        assert a < b and not (b < a) and b > a and float(a) == 2.0 and bool(a)
        assert str(a) == "Value(data=2.0)" and f"{a}" == "Value(data=2.0)"
        assert isinstance(a, sub.Value) and not isinstance(a, sub.Neuron) and not isinstance(3, sub.Value)
        n = keep(sub.Neuron, 3)
        params = n.parameters()
        # one object, one handle: the same object reached twice is equal to itself and nothing else
        assert n.b in params and n.b == n.b and n.w[0] != n.b and len(set(params + params)) == 4
        with pytest.raises(StudentError):
            a @ b  # Value has no __matmul__: the student's TypeError, as in a kernel
    finally:
        p.close()


def test_a_traceback_quotes_the_line_of_every_statement_of_a_cell():
    p = program("def outer(x):\n    return inner(x) + 1\n\n\ndef inner(x):\n    return 1 / x\n")
    try:
        sub = p.proxy()
        p.start()
        with pytest.raises(StudentError) as caught:
            sub.outer(0)
        assert caught.value.trace == ["cell 1, line 2, in outer: return inner(x) + 1",
                                      "cell 1, line 6, in inner: return 1 / x"]
    finally:
        p.close()


def test_the_judge_never_unpickles_and_a_worker_unpickles_only_what_the_judge_sent():
    import pickle

    loss, model = torch.nn.MSELoss(), torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.frombuffer(bytearray(pickle.dumps([loss, model, optimizer])), dtype=torch.uint8)
    message = [{"__pickled__": 0}, {"__pickled__": 2}, {"__pickled__": 1}]
    with pytest.raises(ProtocolError, match="pickled object in a message to the judge"):
        Decoder({"bundle": data}, lambda h: h).decode(message)  # the judge's decoder
    got_loss, got_optimizer, got_model = Decoder({"bundle": data}, lambda h: h, unpickle=True).decode(message)
    assert isinstance(got_loss, torch.nn.MSELoss)
    # the objects of one message come from one pickle: the optimizer holds the model's own parameters
    assert got_optimizer.param_groups[0]["params"][0] is got_model.weight
    with pytest.raises(ProtocolError, match="malformed pickled object"):
        Decoder({"bundle": data}, lambda h: h, unpickle=True).decode({"__pickled__": 3})


LIARS = '''
import numbers
import typing


class Liar:
    """Claims another class through a `__class__` property."""
    @property
    def __class__(self):
        return float


class SaysYes(type):
    def __instancecheck__(cls, obj):
        return True

    def __subclasscheck__(cls, other):
        return True


class Anything(metaclass=SaysYes):
    pass


class MyFloat(float):
    pass


@typing.runtime_checkable
class Sized(typing.Protocol):
    def __len__(self): ...


class Box:
    def __len__(self):
        return 1


def liar():
    return Liar()


def my_float():
    return MyFloat(0.5)
'''


def test_type_questions_are_answered_from_the_real_type_not_what_the_object_or_its_metaclass_claims():
    p = program(LIARS)
    try:
        sub = p.proxy()
        liar, half, box = keep(sub.liar), keep(sub.my_float), keep(sub.Box)
        # a __class__ property or a metaclass the submission writes cannot make the judge believe it
        assert not remote_isinstance(liar, "float") and not isinstance(liar, sub.Anything)
        assert not issubclass(sub.Box, sub.Anything)
        # Python's own answers stay: a real subclass, a library's protocol and ABC checks
        assert remote_isinstance(half, "float") and remote_isinstance(half, "numbers.Real")
        assert isinstance(box, sub.Sized) and not remote_isinstance(liar, "numbers.Real")
    finally:
        p.close()


def test_a_definition_remembered_as_hung_ends_the_check_with_that_message_wherever_it_is_called():
    # a helper or a check quoting the error in its own words ("... failed (NotRunAgain: ...)") never sees it: the
    # call raises TrippedCall, which ends the check with the earlier check's message
    from autograder.sandbox import Hang, TrippedCall

    p = program("def f(x):\n    return x\n\ndef g(x):\n    return f(x) + 1\n")
    try:
        sub = p.proxy()
        p.start()
        p.remember_hang(Hang("your f", [], False, "f"), "check 1", "timed out after 10 s there")
        p.start()  # the tripwires go in
        for call in (sub.f, sub.g):
            with pytest.raises(TrippedCall, match="^not run: your f did not finish in an earlier check, 'check 1'"):
                call(1)
    finally:
        p.close()


def test_a_request_goes_out_whole_through_a_pipe_that_takes_it_in_pieces():
    """_write_all: buffers of every size, written as far as the pipe takes them, each byte once and in order; a
    reader that stops reading ends the write at the deadline as a timeout, never a blocked judge."""
    import threading
    import time

    from autograder.sandbox.client import WorkerProcess, WorkerTimeout

    worker = WorkerProcess(WorkerSpec(units=[]))
    worker._hang = lambda doing: doing
    worker.kill = lambda: None
    parts = [b"", b"head", bytes(range(256)) * 3000, b"x", b"", b"tail" * 70000]
    r, w = os.pipe()
    os.set_blocking(w, False)
    got = bytearray()

    def read_slowly():
        while chunk := os.read(r, 50_000):
            got.extend(chunk)
            time.sleep(0.001)

    reader = threading.Thread(target=read_slowly)
    reader.start()
    worker.deadline = time.monotonic() + 30
    worker._write_all(w, [memoryview(p) for p in parts if p], "sending")
    os.close(w)
    reader.join()
    os.close(r)
    assert bytes(got) == b"".join(parts)
    r, w = os.pipe()
    os.set_blocking(w, False)
    worker.deadline = time.monotonic() + 0.3
    with pytest.raises(WorkerTimeout):
        worker._write_all(w, [memoryview(bytes(4 << 20))], "sending")
    assert worker.hangs == ["sending"]
    os.close(r)
    os.close(w)


@pytest.mark.parametrize("shape", [[0, 2**63], [0, 2**40], [2**31, 0, 2**31]])
def test_a_tensor_table_torch_cannot_make_is_a_malformed_message_not_a_grader_error(shape):
    """A notebook can write its own reply to the judge: a table whose shape torch refuses (an overflow, a dimension
    larger than any message) is the worker's garbage (the check fails), never an internal error of the judge that
    leaves the whole submission not graded."""
    import json
    import struct

    from autograder.sandbox.protocol import decode_message

    table = json.dumps({"t0": ["float32", shape, 0, 0]}).encode()
    blob = bytearray(struct.pack("<Q", len(table)) + table + bytes(-(8 + len(table)) % 64))
    with pytest.raises(ProtocolError):
        decode_message(b'{"ok": {"__tensor__": "t0"}}', blob)


def test_load_errors_a_notebook_forged_are_left_out():
    from autograder.sandbox.client import _load_errors

    reported = [{"unit": "0", "type": "X"}, {"unit": 2, "type": "NameError", "message": "m", "traceback": "x"},
                "junk", {"unit": 3, "type": "E", "message": "n", "traceback": ["cell 1, line 1", 5]}]
    assert _load_errors(reported) == {2: "raised NameError: m", 3: "raised E: n (cell 1, line 1; 5)"}
    assert _load_errors({"unit": 1}) == {}


def test_what_a_call_changed_is_written_into_the_judges_objects_until_the_check_ends():
    """changes.py: a test cell's tensor filled in place, its model trained and its optimizer stepped by the student's
    code are written back (as in a kernel) and put back when the check ends, so that an object the judge keeps
    across checks (a model in a module the tests import) carries nothing of one student's into the next check;
    a malformed state from the worker changes nothing."""
    from autograder.sandbox.changes import undone_after, write_back

    t, model = torch.zeros(3), torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    w0 = model.weight.detach().clone()
    trained = torch.nn.Linear(2, 1)
    trained.train(False)
    changes = {"tensors": {"t0": torch.ones(3), "t9": torch.ones(3)},
               "objects": {0: {"state": trained.state_dict(), "training": {"": False}, "requires_grad": {},
                               "grads": {"weight": torch.ones(1, 2)}},
                           1: {"state": "garbage"}, 7: {"state": {}}}}
    with undone_after():
        assert write_back(("value", changes), {"t0": t}, [model, optimizer]) == "value"
        assert torch.equal(t, torch.ones(3)) and torch.equal(model.weight, trained.weight) and not model.training
        assert torch.equal(model.weight.grad, torch.ones(1, 2))
        assert optimizer.param_groups[0]["params"][0] is model.weight  # written into, never replaced
    assert torch.equal(t, torch.zeros(3)) and torch.equal(model.weight.detach(), w0) and model.training
    assert model.weight.grad is None


def test_a_forged_state_is_refused_and_changes_that_leave_no_version_are_seen():
    """The worker's reply is the student's to forge: one tensor sent under many names (an optimizer's load_state_dict
    would copy each: gigabytes in the judge from a small message), keys a scheduler would take as attributes (its
    `step`), objects of the worker's are never loaded; and `x.data.fill_()` or a numpy view's write, which bump no
    version counter, are seen by their values."""
    from autograder.sandbox.changes import Watch, undone_after, write_back

    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)
    big = torch.zeros(64, 64)
    amplified = {"state": {0: {"momentum_buffer": [big] * 100}},
                 "param_groups": optimizer.state_dict()["param_groups"]}
    injected = {**scheduler.state_dict(), "step": "hijacked", "optimizer": "hijacked", "last_epoch": 7}
    with undone_after():
        write_back((None, {"objects": {0: {"state": amplified}, 1: {"state": injected}}}), {}, [optimizer, scheduler])
        assert not optimizer.state and callable(scheduler.step) and scheduler.optimizer is optimizer
        assert scheduler.last_epoch == 7  # (the scheduler's own keys are taken)
    assert scheduler.last_epoch == 0

    x, array = torch.zeros(3), torch.zeros(2)
    watch = Watch({"t0": x, "t1": array}, [model])
    x.data.fill_(1.0)
    array.numpy()[...] = 2.0
    model.weight.data.fill_(0.5)
    changes = watch.changes()
    assert sorted(changes["tensors"]) == ["t0", "t1"] and list(changes["objects"]) == [0]

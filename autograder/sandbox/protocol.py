"""Wire format between the judge and a worker process.

A message is a JSON header plus an optional blob of tensors, framed by lengths:

    [8-byte header length][header JSON][8-byte blob length][blob]
    blob: [8-byte table length][table JSON][padding][tensor bytes, each at a 64-byte aligned offset]

Values are encoded as JSON with tagged objects for what JSON lacks (tuples, sets, non-string dict keys,
non-finite floats, complex numbers, tensors, dtypes, handles, the judge's functions passed to student code, which
the worker calls back and never runs itself). Tensors travel in the blob as their raw bytes; the table
gives each one's dtype, shape and place. Both sides decode with parsers that never execute code (json,
and a table checked entry by entry before any tensor is made: a dtype from a fixed list, a shape whose
size is the bytes given, places inside the blob that do not overlap, booleans that are 0 or 1): the
judge never unpickles what student code produced. A received tensor is a plain torch.Tensor over the
message's own buffer, no copy.
"""
from __future__ import annotations

import json
import math
import re
import signal
import struct
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

import torch
STACK_SIGNAL = signal.SIGUSR2  # on it, a worker's faulthandler writes the stacks of its threads to its log
MAX_HEADER_BYTES = 64 * 1024 * 1024
MAX_BLOB_BYTES = 1024 * 1024 * 1024
_LEN = struct.Struct("<Q")
_SURROGATE = re.compile("[\ud800-\udfff]")
_ALIGN = 64  # tensor data offsets in a blob: aligned for any dtype's vectorised loads
MAX_DIMS = 64
# the dtypes that travel (by their names in torch), with their element sizes
DTYPES = {name: getattr(torch, name) for name in (
    "float64", "float32", "float16", "bfloat16", "complex128", "complex64", "int64", "int32", "int16", "int8",
    "uint8", "uint16", "uint32", "uint64", "bool", "float8_e4m3fn", "float8_e5m2") if hasattr(torch, name)}
_DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}


class ProtocolError(Exception):
    """The peer sent something that is not a valid message (or died mid-message)."""


@dataclass(frozen=True)
class Handle:
    """A reference to an object that lives in a worker (an instance, a generator, ...); with a `path`, to what that
    dotted attribute path of the object is when the worker receives the handle (a function of the notebook,
    looked up where it is used: no round trip to fetch it first)."""

    id: int
    type_name: str
    path: str = ""

    def child(self, name: str) -> "Handle":
        return Handle(self.id, "object", f"{self.path}.{name}" if self.path else name)


@dataclass(frozen=True)
class JudgeFunction:
    """A function of the judge's (a test cell's `lambda x: x**2 - 1`) passed to student code: the worker gets a
    function that calls it back through the judge, where it runs; its code never runs in the worker. `nonce`
    differs for every function passed, so that no recorded reply of the reference is taken for another one's."""

    id: int
    name: str
    nonce: int


@dataclass(frozen=True)
class Pickled:
    """An object of the judge's that is not data (a loss module, a DataLoader, a model a test cell built) sent to a
    worker pickled: the worker unpickles it, the judge never unpickles anything. The objects one message sends this
    way travel in one pickle (its BUNDLE tensor), so that what they share stays shared in the worker (an optimizer
    holds the parameters of the model sent beside it); `index` is the object's place in it."""

    index: int


BUNDLE = "bundle"  # the tensor of a message holding the pickle of its Pickled objects (a list, in their order)


_PLAIN_HASHABLE = (type(None), bool, int, float, complex, str)
_AS_IS = frozenset((type(None), bool, str))  # encoded as themselves (exact types: a subclass takes the general rules)
_CONTAINERS = frozenset((list, tuple, dict))


def _plain_hashable(x) -> bool:
    """A set's element that travels as data: a number, a string, or a tuple or frozenset of those."""
    if type(x) in (tuple, frozenset):
        return all(_plain_hashable(y) for y in x)
    return type(x) in _PLAIN_HASHABLE


def _float(x: float) -> Any:
    if math.isfinite(x):
        return x
    return {"__float__": repr(x)}  # 'nan', 'inf', '-inf'


def is_library_config(obj) -> bool:
    """A transformers configuration (BertConfig...): settings only, rebuilt from them on the other side."""
    t = type(obj)
    return t.__module__.startswith("transformers.") and t.__name__.endswith("Config") and hasattr(obj, "to_json_string")


@dataclass(frozen=True)
class ConfigValue:
    """A transformers configuration as plain data: its class (transformers.<Name>Config) and its settings."""

    type_name: str
    settings: dict

    @classmethod
    def of(cls, obj) -> "ConfigValue":
        return cls(f"transformers.{type(obj).__name__}", json.loads(obj.to_json_string(use_diff=False)))

    def valid(self) -> bool:
        name = self.type_name.removeprefix("transformers.")
        return (self.type_name.startswith("transformers.") and name.isidentifier() and name.endswith("Config")
                and isinstance(self.settings, dict))

    def build(self):
        """The configuration object (in a worker: the library is imported there anyway)."""
        import transformers

        cls = getattr(transformers, self.type_name.removeprefix("transformers."), None)
        if not isinstance(cls, type) or not issubclass(cls, transformers.PretrainedConfig):
            raise ProtocolError(f"unknown configuration class {self.type_name}")
        return cls.from_dict(dict(self.settings))


class Encoder:
    """Turns a Python value into JSON-able data plus a dict of tensors.

    `on_unknown(obj)` decides what an unsupported object becomes; the worker turns it into a
    Handle, the judge refuses it (the judge sends only plain data and handles it received).
    """

    def __init__(self, on_unknown, by_value: bool = False, snapshot: bool = True, max_items: int = 0,
                 autograd: bool = False, sources: bool = False):
        self.tensors: dict[str, torch.Tensor] = {}
        # with `sources`: each tensor's (or numpy array's) own object, by its key (changes.py writes into them)
        self.sources: dict[str, Any] | None = {} if sources else None
        # a reply's tensors say what autograd knew of them (requires_grad, a leaf's .grad, whether it was a leaf),
        # so that a copy reads as the student's tensor did (`assert not w.requires_grad`, `w.grad is not None`);
        # a request's tensors travel as plain data
        self.autograd = autograd
        # the most values (containers, numbers, strings, tensors) one encoding may hold (0: no limit): a reply of
        # millions of small objects is refused after that many, not encoded whole first
        self.max_items, self.items = max_items, 0
        self.on_unknown = on_unknown
        # a torch.Generator travels as its state, a transformers configuration as its settings (else: handles)
        self.by_value = by_value
        # copy each tensor as it is encoded (the judge keeps requests it may send again: recording.py); a
        # worker writes its reply at once and needs no copy
        self.snapshot = snapshot

    def encode(self, obj: Any, depth: int = 0) -> Any:
        if depth > 64:
            raise ValueError("value nested more than 64 levels deep")
        kind = type(obj)
        if self.max_items:  # every value counted once: the top one here, the others as their container's length
            self.items += (depth == 0) + (len(obj) if kind in _CONTAINERS else 0)
            if self.items > self.max_items:
                raise ValueError(f"the value holds more than {self.max_items:,} items (lists, dicts, numbers...), the "
                                 "most one result may hold")
        # the types most values are, by exact type (what the general rules below make of them, without their
        # isinstance tests: a request or reply is a few such values, encoded hundreds of times a submission)
        if kind in _AS_IS:
            return obj
        if kind is int:
            return obj if abs(obj) < 2**63 else {"__bigint__": str(obj)}
        if kind is float:
            return _float(obj)
        if kind is list:
            return [self.encode(x, depth + 1) for x in obj]
        if kind is tuple:
            return {"__tuple__": [self.encode(x, depth + 1) for x in obj]}
        if kind is dict:
            return {"__dict__": [[self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in obj.items()]}
        if kind is torch.Tensor or kind is torch.nn.Parameter:
            return self._tensor(obj)
        if kind is Handle:
            return _handle(obj)
        return self._encode_other(obj, depth)

    def _encode_other(self, obj: Any, depth: int) -> Any:
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return obj if abs(obj) < 2**63 else {"__bigint__": str(obj)}
        if isinstance(obj, float):
            return _float(obj)
        if isinstance(obj, complex):
            return {"__complex__": [_float(obj.real), _float(obj.imag)]}
        if type(obj) in (set, frozenset) and all(_plain_hashable(x) for x in obj):
            return {"__set__": [self.encode(x, depth + 1) for x in obj], "frozen": type(obj) is frozenset}
        if isinstance(obj, torch.Tensor):
            return self._tensor(obj)
        if isinstance(obj, Handle):
            return _handle(obj)
        if isinstance(obj, torch.dtype):
            return {"__dtype__": str(obj).removeprefix("torch.")}
        if isinstance(obj, torch.device):
            return {"__device__": str(obj)}
        if isinstance(obj, torch.Size):
            return {"__tuple__": [int(d) for d in obj]}
        if isinstance(obj, ConfigValue) or self.by_value and is_library_config(obj):
            value = obj if isinstance(obj, ConfigValue) else ConfigValue.of(obj)
            return {"__config__": value.type_name, "settings": value.settings}
        if isinstance(obj, torch.Generator) and self.by_value:
            return {"__generator__": self._tensor(obj.get_state()), "device": str(obj.device)}
        if type(obj) is tuple:
            return {"__tuple__": [self.encode(x, depth + 1) for x in obj]}
        if type(obj) is list:
            return [self.encode(x, depth + 1) for x in obj]
        if type(obj) is dict or _is_plain_mapping(obj):
            return {"__dict__": [[self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in obj.items()]}
        if _is_numpy_array(obj):
            return self._tensor(torch.from_numpy(obj.copy()), numpy=True, source=obj)
        if _is_numpy_scalar(obj):
            return self.encode(obj.item(), depth)
        handle = self.on_unknown(obj)
        if isinstance(handle, Pickled):
            return {"__pickled__": handle.index}
        if isinstance(handle, JudgeFunction):
            return {"__judge_function__": handle.id, "name": handle.name, "nonce": handle.nonce}
        if not isinstance(handle, Handle):
            raise TypeError(f"cannot encode a {type(obj).__name__}")
        return _handle(handle)

    def _tensor(self, t: torch.Tensor, numpy: bool = False, source: Any = None) -> Any:
        autograd = self._autograd_tags(t) if self.autograd else {}  # (its .grad first, under a key of its own)
        key = f"t{len(self.tensors)}"
        if self.sources is not None:
            self.sources[key] = t if source is None else source
        t = t.detach()
        if t.is_sparse:
            t = t.to_dense()
        if t.dtype not in _DTYPE_NAMES:
            raise TypeError(f"a tensor of dtype {t.dtype} cannot be sent")
        # Plain torch.Tensor only: a subclass could override anything the judge later calls.
        t = torch.Tensor._make_subclass(torch.Tensor, t.cpu())
        self.tensors[key] = t.clone(memory_format=torch.contiguous_format) if self.snapshot else t.contiguous()
        tag: dict[str, str | bool] = {"__tensor__": key, **autograd}
        if numpy:
            tag["numpy"] = True
        return tag


    def _autograd_tags(self, t: torch.Tensor) -> dict:
        if not t.requires_grad:
            return {}
        tags: dict = {"requires_grad": True, "leaf": t.is_leaf}
        grad = t.grad if t.is_leaf else None  # (.grad of a non-leaf is None, with a warning)
        if isinstance(grad, torch.Tensor) and grad.shape == t.shape and not grad.requires_grad:
            tags["grad"] = self._tensor(grad)["__tensor__"]
        return tags


def _handle(handle: Handle) -> dict:
    tag = {"__handle__": handle.id, "type": handle.type_name}
    if handle.path:
        tag["path"] = handle.path
    return tag


def _is_plain_mapping(obj) -> bool:
    # OrderedDict (state_dict) and other dict subclasses from the standard library.
    return isinstance(obj, dict) and type(obj).__module__ == "collections"


def _is_numpy_array(obj) -> bool:
    return type(obj).__module__ == "numpy" and type(obj).__name__ == "ndarray"


def _is_numpy_scalar(obj) -> bool:
    return type(obj).__module__ == "numpy" and hasattr(obj, "item") and getattr(obj, "shape", None) == ()


class Decoder:
    """Inverse of Encoder. `make_handle(handle)` turns a handle into the receiver's object; `build_configs`: a
    transformers configuration becomes the real object (in a worker), else a ConfigValue (in the judge)."""

    def __init__(self, tensors: dict[str, torch.Tensor], make_handle, build_configs: bool = False,
                 judge_function=None, unpickle: bool = False):
        self.tensors = tensors
        self.unpickle = unpickle  # a worker takes the judge's pickled objects; the judge refuses any
        self.bundle: list | None = None  # those objects, once unpickled (Pickled)
        self.make_handle = make_handle
        self.build_configs = build_configs
        # (id, name) -> the worker's function calling the judge's back; None (the judge): a message with one is refused
        self.judge_function = judge_function

    def decode(self, data: Any, depth: int = 0) -> Any:
        """The value `data` encodes. Whatever in it cannot be decoded (a number past int()'s digit limit, a device of
        no such name...) is a ProtocolError: the peer's data, never the receiver's error."""
        try:
            return self._value(data, depth)
        except ProtocolError:
            raise
        except (ValueError, TypeError, OverflowError, RuntimeError, AttributeError, KeyError, IndexError) as exc:
            raise ProtocolError(f"malformed value in message ({type(exc).__name__})") from None

    def _value(self, data: Any, depth: int = 0) -> Any:
        if depth > 70:
            raise ProtocolError("value nested too deeply")
        if data is None or isinstance(data, (bool, int, float, str)):
            return data
        if isinstance(data, list):
            return [self._value(x, depth + 1) for x in data]
        if not isinstance(data, dict) or len(data) == 0:
            raise ProtocolError(f"unexpected value in message: {type(data).__name__}")
        if "__tuple__" in data:
            return tuple(self._value(x, depth + 1) for x in data["__tuple__"])
        if "__dict__" in data:
            return {self._key(k, depth): self._value(v, depth + 1) for k, v in data["__dict__"]}
        if "__tensor__" in data:
            t = self.tensors.get(data["__tensor__"])
            if t is None:
                raise ProtocolError("message refers to a tensor it does not carry")
            if data.get("numpy"):
                return t.numpy()
            return self._with_autograd(t, data) if data.get("requires_grad") else t
        if "__handle__" in data:
            return self.make_handle(Handle(int(data["__handle__"]), str(data.get("type", "object")),
                                           str(data.get("path", ""))))
        if "__float__" in data:
            return float(data["__float__"])
        if "__bigint__" in data:
            return int(data["__bigint__"])
        if "__complex__" in data:
            parts = data["__complex__"]
            if not isinstance(parts, list) or len(parts) != 2:
                raise ProtocolError("malformed complex number in message")
            real, imag = (self._value(x, depth + 1) for x in parts)
            if not all(type(x) in (int, float) for x in (real, imag)):
                raise ProtocolError("malformed complex number in message")
            return complex(real, imag)
        if "__set__" in data:
            items = [self._value(x, depth + 1) for x in data["__set__"]] if isinstance(data["__set__"], list) else None
            if items is None or not all(_plain_hashable(x) for x in items):
                raise ProtocolError("malformed set in message")
            return frozenset(items) if data.get("frozen") else set(items)
        if "__pickled__" in data:
            if not self.unpickle:
                raise ProtocolError("a pickled object in a message to the judge")
            return self._pickled(data["__pickled__"])
        if "__judge_function__" in data:
            if self.judge_function is None:
                raise ProtocolError("a function in a message to the judge")
            return self.judge_function(int(data["__judge_function__"]), str(data.get("name", "function")))
        if "__dtype__" in data:
            dtype = getattr(torch, str(data["__dtype__"]), None)
            if not isinstance(dtype, torch.dtype):
                raise ProtocolError("unknown dtype in message")
            return dtype
        if "__device__" in data:
            return torch.device(str(data["__device__"]))
        if "__config__" in data:
            value = ConfigValue(str(data["__config__"]), data.get("settings"))  # type: ignore[arg-type]  # the peer's data, not yet checked: valid() below refuses what is not a dict
            if not value.valid():
                raise ProtocolError("malformed configuration in message")
            return value.build() if self.build_configs else value
        if "__generator__" in data:
            try:
                generator = torch.Generator(device=str(data.get("device", "cpu")))
                generator.set_state(self._value(data["__generator__"], depth + 1))
            except (RuntimeError, TypeError, ValueError) as exc:
                raise ProtocolError(f"malformed generator in message: {exc}") from None
            return generator
        raise ProtocolError("unknown tagged value in message")

    def _pickled(self, index) -> Any:
        """The judge's object at `index` of the message's bundle (unpickled once, on first use)."""
        if self.bundle is None:
            self.bundle = self._unpickled(self.tensors.get(BUNDLE))
        if type(index) is not int or not 0 <= index < len(self.bundle):
            raise ProtocolError("malformed pickled object in message")
        return self.bundle[index]

    def _unpickled(self, data) -> list:
        """The judge's pickled objects of a message; their persistent ids are handles of this worker's objects."""
        import io
        import pickle

        if not isinstance(data, torch.Tensor) or data.dtype != torch.uint8:
            raise ProtocolError("malformed pickled object in message")
        unpickler = pickle.Unpickler(io.BytesIO(data.numpy().tobytes()))
        unpickler.persistent_load = lambda pid: self.make_handle(Handle(int(pid[0]), "object", str(pid[1])))  # type: ignore[method-assign]
        objects = unpickler.load()
        if not isinstance(objects, list):
            raise ProtocolError("malformed pickled object in message")
        return objects

    def _with_autograd(self, t: torch.Tensor, tag: dict) -> torch.Tensor:
        """The copy as autograd saw the sender's tensor: requiring grad, with the leaf's .grad; a non-leaf's copy is
        a non-leaf too (in-place changes allowed, a grad_fn), as it was in the notebook."""
        if not (t.is_floating_point() or t.is_complex()):
            return t
        t.requires_grad_(True)
        grad = self.tensors.get(str(tag.get("grad", "")))
        if grad is not None and grad.shape == t.shape and grad.dtype == t.dtype:
            t.grad = grad
        return t if tag.get("leaf", True) else t.clone()

    def _key(self, k, depth):
        key = self._value(k, depth + 1)
        try:
            hash(key)
        except TypeError:
            raise ProtocolError("unhashable dict key in message") from None
        return key


def _data_start(n_table: int) -> int:
    """Where a blob's tensor data begins: after its table's length and the table, aligned."""
    return -(-(8 + n_table) // _ALIGN) * _ALIGN


def _pack_tensors(tensors: dict[str, torch.Tensor]) -> list:
    """The blob of `tensors` as a list of buffers (the tensors' own memory, no copy)."""
    table, datas, offset = {}, [], 0
    for name, t in tensors.items():
        dtype = _DTYPE_NAMES.get(t.dtype)
        if dtype is None or t.device.type != "cpu":
            raise TypeError(f"a {t.device.type} tensor of dtype {t.dtype} cannot be sent")
        t = t.contiguous()
        nbytes = t.numel() * t.element_size()
        offset += -offset % _ALIGN
        table[str(name)] = [dtype, list(t.shape), offset, nbytes]
        datas.append((offset, t.reshape(-1).view(torch.uint8).numpy().data if nbytes else b""))
        offset += nbytes
    head = json.dumps(table).encode()
    parts: list[bytes | memoryview]
    parts, end = [_LEN.pack(len(head)), head, bytes(_data_start(len(head)) - 8 - len(head))], 0
    for at, data in datas:
        parts += [bytes(at - end), data] if at > end else [data]
        end = at + len(data)
    return parts


def pack_sources(units: list[dict]) -> tuple[list[dict], dict[str, torch.Tensor]]:
    """A load request's units with their sources moved into one tensor of UTF-8 bytes ("source_at": [start,
    length] in it): a notebook may hold statements of tens of megabytes (weights pasted as a string), more than
    a message header may hold, and as bytes they cross the pipe without JSON's escapes. unpack_sources undoes it."""
    data, out = bytearray(), []
    for unit in units:
        raw = str(unit["source"]).encode("utf-8", "surrogatepass")  # a notebook's JSON may hold lone surrogates
        out.append({**{k: v for k, v in unit.items() if k != "source"}, "source_at": [len(data), len(raw)]})
        data += raw
    return out, ({"sources": torch.frombuffer(data, dtype=torch.uint8)} if data else {})


def unpack_sources(units: list, tensors: dict[str, torch.Tensor]) -> list[dict]:
    """The units of a load request (pack_sources), each with its "source" again."""
    sources = tensors.get("sources")
    raw = sources.numpy().tobytes() if sources is not None else b""
    out = []
    for unit in units:
        unit = dict(unit)
        if "source_at" in unit:
            start, length = unit.pop("source_at")
            unit["source"] = raw[start:start + length].decode("utf-8", "surrogatepass")
        out.append(unit)
    return out


def message_parts(header: dict, tensors: dict[str, torch.Tensor] | None = None) -> list:
    """A message as the buffers to write in order (everything is ready before the first byte is written)."""
    head = json.dumps(header, allow_nan=False).encode()
    blob = _pack_tensors(tensors) if tensors else []
    size = sum(len(part) for part in blob)
    return [_LEN.pack(len(head)) + head + _LEN.pack(size), *blob]


def write_message(stream: BinaryIO, header: dict, tensors: dict[str, torch.Tensor] | None = None) -> None:
    for part in message_parts(header, tensors):
        stream.write(part)
    stream.flush()


def _unpack_tensors(blob: bytearray) -> dict[str, torch.Tensor]:
    """The tensors of a blob, each checked against its table entry; they share the blob's memory."""
    if len(blob) < 8:
        raise ProtocolError("tensor data too short")
    (n_table,) = _LEN.unpack_from(blob, 0)
    if n_table > len(blob) - 8:
        raise ProtocolError("tensor table longer than the tensor data")
    try:
        table = json.loads(bytes(blob[8:8 + n_table]))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:  # (nested past the parser's depth)
        raise ProtocolError(f"malformed tensor table: {exc}") from None
    if not isinstance(table, dict):
        raise ProtocolError("malformed tensor table")
    start = _data_start(n_table)
    size = len(blob) - start
    places, tensors = [], {}
    for name, entry in table.items():
        dtype, shape, offset, nbytes = _table_entry(entry, size)
        places.append((offset, offset + nbytes))
        try:  # whatever the peer's table makes torch refuse is the peer's garbage, never the receiver's error
            tensors[name] = _tensor_at(blob, dtype, shape, start + offset, nbytes)
        except (RuntimeError, TypeError, ValueError, OverflowError) as exc:
            raise ProtocolError(f"a tensor the message describes cannot be made ({type(exc).__name__})") from None
    places.sort()
    if any(a_end > b_start for (_, a_end), (b_start, _) in zip(places, places[1:])):
        raise ProtocolError("tensors overlap in the message")
    return tensors


def _tensor_at(blob: bytearray, dtype: torch.dtype, shape: list[int], at: int, nbytes: int) -> torch.Tensor:
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype)
    t = torch.frombuffer(blob, dtype=dtype, count=nbytes // dtype.itemsize, offset=at)
    if dtype is torch.bool and bool((t.view(torch.uint8) > 1).any()):
        raise ProtocolError("a boolean tensor holds values other than 0 and 1")
    return t.view(shape)


def _table_entry(entry, size: int) -> tuple[torch.dtype, list[int], int, int]:
    if not (isinstance(entry, list) and len(entry) == 4 and entry[0] in DTYPES and isinstance(entry[1], list)
            and len(entry[1]) <= MAX_DIMS and all(type(d) is int and 0 <= d <= MAX_BLOB_BYTES for d in entry[1])
            and all(type(x) is int and x >= 0 for x in entry[2:])):
        raise ProtocolError("malformed tensor table entry")
    dtype, shape, offset, nbytes = DTYPES[entry[0]], entry[1], entry[2], entry[3]
    numel = math.prod(shape)
    if numel * dtype.itemsize != nbytes or offset + nbytes > size:
        raise ProtocolError("a tensor's shape, size and place in the message disagree")
    return dtype, shape, offset, nbytes


class Readable(Protocol):
    """What a message is read from: a binary stream that can also read into a buffer (a pipe opened with
    os.fdopen(fd, "rb"), io.BytesIO)."""

    def read(self, size: int, /) -> bytes: ...

    def readinto(self, buffer: memoryview, /) -> int | None: ...


def _read_exact(stream: Readable, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError("the worker closed the channel")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_blob(stream: Readable, n: int) -> bytearray:
    blob = bytearray(n)
    view, got = memoryview(blob), 0
    with view:
        while got < n:
            k = stream.readinto(view[got:])
            if not k:
                raise EOFError("the worker closed the channel")
            got += k
    return blob


def _header(data) -> dict:
    try:
        header = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"malformed message header: {exc}") from None
    except RecursionError:  # [[[...]]] deeper than the parser goes: no reply of a worker is
        raise ProtocolError("malformed message header: nested too deeply") from None
    if not isinstance(header, dict):
        raise ProtocolError("message header is not an object")
    if b"\\ud" in data or b"\\uD" in data:  # an escaped surrogate: perhaps a lone one, which no UTF-8 file can hold
        try:
            header = _without_lone_surrogates(header)
        except RecursionError:
            raise ProtocolError("malformed message header: nested too deeply") from None
    return header


def _without_lone_surrogates(value):
    """`value` with each lone surrogate of its strings (a student's `"\\ud800"`) replaced by U+FFFD: every string the
    judge takes can be written to results.json, feedback.md and grades.csv."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace") if _SURROGATE.search(value) else value
    if isinstance(value, list):
        return [_without_lone_surrogates(x) for x in value]
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    return value


def read_message(stream: Readable) -> tuple[dict, dict[str, torch.Tensor]]:
    (n_head,) = _LEN.unpack(_read_exact(stream, 8))
    if n_head > MAX_HEADER_BYTES:
        raise ProtocolError(f"message header of {n_head} bytes is over the limit")
    header = _header(_read_exact(stream, n_head))
    (n_blob,) = _LEN.unpack(_read_exact(stream, 8))
    if n_blob > MAX_BLOB_BYTES:
        raise ProtocolError(f"message of {n_blob} bytes is over the limit")
    return header, _unpack_tensors(_read_blob(stream, n_blob)) if n_blob else {}


def decode_message(head: bytes, blob: bytearray) -> tuple[dict, dict[str, torch.Tensor]]:
    """A message from its header's bytes and its blob (read separately); the tensors use the blob's memory."""
    return _header(head), _unpack_tensors(blob) if blob else {}

"""Wire format between the judge and a worker process.

A message is a JSON header plus an optional blob of tensors, framed by lengths:

    [8-byte header length][header JSON][8-byte blob length][blob]
    blob: [8-byte table length][table JSON][padding][tensor bytes, each at a 64-byte aligned offset]

Values are encoded as JSON with tagged objects for what JSON lacks (values.py: ValueEncoder, Decoder). Tensors
travel in the blob as their raw bytes; the table gives each one's dtype, shape and place. Both sides decode with
parsers that never execute code (json, and a table checked entry by entry before any tensor is made: a dtype from
a fixed list, a shape whose size is the bytes given, places inside the blob that do not overlap, booleans that are
0 or 1): the judge never unpickles what student code produced. A received tensor is a plain torch.Tensor over the
message's own buffer, no copy.
"""
from __future__ import annotations

import json
import math
import re
import signal
import struct
from dataclasses import dataclass
from typing import BinaryIO, Protocol

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
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}


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
        """The handle of attribute `name` of this object, looked up in the worker when used (no request now)."""
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


def _data_start(n_table: int) -> int:
    """Where a blob's tensor data begins: after its table's length and the table, aligned."""
    return -(-(8 + n_table) // _ALIGN) * _ALIGN


def _pack_tensors(tensors: dict[str, torch.Tensor]) -> list:
    """The blob of `tensors` as a list of buffers (the tensors' own memory, no copy)."""
    table, datas, offset = {}, [], 0
    for name, t in tensors.items():
        dtype = DTYPE_NAMES.get(t.dtype)
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
    """Write one message (a JSON header and the tensors' blob, each length-prefixed) and flush it."""
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
    """Read one message as (header, tensors); ProtocolError where a length is over its limit or the message is
    malformed, EOFError where the stream ends first."""
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

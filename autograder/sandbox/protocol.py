"""Wire format between the judge and a worker process.

A message is a JSON header plus an optional safetensors blob, framed by lengths:

    [8-byte header length][header JSON][8-byte blob length][blob]

Values are encoded as JSON with tagged objects for what JSON lacks (tuples, non-string dict keys,
non-finite floats, tensors, dtypes, handles). Tensors travel in the safetensors blob. Both sides
decode with parsers that never execute code (json, safetensors): the judge never unpickles what
student code produced.
"""
from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import Any, BinaryIO

import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

MAX_HEADER_BYTES = 64 * 1024 * 1024
MAX_BLOB_BYTES = 1024 * 1024 * 1024
_LEN = struct.Struct("<Q")


class ProtocolError(Exception):
    """The peer sent something that is not a valid message (or died mid-message)."""


@dataclass(frozen=True)
class Handle:
    """A reference to an object that lives in a worker (an instance, a generator, ...)."""

    id: int
    type_name: str


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

    def __init__(self, on_unknown, by_value: bool = False):
        self.tensors: dict[str, torch.Tensor] = {}
        self.on_unknown = on_unknown
        # a torch.Generator travels as its state, a transformers configuration as its settings (else: handles)
        self.by_value = by_value

    def encode(self, obj: Any, depth: int = 0) -> Any:
        if depth > 64:
            raise ValueError("value nested more than 64 levels deep")
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return obj if abs(obj) < 2**63 else {"__bigint__": str(obj)}
        if isinstance(obj, float):
            return _float(obj)
        if isinstance(obj, torch.Tensor):
            return self._tensor(obj)
        if isinstance(obj, Handle):
            return {"__handle__": obj.id, "type": obj.type_name}
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
            return self._tensor(torch.from_numpy(obj.copy()), numpy=True)
        if _is_numpy_scalar(obj):
            return self.encode(obj.item(), depth)
        handle = self.on_unknown(obj)
        if not isinstance(handle, Handle):
            raise TypeError(f"cannot encode a {type(obj).__name__}")
        return {"__handle__": handle.id, "type": handle.type_name}

    def _tensor(self, t: torch.Tensor, numpy: bool = False) -> Any:
        key = f"t{len(self.tensors)}"
        t = t.detach()
        if t.is_sparse:
            t = t.to_dense()
        # Plain torch.Tensor only: a subclass could override anything the judge later calls.
        self.tensors[key] = torch.Tensor._make_subclass(torch.Tensor, t.cpu().contiguous().clone())
        tag = {"__tensor__": key}
        if t.requires_grad:
            tag["requires_grad"] = True
        if numpy:
            tag["numpy"] = True
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

    def __init__(self, tensors: dict[str, torch.Tensor], make_handle, build_configs: bool = False):
        self.tensors = tensors
        self.make_handle = make_handle
        self.build_configs = build_configs

    def decode(self, data: Any, depth: int = 0) -> Any:
        if depth > 70:
            raise ProtocolError("value nested too deeply")
        if data is None or isinstance(data, (bool, int, float, str)):
            return data
        if isinstance(data, list):
            return [self.decode(x, depth + 1) for x in data]
        if not isinstance(data, dict) or len(data) == 0:
            raise ProtocolError(f"unexpected value in message: {type(data).__name__}")
        if "__tuple__" in data:
            return tuple(self.decode(x, depth + 1) for x in data["__tuple__"])
        if "__dict__" in data:
            return {self._key(k, depth): self.decode(v, depth + 1) for k, v in data["__dict__"]}
        if "__tensor__" in data:
            t = self.tensors.get(data["__tensor__"])
            if t is None:
                raise ProtocolError("message refers to a tensor it does not carry")
            if data.get("numpy"):
                return t.numpy()
            return t.requires_grad_(True) if data.get("requires_grad") and t.is_floating_point() else t
        if "__handle__" in data:
            return self.make_handle(Handle(int(data["__handle__"]), str(data.get("type", "object"))))
        if "__float__" in data:
            return float(data["__float__"])
        if "__bigint__" in data:
            return int(data["__bigint__"])
        if "__dtype__" in data:
            dtype = getattr(torch, str(data["__dtype__"]), None)
            if not isinstance(dtype, torch.dtype):
                raise ProtocolError("unknown dtype in message")
            return dtype
        if "__device__" in data:
            return torch.device(str(data["__device__"]))
        if "__config__" in data:
            value = ConfigValue(str(data["__config__"]), data.get("settings"))
            if not value.valid():
                raise ProtocolError("malformed configuration in message")
            return value.build() if self.build_configs else value
        if "__generator__" in data:
            try:
                generator = torch.Generator(device=str(data.get("device", "cpu")))
                generator.set_state(self.decode(data["__generator__"], depth + 1))
            except (RuntimeError, TypeError, ValueError) as exc:
                raise ProtocolError(f"malformed generator in message: {exc}") from None
            return generator
        raise ProtocolError("unknown tagged value in message")

    def _key(self, k, depth):
        key = self.decode(k, depth + 1)
        try:
            hash(key)
        except TypeError:
            raise ProtocolError("unhashable dict key in message") from None
        return key


def write_message(stream: BinaryIO, header: dict, tensors: dict[str, torch.Tensor] | None = None) -> None:
    head = json.dumps(header, allow_nan=False).encode()
    blob = save_tensors(tensors) if tensors else b""
    stream.write(_LEN.pack(len(head)) + head + _LEN.pack(len(blob)))
    if blob:
        stream.write(blob)
    stream.flush()


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError("the worker closed the channel")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_message(stream: BinaryIO) -> tuple[dict, dict[str, torch.Tensor]]:
    (n_head,) = _LEN.unpack(_read_exact(stream, 8))
    if n_head > MAX_HEADER_BYTES:
        raise ProtocolError(f"message header of {n_head} bytes is over the limit")
    try:
        header = json.loads(_read_exact(stream, n_head))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"malformed message header: {exc}") from None
    (n_blob,) = _LEN.unpack(_read_exact(stream, 8))
    if n_blob > MAX_BLOB_BYTES:
        raise ProtocolError(f"message of {n_blob} bytes is over the limit")
    tensors = {}
    if n_blob:
        try:
            tensors = load_tensors(_read_exact(stream, n_blob))
        except EOFError:
            raise
        except Exception as exc:  # safetensors raises its own error types
            raise ProtocolError(f"malformed tensor data: {exc}") from None
    if not isinstance(header, dict):
        raise ProtocolError("message header is not an object")
    return header, tensors

"""Values as plain data, both ways: what the judge and a worker send each other in a message's header (JSON) and
blob (tensors), framed by protocol.py.

Values are encoded as JSON with tagged objects for what JSON lacks (tuples, sets, non-string dict keys,
non-finite floats, complex numbers, tensors, dtypes, handles, the judge's functions passed to student code, which
the worker calls back and never runs itself). Decoding never executes code: the judge never unpickles what
student code produced (only a worker unpickles, and only the judge's objects: Pickled).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import torch

from autograder.sandbox.protocol import BUNDLE, DTYPE_NAMES, Handle, JudgeFunction, Pickled, ProtocolError
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
        """A transformers configuration object as a ConfigValue (all settings, not only those differing from the
        defaults)."""
        return cls(f"transformers.{type(obj).__name__}", json.loads(obj.to_json_string(use_diff=False)))

    def valid(self) -> bool:
        """Whether it names a transformers *Config class by a plain identifier and holds a dict: only such a value is
        built back into a configuration."""
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


class ValueEncoder:
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
        """`obj` as JSON-able data (its tensors collected in `self.tensors`); ValueError for a value nested over 64
        levels or holding more than `max_items` values."""
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
        if t.dtype not in DTYPE_NAMES:
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
    """Inverse of ValueEncoder. `make_handle(handle)` turns a handle into the receiver's object; `build_configs`: a
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

"""The equivalence probe: code that runs in a grading worker beside a surviving mutant, never in the grader.

`autograder.mutants` puts this file's text in a code cell of the probe notebook: the answer key with the mutated
definition kept as `_ag_mutant_NAME`, the reference's as `_ag_reference_NAME`, and NAME bound to a wrapper. On
every call the checks make, the wrapper forks the worker: the child runs the reference on the same arguments,
from the same random state, and sends back a summary of what it saw; then the worker runs the mutant and makes
the same summary. The child's side effects die with it, so the check sees exactly what the plain mutant gives.

A summary holds the result (tensors with dtype, shape, requires_grad and values; numbers; strings; containers;
modules with their submodule tree, parameters, buffers, train modes and plain attributes; optimizers with their
state; generators with their state; other objects with their attributes), the exception raised (its type), the
arguments after the call (in-place effects: a model's weights after an optimizer step, its train/eval mode) and,
where results require grad, the gradients of a seeded random projection of them with respect to every tensor
and parameter of the arguments (and of the module, for a forward).

- a function: the summaries of each call;
- an nn.Module class: __init__ compares the mutant's instance with the reference class's built from the same
  arguments and random state (in the child); each forward compares the mutant's forward with that of a twin of
  the reference class built in the child from the construction's arguments, loaded with the mutant's current
  state and set to its train/eval modes.

At the first difference the worker ends itself with exit code 86 (the grader restarts it for the next check),
which no check can catch; exit code 88 when a call cannot be compared (arguments that cannot be copied, CUDA
initialised before the fork). Tolerance: rtol 1e-5, atol 1e-6 (gradients 1e-4, 1e-5).
"""
import copy as _ag_copy
import math as _ag_math
import os as _ag_os
import pickle as _ag_pickle
import random as _ag_random

import torch as _ag_torch

_AG_DIVERGED = 86
_AG_REACHED = 87
_AG_UNDECIDED = 88


def _ag_reach():
    """Used by the reach probe: the mutated code ran."""
    _ag_os._exit(_AG_REACHED)


def _ag_end(code, what):
    try:
        _ag_os.write(2, f"mutation probe: {what}\n".encode("utf-8", "replace"))
    finally:
        _ag_os._exit(code)


def _ag_plain_name(name):
    for prefix in ("_ag_reference_", "_ag_mutant_"):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def _ag_summary(obj, seen, depth=0):
    """Plain data (picklable) that two runs can compare: see the module's docstring."""
    torch = _ag_torch
    if depth > 8:
        return ("deep",)
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        return ("value", type(obj).__name__, obj)
    if isinstance(obj, torch.Tensor):
        return ("tensor", str(obj.dtype), tuple(obj.shape), bool(obj.requires_grad), obj.detach().cpu().clone())
    if id(obj) in seen:
        return ("seen", seen[id(obj)])
    seen[id(obj)] = len(seen)
    if isinstance(obj, torch.Generator):
        return ("generator", obj.get_state())
    if isinstance(obj, torch.nn.Module):  # records inside a summary are lists; a summary is a tuple
        modules = list(obj.named_modules())
        return ("module", [[n, _ag_plain_name(type(m).__name__), bool(m.training)] for n, m in modules],
                [[n, _ag_summary(p, {}, depth + 1)] for n, p in obj.named_parameters()],
                [[n, _ag_summary(b, {}, depth + 1)] for n, b in obj.named_buffers()],
                [[n, [[k, _ag_summary(v, seen, depth + 1)] for k, v in sorted(vars(m).items())
                      if not k.startswith("_") and k != "training"
                      and not isinstance(v, (torch.nn.Module, torch.Tensor))]]
                 for n, m in modules])
    if isinstance(obj, torch.optim.Optimizer):
        own = ("state", "param_groups", "defaults")
        return ("optimizer", type(obj).__name__, _ag_summary(obj.state_dict(), seen, depth + 1),
                [[k, _ag_summary(v, seen, depth + 1)] for k, v in sorted(vars(obj).items())
                 if not k.startswith("_") and k not in own])
    if isinstance(obj, (list, tuple)):
        return ("sequence", type(obj).__name__, [_ag_summary(x, seen, depth + 1) for x in obj])
    if isinstance(obj, dict):
        return ("dict", type(obj).__name__, [[_ag_summary(k, seen, depth + 1), _ag_summary(v, seen, depth + 1)]
                                             for k, v in obj.items()])
    if isinstance(obj, (set, frozenset)):
        return ("set", sorted(repr(x) for x in obj))
    if isinstance(obj, type) or callable(obj) and not hasattr(obj, "__dict__"):
        return ("callable", getattr(obj, "__qualname__", type(obj).__name__))
    if hasattr(obj, "__dict__"):
        return ("object", _ag_plain_name(type(obj).__name__),
                [[k, _ag_summary(v, seen, depth + 1)] for k, v in vars(obj).items() if not callable(v)])
    return ("other", type(obj).__name__)


def _ag_differ(a, b, where):
    """None when summaries `a` (the mutant's) and `b` (the reference's) agree, else where they differ."""
    if a[0] != b[0]:
        return f"{where}: {a[0]} against the reference's {b[0]}"
    kind = a[0]
    if kind == "tensor":
        if a[1:4] != b[1:4]:
            return f"{where}: {a[2]} {a[1]} (requires_grad {a[3]}) against the reference's {b[2]} {b[1]} ({b[3]})"
        x, y = a[4], b[4]
        if x.is_floating_point() or x.is_complex():
            same = _ag_torch.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True)
        else:
            same = _ag_torch.equal(x, y)
        return None if same else f"{where}: values differ from the reference's"
    if kind == "grad":
        x, y = a[1], b[1]
        if x.shape != y.shape:
            return f"{where}: gradient shapes differ"
        same = _ag_torch.allclose(x, y, rtol=1e-4, atol=1e-5, equal_nan=True)
        return None if same else f"{where}: the gradient differs from the reference's"
    if kind == "value":
        if a[1] != b[1]:
            return f"{where}: a {a[1]} against the reference's {b[1]}"
        x, y = a[2], b[2]
        if x == y or (isinstance(x, float) and (_ag_math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-6)
                                               or (x != x and y != y))):
            return None
        return f"{where}: {x!r} against the reference's {y!r}"
    if kind == "generator":
        return None if _ag_torch.equal(a[1], b[1]) else f"{where}: the generator's state differs"
    if len(a) != len(b):
        return f"{where}: {kind}s differ"
    for x, y in zip(a[1:], b[1:]):
        problem = _ag_differ_any(x, y, where)
        if problem:
            return problem
    return None


def _ag_differ_any(x, y, where):
    """Summaries are tuples (kind first); lists hold records and items, compared in order; the rest by value."""
    if isinstance(x, tuple) and isinstance(y, tuple):
        return _ag_differ(x, y, where)
    if isinstance(x, list) and isinstance(y, list):
        if len(x) != len(y):
            return f"{where}: {len(x)} items against the reference's {len(y)}"
        for i, (u, v) in enumerate(zip(x, y)):
            label = f"{where}.{u[0]}" if isinstance(u, list) and u and isinstance(u[0], str) else where
            problem = _ag_differ_any(u, v, label if label != where else f"{where}[{i}]")
            if problem:
                return problem
        return None
    if isinstance(x, _ag_torch.Tensor) or isinstance(y, _ag_torch.Tensor):
        if not (isinstance(x, _ag_torch.Tensor) and isinstance(y, _ag_torch.Tensor)) or x.shape != y.shape:
            return f"{where}: tensors differ"
        return None if _ag_torch.equal(x, y) else f"{where}: values differ"
    if type(x) is not type(y):
        return f"{where}: a {type(x).__name__} against the reference's {type(y).__name__}"
    return None if x == y else f"{where}: {x!r} against the reference's {y!r}"


def _ag_leaves(obj, out, seen, depth=0):
    """Tensors that require grad in `obj` (a module's parameters by name), in a fixed order."""
    if depth > 6 or id(obj) in seen:
        return out
    seen.add(id(obj))
    if isinstance(obj, _ag_torch.Tensor):
        if obj.requires_grad:
            out.append(obj)
    elif isinstance(obj, _ag_torch.nn.Module):
        for _, p in obj.named_parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                out.append(p)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            _ag_leaves(item, out, seen, depth + 1)
    elif isinstance(obj, dict):
        for item in obj.values():
            _ag_leaves(item, out, seen, depth + 1)
    return out


def _ag_outputs(obj, out, depth=0):
    if depth > 6:
        return out
    if isinstance(obj, _ag_torch.Tensor):
        if obj.requires_grad and obj.grad_fn is not None and (obj.is_floating_point() or obj.is_complex()):
            out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            _ag_outputs(item, out, depth + 1)
    elif isinstance(obj, dict):
        for item in obj.values():
            _ag_outputs(item, out, depth + 1)
    return out


def _ag_grads(result, inputs, keep_graph):
    """Gradients of a seeded random projection of the results with respect to the inputs' leaves."""
    if not _ag_torch.is_grad_enabled():
        return ("sequence", "grads", [])
    outs, leaves = _ag_outputs(result, []), _ag_leaves(inputs, [], set())
    if not outs or not leaves:
        return ("sequence", "grads", [])
    g = _ag_torch.Generator().manual_seed(0)
    weights = [_ag_torch.randn(t.shape, generator=g, dtype=t.dtype).to(t.device) for t in outs]
    grads = _ag_torch.autograd.grad(outs, leaves, weights, retain_graph=keep_graph, allow_unused=True)
    return ("sequence", "grads", [("grad", (_ag_torch.zeros_like(leaf) if x is None else x).detach().cpu().clone())
                                  for x, leaf in zip(grads, leaves)])


def _ag_state():
    return _ag_torch.get_rng_state(), _ag_random.getstate()


def _ag_set_state(state):
    _ag_torch.set_rng_state(state[0])
    _ag_random.setstate(state[1])


def _ag_in_child(run):
    """`run()` (returning a summary) in a forked child: the summary, or ("raised", type name)."""
    if _ag_torch.cuda.is_initialized():
        _ag_end(_AG_UNDECIDED, "CUDA is initialised: no fork")
    if _ag_torch.get_num_threads() != 1:  # an OpenMP pool does not survive a fork (graders' workers use 1 thread)
        _ag_torch.set_num_threads(1)
    read, write = _ag_os.pipe()
    pid = _ag_os.fork()
    if pid == 0:
        try:
            _ag_os.close(read)
            try:
                data = _ag_pickle.dumps(run())
            except Exception as exc:  # noqa: BLE001 - the reference raised: the mutant must raise the same
                data = _ag_pickle.dumps(("raised", type(exc).__name__))
            view = memoryview(data)
            while view:
                view = view[_ag_os.write(write, view):]
        finally:
            _ag_os._exit(0)
    _ag_os.close(write)
    chunks = []
    while True:
        chunk = _ag_os.read(read, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    _ag_os.close(read)
    _, status = _ag_os.waitpid(pid, 0)
    if not chunks:
        _ag_end(_AG_UNDECIDED, f"the reference's run ended without an answer (status {status})")
    return _ag_pickle.loads(b"".join(chunks))


def _ag_compare(theirs, run, name):
    """Run the mutant (`run()` -> result, summary-maker) and compare with the child's summary `theirs`."""
    try:
        result, mine = run()
    except Exception as exc:
        if theirs[0] != "raised":
            _ag_end(_AG_DIVERGED, f"{name} raised {type(exc).__name__} where the reference returned")
        if theirs[1] != type(exc).__name__:
            _ag_end(_AG_DIVERGED, f"{name} raised {type(exc).__name__} where the reference raised {theirs[1]}")
        raise
    if theirs[0] == "raised":
        _ag_end(_AG_DIVERGED, f"{name} returned where the reference raised {theirs[1]}")
    problem = _ag_differ_any(mine, theirs, name)
    if problem:
        _ag_end(_AG_DIVERGED, problem)
    return result


def _ag_probe_call(mutant, reference, args, kwargs, name):
    def summary(result, keep_graph):
        return ("returned", _ag_summary(result, {}), _ag_summary((args, kwargs), {}),
                _ag_grads(result, (args, kwargs), keep_graph))

    theirs = _ag_in_child(lambda: summary(reference(*args, **kwargs), False))

    def mine():
        result = mutant(*args, **kwargs)
        return result, summary(result, True)

    return _ag_compare(theirs, mine, name)


def _ag_construct(module, init, reference_class, args, kwargs, name):
    try:
        saved = _ag_copy.deepcopy((args, kwargs))
    except Exception:  # noqa: BLE001 - the twin is then built from the arguments as they are then
        saved = None
    object.__setattr__(module, "_ag_ctor", (saved, args, kwargs))
    theirs = _ag_in_child(lambda: ("returned", _ag_summary(reference_class(*args, **kwargs), {})))

    def mine():
        init(*args, **kwargs)
        return None, ("returned", _ag_summary(module, {}))

    _ag_compare(theirs, mine, f"{name}()")


def _ag_probe_forward(module, forward, reference_class, args, kwargs, name):
    ctor = module.__dict__.get("_ag_ctor")
    if ctor is None:
        _ag_end(_AG_UNDECIDED, f"{name}: an instance built without the probe's __init__")

    def reference():
        saved, ctor_args, ctor_kwargs = ctor
        if saved is not None:
            ctor_args, ctor_kwargs = saved
        state = _ag_state()
        twin = reference_class(*ctor_args, **ctor_kwargs)
        _ag_set_state(state)
        twin.load_state_dict(module.state_dict())
        params = dict(twin.named_parameters())
        for key, p in module.named_parameters():
            if key in params:
                params[key].requires_grad_(p.requires_grad)
        modules = dict(twin.named_modules())
        for key, m in module.named_modules():
            if key in modules:
                modules[key].training = m.training
        result = twin(*args, **kwargs)
        return ("returned", _ag_summary(result, {}), _ag_summary((args, kwargs), {}),
                _ag_grads(result, (twin, args, kwargs), False))

    theirs = _ag_in_child(reference)

    def mine():
        result = forward(*args, **kwargs)
        return result, ("returned", _ag_summary(result, {}), _ag_summary((args, kwargs), {}),
                        _ag_grads(result, (module, args, kwargs), True))

    return _ag_compare(theirs, mine, f"{name}.forward")

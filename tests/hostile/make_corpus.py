"""Writes the hostile and broken corpus: tests/hostile/notebooks/*.ipynb and tests/hostile/expected.json.

Every notebook is the example assignment's answer key (tests/example_course, solutions/vectors) with
something broken or hostile done to it, and comes with the outcome it must get. Run from the
repository root after changing this file:

    python tests/hostile/make_corpus.py

Some notebooks probe the grading run itself. They hold placeholders that tests/test_hostile_corpus.py
fills in when it copies the corpus: __AG_SECRETS__ (files the worker must not read),
__AG_PRIVATE_DIRS__ (folders it must not list), __AG_WRITE_TARGETS__ (files it must not write),
__AG_MARKER__ (a number its stray processes carry) and __AG_PORT__ (a port the test listens on).
Left unfilled they do no harm. One notebook, 100 MB of embedded output, is made by the test itself
(`big_output`), to keep the repository small.

Checks of the example (points): normalize_test (2), softmax_public (1), softmax: rows sum to 1 (2),
softmax: values along every dim (3), softmax: stable for large logits (1),
tiny layer: forward with given weights (2); 11 in all.
"""
from __future__ import annotations

import copy
import json
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NOTEBOOKS = HERE / "notebooks"
EXPECTED = HERE / "expected.json"
SOURCE = ROOT / "tests" / "example_course" / "solutions" / "vectors"

N, SP, SR, SV, SS, T = ("normalize_test", "softmax_public", "softmax: rows sum to 1",
                        "softmax: values along every dim", "softmax: stable for large logits",
                        "tiny layer: forward with given weights")
POINTS = {N: 2, SP: 1, SR: 2, SV: 3, SS: 1, T: 2}
SOFTMAX_CHECKS = (SP, SR, SV, SS)

# Cells of the answer key, by index: 1 imports, 3 normalize, 4 its test, 6 softmax, 7 its test, 9 TinyLayer.
IMPORTS, NORMALIZE, SOFTMAX, TINY = 1, 3, 6, 9

GOOD_NORMALIZE = "    return v / v.norm(dim=-1, keepdim=True)\n"
NORM_HEAD = 'def normalize(v: torch.Tensor) -> torch.Tensor:\n    """Rows of v (N, D) scaled to unit L2 norm."""\n'

# Bombs that only a confined worker contains: outside its own PID namespace, or as root (whose process
# count the kernel does not limit), they refuse to go off and the check fails instead.
NOT_AS_ROOT = "    if os.getuid() == 0:\n        raise RuntimeError('running as root: this bomb is not set off')\n"
NOT_OUTSIDE_A_SANDBOX = ("    if os.getpid() != 1:\n"
                         "        raise RuntimeError('not alone in a PID namespace: not signalling every process')\n")

PLACEHOLDERS = '''
import json as _json
def _listed(text):
    return _json.loads(text) if text.startswith("[") else []
'''


def answer_key() -> nbformat.NotebookNode:
    tmp = Path(tempfile.mkdtemp(prefix="ag-corpus-"))
    try:
        from autograder.build import build

        shutil.copytree(SOURCE, tmp / "solutions" / "vectors")
        paths = build(tmp / "solutions" / "vectors")
        return nbformat.read(paths.release / "answer_key.ipynb", as_version=4)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def student_notebook() -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "tests" / "example_course" / "assignments" / "vectors" / "vectors.ipynb",
                         as_version=4)


def variant(key, replace: dict[int, str] | None = None, append: list[str] = (), drop: list[int] = ()):
    nb = copy.deepcopy(key)
    for index, source in (replace or {}).items():
        nb.cells[index].source = source
    for source in append:
        nb.cells.append(nbformat.v4.new_code_cell(source))
    for index in sorted(drop, reverse=True):
        del nb.cells[index]
    return nb


def normalize_doing(body: str) -> str:
    """The normalize cell with `body` run before the correct return."""
    return NORM_HEAD + body + GOOD_NORMALIZE


def entry(file, what, category, lost=None, note=None, error=None, timing=False, **extra):
    lost = lost or {}
    score = 0 if error else sum(POINTS.values()) - sum(POINTS.get(c, 0) for c in lost)  # (a written answer: pending)
    return {"file": file, "what": what, "category": category, "score": score, "honest": score,
            "lost": lost, "note": note, "error": error, "timing_sensitive": timing, **extra}


def corpus(key) -> list[tuple[dict, object]]:
    """(expected outcome, notebook | bytes) pairs."""
    out = []

    def add(nb, *args, **kwargs):
        out.append((entry(*args, **kwargs), nb))

    all_lost = {c: "not implemented" for c in POINTS}
    unanswered = {"q_softmax": "not answered"}  # the written answer as handed out: 0, as nbgrader gives it
    add(key, "correct.ipynb", "the answer key", "reference")
    add(student_notebook(), "stub.ipynb", "the untouched student notebook", "broken",
        lost={**all_lost, T: "not implemented", **unanswered})

    # -- broken ----------------------------------------------------------------------------------------
    add(variant(key, {SOFTMAX: key.cells[SOFTMAX].source.replace("keepdim=True).values",
                                                                 "keepdim=True).values)")}),
        "syntax_error.ipynb", "a syntax error in the softmax cell", "broken",
        lost={c: "SyntaxError" for c in SOFTMAX_CHECKS}, note="SyntaxError")
    add(variant(key, drop=[NORMALIZE]), "missing_function.ipynb", "the normalize cell deleted", "broken",
        lost={N: "does not define `normalize`"})
    add(variant(key, {SOFTMAX: key.cells[SOFTMAX].source.replace("def softmax(", "def soft_max(")}),
        "renamed_function.ipynb", "softmax renamed soft_max", "broken",
        lost={c: "does not define `softmax`" for c in SOFTMAX_CHECKS})
    add(variant(key, {TINY: key.cells[TINY].source.replace("class TinyLayer(", "class Tinylayer(")}),
        "renamed_class.ipynb", "TinyLayer renamed Tinylayer", "broken",
        lost={T: "does not define `TinyLayer`"})
    add(variant(key, {SOFTMAX: key.cells[SOFTMAX].source.replace(", dim: int = -1)", ")")
                .replace("dim=dim", "dim=-1")}),
        "wrong_signature.ipynb", "softmax(x) without its dim argument", "broken",
        lost={SV: "unexpected keyword argument 'dim'"})
    add(variant(key, {IMPORTS: key.cells[IMPORTS].source + "\nimport wandb_is_not_installed_here\n"}),
        "import_error.ipynb", "imports a package the grader lacks", "broken", note="ModuleNotFoundError")
    add(variant(key, {NORMALIZE: key.cells[NORMALIZE].source.replace("(v: torch.Tensor)", "(v: torch.Tensor, eps=1 / 0)")}),
        "exception_at_import.ipynb", "a default argument that raises when the def runs", "broken",
        lost={N: "ZeroDivisionError"}, note="ZeroDivisionError")
    add(variant(key, {NORMALIZE: normalize_doing('    raise ValueError("norm of an empty row")\n')}),
        "exception_in_call.ipynb", "normalize raises", "broken", lost={N: "raised ValueError: norm of an empty row"})
    add(variant(key, {NORMALIZE: normalize_doing("    name = input('your name: ')\n")}),
        "input_call.ipynb", "normalize waits for keyboard input", "broken", lost={N: "raised EOFError"})
    add(b"", "empty.ipynb", "an empty file", "broken", error="is empty")
    add(variant(key, drop=list(range(len(key.cells)))), "no_cells.ipynb", "a notebook without cells", "broken",
        lost={**{c: "does not define" for c in (N, *SOFTMAX_CHECKS)}, T: "does not define `TinyLayer`"})
    add(b'{"cells": [{"cell_type": "code", "source": "def normalize(v):\\n', "not_json.ipynb",
        "a truncated upload: not JSON", "broken", error="invalid JSON")
    add(b'{"title": "my homework", "cells": []}', "json_not_notebook.ipynb", "JSON but not a notebook",
        "broken", error="not a Jupyter notebook")
    add(nbformat.writes(nbformat.convert(copy.deepcopy(key), 3)).encode(), "nbformat3.ipynb", "the answer key in nbformat 3",
        "broken", note="converted from nbformat 3")
    add(key, "hw (1).ipynb", "the answer key renamed by the course platform", "broken", id="hw_1")
    odd_meta = json.loads(nbformat.writes(key))
    odd_meta["cells"][0]["metadata"]["nbgrader"] = "yes"  # what no editor writes: a mapping is expected
    add(json.dumps(odd_meta).encode(), "nbgrader_meta_string.ipynb", "one cell's nbgrader metadata a string", "broken",
        note="nbgrader metadata is not a mapping")
    no_source = json.loads(nbformat.writes(key))
    no_source["cells"][0]["source"] = 5
    no_source["cells"].insert(1, None)
    add(json.dumps(no_source).encode(), "unreadable_cells.ipynb", "a cell whose source is a number and a null cell",
        "broken", note="has no readable source")
    latin = variant(key, {NORMALIZE: key.cells[NORMALIZE].source + "\n# r\u00e9sum\u00e9 of the caf\u00e9 data\n"})
    add(nbformat.writes(latin).encode().replace("r\u00e9sum\u00e9".encode(), b"r\xe9sum\xe9"),
        "non_utf8.ipynb", "Latin-1 bytes in a comment: not UTF-8", "broken", note="not valid UTF-8")

    # -- hostile: time ---------------------------------------------------------------------------------
    add(variant(key, append=["class Hang:\n    while True:\n        pass\n"]), "loop_at_import.ipynb",
        "an endless loop in a class body (runs when loaded)", "hostile", note="did not finish within")
    add(variant(key, {NORMALIZE: normalize_doing("    while True:\n        pass\n")}), "loop_in_call.ipynb",
        "normalize never returns", "hostile", lost={N: "timed out"})
    add(variant(key, {SOFTMAX: key.cells[SOFTMAX].source.replace(
        '"""\n', '"""\n    class Oops(Exception):\n        def __str__(self):\n            while True:\n'
                 '                pass\n    raise Oops()\n', 1)}),
        "loop_in_exception_str.ipynb", "softmax raises a local exception whose __str__ never returns", "hostile",
        lost={SP: "softmax", SR: "not run", SV: "not run", SS: "not run"}, timing=True)  # one time limit in all
    add(variant(key, append=["import signal\nclass Shield:\n"
                             "    for _s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, "
                             "signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGPIPE):\n"
                             "        signal.signal(_s, signal.SIG_IGN)\n"],
                replace={NORMALIZE: normalize_doing("    import os, signal\n    try:\n        os.setsid()\n"
                                            "    except OSError:  # the leader of its own group already\n        pass\n"
                                            "    signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals))\n"
                                            "    while True:\n        pass\n")}),
        "signal_tricks.ipynb", "ignores and blocks signals, tries to leave its process group, then spins", "hostile",
        lost={N: "timed out"})

    # -- hostile: processes ----------------------------------------------------------------------------
    add(variant(key, append=["import os\ndef _bye(f):\n    os._exit(3)\n\n@_bye\ndef helper():\n    pass\n"]),
        "os_exit_at_import.ipynb", "a decorator that calls os._exit(3) when loaded", "hostile",
        note="exit code 3")
    add(variant(key, {NORMALIZE: normalize_doing("    import os\n    os._exit(1)\n")}), "os_exit_in_call.ipynb",
        "normalize calls os._exit(1)", "hostile", lost={N: "exit code 1"})
    add(variant(key, {NORMALIZE: normalize_doing(
        "    import gc\n    from autograder.sandbox.protocol import write_message\n"
        "    for worker in [o for o in gc.get_objects() if type(o).__name__ == 'Worker' and hasattr(o, 'out')]:\n"
        "        write_message(worker.out, {'ok': True})  # a reply to no request: the next one would read it\n")}),
        "forged_reply.ipynb", "normalize writes a reply of its own on the grader's channel", "hostile",
        lost={N: "out of step"})
    add(variant(key, append=["X_CONST = " + "+".join(["1"] * 1500) + "\n"]), "deep_constant.ipynb",
        "a constant of 1,500 terms, 1,500 levels of syntax tree", "hostile", note="nested more than")
    add(variant(key, append=["import sys\nclass Quit:\n    sys.exit(2)\n"],
                replace={NORMALIZE: normalize_doing("    import sys\n    sys.exit(0)\n")}),
        "sys_exit.ipynb", "sys.exit when loaded and in normalize", "hostile",
        lost={N: "called sys.exit(0)"}, note="called sys.exit(2)")
    add(variant(key, {NORMALIZE: normalize_doing(
        "    import os, signal\n" + NOT_OUTSIDE_A_SANDBOX +
        "    for target in (lambda: os.kill(os.getppid(), signal.SIGKILL), lambda: os.kill(-1, signal.SIGKILL),\n"
        "                   lambda: os.kill(1, signal.SIGKILL), lambda: os.kill(os.getppid(), signal.SIGTERM)):\n"
        "        try:\n            target()\n        except OSError:\n            pass\n"
        "    for pid in range(2, 40000):\n"
        "        if pid != os.getpid():\n"
        "            try:\n                os.kill(pid, signal.SIGKILL)\n            except OSError:\n                pass\n")}),
        "kill_parent.ipynb", "signals its parent, pid 1, every process it may, every pid: nothing outside dies",
        "hostile")
    add(variant(key, {NORMALIZE: normalize_doing("    import os\n" + NOT_AS_ROOT + "    while True:\n        os.fork()\n")}),
        "fork_bomb.ipynb", "a fork bomb in normalize", "hostile", lost={N: "Resource temporarily unavailable"})
    add(variant(key, {NORMALIZE: normalize_doing(
        "    import os, threading, time\n" + NOT_AS_ROOT + "    while True:\n"
        "        threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n")}),
        "thread_bomb.ipynb", "starts threads until it cannot", "hostile", lost={N: "can't start new thread"})
    add(variant(key, {NORMALIZE: normalize_doing(
        "    import os, subprocess\n"
        "    marker = '__AG_MARKER__'\n    n = marker if marker.isdigit() else '999999'\n"
        "    subprocess.Popen(['sleep', n], start_new_session=True)\n"
        "    pid = os.fork()\n    if pid == 0:\n        os.setsid()\n"
        "        if os.fork() == 0:\n            os.execvp('sleep', ['sleep', str(int(n) + 1)])\n"
        "        os._exit(0)\n    os.waitpid(pid, 0)\n")}),
        "outlive_worker.ipynb", "starts a process in a new session and a double-forked daemon", "hostile")
    add(variant(key, {NORMALIZE: normalize_doing(
        "    import json, os, sys\n    os.write(json.loads(sys.argv[1])['fd_out'], b'\\xff' * 64)\n")}),
        "forge_protocol.ipynb", "writes garbage on the channel to the grader", "hostile",
        lost={N: "malformed reply"})
    add(variant(key, {NORMALIZE: normalize_doing(
        "    import sys\n    sys.setrecursionlimit(10 ** 7)\n    a, b = [], []\n"
        "    for _ in range(3 * 10 ** 5):\n        a, b = [a], [b]\n    a == b\n")}),
        "recursion_crash.ipynb", "recursion deep enough to overflow the C stack: a segmentation fault", "hostile",
        lost={N: "ended (exit code 139"})

    # -- hostile: memory, disk, output -----------------------------------------------------------------
    add(variant(key, append=["class Hog:\n    blocks = [bytes(2 ** 26) for _ in range(10 ** 5)]\n"]),
        "memory_bomb_import.ipynb", "a class body allocating 6 TB", "hostile", note="MemoryError")
    add(variant(key, {NORMALIZE: normalize_doing("    hog = []\n    while True:\n        hog.append(bytes(2 ** 26))\n")}),
        "memory_bomb_call.ipynb", "normalize allocates until it cannot", "hostile", lost={N: "MemoryError"})
    add(variant(key, {SOFTMAX: "def softmax(x, dim=-1):\n    return torch.empty(2 ** 40)\n"}),
        "memory_bomb_tensor.ipynb", "softmax asks for a 4 TB tensor", "hostile",
        lost={c: "can't allocate memory" for c in SOFTMAX_CHECKS})
    add(variant(key, {NORMALIZE: normalize_doing(
        "    import os, time\n" + NOT_AS_ROOT + "    for _ in range(3):\n        if os.fork() == 0:\n            hog = []\n"
        "            try:\n                while True:\n                    hog.append(bytearray(2 ** 25))\n"
        "            except MemoryError:\n                time.sleep(600)\n            os._exit(0)\n"
        "    time.sleep(600)\n")}),
        "fork_memory_bomb.ipynb", "three children each fill memory up to their own limit", "hostile",
        lost={N: ["used more than the memory limit", "timed out"]}, timing=True)
    add(variant(key, {NORMALIZE: normalize_doing(
        "    chunk = b'x' * 2 ** 20\n    i = 0\n    while True:\n"
        "        with open(f'fill{i}.bin', 'wb') as fh:\n            for _ in range(8):\n"
        "                fh.write(chunk)\n        i += 1\n")}),
        "disk_fill.ipynb", "fills its scratch space", "hostile", lost={N: "No space left on device"})
    add(variant(key, {NORMALIZE: normalize_doing("    for _ in range(10 ** 4):\n        print('x' * 2 ** 20)\n")}),
        "huge_output_call.ipynb", "normalize prints 10 GB: beyond the output cap it is dropped, the print never fails",
        "hostile")
    add(variant(key, append=["class Chatty:\n    for _ in range(2 ** 10):\n        print('y' * 2 ** 20)\n"]),
        "huge_output_import.ipynb", "a class body printing 1 GB: dropped beyond the cap, no note, nothing lost",
        "hostile")

    # -- hostile: patching the grader's libraries ------------------------------------------------------
    add(variant(key, {SOFTMAX: "def softmax(x, dim=-1):\n    return x\n",
                      TINY: key.cells[TINY].source.replace("torch.relu(self.linear(x))", "self.linear(x)")},
                append=["class Patch:\n"
                        "    torch.allclose = lambda *a, **k: True\n"
                        "    torch.equal = lambda *a, **k: True\n"
                        "    torch.isfinite = lambda x: torch.ones_like(x, dtype=torch.bool)\n"
                        "    torch.Tensor.__eq__ = lambda self, other: True\n"
                        "    torch.testing.assert_close = lambda *a, **k: None\n"
                        "    torch.relu = lambda x: x.abs()\n"]),
        "monkeypatch_torch.ipynb", "wrong softmax and layer, torch comparisons patched to pass", "hostile",
        lost={**{c: "" for c in SOFTMAX_CHECKS}, T: "apply the ReLU"})
    add(variant(key, {SOFTMAX: "def softmax(x, dim=-1):\n    return x.exp()\n"},
                append=["import builtins, math\nimport numpy\nclass Patch:\n"
                        "    builtins.all = lambda *a: True\n    builtins.any = lambda *a: True\n"
                        "    builtins.sum = lambda *a, **k: 1.0\n    builtins.round = lambda *a: 1.0\n"
                        "    math.isclose = lambda *a, **k: True\n    math.isfinite = lambda *a: True\n"
                        "    numpy.allclose = lambda *a, **k: True\n    numpy.isclose = lambda *a, **k: True\n"
                        "    numpy.testing.assert_allclose = lambda *a, **k: None\n"]),
        "monkeypatch_builtins.ipynb", "wrong softmax, builtins, math and numpy patched", "hostile",
        lost={c: "" for c in SOFTMAX_CHECKS})
    stub = student_notebook()
    stub.cells.append(nbformat.v4.new_code_cell(
        "import sys\nclass Patch:\n"
        "    import autograder.testing as _t\n"
        "    _t.Fail = type('Fail', (Exception,), {})\n"
        "    _t.expect_close = lambda *a, **k: None\n"
        "    _t.expect_shape = lambda *a, **k: None\n"
        "    _t.check = lambda *a, **k: (lambda f: None)\n"
        "    import autograder.judge as _j\n"
        "    _j._fraction = lambda value: 1.0\n"
        "    _j.Judge.run_check = lambda self, *a, **k: None\n"
        "    for _name in ('autograder.sandbox.worker', '__main__'):\n"
        "        _m = sys.modules.get(_name)\n"
        "        if _m is not None and hasattr(_m, 'Worker'):\n"
        "            _m.Worker.op_stub_hit = lambda self: (False, False)\n"
        "            _m.Worker.reply_error = lambda self, exc: self.reply(None)\n"))
    add(stub, "monkeypatch_framework.ipynb", "the stub, with the grader's own modules patched in its worker",
        "hostile", lost={N: "", SP: "", SR: "", SV: "", SS: "", T: "", **unanswered})
    add(variant(key, {NORMALIZE: "class Liar:\n    def __eq__(self, other):\n        return True\n"
                                 "    def __bool__(self):\n        return True\n"
                                 "    def __float__(self):\n        return 1.0\n\n"
                                 "def normalize(v):\n    return Liar()\n",
                      SOFTMAX: "class Sneaky(torch.Tensor):\n    @classmethod\n"
                               "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
                               "        if func in (torch.allclose, torch.equal):\n            return True\n"
                               "        return super().__torch_function__(func, types, args, kwargs or {})\n\n"
                               "def softmax(x, dim=-1):\n    return x.as_subclass(Sneaky)\n"}),
        "evil_return.ipynb", "returns an always-equal object and a tensor subclass that fakes comparisons",
        "hostile", lost={N: "could not use what your code returned", **{c: "" for c in SOFTMAX_CHECKS}})

    add(variant(key, {SOFTMAX: 'def softmax(x, dim=-1):\n    raise ValueError("bad \\ud800 surrogate \\udcff")\n'}),
        "surrogate_message.ipynb", "an error message holding lone surrogates, which no UTF-8 file can hold",
        "hostile", lost={c: "ValueError" for c in SOFTMAX_CHECKS})
    stub = student_notebook()
    stub.cells.append(nbformat.v4.new_code_cell(
        "import sys\nclass Patch:\n"
        "    sys.set_int_max_str_digits(0)\n"
        "    _w = sys.modules['autograder.sandbox.worker']\n"
        "    _original = _w.Worker.op_end_check\n"
        "    def _end(self, seed, _original=_original):\n"
        "        _original(self, seed)\n"
        "        return 10 ** 5000, False\n"
        "    _w.Worker.op_end_check = _end\n"))
    add(stub, "undecodable_reply.ipynb", "the stub, its worker answering with a number past int()'s digit limit",
        "hostile", lost={N: "", SP: "", SR: "", SV: "", SS: "", T: "", **unanswered})

    # -- hostile: the grading run's files, the network, the confinement itself ---------------------------
    add(variant(key, {NORMALIZE: normalize_doing(
        "    import os\n    found = []\n"
        "    for path in _listed('__AG_SECRETS__'):\n"
        "        try:\n            with open(path, 'rb') as fh:\n                if fh.read(64):\n"
        "                    found.append('read ' + path)\n        except OSError:\n            pass\n"
        "    for path in _listed('__AG_PRIVATE_DIRS__'):\n"
        "        try:\n            if os.listdir(path):\n                found.append('listed ' + path)\n"
        "        except OSError:\n            pass\n"
        "    others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) not in (1, os.getpid())]\n"
        "    for pid in others:\n"
        "        try:\n            found.append('sees ' + open(f'/proc/{pid}/cmdline').read()[:80])\n"
        "        except OSError:\n            pass\n"
        "    if found:\n        raise RuntimeError('LEAK: ' + '; '.join(found))\n")}, append=[PLACEHOLDERS]),
        "read_grader_files.ipynb", "reads the reference, hidden tests, results, other submissions; "
        "looks for the grader's processes", "hostile")
    add(variant(key, {NORMALIZE: normalize_doing(
        "    if _TRIED:\n        return v / v.norm(dim=-1, keepdim=True)\n    _TRIED.append(1)\n"
        "    import ctypes, os\n    libc = ctypes.CDLL(None, use_errno=True)\n    uid = os.getuid()\n"
        "    escaped = []\n"
        "    try:\n        os.setuid(0)\n        escaped.append('setuid(0)')\n    except OSError:\n        pass\n"
        "    if libc.unshare(0x10000000 | 0x00020000) == 0:\n"
        "        for name, text in (('setgroups', 'deny'), ('uid_map', f'0 {uid} 1'), ('gid_map', f'0 {uid} 1')):\n"
        "            try:\n                with open(f'/proc/self/{name}', 'w') as fh:\n                    fh.write(text)\n"
        "            except OSError:\n                pass\n"
        "        for path in _listed('__AG_PRIVATE_DIRS__') + _listed('__AG_SECRETS__'):\n"
        "            libc.umount2(path.encode(), 2)\n"
        "    for path in _listed('__AG_SECRETS__'):\n"
        "        try:\n            with open(path, 'rb') as fh:\n                if fh.read(64):\n"
        "                    escaped.append('read ' + path)\n        except OSError:\n            pass\n"
        "    for path in _listed('__AG_PRIVATE_DIRS__'):\n"
        "        try:\n            if os.listdir(path):\n                escaped.append('listed ' + path)\n"
        "        except OSError:\n            pass\n"
        "    if escaped:\n        raise RuntimeError('ESCAPED: ' + '; '.join(escaped))\n")},
                append=[PLACEHOLDERS + "\n_TRIED = []\n"]),
        "escape_mounts.ipynb", "setuid(0); then root in a new user namespace unmounts the covers", "hostile")
    write_all = ("    for path in _listed('__AG_WRITE_TARGETS__') + ['results.json', '../results.json',\n"
                 "                                                 '/autograder/results/results.json']:\n"
                 "        try:\n            with open(path, 'w') as fh:\n"
                 "                fh.write('{\"score\": 1000}')\n        except OSError:\n            pass\n")
    add(variant(key, {NORMALIZE: normalize_doing(write_all)},
                append=[PLACEHOLDERS, "class Scribble:\n" + write_all]),
        "write_files.ipynb", "writes a fake results.json, grades.csv, files in the repository and /tmp",
        "hostile")
    add(variant(key, {NORMALIZE: normalize_doing(
        "    import socket\n    port = '__AG_PORT__'\n    reached = []\n"
        "    targets = [('127.0.0.1', int(port))] if port.isdigit() else []\n"
        "    for host, p in targets + [('1.1.1.1', 53), ('8.8.8.8', 443)]:\n"
        "        try:\n            with socket.create_connection((host, p), timeout=2) as s:\n"
        "                s.sendall(b'a submission was here')\n            reached.append(f'{host}:{p}')\n"
        "        except OSError:\n            pass\n"
        "    if reached:\n        raise RuntimeError('NETWORK: ' + ', '.join(reached))\n")}),
        "network.ipynb", "connects to a port on the grading machine and to the internet", "hostile")
    return out


def big_output(path: Path, key: nbformat.NotebookNode | None = None, megabytes: int = 100) -> Path:
    """The answer key with `megabytes` of text output embedded in its demo cell."""
    nb = copy.deepcopy(key if key is not None else nbformat.read(NOTEBOOKS / "correct.ipynb", as_version=4))
    line = "z" * 1023 + "\n"
    nb.cells[10].outputs = [nbformat.v4.new_output("stream", name="stdout", text=line * 1024 * megabytes)]
    nbformat.write(nb, path)
    return path


def main() -> None:
    sys.path.insert(0, str(ROOT))
    key = answer_key()
    if NOTEBOOKS.exists():
        shutil.rmtree(NOTEBOOKS)
    NOTEBOOKS.mkdir(parents=True)
    expected = []
    for exp, nb in corpus(key):
        data = nb if isinstance(nb, bytes) else nbformat.writes(nb).encode()
        (NOTEBOOKS / exp["file"]).write_bytes(data)
        exp.setdefault("id", Path(exp["file"]).stem)
        expected.append(exp)
    expected.append(entry("big_output.ipynb", "the answer key with 100 MB of output embedded (made by the test)",
                          "broken", generated="big_output"))
    expected[-1]["id"] = "big_output"
    EXPECTED.write_text(json.dumps(expected, indent=1) + "\n", encoding="utf-8")
    print(f"{len(expected)} notebooks: {NOTEBOOKS.relative_to(ROOT)}/, expectations in {EXPECTED.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

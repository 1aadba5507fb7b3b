"""A notebook's own test cells mean what they mean in the student's kernel (autograder/kernel.py): the student's
exceptions arrive as their own types, generators step, type questions answer with the judge's classes, the test
cells of one part share their variables in order, `del name` removes the student's name; an error in the check's
own code is the grader's, never the student's. A tensor read from student code carries what autograd knew of it
(requires_grad, a leaf's .grad, whether it is a leaf); a value that is not data names its own type in messages;
a complex tensor where a real one is expected is said so, never cast silently."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from autograder.build import build
from autograder.grading import GradeOptions, grade
from autograder.cell_names import shared_with
from autograder.release import load_release
from tests.conftest import make_submission

SOLUTION = '''import numpy as np
import pandas as pd
import torch


class NotPositive(ValueError):
    pass


def parse(x):
    ### BEGIN SOLUTION
    if x < 0:
        raise ValueError(f"negative: {x}")
    if x == 0:
        raise NotPositive("zero")
    return x * 2
    ### END SOLUTION


def checked(x):
    ### BEGIN SOLUTION
    assert x > 0, "x must be positive"
    return x
    ### END SOLUTION


def count_up(n):
    ### BEGIN SOLUTION
    for i in range(n):
        yield i
    ### END SOLUTION


def table():
    ### BEGIN SOLUTION
    return pd.Series([1, 2, 3])
    ### END SOLUTION


def arr():
    ### BEGIN SOLUTION
    return np.arange(3)
    ### END SOLUTION


def mapping():
    ### BEGIN SOLUTION
    return {"a": 1}
    ### END SOLUTION


def twice(x):
    ### BEGIN SOLUTION
    return parse(x) + parse(x)
    ### END SOLUTION


def frozen_layer():
    layer = torch.nn.Linear(2, 1)
    ### BEGIN SOLUTION
    layer.weight.requires_grad_(False)
    ### END SOLUTION
    layer(torch.ones(1, 2)).sum().backward()
    return layer


def doubled(x):
    ### BEGIN SOLUTION
    return 2 * x
    ### END SOLUTION


def mean_of(x):
    ### BEGIN SOLUTION
    return x.mean()
    ### END SOLUTION


def newton(f, fprime, x0, steps=20):
    ### BEGIN SOLUTION
    x = x0
    for _ in range(steps):
        x = x - f(x) / fprime(x)
    return x
    ### END SOLUTION


def roots(a, b, c):
    ### BEGIN SOLUTION
    d = complex(b * b - 4 * a * c) ** 0.5
    return (-b + d) / (2 * a), (-b - d) / (2 * a)
    ### END SOLUTION


def primes_below(n):
    ### BEGIN SOLUTION
    return {p for p in range(2, n) if all(p % q for q in range(2, p))}
    ### END SOLUTION


def sum(a, b):  # a built-in's name the assignment itself defines
    ### BEGIN SOLUTION
    return a + b
    ### END SOLUTION


class Value:
    def __init__(self, data):
        self.data = data

    def __add__(self, other):
        return Value(self.data + (other.data if isinstance(other, Value) else other))

    def __radd__(self, other):
        return self + other

    def __mul__(self, other):
        return Value(self.data * (other.data if isinstance(other, Value) else other))

    __rmul__ = __mul__

    def __neg__(self):
        return self * -1

    def __lt__(self, other):
        return self.data < (other.data if isinstance(other, Value) else other)

    def __str__(self):
        return f"Value({self.data})"


def values():
    v = Value(1.0)
    return [v, v, Value(2.0)]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 1)

    def forward(self, x):
        return self.fc(x)


class ArrayLike:  # an object of the student's own that numpy and torch read as values
    def __init__(self, data):
        self.data = list(data)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.data, dtype=dtype)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i]


def as_values():
    ### BEGIN SOLUTION
    return ArrayLike([1.0, 2.0, 3.0])
    ### END SOLUTION


def train_step(model, X, y, loss_fn, optimizer):
    ### BEGIN SOLUTION
    optimizer.zero_grad()
    loss = loss_fn(model(X), y)
    loss.backward()
    optimizer.step()
    return loss.item()
    ### END SOLUTION


def fill_(t, value):
    ### BEGIN SOLUTION
    t[...] = value
    ### END SOLUTION


def exp_of(x):
    ### BEGIN SOLUTION
    return np.exp(x)
    ### END SOLUTION
'''

RAISES = '''try:
    parse(-1)
except ValueError as exc:
    assert "negative" in str(exc), "the message is the student's"
else:
    raise AssertionError("parse(-1) should raise ValueError")
try:
    parse(0)
except ValueError:
    pass
else:
    raise AssertionError("parse(0) should raise a ValueError")'''

ASSERTS = '''try:
    checked(-1)
except AssertionError:
    pass
else:
    raise AssertionError("checked(-1) should fail an assertion")'''

STEPS = '''g = count_up(3)
assert next(g) == 0
assert [i for i in g] == [1, 2], "count_up(3) yields 0, 1, 2"'''

TYPES = '''assert type(table()) == pd.Series
assert type(arr()) is np.ndarray
assert isinstance(mapping(), dict) and isinstance(table(), pd.Series)'''

SETS = '''value = parse(2)
assert value == 4'''

READS = '''assert value + 1 == 5, "value is set by the cell before"'''

DELETES = '''del parse
try:
    twice(1)
except NameError:
    pass
else:
    raise AssertionError("twice does not call parse")'''

AFTER_DELETE = '''try:
    twice(1)
except NameError:
    pass
else:
    raise AssertionError("parse was deleted by the cell before")'''

RESTORED = '''assert twice(1) == 4'''

AUTOGRAD = '''layer = frozen_layer()
assert not layer.weight.requires_grad, "the weight must be frozen"
assert layer.bias.requires_grad and layer.bias.grad is not None, "the bias learns"
out = layer(torch.ones(3, 2))
assert out.requires_grad and out.grad_fn is not None and not out.is_leaf
out[0] = 0.0  # in place, as on the notebook's own (non-leaf) output'''

REAL = '''assert torch.allclose(doubled(torch.ones(2)).double(), torch.full((2,), 2.0, dtype=torch.float64))'''

NUMBER = '''assert float(mean_of(torch.ones(4))) == 1.0'''

TYPO = '''import torch
assert torch.alclose(torch.ones(2), torch.ones(2) * parse(1) / 2)'''

NAMES = '''assert sum(2, 3) == 5
assert len(arr()) == 3'''

PLAIN = '''import math
target = 2.0
assert abs(newton(lambda x: x * x - target, lambda x: 2 * x, 1.0) - math.sqrt(2)) < 1e-9
def cube(x):
    return x ** 3 - 8
assert abs(newton(cube, lambda x: 3 * x * x, 3.0) - 2) < 1e-9
assert abs(newton(math.sin, math.cos, 3.0) - math.pi) < 1e-9
assert all(isinstance(r, complex) for r in roots(1, 0, 1))
assert sorted(abs(r - 1j) < 1e-9 for r in roots(1, 0, 1)) == [False, True]
assert primes_below(10) == {2, 3, 5, 7} and primes_below(2) == set()'''

OBJECTS = '''import builtins
a, b = Value(2.0), Value(3.0)
assert (a + b).data == 5.0 and (2 * a).data == 4.0 and (-a).data == -2.0 and (a * b).data == 6.0
assert builtins.sum([a, b]).data == 5.0, "sum() adds to 0 first: Value needs __radd__"
assert a < b and not b < a and b > a and sorted([b, a])[0].data == 2.0
assert isinstance(a + b, Value) and not isinstance(3, Value) and isinstance(a, (int, Value))
assert f"{a}" == "Value(2.0)" and str(b) == "Value(3.0)" and bool(a)
first, again, other = values()
assert first == again and first != other and len({first, again, other}) == 2 and first in [other, again]'''

TRAINS = '''import torch
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # over the student's parameters themselves
loss_fn = torch.nn.MSELoss()  # the cell's own object, sent to the student's code
X, y = torch.ones(4, 2), torch.zeros(4, 1)
first = train_step(model, X, y, loss_fn, optimizer)
second = train_step(model, X, y, loss_fn, optimizer)
assert second < first, "one optimizer step lowers the loss"
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)'''

IN_PLACE = '''import torch
model = torch.nn.Linear(2, 1)  # the cell's own model, optimizer and tensors, given to the student's code
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
w0 = model.weight.detach().clone()
X, y = torch.ones(4, 2), torch.zeros(4, 1)
first = train_step(model, X, y, torch.nn.MSELoss(), optimizer)
assert not torch.equal(model.weight.detach(), w0), "train_step trains the cell's model"
assert model.weight.grad is not None and optimizer.param_groups[0]["params"][0] is model.weight
second = train_step(model, X, y, torch.nn.MSELoss(), optimizer)
assert second < first, "the second step starts where the first one left the model"
z, a = torch.zeros(3), np.zeros(2)
fill_(z, 2.0)
fill_(a, 1.0)
assert torch.equal(z, torch.full((3,), 2.0)) and (a == 1.0).all(), "fill_ fills the cell's tensor and array in place"'''

SETTINGS = '''layer = frozen_layer()
with torch.no_grad():
    out = layer(torch.ones(3, 2))
assert not out.requires_grad, "the cell's no_grad holds for the student's forward"
assert layer(torch.ones(3, 2)).requires_grad
with np.errstate(over="raise"):
    try:
        exp_of(np.array([1000.0]))
    except FloatingPointError:
        pass
    else:
        raise AssertionError("the cell's errstate holds for the student's code")'''

JUDGED = '''np.testing.assert_allclose(as_values(), np.array([1.0, 2.0, 3.0]))
torch.testing.assert_close(as_values(), torch.tensor([1.0, 2.0, 3.0]))
assert np.allclose(as_values(), [1, 2, 3]) and torch.equal(torch.as_tensor(as_values()), torch.tensor([1., 2, 3]))'''

CELLS = [("raises", "1. Kernel", RAISES), ("asserts", "1. Kernel", ASSERTS), ("steps", "1. Kernel", STEPS),
         ("types", "1. Kernel", TYPES), ("sets", "2. Shared", SETS), ("reads", "2. Shared", READS),
         ("deletes", "3. Deleted", DELETES), ("after_delete", "3. Deleted", AFTER_DELETE),
         ("restored", "4. Restored", RESTORED), ("autograd", "5. Tensors", AUTOGRAD), ("real", "5. Tensors", REAL),
         ("number", "5. Tensors", NUMBER), ("names", "6. Names", NAMES),
         ("plain", "7. Plain values", PLAIN), ("objects", "8. Objects", OBJECTS),
         ("elsewhere", "9. Later", "assert value == 4, 'value is set by the cell of part 2'"),
         ("trains", "10. Training", TRAINS), ("judged", "11. Judged", JUDGED), ("in_place", "12. In place", IN_PLACE),
         ("settings", "13. Settings", SETTINGS)]


def _notebook(path: Path, cells=CELLS) -> Path:
    solution = nbformat.v4.new_code_cell(SOLUTION)
    solution.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "solution"}
    nb = nbformat.v4.new_notebook(cells=[solution])
    for name, part, source in cells:
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": name, "points": 1, "part": part}
        nb.cells.append(cell)
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _assignment(root: Path, cells=CELLS) -> Path:
    source = root / "solutions" / "kernel"
    _notebook(source / "kernel.ipynb", cells)
    (source / "tests").mkdir()
    (source / "assignment.toml").write_text('title = "kernel"\nnotebook = "kernel.ipynb"\nfiles = []\n\n[limits]\n'
                                            "check_seconds = 20\nimport_seconds = 20\nsubmission_seconds = 200\n")
    return source


def _grade(release: Path, notebooks: list[Path], out: Path) -> list[dict]:
    results = grade(load_release(release), notebooks, GradeOptions(out, quiet=True, summary=False))
    return [{c.name: c for c in r.checks} for r in results]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("kernel")
    paths = build(_assignment(root))
    key = paths.release / "answer_key.ipynb"
    wrong = {
        "key_error": {'raise ValueError(f"negative: {x}")': 'raise KeyError(f"negative: {x}")'},
        "no_assert": {'assert x > 0, "x must be positive"': "pass"},
        "no_parse": {"return parse(x) + parse(x)": "return 4 * x"},
        "not_frozen": {"layer.weight.requires_grad_(False)": "pass"},
        "complex": {"return 2 * x": "return torch.complex(2 * x, torch.ones_like(x))"},
        "lazy": {"return x.mean()": "return lambda: x.mean()"},
        "newton": {"x = x - f(x) / fprime(x)": "x = x - f(x) / (2 * x)"},
        "len": {"    return np.arange(3)\n": "    return np.arange(5)\n\n\ndef len(x):\n    return 3\n"},
        "no_radd": {"    def __radd__(self, other):\n        return self + other\n": ""},
        "triple": {"    return x * 2\n": "    return x * 3\n"},
        "no_step": {"    optimizer.step()\n": ""},
        "copies": {"    t[...] = value": "    t = t.clone() if hasattr(t, \"clone\") else t.copy()\n    t[...] = value"},
        # a fake whose worker's comparisons say yes to anything: the comparisons are the judge's, and the expected
        # values never reach the student's process
        "forged": {"    return ArrayLike([1.0, 2.0, 3.0])\n":
                   "    import numpy.testing, torch.testing\n"
                   "    numpy.testing.assert_allclose = torch.testing.assert_close = lambda *a, **k: None\n"
                   "    np.allclose = lambda *a, **k: True\n"
                   "    return ArrayLike([9.0, 9.0, 9.0])\n"},
    }
    notebooks = [key] + [make_submission(root / f"{name}.ipynb", key, edit) for name, edit in wrong.items()]
    return dict(zip(["key", *wrong], _grade(paths.release, notebooks, root / "out")))


@pytest.mark.slow
def test_the_answer_key_passes_every_cell_as_in_a_kernel(graded):
    assert {name: (c.status, c.message) for name, c in graded["key"].items()} == \
        {name: ("passed", "") for name, _, _ in CELLS}


@pytest.mark.slow
def test_a_students_exception_is_caught_by_its_type_and_no_other(graded):
    raises = graded["key_error"]["raises"]
    assert raises.status == "failed"
    assert "your parse raised KeyError" in raises.message and "negative: -1" in raises.message
    assert graded["no_assert"]["asserts"].message == "checked(-1) should fail an assertion"
    assert graded["no_assert"]["raises"].status == "passed"


@pytest.mark.slow
def test_a_deleted_name_stays_deleted_for_the_part_and_comes_back_after(graded):
    no_parse = graded["no_parse"]
    assert no_parse["deletes"].message == "twice does not call parse"
    assert no_parse["after_delete"].message == "parse was deleted by the cell before"
    assert no_parse["restored"].status == "passed"


@pytest.mark.slow
def test_a_tensor_from_student_code_reads_as_autograd_saw_it(graded):
    assert graded["key"]["autograd"].status == "passed"
    assert graded["not_frozen"]["autograd"].message == "the weight must be frozen"


@pytest.mark.slow
def test_a_complex_tensor_is_never_taken_for_its_real_part(graded):
    assert graded["complex"]["real"].status == "failed"
    assert "complex numbers where real ones are expected" in graded["complex"]["real"].message


@pytest.mark.slow
def test_a_value_that_is_not_data_is_named_by_its_own_type(graded):
    message = graded["lazy"]["number"].message
    assert "'function'" in message and "Remote" not in message and "Translating" not in message


def test_a_cell_shares_the_earlier_cells_of_its_part_only_when_it_reads_them():
    earlier = [("sets", SETS), ("asserts", ASSERTS)]
    assert shared_with(READS, earlier) == earlier
    assert shared_with(STEPS, earlier) == []
    assert shared_with(AFTER_DELETE, [("deletes", DELETES)]) == [("deletes", DELETES)]


TYPO_FILE = '''import torch
from autograder.testing import check


@check("typo in a test file", points=1, part="5. Typos")
def typo(sub, ref):
    assert torch.alclose(torch.as_tensor(sub.arr()), torch.as_tensor(ref.arr()))


@check("arr has a shape", points=1, part="5. Typos")
def shape(sub, ref):
    assert sub.arr().shape == (3,)
'''


@pytest.fixture(scope="module")
def typos(tmp_path_factory):
    root = tmp_path_factory.mktemp("typos")
    source = _assignment(root, CELLS[:1] + [("typo_cell", "5. Typos", TYPO)])
    (source / "tests" / "test_typo.py").write_text(TYPO_FILE)
    return source


@pytest.mark.slow
def test_an_error_in_the_checks_own_code_is_not_graded_and_names_the_file_and_line(typos, tmp_path):
    paths = build(typos)
    key = paths.release / "answer_key.ipynb"
    as_list = make_submission(tmp_path / "as_list.ipynb", key, {"return np.arange(3)": "return [0, 1, 2]"})
    for checks in _grade(paths.release, [key, as_list], tmp_path / "out"):
        for name, where in (("typo in a test file", "tests/test_typo.py, line 7"),
                            ("typo_cell", "<test cell typo_cell>, line 2")):
            assert checks[name].status == "ungraded" and checks[name].score == 0
            assert checks[name].grader_problem.startswith(
                f"the check's own code fails at {where}: AttributeError: module 'torch' has no attribute 'alclose'")
            assert f"an error in the check itself, at {where}" in checks[name].message
            assert "could not use what your code returned" not in checks[name].message
    assert checks["arr has a shape"].message == ("the grader could not use what your code returned (AttributeError: "
                                                 "'list' object has no attribute 'shape')")


@pytest.mark.slow
def test_verify_fails_on_an_error_in_a_check(typos):
    from autograder.verify import verify

    problems = "\n".join(verify(typos, with_corpus=False).problems)
    assert "typo in a test file: the check's own code fails at tests/test_typo.py, line 7" in problems
    assert "typo_cell: the check's own code fails at <test cell typo_cell>, line 2" in problems


def test_what_does_not_hold_is_said_at_build_time_with_file_cell_and_line(tmp_path):
    from autograder.build import transform

    cells = CELLS[4:6] + [("magic", "5. Other", "%timeit parse(1)"),
                          ("rebinds", "5. Other", "parse = lambda x: 2 * x\nassert twice(1) == 4"),
                          ("elsewhere", "5. Other", "assert value == 4")]
    nb = nbformat.read(_notebook(tmp_path / "kernel.ipynb", cells), as_version=4)
    assert transform(nb, "kernel.ipynb").notes == [
        "kernel.ipynb: cell 4, line 1: test cell not Python (an IPython magic or shell line?): the check fails for every "
        "notebook; write it in Python",
        "kernel.ipynb: cell 5, line 1: test cell binds `parse`, which the notebook defines: in the grader this changes "
        "the test's name only; the student's functions keep calling their own"]
    assert transform(nbformat.read(_notebook(tmp_path / "all.ipynb"), as_version=4), "all.ipynb").notes == []


def test_a_students_exception_named_after_the_graders_own_is_only_the_students():
    """A class a student names autograder.testing.Fail (or Pending) must not become the judge's Fail or Pending:
    a check would read it as its own verdict (NOT GRADED, or pending for a test that failed)."""
    import autograder.testing  # noqa: F401 - loaded in the judge, as it always is
    from autograder.kernel import as_kernel_exception
    from autograder.sandbox.client import StudentError
    from autograder.testing import Fail, Pending

    for name in ("Fail", "Pending"):
        exc = StudentError("your f", {"type": name, "message": "x",
                                      "mro": [f"autograder.testing.{name}", "builtins.Exception"]})
        out = as_kernel_exception(exc)
        assert isinstance(out, StudentError) and not isinstance(out, (Fail, Pending))
    plain = as_kernel_exception(StudentError("your f", {"type": "ValueError", "message": "x",
                                                        "mro": ["builtins.ValueError", "builtins.Exception"]}))
    assert isinstance(plain, ValueError)


def test_proxy_type_names_of_one_submission_never_crowd_out_the_next_ones():
    from autograder.sandbox.remote import Remote, proxy_class

    for i in range(2000):  # a notebook returning objects of 2,000 classes
        proxy_class(Remote, f"Thing{i}")
    assert proxy_class(Remote, "AccuracyThing").__name__ == "AccuracyThing"


def test_an_assertion_failing_on_a_hidden_line_of_a_test_cell_shows_no_message():
    from types import SimpleNamespace

    from autograder.judge import _assertion_message

    source = ("assert f(1) == 1, 'f(1) should be 1'\n### BEGIN HIDDEN TESTS\n"
              "assert f(7) == 49, 'DESIRED: 49 for the hidden input 7'\n### END HIDDEN TESTS")
    spec = SimpleNamespace(fn=None, name="c", source=source, public=True)

    def failure(f):
        try:
            exec(compile(source, "<test cell c>", "exec"), {"f": f})
        except AssertionError as exc:
            return _assertion_message(spec, exc)

    assert failure(lambda x: x * x + 1) == "f(1) should be 1"  # a public line: its message
    assert failure(lambda x: x if x < 2 else 0) == "a hidden test failed"  # never 'DESIRED: 49 ...'


def test_an_error_met_on_a_hidden_line_shows_its_type_only():
    """torch's "size of tensor b (3)" on a hidden line would show the hidden shape: only the error's type is said."""
    import torch

    from autograder.kernel import hidden_failure

    source = ("assert f(torch.ones(2)).shape == (2,)\n### BEGIN HIDDEN TESTS\n"
              "assert torch.allclose(f(torch.ones(2)), torch.ones(3))\n### END HIDDEN TESTS")

    def failure(f):
        try:
            exec(compile(source, "<test cell c>", "exec"), {"f": f, "torch": torch})
        except Exception as exc:  # noqa: BLE001
            return hidden_failure(exc, "<test cell c>", source)

    assert failure(lambda x: x) == "a hidden test failed (RuntimeError)"
    assert failure(lambda x: x[:1]) is None  # the public line failed: the judge says what it says


def test_a_module_a_test_cell_patches_is_whole_again_for_the_next_check():
    """nbgrader courses forbid a function by `np.linalg.solve = None` in a hidden test: that must not reach the
    next check, or the next submission, graded in the same judge."""
    import numpy as np

    from autograder.kernel import run_test_cell

    class Namespace(dict):
        def restore(self):
            pass

    solve, cell = np.linalg.solve, "import numpy as np\nnp.linalg.solve = None\nsetattr(np, 'extra_name', 1)\n1 / 0"
    with pytest.raises(ZeroDivisionError):
        run_test_cell(cell, "<test cell t>", Namespace())
    assert np.linalg.solve is solve and not hasattr(np, "extra_name")
    run_test_cell("import numpy.polynomial.hermite as h\nh.x = 1", "<test cell u>", Namespace())
    assert np.polynomial.hermite is not None  # a module the cell imported stays bound to its package


@pytest.mark.slow
def test_a_builtins_name_is_the_notebooks_only_where_the_assignment_defines_it(graded):
    assert graded["key"]["names"].status == "passed"  # the assignment's own `def sum(a, b)`
    assert graded["len"]["names"].status == "failed"  # a submission's `def len` is not the cell's len


@pytest.mark.slow
def test_functions_complex_numbers_and_sets_cross_to_student_code_and_back(graded):
    assert graded["key"]["plain"].status == "passed"  # a lambda, a def of the cell, math.sin: called back
    assert graded["newton"]["plain"].status == "failed"  # ... and a wrong newton is wrong with them


@pytest.mark.slow
def test_the_notebooks_objects_answer_operators_conversions_and_type_questions(graded):
    assert graded["key"]["objects"].status == "passed"  # a + b, 2 * a, -a, <, sorted, isinstance, f"{a}", in, sets
    no_radd = graded["no_radd"]["objects"]
    assert no_radd.status == "failed" and "TypeError" in no_radd.message and "__radd__" not in no_radd.message


@pytest.mark.slow
def test_a_cell_reading_a_variable_of_another_parts_cell_runs_after_it(graded):
    assert graded["key"]["elsewhere"].status == "passed"  # part 2's `value = parse(2)` replayed first
    failed = graded["triple"]["elsewhere"]  # ... and it holds what the student's parse gave, as in the kernel
    assert failed.status == "failed" and failed.message == "value is set by the cell of part 2"


@pytest.mark.slow
def test_a_cell_builds_an_optimizer_over_the_students_model_and_passes_its_own_objects(graded):
    assert graded["key"]["trains"].status == "passed"  # SGD(model.parameters()) built in the worker; MSELoss sent
    assert graded["no_step"]["trains"].message == "one optimizer step lowers the loss"


def test_the_student_code_works_on_the_cells_own_objects_as_in_a_kernel(graded):
    """A model and an optimizer built by the cell, and its tensor and array, go to the student's code as copies;
    what the call does to them (the model trained, the optimizer stepped, the tensor filled) is written back."""
    assert graded["key"]["in_place"].status == "passed"
    assert graded["copies"]["in_place"].message == "fill_ fills the cell's tensor and array in place"
    assert graded["no_step"]["in_place"].message == "train_step trains the cell's model"


def test_the_student_code_runs_under_the_cells_no_grad_and_errstate(graded):
    assert graded["key"]["settings"].status == "passed"


def test_a_library_function_that_judges_runs_in_the_judge_on_the_students_values(graded):
    """np.testing, torch.testing, np.allclose and torch.equal given the student's own object: its values are brought
    here (numpy.asarray / torch.as_tensor, computed in the worker) and compared here, so a notebook that patches
    those functions in its worker (to pass anything, or to print the expected value) gains nothing and sees
    nothing."""
    assert graded["key"]["judged"].status == "passed"
    forged = graded["forged"]["judged"]
    assert forged.status == "failed" and "ACTUAL: array([9., 9., 9.])" in forged.message  # numpy's own, here


def test_judging_library_functions_are_told_from_those_that_act_on_the_students_objects():
    from autograder.kernel import judges

    assert all(judges(p) for p in ("numpy.testing._private.utils:assert_allclose", "torch.testing._comparison:"
                                   "assert_close", "numpy:allclose", "torch:equal", "unittest.case:TestCase.assertEqual",
                                   "pytest:approx", "math:isclose"))
    assert not any(judges(p) for p in ("torch.optim.sgd:SGD", "torch.nn.utils.clip_grad:clip_grad_norm_",
                                       "pandas._testing.asserters:assert_frame_equal", "numpy:asarray"))

"""The helpers of the public testing API for the judge's own arithmetic: gen, normal, close, identical and the NaN
messages, load_weights."""
from __future__ import annotations

import math
import types

import pytest
import torch

from autograder.testing import (
    ATOL,
    RTOL,
    Fail,
    StudentError,
    close,
    expect_finite,
    expect_identical,
    gen,
    identical,
    load_weights,
    nonfinite,
    nonfinite_hint,
    normal,
    take_notes,
)

# -- gen and normal ---------------------------------------------------------------------------------------


def test_gen_repeats_its_draws_and_leaves_the_global_generator_alone():
    torch.manual_seed(5)
    expected_global = torch.rand(3)
    torch.manual_seed(5)
    first, second = torch.randn(4, generator=gen(11)), torch.randn(4, generator=gen(11))
    assert torch.equal(first, second) and not torch.equal(first, torch.randn(4, generator=gen(12)))
    assert torch.equal(torch.rand(3), expected_global)


def test_normal_draws_in_call_order_and_scales():
    r = normal(gen(3))
    a, b = r(2, 3), r(4, s=0.5)
    g = gen(3)
    assert torch.equal(a, torch.randn(2, 3, generator=g))
    assert torch.equal(b, 0.5 * torch.randn(4, generator=g))
    assert a.shape == (2, 3) and b.shape == (4,)


# -- close ------------------------------------------------------------------------------------------------


def test_close_defaults_are_the_documented_ones():
    assert (RTOL, ATOL) == (1e-4, 1e-5)
    expected = torch.tensor([1.0, 100.0], dtype=torch.float64)
    # |actual - expected| <= atol + rtol * |expected|: 1.1e-4 at 1, 1.001e-2 at 100
    assert close(expected + torch.tensor([1.09e-4, 0.0], dtype=torch.float64), expected)
    assert not close(expected + torch.tensor([1.11e-4, 0.0], dtype=torch.float64), expected)
    assert close(expected + torch.tensor([0.0, 1.0005e-2], dtype=torch.float64), expected)
    assert not close(expected + torch.tensor([0.0, 1.002e-2], dtype=torch.float64), expected)


def test_close_takes_explicit_tolerances():
    expected = torch.zeros(3)
    actual = torch.full((3,), 5e-5)
    assert not close(actual, expected)
    assert close(actual, expected, atol=1e-4)
    assert not close(torch.tensor([1.001]), torch.tensor([1.0]), rtol=1e-4)
    assert close(torch.tensor([1.001]), torch.tensor([1.0]), rtol=1e-3)
    assert not close(torch.tensor([1e-7]), torch.tensor([0.0]), rtol=0.0, atol=0.0)
    assert close(torch.tensor([0.25]), torch.tensor([0.25]), rtol=0.0, atol=0.0)  # exact equality still passes


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_inf_are_never_close(bad):
    actual = torch.tensor([1.0, bad])
    assert not close(actual, torch.tensor([1.0, 2.0]))
    assert not close(actual, actual.clone())  # not even to themselves
    assert not close(actual, actual.clone(), atol=math.inf)
    assert not close(torch.tensor([1.0, 2.0]), actual)  # a non-finite expected value matches nothing


def test_a_complex_tensor_is_close_only_to_a_complex_one():
    real = torch.tensor([1.0, 2.0])
    assert not close(torch.complex(real, torch.full((2,), 1000.0)), real)  # its real part alone matches
    assert not close(torch.complex(real, torch.zeros(2)), real)
    assert not close(real, torch.complex(real, torch.zeros(2)))
    assert close(torch.complex(real, real), torch.complex(real, real))
    assert not close(torch.complex(real, real), torch.complex(real, -real))  # imaginary parts compared too


def test_another_shape_is_not_close_even_when_it_broadcasts():
    assert not close(torch.zeros(3), torch.zeros(1, 3))
    assert not close(torch.zeros(1), torch.zeros(3))
    assert not close(torch.zeros(3, 2), torch.zeros(2, 3))
    assert close(torch.zeros(0, 4), torch.zeros(0, 4))  # nothing to compare, same shape


def test_only_tensors_are_close():
    assert not close([1.0, 2.0], torch.tensor([1.0, 2.0]))
    assert not close(1.0, torch.tensor(1.0))
    assert not close(torch.tensor([1.0]), [1.0])
    assert not close(None, torch.tensor([1.0]))


def test_close_compares_in_float64_across_dtypes():
    expected = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert close(torch.tensor([1.0, 2.0], dtype=torch.float32), expected)
    assert close(torch.tensor([1, 2]), expected)  # integers and floats alike
    assert close(torch.tensor([True, False]), torch.tensor([1.0, 0.0]))
    # 1 + 1e-9 is 1 in float32: only a float64 comparison sees the difference
    assert not close(torch.tensor([1.0]), torch.tensor([1.0 + 1e-9], dtype=torch.float64), rtol=0.0, atol=0.0)


# -- NaN and inf said as such, never as "different outputs" or "wrong values" --------------------------------

NAN_OUT = torch.tensor([[1.0, float("nan")], [2.0, 3.0]])


def test_nonfinite_names_nan_and_inf_and_how_many():
    assert nonfinite(NAN_OUT) == "NaN (1 of 4 values)"
    assert nonfinite(torch.tensor([float("inf"), float("nan"), 0.0])) == "NaN and inf (2 of 3 values)"
    assert nonfinite(torch.ones(3)) == "" and nonfinite(torch.arange(3)) == "" and nonfinite("text") == ""


def test_two_identical_nan_outputs_are_said_to_contain_nan_not_to_differ():
    assert not torch.equal(NAN_OUT, NAN_OUT.clone())  # the trap: NaN != NaN
    assert identical(NAN_OUT, NAN_OUT.clone())
    with pytest.raises(Fail) as failed:
        expect_identical(NAN_OUT, NAN_OUT.clone(), "two calls gave different outputs: use nn.Dropout", "the output")
    message = str(failed.value)
    assert message.startswith("the output contains NaN (1 of 4 values)") and "nn.Dropout" not in message


def test_outputs_that_differ_get_the_checks_own_message():
    with pytest.raises(Fail, match="^two calls gave different outputs$"):
        expect_identical(torch.ones(2), torch.zeros(2), "two calls gave different outputs")
    expect_identical(torch.ones(2), torch.ones(2), "never said")
    assert not identical(torch.ones(2), torch.ones(3)) and not identical(torch.ones(2), None)


def test_expect_finite_passes_finite_values_and_names_inf():
    expect_finite(torch.ones(3), "the output")
    with pytest.raises(Fail, match="^the logits contains inf"):
        expect_finite(torch.tensor([float("-inf")]), "the logits")


def test_a_failed_check_after_close_met_nan_says_so_once():
    take_notes()
    assert not close(NAN_OUT, torch.ones(2, 2))
    hint = nonfinite_hint("the output differs from the reference's")
    assert "contains NaN (1 of 4 values)" in hint and "NaN equals nothing" in hint
    assert nonfinite_hint("the output differs") == ""  # read once


def test_no_hint_where_the_message_names_nan_or_the_expected_values_are_not_finite():
    take_notes()
    close(NAN_OUT, torch.ones(2, 2))
    assert nonfinite_hint("the output contains NaN or inf") == ""
    close(NAN_OUT, NAN_OUT)  # compared with NaN expected: not the student's NaN to explain
    assert nonfinite_hint("wrong values") == ""
    close(NAN_OUT, torch.ones(2, 2))
    take_notes()  # the judge's call before the next check forgets it
    assert nonfinite_hint("wrong values") == ""


# -- load_weights -----------------------------------------------------------------------------------------


def _sub(loader) -> types.SimpleNamespace:
    """A stand-in for the submission's proxy: `sub.helpers.NAME` is `loader`."""
    return types.SimpleNamespace(helpers=types.SimpleNamespace(my_load=loader))


def test_load_weights_calls_the_named_helper_with_the_module_and_state():
    calls = []
    sub = _sub(lambda module, state: calls.append((module, state)) or [])
    assert load_weights(sub, "module", {"w": torch.ones(1)}, "Block", helper="my_load") is None
    assert calls == [("module", {"w": torch.ones(1)})]


def test_load_weights_names_what_did_not_fit():
    problems = [f"it has no parameter p{i}" for i in range(6)]
    sub = _sub(lambda module, state: problems)
    with pytest.raises(Fail) as failed:
        load_weights(sub, None, {}, "EncoderLayer", "query, key", helper="my_load")
    message = str(failed.value)
    assert message == ("the grader could not load weights into your EncoderLayer by the documented attribute names "
                       "(query, key): " + "; ".join(problems[:4]))  # the first four problems only
    with pytest.raises(Fail) as failed:
        load_weights(sub, None, {}, "Block", helper="my_load")
    assert "by the documented attribute names: it has no parameter p0" in str(failed.value)  # no names: no ()


def test_load_weights_turns_an_error_in_the_worker_into_a_fail():
    def raising(module, state):
        raise StudentError("your Block", {"type": "RuntimeError", "message": "state_dict is broken"})
    with pytest.raises(Fail) as failed:
        load_weights(_sub(raising), None, {}, "Block", helper="my_load")
    assert str(failed.value) == "the grader could not read the parameters of your Block: state_dict is broken"
    assert failed.value.partial == 0.0


def test_load_weights_needs_the_helper_named():
    with pytest.raises(TypeError):
        load_weights(_sub(lambda module, state: []), None, {}, "Block")  # no helper named


def test_helper_code_calling_a_function_the_notebook_lacks_says_so_in_the_students_words():
    """A worker helper calls `submission.mlm_train_step` and the notebook has none: the error names the missing
    definition (or why its cell did not bind it), not only Python's AttributeError on a module the student never
    wrote."""
    from autograder.sandbox.client import StudentError

    missing = {"type": "AttributeError", "message": "module 'submission' has no attribute 'mlm_train_step'"}
    assert "your notebook does not define `mlm_train_step`" in StudentError("grader helpers.tb_mlm_steps",
                                                                           missing).describe()
    why = StudentError("helpers.f", missing, explain_name=lambda n: f"`{n}` is not available: cell 3 failed")
    assert "`mlm_train_step` is not available: cell 3 failed" in why.describe()
    other = {"type": "AttributeError", "message": "'Tensor' object has no attribute 'mlm_train_step'"}
    assert "does not define" not in StudentError("your f", other).describe()


def test_a_name_the_helper_code_misses_is_said_as_a_test_cell_says_it_without_internals():
    """The grader's helper code (no frame of the notebook's) meets a name the notebook does not define, its cell
    skipped (a syntax error) or missing: the message is the test cell's ("`MLP` is defined in cell 25, which the
    grader skipped: ..."; "your notebook does not define `MLP`"), without the helper's name or Python's
    AttributeError on a module the student never wrote. An error from the student's own code keeps its trace."""
    from autograder.sandbox.client import StudentError

    skipped = "`MLP` is defined in cell 25, which the grader skipped: line 5: SyntaxError: '(' was never closed"
    what = "the grader's helper mlp_with_weights (run on your code)"
    missing = {"type": "AttributeError", "message": "module 'submission' has no attribute 'MLP'"}
    assert StudentError(what, missing, explain_name=lambda n: skipped if n == "MLP" else None).describe() == skipped
    assert StudentError(what, missing, explain_name=lambda n: None).describe() == "your notebook does not define `MLP`"
    unbound = {"type": "NameError", "message": "name 'MLP' is not defined"}
    assert StudentError(what, unbound, explain_name=lambda n: skipped).describe() == skipped
    assert StudentError(what, unbound, explain_name=lambda n: None).describe().startswith(f"{what} raised NameError")
    deep = {**unbound, "traceback": ["cell 26, line 3, in train_step: m = MLP(2, 4)"]}
    text = StudentError(what, deep, explain_name=lambda n: skipped).describe()
    assert text.startswith(f"{what} raised NameError: name 'MLP' is not defined ({skipped})") and "cell 26" in text


def _reply_error(info: dict, explain_name=None):
    """What a check meets when the worker answers a request with `info` as its error."""
    from autograder.sandbox.client import WorkerProcess, WorkerSpec

    worker = WorkerProcess(WorkerSpec(units=[]))
    worker.explain_name = explain_name
    with pytest.raises(Exception) as raised:
        worker.decode_reply({"error": info}, {}, "the grader's helper tb_sdp_grads (run on your code)")
    return raised.value


def test_a_name_the_helper_code_misses_ends_the_check_as_a_missing_definition():
    """The grader's helper code calls a function the notebook lacks (deleted, renamed): the check meets
    MissingName, as `sub.NAME` would raise, not a StudentError it would quote ("failed (AttributeError: module
    'submission' has no attribute ...)"), so no check's own wording can show the worker's module."""
    from autograder.sandbox.client import MissingName

    missing = {"type": "AttributeError", "message": "module 'submission' has no attribute 'scaled_dot_product'"}
    error = _reply_error(missing)
    assert isinstance(error, MissingName) and not isinstance(error, StudentError)
    assert str(error) == "your notebook does not define `scaled_dot_product`"
    skipped = "`scaled_dot_product` is defined in cell 8, which the grader skipped: line 1: SyntaxError"
    assert str(_reply_error(missing, explain_name=lambda n: skipped)) == skipped
    other = _reply_error({"type": "AttributeError", "message": "'Tensor' object has no attribute 'foo'"})
    assert isinstance(other, StudentError) and other.message == "'Tensor' object has no attribute 'foo'"


def test_the_students_own_code_meeting_a_missing_name_is_quoted_without_the_workers_module():
    """The notebook's own frame is on the stack (its code looked the name up): still a StudentError, with its
    trace, and what checks quote of it (exc.message) names the missing definition, not the worker's module."""
    deep = {"type": "AttributeError", "message": "module 'submission' has no attribute 'helper'",
            "traceback": ["cell 5, line 3, in forward: return helper(x)"]}
    error = _reply_error(deep)
    assert isinstance(error, StudentError)
    assert error.message == "the notebook does not define `helper`"
    assert "module 'submission'" not in error.describe() and "cell 5, line 3" in error.describe()

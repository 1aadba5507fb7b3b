"""`autograder verify`: passes for a sound assignment, names each kind of problem otherwise."""
import shutil

import pytest

from autograder.verify import verify
from tests.conftest import EXAMPLE_SOURCE

LENIENT_CHECK = '''

@check("lenient: forgives a crash", points=1, part="2. Softmax")
def lenient(sub, ref):
    try:
        sub.softmax(torch.zeros(2, 2))
    except StudentError:
        return True  # gives points even when the student's code is a stub
'''

WRONG_EXPECTATION = '''

@check("wrong: expects the wrong value", points=1, part="1. Normalize")
def wrong(sub, ref):
    expect_close(sub.normalize(torch.tensor([[3.0, 4.0]])), torch.tensor([[0.8, 0.6]]), "normalize is wrong")
'''


@pytest.fixture
def source(tmp_path):
    src = tmp_path / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, src)
    return src


@pytest.mark.slow
def test_example_assignment_verifies(source):
    report = verify(source)
    assert report.ok, report.problems
    assert any("reference: 11/11" in line for line in report.lines)


@pytest.mark.slow
def test_verify_names_a_check_that_rewards_a_stub_and_one_the_reference_fails(source):
    test_file = source / "tests" / "test_hidden.py"
    test_file.write_text(test_file.read_text().replace(
        "from autograder.testing import Fail,", "from autograder.testing import StudentError, Fail,")
        + LENIENT_CHECK + WRONG_EXPECTATION)
    report = verify(source)
    assert not report.ok
    assert any("untouched student notebook gets 1 on lenient: forgives a crash" in p for p in report.problems)
    assert any("the reference gets 0/1 on wrong: expects the wrong value: normalize is wrong" in p
               for p in report.problems)

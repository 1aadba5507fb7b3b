"""Nothing the machine or the grader does is charged to a student.

- Big but legal notebooks: a statement holding more than a message header may (a 65 MB string constant: weights
  pasted into a cell) is graded like any other.
"""
from __future__ import annotations

from autograder.grading import GradeOptions, grade
from autograder.sandbox.protocol import MAX_HEADER_BYTES, pack_sources, unpack_sources


# -- big but legal notebooks --------------------------------------------------------------------------------

def test_the_load_request_carries_sources_as_bytes():
    units = [{"cell": 1, "line": 1, "source": "x = 'caf\u00e9 \ud800'", "names": ["x"], "kind": "constant"},
             {"cell": 2, "line": 3, "source": "", "names": [], "kind": "definition"}]
    header_units, tensors = pack_sources(units)
    assert all("source" not in u for u in header_units)
    assert unpack_sources(header_units, tensors) == units


def test_a_statement_larger_than_a_message_header_is_graded(submission, example_release, tmp_path):
    """Weights pasted into a cell as a string: 65 MB, over the 64 MB a message header may hold (the load request
    used to carry the sources in its header: the worker refused it, and the judge said 'internal grader error:
    BrokenPipeError', 0 points)."""
    size = MAX_HEADER_BYTES + 2**20
    path = submission("big.ipynb", append=[f'WEIGHTS = "{"A" * size}"\n'])
    (result,) = grade(example_release, [path], GradeOptions(tmp_path / "out", quiet=True))
    assert result.score == 11 and not result.error and not result.ungraded
    assert not any("WEIGHTS" in note for note in result.notes)

"""`autograder verify`: passes for a sound assignment, names each kind of problem otherwise."""
import json
import shutil
from pathlib import Path

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
    assert any("reference: 11/13 (2 points pending)" in line for line in report.lines)  # the written answer, by hand
    assert "corpus: 1 correct variants, 4 wrong submissions (4 confined to one part): 0 problem(s)" in report.lines


@pytest.mark.slow
def test_verify_names_a_check_that_rewards_a_stub_and_one_the_reference_fails(source):
    test_file = source / "tests" / "test_hidden.py"
    test_file.write_text(test_file.read_text().replace(
        "from autograder.testing import Fail,", "from autograder.testing import StudentError, Fail,")
        + LENIENT_CHECK + WRONG_EXPECTATION)
    report = verify(source)
    assert not report.ok
    assert any("untouched student notebook gets 1 on lenient: forgives a crash" in p for p in report.problems)
    assert any("wrong: expects the wrong value: the reference solution gets 0/1 on this check here: normalize is "
               "wrong" in p
               for p in report.problems)


@pytest.mark.slow
def test_verify_grades_the_corpus_and_names_each_item_that_misbehaves(source):
    """The example's corpus passes; a variant that is wrong, a bug that costs nothing, a bug whose message
    differs and a bug that costs points outside its part are each named."""
    (source / "corpus" / "extra.py").write_text('''
from autograder.corpus import Bug, Variant

VARIANTS = [Variant("not_really", replace={"return v / v.norm(dim=-1, keepdim=True)": "return v"})]
BUGS = [
    Bug("harmless", {"shifted = x - x.max(dim=dim, keepdim=True).values": "shifted = x - x.max()"},
        {"softmax: rows sum to 1": "anything"}),
    Bug("other_message", {"torch.relu(self.linear(x))": "self.linear(x)"},
        {"tiny layer: forward with given weights": "no such words"}),
    Bug("leaks_into_softmax", {"return v / v.norm(dim=-1, keepdim=True)": "return v / 0"},
        {"normalize_test": ""}, confined_to="2."),
]
''')
    report = verify(source)
    assert any(line.startswith("corpus: 2 correct variants, 7 wrong submissions (5 confined to one part)")
               for line in report.lines), report.lines
    problems = "\n".join(report.problems)
    assert "variant not_really" in problems and "loses points on normalize_test" in problems
    assert "bug harmless" in problems and "does not lose points on 'softmax: rows sum to 1'" in problems
    assert "bug other_message: the message of 'tiny layer: forward with given weights' lacks 'no such words'" in problems
    assert "bug leaks_into_softmax" in problems and "loses points outside part '2.': normalize_test" in problems
    assert "softmax_logsumexp" not in problems and "normalize_left_as_stub" not in problems
    assert len(report.problems) == 4, report.problems


def test_the_cells_the_build_adds_are_not_leaks(tmp_path):
    """[student] checks = true: the setup cell's own `try:` lines are not a leak of a hidden test's `try:`."""
    import shutil

    from autograder.verify import verify

    source = tmp_path / "course" / "solutions" / "vectors"
    shutil.copytree(Path(__file__).parent / "example_course" / "solutions" / "vectors", source)
    toml = source / "assignment.toml"
    toml.write_text(toml.read_text().replace("files = []\n", "files = []\n\n[student]\nchecks = true\n"))
    hidden = source / "tests" / "test_hidden.py"
    hidden.write_text(hidden.read_text() + "\n\ndef _guarded(fn):\n    try:\n        return fn()\n"
                      "    except Exception:\n        return None\n")
    report = verify(source, with_corpus=False)
    assert not [p for p in report.problems if "contains" in p], report.problems


@pytest.mark.parametrize("make, says", [
    (lambda: __import__("autograder.corpus").corpus.Variant("v", {"return x": "return y"}), "replace={old: new}"),
    (lambda: __import__("autograder.corpus").corpus.Bug("b", {"a": "b"}, ["x"]), "expect maps a check name"),
    (lambda: __import__("autograder.corpus").corpus.Variant(3), "the item's name"),
])
def test_a_corpus_item_with_the_wrong_arguments_says_how_to_write_it(make, says):
    from autograder.corpus import CorpusError

    with pytest.raises(CorpusError, match=says.replace("{", r"\{").replace("}", r"\}")):
        make()


@pytest.mark.slow
def test_verify_names_the_cell_and_line_of_a_hidden_assertion_the_reference_fails(source):
    """A hidden assertion tells the result only that a hidden test failed; verify names the cell, the line
    and its message for the instructor."""
    import nbformat

    nb = nbformat.read(source / "vectors.ipynb", as_version=4)
    index = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "normalize_test")
    nb.cells[index].source = nb.cells[index].source.replace(
        "reference.normalize(x), atol=1e-6), \"normalize is wrong on random rows\"", "2 * x)")
    nbformat.write(nb, source / "vectors.ipynb")
    report = verify(source, with_corpus=False)
    problem = next(p for p in report.problems if p.startswith("normalize_test:"))
    assert "a hidden test failed (failing assertion: " in problem
    assert problem.endswith(f"(failing assertion: cell {index + 1}, line 6: assert torch.allclose(normalize(x), 2 * x))")


def test_the_mutation_report_lists_parts_as_the_assignment_numbers_them():
    from autograder.verify import parts_in_order

    # a tests/ file's checks come after the notebook's test cells in the release: part 3 is met last
    assert parts_in_order(["1. A", "2. B", "4. D", "3. C", "10. X", "2. B"]) == ["1. A", "2. B", "3. C", "4. D", "10. X"]
    assert parts_in_order(["Intro", "1. A"]) == ["Intro", "1. A"]  # not all numbered: as met


def test_the_deferred_mutation_analysis_says_seconds_under_a_minute():
    from types import SimpleNamespace

    from autograder.verify import _deferred_mutants, about

    assert [about(s) for s in (0.2, 26.3, 59.4, 60, 150)] == ["1 s", "26 s", "59 s", "1 min", "2 min"]
    results = {"a": SimpleNamespace(execution_time=0.7)}
    line = _deferred_mutants(75, results, 2, Path("solutions/w3"))
    assert "about 26 s at 0.7 s per notebook" in line, line


@pytest.mark.slow
def test_a_library_missing_where_grading_runs_is_the_instructors_problem_and_not_the_students(source, tmp_path):
    """The answer key imports a module the grading environment lacks: build and verify name the statement (cell and
    line of the source notebook) as a problem for the instructor; a student's feedback says the grading machine
    cannot import it, not that their notebook raised, and the points stay as the checks decide."""
    import nbformat

    from autograder.grading import GradeOptions, grade
    from autograder.release import load_release

    nb = nbformat.read(source / "vectors.ipynb", as_version=4)
    cell = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells[cell].source = "import ag_not_installed_here\n" + nb.cells[cell].source
    nbformat.write(nb, source / "vectors.ipynb")
    report = verify(source, with_corpus=False, mutants=False)
    expected = (f"vectors.ipynb: cell {cell + 1}, line 1 (ag_not_installed_here): the answer key's statement fails when "
                "the grader loads it here: raised ModuleNotFoundError: No module named 'ag_not_installed_here': "
                "ag_not_installed_here is not installed where grading runs: install it in the grading image, or keep "
                "it out of graded code")
    assert any(p.startswith(expected) for p in report.problems), report.problems
    release = load_release(source.parent.parent / "release" / "vectors")
    [result] = grade(release, [release.dir / "answer_key.ipynb"], GradeOptions(tmp_path / "out", quiet=True))
    assert result.score == report.results["answer_key"].score == release.max_score - 2  # the written answer pends
    assert [n for n in result.notes if "ag_not_installed_here" in n] == [
        f"cell {cell + 1}, line 1 (ag_not_installed_here): the grading machine cannot import ag_not_installed_here "
        "(the reference solution meets the same error): not a problem of your notebook"], result.notes


def _with_cell_text(notebook: Path, grade_id: str, old: str, new: str) -> None:
    nb = json.loads(notebook.read_text())
    cell = next(c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)
    text = "".join(cell["source"])
    assert old in text
    cell["source"] = text.replace(old, new).splitlines(keepends=True)
    notebook.write_text(json.dumps(nb, indent=1))


def test_verify_lists_each_solution_definition_no_check_reaches(tmp_path):
    """An `encode` no check calls is listed with its cell; a helper class only a checked function uses is reached
    through it, and so is a class a test file looks up by its name in a string."""
    source = tmp_path / "course" / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    notebook = source / "vectors.ipynb"
    _with_cell_text(notebook, "normalize", "    return v / v.norm(dim=-1, keepdim=True)\n",
                    "    return v / _Norm.of(v)\n")
    _with_cell_text(notebook, "normalize", "def normalize(", "class _Norm:\n    @staticmethod\n    def of(v):\n"
                    "        ### BEGIN SOLUTION\n        return v.norm(dim=-1, keepdim=True)\n        ### END SOLUTION\n\n\n"
                    "def normalize(")
    _with_cell_text(notebook, "softmax", "def softmax(", "def encode(text):\n    \"\"\"The code points of text.\"\"\"\n"
                    "    ### BEGIN SOLUTION\n    return [ord(c) for c in text]\n    ### END SOLUTION\n\n\n"
                    "def decode(codes):\n    ### BEGIN SOLUTION\n    return \"\".join(map(chr, codes))\n"
                    "    ### END SOLUTION\n\n\ndef softmax(")
    hidden = source / "tests" / "test_hidden.py"
    hidden.write_text(hidden.read_text() + '\n\ndef looked_up(sub):\n    return getattr(sub, "decode")\n')
    report = verify(source, with_corpus=False)
    listed = [line for line in report.lines if line.startswith("not checked by any test: ")]
    assert len(listed) == 1 and listed[0].startswith("not checked by any test: encode (cell 7): "), report.lines
    assert "_Norm" not in listed[0] and "decode" not in listed[0] and "softmax" not in listed[0]
    assert report.ok, report.problems  # listed, not a problem


def test_verify_names_each_weight_load_by_attribute_name_in_the_hidden_tests(tmp_path):
    """`s.load_state_dict(r.state_dict())` fails a correct nn.Sequential: verify says where it is written."""
    from autograder.verify import loads_by_name

    (tmp_path / "test_hidden.py").write_text(
        "from autograder.testing import check\n\n@check('same weights', points=1)\ndef c(sub, ref):\n"
        "    r = ref.Net(2)\n    s = sub.Net(2)\n    s.load_state_dict(r.state_dict())\n")
    (tmp_path / "_common.py").write_text("x = 1\n")
    lines = loads_by_name(tmp_path)
    assert len(lines) == 1 and lines[0].startswith("tests/test_hidden.py, line 7: load_state_dict copies weights by")
    root = Path(__file__).resolve().parent.parent
    assert all(loads_by_name(root / "solutions" / name / "tests") == [] for name in ("transformers_bert", "bert_inside"))

"""`autograder import otter`: otter-grader's tutorial (demo.ipynb) imports, verifies and grades its six example
submissions as its author meant, question by question; otter's solution, prompt, test and points rules."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from autograder.build import build
from autograder.importers.otter import Case, Question, case_points, import_assignment, read_case, solution_code
from autograder.notebook.markers import MarkerError

DEMO = Path(__file__).parent / "otter_demo"
SUBMISSIONS = sorted((DEMO / "submissions").glob("demo-*.ipynb"))
# points per autograded question, as the tutorial's author meant them: passesAll everything; failsN loses points
# in question N only, failsNHidden only on the hidden tests of question N
EXPECTED = {
    "passesAll": {"q1": 1, "q2": 1, "q3": 1},
    "fails1": {"q1": 2 / 3, "q2": 1, "q3": 1},  # square(2.5) wrong: the hidden test fails
    "fails2": {"q1": 1, "q2": 0, "q3": 1},
    "fails2Hidden": {"q1": 1, "q2": 0.5, "q3": 1},
    # groupby("scoops"): under pandas 3 `.mean()` of the string column raises, so price_by_flavor is not defined
    # and the 6 tests reading it fail (under pandas 1 the type test passed: otter gave 3/8)
    "fails3": {"q1": 1, "q2": 1, "q3": 0.25},
    "fails3Hidden": {"q1": 1, "q2": 1, "q3": 0.5},
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    solutions = tmp_path_factory.mktemp("course") / "solutions"
    (report,) = import_assignment(DEMO / "source" / "demo.ipynb", "demo", solutions)
    return report


def test_the_demo_imports_with_a_report(demo):
    assert demo.not_converted == []
    assert ("q1: 3 test case(s) (1 point) -> 2 public test cell(s) in the notebook, 1 check(s) compared with the "
            "reference") in demo.converted
    assert "cell 10: public test 'q1 test 1' (0.333333 points) -> public test cell" in demo.converted
    assert "q4: manual question (1 point) -> manual check 'q4' (pending)" in demo.converted
    assert any("np.True_" in note for note in demo.notes)


def test_the_student_notebook_has_stubs_and_no_solution_prompt_or_test(demo):
    paths = build(demo.target)
    text = "\n".join(c.source for c in nbformat.read(paths.assignment / "demo.ipynb", as_version=4).cells)
    for secret in ("x**2", "yield", "groupby", "plot.bar", "mint is the highest", "square(2.5)", "BEGIN", "..."):
        assert secret not in text, secret
    assert text.count("raise NotImplementedError()") == 4 and "YOUR ANSWER HERE" in text


@pytest.mark.slow
def test_the_demo_verifies(demo):
    from autograder.verify import verify

    report = verify(demo.target)
    assert report.ok, report.problems
    assert report.lines[0] == ("manual: 2 point(s) graded by hand, pending in every total: check q4 (manual "
                               "question, 1); check q5 (manual question, 1)")


@pytest.mark.slow
def test_the_six_submissions_score_as_the_author_meant_question_by_question(demo, tmp_path):
    from autograder.grading import GradeOptions, grade
    from autograder.release import load_release

    paths = build(demo.target)
    results = grade(load_release(paths.release), SUBMISSIONS, GradeOptions(tmp_path, quiet=True, summary=False))
    for path, result in zip(SUBMISSIONS, results):
        by_question = {}
        for c in result.checks:
            if c.status != "pending":
                assert c.status != "ungraded", (path.stem, c.name, c.message)
                by_question[c.part] = by_question.get(c.part, 0) + c.score
        expected = EXPECTED[path.stem.removeprefix("demo-")]
        assert by_question == pytest.approx(expected, abs=1e-5), path.stem
        assert [c.name for c in result.checks if c.status == "pending"] == ["q4", "q5"]


# -- otter's rules ----------------------------------------------------------------------------------------

def test_solution_lines_and_blocks_become_markers_and_prompts_are_dropped():
    source = ('# BEGIN SOLUTION NO PROMPT\ndata = load()\n# END SOLUTION\n""" # BEGIN PROMPT\ndata = ...\n'
              '""" # END PROMPT\ndef f(x):\n    return x ** 2 # SOLUTION\nnp.random.seed(0) # SEED\ny = 2 # SOLUTION NO PROMPT')
    assert solution_code(source) == (
        "### BEGIN SOLUTION\ndata = load()\n### END SOLUTION\ndef f(x):\n    ### BEGIN SOLUTION\n"
        "    return x ** 2\n    ### END SOLUTION\nnp.random.seed(0) # SEED\n### BEGIN SOLUTION\ny = 2\n### END SOLUTION")


def test_test_cells_hidden_by_comment_or_config():
    assert read_case(nbformat.v4.new_code_cell("# HIDDEN\nsquare(2) == 4"), "c") == Case("square(2) == 4", True, None)
    config = '""" # BEGIN TEST CONFIG\npoints: 2\nhidden: true\n""" # END TEST CONFIG\nassert f(1) == 1'
    assert read_case(nbformat.v4.new_code_cell(config), "c") == Case("assert f(1) == 1", True, 2)


@pytest.mark.parametrize("points, cases, expected", [
    (None, [None, None, None], [1 / 3] * 3),  # a question is worth 1 by default, shared
    (4, [None, 1, None], [1.5, 1, 1.5]),  # what the cases' own points leave, shared
    (None, [2, None], [2, 0]),  # points given and no total: the others are worth 0
])
def test_points_are_shared_as_otter_shares_them(points, cases, expected):
    question = Question("q", points, cases=[Case("x", False, p) for p in cases])
    assert case_points(question) == pytest.approx(expected)


def test_what_is_not_converted_is_reported_and_refused_by_the_build(tmp_path):
    nb = nbformat.read(DEMO / "source" / "demo.ipynb", as_version=4)
    ignored = nbformat.v4.new_code_cell("# BEGIN IGNORE\nprint('only in the instructor notebook')\n# END IGNORE")
    del ignored["id"]  # the demo is nbformat 4.4: cells have no ids
    nb.cells.insert(2, ignored)
    source = tmp_path / "src" / "demo.ipynb"
    source.parent.mkdir()
    nbformat.write(nb, source)
    (report,) = import_assignment(source, "demo", tmp_path / "solutions")
    assert report.not_converted[0].startswith("cell 3: '# BEGIN IGNORE': a marker of otter-grader's assignment format")
    with pytest.raises(MarkerError, match="line 1: '# BEGIN IGNORE' is a marker of otter-grader's assignment format"):
        build(report.target)


def _otter_notebook(path: Path, *cells) -> Path:
    raw, code = nbformat.v4.new_raw_cell, nbformat.v4.new_code_cell
    nb = nbformat.v4.new_notebook(cells=[code("import numpy as np\nnp.random.seed(42) # SEED"),
                                         raw("# BEGIN QUESTION\nname: q1\npoints: 1"), raw("# BEGIN SOLUTION"),
                                         code("def draw():\n    return float(np.random.rand()) # SOLUTION"),
                                         raw("# END SOLUTION"), raw("# BEGIN TESTS"), *cells, raw("# END TESTS"),
                                         raw("# END QUESTION")])
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
def test_seeding_lines_run_before_each_test_in_both_programs(tmp_path):
    """otter's `np.random.seed(42) # SEED`: the notebook's draws are the seeded ones when the tests run."""
    from autograder.grading import GradeOptions, grade
    from autograder.release import load_release

    seeded = nbformat.v4.new_code_cell("assert np.isclose(draw(), 0.3745401188473625), 'draws as seeded with 42'")
    source = _otter_notebook(tmp_path / "src" / "seeded.ipynb", seeded)
    (report,) = import_assignment(source, "seeded", tmp_path / "solutions")
    assert "cell 1: otter's seeding line(s) np.random.seed(42) -> run before each test, in the submission and in " \
           "the reference" in report.converted
    paths = build(report.target)
    student = (paths.assignment / "seeded.ipynb").read_text()
    assert "np.random.seed(42)" in student and "# SEED" not in student
    (result,) = grade(load_release(paths.release), [paths.release / "answer_key.ipynb"],
                      GradeOptions(tmp_path / "out", quiet=True, summary=False))
    assert [(c.name, c.status) for c in result.checks] == [("q1 test 1", "passed")]


# -- what students had in otter they keep: public tests, files; otter's PDF export markers -------------------

def test_public_cases_are_public_test_cells_students_run_and_hidden_ones_stay_hidden(demo):
    from autograder.check import public_specs

    paths = build(demo.target)
    student = nbformat.read(paths.assignment / "demo.ipynb", as_version=4)
    specs = public_specs(student)
    assert [(s.name, s.part) for s in specs] == [("q1 test 1", "q1"), ("q1 test 2", "q1"), ("q2 test 1", "q2")] + [
        (f"q3 test {n}", "q3") for n in range(1, 5)]
    assert sum(s.points for s in specs if s.part == "q1") == pytest.approx(2 / 3)
    one = next(s for s in specs if s.name == "q1 test 1")
    assert one.source == ('_value = square(1) == 1\nassert _value == True, f"this test gives {_value!r} where a '
                          'correct notebook gives True"')
    tests = (demo.target / "tests" / "otter_tests.py").read_text()
    assert "'q1 hidden test 3'" in tests and "'q1 test 1'" not in tests  # one check per case, wherever it lives


def test_seeded_public_cases_are_named_and_still_graded(tmp_path):
    case = nbformat.v4.new_code_cell("round(draw(), 4)")
    source = _otter_notebook(tmp_path / "src" / "v.ipynb", case, nbformat.v4.new_code_cell("assert draw() < 1"))
    (report,) = import_assignment(source, "v", tmp_path / "solutions")
    assert report.not_converted == [
        "cell 7: public test 'q1 test 1': the grader runs the notebook's seeding lines before it, which a test cell "
        "cannot do; students see its code, but `autograder check` does not run it (it is graded as a check compared "
        "with the reference)",
        "cell 8: public test 'q1 test 2': the grader runs the notebook's seeding lines before it, which a test cell "
        "cannot do; students see its code, but `autograder check` does not run it (it is graded as a check compared "
        "with the reference)"]
    tests = (report.target / "tests" / "otter_tests.py").read_text()
    assert "reference_cell('q1 test 1', 0.5," in tests and "reference_cell('q1 test 2', 0.5," in tests
    cells = nbformat.read(report.target / "v.ipynb", as_version=4).cells
    assert [c.metadata.get("tags") for c in cells if c.source == "round(draw(), 4)"] == [["skip-grading"]]


def test_a_public_value_without_a_recorded_output_is_named(tmp_path):
    from autograder.importers.otter import public_test_source

    assert public_test_source(Case("x == 1", False, None))[0] is None
    assert "recorded none" in public_test_source(Case("x == 1", False, None, output="array([1])"))[1]
    assert public_test_source(Case("y = f()\nassert y", False, None)) == ("y = f()\nassert y", "")
    assert public_test_source(Case("y = f()\ny.tolist()", False, None, output="[1.0,\n 2.0]"))[0] == (
        'y = f()\n_value = y.tolist()\nassert _value == [1.0, 2.0], f"this test gives {_value!r} where a correct '
        'notebook gives [1.0, 2.0]"')


def test_pdf_export_markers_are_removed_and_the_manual_question_graded_by_hand(tmp_path):
    nb = nbformat.read(DEMO / "source" / "demo.ipynb", as_version=4)
    q5 = next(i for i, c in enumerate(nb.cells) if c.source.startswith("**Question 5:**"))
    nb.cells[q5].source = "<!-- BEGIN QUESTION -->\n\n" + nb.cells[q5].source
    nb.cells.insert(q5 + 4, nbformat.v4.new_markdown_cell("<!-- END QUESTION -->"))
    for cell in nb.cells:
        cell.pop("id", None)
    source = tmp_path / "src" / "demo.ipynb"
    source.parent.mkdir()
    nbformat.write(nb, source)
    (report,) = import_assignment(source, "demo", tmp_path / "solutions")
    assert report.not_converted == []
    assert f"cell {q5 + 1}: otter's PDF export marker of q5 removed (graded by hand: a manual check)" in report.converted
    assert "q5: manual question (1 point) -> manual check 'q5' (pending)" in report.converted
    text = (report.target / "demo.ipynb").read_text()
    assert "QUESTION -->" not in text and "**Question 5:**" in text
    build(report.target)


def test_a_pdf_export_marker_outside_a_configured_question_is_named(tmp_path):
    source = _otter_notebook(tmp_path / "src" / "m.ipynb", nbformat.v4.new_code_cell("assert draw() < 1"))
    nb = nbformat.read(source, as_version=4)
    nb.cells += [nbformat.v4.new_markdown_cell("<!-- BEGIN QUESTION -->\nWhy?"),
                 nbformat.v4.new_markdown_cell("_Your answer._\n<!-- END QUESTION -->")]
    nbformat.write(nb, source)
    (report,) = import_assignment(source, "m", tmp_path / "solutions")
    assert any(line.startswith("cell 10: '<!-- BEGIN QUESTION -->': a question otter exports for grading by hand, "
                               "outside any `# BEGIN QUESTION` configuration") for line in report.not_converted)
    build(report.target)  # the markers are gone


def test_files_shipped_are_those_the_notebook_names_or_the_config_lists(tmp_path):
    source = _otter_notebook(tmp_path / "src" / "f.ipynb", nbformat.v4.new_code_cell("assert draw() < 1"))
    nb = nbformat.read(source, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_raw_cell("# ASSIGNMENT CONFIG\nfiles:\n    - extra"))
    nbformat.write(nb, source)
    for name in ("extra/a.txt", "gen.py"):
        (source.parent / name).parent.mkdir(parents=True, exist_ok=True)
        (source.parent / name).write_text("x")
    (report,) = import_assignment(source, "f", tmp_path / "solutions")
    assert "1 file(s) shipped with the notebook: extra/a.txt" in report.converted
    assert any(n.startswith("not shipped, as the notebook does not name them: gen.py.") for n in report.notes)

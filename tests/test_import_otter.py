"""`autograder import otter`: otter-grader's tutorial (demo.ipynb) imports, verifies and grades its six example
submissions as its author meant, question by question; otter's solution, prompt, test and points rules."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from autograder.build import build
from autograder.importers.otter import import_assignment, read_case, solution_code
from autograder.importers.otter_checks import Case, Question, case_points
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
    assert ("q4: manual question without points -> manual check 'q4' worth 0 (pending), as otter counts it; give it "
            "points in tests/otter_tests.py") in demo.converted
    assert any("np.True_" in note for note in demo.notes)


def test_the_student_notebook_has_stubs_and_no_solution_prompt_or_test(demo):
    paths = build(demo.target)
    text = "\n".join(c.source for c in nbformat.read(paths.assignment / "demo.ipynb", as_version=4).cells)
    for secret in ("x**2", "yield", "groupby", "plot.bar", "mint is the highest", "square(2.5)", "BEGIN", "PROMPT"):
        assert secret not in text, secret
    # otter's prompts at the top level (its BEGIN PROMPT block; `...` for a solution line), the stub in functions
    assert "data = ...\nprice_by_flavor = ...\nprice_by_flavor" in text and "\n...\n" in f"\n{text}\n"
    assert text.count("raise NotImplementedError()") == 2 and "YOUR ANSWER HERE" in text


@pytest.mark.slow
def test_the_demo_verifies(demo):
    from autograder.verify import verify

    report = verify(demo.target)
    assert report.ok, report.problems
    assert report.lines[0] == ("manual: 0 point(s) graded by hand, pending in every total: check q4 (manual "
                               "question, 0); check q5 (manual question, 0)")


@pytest.mark.slow
def test_the_six_submissions_score_as_the_author_meant_question_by_question(demo, tmp_path):
    from autograder.grading import GradeOptions, grade
    from autograder.release import load_release

    paths = build(demo.target)
    results = grade(load_release(paths.release), SUBMISSIONS, GradeOptions(tmp_path, quiet=True, summary=False))
    for path, result in zip(SUBMISSIONS, results):
        expected = EXPECTED[path.stem.removeprefix("demo-")]
        assert _by_question(result) == pytest.approx(expected, abs=1e-5), path.stem
        assert [c.name for c in result.checks if c.status == "pending"] == ["q4", "q5"]


def _by_question(result) -> dict[str, float]:
    by_question: dict[str, float] = {}
    for c in result.checks:
        if c.status != "pending":
            assert c.status != "ungraded", (result.submission, c.name, c.message)
            by_question[c.part] = by_question.get(c.part, 0) + c.score
    return by_question


@pytest.mark.slow
def test_a_folder_of_otter_zips_graded_into_a_folder_elsewhere_scores_as_otter_scores(demo, tmp_path, capsys):
    """What otter's grader.export() gives each student (a zip of the notebook, its PDF and otter's log), a folder of
    them, --out outside it (the normal layout): each zip's notebook is extracted under --out, and checked for links
    against that folder, not the one the zips were in (every student was 0 FINAL: "reached through a link to a file
    outside the submissions folder")."""
    import json
    import zipfile

    from autograder.entrypoints import command_line
    from autograder.sandbox.forkserver import shutdown_fork_server

    paths = build(demo.target)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    for path in SUBMISSIONS:
        student = path.stem.removeprefix("demo-")
        with zipfile.ZipFile(downloads / f"{student}_demo_2026_12_07T12_00_00_000000.zip", "w") as z:
            z.write(path, "demo.ipynb")
            z.writestr("demo.pdf", b"%PDF-1.4")
            z.writestr(".OTTER_LOG", b"log")
    out = tmp_path / "elsewhere" / "out"
    try:
        assert command_line(["grade", str(paths.release), str(downloads), "--out", str(out), "--quiet"]) == 0
    finally:
        shutdown_fork_server()  # the one this process started for --jobs 1
    capsys.readouterr()
    got = {}
    for folder in sorted(p for p in out.iterdir() if (p / "grading.json").is_file()):
        from autograder.reports.results import SubmissionResult

        result = SubmissionResult.from_dict(json.loads((folder / "grading.json").read_text()))
        assert not result.error, result.error
        got[folder.name.removesuffix("_demo_2026_12_07T12_00_00_000000")] = _by_question(result)
    assert set(got) == set(EXPECTED)
    for student, scores in got.items():
        assert scores == pytest.approx(EXPECTED[student], abs=1e-5), student


# -- otter's rules ----------------------------------------------------------------------------------------

def test_solution_lines_and_blocks_become_markers_and_prompts_are_dropped():
    source = ('# BEGIN SOLUTION NO PROMPT\ndata = load()\n# END SOLUTION\n""" # BEGIN PROMPT\ndata = ...\n'
              '""" # END PROMPT\ndef f(x):\n    return x ** 2 # SOLUTION\nnp.random.seed(0) # SEED\ny = 2 # SOLUTION NO PROMPT')
    assert solution_code(source) == (
        "### BEGIN SOLUTION\ndata = load()\n### PROMPT\n### END SOLUTION\n### BEGIN SOLUTION\n### PROMPT data = ...\n"
        "### END SOLUTION\ndef f(x):\n    ### BEGIN SOLUTION\n    return x ** 2\n    ### END SOLUTION\n"
        "np.random.seed(0) # SEED\n### BEGIN SOLUTION\n### PROMPT\ny = 2\n### END SOLUTION")


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
    plugin = nbformat.v4.new_code_cell('""" # BEGIN PLUGIN\nplugin: otter.plugins.builtin.GoogleSheetsGradeOverride\n'
                                       '""" # END PLUGIN')
    del plugin["id"]  # the demo is nbformat 4.4: cells have no ids
    nb.cells.insert(2, plugin)
    source = tmp_path / "src" / "demo.ipynb"
    source.parent.mkdir()
    nbformat.write(nb, source)
    (report,) = import_assignment(source, "demo", tmp_path / "solutions")
    assert report.not_converted[0].startswith('cell 3: \'""" # BEGIN PLUGIN\': a marker of otter-grader\'s assignment '
                                              "format this import does not convert")
    with pytest.raises(MarkerError, match="line 1: .* is a marker of otter-grader's assignment format"):
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
    assert "cell 1: otter's seeding line(s) np.random.seed(42) -> kept in both notebooks (where they stand), run " \
           "there by the grader in the submission and in the reference" in report.converted
    paths = build(report.target)
    student = (paths.assignment / "seeded.ipynb").read_text()
    assert "_seed = np.random.seed(42)" in student and "# SEED" not in student
    (result,) = grade(load_release(paths.release), [paths.release / "answer_key.ipynb"],
                      GradeOptions(tmp_path / "out", quiet=True, summary=False))
    assert [(c.name, c.status) for c in result.checks] == [("q1 test 1", "passed")]


# -- what students had in otter they keep: public tests, files; otter's PDF export markers -------------------

def test_public_cases_are_public_test_cells_students_run_and_hidden_ones_stay_hidden(demo):
    from autograder.selfcheck import public_specs

    paths = build(demo.target)
    student = nbformat.read(paths.assignment / "demo.ipynb", as_version=4)
    specs = public_specs(student)
    assert [(s.name, s.part) for s in specs] == [("q1 test 1", "q1"), ("q1 test 2", "q1"), ("q2 test 1", "q2")] + [
        (f"q3 test {n}", "q3") for n in range(1, 5)]
    assert sum(s.points for s in specs if s.part == "q1") == pytest.approx(2 / 3)
    one = next(s for s in specs if s.name == "q1 test 1")
    assert one.source == ('_value = square(1) == 1\nassert type(_value).__name__ in (\'bool\', \'bool_\') and _value == '
                          'True, f"this test gives {_value!r} where a correct notebook gives True"')
    tests = (demo.target / "tests" / "otter_tests.py").read_text()
    assert "'q1 hidden test 3'" in tests and "'q1 test 1'" not in tests  # one check per case, wherever it lives


def test_public_cases_that_draw_random_numbers_are_named_and_still_graded_the_others_stay_public(tmp_path):
    """Only a public case whose value depends on the generator the seeding lines seed (a notebook function that
    draws, called; `np.random` itself) needs the seeding the grader runs first: the others stay public test cells."""
    cases = [code("round(draw(), 4)", "0.3745"), code("assert np.random.rand() < 1"), code("assert callable(draw)")]
    source = _otter_notebook(tmp_path / "src" / "v.ipynb", *cases)
    (report,) = import_assignment(source, "v", tmp_path / "solutions")
    rest = ("), and the grader seeds the question's cases before it (as otter seeds the cell that checks them), "
            "which a test cell cannot do; students see its code, but `autograder check` does not run it (it is graded as a check "
            "compared with the reference)")
    assert report.not_converted == [
        f"cell 7: public test 'q1 test 1': it draws random numbers (`draw()`{rest}",
        f"cell 8: public test 'q1 test 2': it draws random numbers (`np.random.rand`{rest}"]
    assert "cell 9: public test 'q1 test 3' (0.333333 points) -> public test cell" in report.converted
    tests = (report.target / "tests" / "otter_tests.py").read_text()
    assert "reference_cell('q1 test 1', 0.3333333333333333," in tests and "'q1 test 3'" not in tests
    cells = nbformat.read(report.target / "v.ipynb", as_version=4).cells
    assert [c.metadata.get("tags") for c in cells if c.source == "round(draw(), 4)"] == [["skip-grading"]]


def test_a_public_value_without_a_recorded_output_is_named(tmp_path):
    from autograder.importers.otter_checks import public_test_source

    assert public_test_source(Case("x == 1", False, None))[0] is None
    assert "recorded none (the case was not run)" in public_test_source(Case("x == 1", False, None))[1]
    assert "recorded (`array([1])`) is not one a test cell can write" in public_test_source(
        Case("x == 1", False, None, output="array([1])"))[1]
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
    assert "q5: manual question without points -> manual check 'q5' worth 0 (pending), as otter counts it; give it " \
           "points in tests/otter_tests.py" in report.converted
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
    assert any(n.startswith("the other files of ") and "gen.py" not in n for n in report.notes)


# -- otter's points, ignored lines, seeding, all_or_nothing, defaults and older format ---------------------------

def raw(source: str):
    return nbformat.v4.new_raw_cell(source)


def md(source: str):
    return nbformat.v4.new_markdown_cell(source)


def code(source: str, value: str | None = None):
    """A code cell; `value`: the text/plain the source notebook recorded for it (what otter compares with)."""
    cell = nbformat.v4.new_code_cell(source)
    if value is not None:
        cell.execution_count = 1
        cell.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": value}, execution_count=1)]
    return cell


def question(name: str, config: str, solution: list, *tests) -> list:
    """An otter v1 question: its configuration, solution cells and test cells between otter's raw block cells."""
    return [raw(f"# BEGIN QUESTION\nname: {name}\n{config}".rstrip()), raw("# BEGIN SOLUTION"), *solution,
            raw("# END SOLUTION"), *([raw("# BEGIN TESTS"), *tests, raw("# END TESTS")] if tests else []),
            raw("# END QUESTION")]


def notebook(path: Path, *cells) -> Path:
    nb = nbformat.v4.new_notebook(cells=list(cells))
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("points, cases, expected", [
    ([10, 2], [None, None], [10, 2]),  # a list: each case's points, in order
    ([None, 3], [None, 1], [0, 3]),  # the list replaces the cases' own; an unspecified one is then worth 0
    ({"each": 0.75}, [None] * 5, [0.75] * 5),  # {each: x}: x per case
    ({"each": 2}, [1, None], [1, 3]),  # ... a total of 2 per case, shared as a total is
])
def test_a_list_of_points_and_each_are_read_as_otter_reads_them(points, cases, expected):
    q = Question("q", points, cases=[Case("x", False, p) for p in cases])
    assert case_points(q) == pytest.approx(expected)


@pytest.mark.parametrize("points, cases, message", [
    ([1], [None, None], "`points` lists 1 value(s) for 2 test case(s) (otter refuses this too)"),
    ({"eahc": 2}, [None], "`points: {'eahc': 2}` is not `{each: POINTS}`"),
    ("two", [None], "points 'two' is not a number >= 0"),
    ([1, "x"], [None, None], "points 'x' is not a number >= 0"),
    (1, [2, None], "its test cases' points (2) exceed the question's (1) (otter refuses this too)"),
])
def test_points_otter_refuses_or_would_misread_are_one_error_naming_the_question(points, cases, message):
    from autograder.importers.common import ImportFailed

    q = Question("q8", points, cases=[Case("x", False, p) for p in cases], loc="cell 62")
    with pytest.raises(ImportFailed, match=re.escape(f"cell 62: question 'q8': {message}")):
        case_points(q)


def test_the_command_line_names_a_bad_points_value_in_one_line_and_writes_nothing(tmp_path, capsys):
    from autograder.entrypoints import command_line as main

    source = notebook(tmp_path / "src" / "p.ipynb", *question("q1", "points:\n    each: many", [code("x = 2 # SOLUTION")],
                                                              code("assert x == 2")))
    assert main(["import", "otter", str(source), "--name", "p", "--solutions", str(tmp_path / "solutions")]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {source}: cell 1: question 'q1': `points: {{'each': 'many'}}` is not `{{each: POINTS}}` "
                   "(a number >= 0 per test case)\n")
    assert not (tmp_path / "solutions").exists()


def test_ignored_lines_blocks_and_cells_are_removed_and_written_answers_keep_their_label(tmp_path):
    """otter's `# IGNORE` lines and blocks go from both notebooks (and from tests: an exception-based test whose call
    is ignored gets the call otter makes); a `# ignore` cell goes; `**SOLUTION:**` answers are written answers."""
    square = ("def square(x):\n    y = x * x # SOLUTION\n    # BEGIN IGNORE\n    z = np.cos(y)\n    # END IGNORE\n"
              "    print(y)  # IGNORE\n    return y # SOLUTION")
    source = notebook(
        tmp_path / "src" / "ig.ipynb", code("import numpy as np"), code("# ignore\nprint('only for the instructor')"),
        *question("q1", "points: 2", [code(square)],
                  code("def test_square(square):\n    assert square(3) == 9\n\ntest_square(square)  # IGNORE"),
                  code('""" # BEGIN TEST CONFIG\nhidden: true\n""" # END TEST CONFIG\ndef test_more(square):\n'
                       '    assert square(-2) == 4\n\ntest_gcd(gcd)  # IGNORE')),
        *question("q2", "manual: true\npoints: 1", [md("**SOLUTION:**\n\nBecause squares are never negative.")]),
        *question("q3", "manual: true\npoints: 1", [md("**SOLUTION:** by symmetry.")]))
    (report,) = import_assignment(source, "ig", tmp_path / "solutions")
    assert report.not_converted == []
    assert "cell 2: dropped, as otter drops a cell whose first line is `# ignore`" in report.converted
    assert ("cell 5: 4 line(s) otter ignores (`# IGNORE`, `# BEGIN IGNORE` ... `# END IGNORE`) removed, as otter "
            "removes them from both notebooks") in report.converted
    paths = build(report.target)
    student = "\n".join(c.source for c in nbformat.read(paths.assignment / "ig.ipynb", as_version=4).cells)
    for gone in ("instructor", "cos", "print(y)", "IGNORE", "never negative", "symmetry", "SOLUTION"):
        assert gone not in student, gone
    assert "def test_square(square):\n    assert square(3) == 9\n\ntest_square(square)" in student  # otter's call
    key = "\n".join(c.source for c in nbformat.read(paths.release / "answer_key.ipynb", as_version=4).cells)
    assert "**Solution:**\n\nBecause squares are never negative." in key and "**Solution:** by symmetry." in key
    tests = (report.target / "tests" / "otter_tests.py").read_text()
    assert "test_more(square)" in tests and "test_gcd" not in tests


@pytest.mark.parametrize("source, message", [
    ("x = 1\n# END IGNORE", "c, line 2: `# END IGNORE` without `# BEGIN IGNORE` (otter refuses it too)"),
    ("# BEGIN IGNORE\nx = 1", "c: `# BEGIN IGNORE` without `# END IGNORE` (otter refuses it too)"),
])
def test_an_unbalanced_ignore_block_is_refused(source, message):
    from autograder.importers.common import ImportFailed
    from autograder.importers.otter_lines import without_ignored

    with pytest.raises(ImportFailed, match=re.escape(message)):
        without_ignored(source, "c")


def test_questions_without_tests_or_points_count_as_otter_counts_them(tmp_path):
    """A question with neither tests nor `manual` is graded by nothing in otter: no check; a manual question
    without points is worth 0 there: a manual check worth 0, named in IMPORT.md."""
    source = notebook(tmp_path / "src" / "d.ipynb",
                      *question("q1", "", [code("x = 2 # SOLUTION")], code("assert x == 2")),
                      *question("q2", "points: 3", [code("y = 3 # SOLUTION")]),
                      *question("q3", "manual: true", [md("**SOLUTION:** it is.")]))
    (report,) = import_assignment(source, "d", tmp_path / "solutions")
    assert ("q2: no tests and not manual -> no check: otter grades nothing for it (its solution cells are "
            "converted)") in report.converted
    assert ("q3: manual question without points -> manual check 'q3' worth 0 (pending), as otter counts it; give it "
            "points in tests/otter_tests.py") in report.converted
    assert any(n.startswith("a manual question without `points` is worth 0") for n in report.notes)
    tests = (report.target / "tests" / "otter_tests.py").read_text()
    assert "'q2'" not in tests and "q3 = manual('q3', 0, 'q3', 'manual question')" in tests


def _answered(student: Path, answers: list[str], path: Path) -> Path:
    """The student notebook with each stub or otter prompt (`x = ...`) replaced by the next answer, at its
    indentation."""
    nb = nbformat.read(student, as_version=4)
    left = iter(answers)
    for cell in nb.cells:
        cell.source = re.sub(r"^( *)(?:# TODO: your code here\n *raise NotImplementedError\(\)|[^\n]*\.\.\.$)",
                             lambda m: m.group(1) + next(left), cell.source, flags=re.M)
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
def test_seeded_draws_all_or_nothing_and_a_list_of_points_grade_as_otter_grades(tmp_path):
    """The seeding line runs where it stood, in the reference and in a student's notebook (a value drawn at the
    top level is the seeded one), and demotes no public test; an all_or_nothing question partly right gets 0."""
    from autograder.grading import GradeOptions, grade
    from autograder.release import load_release

    draws = code("# HIDDEN\ndef test_values(np, z):\n    assert np.allclose(z[:2], [4.99342831, 3.7234714])\n\n"
                 "test_values(np, z)")
    source = notebook(
        tmp_path / "src" / "hw.ipynb", code("import numpy as np"),
        *question("q1", "points: 2", [code("x = 2 # SOLUTION")], code("x % 2 == 0", "True"),
                  code("# HIDDEN\nx == 2", "True")),
        *question("q8", "points: [1, 2]", [code("np.random.seed(42) # SEED\nz = np.random.normal(4, 2, 10) # SOLUTION")],
                  code("len(z) == 10", "True"), draws),
        *question("q9", "points: 4\nall_or_nothing: true", [code("def double(v):\n    return 2 * v # SOLUTION")],
                  code("double(1) == 2", "True"), code("# HIDDEN\ndouble(-3) == -6", "True")))
    (report,) = import_assignment(source, "hw", tmp_path / "solutions")
    assert report.not_converted == []
    assert ("q9: all_or_nothing: 2 test case(s) -> one check 'q9' worth 4 points when every case passes, 0 otherwise; "
            "1 public test cell(s) worth 0 in the notebook (students run them)") in report.converted
    assert ("cell 13: otter's seeding line(s) np.random.seed(42) -> kept in both notebooks (in a cell of their own "
            "before the solution), run there by the grader in the submission and in the reference") in report.converted
    paths = build(report.target)
    student = paths.assignment / "hw.ipynb"
    assert "# the grader runs this seeding line here: keep it\n_seed = np.random.seed(42)" in [
        c.source for c in nbformat.read(student, as_version=4).cells]  # a student's answer does not replace it
    right = _answered(student, ["x = 2", "z = np.random.normal(4, 2, 10)", "return 2 * v"], tmp_path / "right.ipynb")
    partly = _answered(student, ["x = 2", "z = 4 + 2 * np.random.randn(10)", "return 2 * abs(v)"],
                       tmp_path / "partly.ipynb")
    results = grade(load_release(paths.release), [paths.release / "answer_key.ipynb", right, partly],
                    GradeOptions(tmp_path / "out", quiet=True, summary=False))
    full = {"q1 test 1": 1, "q1 hidden test 2": 1, "q8 test 1": 1, "q8 hidden test 2": 2, "q9 test 1": 0, "q9": 4}
    for result, expected in zip(results, [full, full, {**full, "q9": 0}]):
        assert {c.name: c.score for c in result.checks} == expected, [(c.name, c.message) for c in result.checks]
    assert next(c for c in results[2].checks if c.name == "q9").message == "q9 hidden test 2: a hidden test failed"


@pytest.mark.slow
def test_what_a_case_prints_and_a_frame_it_gives_are_compared_as_otter_compares_them(tmp_path):
    """otter's doctest compares what a case prints (`print(double(2))`) and the text a value shows as (a DataFrame):
    a function that prints its answer instead of returning it fails the printing case; a frame with the right values
    passes and a wrong one fails (both passed, and the frame case was not graded at all, even for the answer key)."""
    from autograder.grading import GradeOptions, grade
    from autograder.release import load_release

    printed = code("print(double(2))")
    printed.outputs = [nbformat.v4.new_output("stream", name="stdout", text="4\n")]
    source = notebook(
        tmp_path / "src" / "hw.ipynb", code("import pandas as pd"),
        *question("q1", "points: 2", [code("def double(v):\n    return 2 * v # SOLUTION")], printed,
                  code("# HIDDEN\nprint(double(5), double(-1))")),
        *question("q2", "points: 1", [code("table = pd.DataFrame({'a': [1, 2], 'b': [3, 4]}) # SOLUTION")],
                  code("table", "   a  b\n0  1  3\n1  2  4")))
    (report,) = import_assignment(source, "hw", tmp_path / "solutions")
    paths = build(report.target)
    student = paths.assignment / "hw.ipynb"
    answers = {"right": ["return 2 * v", "table = pd.DataFrame({'a': [1, 2], 'b': [3, 4]})"],
               "prints": ["print(2 * v)", "table = pd.DataFrame({'a': [1, 2], 'b': [3, 40]})"]}
    subs = [_answered(student, a, tmp_path / f"{name}.ipynb") for name, a in answers.items()]
    results = grade(load_release(paths.release), [paths.release / "answer_key.ipynb", *subs],
                    GradeOptions(tmp_path / "out", quiet=True, summary=False))
    scores = [{c.name: (c.status, c.score) for c in r.checks} for r in results]
    full = {"q1 test 1": ("passed", 1), "q1 hidden test 2": ("passed", 1), "q2 test 1": ("passed", 1)}
    assert scores[:2] == [full, full]
    assert scores[2] == {"q1 test 1": ("failed", 0), "q1 hidden test 2": ("failed", 0), "q2 test 1": ("failed", 0)}
    message = next(c.message for c in results[2].checks if c.name == "q1 test 1")
    assert message == "this test prints 'None' where a correct notebook prints '4'"


def test_otters_older_format_is_converted_as_otters_own_converter_reads_it(tmp_path):
    """otter v0 / jassign: ```-fenced BEGIN QUESTION in the question's markdown, the next cell its solution, the
    `# TEST` / `# HIDDEN TEST` cells after it its cases; `# SOLUTION` lines and `**SOLUTION:**` cells anywhere."""
    source = notebook(
        tmp_path / "src" / "v0.ipynb", code("import numpy as np"),
        md("**Question 1:** Write `square`.\n\n```\nBEGIN QUESTION\nname: q1\npoints: 2\n```"),
        code("def square(x):\n    return x ** 2 # SOLUTION"), code("# TEST\nsquare(1)", "1"),
        code("# HIDDEN TEST\nsquare(3)", "9"),
        md("**Question 2:** Why?\n\n```\nBEGIN QUESTION\nname: q2\nmanual: true\npoints: 1\n```"),
        md("**SOLUTION:** because."), md("That is all."), code("y = 3 # SOLUTION"))
    (report,) = import_assignment(source, "v0", tmp_path / "solutions")
    assert report.not_converted == []
    assert report.converted[0].startswith("v0.ipynb: otter's older format (v0 / jassign")
    for line in ("cell 3: solution of q1 -> solution cell 'q1_solution_1'",
                 "q1: 2 test case(s) (2 points) -> 1 public test cell(s) in the notebook, 1 check(s) compared with the "
                 "reference", "cell 7: written answer of q2 -> answer cell 'q2_solution_2' (YOUR ANSWER HERE)",
                 "q2: manual question (1 point) -> manual check 'q2' (pending)",
                 "cell 9: solution of solution -> solution cell 'solution_solution_3'"):
        assert line in report.converted, line
    paths = build(report.target)
    student = "\n".join(c.source for c in nbformat.read(paths.assignment / "v0.ipynb", as_version=4).cells)
    for gone in ("x ** 2", "because", "BEGIN QUESTION", "y = 3", "square(3)", "# TEST"):
        assert gone not in student, gone
    assert "**Question 1:** Write `square`." in student and "That is all." in student


def test_an_all_or_nothing_check_names_its_cases_code_for_mutation_analysis():
    """Mutation analysis finds the part of a definition through the test-cell code a check closes over."""
    from autograder.importers.cells import all_cases
    from autograder.mutants.analysis import _parts_reading

    spec = all_cases("q9", 4, "q9", [], [("q9 test 1", "double(1) == 2", False), ("q9 test 2", "halve(2)", True)])
    assert _parts_reading("halve", [spec._ag_check], []) == ["q9"]


def test_torch_seeding_marks_only_what_draws_from_torchs_generator():
    from autograder.importers.otter_checks import seeded

    context = seeded("torch.manual_seed(7)", ["import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
                                              "    def __init__(self):\n        super().__init__()\n"
                                              "        self.fc = nn.Linear(2, 1)\n\ndef zeros():\n"
                                              "    return torch.zeros(2)\n"])
    assert context.draw("assert torch.zeros(3).sum() == 0 and torch.tensor([1.0]).item() == 1.0") is None
    assert context.draw("assert zeros().sum() == 0") is None
    assert context.draw("x = torch.rand(2)") == "torch.rand"
    assert context.draw("m = Net()") == "Net()"
    assert context.draw("w = torch.empty(2).uniform_()") is not None


# -- numpy 2's scalar reprs as recorded values; otter's seed variable -------------------------------------------

@pytest.mark.parametrize("text, value", [
    ("np.True_", True), ("np.False_", False), ("np.float64(1.5)", 1.5), ("np.int64(3)", 3), ("np.float64(-0.25)", -0.25),
    ("[np.float64(1.0), np.int64(-2)]", [1.0, -2]), ("(np.True_, 'a')", (True, "a")), ("np.str_('x')", "x"),
])
def test_numpy_scalar_reprs_are_read_as_their_values(text, value):
    from autograder.importers.otter_checks import recorded_literal

    assert recorded_literal(text) == value and type(recorded_literal(text)) is type(value)


def test_a_public_case_recorded_as_a_numpy_scalar_is_a_test_cell_comparing_values():
    """np.True_ recorded: a student's np.True_ or True passes (equal values), 1 does not (otter's output tells a
    number from a bool); np.float64(1.5): 1.5 passes."""
    from autograder.importers.otter_checks import public_test_source

    np = pytest.importorskip("numpy")
    flag, _ = public_test_source(Case("x", False, None, output="np.True_", ran=True))
    number, _ = public_test_source(Case("x", False, None, output="np.float64(1.5)", ran=True))
    for source, value, passes in [(flag, np.True_, True), (flag, True, True), (flag, 1, False), (flag, np.False_, False),
                                  (number, np.float64(1.5), True), (number, 1.5, True), (number, 2, False)]:
        if passes:
            exec(source, {"x": value})
        else:
            with pytest.raises(AssertionError, match="where a correct notebook gives"):
                exec(source, {"x": value})


def test_otter_seed_variable_students_get_their_value_and_grading_the_autograder_value(tmp_path):
    """ASSIGNMENT CONFIG `seed: {variable, autograder_value, student_value}`: the student notebook sets the
    variable to student_value, and grading replaces a submission's top-level assignment of it (otter sets it to
    autograder_value in every cell), so a correct submission draws what the reference drew."""
    from autograder.config import load_config
    from autograder.grading import GradeOptions, grade
    from autograder.release import load_release

    config = raw("# ASSIGNMENT CONFIG\nseed:\n    variable: rng_seed\n    autograder_value: 42\n"
                 "    student_value: 713")
    draw = code("def draw():\n    return round(float(np.random.default_rng(rng_seed).random()), 4) # SOLUTION")
    source = notebook(tmp_path / "src" / "s.ipynb", config, code("import numpy as np\nrng_seed = 42"),
                      *question("q1", "points: 1", [draw], code("# HIDDEN\ndraw()", "0.774")))
    (report,) = import_assignment(source, "s", tmp_path / "solutions")
    assert load_config(report.target).seed == {"variable": "rng_seed", "grading": 42, "student": 713}
    paths = build(report.target)
    student = nbformat.read(paths.assignment / "s.ipynb", as_version=4)
    assert student.cells[0].source == "import numpy as np\nrng_seed = 713"
    assert "rng_seed = 42" in (paths.release / "reference.py").read_text()
    key = nbformat.read(paths.release / "answer_key.ipynb", as_version=4)
    key.cells[0].source = "import numpy as np\nrng_seed = (\n    713)"  # the student's value, over two lines
    nbformat.write(key, tmp_path / "alice.ipynb")
    (result,) = grade(load_release(paths.release), [tmp_path / "alice.ipynb"],
                      GradeOptions(tmp_path / "out", quiet=True, summary=False))
    assert [(c.name, c.status) for c in result.checks] == [("q1 hidden test 1", "passed")]


def test_a_seed_variable_is_replaced_at_top_level_only_and_added_where_missing():
    from autograder.notebook.seedvar import with_value

    nb = nbformat.v4.new_notebook(cells=[code("x = 1\nrng_seed = (\n  7)\ndef f():\n    rng_seed = 3"), code("y = 2")])
    out = with_value(nb, "rng_seed", 42)
    assert out.cells[0].source == "x = 1\nrng_seed = 42\n\ndef f():\n    rng_seed = 3" and "  7)" in nb.cells[0].source
    missing = with_value(nbformat.v4.new_notebook(cells=[md("# hi"), code("y = 2")]), "rng_seed", 42)
    assert [c.source for c in missing.cells] == ["# hi", "rng_seed = 42", "y = 2"]


def test_a_seed_that_is_not_a_mapping_is_refused_as_otter_refuses_it(tmp_path):
    from autograder.importers.common import ImportFailed

    source = notebook(tmp_path / "src" / "s.ipynb", raw("# ASSIGNMENT CONFIG\nseed: 42"),
                      *question("q1", "points: 1", [code("x = 1 # SOLUTION")], code("x", "1")))
    with pytest.raises(ImportFailed, match="generate: {seed: N}"):
        import_assignment(source, "s", tmp_path / "solutions")


def test_success_and_failure_messages_are_what_a_student_reads(tmp_path):
    """A TEST CONFIG's success_message is the check's message when it passes, its failure_message comes first when
    it fails, in a public test cell as in a check compared with the reference, as otter shows them."""
    from autograder.grading import GradeOptions, grade
    from autograder.release import load_release

    def case(hidden: str, source: str, value: str):
        return code(f'""" # BEGIN TEST CONFIG\n{hidden}success_message: Well done.\nfailure_message: Look at '
                    f'the boundaries.\n""" # END TEST CONFIG\n{source}', value)

    source = notebook(tmp_path / "src" / "m.ipynb", *question(
        "q1", "points: 2", [code("def grade(s):\n    return 'A' if s >= 90 else 'B' # SOLUTION")],
        case("", "grade(90)", "'A'"), case("hidden: true\n", "grade(89)", "'B'")))
    (report,) = import_assignment(source, "m", tmp_path / "solutions")
    assert "cell 6: success_message of 'q1 test 1' -> what a student reads when it passes" in report.converted
    assert "cell 7: failure_message of 'q1 hidden test 2' -> first in what a student reads when it fails" in \
        report.converted
    paths = build(report.target)
    key = nbformat.read(paths.release / "answer_key.ipynb", as_version=4)
    nbformat.write(key, tmp_path / "right.ipynb")
    solution = next(c for c in key.cells if c.source.startswith("def grade"))
    solution.source = "def grade(s):\n    return 'B' if s >= 90 else 'A'"
    nbformat.write(key, tmp_path / "wrong.ipynb")
    right, wrong = grade(load_release(paths.release), [tmp_path / "right.ipynb", tmp_path / "wrong.ipynb"],
                         GradeOptions(tmp_path / "out", quiet=True, summary=False))
    assert [(c.status, c.message) for c in right.checks] == [("passed", "Well done.")] * 2
    assert [c.message.split("\n")[0] for c in wrong.checks] == ["Look at the boundaries."] * 2
    assert wrong.checks[0].message == "Look at the boundaries.\nthis test gives 'B' where a correct notebook gives 'A'"


# -- otter's seeding of every cell when grading; otter's prompts for solution lines --------------------------------

@pytest.mark.slow
def test_generate_seed_seeds_every_cell_of_a_submission_written_in_otters_own_student_notebook(tmp_path):
    """`generate: {seed: 42}` with a `# SEED` line: otter's grader seeds random and numpy at the top of every cell of
    a submission, whatever it holds (otter's student notebook keeps the line as a bare call, which the grader here
    never runs): [seed] cells. A correct answer that explores first, or without the seeding line, gets every point,
    as in otter; a wrong one, or one seeding its own value in the answer's cell, does not."""
    from autograder.config import load_config
    from autograder.grading import GradeOptions, grade
    from autograder.release import load_release

    source = notebook(
        tmp_path / "src" / "lab.ipynb", raw("# ASSIGNMENT CONFIG\ngenerate:\n    seed: 42"),
        code("import numpy as np\nnp.random.seed(42) # SEED"),
        *question("q1", "points: 2", [code("u = np.random.rand(50) # SOLUTION\nu_mean = u.mean() # SOLUTION")],
                  code("len(u) == 50", "True"), code("# HIDDEN\nround(float(u_mean), 6)")))
    (report,) = import_assignment(source, "lab", tmp_path / "solutions")
    assert load_config(report.target).seed == {"cells": 42}
    assert any(line.startswith("cell 1: ASSIGNMENT CONFIG `generate: {seed: 42}` -> [seed] cells = 42 in assignment.toml")
               for line in report.converted), report.converted
    paths = build(report.target)

    def otter_submission(name: str, *cells: str) -> Path:  # as otter's student notebook holds an answer
        head = ['# Initialize Otter\nimport otter\ngrader = otter.Notebook("lab.ipynb")']
        return notebook(tmp_path / "subs" / f"{name}.ipynb", *(code(c) for c in [*head, *cells, 'grader.check("q1")']))

    seeded = "import numpy as np\nnp.random.seed(42) # SEED"
    subs = [otter_submission("correct", seeded, "u = np.random.rand(50)\nu_mean = u.mean()"),
            otter_submission("explore_first", seeded, "peek = np.random.rand(5)\nprint(peek)",
                             "u = np.random.random_sample(50)\nu_mean = float(np.mean(u))"),
            otter_submission("no_seed_line", "import numpy as np", "u = np.random.rand(50)\nu_mean = u.mean()"),
            otter_submission("wrong", seeded, "u = np.random.rand(50)\nu_mean = np.median(u)"),
            otter_submission("own_seed", seeded, "np.random.seed(7)\nu = np.random.rand(50)\nu_mean = u.mean()")]
    results = grade(load_release(paths.release), subs, GradeOptions(tmp_path / "out", quiet=True, summary=False))
    scores = {sub.stem: sum(c.score for c in r.checks) for sub, r in zip(subs, results)}
    assert scores == {"correct": 2, "explore_first": 2, "no_seed_line": 2, "wrong": 1, "own_seed": 1}, [
        (c.name, c.message) for r in results for c in r.checks]


def test_cell_seeding_runs_before_each_cells_statements_and_a_cells_own_seeding_call(tmp_path):
    from autograder.notebook.extract import extract
    from autograder.notebook.seedvar import cell_seeding

    nb = nbformat.v4.new_notebook(cells=[code("import numpy as np"), code("np.random.seed(7)\nu = np.random.rand(3)"),
                                         code("print(1)"), code("v = u + 1")])
    units = extract(nb, ["v"], each_cell=cell_seeding({"cells": 3})).units
    assert [(u.cell, u.source.split("\n")[0]) for u in units] == [
        (0, "try:  # otter's seeding of each cell: [seed] cells = 3"), (1, "import numpy as np"),
        (0, "try:  # otter's seeding of each cell: [seed] cells = 3"), (2, "np.random.seed(7)"),
        (2, "u = np.random.rand(3)"), (0, "try:  # otter's seeding of each cell: [seed] cells = 3"), (4, "v = u + 1")]
    assert [u.source for u in extract(nb, ["v"]).units if "seed" in u.source] == []  # without [seed] cells
    namespace: dict = {}
    exec(cell_seeding({"cells": 3}), namespace)  # binds nothing but what exec adds
    assert set(namespace) == {"__builtins__"}


@pytest.mark.parametrize("source, student", [
    ("m100 = sample_mean(100)  # SOLUTION", "m100 = ..."),
    ("a, b = f()  # SOLUTION", "a, b = ..."),
    ("n += 1 # SOLUTION", "n += ..."),
    ("y: int = 5 # SOLUTION", "y: int = ..."),
    ("d['k'] = 1 # SOLUTION", "d['k'] = ..."),
    ("plt.plot(x) # SOLUTION", "..."),
    ("x = 1 # SOLUTION NO PROMPT\nshow(x)", "show(x)"),
    ("def f(x):\n    y = 2 * x # SOLUTION\n    return y", "def f(x):\n    y = ...\n    return y"),
    ("def f(x):\n    return 2 * x # SOLUTION", "def f(x):\n    # TODO: your code here\n    raise NotImplementedError()"),
    ('def f(x):\n    """ # BEGIN PROMPT\n    return ...\n    """ # END PROMPT\n    # BEGIN SOLUTION NO PROMPT\n'
     "    return 2 * x\n    # END SOLUTION", "def f(x):\n    return ..."),
    ("# BEGIN SOLUTION\nq = 3\n# END SOLUTION", "..."),
])
def test_solution_lines_get_otters_prompt_where_a_raise_would_stop_run_all(source, student):
    """otter's replacement rules: an assignment line keeps its left-hand side (`m100 = ...`, at any indentation),
    any other line or block is `...` at the top level, a NO PROMPT one nothing, a BEGIN PROMPT block its lines; in a
    function this project's stub (which says "not implemented" where `...` returns None)."""
    from autograder.notebook.markers import check_cell, solution_source, student_source

    cell = nbformat.v4.new_code_cell(solution_code(source))
    cell.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "s"}
    regions = check_cell(cell, "cell 1")
    assert student_source(cell, regions) == student
    key = solution_source(cell, regions, keep_hidden=False)
    assert "PROMPT" not in key and "..." not in key.replace('"""', "")


def test_a_prompt_line_outside_a_solution_region_is_refused():
    from autograder.notebook.markers import check_cell

    with pytest.raises(MarkerError, match=r"cell 1, line 1: `### PROMPT` outside a code cell's SOLUTION region"):
        check_cell(nbformat.v4.new_code_cell("### PROMPT x = ...\nx = 1"), "cell 1")


@pytest.mark.parametrize("table, error", [
    ({"cells": 42}, None),
    ({"cells": 42, "variable": "rng_seed", "grading": 1}, None),
    ({"cells": "42"}, "cells must be an integer >= 0"),
    ({"cells": True}, "cells must be an integer >= 0"),
    ({"cell": 42}, r"unknown \[seed\] setting\(s\) \['cell'\]"),
])
def test_seed_cells_in_assignment_toml_is_an_integer(table, error):
    from autograder.config import ConfigError, seed_options

    if error is None:
        assert seed_options(table) == table
    else:
        with pytest.raises(ConfigError, match=error):
            seed_options(table)


# -- a seeded question's cases run as otter runs its test file: one seeding, then the cases in order -------------

def _otter_student(tmp_path: Path, name: str, *cells: str) -> Path:
    """A submission written in otter's own student notebook: otter's first cell, the answers, a check cell."""
    head = ['# Initialize Otter\nimport otter\ngrader = otter.Notebook("lab.ipynb")']
    return notebook(tmp_path / "subs" / f"{name}.ipynb", *(code(c) for c in [*head, *cells, 'grader.check("q1")']))


@pytest.mark.slow
def test_a_seeded_questions_cases_draw_one_stream_in_order_as_otter_grades(tmp_path):
    """otter's grader seeds the cell that checks a question once (`generate: {seed: 42}`), then runs its test file's
    cases one after another: the k-th case draws the k-th value of the stream, whether it draws through the
    notebook's code (q1) or in its own code (q2). otter 7.0.0 (`otter assign`, `otter run`) gives this notebook's
    correct answers 5/5 and 5/5, and the wrong ones (`< 0.75` for `< 0.5`) 3/5 and 3/5: cases 3 and 4 draw 0.732 and
    0.599; an all_or_nothing question (q3) the same way, 0/3 for the wrong answer. Seeded again before each case,
    every case drew 0.375 and the wrong q1 and q3 got full points."""
    from autograder.grading import GradeOptions, grade
    from autograder.release import load_release

    drawn = ["True", "False", "False", "False", "True"]  # 0.3745, 0.9507, 0.7320, 0.5987, 0.1560 < 0.5
    source = notebook(
        tmp_path / "src" / "lab.ipynb", raw("# ASSIGNMENT CONFIG\ngenerate:\n    seed: 42"),
        code("import numpy as np\nnp.random.seed(42) # SEED"),
        *question("q1", "points: 5", [code("def coin():\n    return bool(np.random.rand() < 0.5) # SOLUTION")],
                  *(code("# HIDDEN\ncoin()", value) for value in drawn)),
        *question("q2", "points: 5", [code("def is_small(x):\n    return bool(x < 0.5) # SOLUTION")],
                  *(code("# HIDDEN\nis_small(np.random.rand())", value) for value in drawn)),
        *question("q3", "points: 3\nall_or_nothing: true",
                  [code("def flip():\n    return bool(np.random.rand() < 0.5) # SOLUTION")],
                  *(code("# HIDDEN\nflip()", value) for value in drawn[:3])))
    (report,) = import_assignment(source, "lab", tmp_path / "solutions")
    assert ("each question's test cases -> run after otter's seeding of the cell that checks them (`[seed] cells = "
            "42`), once, then in otter's order (a case after those before it), in the submission and in the "
            "reference, as otter's grader runs a question's test file") in report.converted
    paths = build(report.target)
    seeded = "import numpy as np\nnp.random.seed(42) # SEED"
    subs = [_otter_student(tmp_path, "correct", seeded, "def coin():\n    return bool(np.random.rand() < 0.5)",
                           "def is_small(x):\n    return bool(x < 0.5)",
                           "def flip():\n    return bool(np.random.rand() < 0.5)"),
            _otter_student(tmp_path, "wrong", seeded, "def coin():\n    return bool(np.random.rand() < 0.75)",
                           "def is_small(x):\n    return bool(x < 0.75)",
                           "def flip():\n    return bool(np.random.rand() < 0.75)")]
    results = grade(load_release(paths.release), subs, GradeOptions(tmp_path / "out", quiet=True, summary=False))
    scores = {sub.stem: {q: sum(c.score for c in r.checks if c.part == q) for q in ("q1", "q2", "q3")}
              for sub, r in zip(subs, results)}
    assert scores == {"correct": {"q1": 5, "q2": 5, "q3": 3}, "wrong": {"q1": 3, "q2": 3, "q3": 0}}, [
        (c.name, c.message) for r in results for c in r.checks]
    wrong = {c.name: c.score for c in results[1].checks}
    assert [wrong[f"q{q} hidden test {n}"] for q in (1, 2) for n in range(1, 6)] == [1, 1, 0, 0, 1] * 2  # otter's


def test_an_unseeded_notebooks_cases_run_alone_and_unseeded(tmp_path):
    """Without `generate`'s seed or `# SEED` lines otter seeds nothing when grading: each case runs alone, as
    before (only the grader's own seeding of every check)."""
    source = notebook(tmp_path / "src" / "u.ipynb", code("import numpy as np"),
                      *question("q1", "points: 2", [code("def f():\n    return np.random.rand() # SOLUTION")],
                                code("# HIDDEN\nf() < 1", "True"), code("# HIDDEN\nf() >= 0", "True")))
    (report,) = import_assignment(source, "u", tmp_path / "solutions")
    tests = (report.target / "tests" / "otter_tests.py").read_text()
    assert "SEED" not in tests and "earlier=" not in tests and "_q1_cases" not in tests
    assert not any("seeding" in line for line in report.converted)


def test_a_seeded_case_runs_after_the_seeding_and_the_cases_before_it_in_each_program():
    """cells.evaluate: the seeding runs in the program's module and in the judge, then the earlier cases (a failing
    one ignored, as otter's doctest runner goes on), then the case; the judge's generators are as they were."""
    import random as judge_random

    import numpy as np

    from autograder.importers.cells import evaluate

    class Program:  # a worker stand-in: its module is this namespace, SEEDING_HELPERS' run_seed_lines included
        def __init__(self):
            self.module: dict = {}
            self.helpers = self

        def run_seed_lines(self, source):
            exec(source, self.module)

        def defines(self, name):
            return name in self.module

        def __getattr__(self, name):
            try:
                return self.__dict__["module"][name]
            except KeyError:
                raise AttributeError(name) from None

    from autograder.notebook.seedvar import cell_seeding

    seed = cell_seeding({"cells": 42})
    earlier = [("q hidden test 1", "np.random.rand()"), ("q hidden test 2", "1 / 0"),
               ("q hidden test 3", "random.random()")]
    before = (judge_random.getstate(), np.random.get_state()[1].tolist())
    value = evaluate(Program(), ["import numpy as np", "import random"], "(np.random.rand(), random.random())",
                     "<test q hidden test 4>", seed, earlier=earlier)
    assert (judge_random.getstate(), np.random.get_state()[1].tolist()) == before
    np.random.seed(42)
    judge_random.seed(42)
    assert value == (np.random.rand(2)[1], [judge_random.random() for _ in range(2)][1])
    judge_random.setstate(before[0])


@pytest.mark.slow
def test_autograder_check_seeds_each_cell_as_grading_does(tmp_path):
    """`[seed] cells = 42` (otter's `generate: {seed: 42}`): the build records it in the student notebook, and
    `autograder check` runs the same seeding before each cell's statements as grading, so a student who draws in
    a cell before the answer's sees the public test pass, as grading passes it."""
    from autograder.selfcheck import run_checks
    from autograder.grading import GradeOptions, grade
    from autograder.release import load_release

    source = notebook(
        tmp_path / "src" / "lab.ipynb", raw("# ASSIGNMENT CONFIG\ngenerate:\n    seed: 42"), code("import numpy as np"),
        *question("q1", "points: 1", [code("u = np.random.rand(50) # SOLUTION\nu_mean = u.mean() # SOLUTION")],
                  code("round(float(u_mean), 6)", "0.445924")))
    (report,) = import_assignment(source, "lab", tmp_path / "solutions")
    paths = build(report.target)
    student = nbformat.read(paths.assignment / "lab.ipynb", as_version=4)
    assert student.metadata["autograder"] == {"seed": {"cells": 42}}
    student.cells.insert(1, code("peek = np.random.rand(5)"))  # exploring moves the stream; each cell is seeded
    nbformat.write(student, tmp_path / "explored.ipynb")
    answered = _answered(tmp_path / "explored.ipynb", ["u = np.random.rand(50)", "u_mean = u.mean()"],
                         tmp_path / "answered.ipynb")
    run = run_checks(answered)
    assert [(r.name, r.status) for r in run.results] == [("q1 test 1", "passed")], run.results
    (graded,) = grade(load_release(paths.release), [answered], GradeOptions(tmp_path / "out", quiet=True, summary=False))
    assert [(c.name, c.score) for c in graded.checks] == [("q1 test 1", 1)]


def test_a_notebook_records_only_a_well_formed_cell_seed():
    from autograder.notebook.seedvar import notebook_seed, record_cells

    nb = nbformat.v4.new_notebook()
    record_cells(nb, {"variable": "rng_seed", "grading": 1})
    assert "autograder" not in nb.metadata and notebook_seed(nb) == {}
    record_cells(nb, {"cells": 7})
    assert notebook_seed(nb) == {"cells": 7}
    for bad in ({"seed": {"cells": "7"}}, {"seed": {"cells": True}}, {"seed": 7}, "x", {"seed": {"cells": -1}}):
        nb.metadata["autograder"] = bad
        assert notebook_seed(nb) == {}


def test_what_otter_assign_wrote_is_refused_in_one_line_naming_the_notebook_to_give(tmp_path):
    """The dist folder, the autograder zip and the student notebook otter assign writes: one line each, saying to
    import the notebook otter assign reads (the zip raised a UnicodeDecodeError traceback)."""
    import zipfile

    from autograder.importers.common import ImportFailed

    (tmp_path / "dist").mkdir()
    with zipfile.ZipFile(tmp_path / "dist" / "hw-autograder.zip", "w") as z:
        z.writestr("otter_config.json", "{}")
    student = notebook(tmp_path / "dist" / "student" / "hw.ipynb", md("# Homework"), code("x = ..."))
    for given in (tmp_path / "dist", tmp_path / "dist" / "hw-autograder.zip", student):
        with pytest.raises(ImportFailed, match="give the notebook `otter assign` reads"):
            import_assignment(given, "hw", tmp_path / "solutions")
    assert not (tmp_path / "solutions").exists()


def test_a_solution_marker_outside_the_solution_cells_is_named_with_where_to_put_it(tmp_path):
    """A question's solution cell written without the raw BEGIN / END SOLUTION cells around it (otter hands such a
    line out as written): the import says to put the cell between them, not to run the import it just ran."""
    source = notebook(tmp_path / "hw.ipynb", raw("# BEGIN QUESTION\nname: q1\npoints: 1"),
                      code("def double(x):\n    return 2 * x # SOLUTION"),
                      raw("# BEGIN TESTS"), code("assert double(2) == 4"), raw("# END TESTS"), raw("# END QUESTION"))
    (report,) = import_assignment(source, "hw", tmp_path / "solutions")
    [why] = [item for item in report.not_converted if "# SOLUTION" in item]
    assert "outside the raw `# BEGIN SOLUTION` / `# END SOLUTION` cells" in why and "import again" in why

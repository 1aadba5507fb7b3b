"""The generated student notebook (golden file), determinism, and the release bundle."""
import json
import shutil

import nbformat
import pytest

from autograder.build import BuildError, build
from autograder.notebook.markers import MarkerError
from autograder.verify import find_leaks, secret_lines
from tests.conftest import EXAMPLE_SOURCE

GOLDEN = EXAMPLE_SOURCE.parent.parent / "assignments" / "vectors" / "vectors.ipynb"


def test_student_notebook_matches_golden(example_build, update_goldens):
    """The committed assignments/ folder is what `build` produces; run pytest --update-goldens to refresh."""
    generated = (example_build.assignment / "vectors.ipynb").read_text()
    if update_goldens:
        GOLDEN.write_text(generated)
    assert GOLDEN.read_text() == generated, "assignments/ is out of date with its source: run autograder build"


def test_build_is_deterministic(tmp_path):
    outputs = []
    for i in range(2):
        source = tmp_path / f"run{i}" / "solutions" / "vectors"
        shutil.copytree(EXAMPLE_SOURCE, source)
        paths = build(source)
        files = sorted(p for d in (paths.assignment, paths.release) for p in d.rglob("*") if p.is_file())
        outputs.append({f.relative_to(f.parents[2]).as_posix(): f.read_bytes() for f in files})
    assert outputs[0] == outputs[1]


def test_a_source_notebook_whose_cells_lack_ids_builds_to_the_same_bytes(tmp_path, recwarn):
    """A 4.5 notebook written by a script (no cell ids): ids from positions, not nbformat's random ones."""
    outputs = []
    for i in range(2):
        source = tmp_path / f"run{i}" / "solutions" / "vectors"
        shutil.copytree(EXAMPLE_SOURCE, source)
        nb_path = next(source.glob("*.ipynb"))
        nb = json.loads(nb_path.read_text())
        nb["nbformat_minor"] = 5
        for cell in nb["cells"]:
            cell.pop("id", None)
        nb_path.write_text(json.dumps(nb))
        paths = build(source)
        outputs.append([p.read_bytes() for p in sorted(paths.assignment.glob("*.ipynb"))])
    assert outputs[0] == outputs[1]
    student = json.loads(outputs[0][0])
    assert student["cells"][0]["id"] == "cell-0"
    assert not [w for w in recwarn if "MissingIDField" in type(w.message).__name__]


def test_student_notebook_has_stubs_and_no_hidden_tests(example_build):
    nb = nbformat.read(example_build.assignment / "vectors.ipynb", as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    assert text.count("raise NotImplementedError()") == 4
    assert "reference." not in text and "HIDDEN" not in text and "BEGIN SOLUTION" not in text
    assert "YOUR ANSWER HERE" in text and "exp overflows" not in text
    assert all(c.get("outputs", []) == [] for c in nb.cells)
    assert "def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:" in text  # interface kept


def test_release_bundle(example_build):
    manifest = json.loads((example_build.release / "manifest.json").read_text())
    names = [c["name"] for c in manifest["checks"]]
    assert names[:2] == ["normalize_test", "softmax_public"]  # notebook test cells first, in order
    assert "softmax: values along every dim" in names
    hidden_cell = manifest["checks"][0]
    assert "reference.normalize" in hidden_cell["source"] and hidden_cell["public"] is False
    assert manifest["checks"][1]["public"] is True
    assert (example_build.release / "tests" / "test_hidden.py").is_file()
    key = nbformat.read(example_build.release / "answer_key.ipynb", as_version=4)
    key_text = "\n".join(c.source for c in key.cells)
    assert "v / v.norm(dim=-1, keepdim=True)" in key_text and "BEGIN SOLUTION" not in key_text
    assert "reference.normalize" not in key_text  # hidden tests live in the release's manifest only
    reference = (example_build.release / "reference.py").read_text()
    assert "def softmax" in reference and "layer = TinyLayer(4, 2)" not in reference  # skip-grading cell dropped


def test_leak_check_finds_a_solution_line_pasted_into_the_student_folder(example_build, tmp_path):
    secrets = secret_lines(example_build.source)
    leaky = tmp_path / "assignment"
    shutil.copytree(example_build.assignment, leaky)
    assert find_leaks(leaky, secrets) == []
    (leaky / "hints.py").write_text("# hint\n    shifted = x - x.max(dim=dim, keepdim=True).values\n")
    leaks = find_leaks(leaky, secrets)
    assert len(leaks) == 1 and "hints.py" in leaks[0]
    (leaky / "hints.py").write_text("if x:\n    pass\nelse:\n    return None\n)\n")  # lines any code has
    assert find_leaks(leaky, secrets) == []


def _course_with_helper_module(root, fraction):
    """The example assignment plus tests/_common.py (a helper module) and a test file that imports it."""
    source = root / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    (source / "tests" / "_common.py").write_text(
        "from autograder.testing import check\n\n\n"
        f"def fraction():\n    return {fraction}\n\n\n"
        "@check('defined in a helper module', points=5)\n"
        "def not_collected(sub, ref):\n    return 1.0\n")
    (source / "tests" / "test_shared.py").write_text(
        "from _common import fraction\nfrom autograder.testing import check\n\n\n"
        "@check('uses the helper module', points=2)\ndef uses_helper(sub, ref):\n    return fraction()\n")
    return build(source)


def test_helper_modules_are_shared_by_test_files_and_never_scanned_for_checks(tmp_path):
    """tests/_name.py: shipped with the release, importable by the test files, its checks ignored; two
    assignments with a helper module of the same name each get their own."""
    from autograder.export.nbgrader import KernelChecks
    from autograder.grading import GradeOptions, grade
    from autograder.release import load_release

    scores = []
    for name, fraction in (("a", 1.0), ("b", 0.5)):
        paths = _course_with_helper_module(tmp_path / name, fraction)
        assert (paths.release / "tests" / "_common.py").is_file()
        release = load_release(paths.release)
        names = [c.name for c in release.checks]
        assert "uses the helper module" in names and "defined in a helper module" not in names
        (result,) = grade(release, [paths.release / "answer_key.ipynb"],
                          GradeOptions(tmp_path / name / "out", quiet=True, summary=False))
        check = next(c for c in result.checks if c.name == "uses the helper module")
        # b's helper makes the check give 1 of 2 points: the reference itself then does not pass it, so the
        # grader says so rather than grade it (Judge.confirm); its message shows the 1/2
        scores.append(check.score if check.status != "ungraded" else check.grader_problem)
        # nbgrader's in-kernel path reads the same files
        tests = {p.name: p.read_text() for p in sorted((paths.release / "tests").glob("*.py"))}
        kernel = KernelChecks((paths.release / "reference.py").read_text(), tests, release.helpers)
        assert "uses the helper module" in kernel.specs and "defined in a helper module" not in kernel.specs
        assert kernel.score("uses the helper module", {}) == 2 * fraction
    assert scores[0] == 2.0 and "the reference solution gets 1/2 on this check" in scores[1]


@pytest.mark.parametrize("test_file, helper, expected", [
    ("from autograder.testing import check\n\n\n@check('no points')\ndef f(sub, ref):\n    pass\n", None,
     "tests/test_broken.py, line 4: check() needs points="),
    ("x = 1\ny = (\n", None, "tests/test_broken.py, line 2: SyntaxError: "),
    ("import _shared\n", "a = 1\nraise RuntimeError('no data here')\n",
     "tests/_shared.py, line 2: RuntimeError: no data here"),
])
def test_an_error_loading_a_test_file_is_one_line_naming_file_and_line(tmp_path, monkeypatch, test_file, helper,
                                                                        expected):
    """Whatever importing a test file raises (its own line, or a helper module's) is a BuildError naming the
    file and line: the command prints it as one line, never a traceback."""
    source = tmp_path / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    (source / "tests" / "test_broken.py").write_text(test_file)
    if helper is not None:
        (source / "tests" / "_shared.py").write_text(helper)
    monkeypatch.chdir(source)
    with pytest.raises(BuildError) as err:
        build(source)
    assert str(err.value).startswith(expected), str(err.value)
    assert "\n" not in str(err.value)


def test_the_build_command_prints_a_test_file_error_as_one_line_and_exits_2(tmp_path, capsys):
    from autograder.cli import main

    source = tmp_path / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    (source / "tests" / "test_broken.py").write_text("def f(:\n")
    assert main(["build", str(source), "--no-record"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "test_broken.py, line 1: SyntaxError: " in err and "Traceback" not in err


def _with_cell(tmp_path, index_of, change):
    source = tmp_path / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    nb = nbformat.read(source / "vectors.ipynb", as_version=4)
    index = index_of(nb)
    change(nb.cells[index])
    nbformat.write(nb, source / "vectors.ipynb")
    return source, index


def test_a_written_answer_without_points_is_refused_like_a_test_cell(tmp_path):
    """A hand-graded cell whose points were left out is not a silent 0-point check."""
    def index_of(nb):
        return next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "q_softmax")

    source, index = _with_cell(tmp_path, index_of, lambda cell: cell.metadata["nbgrader"].pop("points"))
    with pytest.raises(MarkerError, match=rf"cell {index + 1}: written answer 'q_softmax' needs nbgrader 'points' >= 0"):
        build(source)


def test_stub_text_in_a_source_answer_is_not_a_leak(tmp_path):
    """An answer cell still holding nbgrader's stub text (YOUR ANSWER HERE, # YOUR CODE HERE): the student
    notebook holds the same stub, which is what it is meant to hold."""
    def answer(nb):
        return next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "q_softmax")

    def set_stub(cell):
        cell.source = "YOUR ANSWER HERE"

    source, _ = _with_cell(tmp_path, answer, set_stub)
    nb = nbformat.read(source / "vectors.ipynb", as_version=4)
    code = nbformat.v4.new_code_cell("# YOUR CODE HERE\nraise NotImplementedError()")
    code.metadata["nbgrader"] = {"grade": False, "solution": True, "grade_id": "free", "locked": False}
    nb.cells.append(code)
    nbformat.write(nb, source / "vectors.ipynb")
    paths = build(source)
    secrets = secret_lines(source)
    assert {"YOUR ANSWER HERE", "# YOUR CODE HERE", "raise NotImplementedError()"}.isdisjoint(secrets)
    assert find_leaks(paths.assignment, secrets) == []


@pytest.mark.parametrize("edit", ["format=5", "format=None", "no checks", "not json"])
def test_a_release_of_another_format_or_a_broken_manifest_is_one_clear_error(example_build, tmp_path, edit):
    import json
    import shutil

    from autograder.release import MANIFEST, ReleaseError, load_release

    release = tmp_path / "release"
    shutil.copytree(example_build.release, release)
    manifest = json.loads((release / MANIFEST).read_text())
    if edit == "format=5":
        manifest["format"] = 5
    elif edit == "format=None":
        del manifest["format"]
    elif edit == "no checks":
        del manifest["checks"]
    text = "{ not json" if edit == "not json" else json.dumps(manifest)
    (release / MANIFEST).write_text(text)
    with pytest.raises(ReleaseError, match="build the assignment again"):
        load_release(release)


def test_a_release_named_by_its_assignment_is_built_when_stale_and_the_command_says_so(tmp_path, capsys):
    from autograder.build import release_for

    source = tmp_path / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    release_for("vectors", root=tmp_path)
    assert "is not built yet from" in capsys.readouterr().err
    release_for("vectors", root=tmp_path)
    assert "building" not in capsys.readouterr().err  # current: used as it is
    (source / "assignment.toml").write_text((source / "assignment.toml").read_text() + "\n# edited\n")
    release_for("vectors", root=tmp_path)
    assert "is out of date with" in capsys.readouterr().err


def test_a_file_dropped_from_files_leaves_the_student_folder_on_the_next_build(tmp_path):
    source = tmp_path / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    (source / "extra.txt").write_text("data")
    toml = (source / "assignment.toml").read_text()
    (source / "assignment.toml").write_text(toml.replace("files = [", 'files = ["extra.txt", ', 1))
    paths = build(source)
    assert (paths.assignment / "extra.txt").is_file()
    (source / "assignment.toml").write_text(toml)
    assert not (build(source).assignment / "extra.txt").exists()


def test_depends_on_a_class_that_is_no_module_is_said_at_build_time(tmp_path):
    source = tmp_path / "solutions" / "plain"
    (source / "tests").mkdir(parents=True)
    (source / "assignment.toml").write_text('title = "plain"\nnotebook = "plain.ipynb"\nfiles = []\n')
    code = nbformat.v4.new_code_cell(
        "import torch\n\nclass Value:\n    def __init__(self, data):\n        self.data = data\n\n"
        "class Net(torch.nn.Module):\n    pass\n\nclass Deeper(Net):\n    pass\n\n"
        "def double(v):\n    ### BEGIN SOLUTION\n    return Value(2 * v.data)\n    ### END SOLUTION\n")
    code.metadata["nbgrader"] = {"grade_id": "code", "solution": True, "grade": False}
    nbformat.write(nbformat.v4.new_notebook(cells=[code]), source / "plain.ipynb")
    (source / "tests" / "test_plain.py").write_text(
        "from autograder.testing import check\n\n\n"
        "@check('double', points=1, part='2', depends_on=['Value', 'Net', 'Deeper'])\n"
        "def double_check(sub, ref):\n    assert sub.double(sub.Value(2)).data == 4\n")
    notes = build(source).notes
    assert len(notes) == 1 and "depends_on names `Value` (1 check(s): 'double')" in notes[0], notes
    assert "not an nn.Module" in notes[0]


def test_a_hand_graded_cell_is_named_by_its_number_in_the_student_notebook(tmp_path):
    """The student notebook has cells of its own added (the setup cell, each part's check cell): a written answer's
    pending line names the cell a student finds under that number, not the source notebook's."""
    from autograder.release import load_release

    source = tmp_path / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    with open(source / "assignment.toml", "a", encoding="utf-8") as f:
        f.write("\n[student]\nchecks = true\n")
    paths = build(source)
    release = load_release(paths.release)
    student = nbformat.read(paths.assignment / release.config.notebook, as_version=4)
    assert len(student.cells) > len(nbformat.read(source / "vectors.ipynb", as_version=4).cells)  # cells added
    numbers = {c.metadata.get("nbgrader", {}).get("grade_id"): i for i, c in enumerate(student.cells, start=1)}
    manual = [c for c in release.checks if getattr(c.fn, "_ag_manual", None)]
    assert manual
    for spec in manual:
        assert spec.fn._ag_manual.endswith(f"notebook cell {numbers[spec.name]}"), (spec.name, spec.fn._ag_manual)


def _solution(grade_id, text):
    cell = nbformat.v4.new_code_cell(text)
    cell.metadata["nbgrader"] = {"grade_id": grade_id, "solution": True, "grade": False}
    return cell


def _test_cell(grade_id, part, text, depends_on=None):
    cell = nbformat.v4.new_code_cell(text)
    cell.metadata["nbgrader"] = {"grade_id": grade_id, "grade": True, "points": 1, "part": part,
                                 **({"depends_on": depends_on} if depends_on is not None else {})}
    return cell


def _two_parts(tmp_path, cell_depends_on=None, file_depends_on=""):
    """Part 1 writes `f`; part 2 writes `g`, which calls `f`, and `h`, which does not; a test cell and a hidden check
    of part 2 call `g` (the hidden check through a worker helper), another hidden check only `h`."""
    source = tmp_path / "solutions" / "parts"
    (source / "tests").mkdir(parents=True)
    (source / "assignment.toml").write_text('title = "parts"\nnotebook = "parts.ipynb"\nfiles = []\n')

    cells = [_solution("f", "def f(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n"),
             _test_cell("f_test", "1. F", "assert f(1) == 2\n"),
             _solution("g", "def g(x):\n    ### BEGIN SOLUTION\n    return 2 * f(x)\n    ### END SOLUTION\n\n\n"
                            "def h(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"),
             _test_cell("g_test", "2. G", "assert g(1) == 4\n", cell_depends_on)]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), source / "parts.ipynb")
    (source / "tests" / "test_g.py").write_text(
        "from autograder.testing import check, worker_helpers\n\n"
        "worker_helpers('''\ndef twice(x):\n    return submission.g(submission.g(x))\n''')\n\n\n"
        f"@check('g twice', points=1, part='2. G'{file_depends_on})\n"
        "def g_twice(sub, ref):\n    assert sub.helpers.twice(0) == 6\n\n\n"
        "@check('h alone', points=1, part='2. G')\ndef h_alone(sub, ref):\n    assert sub.h(3) == 3\n")
    return source


def test_a_check_calling_into_another_part_without_depends_on_is_said_once_per_check(tmp_path):
    notes = [n for n in build(_two_parts(tmp_path)).notes if "depends_on" in n]
    doc = "(docs/writing-assignments.md#parts-that-call-other-parts-depends_on)"
    assert notes == [
        "parts/parts.ipynb: check 'g_test' (part '2. G') calls `f` defined in part '1. F'; add \"depends_on\": "
        "[\"f\"] to the test cell's nbgrader metadata so that a broken `f` does not cost this part's points " + doc,
        "tests/test_g.py: check 'g twice' (part '2. G') calls `f` defined in part '1. F'; declare "
        "depends_on=[\"f\"] so that a broken `f` does not cost this part's points " + doc], notes


def test_depends_on_covering_the_call_leaves_no_note(tmp_path):
    source = _two_parts(tmp_path, cell_depends_on=["f"], file_depends_on=", depends_on=['f']")
    assert not [n for n in build(source).notes if "depends_on" in n]


def _hidden_parts(tmp_path, heading="## {n}. {title}", scale=False):
    """Parts 2 (`Opt`, a plain class) and 3 (`train`) are graded by hidden checks only, part 4's test cell comes
    next; part 3's check declares depends_on=["Opt"], part 5's check calls `train` without declaring it. With
    `scale`, part 3's `train` calls `scale`, written under part 3's heading and read only by part 5's check."""
    source = tmp_path / "solutions" / "hidden_parts"
    (source / "tests").mkdir(parents=True)
    (source / "assignment.toml").write_text('title = "hidden parts"\nnotebook = "hp.ipynb"\nfiles = []\n')

    def md(n, title):
        return [nbformat.v4.new_markdown_cell(heading.format(n=n, title=title) + "\n\nWrite it.")] if heading else []

    body = lambda text: f"    ### BEGIN SOLUTION\n    {text}\n    ### END SOLUTION\n"  # noqa: E731
    train = ("def scale(x):\n" + body("return 2 * x") + "\n\n" if scale else "") + "def train(opt):\n" + body(
        "return scale(opt.step())" if scale else "return opt.step()")
    cells = [nbformat.v4.new_markdown_cell("# Hidden parts"),
             *md(1, "F"), _solution("f", "def f(x):\n" + body("return x + 1")),
             _test_cell("f_test", "1. F", "assert f(1) == 2\n"),
             *md(2, "Optimiser"), nbformat.v4.new_markdown_cell("### Hints\n\nKeep the state."),
             _solution("opt", "class Opt:\n    def step(self):\n        ### BEGIN SOLUTION\n        return 1\n"
                       "        ### END SOLUTION\n"),
             *md(3, "Training loop"), _solution("train", train),
             *md(4, "Data"), _solution("load", "def load():\n" + body("return [1, 2]")),
             _test_cell("load_test", "4. Data", "assert load() == [1, 2]\n"),
             *md(5, "Split"), _solution("split", "def split(xs):\n" + body("return xs[:1], xs[1:]"))]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), source / "hp.ipynb")
    (source / "tests" / "test_hidden.py").write_text(
        "from autograder.testing import check\n\n\n"
        "@check('opt: step', points=1, part='2. Optimiser')\ndef opt_step(sub, ref):\n    assert sub.Opt().step() == 1\n\n\n"
        "@check('train: one epoch', points=1, part='3. Training loop', depends_on=['Opt'])\n"
        "def train_once(sub, ref):\n    assert sub.train(sub.Opt()) in (1, 2)\n\n\n"
        "@check('split: training runs', points=1, part='5. Split')\ndef split_train(sub, ref):\n"
        "    a, b = sub.split([1, 2])\n    assert sub.train(sub.Opt()) in (1, 2) and a == [1]"
        + (" and sub.scale(1) == 2" if scale else "") + "\n")
    return source


@pytest.mark.parametrize("heading", ["## {n}. {title}", "## Part {n}: {title}", "### {title}", None])
def test_a_part_with_hidden_checks_only_keeps_its_definitions(tmp_path, heading):
    """`Opt` and `train` sit under their own parts' headings (or under none) before part 4's test cell: they
    are parts 2's and 3's, not part 4's, so no check is told to declare depends_on for what its own part writes,
    and part 5's check calling `train` is told it is part 3's."""
    notes = [n for n in build(_hidden_parts(tmp_path, heading)).notes if "defined in part" in n]
    assert notes == [
        "tests/test_hidden.py: check 'split: training runs' (part '5. Split') calls `Opt` defined in part "
        "'2. Optimiser', `train` defined in part '3. Training loop'; declare depends_on=[\"Opt\", \"train\"] so that "
        "a broken `Opt` or `train` does not cost this part's points "
        "(docs/writing-assignments.md#parts-that-call-other-parts-depends_on)"], notes


def test_no_depends_on_note_for_a_name_written_under_the_checks_own_heading(tmp_path):
    """`scale`, under part 3's heading and called by part 3's `train`, is read directly only by part 5's check:
    graded there, but part 3's check is not told to declare what its own part writes."""
    notes = [n for n in build(_hidden_parts(tmp_path, scale=True)).notes if "defined in part" in n]
    assert len(notes) == 1 and "check 'split: training runs'" in notes[0] and "`train` defined in part '3. " in notes[0]
    assert "scale" not in notes[0], notes


def test_the_part_a_heading_names():
    from autograder.notebook.parts import definition_part, heading_parts, part_named_by, part_order

    parts = ["1. Convolution", "2. Small CNN", "4. Training loop", "3. SGD with momentum", "5. Data"]
    assert part_named_by("4. Training loop", parts) == "4. Training loop"
    assert part_named_by("Part 4: the training loop", parts) == "4. Training loop"
    assert part_named_by("**Question 3** (2 points)", parts) == "3. SGD with momentum"
    assert part_named_by("4.2 Batches", parts) == "4. Training loop"
    assert part_named_by("Small CNN", parts) == "2. Small CNN"
    assert part_named_by("5. Loading the data", parts) == "5. Data"
    for none in ("Appendix", "CNNs and optimisers", "7. Question", "Assignment 2: CNNs", "2026 notes"):
        assert part_named_by(none, parts) is None, none
    assert part_named_by("1. A", ["1. A", "1. B"]) == "1. A" and part_named_by("1. C", ["1. A", "1. B"]) is None
    assert part_order(parts) == sorted(parts)
    assert part_order(["b", "a"]) == ["b", "a"]
    md = nbformat.v4.new_markdown_cell
    code = nbformat.v4.new_code_cell("x = 1")
    cells = [md("# CNNs\n## 2. Small CNN"), code, md("### Hints\n```\n# not a heading\n```"), code,
             md("## Appendix"), code]
    assert heading_parts(cells, parts) == [None, "2. Small CNN", "2. Small CNN", "2. Small CNN", "2. Small CNN", None]
    # what reads it wins; then the heading's part, then the next test cell's, each only when its checks read it
    assert definition_part(["3. SGD with momentum"], "2. Small CNN", "5. Data", parts) == "3. SGD with momentum"
    assert definition_part(["3. SGD with momentum", "4. Training loop"], "3. SGD with momentum", "5. Data",
                           parts) == "3. SGD with momentum"
    assert definition_part(["4. Training loop", "3. SGD with momentum"], None, "5. Data", parts) == \
        "3. SGD with momentum"
    assert definition_part(["4. Training loop", "5. Data"], "2. Small CNN", "5. Data", parts) == "5. Data"
    assert definition_part([], "2. Small CNN", "5. Data", parts) == "2. Small CNN"
    assert definition_part([], None, "5. Data", parts) == "5. Data"
    assert definition_part([], None, None, parts) is None


@pytest.mark.parametrize("name", ["transformers_bert", "bert_inside"])
def test_the_shipped_assignments_declare_every_call_into_another_part(name, tmp_path):
    from pathlib import Path

    source = Path(__file__).parent.parent / "solutions" / name
    notes = build(source, tmp_path / "assignments", tmp_path / "release").notes
    assert not [n for n in notes if "so that a broken" in n], notes


def test_a_failure_on_a_hidden_line_of_a_built_test_cell_says_only_that_a_hidden_test_failed():
    # the built check keeps its hidden region's markers (comments): np.testing's message, which would show the
    # hidden expected values, never reaches the student
    from autograder.build import transform
    from autograder.judge import _assertion_message

    test = nbformat.v4.new_code_cell(
        "assert f(1) == 1, 'f(1) should be 1'\n### BEGIN HIDDEN TESTS\nimport numpy as np\n"
        "np.testing.assert_allclose(f(7), 49.0)\n### END HIDDEN TESTS",
        metadata={"nbgrader": {"grade": True, "grade_id": "t", "points": 1, "solution": False, "locked": True}})
    (spec,) = transform(nbformat.v4.new_notebook(cells=[test]), "nb").cell_checks
    for f, said in ((lambda x: x * x + 1, "f(1) should be 1"), (lambda x: x if x < 2 else 0, "a hidden test failed")):
        try:
            exec(compile(spec.source, f"<test cell {spec.name}>", "exec"), {"f": f})
        except AssertionError as exc:
            assert _assertion_message(spec, exc) == said
        else:
            raise AssertionError("the test cell passed")

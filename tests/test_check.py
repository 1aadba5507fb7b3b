"""Public checks for students: the build's check("part") cells, `autograder check`, and the in-notebook
`check` give the same verdicts as the public part of grading."""
from __future__ import annotations

import json
import shutil

import nbformat
import pytest

from autograder.grading import build_and_record
from autograder.selfcheck import run_checks
from autograder.entrypoints import command_line as main
from autograder.config import ConfigError, load_config
from autograder.grading import GradeOptions, grade
from autograder.release import load_release
from autograder.student import CHECK_TAG, INSTALL_TAG, SETUP_TAG, SKIP_TAG, Checks, public_checks, resolve_part
from autograder.verify import find_leaks, secret_lines
from tests.conftest import EXAMPLE_SOURCE, make_submission

STUDENT_TABLE = '''
[student]
checks = true
install = ["torch", {module = "sklearn", pip = "scikit-learn"}]
'''

VARIANTS = {
    "full": {},
    # public example passes (one row), hidden random rows fail
    "wrong_normalize": {"return v / v.norm(dim=-1, keepdim=True)": "return v / v.norm()"},
    # the public softmax check fails
    "unnormalised_softmax": {"return e / e.sum(dim=dim, keepdim=True)": "return e"},
    # a helper the test cell needs raises
    "crashing_normalize": {"return v / v.norm(dim=-1, keepdim=True)": "return v.reshape(-1, 3)"},
}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("check-course")
    source = root / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    with open(source / "assignment.toml", "a") as f:
        f.write(STUDENT_TABLE)
    paths = build_and_record(source)
    subs = {name: make_submission(root / f"{name}.ipynb", paths.release / "answer_key.ipynb", replace)
            for name, replace in VARIANTS.items()}
    subs["untouched"] = paths.assignment / "vectors.ipynb"
    return paths, subs


def _tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def test_build_inserts_student_cells(course):
    paths, _ = course
    nb = nbformat.read(paths.assignment / "vectors.ipynb", as_version=4)
    assert INSTALL_TAG in _tags(nb.cells[0]), "the first cell installs what is missing"
    assert "%pip install" in nb.cells[0].source
    setup = [i for i, c in enumerate(nb.cells) if SETUP_TAG in _tags(c)]
    checks = [(i, c.source) for i, c in enumerate(nb.cells) if CHECK_TAG in _tags(c)]
    assert len(setup) == 1 and setup[0] < min(i for i, _ in checks)
    assert [s.split("  #")[0] for _, s in checks] == ['check("1. Normalize")', 'check("2. Softmax")']
    for i, _ in checks:  # right after the part's last test cell
        assert nb.cells[i - 1].metadata["nbgrader"]["grade"] is True
    assert all(SKIP_TAG in _tags(c) for c in nb.cells if set(_tags(c)) & {SETUP_TAG, CHECK_TAG, INSTALL_TAG})
    # the setup cell carries exactly the student notebook's test cells: public code only
    blob = nb.cells[setup[0]].source.split('Checks.decode("')[1].split('")')[0]
    decoded = Checks.decode(blob)
    assert decoded.checks == public_checks(nb)
    assert all("HIDDEN" not in c["source"] and "reference" not in c["source"] for c in decoded.checks)
    assert find_leaks(paths.assignment, secret_lines(paths.source)) == []


def test_build_stays_reproducible(course, tmp_path):
    paths, _ = course
    first = (paths.assignment / "vectors.ipynb").read_bytes()
    build_and_record(paths.source)
    assert (paths.assignment / "vectors.ipynb").read_bytes() == first


BLOCK_THIS_PROJECT = """
import importlib.abc, json, sys
class NotInstalled(importlib.abc.MetaPathFinder):  # as on Colab: this project cannot be imported
    def find_spec(self, name, path=None, target=None):
        if name == "autograder" or name.startswith("autograder."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NotInstalled())
nb = json.load(open(sys.argv[1]))
namespace, said = {"__name__": "__main__"}, []
for cell in nb["cells"]:
    tags = cell.get("metadata", {}).get("tags", [])
    if cell["cell_type"] != "code" or "autograder-install" in tags:  # %pip: IPython syntax, and nothing to install
        continue
    import contextlib, io, traceback
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            exec(compile("".join(cell["source"]), "<cell>", "exec"), namespace)
        except Exception as exc:  # --allow-errors: the next cell runs
            print(f"{type(exc).__name__}: {exc}")
    if "autograder-check" in tags:
        said.append(out.getvalue())
print(json.dumps(said))
assert "autograder" not in sys.modules
"""


def test_check_needs_nothing_of_this_project_in_the_students_kernel(course, tmp_path):
    """The student notebook run top to bottom where `autograder` cannot be imported: every check(...) cell prints
    its verdict (the setup cell carries check()'s code). The slow twin: tests/test_student_fresh_machine.py."""
    import subprocess
    import sys

    _, subs = course
    script = tmp_path / "run_notebook.py"
    script.write_text(BLOCK_THIS_PROJECT)
    for name, passing in (("untouched", 0), ("unnormalised_softmax", 1), ("full", 2)):
        done = subprocess.run([sys.executable, "-I", str(script), str(subs[name])], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        said = json.loads(done.stdout.strip().splitlines()[-1])
        assert [text.split(":")[0] for text in said] == ["1. Normalize", "2. Softmax"], said
        assert sum("1 of 1 public check(s) pass" in text for text in said) == passing, (name, said)


def test_the_student_side_imports_only_the_standard_library():
    """autograder/student_checks.py is what a student's kernel runs: no import outside Python's standard library."""
    import ast
    import sys

    from autograder import student_checks

    tree = ast.parse(open(student_checks.__file__, encoding="utf-8").read())
    imported = {a.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    assert imported and imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level], "no relative imports"


def test_install_cell_is_valid_ipython(course):
    from IPython.core.inputtransformer2 import TransformerManager

    paths, _ = course
    cell = nbformat.read(paths.assignment / "vectors.ipynb", as_version=4).cells[0]
    python = TransformerManager().transform_cell(cell.source)
    compile(python, "<install cell>", "exec")
    assert "run_line_magic('pip'" in python


def test_student_options_are_validated(tmp_path):
    source = tmp_path / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    toml = (source / "assignment.toml").read_text()
    for bad in ("[student]\nchecks = 'yes'\n", "[student]\ninstall = [3]\n", "[student]\ncolab = true\n"):
        (source / "assignment.toml").write_text(toml + bad)
        with pytest.raises(ConfigError):
            load_config(source)
    (source / "assignment.toml").write_text(toml + "[student]\ninstall = ['scikit-learn>=1.3']\n")
    assert load_config(source).student == {"checks": False, "install": [["scikit_learn", "scikit-learn>=1.3"]]}
    # check() needs nothing installed (the notebook carries its code): the install cell never installs this project,
    # which no package index serves
    (source / "assignment.toml").write_text(toml + "[student]\nchecks = true\ninstall = ['torch']\n")
    assert load_config(source).student["install"] == [["torch", "torch"]]
    for this_project in ("'torchgrade'", "'torchgrade>=0.1'", "{module = 'autograder', pip = 'x @ git+https://e.org/x'}"):
        (source / "assignment.toml").write_text(toml + f"[student]\nchecks = true\ninstall = [{this_project}]\n")
        with pytest.raises(ConfigError, match="check\\(\\) needs nothing installed"):
            load_config(source)


def test_limits_are_numbers(tmp_path):
    """A limit that is no number (a typo, a string) is refused with the setting named, not met as a traceback."""
    source = tmp_path / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    toml = (source / "assignment.toml").read_text().split("[limits]")[0]
    for bad in ("check_seconds = 'sixty'", "check_min_seconds = -1", "check_slowdown = true"):
        (source / "assignment.toml").write_text(toml + f"[limits]\n{bad}\n")
        with pytest.raises(ConfigError, match=bad.split()[0]):
            load_config(source)
    (source / "assignment.toml").write_text(toml + "[limits]\ncheck_slowdown = 0\ncheck_min_seconds = 2.5\n")
    limits = load_config(source).limits
    assert (limits.check_slowdown, limits.check_min_seconds, limits.check_seconds) == (0, 2.5, 60.0)


@pytest.mark.slow
def test_check_matches_public_part_of_grading(course, tmp_path, capsys):
    paths, subs = course
    release = load_release(paths.release)
    names = list(subs)
    graded = grade(release, [subs[n] for n in names], GradeOptions(tmp_path / "out", quiet=True))
    public = {c.name: c.public for c in release.checks}
    for name, result in zip(names, graded):
        run = run_checks(subs[name])
        assert not run.error
        verdicts = {r.name: r.status for r in run.results}
        assert set(verdicts) == {n for n in public if n in {"normalize_test", "softmax_public"}}
        grading = {c.name: c.status for c in result.checks}
        for check, status in verdicts.items():
            if public[check]:  # all its code is public: the same verdict
                assert status == grading[check], (name, check, status, grading[check])
            elif status == "failed":  # public part fails: grading fails too
                assert grading[check] == "failed", (name, check)
    by = {n: {r.name: r for r in run_checks(subs[n]).results} for n in ("wrong_normalize", "untouched")}
    assert by["wrong_normalize"]["normalize_test"].status == "passed"  # hidden part is not public
    assert "not implemented yet" in by["untouched"]["normalize_test"].message

    # the command: exit 1 when a check fails, JSON on request
    assert main(["check", str(subs["unnormalised_softmax"]), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert {r["name"]: r["status"] for r in out["results"]} == {"normalize_test": "passed", "softmax_public": "failed"}
    for part in ("2. Softmax", "2", "part2", "Part 2", "2. softmax"):  # its number, or its name in any case
        assert main(["check", str(subs["full"]), "--part", part]) == 0, part
        out = capsys.readouterr().out
        assert "2. Softmax: 1 of 1 public check(s) pass" in out and "Normalize" not in out, part
    assert main(["check", str(subs["full"]), "--part", "9"]) == 2
    assert "no part '9'; the parts with checks are '1. Normalize', '2. Softmax'" in capsys.readouterr().out


def test_a_part_by_its_number_or_its_name():
    parts = ["1. Scaled dot-product attention", "2. Multi-head attention", "10. Extra", "Part 3: Blocks"]
    for asked, part in (("1", parts[0]), ("part1", parts[0]), ("Part 1", parts[0]), ("1.", parts[0]),
                        ("1. scaled dot-product  attention", parts[0]), ("10", parts[2]), ("3", parts[3]),
                        ("part 3", parts[3]), ("Multi", parts[1])):
        assert resolve_part(asked, parts) == part, asked
    with pytest.raises(ValueError, match="no part '4'; the parts with checks are"):
        resolve_part("4", parts)
    with pytest.raises(ValueError, match="names several parts"):
        resolve_part("1", ["1. a", "1 b"])


def test_in_notebook_check_takes_the_parts_number(capsys):
    checks = Checks([{"name": "one", "part": "1. Normalize", "points": 1, "source": "assert x == 1"},
                     {"name": "two", "part": "2. Softmax", "points": 1, "source": "assert x == 2"}])
    for asked in ("1", "part1", 1, "1. Normalize"):
        assert [v.name for v in checks.run(str(asked), {"x": 1})] == ["one"]
    globals()["x"] = 1  # check("part1") reads the caller's globals, as in a notebook
    checks("part1")
    out = capsys.readouterr().out
    assert out.startswith("1. Normalize: 1 of 1 public check(s) pass"), out
    checks("7")
    assert capsys.readouterr().out.startswith("no part '7'; the parts with checks are '1. Normalize', '2. Softmax'")
    del globals()["x"]


@pytest.mark.slow
def test_in_notebook_check_matches_autograder_check(course):
    """The student notebook runs top to bottom in a real kernel; check() verdicts equal the CLI's."""
    from nbclient import NotebookClient

    paths, subs = course
    for name in ("untouched", "unnormalised_softmax"):
        nb = nbformat.read(subs[name], as_version=4)
        nb.cells.append(nbformat.v4.new_code_cell(
            "import json\ncheck()\nprint('VERDICTS', json.dumps(check.results()))"))
        NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(subs[name].parent)}}).execute()
        outputs = {i: "".join(o.get("text", "") for o in c.get("outputs", [])) for i, c in enumerate(nb.cells)}
        errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert not [e for e in errors if e["ename"] not in ("NotImplementedError", "AssertionError")], errors
        part_outputs = [outputs[i] for i, c in enumerate(nb.cells) if CHECK_TAG in _tags(c)]
        assert part_outputs[0].startswith("1. Normalize:") and part_outputs[1].startswith("2. Softmax:")
        kernel = json.loads(outputs[len(nb.cells) - 1].split("VERDICTS ", 1)[1])
        cli = run_checks(subs[name]).results
        assert {v["name"]: v["status"] for v in kernel} == {r.name: r.status for r in cli}, name
    assert "softmax of equal logits should be uniform" in part_outputs[1]


def test_a_file_the_notebook_reads_beside_it_is_there_for_its_public_checks(tmp_path):
    data = nbformat.v4.new_code_cell('TEXT = open("data/x.csv").read()')
    test = nbformat.v4.new_code_cell('assert TEXT.startswith("a,b"), "data/x.csv holds a,b"')
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "reads", "points": 1}
    nb = nbformat.v4.new_notebook(cells=[data, test])
    nbformat.write(nb, tmp_path / "hw.ipynb")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.csv").write_text("a,b\n1,2\n")
    [result] = run_checks(tmp_path / "hw.ipynb").results
    assert (result.status, result.message) == ("passed", "")


def test_a_file_named_by_a_constant_beside_the_notebook_is_there_too(tmp_path):
    data = nbformat.v4.new_code_cell('DATA_PATH = "data/points.csv"\n\ndef load(path):\n    return open(path).read()')
    test = nbformat.v4.new_code_cell('assert load(DATA_PATH).startswith("x,y"), "data/points.csv holds x,y"')
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "loads", "points": 1}
    nbformat.write(nbformat.v4.new_notebook(cells=[data, test]), tmp_path / "hw.ipynb")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "points.csv").write_text("x,y\n1,2\n")
    [result] = run_checks(tmp_path / "hw.ipynb").results
    assert (result.status, result.message) == ("passed", "")


def test_a_notebook_without_test_cells_has_no_public_checks_rather_than_0_of_0(tmp_path, capsys):
    """Not "0 of 0 public checks pass": the notebook has none (not this framework's student notebook, say), and
    nothing of it is run."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import matplotlib_not_here\n\ndef f(x):\n    return x\n")]
    path = tmp_path / "plain.ipynb"
    nbformat.write(nb, path)
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "0 of 0" not in out and "matplotlib_not_here" not in out, out  # no worker loaded it
    assert f"{path} has no public checks: none of its cells is a test cell" in out, out

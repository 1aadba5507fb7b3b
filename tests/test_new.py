"""`autograder new NAME`: a skeleton that builds and verifies as written, and never overwrites."""
import nbformat
import pytest

from autograder.build import build
from autograder.scaffold import ScaffoldError, new_assignment


def test_new_writes_a_skeleton_with_a_public_and_a_hidden_check_and_a_corpus(tmp_path):
    target = new_assignment("relu_intro", tmp_path / "solutions")
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()) == [
        "assignment.toml", "corpus/cases.py", "relu_intro.ipynb", "tests/test_hidden.py"]
    paths = build(target)
    assert paths.assignment == tmp_path / "assignments" / "relu_intro"  # beside solutions/
    student = "\n".join(c.source for c in nbformat.read(paths.assignment / "relu_intro.ipynb", as_version=4).cells)
    assert "raise NotImplementedError()" in student and "clamp" not in student
    assert "assert torch.equal(relu(x)" in student  # the public check


def test_new_refuses_an_existing_folder_and_a_bad_name(tmp_path):
    new_assignment("hw1", tmp_path)
    with pytest.raises(ScaffoldError, match="exists: choose another name"):
        new_assignment("hw1", tmp_path)
    with pytest.raises(ScaffoldError, match="an assignment name is letters, digits and _"):
        new_assignment("../hw", tmp_path)


@pytest.mark.slow
def test_the_skeleton_verifies(tmp_path):
    from autograder.entrypoints import command_line as main
    from autograder.verify import verify

    assert main(["new", "relu_intro", "--solutions", str(tmp_path / "solutions")]) == 0
    report = verify(tmp_path / "solutions" / "relu_intro")
    assert report.ok, report.problems
    assert "corpus: 1 correct variants, 1 wrong submissions (1 confined to one part): 0 problem(s)" in report.lines

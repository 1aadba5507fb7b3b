"""The same submission gets the same scores and messages in any order, alone or in a batch, with any
number of jobs; and the class summary counts what happened."""
from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pytest

from autograder.grading import GradeOptions, grade, scrub
from autograder.reports.class_statistics import check_statistics
from autograder.sandbox.forkserver import shutdown_fork_server

pytestmark = pytest.mark.slow

VARIANTS = {
    "correct": ({}, []),
    "last_dim_only": ({"x.max(dim=dim, keepdim=True)": "x.max(dim=-1, keepdim=True)",
                       "e.sum(dim=dim, keepdim=True)": "e.sum(dim=-1, keepdim=True)"}, []),
    "no_relu": ({"torch.relu(self.linear(x))": "self.linear(x)"}, []),
    # draws from torch's and Python's generators: seeded before every check
    "noisy": ({"return e / e.sum(dim=dim, keepdim=True)":
               "import random\n    noise = torch.randn_like(x) * 1e-4 * random.random()\n"
               "    return (e / e.sum(dim=dim, keepdim=True)) + noise"}, []),
    # state kept between calls: a fresh worker per submission, whatever ran before
    "stateful": ({'"""Rows of v (N, D) scaled to unit L2 norm."""':
                  '"""Rows of v (N, D) scaled to unit L2 norm."""\n    CALLS.append(1)\n'
                  '    if len(CALLS) > 1:\n        return v'}, ["CALLS = []\n"]),
    # a memory address and a set of strings in an error message
    "address_and_set": ({'"""Rows of v (N, D) scaled to unit L2 norm."""':
                         '"""Rows of v (N, D) scaled to unit L2 norm."""\n'
                         '    raise ValueError(f"{object()} {set(\'alpha beta gamma delta epsilon\'.split())}")'},
                        []),
    "exits": ({'"""Rows of v (N, D) scaled to unit L2 norm."""':
               '"""Rows of v (N, D) scaled to unit L2 norm."""\n    import os\n    os._exit(4)'}, []),
}


@pytest.fixture(scope="module")
def batch(example_build, example_release, tmp_path_factory):
    from tests.conftest import make_submission

    folder = tmp_path_factory.mktemp("determinism")
    key = example_build.release / "answer_key.ipynb"
    subs = [make_submission(folder / f"{name}.ipynb", key, replace, append)
            for name, (replace, append) in VARIANTS.items()]
    subs.append(example_build.assignment / "vectors.ipynb")  # the stub
    runs = {}
    runs["jobs1"] = grade(example_release, subs, GradeOptions(folder / "out1", quiet=True, jobs=1))
    runs["jobs2_reversed"] = grade(example_release, list(reversed(subs)),
                                   GradeOptions(folder / "out2", quiet=True, jobs=2))
    runs["alone"] = [grade(example_release, [s], GradeOptions(folder / f"alone-{s.stem}", quiet=True))[0]
                     for s in (subs[3], subs[5])]
    shutdown_fork_server()
    csvs = {name: (folder / f"out{n}" / "grades.csv").read_bytes() for n, name in ((1, "jobs1"), (2, "jobs2"))}
    return {"runs": runs, "csv": csvs, "folder": folder}


def outcome(result):
    return [(c.name, c.score, c.status, c.message) for c in result.checks], result.notes, result.error


def test_jobs_and_order_do_not_change_anything(batch):
    assert batch["csv"]["jobs1"] == batch["csv"]["jobs2"]
    first = {r.submission: outcome(r) for r in batch["runs"]["jobs1"]}
    second = {r.submission: outcome(r) for r in batch["runs"]["jobs2_reversed"]}
    assert first == second


def test_alone_or_in_a_batch_is_the_same(batch):
    first = {r.submission: outcome(r) for r in batch["runs"]["jobs1"]}
    for r in batch["runs"]["alone"]:
        assert outcome(r) == first[r.submission], r.submission


def test_results_are_in_the_order_given(batch):
    assert [r.submission for r in batch["runs"]["jobs2_reversed"]] == \
        list(reversed([r.submission for r in batch["runs"]["jobs1"]]))


def test_expected_scores(batch):
    scores = {r.submission: r.score for r in batch["runs"]["jobs1"]}
    assert scores["correct"] == 11 and scores["vectors"] == 0
    assert scores["no_relu"] == 9
    assert 7 < scores["last_dim_only"] < 11  # partial credit: one dimension of three
    assert scores["exits"] == 9 and scores["address_and_set"] == 9
    messages = {r.submission: {c.name: c.message for c in r.checks} for r in batch["runs"]["jobs1"]}
    assert "0x..." in messages["address_and_set"]["normalize_test"]
    assert "exit code 4" in messages["exits"]["normalize_test"]


def test_scrub_hides_what_changes_between_runs():
    assert scrub("<object object at 0x7f3a2b1c9d80> in /tmp/ag-worker-k2j_x1/data") == \
        "<object object at 0x...> in /tmp/work/data"


def test_summary_counts_the_class(batch):
    results = batch["runs"]["jobs1"]
    by_name = {s.name: s for s in check_statistics(results)}
    normalize = by_name["normalize_test"]
    assert normalize.scored == len(results)
    assert normalize.passed + normalize.partial + normalize.failed == len(results)
    assert normalize.stub == 1
    assert normalize.failed == 4  # stateful, address_and_set, exits, the stub
    assert any("exit code 4" in text for text, _ in normalize.messages)
    values = by_name["softmax: values along every dim"]
    assert values.partial >= 1
    out = batch["folder"] / "out1"
    md = (out / "summary.md").read_text()
    assert "| normalize_test |" in md and "Most common messages" in md
    rows = list(csv.DictReader(io.StringIO((out / "summary.csv").read_text())))
    assert [r["check"] for r in rows] == [c.name for c in results[0].checks]
    assert int(next(r for r in rows if r["check"] == "normalize_test")["failed"]) == 4


TRANSFORMERS = Path(__file__).resolve().parent.parent / "solutions" / "transformers_bert"


@pytest.mark.skipif(not TRANSFORMERS.is_dir(), reason="no Transformers assignment")
def test_transformers_variants_grade_identically_again(tmp_path):
    """The Transformers answer key, its correct variants and a sample of wrong submissions, among them one
    drawing its MLM masks from the global generator: the same scores and messages with --jobs 2 in one order
    and --jobs 1 in the opposite order."""
    pytest.importorskip("transformers")
    from autograder.grading import build_and_record
    from autograder.release import load_release
    from autograder.corpus import load_corpus, make_notebook

    source = tmp_path / "solutions" / "transformers_bert"
    shutil.copytree(TRANSFORMERS, source)
    release = load_release(build_and_record(source).release)
    key = release.dir / "answer_key.ipynb"
    folder = tmp_path / "submissions"
    folder.mkdir()
    corpus = load_corpus(source)
    subs = [key] + [make_notebook(folder / f"variant-{v.name}.ipynb", key, v) for v in corpus.variants]
    sample = [b for i, b in enumerate(corpus.bugs) if (i % 8 == 0 or b.name == "mask_inputs_global_rng") and not b.stub]
    subs += [make_notebook(folder / f"bug-{b.name}.ipynb", key, b) for b in sample]
    ids = [p.stem for p in subs]
    first = grade(release, subs, GradeOptions(tmp_path / "out1", quiet=True, jobs=2, ids=ids))
    second = grade(release, subs[::-1], GradeOptions(tmp_path / "out2", quiet=True, jobs=1, ids=ids[::-1]))
    shutdown_fork_server()
    assert (tmp_path / "out1" / "grades.csv").read_bytes() == (tmp_path / "out2" / "grades.csv").read_bytes()
    assert {r.submission: outcome(r) for r in first} == {r.submission: outcome(r) for r in second}
    full = {r.submission: r.score for r in first}
    assert all(full[p.stem] == full["answer_key"] for p in subs[:1 + len(corpus.variants)])


def test_scrub_writes_control_characters_out_so_a_terminal_never_acts_on_them():
    """A message of student code with a terminal's escape sequence or a carriage return (which overwrites the line
    when a TA reads feedback.md with cat) shows them as text; tabs and newlines stay."""
    assert scrub("a\x1b[2Jb\r\nc\rd\x00\te\x85") == "a\\x1b[2Jb\nc\\x0dd\\x00\te\\x85"

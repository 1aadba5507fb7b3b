"""The Transformers answer key, top to bottom in a fresh Jupyter kernel, then graded like a submission.

The notebook loads its encoder and IMDB from the paths its settings read from the environment
(BERT_ENCODER, IMDB_PATH): here a tiny encoder and an IMDB-like parquet file built by the test
(tests/transformers_bert/tiny_world.py). Every cell runs, training included. Then the executed notebook
and the checkpoint it saved are graded: `autograder grade` reports the rubric pending (no CUDA), and
`autograder rubric --device cpu` loads the notebook's own checkpoint into the notebook's own class and
measures the same validation accuracy that the notebook printed for that checkpoint.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("pyarrow")

from autograder.grading import build_and_record
from autograder.entrypoints import command_line as main
from autograder.grading import GradeOptions, grade
from autograder.release import load_release
from autograder.deferred.accuracy.check import rubric_configs
from tests.notebook_kernel import execute_in_folder
from tests.transformers_bert.tiny_world import build_world

pytestmark = pytest.mark.slow

SOURCE = Path(__file__).resolve().parent.parent / "solutions" / "transformers_bert"
EPOCH_LINE = re.compile(r"epoch (\d+): .* valid loss ([\d.]+) acc ([\d.]+)%")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    shutil.copytree(SOURCE, root / "solutions" / "transformers_bert")
    return load_release(build_and_record(root / "solutions" / "transformers_bert").release)


@pytest.fixture(scope="module")
def executed(course, tmp_path_factory):
    """The answer key run in a fresh kernel in a student's folder: (notebook path, its stdout, world)."""
    world = build_world(tmp_path_factory.mktemp("world"), n_train=800, n_test=100)
    folder = tmp_path_factory.mktemp("student")
    env = {"BERT_ENCODER": str(world["encoder"]), "IMDB_PATH": str(world["imdb"]), "TRAIN_SUBSET": "0",
           "EPOCHS": "3", "MAX_LEN": "64", "TQDM_DISABLE": "1", "OMP_NUM_THREADS": "1"}
    path, stdout = execute_in_folder(course.dir / "answer_key.ipynb", folder, env, "transformers_bert.ipynb")
    return path, stdout, world


def test_notebook_runs_top_to_bottom_and_saves_its_checkpoint(executed):
    path, stdout, _ = executed
    assert (path.parent / "bert_gru_sentiment.pt").is_file()
    assert "train:    560 reviews" in stdout and "valid:    240 reviews" in stdout  # the 70/30 split
    epochs = EPOCH_LINE.findall(stdout)
    assert [int(e) for e, _, _ in epochs] == [1, 2, 3]
    assert max(float(acc) for _, _, acc in epochs) > 75, stdout  # the tiny reviews are easy: it learns
    assert re.search(r"best checkpoint \(valid loss [\d.]+\): test loss [\d.]+ acc [\d.]+%", stdout)


def test_executed_notebook_gets_every_point_and_the_rubric_measures_its_checkpoint(course, executed, tmp_path):
    path, stdout, world = executed
    out = tmp_path / "out"
    (result,) = grade(course, [path], GradeOptions(out, quiet=True, summary=False, ids=["student"]))
    (rubric_name,) = [c.name for c in rubric_configs(course.checks)]
    lost = {c.name: c.message for c in result.checks if c.status != "pending" and c.score < c.max_score}
    assert lost == {}
    assert sorted(c.name for c in result.checks if c.status == "pending") == sorted([rubric_name, "q1", "q2", "q3"])

    code = main(["rubric", str(course.dir), str(path), "--out", str(out), "--quiet", "--device", "cpu",
                 "--encoder", str(world["encoder"]), "--imdb", str(world["imdb"])])
    assert code == 0
    details = json.loads((out / "student" / "rubric.json").read_text())
    # the checkpoint is the epoch with the lowest validation loss; the grader measures its accuracy itself
    best = min(EPOCH_LINE.findall(stdout), key=lambda e: float(e[1]))
    assert details["n"] == 240
    assert abs(100 * details["accuracy"] - float(best[2])) < 0.01, (details, best)
    graded = json.loads((out / "student" / "grading.json").read_text())
    (rubric,) = [c for c in graded["checks"] if c["name"] == rubric_name]
    expected = 8 * min(max((details["accuracy"] - 0.5) / 0.4, 0.0), 1.0)
    assert rubric["status"] != "pending" and abs(rubric["score"] - expected) < 1e-6

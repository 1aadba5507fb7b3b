"""`autograder similarity`: disguise does not hide a copy, independent work is not flagged, the report escapes
every student string, bad input is a row with a message (autograder/similarity/)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import nbformat
import numpy as np
import pytest

from autograder.similarity import Entry, Settings, find_similar, layout
from autograder.similarity.compare import PartScore
from autograder.similarity.disguise import TRANSFORMATIONS, combine, disguise_notebook
from autograder.similarity.fingerprints import fingerprints
from autograder.similarity.normalise import cell_definitions

ATTENTION = '''def attention(q, k, v, mask=None):
    """Scaled dot-product attention."""
    d = q.size(-1)
    kt = k.transpose(-2, -1)
    scores = torch.matmul(q, kt) / math.sqrt(d)  # (B, T, T)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    if weights.dim() > 3:
        weights = weights.view(weights.shape[0], -1, weights.shape[-1])
    total = 0
    for row in weights:
        total += row.sum()
    out = torch.matmul(weights, v)
    return out, weights, total
'''

# the same task written independently, in another style
ATTENTION_OTHER = '''def attention(query, key, value, mask=None):
    logits = torch.einsum("bid,bjd->bij", query, key) * query.shape[-1] ** -0.5
    if mask is not None:
        logits = logits + (1.0 - mask.float()) * -1e9
    probs = torch.exp(logits - logits.max(dim=-1, keepdim=True).values)
    probs = probs / probs.sum(dim=-1, keepdim=True)
    norms = [p.norm() for p in probs]
    return probs @ value, probs, sum(norms)
'''

TRANSFORMS_OF_CODE = [t for t in TRANSFORMATIONS if t not in ("cells", "all")]  # one cell's code each


def _fps(source: str) -> np.ndarray:
    return np.unique(np.concatenate([fingerprints(d.tokens) for d in cell_definitions(source, set())]))


def _score(a: str, b: str) -> float:
    fa, fb = _fps(a), _fps(b)
    return PartScore(len(np.intersect1d(fa, fb)), len(fa), len(fb)).score


def _notebook(path: Path, cells: list[tuple[str, str]], grade_ids: bool = True) -> Path:
    nb = nbformat.v4.new_notebook()
    for i, (kind, source) in enumerate(cells):
        cell = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
        if kind == "code" and grade_ids and source.startswith("def "):
            cell.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": f"cell{i}"}
        nb.cells.append(cell)
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("how", TRANSFORMS_OF_CODE)
def test_each_disguise_keeps_the_fingerprints(tmp_path, how):
    nb = json.loads(_notebook(tmp_path / "a.ipynb", [("code", ATTENTION)]).read_text())
    disguised = disguise_notebook(nb, how, random.Random(3))
    source = "".join(disguised["cells"][0]["source"])
    assert source.strip() != ATTENTION.strip()  # the transformation did change the text
    assert _score(ATTENTION, source) >= 0.9, how
    assert _score(ATTENTION_OTHER, source) < 0.3


def test_cells_split_merged_and_moved(tmp_path):
    two = ATTENTION + "\n\ndef helper(x):\n    y = x * 2\n    z = y.sum(dim=0).mean()\n    return z - x.max()\n"
    nb = json.loads(_notebook(tmp_path / "a.ipynb", [("code", two), ("code", "def last():\n    return 1")]).read_text())
    disguised = disguise_notebook(nb, "cells", random.Random(4))
    assert len(disguised["cells"]) != len(nb["cells"]) or disguised["cells"][0]["source"] != nb["cells"][0]["source"]
    code = "\n\n".join("".join(c["source"]) for c in disguised["cells"])
    assert _score(two, code) >= 0.9


def test_every_disguise_at_once_and_the_independent_writing(tmp_path):
    nb = json.loads(_notebook(tmp_path / "a.ipynb", [("code", ATTENTION)]).read_text())
    disguised = disguise_notebook(nb, "all", random.Random(5))
    code = "\n\n".join("".join(c["source"]) for c in disguised["cells"] if c["cell_type"] == "code")
    assert _score(ATTENTION, code) >= 0.8
    assert _score(ATTENTION, ATTENTION_OTHER) < 0.3


def test_equivalent_spellings_are_one_token_stream():
    spelled = [
        "def f(a, b):\n    return torch.matmul(a, b.transpose(-2, -1)).view(2, -1)\n",
        "def f(a, b):\n    return (a @ b.mT).reshape(2, -1)\n",
        "def f(a, b):\n    return a.matmul(b.transpose(-1, -2)).contiguous().reshape(2, -1)\n",
    ]
    tokens = {" ".join(t.text for t in cell_definitions(s, set())[0].tokens) for s in spelled}
    assert len(tokens) == 1
    softmax = ["def g(x):\n    y = F.softmax(x * 2, dim=-1)\n    return y if x.size(0) > 1 else x ** 0.5\n",
               "def g(z):\n    w = torch.softmax(z * 2, dim=-1)\n    return w if 1 < z.shape[0] else math.sqrt(z)\n",
               "def g(z):\n    w = (z * 2).softmax(dim=-1)\n    unused = 3\n    pass\n    return w if 1 < z.shape[0] else math.sqrt(z)\n"]
    assert len({" ".join(t.text for t in cell_definitions(s, set())[0].tokens) for s in softmax}) == 1


def test_independent_statements_in_any_order_are_one_token_stream():
    a = "def h(x):\n    p = x + 1\n    q = x * 2\n    r = x - 3\n    return p, q, r\n"
    b = "def h(x):\n    r = x - 3\n    p = x + 1\n    q = x * 2\n    return p, q, r\n"
    dependent = "def h(x):\n    p = x + 1\n    x = x * 2\n    return p, x\n"
    swapped = "def h(x):\n    x = x * 2\n    p = x + 1\n    return p, x\n"
    stream = lambda s: " ".join(t.text for t in cell_definitions(s, set())[0].tokens)  # noqa: E731 - a test helper
    assert stream(a) == stream(b)
    assert stream(dependent) != stream(swapped)  # an order that changes what it computes is kept


def _class(tmp_path: Path, students: dict[str, str], student_nb: Path | None = None, key: Path | None = None):
    folder = tmp_path / "class"
    folder.mkdir(exist_ok=True)
    entries = []
    for sid, code in students.items():
        path = _notebook(folder / f"{sid}.ipynb", [("markdown", "## 1. Attention"), ("code", code)])
        entries.append(Entry(sid, path))
    lay = layout(["1. Attention"], student_nb, key)
    return find_similar(entries, lay, key, Settings(common_min=50))


def _flagged(comparison) -> set[frozenset[str]]:
    return {frozenset((comparison.sources[p.a].id, comparison.sources[p.b].id)) for p in comparison.pairs if p.flagged}


def test_a_copy_is_flagged_independent_work_is_not(tmp_path):
    nb = json.loads(_notebook(tmp_path / "a.ipynb", [("code", ATTENTION)]).read_text())
    disguised = "".join(disguise_notebook(nb, "all", random.Random(1))["cells"][0]["source"])
    comparison = _class(tmp_path, {"ann": ATTENTION, "bob": disguised, "cat": ATTENTION_OTHER})
    assert _flagged(comparison) == {frozenset(("ann", "bob"))}


def test_two_sources_combined_part_by_part(tmp_path):
    one = _notebook(tmp_path / "one.ipynb", [("code", ATTENTION), ("code", "def other(x):\n    return 1")])
    two = _notebook(tmp_path / "two.ipynb", [("code", "def attention(q):\n    return q"), ("code", ATTENTION_OTHER.replace(
        "def attention", "def other"))])
    both = combine(json.loads(one.read_text()), json.loads(two.read_text()), {"cell1"})
    assert "".join(both["cells"][0]["source"]) == ATTENTION and "einsum" in "".join(both["cells"][1]["source"])


def test_starter_code_and_common_code_are_not_similarity(tmp_path):
    starter = _notebook(tmp_path / "starter.ipynb", [("markdown", "## 1. Attention"), ("code", ATTENTION)],
                        grade_ids=False)
    # everyone handed in the starter code untouched, and two wrote the same other code
    comparison = _class(tmp_path, {"ann": ATTENTION, "bob": ATTENTION, "cat": ATTENTION + "\n" + ATTENTION_OTHER.replace(
        "def attention", "def extra")}, student_nb=starter)
    assert not _flagged(comparison)
    assert {s.id for s in comparison.sources if s.problem} == {"ann", "bob"}  # nothing written


def test_a_submission_close_to_the_answer_key_is_reported(tmp_path):
    key = _notebook(tmp_path / "key.ipynb", [("markdown", "## 1. Attention"), ("code", ATTENTION)])
    nb = json.loads(key.read_text())
    leaked = "".join(disguise_notebook(nb, "rename", random.Random(2))["cells"][1]["source"])
    comparison = _class(tmp_path, {"ann": leaked, "cat": ATTENTION_OTHER}, key=key)
    assert {comparison.sources[i].id for i in comparison.key_flagged} == {"ann"}


def test_groups_of_three(tmp_path):
    nb = json.loads(_notebook(tmp_path / "a.ipynb", [("code", ATTENTION)]).read_text())
    copies = {f"s{i}": "".join(disguise_notebook(nb, how, random.Random(i))["cells"][0]["source"])
              for i, how in enumerate(["rename", "comments", "dead_code"])}
    comparison = _class(tmp_path, {**copies, "other": ATTENTION_OTHER})
    assert [[comparison.sources[i].id for i in g] for g in comparison.groups] == [["s0", "s1", "s2"]]


def test_written_answers_are_compared_apart(tmp_path):
    answer = ("Subtracting the maximum keeps every exponent at or below zero, so exp never overflows to infinity and "
              "the ratios are unchanged because the factor cancels in the numerator and the denominator.")
    folder = tmp_path / "class"
    folder.mkdir()
    entries = []
    for sid, text in {"ann": answer, "bob": answer.upper().replace(",", " ;"),
                      "cat": "Large logits make exp overflow; shifting by a constant does not change the result."}.items():
        path = _notebook(folder / f"{sid}.ipynb", [("markdown", "## 4. Question"), ("markdown", text)])
        entries.append(Entry(sid, path))
    comparison = find_similar(entries, layout(["4. Question"], None, None), None, Settings(common_min=50))
    flagged = [p for p in comparison.pairs if p.flagged]
    assert [(p.channel, comparison.sources[p.a].id, comparison.sources[p.b].id) for p in flagged] == \
        [("written answers", "ann", "bob")]


# -- bad input ---------------------------------------------------------------------------------------------

def test_bad_input_is_a_row_each(tmp_path, monkeypatch):
    import autograder.notebook.load as load

    monkeypatch.setattr(load, "MAX_NOTEBOOK_BYTES", 400_000)  # the 200 MB notebook, scaled down
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "broken.ipynb").write_text('{"cells": [', encoding="utf-8")
    (folder / "empty.ipynb").write_text("", encoding="utf-8")
    huge = _notebook(folder / "huge.ipynb", [("code", ATTENTION), ("markdown", "x" * 500_000)])
    giant = "\n\n".join(ATTENTION.replace("def attention", f"def attention{i}") for i in range(300))
    _notebook(folder / "giant.ipynb", [("code", giant)])
    _notebook(folder / "same1.ipynb", [("code", ATTENTION)])
    _notebook(folder / "same2.ipynb", [("code", ATTENTION)])
    _notebook(folder / "unparsable.ipynb", [("code", ATTENTION + "\n    def broken(:\n")])
    entries = [Entry(p.stem, p) for p in sorted(folder.glob("*.ipynb"))] + [Entry("gone", folder / "gone.ipynb")]
    comparison = find_similar(entries, layout([], None, None), None, Settings(common_min=50))
    problems = {s.id: s.problem for s in comparison.sources if s.problem}
    assert set(problems) == {"broken", "empty", "huge", "gone"}
    assert "invalid JSON" in problems["broken"] and "empty" in problems["empty"] and "MB" in problems["huge"]
    assert huge.exists()
    flagged = _flagged(comparison)
    assert frozenset(("same1", "same2")) in flagged  # identical submissions: similar, and nothing breaks
    assert frozenset(("same1", "unparsable")) in flagged  # code that does not parse is still compared, by tokens
    assert frozenset(("giant", "same1")) in flagged


# -- the report and the command --------------------------------------------------------------------------

def test_command_end_to_end_and_escaping(tmp_path, capsys):
    import shutil

    from autograder.build import build

    source = tmp_path / "solutions" / "vectors"
    shutil.copytree(Path(__file__).parent / "example_course" / "solutions" / "vectors", source)
    key = build(source).release / "answer_key.ipynb"
    subs = tmp_path / "subs"
    subs.mkdir()
    evil = '<script>alert("x")</script>'
    code = ATTENTION.replace("total = 0", f"total = 0  # {evil}").replace('"-inf"', f"'{evil}'")
    nb = nbformat.read(key, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(code))
    nbformat.write(nb, subs / "ann.ipynb")
    copy = disguise_notebook(json.loads((subs / "ann.ipynb").read_text()), "rename", random.Random(0))
    copy["cells"][-1]["source"] = disguise_notebook({"cells": [{**copy["cells"][-1], "metadata": {}}]}, "rename",
                                                    random.Random(1))["cells"][0]["source"]
    (subs / "bob.ipynb").write_text(json.dumps(copy), encoding="utf-8")
    (subs / "<script>alert(1)<script>.ipynb").write_text("not json", encoding="utf-8")  # its name is in its row
    out = tmp_path / "out"
    from autograder.cli import main

    assert main(["similarity", str(source), str(subs), "--out", str(out)]) == 0
    done = capsys.readouterr()
    # the code both wrote, and the answer key's written answer both handed in; both are the key's code otherwise
    assert "2 similar pair(s)" in done.out and "2 close to the answer key" in done.out
    report = out / "similarity"
    rows = (report / "pairs.csv").read_text(encoding="utf-8")
    assert "code,ann,bob," in rows and "written answers,ann,bob," in rows
    pages = [report / "index.html", *sorted((report / "pairs").glob("*.html"))]
    assert len(pages) == 3
    texts = [page.read_text(encoding="utf-8") for page in pages]
    assert all("<script" not in text for text in texts)
    assert "&lt;script&gt;" in texts[0] and any("&lt;script&gt;" in text for text in texts[1:])
    assert not any(word in text.lower() for text in texts for word in ("plagiar", "cheat", "copied from"))
    assert 'href="#b-L' in pages[1].read_text(encoding="utf-8")  # matching lines link to the other side
    assert "not compared" in rows and "invalid JSON" in rows
    assert not list(out.glob("*/results.json"))  # never in a student's results


def test_every_student_string_is_escaped(tmp_path):
    from autograder.similarity.report import write_report

    evil = '<script>alert("x")</script>'
    folder = tmp_path / "class"
    folder.mkdir()
    code = ATTENTION.replace("total = 0", f"total = '{evil}'")
    answer = f"{evil} because the maximum keeps every exponent at or below zero so nothing overflows in exp at all"
    entries = []
    for sid in ("a", "b"):
        path = _notebook(folder / f"{sid}.ipynb", [("markdown", "## 1. Attention"), ("code", code),
                                                    ("markdown", answer)])
        entries.append(Entry(f"{evil}{sid}", path))
    (folder / "bad.ipynb").write_text("[]", encoding="utf-8")
    entries.append(Entry(evil, folder / "bad.ipynb"))
    comparison = find_similar(entries, layout(["1. Attention"], None, None), None, Settings(common_min=50))
    index = write_report(tmp_path / "out", evil, comparison, layout(["1. Attention"], None, None))
    pages = [index, *sorted((index.parent / "pairs").glob("*.html"))]
    assert len(pages) == 3  # the code pair and the written answers pair
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "<script" not in text and "&lt;script&gt;" in text

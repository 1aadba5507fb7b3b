"""Mutation analysis (`autograder verify NAME --mutants`, autograder/mutants/): the operators make valid, distinct
mutants of the lines a student writes; each part's definitions are found; a sample is seeded; on the example
assignment a mutant is killed by the existing hidden checks, one is reported probably equivalent, one that the
checks never run and one they let through are survivors; the report lists scores and diffs."""
from __future__ import annotations

import ast
import shutil

import pytest

from autograder.mutants import (EQUIVALENT, KILLED, NOT_GRADED, OPERATORS, SURVIVED, Definition, Mutant, Outcome,
                                graded_definitions, mutations, plan)
from autograder.mutants.analysis import MutationReport, PartScore, probe_source
from autograder.mutants.operators import reach_source
from tests.conftest import EXAMPLE_SOURCE

ATTENTION = '''\
def attention(q, k, v, mask=None, p=0.1):
    """(B, H, T, D) -> values, weights"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask[:, None, None, :].bool(), -1e9)
    weights = torch.softmax(scores, dim=-1)
    weights = F.dropout(weights, p=p)
    return weights @ v, weights
'''

BLOCK = '''\
class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.ffn = nn.Sequential(nn.Linear(d, d), nn.GELU())
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        return self.norm(x + self.dropout(self.ffn(x)))
'''

LOOP = '''\
def train(model, batches, optimizer):
    model.train()
    total = 0.0
    for x, y in batches:
        loss = F.cross_entropy(model(x)[:, :-1], y, ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    with torch.no_grad():
        model.eval()
    return total / len(batches)
'''


def _changed_lines(before: str, after: str) -> set[int]:
    """1-based lines of `before` that a mutant rewrites (by a line diff)."""
    import difflib

    out = set()
    matcher = difflib.SequenceMatcher(a=before.split("\n"), b=after.split("\n"), autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag != "equal":
            out |= set(range(i1 + 1, max(i2, i1 + 1) + 1))
    return out


@pytest.mark.parametrize("source", [ATTENTION, BLOCK, LOOP], ids=["attention", "block", "loop"])
def test_every_mutant_parses_differs_and_is_distinct(source):
    found = mutations(source)
    assert found, "no mutant"
    dumps = {ast.dump(ast.parse(source))}
    for m in found:
        tree = ast.parse(m.source)  # valid Python
        assert ast.dump(tree) not in dumps, f"{m.description}: the same tree as the reference or another mutant"
        dumps.add(ast.dump(tree))
        assert m.operator in OPERATORS and m.description
    assert [m.source for m in mutations(source)] == [m.source for m in found], "not deterministic"


def _sources(source: str, operator: str) -> list[str]:
    return [m.source for m in mutations(source) if m.operator == operator]


def test_operators_make_the_deep_learning_mistakes():
    def has(operator, source, old, new):
        lines = [m for m in _sources(source, operator) if new in m and old not in m]
        assert lines, f"{operator}: no mutant turns {old!r} into {new!r}"

    has("scale", ATTENTION, "/ math.sqrt(q.size(-1))", "q @ k.transpose(-2, -1)\n")
    has("scale", ATTENTION, "math.sqrt(q.size(-1))", "/ q.size(-1)")
    has("dim", ATTENTION, "dim=-1", "torch.softmax(scores, dim=-2)")
    has("dim", ATTENTION, "q.size(-1)", "q.size(-2)")
    has("transpose", ATTENTION, "k.transpose(-2, -1)", "q @ k /")
    has("mask", ATTENTION, "masked_fill(mask", "masked_fill(~(mask")
    has("mask", ATTENTION, "-1e9", "bool(), 0.0)")
    has("mask", ATTENTION, "mask[:, None, None, :]", "mask[:, None, :, None]")
    has("dropout", ATTENTION, "F.dropout(weights, p=p)", "weights = weights")
    has("dropout", ATTENTION, "p=p)", "p=p, training=True)")
    has("dropout", ATTENTION, "torch.softmax(scores,", "torch.softmax(F.dropout(scores, p=p), dim=-1)")
    has("swap_args", ATTENTION, "weights @ v", "v @ weights")
    has("residual", BLOCK, "x + self.dropout", "self.norm(self.dropout(self.ffn(x)))")
    has("layernorm", BLOCK, "self.norm(x +", "return x + self.dropout(self.ffn(x))")
    has("layernorm", BLOCK, "self.ffn(x)", "x + self.dropout(self.ffn(self.norm(x)))")
    has("layernorm", BLOCK, "nn.LayerNorm(d)", "nn.Identity()")
    has("dropout", BLOCK, "self.dropout(self.ffn(x))", "self.dropout(x) + self.ffn(x)")
    has("dropout", BLOCK, "self.dropout(self.ffn(x))", "dropout(self.ffn(x), p=self.dropout.p, training=True)")
    has("activation", BLOCK, "nn.GELU()", "nn.ReLU()")
    has("activation", BLOCK, "nn.GELU()", "nn.Tanh()")
    has("detach", BLOCK, "self.ffn(x))", "self.ffn(x).detach()")
    has("constant", BLOCK, "nn.Dropout(0.1)", "nn.Dropout(0.05)")
    has("mode", LOOP, "    model.train()\n", "    model.eval()\n    total")
    has("mode", LOOP, "with torch.no_grad():", "if True:")
    has("statement", LOOP, "    model.train()\n", "def train(model, batches, optimizer):\n    total")
    has("step_order", LOOP, "optimizer.zero_grad()\n        loss.backward()",
        "loss.backward()\n        optimizer.zero_grad()")
    has("step_order", LOOP, "loss.backward()\n        optimizer.step()", "optimizer.step()\n        loss.backward()")
    has("off_by_one", LOOP, "[:, :-1]", "[:, :-2]")
    has("label", LOOP, "ignore_index=-100", "F.cross_entropy(model(x)[:, :-1], y)")
    has("reduction", ATTENTION.replace("weights @ v", "weights.sum(-1)"), ".sum(-1)", ".mean(-1)")
    has("compare", ATTENTION, "is not None", "mask is None")


def test_only_the_given_lines_are_mutated():
    lines = {5}  # the masked_fill line
    found = mutations(ATTENTION, lines)
    assert found
    for m in found:
        assert _changed_lines(ATTENTION, m.source) <= lines, m.description


def test_the_reach_probe_runs_a_call_before_the_mutated_code():
    for m in mutations(ATTENTION):
        probed = reach_source(ATTENTION, m.anchor, "stop()")
        tree = ast.parse(probed)
        assert "stop()" in probed and tree is not None, m.description
    stmt = next(m for m in mutations(ATTENTION) if m.anchor[2] == "stmt")
    assert "    stop()\n" in reach_source(ATTENTION, stmt.anchor, "stop()")


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The example assignment built, with normalize given an epsilon (a mutant of which changes nothing) and a
    1-D branch no check runs."""
    from autograder.grading import build_and_record
    from autograder.release import load_release

    root = tmp_path_factory.mktemp("mutants")
    source = root / "solutions" / "vectors"
    shutil.copytree(EXAMPLE_SOURCE, source)
    notebook = source / "vectors.ipynb"
    text = notebook.read_text()
    old = "    return v / v.norm(dim=-1, keepdim=True)\\n"
    assert old in text
    notebook.write_text(text.replace(old, "    if v.dim() == 1:\\n        return v / v.norm(dim=0)\\n"
                                          "    return v / v.norm(dim=-1, keepdim=True).clamp(min=1e-12)\\n"))
    paths = build_and_record(source)
    return source, paths, load_release(paths.release)


def test_definitions_are_found_part_by_part(example):
    source, paths, release = example
    definitions, skipped = graded_definitions(source / "vectors.ipynb", release.dir / "answer_key.ipynb",
                                              release.checks, release.helpers)
    assert [(d.name, d.part) for d in definitions] == [
        ("normalize", "1. Normalize"), ("softmax", "2. Softmax"),
        ("TinyLayer", "3. Tiny layer")]  # no test cell follows it: a worker helper of a part-3 check builds it
    assert skipped == []
    normalize = definitions[0]
    assert normalize.lines == {3, 4, 5}  # the solution region, not the signature or the docstring
    tiny = definitions[2]
    assert tiny.kind == "class" and tiny.forward
    assert "self.linear = nn.Linear(d_in, d_out)" in tiny.source and "### BEGIN" not in tiny.source


def test_a_limited_sample_is_seeded_and_takes_every_operator_in_turn(example):
    source, paths, release = example
    definitions, _ = graded_definitions(source / "vectors.ipynb", release.dir / "answer_key.ipynb", release.checks,
                                        release.helpers)
    parts = list(dict.fromkeys(c.part for c in release.checks))
    every, generated = plan(definitions, parts)
    assert sum(generated.values()) == len(every) and len({m.id for m in every}) == len(every)
    sample, _ = plan(definitions, parts, limit=2, seed=0)
    assert sample == plan(definitions, parts, limit=2, seed=0)[0]
    assert {m.id for m in sample} <= {m.id for m in every}  # ids do not depend on the limit
    for part in generated:
        picked = [m for m in sample if m.part == part]
        assert len(picked) == min(2, generated[part])
        if len({m.mutation.operator for m in every if m.part == part}) >= 2:
            assert len({m.mutation.operator for m in picked}) == 2, part
    assert all(m.id.startswith(("mutant-1-", "mutant-2-", "mutant-3-")) for m in every)


def test_the_probe_keeps_the_names_and_wraps_both_versions(example):
    source, paths, release = example
    definitions, _ = graded_definitions(source / "vectors.ipynb", release.dir / "answer_key.ipynb", release.checks,
                                        release.helpers)
    every, _ = plan(definitions, list(dict.fromkeys(c.part for c in release.checks)))
    for m in every:
        text = probe_source(m)
        names = [n.name for n in ast.parse(text).body]
        assert names == [f"_ag_mutant_{m.definition.name}", f"_ag_reference_{m.definition.name}",
                         m.definition.name]


def _outcome(definition, n, verdict, note=""):
    from autograder.mutants.operators import mutations as make

    mutation = make(definition.source, definition.lines)[n]
    return Outcome(Mutant(f"mutant-1-{definition.name}-{n + 1:03d}", definition, mutation), verdict, note=note)


def test_the_report_gives_each_part_its_score_and_each_survivor_its_diff():
    d = Definition("attention", "1. Attention", ATTENTION, set(range(3, 9)), False, "def")
    outcomes = [_outcome(d, 0, KILLED), _outcome(d, 1, KILLED), _outcome(d, 2, KILLED),
                _outcome(d, 3, SURVIVED, "no check runs the mutated code"), _outcome(d, 4, EQUIVALENT),
                _outcome(d, 5, NOT_GRADED, "timed out")]
    report = MutationReport([PartScore("1. Attention", outcomes, generated=9)], ["helper: no check of any part "
                                                                                  "grades it"], 12.3, 6, 0)
    assert report.parts[0].score == 0.75 and report.score == 0.75
    lines = report.lines()
    assert lines[0] == ("mutants 1. Attention: 75.0%: 3 killed, 1 survived, 1 probably equivalent, 1 not graded "
                        "(a sample of 6 of 9)")
    assert lines[1] == ("mutants overall: 75.0% of 6 mutants (1 probably equivalent, 1 not graded), graded in 12 s")
    assert lines[2] == "mutants: not mutated: helper: no check of any part grades it"
    survivor = outcomes[3].mutant
    assert lines[3] == (f"SURVIVED {survivor.id} [{survivor.mutation.operator}] attention: "
                        f"{survivor.mutation.description} (no check runs the mutated code)")
    assert lines[4] == "    --- reference/attention" and lines[5] == "    +++ mutant/attention"
    assert any(line.startswith("PROBABLY EQUIVALENT mutant-1-attention-005") for line in lines)
    assert any(line.startswith("NOT GRADED mutant-1-attention-006") for line in lines)
    assert not any("KILLED" in line for line in lines)
    data = report.to_dict()
    assert data["parts"][0]["killed"] == 3 and data["parts"][0]["mutants"][3]["diff"] == survivor.diff()


@pytest.mark.slow
def test_verify_mutants_on_the_example(example):
    """Graded as verify grades a corpus: killed by the existing hidden checks, probably equivalent, never run,
    let through."""
    from autograder.verify import verify

    source, _, _ = example
    report = verify(source, with_corpus=False, mutants=None)  # verify's default: it runs, being small
    assert report.ok, report.problems
    assert report.mutation is not None
    outcomes = {o.mutant.id: o for p in report.mutation.parts for o in p.outcomes}
    by_change = {(o.mutant.definition.name, o.mutant.mutation.description): o for o in outcomes.values()}

    killed = by_change[("softmax", "`.sum(..)` -> `.mean(..)`")]
    assert killed.verdict == KILLED and "softmax: rows sum to 1" in killed.lost
    assert killed.elsewhere == []
    epsilon = by_change[("normalize", "5e-13 instead of 1e-12")]
    assert epsilon.verdict == EQUIVALENT, epsilon.note
    never_run = [o for o in outcomes.values() if o.mutant.definition.name == "normalize"
                 and o.mutant.mutation.line == 4]  # `return v / v.norm(dim=0)`: the checks never pass a 1-D tensor
    assert never_run and all(o.verdict == SURVIVED and "no check runs the mutated code" in o.note
                             for o in never_run)
    detached = by_change[("TinyLayer", "`.detach()` after `self.linear(..)`")]
    assert detached.verdict == SURVIVED and "differently from the reference" in detached.note

    parts = {p.part: p for p in report.mutation.parts}
    assert set(parts) == {"1. Normalize", "2. Softmax", "3. Tiny layer"}
    assert parts["2. Softmax"].score == 1.0
    assert any(line.startswith("mutants 1. Normalize: ") for line in report.lines)
    assert any(line.startswith(f"SURVIVED {detached.mutant.id} [detach] TinyLayer") for line in report.lines)
    assert "    +        return torch.relu(self.linear(x).detach())" in report.lines


def test_probes_are_graded_without_the_reference_standing_in(example):
    """A probe ends its worker in a check's first run; a second run with the reference in place of the probed
    definition (depends_on) would replace that verdict, so the probes' release declares none."""
    import dataclasses

    from autograder.mutants import without_substitution

    _, _, release = example
    declaring = dataclasses.replace(release, checks=[dataclasses.replace(c, depends_on=("softmax",))
                                                     for c in release.checks])
    probed = without_substitution(declaring)
    assert [c.name for c in probed.checks] == [c.name for c in release.checks]
    assert all(c.depends_on == () for c in probed.checks)
    assert all(c.depends_on == ("softmax",) for c in declaring.checks)


def test_verify_defers_a_large_mutation_analysis_with_its_cost(example, monkeypatch):
    from autograder import verify as verify_module

    monkeypatch.setattr(verify_module, "AUTO_MUTANTS", 3)
    source, _, _ = example
    report = verify_module.verify(source, with_corpus=False, mutants=None)
    assert report.ok and report.mutation is None
    line = report.lines[-1]
    assert line.startswith("mutants: ") and "more than verify runs by default (3)" in line and "--mutants" in line


def test_a_check_made_from_an_imported_test_cell_grades_the_names_the_cell_uses():
    """otter's and nbgrader's test cells name the notebook's definitions as plain names (`zscore(x)`), not `sub.NAME`:
    the definition belongs to the part of the cell that names it, and mutants of it are graded there."""
    from autograder.importers.cells import reference_cell
    from autograder.mutants.analysis import _parts_reading

    checks = [reference_cell("q1 test 1", 1, "q1", [], "np.allclose(zscore([1, 2, 3]), [-1.2247, 0, 1.2247])"),
              reference_cell("q2 test 1", 1, "q2", [], "pairwise_sq_dists(a, b).shape == (3, 7)\nx.zscore_table")]
    checks = [fn._ag_check for fn in checks]  # what the release loads from tests/*.py
    assert _parts_reading("zscore", checks, []) == ["q1"]  # `x.zscore_table` in q2 is another name
    assert _parts_reading("pairwise_sq_dists", checks, []) == ["q2"]
    assert _parts_reading("unused", checks, []) == []


HELPER_ONLY_TESTS = '''\
from autograder.testing import Fail, check, worker_helpers

worker_helpers(\'\'\'
def scaled(xs, k):
    return submission.scale(xs, k)
\'\'\')


@check("scale: values", points=2, part="1. Scale")
def values(sub, ref):
    if sub.helpers.scaled([1, 2, 3], 2) != ref.helpers.scaled([1, 2, 3], 2):
        raise Fail("scale is wrong")
'''


def _helper_only_assignment(root):
    """`scale` (part 1) has no test cell: only a part-1 hidden check grades it, through a worker helper reading
    `submission.scale`. The next test cell in the notebook is part 2's, which does not use it."""
    import nbformat

    def code(text, grade_id, **meta):
        cell = nbformat.v4.new_code_cell(text)
        cell.metadata["nbgrader"] = {"grade_id": grade_id, "locked": False, "schema_version": 3,
                                     "solution": not meta, "grade": bool(meta), **meta}
        return cell

    source = root / "solutions" / "helper_only"
    (source / "tests").mkdir(parents=True)
    (source / "assignment.toml").write_text('title = "Helper only"\nnotebook = "helper_only.ipynb"\nfiles = []\n')
    (source / "tests" / "test_scale.py").write_text(HELPER_ONLY_TESTS)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("## 1. Scale"),
        code("def scale(xs, k):\n    ### BEGIN SOLUTION\n    m = sum(xs) / len(xs)\n    out = []\n    for x in xs:\n"
             "        out.append(k * (x - m))\n    return out\n    ### END SOLUTION", "scale"),
        nbformat.v4.new_markdown_cell("## 2. Total"),
        code("def total(xs):\n    ### BEGIN SOLUTION\n    s = 0\n    for x in xs:\n        s += x\n    return s\n"
             "    ### END SOLUTION", "total"),
        code("assert total([1, 2, 3]) == 6\n### BEGIN HIDDEN TESTS\nassert total([4, -1]) == 3\n"
             "### END HIDDEN TESTS", "total_test", points=1, part="2. Total"),
    ]
    nbformat.write(nb, source / "helper_only.ipynb")
    return source


@pytest.mark.slow
def test_a_definition_only_a_hidden_check_of_an_earlier_part_uses_is_graded_in_that_part(tmp_path):
    """What uses a definition decides its part over where it stands: `scale` is filed under part 1, whose hidden
    check reads it, not under part 2, whose test cell comes next; its mutants are killed there."""
    from autograder.release import load_release
    from autograder.verify import verify

    source = _helper_only_assignment(tmp_path)
    report = verify(source, with_corpus=False, mutants=True)
    assert report.ok, report.problems
    release = load_release(tmp_path / "release" / "helper_only")
    definitions, _ = graded_definitions(source / "helper_only.ipynb", release.dir / "answer_key.ipynb",
                                        release.checks, release.helpers)
    assert [(d.name, d.part, d.used_in) for d in definitions] == [
        ("scale", "1. Scale", ("1. Scale",)), ("total", "2. Total", ("2. Total",))]
    parts = {p.part: p for p in report.mutation.parts}
    assert set(parts) == {"1. Scale", "2. Total"}
    assert {o.mutant.definition.name for o in parts["1. Scale"].outcomes} == {"scale"}
    assert parts["1. Scale"].score == 1.0, [o.note for o in parts["1. Scale"].outcomes]
    assert not any("other parts only" in o.note for p in report.mutation.parts for o in p.outcomes)


def test_a_mutant_losing_points_in_another_part_that_uses_its_definition_is_killed():
    """A definition the checks of two parts use keeps the part the notebook gives it, but a mutant that loses
    points only in the other part is still killed there; points lost in a part that does not use it are not."""
    from types import SimpleNamespace

    from autograder.mutants import classify

    def result(**scores):
        checks = [SimpleNamespace(name=name, part=part, score=score, max_score=1.0, status="graded", message="wrong")
                  for name, (part, score) in scores.items()]
        return SimpleNamespace(error="", checks=checks)

    d = Definition("attention", "2. Block", ATTENTION, set(range(3, 9)), False, "def", ("1. Attention", "2. Block"))
    used, unused = (Mutant(f"mutant-2-attention-00{n}", d, m) for n, m in enumerate(mutations(ATTENTION)[:2]))
    key = result(a=("1. Attention", 1.0), b=("2. Block", 1.0), c=("3. Loss", 1.0))
    results = {used.id: result(a=("1. Attention", 0.0), b=("2. Block", 1.0), c=("3. Loss", 1.0)),
               unused.id: result(a=("1. Attention", 1.0), b=("2. Block", 1.0), c=("3. Loss", 0.0))}
    first, second = classify([used, unused], results, key)
    assert first.verdict == KILLED and first.lost == {"a": "wrong"} and first.elsewhere == []
    assert second.verdict == SURVIVED and second.elsewhere == ["c"] and "other parts only" in second.note


@pytest.mark.parametrize("heading", ["## {n}. {title}", None])
def test_a_part_with_hidden_checks_only_has_its_definitions_mutated_in_it(tmp_path, heading):
    """The mutation analysis and `autograder build` place a definition by one rule: `Opt` and `train`, graded
    by parts 2 and 3 (hidden checks only) and used by part 5's, are theirs, not part 4's, whose test cell is
    the next one."""
    from autograder.build import build
    from autograder.release import load_release
    from tests.test_build import _hidden_parts

    source = _hidden_parts(tmp_path, heading)
    paths = build(source)
    release = load_release(paths.release)
    definitions, _ = graded_definitions(source / "hp.ipynb", paths.release / "answer_key.ipynb", release.checks,
                                        release.helpers)
    assert {d.name: d.part for d in definitions} == {
        "f": "1. F", "Opt": "2. Optimiser", "train": "3. Training loop", "load": "4. Data", "split": "5. Split"}

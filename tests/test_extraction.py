"""What extraction runs from a notebook: only the statements the grader must run (notebook/extract.py)."""
import nbformat

from autograder.notebook.extract import extract, reads_from_outside
from autograder.release import names_checks_read


def notebook(*cells: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


def run_sources(nb, uses) -> list[str]:
    return [u.source for u in extract(nb, uses).units]


def test_a_name_a_test_cell_binds_first_is_not_read_from_the_notebook():
    test_cell = "batch = next(iter(loader))\nlogits = model(batch)\nassert logits.shape == (2, 2)"
    assert reads_from_outside(test_cell) >= {"loader", "model"}
    assert not reads_from_outside(test_cell) & {"batch", "logits"}


def test_reads_follow_the_order_python_runs_a_cell():
    assert "x" in reads_from_outside("x += 1")  # read before it is bound
    assert "y" in reads_from_outside("y = y + 1")
    assert "b" not in reads_from_outside("for b in data:\n    f(b)")
    assert "q" in reads_from_outside("[q for q in items]\nq")  # a comprehension's variable stays inside it
    assert "z" in reads_from_outside("def g():\n    return z\nz = 1")  # g may run before z is bound
    assert "torch" not in reads_from_outside("import torch\ntorch.zeros(1)")


def test_scratch_code_binding_a_test_cells_own_name_is_not_run():
    nb = notebook("import torch\ndef predict(x):\n    return x * 2",
                  "batch = predict(torch.ones(3))  # scratch: slow in a real notebook",
                  "logits = predict(batch)")
    uses = names_checks_read(["batch = torch.zeros(3)\nlogits = predict(batch)\nassert logits.sum() == 0"], [])
    sources = run_sources(nb, uses)
    assert "batch = predict(torch.ones(3))  # scratch: slow in a real notebook" not in sources
    assert not any(s.startswith("logits") for s in sources)


def test_a_name_the_test_cell_reads_from_the_notebook_is_still_run():
    nb = notebook("import torch", "weights = torch.ones(3) * 2")
    uses = names_checks_read(["assert weights.sum() == 6"], [])
    assert "weights = torch.ones(3) * 2" in run_sources(nb, uses)


def test_hub_downloads_and_dataset_loads_are_never_run_and_say_why():
    nb = notebook("from transformers import AutoTokenizer\nfrom datasets import load_dataset",
                  "tokenizer = AutoTokenizer.from_pretrained('bert-base-uncased')",
                  "imdb = load_dataset('imdb')",
                  "def encode(text):\n    return tokenizer(text)\ndef first():\n    return imdb['train'][0]")
    extraction = extract(nb)
    assert not any("from_pretrained" in u.source or "load_dataset('imdb')" in u.source for u in extraction.units)
    hints = extraction.unbound_hints()
    assert "AutoTokenizer.from_pretrained" in hints["tokenizer"] and "cell 2, line 1" in hints["tokenizer"]
    assert "load_dataset" in hints["imdb"]


def test_assignments_a_download_would_feed_are_not_pulled_in_by_it():
    nb = notebook("import torch\nfrom transformers import AutoModel",
                  "size = 4",
                  "model = AutoModel.from_pretrained(f'bert-{size}')",
                  "def embed(x):\n    return model(x)")
    names = {n for u in extract(nb).units for n in u.names}
    assert "model" not in names
    assert "embed" in names


def test_a_loop_that_fills_an_array_the_checks_read_runs_and_one_they_do_not_read_does_not():
    """`a = np.zeros(...)` then a loop filling it: the checks read `a`, so the loop runs after it, in notebook order
    (as otter and nbgrader run the cell); the losses of a training loop nobody reads are not computed. A loop that
    changes a name only a function reads stays unrun, and the build names it."""
    import nbformat

    from autograder.build import loops_not_run

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import numpy as np\nn = 3\na = np.zeros((n, n))\nfor i in range(n):\n    for j in range(n):\n"
        "        a[i, j] = 1 / (i + j + 1)\nlosses = []\nfor step in range(2):\n    losses.append(step)\n"
        "table = {}\nfor k in range(3):\n    table[k] = k * k\ndef lookup(k):\n    return table[k]\n")])
    reference = extract(nb, {"a", "n", "lookup"})
    assert [(u.line, u.kind) for u in reference.units if u.line in (4, 8, 11)] == [(4, "assignment")]
    [note] = loops_not_run(reference, "hw/hw.ipynb", {"a", "n", "lookup", "table"})
    assert note.startswith("hw/hw.ipynb: cell 1, line 11: a `for` loop") and "changes `table`" in note


def test_values_the_checks_read_computed_in_loops_blocks_and_in_place_calls_run_in_notebook_order():
    """How otter and nbgrader students compute a variable answer: a running total in a loop, the answer inside an
    `if`, a frame sorted in place. The checks read `mean_score`, `ranked` and `best`: the statements computing them
    run, in order; a demo call (`print`) and a loop filling what only a function reads do not."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in (
        "scores = [3, 1, 2]\ntotal = 0\nfor s in scores:\n    total += s\nprint(total)\n",
        "if total > 3:\n    mean_score = total / len(scores)\nelse:\n    mean_score = 0.0\n",
        "ranked = list(scores)\nranked.sort(reverse=True)\nwith open('log.txt', 'w') as f:\n    best = ranked[0]\n",
        "history = []\nfor epoch in range(100):\n    history.append(epoch)\ndef plot():\n    return history\n")])
    units = extract(nb, {"mean_score", "ranked", "best", "plot"}).units
    assert [(u.cell, u.line) for u in units] == [(1, 1), (1, 2), (1, 3), (2, 1), (3, 1), (3, 2), (3, 3), (4, 1), (4, 4)]
    namespace: dict = {}
    for u in units:
        if u.cell != 3 or u.line != 3:  # (the `with` block writes a file)
            exec(u.source, namespace)
    assert (namespace["mean_score"], namespace["ranked"], namespace["history"]) == (2.0, [3, 2, 1], [])


def test_a_statement_nested_too_deep_to_read_is_skipped_with_a_note_and_the_rest_of_the_cell_runs():
    """`X = 1+1+...+1` a few thousand times is thousands of levels of syntax tree: the grader's analysis would run out
    of stack (and once ended the whole run); it is skipped, named, and the definitions beside it still run."""
    deep = "+".join(["1"] * 1500)
    nb = notebook(f"X = {deep}\ndef f(x):\n    return x\n", "def g(x):\n    return " + "+".join(["x"] * 1500))
    extraction = extract(nb, {"X", "f", "g"})
    assert [u.names for u in extraction.units] == [["f"], ["g"]]  # a deep definition is the worker compiler's to judge
    (skipped,) = extraction.skipped
    assert skipped.cell == 1 and skipped.names == ["X"] and "nested more than" in skipped.reason

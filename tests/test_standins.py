"""Class stand-ins keep the reference's module tree: code that walks, indexes or len()s it works
(autograder/sandbox/standins.py)."""
import torch
import torch.nn as nn

from autograder.sandbox import standins


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width, eps=1e-7)
        self.drop = nn.Dropout(0.3)


class Encoder(nn.Module):
    def __init__(self, width=4, depth=2):
        super().__init__()
        self.width = width
        self.layers = nn.ModuleList([Block(width) for _ in range(depth)])
        self.head = nn.Sequential(nn.Linear(width, 2), nn.Tanh())


def standin_of(reference: nn.Module) -> nn.Module:
    def ask(kind, payload):
        assert kind == "construct"
        return {"token": 0, **standins.describe_module(reference)}
    return standins.class_standin(ask, "Encoder", Encoder)()


def test_the_module_tree_keeps_torch_types_and_settings():
    model = standin_of(Encoder())
    assert isinstance(model.layers, nn.ModuleList) and len(model.layers) == 2
    assert isinstance(model.layers[1].fc, nn.Linear) and model.layers[1].fc.in_features == 4
    assert isinstance(model.layers[0].norm, nn.LayerNorm) and model.layers[0].norm.eps == 1e-7
    assert model.layers[0].norm.normalized_shape == (4,)
    assert model.layers[0].drop.p == 0.3
    assert isinstance(model.head, nn.Sequential) and isinstance(model.head[1], nn.Tanh)
    assert type(model.layers[0]).__name__ == "Block"
    assert model.width == 4


def test_weights_copied_by_walking_the_tree_land_under_the_reference_names():
    reference = Encoder()
    model = standin_of(reference)
    assert model.state_dict().keys() == reference.state_dict().keys()
    with torch.no_grad():
        for i, layer in enumerate(model.layers):
            layer.fc.weight.fill_(i + 1.0)
    assert torch.equal(model.state_dict()["layers.1.fc.weight"], torch.full((4, 4), 2.0))


def test_torch_leaf_modules_compute_as_themselves():
    reference = Encoder()
    model = standin_of(reference)
    x = torch.randn(3, 4)
    assert torch.equal(model.layers[0].fc(x), reference.layers[0].fc(x))


def test_a_malformed_description_gives_plain_modules():
    assert type(standins._empty_module({"class": "os.system", "native": True})) is nn.Module
    assert type(standins._empty_module("Linear")) is nn.Module
    made = standins._empty_module({"class": "Identity2", "native": True})  # not a torch.nn class
    assert type(made).__name__ == "Identity2" and isinstance(made, nn.Module)


def test_a_name_the_submission_lacks_gets_a_stand_in_of_the_references_kind_and_is_removed_after():
    import types

    module = types.ModuleType("submission")
    module.broken = None  # bound to something that cannot be called
    calls = []

    def ask(kind, payload):
        calls.append(kind)
        return {"token": 0, **standins.describe_module(Encoder())} if kind == "construct" else {"output": 42}

    replaced = standins.substitute(module, [("Encoder", "class"), ("helper", "function"), ("broken", "function"),
                                            ("unknown", "")], ask)
    assert isinstance(module.Encoder(), nn.Module) and module.helper(1) == 42 and module.broken() == 42
    assert "unknown" not in vars(module)  # the reference defines nothing under it: nothing to stand in
    assert calls == ["construct", "forward", "forward"]
    standins.restore(module, replaced)
    assert "Encoder" not in vars(module) and "helper" not in vars(module) and module.broken is None


def test_no_second_run_with_the_references_definitions_where_there_is_no_reference():
    """`autograder check` has no answer key: a check's depends_on cannot be answered, so it is not tried (it said
    'the reference could not answer' before)."""
    import nbformat

    from autograder.program import Program
    from autograder.notebook.extract import Extraction, extract
    from autograder.sandbox.client import WorkerSpec

    key = extract(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import torch\ndef f(x):\n    return x")]))
    assert Program(key, WorkerSpec([])).binds_all(["f"]) and not Program(key, WorkerSpec([])).binds_all(["f", "g"])
    assert not Program(Extraction([], []), WorkerSpec([])).binds_all(["f"])
    assert not Program(key, WorkerSpec([])).binds_all(["torch"])  # an import is no definition to stand in for


def test_the_reference_answers_a_stand_in_within_the_students_time_limit():
    """A stand-in's call is answered by the reference's worker by the student's request's deadline at the latest: a
    submission that asks the reference for a huge computation spends its own time limit, not the reference's; the
    reference's own deadline is back afterwards."""
    from types import SimpleNamespace

    from autograder.substitution import ReferenceAnswers

    seen = []
    worker = SimpleNamespace(deadline=1000.0)
    worker.request = lambda *args, what="": seen.append(worker.deadline) or {"out": 1}
    reference = SimpleNamespace(worker=worker, proxy=lambda: SimpleNamespace(softmax=object()))
    answers = ReferenceAnswers(reference, ["softmax"], lambda: 12.5)
    assert answers("forward", {"target": "softmax", "args": []}) == {"out": 1}
    assert seen == [12.5] and worker.deadline == 1000.0
    later = ReferenceAnswers(reference, ["softmax"], lambda: 5000.0)  # the reference's own deadline comes first
    later("forward", {"target": "softmax", "args": []})
    assert seen[-1] == 1000.0

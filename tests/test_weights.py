"""Loading the grader's weights into a student's module (autograder/sandbox/weights.py)."""
import torch
import torch.nn as nn

from autograder.sandbox.weights import load_state


class Documented(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
        self.segment = nn.Embedding(2, 4)


class Renamed(nn.Module):
    """The same tensors in the same order under other names (blocks added with add_module)."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential()
        self.blocks.add_module("block0", nn.Linear(3, 4))
        self.blocks.add_module("block1", nn.Linear(4, 2))
        self.segment = nn.Embedding(2, 4)


def reference_state():
    torch.manual_seed(0)
    return {k: v.clone() for k, v in Documented().state_dict().items()}


def test_by_name():
    model = Documented()
    assert load_state(model, reference_state()) == {"problems": [], "notes": []}
    assert all(torch.equal(model.state_dict()[k], v) for k, v in reference_state().items())


def test_by_structure_when_the_names_differ_with_a_note():
    model = Renamed()
    outcome = load_state(model, reference_state())
    assert outcome["problems"] == []
    assert "blocks.0.weight -> your blocks.block0.weight" in outcome["notes"][0]
    assert torch.equal(model.blocks.block1.bias, reference_state()["blocks.1.bias"])


def test_an_embedding_table_with_extra_rows_gets_the_used_rows():
    model = Documented()
    model.segment = nn.Embedding(30, 4)  # sized by the vocabulary
    outcome = load_state(model, reference_state())
    assert outcome["problems"] == [] and "30 rows where 2 are used" in outcome["notes"][0]
    assert torch.equal(model.segment.weight[:2], reference_state()["segment.weight"])


def test_what_does_not_fit_is_named_and_nothing_is_loaded():
    model = Documented()
    model.blocks[0] = nn.Linear(3, 5)  # a wrong width: neither by name nor by structure
    before = {k: v.clone() for k, v in model.state_dict().items()}
    outcome = load_state(model, reference_state())
    assert any("blocks.0.weight has shape (5, 3) instead of (4, 3)" in p for p in outcome["problems"])
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())


def test_a_smaller_embedding_table_is_a_problem():
    model = Documented()
    model.segment = nn.Embedding(1, 4)
    assert load_state(model, reference_state())["problems"]


def test_by_numbering_whatever_the_order_and_extra_buffers():
    model = Renamed()
    model.register_buffer("table", torch.zeros(5))  # a buffer the grader's state does not have
    state = dict(reversed(list(reference_state().items())))  # the grader's order is not the module's
    outcome = load_state(model, state)
    assert outcome["problems"] == [] and "structure" in outcome["notes"][0]
    assert torch.equal(model.blocks.block0.weight, state["blocks.0.weight"])

"""Loading the grader's weights into a student's module (autograder/sandbox/weights.py)."""
import pytest
import torch
import torch.nn as nn

from autograder.sandbox.weights import aliases, load_state


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


# -- tied weights: one tensor under several names ----------------------------------------------------------------

V, E = 11, 4


class Head(nn.Module):
    """The reference's MLM head: the word embeddings kept as a module, a bias of its own."""

    def __init__(self, word: nn.Embedding):
        super().__init__()
        self.dense = nn.Linear(E, E)
        self.word_embeddings = word
        self.bias = nn.Parameter(torch.zeros(V))

    def forward(self, h):
        return self.dense(h) @ self.word_embeddings.weight.T + self.bias


class LinearHead(nn.Module):
    """A student's: an nn.Linear decoder whose weight IS the embeddings' (and, tie_bias, whose bias IS `bias`)."""

    def __init__(self, word: nn.Embedding, tie_bias: bool):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(V))
        self.dense = nn.Linear(E, E)
        self.decoder = nn.Linear(E, V, bias=tie_bias)
        self.decoder.weight = word.weight
        if tie_bias:
            self.decoder.bias = self.bias
        self.tie_bias = tie_bias

    def forward(self, h):
        out = self.decoder(self.dense(h))
        return out if self.tie_bias else out + self.bias


class Pretraining(nn.Module):
    def __init__(self, head):
        super().__init__()
        self.word = nn.Embedding(V, E)
        self.mlm = head(self.word)


def _heads():
    return {"untied": lambda w: Head(w), "weight tied": lambda w: LinearHead(w, tie_bias=False),
            "weight and bias tied": lambda w: LinearHead(w, tie_bias=True)}


def _sent(module) -> dict:
    """The module's state as it arrives from another process: every tensor a copy of its own."""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@pytest.mark.parametrize("variant", list(_heads()))
def test_a_students_tied_weights_load_into_the_reference_and_give_its_outputs(variant):
    torch.manual_seed(1)
    student = Pretraining(_heads()[variant])
    with torch.no_grad():
        student.mlm.bias.normal_()
    reference = Pretraining(Head)
    outcome = load_state(reference, _sent(student), aliases(student))
    assert outcome["problems"] == []
    h = torch.randn(2, E)
    assert torch.allclose(reference.mlm(h), student.mlm(h))
    assert reference.mlm.word_embeddings.weight is reference.word.weight  # still tied


@pytest.mark.parametrize("variant", list(_heads()))
def test_the_graders_weights_load_into_a_students_tied_head(variant):
    torch.manual_seed(2)
    reference = Pretraining(Head)
    with torch.no_grad():
        reference.mlm.bias.normal_()
    student = Pretraining(_heads()[variant])
    state = _sent(reference)
    assert load_state(student, state, aliases(reference))["problems"] == []
    h = torch.randn(2, E)
    assert torch.allclose(student.mlm(h), reference.mlm(h))
    head = _heads()[variant](nn.Embedding(V, E))  # the head alone, given the grader's dense and bias only
    alone = {"dense.weight": torch.randn(E, E), "dense.bias": torch.randn(E), "bias": torch.randn(V)}
    assert load_state(head, alone)["problems"] == []
    assert torch.equal(head.bias, alone["bias"])


def test_aliases_are_found_by_storage_in_a_state_made_in_the_same_process():
    student = Pretraining(_heads()["weight and bias tied"])
    assert aliases(student) == [["word.weight", "mlm.decoder.weight"], ["mlm.bias", "mlm.decoder.bias"]]
    reference = Pretraining(Head)
    assert load_state(reference, student.state_dict())["problems"] == []  # the state's own aliases, not a copy


def test_aliases_given_different_values_are_a_problem_and_nothing_loads():
    student = Pretraining(_heads()["weight and bias tied"])
    state = {k: torch.randn_like(v) for k, v in student.state_dict().items() if k != "mlm.decoder.weight"}
    state["mlm.decoder.bias"] = torch.randn(V)  # a second bias, where the student's module has one tensor
    before = student.mlm.bias.detach().clone()
    problems = load_state(student, state)["problems"]
    assert problems == ["mlm.bias and mlm.decoder.bias are one tensor in it (mlm.bias, mlm.decoder.bias) but two "
                        "with different values in the weights given"]
    assert torch.equal(student.mlm.bias, before)


def test_without_the_aliases_a_copied_state_with_two_names_for_one_tensor_does_not_fit():
    """What the aliases argument is for: the copies alone say nothing of which names were one tensor."""
    student = Pretraining(_heads()["weight and bias tied"])
    assert load_state(Pretraining(Head), _sent(student))["problems"]


class CopiedHead(nn.Module):
    """A student's untied decoder: a copy of the embeddings at construction (equal until training moves one)."""

    def __init__(self, word: nn.Embedding):
        super().__init__()
        self.dense = nn.Linear(E, E)
        self.decoder = nn.Linear(E, V, bias=False)
        self.decoder.weight = nn.Parameter(word.weight.detach().clone())
        self.bias = nn.Parameter(torch.zeros(V))


def test_an_untied_copy_loads_and_where_it_differs_the_tied_tensor_keeps_the_value_named_as_it_is():
    student = Pretraining(CopiedHead)
    assert load_state(Pretraining(Head), _sent(student), aliases(student)) == {"problems": [], "notes": [
        "your parameters do not all have the documented names, so the grader matched its weights to yours by "
        "structure: mlm.decoder.weight -> your mlm.word_embeddings.weight"]}
    with torch.no_grad():
        student.mlm.decoder.weight.add_(1.0)  # initialised or trained apart
    reference = Pretraining(Head)
    outcome = load_state(reference, _sent(student), aliases(student))
    assert outcome["problems"] == [] and outcome["notes"][1] == (
        "word.weight and mlm.decoder.weight are one tensor in it (word.weight, mlm.word_embeddings.weight), with "
        "different values in the weights given: it holds word.weight's")
    assert torch.equal(reference.word.weight, student.word.weight)

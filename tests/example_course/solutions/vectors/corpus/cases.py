"""The example's corpus: `autograder verify` grades these beside the answer key (see autograder/corpus.py)."""
from autograder.corpus import Bug, Variant

SOFTMAX_LOGSUMEXP = '''def softmax(x, dim=-1):
    return (x - x.logsumexp(dim=dim, keepdim=True)).exp()
'''

VARIANTS = [
    Variant("softmax_logsumexp", {"softmax": SOFTMAX_LOGSUMEXP}, "softmax as exp(x - logsumexp(x))"),
]

BUGS = [
    Bug("normalize_left_as_stub", expect={"normalize_test": "not implemented"}, stub=["normalize"],
        why="part 1 not done", confined_to="1. Normalize"),
    Bug("no_relu", {"torch.relu(self.linear(x))": "self.linear(x)"},
        {"tiny layer: forward with given weights": "apply the ReLU"}, "forgot the activation", confined_to="3."),
]

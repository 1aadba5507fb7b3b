"""The example's corpus: `autograder verify` grades these beside the answer key (see autograder/corpus.py)."""
from autograder.corpus import Bug, Variant

SOFTMAX_UNIFORM = '''def softmax(x, dim=-1):
    return torch.ones_like(x) / x.shape[dim]
'''

SOFTMAX_NORMALIZED_LOGITS = '''def softmax(x, dim=-1):
    return x / x.sum(dim=dim, keepdim=True)
'''

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
    # rows that sum to 1 earn nothing unless they are a softmax
    Bug("softmax_uniform", definitions={"softmax": SOFTMAX_UNIFORM},
        expect={"softmax: rows sum to 1": "not a softmax", "softmax: values along every dim": "0 of 3",
                "softmax: stable for large logits": "wrong"},
        why="returns uniform rows (passes the public check of equal logits)", confined_to="2."),
    Bug("softmax_normalized_logits", definitions={"softmax": SOFTMAX_NORMALIZED_LOGITS},
        expect={"softmax: rows sum to 1": "not a softmax"}, why="divides the logits by their sum",
        confined_to="2."),
]

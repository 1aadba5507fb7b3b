"""Hidden checks of the example assignment: partial credit, reference comparison, weights copied in."""
import torch

from autograder.testing import Fail, check, expect_close, expect_shape, worker_helpers

worker_helpers('''
import torch

def layer_output_with_weights(d_in, d_out, weight, bias, x):
    """Build the student's layer, load the given weights, return its output."""
    layer = submission.TinyLayer(d_in, d_out)
    with torch.no_grad():
        layer.linear.weight.copy_(weight)
        layer.linear.bias.copy_(bias)
    return layer(x)
''')


@check("softmax: rows sum to 1", points=2, part="2. Softmax")
def softmax_sums_to_one(sub, ref):
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(2))
    p = sub.softmax(x)
    expect_shape(p, (4, 6), "softmax(x) for x of shape (4, 6)")
    if not torch.allclose(p.sum(-1), torch.ones(4), atol=1e-5):
        raise Fail("softmax rows do not sum to 1")
    # rows summing to 1 only count for a softmax: positive, and a larger logit gets a larger probability
    # (uniform rows, or x / x.sum(), sum to 1 as well). Pairs of logits closer than 1e-3 are left out.
    dx, dp = x[:, :, None] - x[:, None, :], p[:, :, None] - p[:, None, :]
    apart = dx.abs() > 1e-3
    if not bool((p > 0).all()) or not torch.equal(torch.sign(dp[apart]), torch.sign(dx[apart])):
        raise Fail("softmax rows sum to 1 but are not a softmax: every probability must be positive, and a larger "
                   "logit must get a larger probability")


@check("softmax: values along every dim", points=3, part="2. Softmax")
def softmax_values_each_dim(sub, ref):
    """Partial credit: one third per dimension the student's softmax gets right."""
    x = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(3))
    right = 0
    for dim in (0, 1, -1):
        got = sub.softmax(x, dim=dim)
        if isinstance(got, torch.Tensor) and got.shape == x.shape and torch.allclose(got, ref.softmax(x, dim=dim), atol=1e-6):
            right += 1
    if right < 3:
        raise Fail(f"softmax is right along {right} of 3 dimensions (0, 1, -1); check the `dim` argument", right / 3)


@check("softmax: stable for large logits", points=1, part="2. Softmax", visibility="after_due_date")
def softmax_stable(sub, ref):
    p = sub.softmax(torch.tensor([[1000.0, 1000.0, -1000.0]]))
    if not torch.isfinite(p).all():
        raise Fail("softmax returns NaN or inf for large logits: subtract the maximum first")
    expect_close(p, torch.tensor([[0.5, 0.5, 0.0]]), "softmax is wrong for large logits")


@check("tiny layer: forward with given weights", points=2, part="3. Tiny layer")
def tiny_layer_forward(sub, ref):
    g = torch.Generator().manual_seed(4)
    w, b, x = torch.randn(3, 5, generator=g), torch.randn(3, generator=g), torch.randn(6, 5, generator=g)
    got = sub.helpers.layer_output_with_weights(5, 3, w, b, x)
    expect_shape(got, (6, 3), "TinyLayer(5, 3) output for a batch of 6")
    expected = torch.relu(x @ w.T + b)
    if torch.allclose(got, x @ w.T + b, atol=1e-5) and not torch.allclose(got, expected, atol=1e-5):
        raise Fail("TinyLayer output has negative values: apply the ReLU")
    expect_close(got, expected, "TinyLayer output does not match ReLU(x W^T + b) with the layer's own weights")

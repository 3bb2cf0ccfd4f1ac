"""Issue #22 item 5: a new batch size or sequence length in training recompiles the frame
at most once, gradients stay eager's, and the symbolic graph says why it runs as ATen
ops through autograd (training graphs are compiled for static sizes)."""
from __future__ import annotations

import pytest
import torch

from fastdynamo.backends.training import TrainingGraph

from .helpers import compile_recorded

pytestmark = pytest.mark.usefixtures("fresh_cache")


@pytest.mark.parametrize("dim", [0, 1], ids=["batch", "sequence"])
def test_new_sizes_recompile_at_most_once_with_eager_gradients(dim):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.LayerNorm(8))
    compiled, recorder = compile_recorded(model)
    for size in (2, 3, 5, 7):
        shape = [2, 4, 8]
        shape[dim] = size
        x = torch.randn(shape)
        model.zero_grad()
        compiled(x).square().mean().backward()
        got = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        model(x).square().mean().backward()
        for g, p in zip(got, model.parameters(), strict=True):
            torch.testing.assert_close(g, p.grad, atol=1e-5, rtol=1e-4)
    first, symbolic = (capture.compiled_fn for capture in recorder.captures)
    assert isinstance(first, TrainingGraph) and first.backward_half.kernel_count > 0
    assert "symbolic sizes" in symbolic.fallback_reason

"""Issue #22 item 5: a new batch size or sequence length in training recompiles the frame
at most once, gradients stay eager's, and the recompiled graph is a symbolic training
graph: both halves' kernels take the sizes as arguments, one module for every size."""
from __future__ import annotations

import pytest
import torch

from fastdynamo.backends.training import TrainingGraph

from .helpers import compile_recorded

pytestmark = pytest.mark.usefixtures("fresh_cache")


def _assert_symbolic_halves(graph: TrainingGraph) -> None:
    for half in (graph.forward_half, graph.backward_half):
        assert half is not None and half.fallback_reason is None, half and half.fallback_reason
        compiled = half.compiled
        # one module generated from the signature served every size (none per size)
        assert compiled.signature is not None and compiled.symbolic_refused is None
        assert half.kernel_count > 0
        assert {id(module) for module in compiled.specialisations.values()} == {id(compiled.module)}


def _step_matches_eager(model: torch.nn.Module, compiled, x: torch.Tensor) -> None:
    model.zero_grad()
    loss = compiled(x).square().mean()
    loss.backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    want = model(x).square().mean()
    want.backward()
    torch.testing.assert_close(loss, want, atol=1e-5, rtol=1e-5)
    for g, p in zip(got, model.parameters(), strict=True):
        torch.testing.assert_close(g, p.grad, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("dim", [0, 1], ids=["batch", "sequence"])
def test_new_sizes_recompile_at_most_once_with_eager_gradients(dim):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.LayerNorm(8))
    compiled, recorder = compile_recorded(model)
    for size in (2, 3, 5, 7):
        shape = [2, 4, 8]
        shape[dim] = size
        _step_matches_eager(model, compiled, torch.randn(shape))
    first, symbolic = (capture.compiled_fn for capture in recorder.captures)
    assert isinstance(first, TrainingGraph) and first.backward_half.kernel_count > 0
    assert isinstance(symbolic, TrainingGraph)
    _assert_symbolic_halves(symbolic)


def test_transformer_layer_trains_at_new_sequence_lengths():
    """Attention (matmuls over the symbolic sequence, softmax) and dropout off: the
    symbolic backward graph computes eager's gradients at each length."""
    torch.manual_seed(0)
    model = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    compiled, recorder = compile_recorded(model)
    for length in (4, 6, 9):
        _step_matches_eager(model, compiled, torch.randn(2, length, 16))
    assert len(recorder.captures) == 2
    symbolic = recorder.captures[1].compiled_fn
    assert isinstance(symbolic, TrainingGraph)
    _assert_symbolic_halves(symbolic)


def _at_length(args: tuple, length: int) -> tuple:
    """The zoo inputs with their sequence dimension (1) at ``length``: token ids for
    the language models, features for the encoder and the LSTM."""
    torch.manual_seed(length)
    resized = []
    for value in args:
        if isinstance(value, torch.Tensor):
            shape = (value.shape[0], length, *value.shape[2:])
            value = torch.randint(0, 96, shape) if value.dtype == torch.long else torch.randn(shape)
        resized.append(value)
    return tuple(resized)


@pytest.mark.parametrize("name", ["gpt2", "bert", "t5", "llama", "transformer_encoder", "lstm"])
def test_zoo_models_train_at_new_sequence_lengths(name):
    """Three sequence lengths: two captures, eager's gradients at each; the symbolic
    graph is a training graph with symbolic kernels in both halves, except the LSTM's,
    whose unrolled time steps need a guard on the length the frame does not have: it
    runs as ATen ops through autograd and says so."""
    from tests.models.zoo import BY_NAME

    from .helpers import assert_same_grads, grads

    case = BY_NAME[name]
    eager_model, args = case.build()
    model, _ = case.build()
    for m in (eager_model, model):
        m.train()
    compiled, recorder = compile_recorded(model)
    for length in (8, 6, 5):
        inputs = _at_length(args, length)
        model.zero_grad()
        eager_model.zero_grad()
        got_loss = case.loss(compiled(*inputs))
        got_loss.backward()
        want_loss = case.loss(eager_model(*inputs))
        want_loss.backward()
        torch.testing.assert_close(got_loss, want_loss, atol=1e-5, rtol=1e-4)
        assert_same_grads(grads(list(model.parameters())), grads(list(eager_model.parameters())), 1e-4)
    assert (len(recorder.captures), len(recorder.breaks)) == (2, 0)
    symbolic = recorder.captures[1].compiled_fn
    if name == "lstm":
        assert "new shape guard" in symbolic.fallback_reason
    else:
        assert isinstance(symbolic, TrainingGraph)
        _assert_symbolic_halves(symbolic)


def test_a_backward_without_a_symbolic_signature_checks_its_sizes():
    """Found in review: a shape guard relates the size of ``x`` to one of ``z``, which no
    input of the backward carries, so the backward has no symbolic signature and gets
    kernels per size; its fast path must then check the sizes (it ran the first size's
    kernels at every later size: wrong gradients at n = 7 and 9)."""
    torch.manual_seed(0)
    w = torch.randn(8, requires_grad=True)

    def f(x, y, z):
        out = (x * w).tanh().t() @ y
        if x.shape[0] > z.shape[0]:
            out = out + 1
        return out, z.sum()

    compiled, recorder = compile_recorded(f)
    for n, m in ((5, 3), (6, 4), (7, 2), (9, 3), (4, 2)):
        x, y, z = torch.randn(n, 8), torch.randn(n, 8), torch.randn(m, 4)
        compiled(x, y, z)[0].sum().backward()
        got, w.grad = w.grad, None
        f(x, y, z)[0].sum().backward()
        torch.testing.assert_close(got, w.grad, atol=1e-5, rtol=1e-4)
        w.grad = None
    assert len(recorder.captures) == 2
    backward = recorder.captures[1].compiled_fn.backward_half
    assert backward.compiled.symbolic_refused is not None and backward.kernel_count > 0

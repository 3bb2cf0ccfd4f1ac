"""The backend as the registry exposes it: fallbacks, autograd, specialisation, logs."""
from __future__ import annotations

import torch

from fastdynamo.backends import lookup_backend
from fastdynamo.backends.triton import CompiledGraph, compile_graph


def test_registered_under_triton_and_callable_directly():
    backend = lookup_backend("triton")
    compiled = backend(torch.fx.symbolic_trace(lambda x: x * 3), [torch.ones(4)])
    assert isinstance(compiled, CompiledGraph)
    assert compiled(torch.ones(4)).tolist() == [3.0] * 4


def test_module_parameters_are_inputs_not_constants(compare):
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.GELU(), torch.nn.LayerNorm(5))
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(3, 6)
    with torch.no_grad():
        compiled = compare(gm, x)
        model[0].weight.mul_(2)  # an in-place update must be seen: weights are not baked in
        torch.testing.assert_close(compiled(x), model(x))


def test_grad_mode_with_requires_grad_runs_autograd():
    x = torch.randn(4, 5, requires_grad=True)
    compiled = compile_graph(torch.fx.symbolic_trace(lambda x: torch.softmax(x, -1).sum()), [x])
    assert "require grad" in compiled.fallback_reason and compiled.kernel_count == 0
    out = compiled(x)
    out.backward()
    assert x.grad is not None and out.grad_fn is not None
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), torch.softmax(x, -1).sum())


def test_requires_grad_per_call_on_a_kernel_graph_runs_autograd():
    # compiled for inputs without grad; called directly with one that requires it
    compiled = compile_graph(torch.fx.symbolic_trace(lambda x: (x * 2).exp()), [torch.randn(3)])
    assert compiled.kernel_count == 1
    x = torch.randn(3, requires_grad=True)
    out = compiled(x)
    out.sum().backward()
    torch.testing.assert_close(x.grad, 2 * (x * 2).exp().detach())


def test_parameters_that_require_grad_count_too():
    model = torch.nn.Linear(4, 3)  # parameters require grad
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(2, 4)
    assert "require grad" in compile_graph(gm, [x]).fallback_reason
    with torch.no_grad():
        assert compile_graph(gm, [x]).fallback_reason is None


def test_new_shapes_get_their_own_specialisation():
    compiled = compile_graph(torch.fx.symbolic_trace(lambda x: x.sum(-1)), [torch.randn(2, 3)])
    for shape in [(2, 3), (4, 7), (1, 1)]:
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x), x.sum(-1))
    assert len(compiled.specialisations) == 3


def test_outputs_that_view_inputs_alias_them():
    compiled = compile_graph(torch.fx.symbolic_trace(lambda x: (x.t(), x + 1)), [torch.randn(2, 3)])
    x = torch.randn(2, 3)
    view, _ = compiled(x)
    assert view.data_ptr() == x.data_ptr() and view.shape == (3, 2)


def test_non_tensor_inputs_fall_back():
    gm = torch.fx.symbolic_trace(lambda x, n: x * n)
    compiled = compile_graph(gm, [torch.ones(2), 3])
    assert compiled.fallback_reason and compiled(torch.ones(2), 3).tolist() == [3.0, 3.0]


def test_aten_fallback_is_the_plain_graph_function():
    # decided at compile time: the callable is the eager backend's, with no per-call checks
    compiled = compile_graph(torch.fx.symbolic_trace(lambda x, n: x * n), [torch.ones(2), 3])
    assert not isinstance(compiled, CompiledGraph)
    assert compiled.__func__.__code__.co_filename.startswith("<fastdynamo-graph-")


def test_suite_runs_kernels_in_the_interpreter():
    # If triton had been imported before conftest set TRITON_INTERPRET, every kernel test
    # would be meaningless; conftest refuses that, and this checks what triton did.
    import triton.language

    from fastdynamo.backends.triton import runtime

    assert runtime.interpreter_enabled() and runtime.interpreter_mismatch() is None
    assert type(triton.language.standard.sigmoid).__name__ == "InterpretedFunction"

"""The Triton backend on graphs captured with symbolic sizes: one generated kernel set
(one module, sizes as launch arguments) serves every size, in Triton's interpreter.

Each test compiles through :func:`fastdynamo.compile`, calls with several sizes, compares
with eager, and counts what was compiled: graphs (the recorder), modules generated
(``cache.STATS["codegen"]`` with an empty kernel cache) and distinct modules used.
"""
from __future__ import annotations

import os
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F

from fastdynamo.backends.kernels import cache

from .helpers import compiled

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                reason="kernels on CPU need Triton's interpreter (set by the root conftest.py)")


@pytest.fixture
def empty_kernel_cache(fresh_cache):
    """A new kernel cache directory and no module imported yet: codegen counts are exact."""
    fresh_cache.disk()
    cache.clear_memory()
    yield
    cache.clear_memory()


def run_sizes(fn: Callable, inputs_for: Callable[[int], tuple], sizes: list, **options: Any):
    """Compile ``fn`` with the Triton backend, call it once per size (results must equal
    eager's), and return (recorder, modules generated, compiled graphs)."""
    compiled_fn, recorder = compiled(fn, backend="triton", **options)
    codegen = cache.STATS["codegen"]
    for size in sizes:
        torch.manual_seed(size)
        inputs = inputs_for(size)
        torch.testing.assert_close(compiled_fn(*inputs), fn(*inputs))
    graphs = [record.compiled_fn for record in recorder.captures]
    return recorder, cache.STATS["codegen"] - codegen, graphs


def modules_used(graph) -> set:
    return {id(module) for module in graph.specialisations.values()}


def assert_one_symbolic_module(graph, symbols: list) -> None:
    assert graph.fallback_reason is None and graph.symbolic_refused is None
    assert len(modules_used(graph)) == 1, "one module for every size"
    assert graph.module.SIZE_ARGUMENTS == symbols
    assert graph.kernel_count >= 1


# ---- pointwise with broadcasting over symbolic dims ------------------------------------------

def bias_and_column(x, bias, column):
    return torch.relu(x * bias + column) - x.shape[0]


def test_pointwise_broadcast_over_symbolic_dims_uses_one_kernel_set(empty_kernel_cache):
    def inputs(n):
        return torch.randn(n, n + 2), torch.randn(n + 2), torch.randn(n, 1)

    recorder, codegen, graphs = run_sizes(bias_and_column, inputs, [3, 5, 2, 8], dynamic=True)
    assert len(recorder.captures) == 1 and codegen == 1
    (graph,) = graphs
    # four input shapes met by the frame's guarded call of one module: rows of x, its row length
    assert len(graph.specialisations) == 1 and graph.fastdynamo_guarded is graph.module.forward
    assert_one_symbolic_module(graph, ["s0", "s1"])
    source = open(graph.source_path).read()
    assert "xnumel = (s0*s1)" in source and "s0 = arg0.size(0)" in source


def test_sizes_0_and_1_are_specialised_and_still_correct(empty_kernel_cache):
    def inputs(n):
        return torch.randn(n, 3), torch.randn(3), torch.randn(n, 1)

    recorder, codegen, graphs = run_sizes(bias_and_column, inputs, [4, 1, 6, 1, 5], dynamic=True)
    assert len(recorder.captures) == 2  # symbolic, then a static entry for n == 1
    symbolic = next(g for g in graphs if g.signature is not None)
    assert_one_symbolic_module(symbolic, ["s0", "s1"])  # dynamic=True: the 3 columns too
    assert codegen == 2


# ---- reductions over symbolic dims -------------------------------------------------------------

REDUCTIONS = {
    "sum_over_symbolic_rows": lambda x: x.sum(1),
    "softmax_over_symbolic_rows": lambda x: torch.softmax(x, 1),
    "mean_over_symbolic_columns": lambda x: x.mean(0, keepdim=True) * x,
    "variance": lambda x: x.var(1),
    "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],)),
    "argmax": lambda x: x.argmax(1),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_over_a_symbolic_dim_uses_one_kernel_set(name, empty_kernel_cache):
    recorder, codegen, graphs = run_sizes(REDUCTIONS[name], lambda n: (torch.randn(n, 2 * n + 1),), [2, 3, 5],
                                          dynamic=True)
    assert len(recorder.captures) == 1 and codegen == 1
    assert_one_symbolic_module(graphs[0], ["s0", "s1"])


def test_a_row_of_symbolic_length_is_reduced_in_a_loop(empty_kernel_cache):
    _, _, graphs = run_sizes(REDUCTIONS["softmax_over_symbolic_rows"], lambda n: (torch.randn(3, n),), [4, 9],
                             dynamic=True)
    source = open(graphs[0].source_path).read()
    assert "looped_reduction" in source and "for roffset in range(0, rnumel, RBLOCK)" in source


# ---- automatic dynamic, int arguments, sizes as outputs ----------------------------------------

def row_sums_plus(x, y):
    return (x + y).relu().sum(-1)


def test_automatic_dynamic_generates_two_kernel_sets_for_any_number_of_sizes(empty_kernel_cache):
    compiled_fn, recorder = compiled(row_sums_plus, backend="triton")
    start, generated = cache.STATS["codegen"], []
    for n in range(2, 9):
        x, y = torch.randn(n, 4), torch.randn(4)
        torch.testing.assert_close(compiled_fn(x, y), row_sums_plus(x, y))
        generated.append(cache.STATS["codegen"] - start)
    assert generated == [1, 2, 2, 2, 2, 2, 2]  # static kernels for n=2, symbolic ones from n=3
    assert len(recorder.captures) == 2
    static, symbolic = (record.compiled_fn for record in recorder.captures)
    assert static.signature is None and not hasattr(static.module, "SIZE_ARGUMENTS")
    assert_one_symbolic_module(symbolic, ["s0"])


def scale_and_shift(x, k):
    return x * k + k


def test_int_argument_is_a_launch_argument_for_any_integer(empty_kernel_cache):
    compiled_fn, recorder = compiled(scale_and_shift, backend="triton")
    values = [2, 3, -1, 0, 1, 7, 2**40]
    for k in values:
        x = torch.randn(3, 2)
        torch.testing.assert_close(compiled_fn(x, k), scale_and_shift(x, k))
    assert len(recorder.captures) == 2  # k static, then k symbolic
    symbolic = recorder.captures[1].compiled_fn
    assert_one_symbolic_module(symbolic, ["v0"])
    assert len(symbolic.specialisations) == 1  # every other value: the one module's forward
    assert symbolic.fastdynamo_guarded is symbolic.module.forward


def sum_and_twice_the_rows(x):
    return x.sum(0), x.shape[0] * 2


def test_a_symbolic_size_returned_from_the_graph(empty_kernel_cache):
    compiled_fn, recorder = compiled(sum_and_twice_the_rows, backend="triton", dynamic=True)
    for n in (3, 6):
        x = torch.randn(n, 2)
        total, rows = compiled_fn(x)
        torch.testing.assert_close(total, x.sum(0))
        assert rows == 2 * n and type(rows) is int
    assert len(recorder.captures) == 1
    assert_one_symbolic_module(recorder.captures[0].compiled_fn, ["s0", "s1"])


# ---- views and layouts ------------------------------------------------------------------------------

VIEWS = {
    "flatten_then_slice": (lambda x: x.view(-1).exp()[1:] * 2, lambda n: (torch.randn(n, 3),)),
    "transpose_reshape": (lambda x: (x.t() + 1).reshape(-1), lambda n: (torch.randn(n, n + 1),)),
    "transposed_input": (lambda x: x * 2 + 1, lambda n: (torch.randn(n + 1, n).t(),)),
    "slices_and_last_row": (lambda x: x[:, 1:] * x[:, :-1] + x[-1, 1:], lambda n: (torch.randn(n, n + 1),)),
    # a symbolic offset in the index arithmetic (it was taken for an index term)
    "slice_from_a_symbolic_start": (lambda x: x[:, x.shape[1] - 2:] * 3, lambda n: (torch.randn(4, n),)),
    "arange_over_rows": (lambda x: x + torch.arange(x.shape[0]).unsqueeze(1), lambda n: (torch.randn(n, 3),)),
    "matmul_extern": (lambda x: torch.relu(x @ x.t()) + 1, lambda n: (torch.randn(n, 4),)),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_and_layouts_with_symbolic_sizes_use_one_kernel_set(name, empty_kernel_cache):
    fn, inputs = VIEWS[name]
    recorder, codegen, graphs = run_sizes(fn, inputs, [3, 4, 6], dynamic=True)
    assert len(recorder.captures) == 1 and codegen == 1
    (graph,) = graphs
    assert graph.fallback_reason is None and graph.symbolic_refused is None
    assert len(modules_used(graph)) == 1 and graph.module.SIZE_ARGUMENTS


# ---- what one module may serve ------------------------------------------------------------------

def softmax_twice(x):
    return torch.softmax(x, -1) * 2


def test_direct_calls_outside_the_signature_get_kernels_per_size(empty_kernel_cache):
    compiled_fn, recorder = compiled(softmax_twice, backend="triton", dynamic=True)
    compiled_fn(torch.randn(3, 5))
    graph = recorder.captures[0].compiled_fn
    symbolic = graph.module
    others = [torch.randn(6, 4).t(), torch.randn(1, 5), torch.randn(4, 6, dtype=torch.float64)]
    for x in [torch.randn(4, 6), *others, torch.randn(4, 7)]:
        torch.testing.assert_close(graph(x)[0], softmax_twice(x))
    assert sum(module is symbolic for module in graph.specialisations.values()) == 3
    assert len(modules_used(graph)) == 1 + len(others)  # a transposed, a 1-row, a float64 input


def more_than_four_rows(x):
    if x.shape[0] > 4:
        return x * 2
    return x - 1


def test_shape_env_facts_are_part_of_the_signature(empty_kernel_cache):
    compiled_fn, recorder = compiled(more_than_four_rows, backend="triton", dynamic=True)
    for n in (6, 9):
        x = torch.randn(n, 2)
        torch.testing.assert_close(compiled_fn(x), more_than_four_rows(x))
    graph = recorder.captures[0].compiled_fn
    assert [str(fact) for fact in graph.signature.facts] == ["s0 > 4"]
    assert not graph.signature.matches([torch.randn(3, 2)])  # the module assumed s0 > 4
    assert graph.signature.matches([torch.randn(7, 2)])
    x = torch.randn(3, 2)
    torch.testing.assert_close(graph(x)[0], x * 2)  # the graph's branch, from per-size kernels
    assert len(modules_used(graph)) == 2


def ones_of_length(x, k):
    return torch.ones(k) * x.sum()


def test_an_int_used_as_a_tensor_size_is_not_a_launch_argument(empty_kernel_cache, caplog):
    compiled_fn, recorder = compiled(ones_of_length, backend="triton")
    with caplog.at_level("INFO", logger="fastdynamo.backends.triton"):
        for k in (2, 3, 5):
            x = torch.randn(3)
            torch.testing.assert_close(compiled_fn(x, k), ones_of_length(x, k))
    assert len(recorder.captures) == 2
    assert "an int input is a tensor size (v0)" in caplog.text
    assert recorder.captures[1].compiled_fn.fallback_reason == "an input is not a tensor"

"""The index algebra and the kernel IR's verifier, run after every pass."""
from __future__ import annotations

import pytest
import torch

from fastdynamo.backends.kernels import indexing
from fastdynamo.backends.kernels.fusion import fuse, inline_broadcast_inputs
from fastdynamo.backends.kernels.indexing import Var, add, floordiv, mod, mul, render
from fastdynamo.backends.kernels.ir import (Constant, InputNode, IRVerificationError, KernelGraph, Load, Op,
                                           OutputRef, PointwiseNode)
from fastdynamo.backends.kernels.lowering import lower, trace_aten


def test_simplifies_split_then_merge_back_to_the_variable():
    i = Var("i", 24)
    rows, cols = indexing.unravel(i, (4, 6))
    assert render(indexing.ravel((rows, cols), (4, 6))) == "i"


def test_bounds_fold_div_and_mod():
    j = Var("j", 8)
    assert render(mod(j, 8)) == "j"
    assert render(floordiv(j, 8)) == "0"
    assert render(floordiv(add(mul(Var("i", 3), 8), j), 8)) == "i"
    assert indexing.upper_bound(add(mul(Var("i", 3), 8), j)) == 24


def test_substitute_and_free_vars():
    expr = add(mul(Var("a", 5), 3), Var("b", 3), 2)
    replaced = indexing.substitute(expr, {"a": Var("x0", 5), "b": indexing.Const(0)})
    assert render(replaced) == "x0 * 3 + 2"
    assert indexing.free_vars(replaced) == {"x0"}


def _passes(fn, *inputs):
    graph = lower(trace_aten(torch.fx.symbolic_trace(fn), list(inputs)).graph_module)
    graph.verify()
    inline_broadcast_inputs(graph).verify()
    schedule = fuse(graph)
    schedule.verify()
    return graph, schedule


@pytest.mark.parametrize("fn", [
    lambda x: torch.softmax(x, -1),
    lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],)),
    lambda x: (x.t() @ x).relu().sum(0),
    lambda x: x[1:, ::2].exp() + x.mean(),
    lambda x: x * x[0].tanh().exp() + x[:, 1:2].sigmoid(),
])
def test_verify_runs_after_each_pass(fn):
    _passes(fn, torch.randn(4, 6))


def _graph_with_body(body, shape=(4,)):
    graph = KernelGraph()
    graph.add(InputNode("arg0", shape, (1,), torch.float32))
    graph.add(PointwiseNode("buf0", shape, torch.float32, (Var("i0", shape[0]),), body, (1,)))
    graph.outputs = [OutputRef("buf0")]
    return graph


def test_verifier_rejects_reads_of_undefined_buffers():
    graph = _graph_with_body(Load("nowhere", (Var("i0", 4),), torch.float32))
    with pytest.raises(IRVerificationError, match="undefined"):
        graph.verify()


def test_verifier_rejects_out_of_bounds_and_out_of_scope_indices():
    with pytest.raises(IRVerificationError, match="out of bounds"):
        _graph_with_body(Load("arg0", (add(Var("i0", 4), 1),), torch.float32)).verify()
    with pytest.raises(IRVerificationError, match="scope"):
        _graph_with_body(Load("arg0", (Var("j", 4),), torch.float32)).verify()


def test_verifier_rejects_unknown_ops_and_dtype_mismatch():
    with pytest.raises(IRVerificationError, match="unknown op"):
        _graph_with_body(Op("frobnicate", (Constant(1.0, torch.float32),), torch.float32)).verify()
    with pytest.raises(IRVerificationError, match="buffer is"):
        _graph_with_body(Load("arg0", (Var("i0", 4),), torch.float16)).verify()


def test_schedule_verifier_rejects_reads_before_writes():
    _, schedule = _passes(lambda x: ((x + 1) @ x).sum(0), torch.randn(4, 4))
    assert len(schedule.steps) == 3
    schedule.steps.reverse()
    with pytest.raises(IRVerificationError):
        schedule.verify()


def _pointwise_names(graph):
    return [node.name for node in graph.nodes if node.kind == "pointwise"]


def test_a_transcendental_table_read_by_many_rows_is_computed_once():
    # RoPE's cos of a (positions, dim) table read by every head: recomputing it per
    # element of the consumer would repeat the cos 4 times (not inlined)...
    graph, _ = _passes(lambda t, x: x * torch.cos(t), torch.randn(8, 16), torch.randn(4, 8, 16))
    assert len(_pointwise_names(inline_broadcast_inputs(graph))) == 2
    # ...where a cheap value of the same table is inlined into its consumer
    graph, _ = _passes(lambda t, x: x * (t + 1), torch.randn(8, 16), torch.randn(4, 8, 16))
    assert len(_pointwise_names(inline_broadcast_inputs(graph))) == 1
    # and a transcendental repeated by a few evaluations is inlined too
    graph, _ = _passes(lambda y, x: x * torch.tanh(y), torch.randn(4), torch.randn(3, 4))
    assert len(_pointwise_names(inline_broadcast_inputs(graph))) == 1


def test_bitwise_ops_of_bools_are_kernels_and_of_integers_aten_ops():
    graph, _ = _passes(lambda a, b: ~((a > 0) & (b < 1)) | (a > b), torch.randn(3, 4), torch.randn(3, 4))
    assert not [node for node in graph.nodes if node.kind == "extern"]
    graph, _ = _passes(lambda a, b: a & b, torch.arange(12).reshape(3, 4), torch.arange(12).reshape(3, 4))
    assert [node for node in graph.nodes if node.kind == "extern"]

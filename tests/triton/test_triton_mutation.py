"""Graphs that mutate. An in-place op that changes the values of a whole graph input
(``x.add_(1)``, ``x.copy_(y)``) becomes functional, and the input's last value is written
back into the caller's tensor (by the kernel itself where nothing reads the old value
after it, ``kernels/in_place.py``, else copied in). Other writes to inputs (through a
view, a split piece, ``out=``, an alias read later, metadata changes) run the graph as
ATen ops, decided at compile time, with the reason logged; in-place ops on
intermediates become functional when nothing else aliases them, and stay kernels."""
from __future__ import annotations

import pytest
import torch

from fastdynamo.backends.triton import compile_graph


def _hand_built(inplace: str) -> torch.fx.GraphModule:
    """placeholder x -> x.add_(1) -> (x.add_(1)) * 2: the shape capture gives ``x.add_(1)``."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    if inplace == "call_method":
        added = graph.call_method("add_", (x, 1))
    else:
        added = graph.call_function(torch.ops.aten.add_.Tensor, (x, 1))
    graph.output((graph.call_function(torch.mul, (added, 2)),))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


@pytest.mark.parametrize("inplace", ["call_method", "aten"])
def test_hand_built_input_mutation_is_written_back(inplace):
    gm = _hand_built(inplace)
    x = torch.arange(4.0)
    compiled = compile_graph(gm, [x.clone()])
    assert compiled.fallback_reason is None and compiled.kernel_count >= 1
    actual_input, expected_input = x.clone(), x.clone()
    (actual,) = compiled(actual_input)
    (expected,) = gm(expected_input)
    assert torch.equal(actual, expected)
    assert torch.equal(actual_input, expected_input) and actual_input.tolist() == [1.0, 2.0, 3.0, 4.0]


def _chained_writes(x, y, s):
    s.mul_(0.9).addcmul_(y, y, value=0.1)
    x.add_(y * -0.5 / (s.sqrt() + 1e-8))
    return x * 0


def _write_then_read_old_elsewhere(x):
    old = x.flip(0) * 1  # read at other elements than written
    x.mul_(2)
    return old + x


def _copy_from_other_input(x, y):
    x.copy_(y)
    return y + 1


@pytest.mark.parametrize("fn", [_chained_writes, _write_then_read_old_elsewhere, _copy_from_other_input],
                         ids=lambda fn: fn.__name__.strip("_"))
def test_written_inputs_get_eager_values(fn):
    inputs = [torch.rand(3, 4) for _ in range(fn.__code__.co_argcount)]
    compiled = compile_graph(torch.fx.symbolic_trace(fn), [t.clone() for t in inputs])
    assert compiled.fallback_reason is None and compiled.kernel_count >= 1
    actual_inputs, expected_inputs = [t.clone() for t in inputs], [t.clone() for t in inputs]
    torch.testing.assert_close(compiled(*actual_inputs), fn(*expected_inputs))
    for actual, expected in zip(actual_inputs, expected_inputs, strict=True):
        torch.testing.assert_close(actual, expected)
    source = open(compiled.source_path).read()
    if fn is _chained_writes:  # every write straight into its input: no copies
        assert ".copy_(" not in source and source.count("# the input, written in place") == 2
    if fn is _write_then_read_old_elsewhere:
        assert "arg0.copy_(" in source or "# the input, written in place" in source


def test_written_input_sharing_memory_with_another_runs_the_aten_ops():
    # kernels compute from the inputs' values on entry: with y a view of x, eager's
    # ``y + 1`` reads the doubled x
    compiled = compile_graph(torch.fx.symbolic_trace(_write_then_read_other), [torch.ones(4), torch.ones(4)])
    assert compiled.fallback_reason is None and compiled.kernel_count >= 1
    x, expected_x = torch.ones(4), torch.ones(4)
    torch.testing.assert_close(compiled(x, x[:]), _write_then_read_other(expected_x, expected_x[:]))
    assert torch.equal(x, expected_x) and x.tolist() == [2.0] * 4
    x, y = torch.ones(4), torch.ones(4)  # separate memory: the kernels
    assert compiled(x, y).tolist() == [2.0] * 4 and x.tolist() == [2.0] * 4


def _write_then_read_other(x, y):
    x.mul_(2)
    return y + 1


def _through_view(x):
    x.unfold(0, 1, 1).add_(1)
    return x * 1


def _through_split(x):
    first, second = x.split(1)
    first.add_(1)
    return second * 1


def _through_detach(x):
    x.detach().add_(1)
    return x * 1


def _setitem(x):
    x.__setitem__(0, 5.0)  # x[0] = 5.0 (symbolic_trace records only the call form)
    return x + 1


def _out_argument(x, y):
    return torch.add(y * 2, 1, out=x) * 2


def _metadata(x):
    return x.t_() + 1


@pytest.mark.parametrize("fn", [_through_view, _through_split, _through_detach, _setitem, _out_argument,
                                _metadata], ids=lambda fn: fn.__name__.strip("_"))
def test_input_mutations_are_detected_and_run_exactly_as_eager(fn):
    inputs = [torch.randn(2, 2) for _ in range(fn.__code__.co_argcount)]
    compiled = compile_graph(torch.fx.symbolic_trace(fn), [t.clone() for t in inputs])
    assert "mutates" in compiled.fallback_reason
    actual_inputs, expected_inputs = [t.clone() for t in inputs], [t.clone() for t in inputs]
    torch.testing.assert_close(compiled(*actual_inputs), fn(*expected_inputs))
    for actual, expected in zip(actual_inputs, expected_inputs, strict=True):
        assert actual.shape == expected.shape and torch.equal(actual, expected)


def _alias_read_later(x):
    y = x * 2
    view = y.view(-1)
    y.add_(1)
    return view


def _base_read_later(x):
    y = x * 2
    y.unfold(0, 1, 1).add_(1)
    return y


def _split_base_read_later(x):
    y = x * 2
    first, _ = y.split(1)
    first.add_(1)
    return y


def _transpose_read_later(x):
    y = x * 2
    transposed = y.t()
    y.mul_(2)
    return transposed + 0


def _out_into_intermediate(x):
    y = x * 2
    z = torch.empty_like(y)
    torch.mul(y, 3, out=z)
    return z


@pytest.mark.parametrize("fn", [_alias_read_later, _base_read_later, _split_base_read_later,
                                _transpose_read_later, _out_into_intermediate],
                         ids=lambda fn: fn.__name__.strip("_"))
def test_mutated_intermediates_with_live_aliases_run_as_aten(fn):
    x = torch.randn(2, 2)
    compiled = compile_graph(torch.fx.symbolic_trace(fn), [x])
    assert compiled.fallback_reason and compiled.kernel_count == 0
    torch.testing.assert_close(compiled(x), fn(x))


def _mutate_then_return(x):
    y = x * 2
    y.add_(1)
    return y


def _inplace_relu_then_use(x):
    h = x * 2
    h.relu_()
    return h * 3


def _chain(x):
    y = x * 2
    y.add_(1).mul_(3)
    return y


def _inplace_transpose(x):
    y = x * 2
    y.t_()
    return y + 1


@pytest.mark.parametrize("fn", [_mutate_then_return, _inplace_relu_then_use, _chain, _inplace_transpose],
                         ids=lambda fn: fn.__name__.strip("_"))
def test_inplace_on_unaliased_intermediates_stays_a_kernel(compare, fn):
    x = torch.randn(3, 2)
    before = x.clone()
    compiled = compare(fn, x)
    assert compiled.kernel_count >= 1 and torch.equal(x, before)

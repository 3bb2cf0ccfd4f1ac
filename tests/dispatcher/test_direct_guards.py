"""The direct path keeps every guard: each tensor property (type, dtype, device, ndim,
sizes, strides, requires_grad, also past the five dims stored inline), the torch state,
many arguments and symbolic shapes; a failing guard goes through the frame and
recompiles, and the new entry is then called directly too. Also what the direct call
calls: the graph function returning the frame's result itself (no tuple to pick from)."""
from __future__ import annotations

import pytest
import torch

import fastdynamo

from .helpers import compile_recorded, counts, entries, same


def relu_add(x, y):
    return torch.relu(x + y)


def _served_then_recompiled(compiled, recorder, fn, first, second):
    """``first`` twice (compile, then a direct hit), ``second`` twice (a guard fails:
    a frame call that compiles, then a direct hit of the new entry)."""
    same(compiled(*first), fn(*first))
    same(compiled(*first), fn(*first))
    assert counts(compiled) == (1, 0, 1) and len(recorder.captures) == 1
    same(compiled(*second), fn(*second))
    assert counts(compiled) == (1, 0, 2) and len(recorder.captures) == 2
    same(compiled(*second), fn(*second))
    same(compiled(*first), fn(*first))
    assert counts(compiled) == (3, 0, 2) and len(recorder.captures) == 2


CHANGES = {
    "dtype": lambda t: t.double(),
    "ndim": lambda t: t.reshape(2, 4),
    "size": lambda t: torch.randn(16),
    "stride": lambda t: torch.randn(8, 2)[:, 0],  # stride 2
    "type": lambda t: torch.nn.Parameter(t, requires_grad=False),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_each_tensor_property_is_guarded_on_the_direct_path(change):
    compiled, recorder = compile_recorded(relu_add)
    x, y = torch.randn(8), torch.randn(8)
    other = CHANGES[change](x)
    _served_then_recompiled(compiled, recorder, relu_add, (x, y), (other, other))


def test_requires_grad_is_guarded_on_the_direct_path():
    compiled, recorder = compile_recorded(relu_add)
    x, y = torch.randn(8), torch.randn(8)
    w = torch.randn(8, requires_grad=True)
    _served_then_recompiled(compiled, recorder, relu_add, (x, y), (w, y))
    result = compiled(w, y)
    assert result.requires_grad and result.grad_fn is not None


def test_device_is_guarded_on_the_direct_path():
    compiled, recorder = compile_recorded(relu_add)
    x = torch.randn(8)
    meta = torch.empty(8, device="meta")
    compiled(x, x)
    compiled(x, x)
    result = compiled(meta, meta)
    assert result.device.type == "meta" and result.shape == (8,)
    assert counts(compiled) == (1, 0, 2) and len(recorder.captures) == 2
    assert compiled(meta, meta).device.type == "meta"
    same(compiled(x, x), relu_add(x, x))
    assert counts(compiled) == (3, 0, 2)


def test_sizes_and_strides_past_the_inline_dims_are_guarded():
    compiled, recorder = compile_recorded(relu_add)
    six = torch.randn(2, 1, 3, 1, 2, 2)
    permuted = torch.randn(2, 2, 1, 3, 1, 2).permute(5, 4, 3, 2, 1, 0)
    assert permuted.shape == six.shape and permuted.stride() != six.stride()
    _served_then_recompiled(compiled, recorder, relu_add, (six, six), (permuted, six))


def test_grad_mode_change_recompiles_and_both_entries_are_direct():
    compiled, recorder = compile_recorded(relu_add)
    x, y = torch.randn(8), torch.randn(8)
    with torch.no_grad():
        compiled(x, y)
        compiled(x, y)
    compiled(x, y)
    compiled(x, y)
    with torch.no_grad():
        same(compiled(x, y), relu_add(x, y))
    assert counts(compiled) == (3, 0, 2) and len(recorder.captures) == 2


def _sum_of(count):
    names = ", ".join(f"t{i}" for i in range(count))
    namespace = {}
    exec(f"def many({names}):\n    return {' + '.join(f't{i}' for i in range(count))}\n", namespace)
    return namespace["many"]


def test_sixty_four_tensor_arguments_are_all_guarded_directly():
    many = _sum_of(64)
    compiled, recorder = compile_recorded(many)
    tensors = [torch.randn(4) for _ in range(64)]
    same(compiled(*tensors), many(*tensors))
    same(compiled(*tensors), many(*tensors))
    assert counts(compiled) == (1, 0, 1)
    last_changed = [*tensors[:-1], tensors[-1].double()]
    same(compiled(*last_changed), many(*last_changed))
    same(compiled(*last_changed), many(*last_changed))
    assert counts(compiled) == (2, 0, 2) and len(recorder.captures) == 2
    keywords = {f"t{i}": t for i, t in enumerate(tensors)}
    same(compiled(**keywords), many(*tensors))
    assert counts(compiled) == (3, 0, 2)


def test_symbolic_entry_serves_new_sizes_directly():
    compiled, recorder = compile_recorded(relu_add, dynamic=True)
    for size in (3, 5, 9, 17):
        x, y = torch.randn(size), torch.randn(size)
        same(compiled(x, y), relu_add(x, y))
    assert len(recorder.captures) == 1 and counts(compiled) == (3, 0, 1)
    mismatch = (torch.randn(5), torch.randn(6))  # the shape guard x.size(0) == y.size(0)
    with pytest.raises(RuntimeError):
        relu_add(*mismatch)
    with pytest.raises(RuntimeError):
        compiled(*mismatch)
    assert counts(compiled)[0] == 3


def test_the_direct_call_calls_a_graph_function_returning_the_frames_result():
    compiled, _ = compile_recorded(relu_add)
    x, y = torch.randn(8), torch.randn(8)
    compiled(x, y)
    (entry,) = entries(relu_add)
    result = entry.direct.graph(x, y)
    assert type(result) is torch.Tensor  # not the graph's tuple of outputs
    same(result, relu_add(x, y))


def test_a_tuple_of_outputs_in_another_order_is_what_eager_returns():
    def swapped(x):
        first = x * 2
        second = x + 1
        return second, first, second

    compiled, recorder = compile_recorded(swapped)
    x = torch.randn(3)
    compiled(x)
    one, two = compiled(x), compiled(x)
    same(one, swapped(x))
    assert one[0] is one[2] and one is not two and one[0] is not two[0]
    assert counts(compiled) == (2, 0, 1) and len(recorder.captures) == 1


def test_graph_with_module_attributes_is_called_directly():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    compiled = fastdynamo.compile(model, backend="eager")
    x = torch.randn(2, 4)
    with torch.no_grad():
        same(compiled(x), model(x))
        same(compiled(x), model(x))
        assert compiled._dispatch.direct_calls == 1
        model[0].weight.mul_(2)  # read at each call, not baked into the graph
        same(compiled(x), model(x))
    assert compiled._dispatch.direct_calls == 2

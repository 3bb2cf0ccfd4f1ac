"""The eager backend's direct variant (`backends.eager.graph_function_returning`) is the
graph function's own source narrowed in one syntax-tree pass: it returns the frame's
result itself, keeps its inputs (no `x = None` stores), frees intermediates no later than
FX does (a value made where an intermediate dies takes its local), is unbound when it
does not read its module, and shows the original's lines in tracebacks; graphs FX
generates differently get none."""
from __future__ import annotations

import dis
import operator

import torch

from fastdynamo.backends.eager import eager, graph_function_returning

from .helpers import compile_recorded, counts, entries, same


def chain_graph():
    """x, y -> (relu(x + y), x * 2, y): inputs cleared after their last use by FX."""
    graph = torch.fx.Graph()
    x, y = graph.placeholder("x"), graph.placeholder("y")
    added = graph.call_function(operator.add, (x, y))
    relu = graph.call_function(torch.relu, (added,))
    doubled = graph.call_function(operator.mul, (x, 2))
    graph.output((relu, doubled, y))
    return eager(torch.fx.GraphModule(torch.nn.Module(), graph), [torch.ones(1), torch.ones(1)])


def stores(function):
    return {i.argval for i in dis.get_instructions(function) if i.opname == "STORE_FAST"}


def test_the_variant_returns_the_picked_outputs_and_keeps_its_inputs():
    full = chain_graph()
    x, y = torch.randn(4), torch.randn(4)
    relu, doubled, same_y = full(x, y)
    assert {"x", "add"} <= stores(full.__func__)  # FX clears an input (y is an output) and intermediates
    one = graph_function_returning(full, 0)
    same(one(x, y), relu)
    pair = graph_function_returning(full, (2, 1, 2))
    result = pair(x, y)
    assert result[0] is y and result[2] is y
    same(result[1], doubled)
    for variant in (one, pair):
        # relu is made where add dies: it takes add's local, and no `add = None` is left;
        # mul is made where only an input dies (inputs are never cleared): its own local
        assert stores(variant) == {"add", "mul"} and not any_none_store(variant)
        assert variant.__code__.co_filename == full.__code__.co_filename
        assert not hasattr(variant, "__self__")  # the graph reads no attribute of its module


def any_none_store(function):
    instructions = list(dis.get_instructions(function))
    return any(a.opname == "LOAD_CONST" and a.argval is None and b.opname == "STORE_FAST"
               for a, b in zip(instructions, instructions[1:]))


def sum_graph(count, extra_use_of_first_sum=False):
    """t0 + t1 + ... chained; optionally the first sum is also returned (it stays alive)."""
    graph = torch.fx.Graph()
    inputs = [graph.placeholder(f"t{i}") for i in range(count)]
    first = total = graph.call_function(operator.add, (inputs[0], inputs[1]))
    for value in inputs[2:]:
        total = graph.call_function(operator.add, (total, value))
    outputs = (total, first) if extra_use_of_first_sum else (total,)
    graph.output(outputs)
    return eager(torch.fx.GraphModule(torch.nn.Module(), graph), [])


def test_a_chain_of_operations_runs_in_one_local_and_stores_no_none():
    full = sum_graph(6)
    variant = graph_function_returning(full, 0)
    assert stores(variant) == {"add"} and not any_none_store(variant)
    inputs = [torch.randn(3) for _ in range(6)]
    same(variant(*inputs), full(*inputs)[0])


def test_an_intermediate_still_used_keeps_its_own_local():
    full = sum_graph(4, extra_use_of_first_sum=True)
    variant = graph_function_returning(full, (0, 1))
    inputs = [torch.randn(3) for _ in range(4)]
    total, first = variant(*inputs)
    same(total, full(*inputs)[0])
    same(first, inputs[0] + inputs[1])
    assert "add" in stores(variant) and len(stores(variant)) == 2  # add kept, the chain in one more


def test_intermediates_are_freed_where_fx_frees_them():
    """A weak reference to the first intermediate is dead once the next op has run, as in
    FX's own function (its `add = None` store right after the op)."""
    import weakref

    seen = []

    def probe(value):
        seen.append(weakref.ref(value) if not seen else seen[0]() is None)
        return value * 1

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    first = graph.call_function(operator.add, (x, 1))
    second = graph.call_function(probe, (first,))
    third = graph.call_function(probe, (second,))
    graph.output((third,))
    full = eager(torch.fx.GraphModule(torch.nn.Module(), graph), [])
    for function in (full, graph_function_returning(full, 0)):
        seen.clear()
        function(torch.ones(2))
        assert seen[1] is True  # the first sum was freed before the second probe ran


def test_a_graph_reading_its_module_stays_bound():
    root = torch.nn.Module()
    root.weight = torch.nn.Parameter(torch.randn(3))
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output((graph.call_function(operator.mul, (x, graph.get_attr("weight"))),))
    full = eager(torch.fx.GraphModule(root, graph), [])
    variant = graph_function_returning(full, 0)
    assert variant.__self__ is full.__self__
    value = torch.randn(3)
    same(variant(value), value * root.weight)


def test_no_variant_for_functions_not_made_by_the_backend():
    full = chain_graph()
    assert graph_function_returning(full.__func__, 0) is None  # not bound to its module
    assert graph_function_returning(lambda x: (x,), 0) is None
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(x)  # not a tuple of outputs
    assert graph_function_returning(eager(torch.fx.GraphModule(torch.nn.Module(), graph), []), 0) is None


def test_a_compiled_frame_is_served_by_the_variant():
    def three(x, y):
        total = torch.relu(x + y)
        return total, x * 2

    compiled, recorder = compile_recorded(three)
    x, y = torch.randn(4), torch.randn(4)
    same(compiled(x, y), three(x, y))
    same(compiled(x, y), three(x, y))
    (entry,) = entries(three)
    assert type(entry.direct.graph(x, y)) is tuple and not stores(entry.direct.graph) & {"x", "y"}
    assert counts(compiled) == (1, 0, 1) and len(recorder.captures) == 1

"""The eager backend's direct variant (`backends.eager.graph_function_returning`) is the
graph function's own source narrowed in one syntax-tree pass: it returns the frame's
result itself, keeps its inputs (no `x = None` stores), still clears intermediates, and
shows the original's lines in tracebacks; graphs FX generates differently get none."""
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
        assert "add" in stores(variant.__func__) and not {"x", "y"} & stores(variant.__func__)
        assert variant.__code__.co_filename == full.__code__.co_filename
        assert variant.__self__ is full.__self__


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

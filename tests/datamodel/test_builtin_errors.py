"""Builtins and operators the trace computes on constants raise what eager raises, from
the frame run as Python (a graph break naming the error), never as a compiler error
(tests run strict: an internal error would fail them); and their results are eager's."""
from __future__ import annotations

import pytest
import torch

from .helpers import check

# (the function, graphs): an error ends the graph before the raising expression, so
# nothing is captured; a result is one graph.
CASES = [
    (lambda x: x + abs("a"), 0),
    (lambda x: x + isinstance(1, 3), 0),
    (lambda x: x + len(5), 0),
    (lambda x: x + len(range(0, 10, 0)), 0),
    (lambda x: x + [1, 2].index(3), 0),
    (lambda x: x + ((1, 2) < (1, "a")), 0),
    (lambda x: x + (1 < "a"), 0),
    (lambda x: x + len(sum(["a"], "")), 0),
    (lambda x: x + len(sum([b"a"], b"")), 0),
    (lambda x: x + max([]), 0),
    (lambda x: x + len(sorted([1, "a"])), 0),
    (lambda x: x + len(dict([(1, 2, 3)])), 0),
    (lambda x: x + len(set([[1]])), 0),
    (lambda x: x + len({[1]: 2}), 0),
    (lambda x: x + len({[1], 2}), 0),
    (lambda x: x + len([1, 2, 3][::0]), 0),
    (lambda x: x + getattr(3, 5), 0),
    (lambda x: x + len(dict([(1, 2)])) + len({(1,): 2}) + len([1, 2, 3][::-2]) + getattr(3, "real"), 1),
    (lambda x: x + -"a".__len__() + len(sum([[1], [2]], [])), 1),
    (lambda x: x + isinstance(1, int | str) + max([3, 1]) + min(2, 5) + len(range(5, 0, -2)), 1),
    (lambda x: x + [3, 4].index(4) + (2, 1).index(1) + (~True), 1),
]


@pytest.mark.parametrize("fn, graphs", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_constant_builtins_raise_or_return_as_eager(fn, graphs):
    check(fn, torch.ones(2), graphs=graphs)


def set_minus_list(x):
    a = {1}
    a -= [1]  # set.__isub__ takes sets only: TypeError (it returned the set)
    return x + len(a)


def set_minus_frozenset(x):
    a = {1, 2}
    a -= frozenset([1])
    return x + len(a)


def bad_format_spec(x):
    return x + len(f"{1:q}")


def bad_size_dimension(x):
    return x + x.size(3)


def unhashable_in_comprehensions(x):
    return x + len({[v]: 1 for v in range(2)}) + len({[v] for v in range(2)})


@pytest.mark.parametrize("fn, graphs", [
    (set_minus_list, 0), (set_minus_frozenset, 1), (bad_format_spec, 0), (bad_size_dimension, 0),
    (unhashable_in_comprehensions, 0),
], ids=lambda v: getattr(v, "__name__", ""))
def test_statements_raise_or_return_as_eager(fn, graphs):
    check(fn, torch.ones(2), graphs=graphs)

"""User objects' own special methods, looked up on the type as CPython does: binary
operators (with the reflected method and NotImplemented), ``obj[i]``, ``obj(...)`` and
``len(obj)`` are inlined into the graph; a class's method replaced later recompiles."""
from __future__ import annotations

import pytest
import torch

import fastdynamo


class Vector:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        if not isinstance(other, Vector):
            return NotImplemented
        return Vector(self.t + other.t)

    def __radd__(self, other):
        return Vector(self.t + other)

    def __mul__(self, k):
        return Vector(self.t * k)

    def __len__(self):
        return 3

    def __getitem__(self, i):
        return self.t[i]

    def __call__(self, scale):
        return self.t * scale


def use_vectors(x, v):
    w = (Vector(x) + v) * 2
    u = 1.5 + w  # int/float + Vector: the reflected __radd__
    return u.t, len(w), w[0], w(3.0), v(2.0)


def test_user_dunders_are_inlined_in_one_graph():
    x, v = torch.arange(3.0), Vector(torch.ones(3))
    expected = use_vectors(x, v)
    actual = fastdynamo.compile(use_vectors, backend="eager", fullgraph=True)(x, v)
    for a, e in zip(actual, expected, strict=True):
        assert type(a) is type(e) and (torch.equal(a, e) if isinstance(e, torch.Tensor) else a == e)
    fastdynamo.reset()
    report = fastdynamo.explain(use_vectors, backend="eager")(x, v)
    assert (report.graph_count, report.graph_break_count) == (1, 0)


def test_replacing_a_dunder_on_the_class_recompiles():
    class Box:
        def __init__(self, t):
            self.t = t

        def __getitem__(self, i):
            return self.t[i] + 1

    def f(b):
        return b[0] * 2

    compiled = fastdynamo.compile(f, backend="eager")
    box = Box(torch.ones(2, 2))
    assert torch.equal(compiled(box), f(box))
    Box.__getitem__ = lambda self, i: self.t[i] - 1
    assert torch.equal(compiled(box), f(box))


def test_a_class_without_the_dunder_raises_eagers_error():
    class Plain:
        pass

    def f(x, p):
        return x + 1, p[0]

    with pytest.raises(TypeError, match="not subscriptable"):
        fastdynamo.compile(f, backend="eager")(torch.ones(2), Plain())


class EqualByValue:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return self.v == other.v if isinstance(other, EqualByValue) else NotImplemented


class EqualSub(EqualByValue):
    def __eq__(self, other):
        return True  # the reflected side goes first for a proper subclass


def not_equal(x, a, b):
    return x * (a != b) + (b != a) * 10 + (a != 3) * 100


@pytest.mark.parametrize("a, b", [(EqualByValue(1), EqualByValue(1)), (EqualByValue(1), EqualByValue(2)),
                                  (EqualByValue(1), EqualSub(2))])
def test_not_equal_inverts_the_classs_own_eq(a, b):
    """``!=`` without ``__ne__`` is ``object.__ne__``: the inverse of ``__eq__`` (and
    identity when ``__eq__`` returns NotImplemented both ways)."""
    x = torch.ones(2)
    expected = not_equal(x, a, b)
    compiled = fastdynamo.compile(not_equal, backend="eager", fullgraph=True)
    assert torch.equal(compiled(x, a, b), expected)
    fastdynamo.reset()
    report = fastdynamo.explain(not_equal, backend="eager")(x, a, b)
    assert (report.graph_count, report.graph_break_count) == (1, 0)

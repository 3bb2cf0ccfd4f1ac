"""Namedtuple attributes beyond fields: ``_fields``, ``_replace``, ``_asdict`` and a
``typing.NamedTuple``'s own methods and properties, in one graph with eager's results."""
from __future__ import annotations

import collections
import inspect
import typing

import pytest
import torch

import fastdynamo

from .helpers import compiled_with_recorder

Point = collections.namedtuple("Point", "x y")


class Pair(typing.NamedTuple):
    left: typing.Any
    right: typing.Any

    def total(self, scale=1.0):
        return (self.left + self.right) * scale

    @property
    def gap(self):
        return self.left - self.right


def uses_namedtuples(x, p):
    q = Point(x, x * 2)._replace(y=x + 1)
    d = q._asdict()
    pair = Pair(x, p.right)
    return q, d, list(d), Point._fields, pair.total(2.0), pair.gap, p.total()


def test_namedtuple_methods_in_one_graph():
    x, arg = torch.arange(3.0), Pair(torch.ones(3), torch.full((3,), 2.0))
    expected = uses_namedtuples(x, arg)
    actual = fastdynamo.compile(uses_namedtuples, backend="eager", fullgraph=True)(x, arg)
    assert type(actual[0]) is Point and all(torch.equal(a, e) for a, e in zip(actual[0], expected[0]))
    assert type(actual[1]) is dict and list(actual[1]) == list(expected[1])
    assert actual[2:4] == expected[2:4]
    assert all(torch.equal(a, e) for a, e in zip(actual[4:], expected[4:]))
    fastdynamo.reset()
    report = fastdynamo.explain(uses_namedtuples, backend="eager")(x, arg)
    assert (report.graph_count, report.graph_break_count) == (1, 0)


def test_replace_with_an_unknown_field_raises_eagers_error():
    def f(x):
        return Point(x, x)._replace(z=1)

    # ValueError up to 3.12, TypeError from 3.13: whatever eager raises
    with pytest.raises((ValueError, TypeError), match="unexpected field") as eager:
        f(torch.ones(2))
    with pytest.raises(eager.type, match="unexpected field"):
        fastdynamo.compile(f, backend="eager")(torch.ones(2))


class Vec(typing.NamedTuple):
    x: typing.Any
    y: typing.Any

    def __add__(self, other):
        return Vec(self.x + other.x, self.y + other.y)  # reads the global ``Vec``

    def norm(self):
        return Vec(self.x.abs(), self.y.abs())  # a global read in a method


def adds_vectors_made_in_the_frame(a, b):
    v = Vec(a, b) + Vec(b, a)
    return v, v.norm()


def test_operator_and_method_of_a_namedtuple_made_in_the_frame_in_one_graph():
    """The class's methods read this module's globals from a frame with other globals:
    they are found through the class's source (``Vec`` in the frame's globals), not lost
    with the new tuple's."""
    namespace = {"Vec": Vec}
    exec(inspect.getsource(adds_vectors_made_in_the_frame), namespace)  # noqa: S102 - other globals
    fn = namespace["adds_vectors_made_in_the_frame"]
    a, b = torch.arange(3.0) - 1, torch.ones(3)
    expected = fn(a, b)
    actual = fastdynamo.compile(fn, backend="eager", fullgraph=True)(a, b)
    assert [type(t) for t in actual] == [Vec, Vec]
    assert all(torch.equal(g, e) for got, want in zip(actual, expected, strict=True) for g, e in zip(got, want, strict=True))
    fastdynamo.reset()
    report = fastdynamo.explain(fn, backend="eager")(a, b)
    assert (report.graph_count, report.graph_break_count) == (1, 0)


def test_replacing_the_method_of_a_namedtuple_made_in_the_frame_recompiles(monkeypatch):
    a, b = torch.ones(3), torch.full((3,), 2.0)
    compiled, recorder = compiled_with_recorder(adds_vectors_made_in_the_frame)
    compiled(a, b)
    monkeypatch.setattr(Vec, "__add__", lambda self, other: Vec(self.x - other.x, self.y - other.y))
    got, _ = compiled(a, b)
    assert torch.equal(got.x, a - b) and torch.equal(got.y, b - a)
    assert (len(recorder.captures), len(recorder.breaks)) == (2, 0)  # recompiled, in one graph

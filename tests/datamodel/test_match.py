"""``match`` statements in compiled code: sequence, mapping, class and literal patterns
are decided at trace time (one graph), exactly as eager decides them; a subject whose
kind is unknown breaks the graph."""
from __future__ import annotations

import collections
import dataclasses

import pytest
import torch

import fastdynamo

pytestmark = pytest.mark.usefixtures("fresh_cache")

Point = collections.namedtuple("Point", "x y")


@dataclasses.dataclass
class Box:
    width: float
    height: float


def dispatch(x, command):
    match command:
        case ("scale", k):
            return x * k
        case ["shift", k, *rest]:
            return x + k + len(rest)
        case {"kind": "add", "value": int(v), **others}:
            return x + v, sorted(others)
        case Point(x=0, y=yy):
            return x * yy
        case Point(a, b):
            return x * a + b
        case Box(width=w) if w > 10:
            return x - w
        case Box(w, h):
            return x * w * h
        case str() | bytes():
            return x + 0.5, command
        case 7 | 8:
            return -x
        case None:
            return x + 2
        case _:
            return x * 0


COMMANDS = [("scale", 3.0), ["shift", 2.0, "a", "b"], ("shift", 1.0), {"kind": "add", "value": 4},
            {"kind": "add", "value": 4, "z": 1, "a": 2}, {"kind": "add", "value": 4.5},
            Point(0, 5.0), Point(2.0, 1.0), Box(20.0, 1.0), Box(2.0, 3.0), "text", b"raw", 7, 8, 9,
            None, [1, 2], {"kind": "sub"}]


@pytest.mark.parametrize("command", COMMANDS, ids=repr)
def test_match_patterns_compile_whole_and_match_eager(command):
    compiled = fastdynamo.compile(dispatch, backend="eager", fullgraph=True)
    x = torch.arange(3.0)
    expected, actual = dispatch(x, command), compiled(x, command)
    if isinstance(expected, tuple):
        assert torch.equal(actual[0], expected[0]) and actual[1:] == expected[1:]
    else:
        assert torch.equal(actual, expected)
    report = fastdynamo.explain(dispatch, backend="eager")(x, command)
    assert (report.graph_count, report.graph_break_count) == (1, 0)


def test_match_on_a_tensor_breaks_the_graph():
    def f(x):
        match x:
            case torch.Tensor(shape=(3,)):
                return x + 1
            case _:
                return x - 1

    fastdynamo.reset()
    assert torch.equal(fastdynamo.compile(f, backend="eager")(torch.zeros(3)), f(torch.zeros(3)))

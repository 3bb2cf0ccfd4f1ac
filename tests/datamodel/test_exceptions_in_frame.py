"""Exceptions raised and caught inside traced code stay in one graph; what escapes the
frame, or is handled around a graph break, runs as Python with eager's behaviour."""
from __future__ import annotations

import pytest
import torch

import fastdynamo

pytestmark = pytest.mark.usefixtures("fresh_cache")


def caught_in_frame(x):
    try:
        raise ValueError("no")
    except (KeyError, ValueError) as err:
        x = x + 1
        kind = type(err).__name__
    return x * 2, kind


def check_value(t, limit):
    if limit < 0:
        raise ValueError(f"limit {limit}")
    return t.clamp(max=limit)


def caught_from_callee(x, limit):
    try:
        out = check_value(x, limit)
    except ValueError:
        out = x * 0
    finally:
        out = out + 1
    return out


def reraised(x):
    try:
        raise KeyError("k")
    except KeyError:
        x = x + 1
        raise


def nested_handlers(x):
    try:
        try:
            raise TypeError
        except ValueError:
            x = x - 100
    except TypeError:
        x = x + 5
    return x


def break_inside_handler(x):
    try:
        raise ValueError
    except ValueError:
        print("inside the handler")  # a graph break here: the frame runs as Python
        return x + 1


@pytest.mark.parametrize("fn, args", [
    (caught_in_frame, (torch.ones(2),)),
    (caught_from_callee, (torch.arange(3.0), 1.0)),
    (caught_from_callee, (torch.arange(3.0), -1.0)),
    (nested_handlers, (torch.ones(2),)),
], ids=["in-frame", "callee-ok", "callee-raises", "nested"])
def test_caught_exceptions_stay_in_one_graph(fn, args):
    expected = fn(*args)
    actual = fastdynamo.compile(fn, backend="eager", fullgraph=True)(*args)
    assert type(actual) is type(expected)
    if isinstance(expected, tuple):
        assert torch.equal(actual[0], expected[0]) and actual[1:] == expected[1:]
    else:
        assert torch.equal(actual, expected)
    fastdynamo.reset()
    report = fastdynamo.explain(fn, backend="eager")(*args)
    assert (report.graph_count, report.graph_break_count) == (1, 0)


def test_an_exception_leaving_the_frame_is_eagers():
    with pytest.raises(KeyError):
        fastdynamo.compile(reraised, backend="eager")(torch.ones(2))
    fastdynamo.reset()
    with pytest.raises(fastdynamo.FullGraphError):
        fastdynamo.compile(reraised, backend="eager", fullgraph=True)(torch.ones(2))


def test_a_break_inside_a_handler_runs_the_frame_as_python(capsys):
    out = fastdynamo.compile(break_inside_handler, backend="eager")(torch.ones(2))
    assert torch.equal(out, torch.full((2,), 2.0))
    assert capsys.readouterr().out == "inside the handler\n"

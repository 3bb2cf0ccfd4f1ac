"""Graph breaks in frames whose locals live in cells (captured by closures): the cells
are made by the transformed code, hold the traced values, and reach resume functions
through their closure."""
from __future__ import annotations

import io

import torch

import fastdynamo
from .helpers import assert_same


def run_both(fn, *args):
    """(eager result, compiled result of the second call); the first call compiles."""
    fastdynamo.reset()
    expected = fn(*args)
    compiled = fastdynamo.compile(fn, backend="eager")
    compiled(*args)
    return expected, compiled(*args)


def test_closure_made_before_the_break_is_called_after_it():
    out = io.StringIO()

    def f(x, scale):
        def mul(t):
            return t * scale

        y = mul(x)
        print("break", file=out)
        return mul(y) + 1

    expected, actual = run_both(f, torch.ones(3), 2.0)
    assert_same(actual, expected)
    report = fastdynamo.explain(f)(torch.ones(3), 2.0)
    assert report.graph_break_count == 1
    assert report.graph_count == 2  # before the break, and mul(y) + 1 in the resume function


def test_cell_assigned_after_the_break_is_seen_by_an_earlier_closure():
    out = io.StringIO()

    def f(x):
        k = 1

        def add(t):
            return t + k

        first = add(x)
        print("break", file=out)
        k = 10
        return first, add(x)

    expected, actual = run_both(f, torch.zeros(2))
    assert_same(actual, expected)
    assert actual[1].tolist() == [10.0, 10.0]


def test_argument_captured_by_a_closure_keeps_its_value_across_the_break():
    out = io.StringIO()

    def f(x, bias):
        get = lambda: bias  # noqa: E731 - the argument lives in a cell
        y = x + get()
        if y.sum() > 0:  # data-dependent: breaks
            y = y * 2
        return y + get()

    for sign in (1.0, -1.0):
        expected, actual = run_both(f, torch.full((2,), sign), 3.0 * sign)
        assert_same(actual, expected)


def test_nonlocal_counter_updated_on_both_sides_of_a_break():
    out = io.StringIO()

    def f(x):
        calls = 0

        def bump():
            nonlocal calls
            calls += 1

        bump()
        y = x * 2
        print(calls, file=out)
        bump()
        return y, calls

    expected, actual = run_both(f, torch.ones(2))
    assert_same(actual, expected)
    assert actual[1] == 2
    assert out.getvalue().split() == ["1", "1", "1"]

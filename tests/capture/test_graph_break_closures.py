"""Graph breaks in frames whose locals live in cells (captured by closures): the cells
are made by the transformed code, hold the traced values, and reach resume functions
through their closure."""
from __future__ import annotations

import io

import pytest
import torch

import fastdynamo
from fastdynamo.convert_frame import Recorder

from .helpers import assert_same

pytestmark = pytest.mark.usefixtures("fresh_cache")


def run_both(fn, *args, graphs):
    """(eager result, compiled result of the second call); the first call compiles from
    an empty cache, capturing ``graphs`` graphs."""
    fastdynamo.reset()
    expected = fn(*args)
    recorder = Recorder()
    compiled = fastdynamo.compile(fn, backend="eager", _recorder=recorder)
    compiled(*args)
    actual = compiled(*args)
    assert len(recorder.captures) == graphs, [str(b) for b in recorder.breaks]
    return expected, actual


def test_closure_made_before_the_break_is_called_after_it():
    out = io.StringIO()

    def f(x, scale):
        def mul(t):
            return t * scale

        y = mul(x)
        print("break", file=out)
        return mul(y) + 1

    # before the break, and mul(y) + 1 in the resume function; 3, not 2: the resume function
    # guards on the identity of mul, a new function each call, so the second call
    # compiles it again (a known defect: every call recompiles, up to the limit)
    expected, actual = run_both(f, torch.ones(3), 2.0, graphs=3)
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

    expected, actual = run_both(f, torch.zeros(2), graphs=2)  # add(x) before the break and after it
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
        # before the branch, and the resume function of the branch taken, compiled again by
        # the second call (it guards on the identity of get, a new lambda each call)
        expected, actual = run_both(f, torch.full((2,), sign), 3.0 * sign, graphs=3)
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

    expected, actual = run_both(f, torch.ones(2), graphs=1)  # x * 2; nothing computes after the print
    assert_same(actual, expected)
    assert actual[1] == 2
    assert out.getvalue().split() == ["1", "1", "1"]

"""``torch.compiler.is_compiling()`` and ``fastdynamo.is_compiling()`` are True inside
traced code (libraries branch on them) and False when the code runs as Python."""
from __future__ import annotations

import collections

import pytest
import torch

import fastdynamo

pytestmark = pytest.mark.usefixtures("fresh_cache")


def test_is_compiling_is_false_outside_a_trace():
    assert fastdynamo.is_compiling() is False
    assert torch.compiler.is_compiling() is False


def test_is_compiling_is_true_inside_the_graph():
    def f(x):
        if torch.compiler.is_compiling() and fastdynamo.is_compiling():
            return x + 1
        return x - 1

    report = fastdynamo.explain(f, backend="eager")(torch.ones(2))
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    fastdynamo.reset()
    assert torch.equal(fastdynamo.compile(f, backend="eager", fullgraph=True)(torch.ones(2)),
                       torch.full((2,), 2.0))
    assert torch.equal(f(torch.ones(2)), torch.zeros(2))  # eager: not compiling


def test_is_compiling_in_a_frame_that_runs_as_python_is_false():
    def f(x):
        print("runs as Python after this break")
        return x + 1 if torch.compiler.is_compiling() else x - 1

    fastdynamo.reset()
    compiled = fastdynamo.compile(f, backend="eager")
    # The resume function after the print is compiled: it sees True, as under torch.compile.
    assert torch.equal(compiled(torch.ones(2)), torch.full((2,), 2.0))


Pair = collections.namedtuple("Pair", "left right")


def test_namedtuple_built_in_the_graph_is_rebuilt_with_its_fields():
    """A namedtuple's constructor takes fields, not one tuple: rebuilding it after the
    graph must not call ``Pair((a, b))`` (it raised TypeError)."""
    def f(x):
        return Pair(x + 1, x * 2)

    fastdynamo.reset()
    recorder = fastdynamo.convert_frame.Recorder()
    out = fastdynamo.compile(f, backend="eager", _recorder=recorder)(torch.ones(2))
    assert type(out) is Pair and len(recorder.captures) == 1
    assert torch.equal(out.left, torch.full((2,), 2.0)) and torch.equal(out.right, torch.full((2,), 2.0))

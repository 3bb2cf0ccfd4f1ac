"""A function inlined into the graph is guarded on its code: assigning ``__code__`` (of
a global function, a method, a closure) after the trace recompiles instead of reusing
the graph of the old code."""
from __future__ import annotations

import torch

from .helpers import compiled_with_recorder


def helper(t, k=2):
    return t * k


class Scaler:
    def apply(self, t):
        return t + 1


def calls_helper(t):
    return helper(t, 3)


def test_assigning_the_code_of_an_inlined_global_function_recompiles(monkeypatch):
    compiled, recorder = compiled_with_recorder(calls_helper)
    x = torch.ones(2)
    assert torch.equal(compiled(x), x * 3)
    monkeypatch.setattr(helper, "__code__", (lambda t, k=2: t + k * 100).__code__)
    assert torch.equal(compiled(x), calls_helper(x)) and torch.equal(calls_helper(x), x + 300)
    assert (len(recorder.captures), len(recorder.breaks)) == (2, 0)


def test_assigning_the_code_of_a_method_recompiles(monkeypatch):
    scaler = Scaler()

    def calls_method(t):
        return scaler.apply(t) * 2

    compiled, recorder = compiled_with_recorder(calls_method)
    x = torch.ones(2)
    assert torch.equal(compiled(x), (x + 1) * 2)
    monkeypatch.setattr(Scaler.apply, "__code__", (lambda self, t: t - 5).__code__)
    assert torch.equal(compiled(x), calls_method(x)) and torch.equal(calls_method(x), (x - 5) * 2)
    assert (len(recorder.captures), len(recorder.breaks)) == (2, 0)


def test_assigning_the_code_of_a_closure_from_outside_recompiles():
    k = 4

    def inner(t):
        return t * k

    def calls_inner(t):
        return inner(t) + 1

    compiled, recorder = compiled_with_recorder(calls_inner)
    x = torch.ones(2)
    assert torch.equal(compiled(x), x * 4 + 1)
    inner.__code__ = (lambda t: t - k).__code__  # same free variable, other code
    assert torch.equal(compiled(x), calls_inner(x)) and torch.equal(calls_inner(x), x - 4 + 1)
    assert (len(recorder.captures), len(recorder.breaks)) == (2, 0)

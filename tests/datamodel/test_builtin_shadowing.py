"""A builtin read by a compiled frame (or by a function inlined from another module)
is what ``LOAD_GLOBAL`` finds: a global of the same name defined after the trace
shadows it, so the cached entry must not be reused (it would call the old builtin)."""
from __future__ import annotations

import torch

from .helpers import compiled_with_recorder
from .object_helpers import build_program

USES_ABS = "def prog(x):\n    return x + abs(-3)\n"


def test_a_global_defined_after_the_trace_shadows_the_builtin_of_the_frame():
    prog = build_program(USES_ABS, {}, "<shadowed-builtin>")
    compiled, recorder = compiled_with_recorder(prog)
    x = torch.ones(2)
    for _ in range(3):  # hits: the guards' dict-version shortcut has seen both dicts
        assert torch.equal(compiled(x), x + 3)
    prog.__globals__["abs"] = lambda value: 100
    assert torch.equal(compiled(x), prog(x)) and torch.equal(prog(x), x + 100)
    assert (len(recorder.captures), len(recorder.breaks)) == (2, 0)  # recompiled, not reused
    del prog.__globals__["abs"]
    assert torch.equal(compiled(x), x + 3)


def test_a_global_defined_after_the_trace_shadows_the_builtin_of_an_inlined_function():
    helper = build_program(USES_ABS, {}, "<other-module>")
    caller = build_program("def prog(x):\n    return helper(x) * 2\n", {"helper": helper}, "<caller>")
    compiled, recorder = compiled_with_recorder(caller)
    x = torch.ones(2)
    assert torch.equal(compiled(x), (x + 3) * 2)
    helper.__globals__["abs"] = lambda value: 100
    assert torch.equal(compiled(x), caller(x)) and torch.equal(caller(x), (x + 100) * 2)
    assert (len(recorder.captures), len(recorder.breaks)) == (2, 0)

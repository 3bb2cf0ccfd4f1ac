"""torch.compile and fastdynamo in one process: each calls the other across torch.compile's
recompilations, the two PEP 523 evaluators chain without a loop, and neither compiler
traces the other's internals (torch, sympy, generated `<string>` code)."""
from __future__ import annotations

import pytest
import sympy
import torch

import fastdynamo
from fastdynamo._runtime import native

from .helpers import run_python


@pytest.fixture(autouse=True)
def _fresh():
    fastdynamo.reset()
    torch._dynamo.reset()
    yield
    fastdynamo.reset()
    torch._dynamo.reset()
    assert native().installed_evaluator() == "default"


def counting_backend(graphs: list):
    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    return backend


def test_fastdynamo_calls_torch_compile_across_its_recompiles():
    torch_graphs: list = []

    def inner(x):
        return x.sin() + 1

    tc_inner = torch.compile(inner, backend=counting_backend(torch_graphs))

    def outer(x):
        return tc_inner(x * 3) * 2

    fd_outer = fastdynamo.compile(outer, backend="eager")
    for n in (3, 4, 5, 6, 7):  # new shapes: torch.compile recompiles (dynamic shapes, sympy)
        x = torch.randn(n)
        torch.testing.assert_close(fd_outer(x), ((x * 3).sin() + 1) * 2)
    assert len(torch_graphs) >= 2  # torch.compile did compile, and recompiled
    # fastdynamo captured its own part (before and after the call), never torch's frames
    entries = native().cache_entries(outer.__code__)
    assert len(entries) >= 1
    assert native().cache_entries(inner.__code__) == []


def test_torch_compile_calls_fastdynamo_across_its_recompiles():
    torch_graphs: list = []

    def inner(x):
        return x.cos() - 1

    fd_inner = fastdynamo.compile(inner, backend="eager")

    def outer(x):
        return fd_inner(x + 1) * 3

    tc_outer = torch.compile(outer, backend=counting_backend(torch_graphs))
    for n in (3, 4, 5, 6, 7):
        x = torch.randn(n)
        torch.testing.assert_close(tc_outer(x), ((x + 1).cos() - 1) * 3)
    assert len(torch_graphs) >= 2
    # fastdynamo compiled `inner` once per shape it saw, with its own graphs
    assert len(native().cache_entries(inner.__code__)) >= 1


def test_sympy_in_compiled_code_runs_as_python():
    def f(x):
        s = sympy.Symbol("s", positive=True)
        y = x * 2
        if s > 0:
            return y + 1
        return y

    x = torch.ones(3)
    torch.testing.assert_close(fastdynamo.compile(f, backend="eager")(x), f(x))
    report = fastdynamo.explain(f, backend="eager")(x)
    assert report.graph_count >= 1  # the tensor work is captured; sympy runs as Python


def test_generated_string_code_and_torch_internals_are_never_compiled():
    import dataclasses

    @dataclasses.dataclass
    class Box:
        value: int

    def f(x):
        return x * Box(2).value

    calls: list = []
    from fastdynamo.convert_frame import ConvertFrame
    from fastdynamo.backends import lookup_backend

    convert = ConvertFrame(lookup_backend("eager"), entry_codes={f.__code__})
    assert convert.skip_action(Box.__init__.__code__) == "SKIP"  # <string>, from dataclasses
    assert convert.skip_action(sympy.Symbol.__xnew__.__code__) == "SKIP"
    tc = torch.compile(lambda x: x + 1, backend="eager")
    assert convert.skip_action(tc.__code__) == "SKIP_RECURSIVE"  # torch.compile's wrapper
    torch.testing.assert_close(fastdynamo.compile(f, backend="eager")(torch.ones(2)), torch.ones(2) * 2)
    assert native().cache_entries(Box.__init__.__code__) == [] and calls == []


CYCLE = """
import torch, fastdynamo
from fastdynamo._runtime import native
from torch._C._dynamo.eval_frame import set_eval_frame
rt = native()
rt.set_callback(False)       # ours installed
set_eval_frame(False)        # torch.compile's over ours (it chains to ours)
rt.set_callback(None)        # ours is not on top: left in place
rt.set_callback(False)       # ours again: must not install over the one that chains to us
def f():
    return 1
assert f() == 1
rt.set_callback(None)
set_eval_frame(None)         # torch.compile's removal puts ours back on top, unused
assert f() == 1              # the next frame uninstalls it
print("evaluator", rt.installed_evaluator())
"""


def test_two_evaluators_chained_both_ways_never_loop():
    result = run_python(CYCLE)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "evaluator default" in result.stdout


def test_chaining_probe_tells_a_chaining_evaluator_from_a_plain_one():
    rt = native()
    from torch._C._dynamo.eval_frame import set_eval_frame

    def work(x):
        return x + 1

    rt._set_passthrough_evaluator(True)  # calls CPython's evaluator: never reaches ours
    try:
        rt.set_callback(False)
        assert rt.installed_evaluator() == "fastdynamo"  # installed over it
        rt.set_callback(None)
    finally:
        rt._set_passthrough_evaluator(False)
    rt.set_callback(False)
    set_eval_frame(False)  # torch.compile's, chained to ours
    try:
        rt.set_callback(None)
        rt.set_callback(False)
        assert rt.installed_evaluator() == "other"  # stays below: it hands frames to us
        assert work(1) == 2
    finally:
        rt.set_callback(None)
        set_eval_frame(None)
    assert work(1) == 2

"""Property test: generated programs (tensor ops mixed with Python control flow,
comprehensions, closures, helpers and containers) give the same values, shapes and
dtypes compiled as eager."""
from __future__ import annotations

import textwrap

import torch
from hypothesis import given, strategies as st

import fastdynamo
from fastdynamo.capture import Broken
from fastdynamo.convert_frame import Recorder
from fastdynamo.guards import compile_guards

from .helpers import assert_same, capture, frame_for


def helper(t, u):
    return t * 0.5 + u if t.is_floating_point() else t + u * 2


# (template, works on integer tensors); `a` is the running value, `y` a same-shaped
# input, `k` an int argument; {c} is a small constant.
STATEMENTS = [
    ("a = a + y", True),
    ("a = a * {c}", True),
    ("a = a - {c} * y", True),
    ("a = torch.{unary}(a)", False),
    ("a = a.{unary}()", False),
    ("a = torch.abs(a) + a.neg()", True),
    ("a = torch.where(a > 0, a, y)", True),
    ("for i in range(k):\n    a = a + i", True),
    ("if k > {c}:\n    a = a - 1\nelse:\n    a = a + 1", True),
    ("a = sum([a * j for j in range({c})]) + a", True),
    ("a = (lambda t, s={c}: t * s)(a)", True),
    ("a = helper(a, y)", True),
    ("b, d = a * 2, a + y\na = b - d", True),
    ("a = a.reshape(-1).reshape(a.shape)", True),
    ("a = a.transpose(0, -1).contiguous().transpose(0, -1)", True),
    ("s = a.sum(dim=-1, keepdim=True)\na = a - s", True),
    ("a = torch.cat([a, y], dim=0)[:a.shape[0]]", True),
    ("with torch.no_grad():\n    a = a * 2", True),
    ("parts = [p for p in a.unbind(0)]\na = torch.stack(parts[::-1])", True),
    ("a = a.softmax(dim=-1) if a.is_floating_point() else a", True),
    ("scale = {{'lo': 1, 'hi': {c}}}\na = a * scale['hi'] + scale.get('mid', 0)", True),
    ("a = torch.clamp(a, min=-{c}, max={c})", True),
    ("a = a[..., :max(1, a.shape[-1] - 1)].sum(-1, keepdim=True) + a", True),
]
UNARY = ["sin", "cos", "tanh", "relu", "sigmoid", "exp", "neg", "abs"]
RETURNS = ["return a", "return a, a.shape", "return [a, k]", "return {{'out': a, 'n': a.ndim}}",
           "return a.sum(), a.dtype"]


@st.composite
def programs(draw):
    dtype = draw(st.sampled_from([torch.float32, torch.float64, torch.int64]))
    is_int = dtype is torch.int64
    choices = [t for t, int_ok in STATEMENTS if int_ok or not is_int]
    body = []
    for _ in range(draw(st.integers(1, 6))):
        template = draw(st.sampled_from(choices))
        body.append(template.format(c=draw(st.integers(1, 3)), unary=draw(st.sampled_from(UNARY))))
    body.append(draw(st.sampled_from(RETURNS)).format())
    source = "def prog(x, y, k):\n    a = x\n" + textwrap.indent("\n".join(body), "    ") + "\n"
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    k = draw(st.integers(0, 3))
    return source, shape, dtype, k


def _build(source):
    namespace = {"torch": torch, "helper": helper}
    exec(compile(source, "<generated>", "exec"), namespace)  # noqa: S102 - test programs
    return namespace["prog"]


def _inputs(shape, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    if dtype is torch.int64:
        return (torch.randint(-5, 5, shape, generator=gen), torch.randint(-5, 5, shape, generator=gen))
    return (torch.randn(shape, generator=gen).to(dtype), torch.randn(shape, generator=gen).to(dtype))


@given(programs(), st.integers(0, 2**16))
def test_generated_program_matches_eager(program, seed):
    source, shape, dtype, k = program
    prog = _build(source)
    x, y = _inputs(shape, dtype, seed)
    result, run = capture(prog, x, y, k)
    assert not isinstance(result, Broken), f"{getattr(result, 'reason', None)}\n{source}"
    result.graph_module.graph.lint()
    assert compile_guards(result.guards).check(frame_for(prog, x, y, k)), source
    assert_same(run(x, y, k), prog(x, y, k))


@given(programs(), st.integers(0, 2**16))
def test_generated_program_through_native_runtime(program, seed):
    source, shape, dtype, k = program
    prog = _build(source)
    recorder = Recorder()
    compiled = fastdynamo.compile(prog, fullgraph=True, _recorder=recorder)
    x, y = _inputs(shape, dtype, seed)
    assert_same(compiled(x, y, k), prog(x, y, k))
    # a second call with fresh values of the same shape hits the cache
    x2, y2 = _inputs(shape, dtype, seed + 1)
    assert_same(compiled(x2, y2, k), prog(x2, y2, k))
    # fullgraph: one graph (even one without tensor operations), compiled once
    assert len(recorder.captures) == 1 and not recorder.breaks, source

"""Property test (issue #12, T5's ``b = 0; b += (x > 0).to(torch.long) * 4``): generated
programs of augmented assignments between Python numbers (ints, floats, bools, an int
argument) and tensors (bool, long, float, 0-dim), in both directions, to locals, an
object's attribute and a list item, in loops. A number on the left is rebound to a new
tensor (``b = b + t``), a tensor on the left changes in place. Compiled equals eager in
values, types, dtypes, exceptions and the state of the arguments, twice (the second call,
with other values, hits the cache): one graph and no break, under ``fullgraph=True`` —
except where a tensor on the left may not hold the result's dtype or shape (a fresh
tensor, or ``obj.v``/``lst[0]`` augmented a second time, a tensor by then): eager raises,
the trace may break there, the exception's type must match and the graph before it is
captured. ``--hypothesis-profile=long`` runs thousands."""
from __future__ import annotations

import textwrap

import torch
from examples_budget import share_of_profile
from hypothesis import given
from hypothesis import strategies as st

import fastdynamo
from fastdynamo.convert_frame import Recorder

from .call_sequences import outcome
from .object_helpers import build_program, same


class Holder:
    def __init__(self, v):
        self.v = v


# Tensors over `x` (float, shape (3,)); the divisors are never zero.
TENSORS = ["(x > 0)", "(x > 0).to(torch.long) * {c}", "x.abs() + {c}", "x * {c}", "x.sum()", "(x < 0).sum()"]
DIVISORS = ["x.abs() + {c}", "(x > 0).to(torch.long) + {c}", "x.sum().abs() + {c}"]
INTEGRAL = ["(x > 0)", "(x < 0).to(torch.long) * {c}", "(x > 0).sum()"]
NUMBERS = ["0", "{c}", "-{c}", "2.5", "-0.5", "True", "False", "n", "f"]
POSITIVE = ["{c}", "2.5", "True", "n"]
INTS = ["0", "{c}", "True", "False", "n"]
# (template, may raise): `{v}` a fresh name; `a` the running tensor; `obj` a Holder whose
# `v` is a number; `lst` a list of a number; `n` an int and `f` a float argument.
STATEMENTS = [
    ("{v} = {number}\n{v} {op} {tensor}\nout.append({v})", False),
    ("{v} = {positive}\n{v} {divop} {divisor}\nout.append({v})", False),
    ("{v} = {int}\n{v} {bitop} {integral}\nout.append({v})", False),
    ("{v} = {number}\nfor i in range({c}):\n    {v} {op} a * i\nout.append({v})", False),
    ("{v} = {number}\n{v} {op} {number}\n{v} {op} {tensor}\nout.append({v})", False),
    ("obj.v {op} {tensor}", False),
    ("lst[0] {op} {tensor}", False),
    ("{v} = {tensor}\n{v} {op} a\nout.append({v})", True),
    ("{v} = {tensor}\n{v} {op} {number}\nout.append({v})", True),
    ("{v} = x.clone()\nalias = {v}\n{v} {op} {number}\nout.append(alias is {v})\nout.append({v})", False),
    ("a {op} {number}", False),
]
OPS, DIVOPS, BITOPS = ["+=", "-=", "*="], ["/=", "//=", "%=", "**="], ["|=", "&=", "^="]


@st.composite
def statement(draw, index):
    template, may_raise = draw(st.sampled_from(STATEMENTS))
    c = draw(st.integers(1, 3))
    fill = {"number": NUMBERS, "positive": POSITIVE, "int": INTS, "tensor": TENSORS, "divisor": DIVISORS,
            "integral": INTEGRAL, "op": OPS, "divop": DIVOPS, "bitop": BITOPS}
    # each placeholder drawn anew (two `{number}`s may differ), then `{c}` inside them
    while any("{" + name + "}" in template for name in fill):
        name = next(name for name in fill if "{" + name + "}" in template)
        template = template.replace("{" + name + "}", draw(st.sampled_from(fill[name])), 1)
    return template.format(v=f"b{index}", c=c), may_raise


@st.composite
def programs(draw):
    chosen = [draw(statement(i)) for i in range(draw(st.integers(1, 4)))]
    body = ["a = x * 2", "out = []"] + [text for text, _ in chosen] + ["return a, out, obj.v, lst"]
    source = "def prog(x, n, f, obj, lst):\n" + textwrap.indent("\n".join(body), "    ") + "\n"
    # obj.v or lst[0] is a tensor after its first statement: a second one is in place
    twice = any(sum(text.startswith(target) for text, _ in chosen) > 1 for target in ("obj.v", "lst[0]"))
    return source, twice or any(may_raise for _, may_raise in chosen)


def _arguments(seed, dtype, start):
    x = torch.randn(3, generator=torch.Generator().manual_seed(seed)).to(dtype)
    return [x, 2, 1.5, Holder(start), [start]]


def _check(compiled, prog, args, source):
    eager_args, got_args = _arguments(*args), _arguments(*args)
    expected, expected_error = outcome(prog, eager_args)
    actual, actual_error = outcome(compiled, got_args)
    # the type only: a trace that breaks at the statement raises eager's message, a
    # graph raises ATen's (both RuntimeError)
    assert (actual_error and actual_error[0]) == (expected_error and expected_error[0]), \
        f"{actual_error} != {expected_error}\n{source}"
    assert same(actual, expected), f"{actual!r} != {expected!r}\n{source}"
    assert same(got_args, eager_args), f"arguments differ\n{source}"


@share_of_profile(0.5)
@given(programs(), st.sampled_from([torch.float32, torch.float64]), st.sampled_from([0, 3, 2.5, True]),
       st.integers(0, 2**16))
def test_generated_augmented_assignment_matches_eager(program, dtype, start, seed):
    source, may_raise = program
    prog = build_program(source, {"torch": torch}, "<generated-augmented>")
    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.compile(prog, backend="eager", fullgraph=not may_raise, _recorder=recorder)
    _check(compiled, prog, (seed, dtype, start), source)
    _check(compiled, prog, (seed + 1, dtype, start), source)  # other values: the same entry
    reasons = [b.reason for b in recorder.breaks]
    if may_raise:
        assert recorder.captures, f"no graph {reasons}\n{source}"
    else:
        assert (len(recorder.captures), reasons) == (1, []), f"{len(recorder.captures)} {reasons}\n{source}"
    fastdynamo.reset()

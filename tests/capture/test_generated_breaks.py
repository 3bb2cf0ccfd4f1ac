"""Property test: generated programs that break the graph (data-dependent branches and
loops, ``.item()``/``bool``/``int`` of tensors, prints into a buffer, mutations of a
Python object and a list, errors the program's constant Python raises), mixed with the capturable statements of
test_generated_programs.py and nested in ``with``/``for``/``try``/``if`` blocks, give
the same results, printed text, object state and grad mode compiled as eager."""
from __future__ import annotations

import io
import textwrap
import types

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import fastdynamo

from .break_helpers import assert_matches_eager, call, explain
from .test_generated_programs import STATEMENTS, UNARY, helper


def noisy(t, buf):
    u = t * 2
    print("noisy", t.dtype, file=buf)
    return u - t


def count_positive(t, obj):
    if t.sum() > 0:
        obj.n += 1
    return obj.n

# (template, works on integer tensors); `a` is the running value, `y` a same-shaped
# input, `k` an int argument, `buf` an io.StringIO, `obj` a namespace with an int `n`,
# `lst` a list; {c} is a small constant.
BREAKS = [
    ("if a.sum() > {c}:\n    a = a - 1\nelse:\n    a = a + y", True),
    ("if (a > 0).any():\n    a = a * 2", True),
    ("s = a.sum().item()\na = a + s / (abs(s) + 1)", True),
    ("s = float(a.max())\nif s > {c}:\n    a = a - s", True),
    ("n = int(a.numel() + a.abs().sum() % 3)\na = a * n", False),
    ("if bool((a < {c}).all()):\n    a = a + {c}", True),
    ("print('a', a.shape, {c}, file=buf)", True),
    ("print('a =', a, file=buf)", True),
    ("print('sum', round(a.sum().item(), 3), sep=':', file=buf)", True),
    ("for i in range({c}):\n    a = a + i\n    print('step', i, file=buf)", True),
    ("with torch.no_grad():\n    a = a * 2\n    print('grad', torch.is_grad_enabled(), file=buf)", True),
    ("obj.n += 1\na = a + obj.n", True),
    ("lst.append(a.sum().item())\na = a + len(lst)", True),
    ("obj.n = len(lst) + k\nlst.append(obj.n)", True),
    ("steps = 0\nwhile steps < {c} and a.sum() > 0:\n    a = a - 1\n    steps += 1", True),
    ("values = a.reshape(-1).tolist()\na = a + values[0]", True),
    ("a = a if a.sum() > 0 else -a", True),
    ("a = noisy(a, buf)", True),
    ("a = a + count_positive(a, obj)", True),
    # errors of the user's program in constant Python: raised by the frame as eager raises
    # them (or caught by a ``try`` block around them), never a compiler error
    ("if k == {c}:\n    a = a + max([])", True),
    ("a = a + {c} // (k - {c})", True),
    ("a = a + sorted([k, {c}], key=lambda v: -v)[0] + len({{k: 1, (k,): 2}})", True),
]
# Mutations of the Python arguments that the trace records and replays (no break).
EFFECTS = [
    ("obj.t = a * 2", True),
    ("obj.n = obj.n * 2 + len(lst)", True),
    ("lst.append(a)\na = a + lst[-1]", True),
    ("lst.insert(0, k)", True),
    ("if len(lst) > 1:\n    lst.pop()", True),
]
# Blocks a statement may be nested in; {body} is the indented statement.
BLOCKS = [
    "{body}",
    "with torch.no_grad():\n{body}",
    "with torch.enable_grad():\n{body}",
    "for _ in range(k):\n{body}",
    "if k > 1:\n{body}\nelse:\n    a = a + 1",
    "try:\n{body}\nexcept ZeroDivisionError:\n    a = a + 100",
    "try:\n{body}\nfinally:\n    print('finally', file=buf)",
]
RETURNS = ["return a", "return a, obj.n", "return [a, len(lst)]", "return {{'out': a, 'k': k}}",
           "return a.sum(), a.dtype"]


def _fill(draw, template):
    return template.format(c=draw(st.integers(1, 3)), unary=draw(st.sampled_from(UNARY)))


@st.composite
def statement(draw, breaking, plain, depth=0):
    """A break-inducing statement, alone or in a block (maybe nested, maybe next to a
    second statement in the same block)."""
    text = _fill(draw, draw(st.sampled_from(breaking)))
    block = draw(st.sampled_from(BLOCKS))
    if block == "{body}":
        return text
    inner = [text]
    if draw(st.booleans()):
        inner.append(draw(statement(breaking, plain, depth + 1)) if depth == 0 and draw(st.booleans())
                     else _fill(draw, draw(st.sampled_from(plain + breaking))))
        inner = draw(st.permutations(inner))
    return block.format(body=textwrap.indent("\n".join(inner), "    "))


@st.composite
def programs(draw):
    dtype = draw(st.sampled_from([torch.float32, torch.float64, torch.int64]))
    is_int = dtype is torch.int64
    plain = [t for t, int_ok in STATEMENTS + EFFECTS if int_ok or not is_int]
    breaking = [t for t, int_ok in BREAKS if int_ok or not is_int]
    body = draw(st.lists(statement(breaking, plain), min_size=1, max_size=3))
    body += [_fill(draw, t) for t in draw(st.lists(st.sampled_from(plain), max_size=3))]
    body = draw(st.permutations(body))
    body = list(body) + [draw(st.sampled_from(RETURNS)).format()]
    source = ("def prog(x, y, k, buf, obj, lst):\n    a = x\n"
              + textwrap.indent("\n".join(body), "    ") + "\n")
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
    k = draw(st.integers(0, 3))
    requires_grad = not is_int and draw(st.booleans())
    return source, shape, dtype, k, requires_grad


def _build(source):
    namespace = {"torch": torch, "helper": helper, "noisy": noisy, "count_positive": count_positive}
    exec(compile(source, "<generated>", "exec"), namespace)  # noqa: S102 - test programs
    return namespace["prog"]


def _make_call(shape, dtype, k, requires_grad, seed):
    def make(i):
        gen = torch.Generator().manual_seed(seed + i)
        if dtype is torch.int64:
            x, y = (torch.randint(-5, 5, shape, generator=gen) for _ in range(2))
        else:
            x, y = (torch.randn(shape, generator=gen).to(dtype) for _ in range(2))
            x.requires_grad_(requires_grad)
        return call(x, y, k, io.StringIO(), types.SimpleNamespace(n=i), [i])
    return make


@given(programs(), st.integers(0, 2**16))
def test_generated_breaks_match_eager(program, seed):
    source, shape, dtype, k, requires_grad = program
    prog = _build(source)
    make = _make_call(shape, dtype, k, requires_grad, seed)
    # call 0 compiles, call 1 has other values (another branch, a recompile of a
    # resume function specialized on an .item()), call 2 repeats call 0's values
    try:
        # graphs=None: how many graphs a generated program gives is not derived here (the
        # hand-written tests state theirs); the breaks explain reports are checked below
        assert_matches_eager(prog, lambda i: make(i % 2), calls=3, graphs=None)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{source}") from err.__cause__
    try:
        report = explain(prog, *make(0).args)
    except Exception as err:  # noqa: BLE001 - the program's own error, checked against eager's
        # (assert_matches_eager compared it already; explain runs the program, so it raises too)
        with pytest.raises(type(err)):
            prog(*make(0).args)
        fastdynamo.reset()
        return
    lines = source.count("\n")
    for brk in report.break_reasons:
        filename, line = brk.location.rsplit(":", 1)
        if filename == __file__:  # in noisy or count_positive
            assert brk.where[0][0] in (__file__, "<generated>"), f"{brk}\n{source}"
            continue
        assert filename == "<generated>" and 1 < int(line) <= lines, f"{brk}\n{source}"
    fastdynamo.reset()

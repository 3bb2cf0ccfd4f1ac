"""Augmented assignments with a tensor on one side (issue #12): ``b = 0; b += t`` is
``b = b + t`` (Python numbers have no in-place methods), never an in-place graph node on
a literal (FX wrote ``0 += mul``, a SyntaxError, and the frame ran as Python); a tensor
on the left stays in place. Compiled (``backend="eager"``) against eager, with the
graph count; the suite runs with ``fallback_on_internal_error`` off, so a generated
graph that does not compile fails here instead of warning.
"""
from __future__ import annotations

import operator

import pytest
import torch

from .helpers import check, run

# the augmented operators and an operand that keeps each one defined on ints and floats
AUGMENTED = {
    "+=": lambda b, t: operator.iadd(b, t),
    "-=": lambda b, t: operator.isub(b, t),
    "*=": lambda b, t: operator.imul(b, t),
    "/=": lambda b, t: operator.itruediv(b, t),
    "//=": lambda b, t: operator.ifloordiv(b, t),
    "%=": lambda b, t: operator.imod(b, t),
    "**=": lambda b, t: operator.ipow(b, t),
}
BITWISE = {
    "|=": lambda b, t: operator.ior(b, t),
    "&=": lambda b, t: operator.iand(b, t),
    "^=": lambda b, t: operator.ixor(b, t),
    "<<=": lambda b, t: operator.ilshift(b, t),
    ">>=": lambda b, t: operator.irshift(b, t),
}


def test_t5_relative_position_bucket_statement():
    def fn(x):
        b = 0
        b += (x > 0).to(torch.long) * 4
        return b + 1

    check(fn, torch.randn(6), graphs=1, breaks=0, fullgraph=True)


@pytest.mark.parametrize("start", [3, 2.5, True])
def test_each_augmented_statement_on_a_number(start):
    # the statements themselves (BINARY_OP with an in-place oparg), not operator.i*
    def fn(x):
        t = x.abs() + 1
        b, c, d, e, f, g, h = start, start, start, start, start, start, start
        b += t
        c -= t
        d *= t
        e /= t
        f //= t
        g %= t
        h **= t
        return b, c, d, e, f, g, h

    check(fn, torch.tensor([0.5, -1.5, 2.0]), graphs=1, breaks=0, fullgraph=True)


def test_bitwise_augmented_statements_on_an_int():
    def fn(x):
        t = (x > 0).to(torch.long)
        b, c, d, e, f = 6, 6, 6, 6, 6
        b |= t
        c &= t
        d ^= t
        e <<= t
        f >>= t
        return b, c, d, e, f

    check(fn, torch.tensor([1.0, -1.0, 0.0, 3.0]), graphs=1, breaks=0, fullgraph=True)


@pytest.mark.parametrize("symbol", sorted(AUGMENTED))
def test_inplace_operator_functions_on_a_number(symbol):
    op = AUGMENTED[symbol]

    def fn(x):
        return op(5, x.abs() + 1)

    check(fn, torch.tensor([0.5, 2.0, 3.0]), graphs=1, breaks=0)


@pytest.mark.parametrize("symbol", sorted(BITWISE))
def test_bitwise_operator_functions_on_an_int(symbol):
    op = BITWISE[symbol]

    def fn(x):
        return op(5, (x > 0).to(torch.long))

    check(fn, torch.tensor([0.5, -2.0, 3.0]), graphs=1, breaks=0)


def test_number_accumulated_over_a_loop():
    def fn(x):
        total = 0
        for k in range(3):
            total += x * k
        total -= 1
        return total

    check(fn, torch.randn(4), graphs=1, breaks=0, fullgraph=True)


def test_tensor_on_the_left_stays_in_place():
    def fn(x):
        y = x.clone()
        alias = y
        y += 2
        y *= x
        return alias, y is alias

    check(fn, torch.randn(4), graphs=1, breaks=0, fullgraph=True)


def test_augmented_assignment_to_an_argument_tensor_mutates_it():
    def fn(x, n):
        x += n
        return x

    x = torch.randn(3)
    expected = x + 2
    got = run(fn, x, 2)
    assert got.value is x and torch.equal(x, expected), (got.value, x, expected)
    assert got.graphs == 1 and not got.breaks, got.breaks


def test_list_extended_by_a_tensor_breaks_and_matches_eager():
    # list.__iadd__ extends with the tensor's rows: not modelled, a clean break
    def fn(x):
        rows = [x[0] * 2]
        rows += x * 3
        return rows

    check(fn, torch.randn(2, 3), graphs=1, breaks=1, fullgraph=False)


def test_t5_relative_position_bucket_is_one_graph():
    from transformers.models.t5.modeling_t5 import T5Attention  # the test extras (issue #12)

    bucket = T5Attention._relative_position_bucket
    relative = torch.arange(-6, 7)[:, None] - torch.arange(-6, 7)[None, :]
    for bidirectional in (True, False):
        def fn(positions, bidirectional=bidirectional):
            return bucket(positions, bidirectional=bidirectional, num_buckets=8, max_distance=16)

        check(fn, relative, graphs=1, breaks=0, fullgraph=True)

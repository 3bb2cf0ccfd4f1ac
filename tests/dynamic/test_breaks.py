"""Sizes and ints crossing graph breaks, and int arguments under automatic dynamic."""
from __future__ import annotations

import torch

from .helpers import assert_same, compiled


def size_across_break(x):
    n = x.shape[0]
    y = x * 2
    print(end="")  # a graph break
    return y + n, n


def test_size_crossing_a_break_stays_symbolic():
    fn, rec = compiled(size_across_break)
    for n in range(2, 12):
        x = torch.randn(n)
        assert_same(fn(x), size_across_break(x))
    # the frame and its resume function: each compiles at most twice
    by_code: dict = {}
    for c in rec.captures:
        by_code[c.code.co_qualname] = by_code.get(c.code.co_qualname, 0) + 1
    assert by_code and all(count <= 2 for count in by_code.values()), by_code


def take(x, n):
    return x[:n] * n


def test_int_argument_becomes_symbolic():
    fn, rec = compiled(take)
    x = torch.randn(20)
    for n in (3, 4, 5, 9, 17):
        assert_same(fn(x, n), take(x, n))
    assert len(rec.captures) == 2
    guards = "\n".join(g.text() for g in rec.captures[1].result.guards)
    assert "type(n) is int" in guards and "n == " not in guards.split("shape guards")[0]


def test_int_argument_zero_one_and_types():
    fn, rec = compiled(take)
    x = torch.randn(20)
    for n in (3, 4, 1, 0, 6, True):
        assert_same(fn(x, n), take(x, n))
    # 3; symbolic from 4; 1 and 0 specialised; True is a bool: its own entry
    assert len(rec.captures) == 5


def test_item_value_crossing_a_break_is_correct():
    def f(x):
        k = int(x.sum().item()) % 3  # .item(): a graph break
        return x * k + k

    fn, rec = compiled(f)
    for v in (1.0, 2.0, 4.0, 5.0, 7.0):
        x = torch.full((3,), v)
        assert_same(fn(x), f(x))
    assert len(rec.captures) >= 1


def reshape_to(x, shape):
    return x.reshape(shape) + 1


def test_tuple_of_ints_argument_becomes_symbolic():
    fn, rec = compiled(reshape_to)
    for n in (2, 3, 4, 6, 9):
        x = torch.randn(n * 4)
        assert_same(fn(x, (n, 4)), reshape_to(x, (n, 4)))
    assert len(rec.captures) == 2
    guards = "\n".join(g.text() for g in rec.captures[1].result.guards)
    assert "type(shape[0]) is int" in guards and "shape[1] == 4" in guards, guards
    x = torch.randn(12)
    assert_same(fn(x, (4, 3)), reshape_to(x, (4, 3)))  # a changed static item: recompiles
    assert len(rec.captures) == 3


def view_as(x, shape):
    return x.view(shape) * 2


def test_torch_size_argument_items_become_symbolic():
    fn, rec = compiled(view_as)
    for n in (2, 3, 5, 8):
        x = torch.randn(n * 6)
        shape = torch.Size([n, 6])
        assert_same(fn(x, shape), view_as(x, shape))
    assert len(rec.captures) == 2
    guards = "\n".join(g.text() for g in rec.captures[1].result.guards)
    assert "type(shape) is torch.Size" in guards and "shape[1] == 6" in guards, guards

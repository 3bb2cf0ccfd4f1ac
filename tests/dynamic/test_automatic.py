"""Automatic dynamic shapes: compiled == eager for every size, a bounded number of
compilations, guards for the sizes the code branches on, 0/1 specialisation."""
from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import fastdynamo

from .helpers import assert_same, compiled


def mlp_like(x, w):
    h = torch.relu(x @ w)
    return h.view(x.shape[0], h.shape[1]).sum(1) / x.size(1)


def flatten_mix(x, y):
    # a relation between sizes: x.numel() == y.shape[0] (s0 * s1 == s2)
    return x.reshape(-1) + y, x.numel()


def test_fifty_sizes_compile_at_most_twice():
    fn, rec = compiled(mlp_like)
    w = torch.randn(5, 7)
    for n in range(2, 52):
        x = torch.randn(n, 5)
        assert_same(fn(x, w), mlp_like(x, w))
    assert len(rec.captures) == 2


@settings(max_examples=40)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=12))
def test_any_sizes_match_eager_with_bounded_compiles(sizes):
    fastdynamo.reset()
    fn, rec = compiled(mlp_like)
    w = torch.randn(5, 3)
    for n in sizes:
        x = torch.randn(n, 5)
        assert_same(fn(x, w), mlp_like(x, w))
    # the first size, its symbolic recompile, and sizes 0 and 1 (specialised)
    distinct_big = {n for n in sizes if n >= 2}
    bound = min(len(distinct_big), 2) + len({n for n in sizes if n < 2})
    assert len(rec.captures) <= bound


@settings(max_examples=25)
@given(st.lists(st.tuples(st.integers(2, 9), st.integers(2, 9)), min_size=1, max_size=8))
def test_size_relations_are_guarded(shapes):
    fastdynamo.reset()
    fn, rec = compiled(flatten_mix)
    for a, b in shapes:
        x, y = torch.randn(a, b), torch.randn(a * b)
        assert_same(fn(x, y), flatten_mix(x, y))
    assert len(rec.captures) <= 3  # static, then symbolic dims as they change


def test_relation_guard_fails_on_mismatch():
    fn, rec = compiled(lambda x, y: x.reshape(-1) + y, dynamic=True)
    x, y = torch.randn(3, 4), torch.randn(12)
    assert_same(fn(x, y), x.reshape(-1) + y)
    guards = rec.captures[0].result.guards
    text = "\n".join(g.text() for g in guards)
    assert "x.size()[0]*x.size()[1] == y.size()[0]" in text.replace(" * ", "*") \
        or "y.size()[0] == x.size()[0]*x.size()[1]" in text.replace(" * ", "*"), text
    gs = fastdynamo.guards.compile_guards(guards)
    frame = fastdynamo._runtime.native().Frame
    code = rec.captures[0].code
    ok = frame(code, [torch.randn(5, 2), torch.randn(10)], {"torch": torch})
    bad = frame(code, [torch.randn(5, 2), torch.randn(11)], {"torch": torch})
    assert gs.check(ok)
    assert not gs.check(bad)
    assert "shape guard" in gs.failure_reason(bad) and "y.size()[0] = 11" in gs.failure_reason(bad)


def branchy(x):
    if x.shape[0] > 8:
        return x * 2
    if x.shape[0] % 2 == 0:
        return x - 1
    return x + 1


def test_branches_on_sizes_produce_guards():
    fn, rec = compiled(branchy, dynamic=True)
    for n in (3, 5, 7):  # odd, <= 8: one entry
        x = torch.randn(n)
        assert_same(fn(x), branchy(x))
    assert len(rec.captures) == 1
    for n in (4, 6, 8):  # even, <= 8: a second entry
        x = torch.randn(n)
        assert_same(fn(x), branchy(x))
    assert len(rec.captures) == 2
    for n in (9, 20, 33):  # > 8: a third
        x = torch.randn(n)
        assert_same(fn(x), branchy(x))
    assert len(rec.captures) == 3
    texts = ["\n".join(g.text() for g in c.result.guards) for c in rec.captures]
    assert "x.size()[0] <= 8" in texts[0] and "x.size()[0] % 2" in texts[0].replace("Mod(", "")\
        or "Mod(x.size()[0], 2)" in texts[0], texts[0]
    assert "x.size()[0] > 8" in texts[2], texts[2]


def test_sizes_zero_and_one_are_specialised():
    fn, rec = compiled(lambda x: x.sum(0) + x.shape[0], dynamic=True)
    for n in (0, 1, 2, 3, 0, 1):
        x = torch.randn(n, 3)
        assert_same(fn(x), x.sum(0) + n)
    assert len(rec.captures) == 3  # 0, 1, then one symbolic entry for n >= 2
    assert "sym_size" not in rec.captures[0].result.graph_module.code
    assert "sym_size" in rec.captures[2].result.graph_module.code


def test_specialising_uses_keep_results_right():
    def f(x):
        total = x.new_zeros(())
        for i in range(x.shape[0]):  # range needs an int: specialised
            total = total + x[i]
        return total, x.shape

    fn, rec = compiled(f, dynamic=True)
    for n in (2, 3, 2):
        x = torch.randn(n)
        assert_same(fn(x), f(x))
    assert len(rec.captures) == 2


def test_symbolic_size_in_returned_value_and_string():
    def f(x):
        n = x.shape[0] * 2 + 1
        return x.sum() * n, n, f"{x.shape[0]}"

    fn, rec = compiled(f, dynamic=True)
    for n in (2, 3, 4):
        x = torch.randn(n, 2)
        assert_same(fn(x), f(x))
    assert len(rec.captures) >= 1


def test_tensor_creation_from_sizes():
    def f(x):
        b, t = x.shape
        mask = torch.ones(t, t).tril()
        pos = torch.arange(t)
        return (x @ mask)[:, : t - 1] + pos[: t - 1], x.new_zeros(b, t // 2)

    fn, rec = compiled(f)
    for t in (4, 6, 9, 12, 5):
        x = torch.randn(3, t)
        assert_same(fn(x), f(x))
    assert len(rec.captures) == 2
    assert "sym_size" in rec.captures[1].result.graph_module.code

"""The ``contains`` check: a key that must stay present, or stay absent (os.environ
entries, instance dicts), with its failure text and bad specs refused."""
from __future__ import annotations

import pytest

from fastdynamo import guards as g
from fastdynamo.guards.sources import LocalSource

A = LocalSource(0, "a")


def frame_for(native, value):
    code = compile("def f(a): pass", "<test>", "exec").co_consts[0]
    return native.Frame(code, [value], globals())


def test_contains_present_and_absent(native):
    present = g.compile_guards([g.Guard(A, g.contains("k", True))])
    absent = g.compile_guards([g.Guard(A, g.contains("k", False))])
    with_key, without_key = frame_for(native, {"k": 1}), frame_for(native, {"j": 1})
    assert present.check(with_key) and not present.check(without_key)
    assert absent.check(without_key) and not absent.check(with_key)
    assert absent.failure_reason(with_key) == "'k' not in a"
    assert present.failure_reason(without_key) == "'k' in a"


def test_contains_on_a_value_without_in_fails_the_guard(native):
    guard_set = g.compile_guards([g.Guard(A, g.contains("k", False))])
    assert not guard_set.check(frame_for(native, 3))  # `in` raises TypeError: not passing


def test_contains_needs_a_constant_key_and_a_bool(native):
    with pytest.raises(ValueError, match="bad guard spec"):
        g.compile_guards([g.Guard(A, ("contains", object(), True))])
    with pytest.raises(ValueError, match="bad guard spec"):
        g.compile_guards([g.Guard(A, ("contains", "k", "yes"))])


def test_keys_are_checks_a_dicts_key_order(native):
    guard_set = g.compile_guards([g.Guard(A, ("keys_are", ("a", 1)))])
    assert guard_set.check(frame_for(native, {"a": 0, 1: 0}))
    assert not guard_set.check(frame_for(native, {1: 0, "a": 0}))  # reordered
    assert not guard_set.check(frame_for(native, {"a": 0}))  # fewer
    assert not guard_set.check(frame_for(native, {"a": 0, 1: 0, 2: 0}))  # more
    assert not guard_set.check(frame_for(native, {"a": 0, 1.0: 0}))  # 1.0 == 1, another type
    assert "another order" in guard_set.failure_reason(frame_for(native, {1: 0, "a": 0}))
    with pytest.raises(ValueError, match="bad guard spec"):
        g.compile_guards([g.Guard(A, ("keys_are", [object()]))])

"""Sets and frozensets: construction, ``in``, algebra, in-place operators seen through
aliases, and a returned set made afresh on every call."""
import torch

import fastdynamo

from .helpers import check

x = torch.ones(2)


def test_construction_membership_and_algebra():
    def fn(x):
        a = {1, 2, 3}
        b = set([3, 4])  # noqa: C405 - the construct under test
        c = frozenset((1, 5))
        return (a | b, a & b, a - b, a ^ b, a <= {1, 2, 3, 4}, c | a, 2 in a, 7 not in c,
                {i % 3 for i in range(7)}, sorted(a.union([9], (8,))), a.isdisjoint(c), x + 1)
    check(fn, x, graphs=1, breaks=0, fullgraph=True)


def test_in_place_operators_are_seen_through_aliases():
    def fn(x):
        a = {1}
        alias = a
        a |= {2}
        a -= {1}
        a.add(5)
        a.discard(7)
        return alias, a is alias, x * 2
    check(fn, x, graphs=1, fullgraph=True)


def test_returned_set_is_new_on_every_call():
    def fn(x):
        return {1, 2}, x + 1
    fastdynamo.reset()
    compiled = fastdynamo.compile(fn, backend="eager")
    first = compiled(x)[0]
    first.add(9)
    assert compiled(x)[0] == {1, 2}


def test_set_errors_break_like_python_raises():
    def fn(x):
        s = {1}
        s.remove(2)  # KeyError
        return x
    got = check(fn, x, graphs=0)
    assert got.error is KeyError


def test_changing_a_set_while_iterating_breaks():
    def fn(x):
        s = {1, 2}
        for v in s:
            s.add(v + 10)  # RuntimeError in Python
        return x
    got = check(fn, x, graphs=0)
    assert got.error is RuntimeError


def test_frozenset_argument_is_guarded_by_value():
    def fn(x, keys):
        return x + 1 if "a" in keys else x - 1
    check(fn, x, frozenset({"a"}), graphs=1, fullgraph=True)

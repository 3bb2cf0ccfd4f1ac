"""Named tuples (issue #10, class 3): ``==``/``!=`` element-wise with CPython's identity
shortcut, a subclass's own dunders called in CPython's order, and named tuples rebuilt
with their fields (not ``NT((a, b))``)."""
import collections
import typing

import torch

from .helpers import check

x = torch.ones(2)
y = torch.full((2,), 2.0)
NT = collections.namedtuple("NT", "a b")
One = collections.namedtuple("One", "a")


class Pair(typing.NamedTuple):
    a: torch.Tensor
    b: torch.Tensor

    def __add__(self, other):
        return Pair(self.a + other.a, self.b + other.b)


class Scaled(NT):
    def __mul__(self, k):
        return Scaled(self.a * k, self.b * k)

    def __rmul__(self, k):
        return Scaled(self.a * k * 10, self.b)


class Loud(NT):
    def __eq__(self, other):
        return "custom eq"

    __hash__ = NT.__hash__


def test_equal_over_the_same_tensors_without_tensor_eq():
    def fn(x, y):
        return NT(x, y) == NT(x, y), NT(x, y) != NT(x, y), (x, 1) == (x, 1), [x] == [x], x + 1
    check(fn, x, y, graphs=1, breaks=0, fullgraph=True)


def test_lengths_and_constants():
    def fn(x):
        return (NT(1, 2) == (1, 2), (x,) == (x, 2), [x] != [x, 1], (1, x) < (2, x), (1, 2) == [1, 2], x * 2)
    check(fn, x, graphs=1, fullgraph=True)


def test_distinct_tensors_compared_by_value_break_like_python():
    def fn(x, y):
        return NT(x, 1) == NT(y, 1)  # bool(x == y): RuntimeError for two elements
    got = check(fn, x, y, graphs=0)
    assert got.error is RuntimeError


def test_typing_namedtuple_add_is_called():
    def fn(x, y):
        return Pair(x, y) + Pair(y, x)
    got = check(fn, x, y, graphs=1, fullgraph=True)
    assert type(got.value) is Pair


def test_reflected_and_forward_dunders():
    def fn(x, y):
        return Scaled(x, y) * 3, 2 * Scaled(x, y), NT(x, y) + (x,)
    check(fn, x, y, graphs=1, fullgraph=True)


def test_own_eq_is_called():
    def fn(x, y):
        return Loud(x, y) == NT(x, y), NT(x, y) == Loud(x, y), x - 1
    check(fn, x, y, graphs=1, fullgraph=True)


def test_namedtuples_are_rebuilt_with_their_fields():
    def fn(x, y):
        return NT(x + 1, y), One(x * 2), One((1, 2)), Pair(a=x, b=y)
    got = check(fn, x, y, graphs=1, fullgraph=True)
    assert got.value[2].a == (1, 2)


def test_tensor_in_a_tuple_found_by_identity():
    def fn(x, y):
        return x in (x, y), y in [y], x + 1
    check(fn, x, y, graphs=1, fullgraph=True)


class Padded(NT):
    def __len__(self):
        return 99

    def __getitem__(self, i):
        return "item"

    def __iter__(self):
        return iter(("it",))

    def __contains__(self, v):
        return True


def test_container_dunders_of_a_subclass_break_instead_of_acting_as_a_tuple():
    def fn(x, y):
        p = Padded(x, y)
        return len(p), p[0], list(p), 5 in p, p.a + 1
    got = check(fn, x, y, graphs=1, fullgraph=False)
    assert got.value[:4] == (99, "item", ["it"], True)

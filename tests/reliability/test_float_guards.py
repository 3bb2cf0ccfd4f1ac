"""Float constants are guarded by bit pattern: `-0.0` is not `0.0`, a NaN constant matches
itself, also inside tuples; guard-tree nodes for item keys merge only for the same key;
`getattr(obj, name, default)` on list and dict arguments returns the default."""
from __future__ import annotations

import math

import pytest
import torch

import fastdynamo
from fastdynamo._runtime import native


@pytest.fixture(autouse=True)
def _fresh():
    fastdynamo.reset()
    yield
    fastdynamo.reset()


def entries(fn):
    return native().cache_entries(fn.__code__)


def divide(x, c):
    return x / c


def test_negative_zero_is_not_zero():
    compiled = fastdynamo.compile(divide, backend="eager")
    x = torch.ones(3)
    assert torch.equal(compiled(x, 0.0), torch.full((3,), math.inf))
    assert torch.equal(compiled(x, -0.0), torch.full((3,), -math.inf))  # was +inf: graph reused
    assert len(entries(divide)) == 2
    assert torch.equal(compiled(x, 0.0), torch.full((3,), math.inf))
    assert len(entries(divide)) == 2  # both entries hit afterwards


def add_constant(x, c):
    return x + c


def test_nan_constant_passes_its_own_guard():
    compiled = fastdynamo.compile(add_constant, backend="eager")
    x = torch.ones(2)
    for _ in range(5):
        assert torch.isnan(compiled(x, float("nan"))).all()
    (entry,) = entries(add_constant)  # one compile, not one per call up to the limit
    assert entry.hits >= 4


def index_tuple(x, t):
    return x / t[0]


def test_signed_zero_inside_a_tuple():
    compiled = fastdynamo.compile(index_tuple, backend="eager")
    x = torch.ones(2)
    assert torch.equal(compiled(x, (0.0, 1)), x / 0.0)
    assert torch.equal(compiled(x, (-0.0, 1)), x / -0.0)
    assert len(entries(index_tuple)) == 2


def _guard(check, value):
    rt = native()
    code = (lambda c: c).__code__
    return rt.GuardSet([(("local", 0, "c"), check)]).check(rt.Frame(code, [value], {}))


def test_equals_check_compares_floats_by_bits():
    assert not _guard(("equals", 0.0), -0.0)
    assert not _guard(("equals", -0.0), 0.0)
    assert _guard(("equals", -0.0), -0.0)
    assert _guard(("equals", float("nan")), float("nan"))
    assert not _guard(("equals", (0.0, 1)), (-0.0, 1))
    assert not _guard(("equals", frozenset({0.0})), frozenset({-0.0}))
    assert _guard(("equals", frozenset({0.0, 2.5})), frozenset({2.5, 0.0}))
    assert not _guard(("equals", 1), True) and _guard(("equals", 1), 1)


class SameRepr:
    def __repr__(self):
        return "key"


def test_item_keys_with_the_same_repr_are_different_nodes():
    rt = native()
    first, second = SameRepr(), SameRepr()
    nan_a, nan_b = float("nan"), float("nan")
    table = {first: 1, second: 2, nan_a: 3, nan_b: 4}
    code = (lambda d: d).__code__
    guards = rt.GuardSet([
        (("item", ("local", 0, "d"), first), ("equals", 1)),
        (("item", ("local", 0, "d"), second), ("equals", 2)),
        (("item", ("local", 0, "d"), nan_a), ("equals", 3)),
        (("item", ("local", 0, "d"), nan_b), ("equals", 4)),
    ])
    assert guards.check(rt.Frame(code, [table], {}))


def read_missing(x, obj):
    return x + getattr(obj, "missing", 5)


@pytest.mark.parametrize("obj", [[1], {"a": 1}, (1, 2)], ids=["list", "dict", "tuple"])
def test_getattr_default_on_containers(obj):
    x = torch.ones(2)
    assert torch.equal(fastdynamo.compile(read_missing, backend="eager")(x, obj), x + 5)
    assert fastdynamo.explain(read_missing, backend="eager")(x, obj).graph_count == 1


"""Relations between frame values, checked natively: ``distinct_objects`` (no two of
the sources are one object) and ``same_object`` (all are one object), with their
failure text, unreadable sources, many sources, and bad specs refused."""
from __future__ import annotations

import pytest

from fastdynamo import guards as g
from fastdynamo.guards.sources import AttrSource, ItemSource, LocalSource

A, B = LocalSource(0, "a"), LocalSource(1, "b")
CODE = compile("def f(a, b): pass", "<test>", "exec").co_consts[0]


class Box:
    def __init__(self, inner=None):
        self.inner = inner


def frame(native, a, b=None):
    return native.Frame(CODE, [a, b], globals())


def test_distinct_passes_for_two_objects_and_fails_for_one(native):
    guard_set = g.compile_guards([g.Guard(None, g.distinct_objects(A, B))])
    one, other = Box(), Box()
    assert guard_set.check(frame(native, one, other))
    assert not guard_set.check(frame(native, one, one))
    assert guard_set.failure_reason(frame(native, one, one)).startswith("a is not b, got the same object (")
    assert guard_set.failure_reason(frame(native, one, other)) is None
    assert len(guard_set) == 1


def test_distinct_compares_every_pair_of_nested_sources(native):
    layers = ItemSource(AttrSource(A, "layers"), 0), ItemSource(AttrSource(A, "layers"), 1)
    guard_set = g.compile_guards([g.Guard(None, g.distinct_objects(*layers, B))])
    first, second = Box(), Box()
    cache = Box()
    cache.layers = [first, second]
    assert guard_set.check(frame(native, cache, Box()))
    assert not guard_set.check(frame(native, cache, second))  # b is layers[1]
    assert guard_set.failure_reason(frame(native, cache, second)).startswith("a.layers[1] is not b")
    cache.layers = [first, first]
    assert guard_set.failure_reason(frame(native, cache, Box())).startswith("a.layers[0] is not a.layers[1]")


def test_same_passes_for_one_object_and_fails_for_two(native):
    guard_set = g.compile_guards([g.Guard(None, g.same_object(A, AttrSource(B, "inner")))])
    one = Box()
    assert guard_set.check(frame(native, one, Box(one)))
    assert not guard_set.check(frame(native, one, Box(Box())))
    assert guard_set.failure_reason(frame(native, one, Box(Box()))) == "a is b.inner, got different objects"


def test_an_unreadable_source_fails_the_relation(native):
    guard_set = g.compile_guards([g.Guard(None, g.distinct_objects(A, AttrSource(B, "inner")))])
    assert not guard_set.check(frame(native, Box(), object()))  # object() has no .inner
    assert guard_set.failure_reason(frame(native, Box(), object())) == "b.inner could not be read"


def test_many_sources_are_all_compared(native):
    """More sources than the stack array holds take the heap path: same answers."""
    items = [ItemSource(A, i) for i in range(12)]
    guard_set = g.compile_guards([g.Guard(None, g.distinct_objects(*items))])
    objects = [Box() for _ in range(12)]
    assert guard_set.check(frame(native, objects))
    objects[11] = objects[3]
    assert guard_set.failure_reason(frame(native, objects)).startswith("a[3] is not a[11]")
    same = g.compile_guards([g.Guard(None, g.same_object(*items))])
    assert same.check(frame(native, [objects[0]] * 12))
    assert not same.check(frame(native, objects))


def test_relations_run_with_the_other_guards(native):
    guard_set = g.compile_guards([g.Guard(A, g.type_is(Box)), g.Guard(None, g.distinct_objects(A, B))])
    assert len(guard_set) == 2
    assert guard_set.failure_reason(frame(native, 1, 2)) == "type(a) is test_relation_guards.Box, got int"
    one = Box()
    assert guard_set.failure_reason(frame(native, one, one)).startswith("a is not b")


def test_guard_text():
    assert g.Guard(None, g.distinct_objects(A, B)).text() == "a is not b"
    assert g.Guard(None, g.same_object(A, B)).text() == "a is b"
    assert g.Guard(None, g.distinct_objects(A, B, AttrSource(A, "x"))).text() == "distinct_objects(a, b, a.x)"


def test_bad_relation_specs_are_refused(native):
    with pytest.raises(ValueError, match="at least two"):
        g.distinct_objects(A)
    with pytest.raises(ValueError, match="at least two"):
        g.same_object(A)
    for check in [("distinct", (A.spec(),)),            # one source
                  ("equal", (A.spec(), B.spec())),       # unknown kind
                  ("distinct", [A.spec(), B.spec()]),    # not a tuple
                  ("distinct", (A.spec(), ("nowhere",))),  # bad source
                  ("distinct", (A.spec(), ("attr", A.spec())))]:  # wrong arity
        with pytest.raises(ValueError, match="bad guard spec"):
            native.GuardSet([(("objects",), check)])

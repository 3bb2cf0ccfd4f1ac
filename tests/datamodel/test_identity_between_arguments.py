"""``a is b`` between two objects read through two sources (found by
test_generated_aliasing.py): a list, tuple or dict of constants is a constant too, and
comparing two rebuilt copies answered ``False`` even when one object was passed twice
(a wrong result). The answer is now taken from the objects themselves and guarded by
the native relation (``same_object`` / ``distinct_objects``), for user objects too
(which broke the graph before): a call that aliases them otherwise recompiles. A tuple
of constants keeps its source, so it too is compared, and returned, as the caller's
own object."""
from __future__ import annotations

import pytest
import torch

import fastdynamo
from fastdynamo.convert_frame import Recorder

pytestmark = pytest.mark.usefixtures("fresh_cache")


class Box:
    def __init__(self, n=1):
        self.n = n


def identical(x, a, b):
    return x + (a is b) * 2 + (a is not b)


def equal_without_eq(x, a, b):
    return x + (a == b)  # object.__eq__: identity


CASES = {"list": (identical, lambda: [1, 2]), "dict": (identical, lambda: {"k": 1}),
         "tuple": (identical, lambda: (1, [2])), "object": (identical, Box),
         "object ==": (equal_without_eq, Box)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_one_object_passed_twice_then_two_equal_objects(case):
    fn, make = CASES[case]
    one, other = make(), make()
    recorder = Recorder()
    compiled = fastdynamo.compile(fn, backend="eager", fullgraph=True, _recorder=recorder)
    x = torch.zeros(2)
    for a, b in [(one, one), (one, other), (one, one), (other, one)]:
        assert torch.equal(compiled(x, a, b), fn(x, a, b)), (a, b)
    # one graph for "is", one for "is not"; the last two calls hit them
    assert len(recorder.captures) == 2 and not recorder.breaks
    guards = [[g.text() for g in capture.result.guards] for capture in recorder.captures]
    assert "a is b" in guards[0] and "a is not b" in guards[1], guards


def test_an_argument_and_an_attribute_of_another():
    def fn(x, box, items):
        return x + (box.n is items)

    items = [1]
    x = torch.zeros(1)
    compiled = fastdynamo.compile(fn, backend="eager", fullgraph=True)
    for box in (Box(items), Box([1]), Box(items)):
        assert torch.equal(compiled(x, box, items), fn(x, box, items))


def test_tuples_of_constants_keep_their_identity():
    # guarded by value, and kept as the caller's own objects: before, each was rebuilt
    # from its items (`a is b` answered False for one tuple passed twice, and the tuple
    # returned was a copy)
    def fn(x, a, b):
        return x + (a is b), a

    t = (1, 2)
    x = torch.zeros(1)
    recorder = Recorder()
    compiled = fastdynamo.compile(fn, backend="eager", fullgraph=True, _recorder=recorder)
    for a, b in [(t, t), (t, tuple([1, 2])), (t, t)]:
        got, expected = compiled(x, a, b), fn(x, a, b)
        assert torch.equal(got[0], expected[0]) and got[1] is a, (a, b)
    assert len(recorder.captures) == 2 and not recorder.breaks

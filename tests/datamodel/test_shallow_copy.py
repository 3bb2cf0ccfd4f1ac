"""``copy.copy`` inside a compiled frame: immutable values are themselves, lists, dicts
and sets are new containers holding the same items, a plain user object is a new
object of its class sharing its attribute values; what ``copy.copy`` would not treat so
(``__copy__``, ``__slots__``, tensors) breaks the graph with the same result."""
import copy

import pytest
import torch

from .helpers import check, compiled_with_recorder
from .object_helpers import AttributeMapped


class Settings:
    def __init__(self):
        self.scale = 2
        self.sizes = [1, 2]


class Mapped(AttributeMapped):
    attribute_map = {"hidden": "width"}

    def __init__(self):
        self.width = 3


class WithCopy(Settings):
    def __copy__(self):
        made = WithCopy()
        made.scale = 10
        return made


class Slotted:
    __slots__ = ("scale",)

    def __init__(self):
        self.scale = 4


def copies_containers(x, sizes, table):
    pair = (x, 1)
    sizes_copy, table_copy, tags = copy.copy(sizes), copy.copy(table), copy.copy({1, 2})
    sizes_copy.append(7)
    table_copy["new"] = 3
    return (x * len(sizes_copy), copy.copy(pair) is pair, sizes, sizes_copy, table_copy, list(table),
            tags, copy.copy(x.dtype), copy.copy("text"))


def test_containers_copy_into_new_ones_and_the_originals_do_not_change():
    check(copies_containers, torch.ones(2), [1, 2], {"b": 1, "a": 2}, graphs=1, breaks=0, fullgraph=True)


def copies_objects(x, outside):
    made = Settings()
    made.scale = 5
    copies = [copy.copy(made), copy.copy(outside), copy.copy(Mapped())]
    copies[0].scale = 6
    shared = copies[1].sizes is outside.sizes  # a shallow copy shares attribute values
    return (x * made.scale * copies[0].scale * copies[1].scale + copies[2].hidden, shared,
            type(copies[1]) is Settings, vars(copies[1]), copies[1] is outside)


def test_plain_objects_copy_into_new_objects_sharing_their_values():
    check(copies_objects, torch.ones(2), Settings(), graphs=1, breaks=0, fullgraph=True)


def test_a_copy_of_an_outside_object_follows_its_attributes_on_the_next_call():
    compiled, recorder = compiled_with_recorder(copies_objects)
    first, second = Settings(), Settings()
    second.extra = "added"  # another instance dict: the copy's state differs
    for outside in (first, second):
        got, want = compiled(torch.ones(2), outside), copies_objects(torch.ones(2), outside)
        assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    assert len(recorder.breaks) == 0 and len(recorder.captures) == 2


@pytest.mark.parametrize("make, reason", [(WithCopy, "__copy__"), (Slotted, "__slots__")])
def test_what_copy_does_not_treat_as_plain_breaks_with_the_same_result(make, reason):
    def copies(x, obj):
        return x * copy.copy(obj).scale

    outcome = check(copies, torch.ones(2), make(), graphs=1, fullgraph=False)
    assert any(reason in str(b) for b in outcome.breaks), outcome.breaks

"""``id()`` in compiled code: the address of an object from outside the frame is a
constant pinned by an ``id_is`` guard on its source (another object recompiles); the
singletons' addresses are constants; an object made by the frame has no address until
the code runs, so ``id()`` of it breaks the graph (see capture/variables/identity.py)."""
from __future__ import annotations

import pytest
import torch

import fastdynamo
from fastdynamo.convert_frame import Recorder

from .helpers import check

pytestmark = pytest.mark.usefixtures("fresh_cache")


class Box:
    def __init__(self, n=0):
        self.n = n


def memo_lookup(x, a, b):
    """The shape of ``copy.deepcopy``'s and ``inspect.unwrap``'s memo: keyed by id()."""
    memo = {id(a): a}
    found = memo.get(id(b))
    return x + (found.n if found is not None else -1) + (id(a) == id(b))


def test_ids_of_arguments_are_pinned_constants():
    one, other = Box(3), Box(4)
    recorder = Recorder()
    compiled = fastdynamo.compile(memo_lookup, backend="eager", fullgraph=True, _recorder=recorder)
    for a, b in [(one, other), (one, other), (one, one), (other, other)]:
        assert torch.equal(compiled(torch.ones(2), a, b), memo_lookup(torch.ones(2), a, b))
    # (one, other) once, then (one, one) and (other, other): each pins its objects
    assert len(recorder.captures) == 3 and not recorder.breaks
    guards = [g.text() for g in recorder.captures[0].result.guards]
    assert any(g.startswith("a is <Box") for g in guards) and any(g.startswith("b is <Box") for g in guards)


def ids_of_singletons(x):
    return x + (id(None) == id(None)) + (id(True) != id(False))


def test_ids_of_singletons_are_constants():
    check(ids_of_singletons, torch.ones(2), graphs=1, breaks=0, fullgraph=True)


def id_of_a_global_function(x):
    return x + (id(ids_of_singletons) == id(ids_of_singletons))


def test_id_of_an_identity_guarded_function():
    check(id_of_a_global_function, torch.ones(2), graphs=1, breaks=0, fullgraph=True)


def id_of_a_new_object(x):
    made = Box()
    return x + (id(made) != 0)


def test_id_of_an_object_made_by_the_frame_breaks():
    got = check(id_of_a_new_object, torch.ones(2), graphs=1, breaks=1)  # the resume's graph
    assert any("made by the frame" in b.reason for b in got.breaks), [b.reason for b in got.breaks]


def attribute_lists_are_one(x, box):
    return x + len(box.first), box.first is box.second, box.first is not box.second


def test_is_between_lists_from_outside_is_decided_on_the_objects_and_guarded():
    """Two attributes holding one list (or two equal lists): ``is`` answers as in eager,
    and a call where the sharing changed recompiles (it used to answer False for one
    list: the two trackers' constant values were compared)."""
    shared, separate = Box(), Box()
    shared.first = shared.second = [1, 2]
    separate.first, separate.second = [1, 2], [1, 2]
    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.compile(attribute_lists_are_one, backend="eager", _recorder=recorder)
    for box in (shared, separate, shared, separate):
        got, want = compiled(torch.ones(1), box), attribute_lists_are_one(torch.ones(1), box)
        assert torch.equal(got[0], want[0]) and got[1:] == want[1:], (got, want)
    assert len(recorder.captures) == 2 and not recorder.breaks, [str(b) for b in recorder.breaks]

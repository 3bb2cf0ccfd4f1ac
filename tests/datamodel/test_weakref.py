"""``weakref.ref`` calls: a reference made by the frame returns its referent; one from
outside the frame is read through the ``ref()`` source and guarded by identity
(test_weakref_calls.py)."""
import weakref

import torch

from .object_helpers import compare, fresh


class Box:
    def __init__(self, t):
        self.t = t


def test_weakref_made_in_frame_returns_the_referent():
    def fn(x, box):
        ref = weakref.ref(box)
        return ref() is box, ref().t + x

    compare(fn, lambda: (torch.ones(2), Box(torch.ones(2))), fullgraph=True)


def test_weakref_made_in_frame_escapes():
    def fn(x, box):
        return weakref.ref(box), x + 1

    def check(x, box):
        ref, y = fn(x, box)
        return type(ref), ref() is box, y

    compare(check, lambda: (torch.ones(2), Box(torch.ones(2))), fullgraph=True)


def test_weakref_to_an_object_that_refuses_them_raises_like_eager():
    compare(lambda x: (weakref.ref([1]), x + 1), fresh(torch.ones(2)), graphs=0, breaks=1)


def test_weakref_from_outside_is_read_in_the_graph():
    box = Box(torch.ones(2))
    ref = weakref.ref(box)
    compare(lambda x, r: r().t + x, lambda: (torch.ones(2), ref), graphs=1, breaks=0)

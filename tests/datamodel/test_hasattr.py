"""``hasattr`` on every tracked kind, exact, and guarded when the answer depends on the
instance (an attribute added or removed after the first call recompiles)."""
import collections
import functools

import pytest
import torch

import fastdynamo
from fastdynamo.convert_frame import Recorder

from .object_helpers import compare


class Obj:
    cls_attr = 1

    def __init__(self):
        self.present = 2

    def method(self):
        return 3


class WithSlots:
    __slots__ = ("a",)


NT = collections.namedtuple("NT", "a b")


def _f(t):
    return t


KINDS = {
    "user object": lambda: Obj(),
    "slots": lambda: WithSlots(),
    "module": lambda: (torch.manual_seed(0), torch.nn.Linear(2, 2))[1],
    "partial": lambda: functools.partial(_f),
    "tuple": lambda: (1, 2),
    "namedtuple": lambda: NT(1, 2),
    "list": lambda: [1],
    "dict": lambda: {"a": 1},
    "int": lambda: 4,
    "function": lambda: _f,
    "class": lambda: Obj,
}
NAMES = ["present", "cls_attr", "method", "missing", "a", "weight", "bias", "func", "append",
         "keys", "__call__", "real", "__name__", "_fields", "training"]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_hasattr_matches_eager(kind):
    def fn(x, obj):
        return [hasattr(obj, n) for n in NAMES], x + 1

    compare(fn, lambda: (torch.ones(2), KINDS[kind]()), fullgraph=True)


def test_hasattr_on_objects_made_in_frame():
    def fn(x):
        o = Obj()
        p = functools.partial(_f, x)
        return hasattr(o, "present"), hasattr(o, "nope"), hasattr(p, "func"), hasattr(p, "nope"), x + 1

    compare(fn, lambda: (torch.ones(2),), fullgraph=True)


@pytest.mark.parametrize("make,change", [
    (Obj, lambda o: setattr(o, "later", 1)),
    (lambda: torch.nn.Linear(2, 2), lambda m: setattr(m, "later", torch.nn.ReLU())),
])
def test_hasattr_false_recompiles_when_the_attribute_appears(make, change):
    def fn(x, obj):
        return x + 1 if hasattr(obj, "later") else x - 1

    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.compile(fn, backend="eager", _recorder=recorder)
    obj, x = make(), torch.ones(2)
    assert torch.equal(compiled(x, obj), fn(x, obj))
    change(obj)
    assert torch.equal(compiled(x, obj), fn(x, obj))
    assert len(recorder.captures) == 2


def test_hasattr_true_recompiles_when_the_attribute_goes():
    def fn(x, obj):
        return x + 1 if hasattr(obj, "present") else x - 1

    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.compile(fn, backend="eager", _recorder=recorder)
    obj, x = Obj(), torch.ones(2)
    assert torch.equal(compiled(x, obj), fn(x, obj))
    del obj.present
    assert torch.equal(compiled(x, obj), fn(x, obj))
    assert len(recorder.captures) == 2

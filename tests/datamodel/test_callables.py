"""``callable(obj)`` is answered from the real type's ``__call__`` for every kind of
value the translator tracks (wrong-result class 4 of issue #10)."""
import functools

import pytest
import torch

from .object_helpers import compare, fresh


class WithCall:
    def __call__(self, t):
        return t * 3


class Plain:
    pass


class Meta(type):
    def __call__(cls, *args):
        return super().__call__(*args)


class MadeByMeta(metaclass=Meta):
    pass  # the metaclass's __call__ makes the class callable, not its instances


def _fn(t):
    return t


CASES = {
    "instance with __call__": lambda: WithCall(),
    "plain instance": lambda: Plain(),
    "instance whose metaclass has __call__": lambda: MadeByMeta(),
    "class": lambda: Plain,
    "module": lambda: torch.nn.ReLU(),
    "function": lambda: _fn,
    "partial": lambda: functools.partial(_fn),
    "bound method": lambda: WithCall().__call__,
    "tuple": lambda: (1, 2),
    "dict": lambda: {"a": 1},
    "int": lambda: 3,
    "none": lambda: None,
    "builtin": lambda: len,
    "tensor": lambda: torch.ones(1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_callable_matches_eager(name):
    def fn(x, obj):
        return callable(obj), x + 1

    compare(fn, lambda: (torch.ones(2), CASES[name]()), fullgraph=True)


def test_callable_of_list_item_and_object_made_in_frame():
    def fn(x):
        return callable(WithCall()), callable(Plain()), callable([x][0]), x + 1

    compare(fn, fresh(torch.ones(2)), fullgraph=True)

"""``is`` on objects the frame made: never a constant (``cache is None``) nor another
object the frame made; and a dict subclass reached as a function constant (a registry
default argument) is read through its items with its own Python methods."""
from __future__ import annotations

import pytest
import torch

from .helpers import check

pytestmark = pytest.mark.usefixtures("fresh_cache")


class Cache:
    def __init__(self):
        self.layers = []


def new_object_is_not_none(x, cache=None):
    if cache is None:
        cache = Cache()
    made = Cache()
    return x + (cache is None) + (cache is not None) * 2 + (made is cache) * 4 + (made is made) * 8


def test_a_new_object_is_not_none_nor_another_new_object():
    check(new_object_is_not_none, torch.ones(2), graphs=1, breaks=0, fullgraph=True)


class Registry(dict):
    def get(self, key):
        return super().get(str(key)) or {}


REGISTRY = Registry()
dict.__setitem__(REGISTRY, "3", {"a": 1, "b": 2})


def recorded(key, registry=REGISTRY):
    return registry.get(key)


def registry_default(x):
    """The registry is read by an inlined function, from its ``__defaults__``."""
    return x + len(recorded(3)) + len(recorded(4))


def test_a_dict_subclass_default_argument_runs_its_own_get():
    check(registry_default, torch.ones(2), graphs=1, breaks=0, fullgraph=True)

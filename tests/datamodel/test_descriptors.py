"""Descriptors: property getters and setters, classmethod, staticmethod, ``__slots__``
members, and the getset ``__class__``."""
import torch

from .object_helpers import compare, fresh


class Temperature:
    unit = "C"

    def __init__(self, t):
        self._t = t

    @property
    def t(self):
        return self._t

    @t.setter
    def t(self, value):
        self._t = value * 2

    @classmethod
    def make(cls, t):
        return cls(t)

    @staticmethod
    def scale(t):
        return t * 10

    @classmethod
    def describe_unit(cls):
        return cls.unit


def test_property_getter_and_setter_on_argument():
    def fn(x, obj):
        obj.t = x + 1
        return obj.t * 3

    compare(fn, lambda: (torch.ones(2), Temperature(torch.zeros(2))), fullgraph=True)


def test_property_setter_on_object_made_in_frame():
    def fn(x):
        obj = Temperature(x)
        obj.t = obj.t + 1
        return obj

    compare(fn, fresh(torch.ones(2)), fullgraph=True)


def test_classmethod_and_staticmethod_through_instance_and_class():
    def fn(x, obj):
        made = Temperature.make(x)
        return (obj.scale(x), Temperature.scale(x), made.t, obj.describe_unit(),
                Temperature.describe_unit())

    compare(fn, lambda: (torch.ones(2), Temperature(torch.ones(2))), fullgraph=True)


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a):
        self.a = a


def test_slots_read_and_store():
    def fn(x, obj):
        obj.b = obj.a + x
        return obj.b * 2

    compare(fn, lambda: (torch.ones(2), Slotted(torch.ones(2))), fullgraph=True)


def test_slots_on_object_made_in_frame():
    def fn(x):
        s = Slotted(x)
        s.b = 3
        return s, s.a + s.b

    compare(fn, fresh(torch.ones(2)), fullgraph=True)


def test_unset_slot_raises_like_eager():
    compare(lambda x, obj: obj.b + x, lambda: (torch.ones(2), Slotted(torch.ones(2))),
            graphs=0, breaks=1)


def test_dunder_class():
    def fn(x, obj):
        made = Temperature(x)
        return obj.__class__ is Temperature, made.__class__.scale(x)

    compare(fn, lambda: (torch.ones(2), Temperature(torch.ones(2))), fullgraph=True)


class SetterOnly:
    def __init__(self):
        self.log = []

    value = property(None, lambda self, v: self.log.append(v))


def test_property_without_getter_store_only():
    def fn(x, obj):
        obj.value = 3
        return x + len(obj.log)

    compare(fn, lambda: (torch.ones(2), SetterOnly()), fullgraph=True)

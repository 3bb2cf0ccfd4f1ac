"""Instances of user classes and dataclasses made inside the compiled frame: ``__init__``
traced, methods and attributes read from the new object, and the object rebuilt exactly
(class, attributes in order) when it leaves the frame."""
import dataclasses

import torch

from .object_helpers import compare, fresh


class Pair:
    def __init__(self, a, b=2):
        self.a = a
        self.b = b

    def total(self):
        return self.a + self.b


class Empty:
    pass


def test_construct_and_use_in_frame():
    def fn(x):
        p = Pair(x, b=3)
        return p.total() * 2

    compare(fn, fresh(torch.ones(2)), fullgraph=True)


def test_new_object_escapes_by_return():
    def fn(x):
        p = Pair(x + 1)
        p.extra = "tag"
        return p

    compare(fn, fresh(torch.ones(2)), fullgraph=True)


def test_new_object_escapes_twice_is_one_object():
    def fn(x, box):
        p = Pair(x * 2)
        box.held = p
        return p, box.held is p

    def check(x, box):
        p, same = fn(x, box)
        return p, same, box.held is p

    compare(check, lambda: (torch.ones(2), Empty()), fullgraph=True)


def test_object_without_init_and_attribute_order():
    def fn(x):
        e = Empty()
        e.z = 1
        e.a = x
        e.z = 2  # reassignment keeps z first, as in a dict
        return e

    compare(fn, fresh(torch.ones(2)), fullgraph=True)


def test_isinstance_and_type_of_new_object():
    def fn(x):
        p = Pair(x)
        return isinstance(p, Pair), type(p) is Pair, x + 1

    compare(fn, fresh(torch.ones(2)), fullgraph=True)


def test_init_with_wrong_arguments_raises_like_eager():
    def fn(x):
        return Pair()

    compare(fn, fresh(torch.ones(2)), graphs=0, breaks=1)


@dataclasses.dataclass
class Point:
    x: torch.Tensor
    y: int = 3
    tags: list = dataclasses.field(default_factory=list)

    def __post_init__(self):
        self.norm = self.x * self.y


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: torch.Tensor
    b: int = 1


def test_dataclass_constructed_in_frame():
    def fn(x):
        p = Point(x)
        p.tags.append("seen")
        return p.norm + p.y, p

    compare(fn, fresh(torch.ones(2)), fullgraph=True)


def test_frozen_dataclass_constructed_in_frame():
    def fn(x):
        f = Frozen(x * 2, b=4)
        return f.a + f.b, f

    compare(fn, fresh(torch.ones(2)), fullgraph=True)


class Counter:
    count = 0

    def __init__(self):
        self.start = type(self).count  # a class attribute read through the instance's type
        self.items = []

    def add(self, t):
        self.items.append(t)
        return len(self.items)


def test_new_object_mutated_through_method_then_returned():
    def fn(x):
        c = Counter()
        c.add(x)
        n = c.add(x + 1)
        return c, n

    compare(fn, fresh(torch.ones(2)), fullgraph=True)


def test_new_object_alive_across_a_graph_break():
    def fn(x):
        p = Pair(x + 1)
        print_free = str(p.b)  # constant work
        y = x.tolist()  # a graph break: p is rebuilt for the code after it
        return p.total() + len(y) + len(print_free)

    compare(fn, fresh(torch.ones(2)), graphs=2, breaks=1)


class Tagged:
    def __new__(cls, t, tag="x"):
        obj = super().__new__(cls)
        obj.tag = tag
        return obj

    def __init__(self, t, tag="x"):
        self.t = t * 2


class NewReturnsOther:
    def __new__(cls, t):
        return t * 2  # not an instance: __init__ is not called

    def __init__(self, t):
        raise RuntimeError("not called")


class ExplicitObjectNew:
    def __new__(cls):
        return object.__new__(cls)


def test_python_new_then_init():
    def fn(x):
        a = Tagged(x, tag="y")
        return a, NewReturnsOther(x), type(ExplicitObjectNew()) is ExplicitObjectNew

    compare(fn, fresh(torch.ones(2)), fullgraph=True)


class Factory:
    def __init__(self, t):
        self.t = t

    @classmethod
    def build(cls, t):
        return cls(t + 1)


class SubFactory(Factory):
    @classmethod
    def build(cls, t):
        made = super().build(t)
        made.sub = True
        return made


def test_super_in_classmethod_and_subclass_construction():
    compare(lambda x: SubFactory.build(x), fresh(torch.ones(2)), fullgraph=True)

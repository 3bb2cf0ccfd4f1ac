"""A corpus of ordinary Python-plus-tensor functions (issue #10): dicts and their views,
lists, lazy iterators, namedtuples, user classes, descriptors, modules, closures,
imports, pattern matching, generators and exceptions.

Each template below is a factory ``template(op) -> fn``; ``op`` is one of :data:`OPS`, a
small tensor function the program applies somewhere, so one template gives several
programs. :data:`PROGRAMS` lists them all as :class:`Program` (name, function, a
factory of fresh arguments). ``tests/corpus/test_corpus_programs.py`` compares each
compiled program with eager; ``benches/corpus_report.py`` counts the frames
``fullgraph=True`` refuses and the graph breaks ``explain()`` reports.
"""
from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import itertools
import math
import operator
import os
import typing
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import torch

from . import other_module

OPS: list[Callable] = [lambda t: t + 1, lambda t: t * 2, torch.relu, lambda t: t.sin() - 0.5]


@dataclass
class Program:
    name: str
    fn: Callable
    make_args: Callable[[], tuple]


_TEMPLATES: list[tuple[str, Callable, Callable]] = []


def _two_tensors():
    return torch.linspace(-1.0, 1.0, 6), torch.linspace(0.5, 2.0, 6)


def template(make_args: Callable = _two_tensors):
    def register(factory):
        _TEMPLATES.append((factory.__name__, factory, make_args))
        return factory
    return register


# ---------------------------------------------------------------- dicts and their views

@template()
def dict_keys_live(op):
    def fn(x, y):
        d = {"a": op(x)}
        keys = d.keys()
        d["b"] = y
        return "b" in keys, len(keys), d["a"] + d["b"]
    return fn


@template()
def dict_values_len(op):
    def fn(x, y):
        d = {1: x}
        values = d.values()
        d[2] = op(y)
        return len(values), sum(values)
    return fn


@template()
def dict_items_returned(op):
    def fn(x, y):
        d = {"x": op(x), "y": y}
        return d.items()
    return fn


@template()
def dict_iteration_order(op):
    def fn(x, y):
        d = {"b": op(x), "a": y}
        out = []
        for key, value in d.items():
            out.append((key, value * 2))
        return out
    return fn


@template(lambda: (torch.ones(4), {"w": torch.full((4,), 2.0), "b": torch.full((4,), 0.5)}))
def dict_argument_iteration(op):
    def fn(x, params):
        out = x
        for name, value in params.items():
            out = op(out) * value if name == "w" else out + value
        return out
    return fn


@template()
def dict_get_setdefault_pop(op):
    def fn(x, y):
        d = {"x": x}
        d.setdefault("y", op(y))
        a = d.get("z", x)
        b = d.pop("x")
        return a + b + d["y"], sorted(d)
    return fn


@template()
def dict_update_and_merge(op):
    def fn(x, y):
        d = {"a": x}
        d.update({"b": op(y)}, c=x * 3)
        e = {**d, "a": y}
        return e["a"] + e["b"] + e["c"], list(e)
    return fn


@template()
def dict_comprehension(op):
    def fn(x, y):
        d = {i: op(x) * i for i in range(3)}
        return {k: v + y for k, v in d.items() if k != 1}
    return fn


@template()
def dict_fromkeys(op):
    def fn(x, y):
        d = dict.fromkeys(["a", "b"], 0)
        d["a"] = op(x)
        return d["a"] + d["b"], list(d)
    return fn


@template()
def nested_dicts(op):
    def fn(x, y):
        cfg = {"inner": {"scale": 2.0, "tensors": [x, y]}}
        return op(cfg["inner"]["tensors"][0]) * cfg["inner"]["scale"] + cfg["inner"]["tensors"][1]
    return fn


@template(lambda: (torch.ones(3), {"a": 1.0}))
def dict_argument_mutated(op):
    def fn(x, d):
        d["b"] = 2.0
        d["a"] += 1.0
        return op(x) * d["a"] + d["b"]
    return fn


# ---------------------------------------------------------------- lists

@template()
def list_methods(op):
    def fn(x, y):
        lst = [x]
        lst.append(op(y))
        lst.insert(0, y * 2)
        last = lst.pop()
        lst.extend([last, last])
        return sum(lst), len(lst)
    return fn


@template()
def list_slicing_and_reverse(op):
    def fn(x, y):
        lst = [op(x), y, x * y, x - y]
        head, tail = lst[:2], lst[2:]
        return torch.stack(head[::-1] + list(reversed(tail)))
    return fn


@template()
def list_sorted_constants(op):
    def fn(x, y):
        sizes = sorted([3, 1, 2], reverse=True)
        return op(x) * sizes[0] + y * sizes.index(1), sizes
    return fn


@template(lambda: (torch.ones(3), [1.0, 2.0]))
def list_argument_mutated(op):
    def fn(x, lst):
        lst.append(3.0)
        lst[0] = 5.0
        return op(x) * sum(lst)
    return fn


@template()
def list_comprehension_filtered(op):
    def fn(x, y):
        return [op(t) for t in (x, y, x + y) if t is not y]
    return fn


@template()
def enumerate_and_zip(op):
    def fn(x, y):
        out = x
        for i, (a, b) in enumerate(zip([x, y], [y, x]), start=1):
            out = out + op(a) * b * i
        return out
    return fn


@template()
def star_unpacking(op):
    def fn(x, y):
        first, *rest = [op(x), y, x + y]
        a, (b, c) = x, (y, first)
        return first + sum(rest) + a + b + c
    return fn


@template()
def any_all_min_max(op):
    def fn(x, y):
        flags = [True, False, True]
        return op(x) * max(1, 2) + min(3.0, 4.0), any(flags), all(flags)
    return fn


# ---------------------------------------------------------------- lazy iterators

@template()
def map_extends_list_it_reads(op):
    def fn(x, y):
        lst = [1, 2]

        def grow(v):
            return len(lst) + v

        lst.extend(map(grow, [10, 20]))
        return op(x) * lst[-1], lst
    return fn


@template()
def zip_short_with_map(op):
    def fn(x, y):
        calls = []

        def record(v):
            calls.append(v)
            return v

        pairs = list(zip([op(x)], map(record, [1, 2, 3])))
        return pairs[0][0] * pairs[0][1], len(calls)
    return fn


@template()
def filter_lazy_nonlocal(op):
    def fn(x, y):
        seen = 0

        def keep(v):
            nonlocal seen
            seen += 1
            return v > 1

        it = filter(keep, [1, 2, 3])
        first = next(it)
        return op(x) * first, seen
    return fn


@template()
def iter_next_default(op):
    def fn(x, y):
        it = iter([op(x), y])
        a = next(it)
        b = next(it)
        c = next(it, None)
        return a + b, c is None
    return fn


@template()
def generator_expression_sum(op):
    def fn(x, y):
        return sum(op(t) for t in (x, y))
    return fn


@template()
def itertools_chain_islice(op):
    def fn(x, y):
        items = list(itertools.islice(itertools.chain([op(x)], [y, x]), 2))
        return items[0] + items[1]
    return fn


@template()
def itertools_product_repeat(op):
    def fn(x, y):
        out = op(x)
        for a, b in itertools.product([1, 2], repeat=2):
            out = out + a * b
        return out + sum(itertools.repeat(y, 2))
    return fn


@template()
def itertools_accumulate_count(op):
    def fn(x, y):
        totals = list(itertools.accumulate([1, 2, 3]))
        counter = itertools.count(5)
        return op(x) * totals[-1] + next(counter) + y, totals
    return fn


@template()
def itertools_starmap_zip_longest(op):
    def fn(x, y):
        prods = list(itertools.starmap(operator.mul, [(2, 3), (4, 5)]))
        pairs = list(itertools.zip_longest([1, 2, 3], [4], fillvalue=0))
        return op(x) * prods[0] + y * pairs[-1][1], pairs
    return fn


@template()
def functools_reduce(op):
    def fn(x, y):
        return functools.reduce(lambda a, b: a + op(b), [x, y, x], y)
    return fn


# ---------------------------------------------------------------- namedtuples

Point = collections.namedtuple("Point", "x y")


class Pair(typing.NamedTuple):
    left: Any
    right: Any

    def total(self):
        return self.left + self.right

    def __add__(self, other):
        return Pair(self.left + other.left, self.right + other.right)


@template()
def namedtuple_fields(op):
    def fn(x, y):
        p = Point(op(x), y)
        q = p._replace(y=p.x)
        return q.x + q.y, p._asdict()["y"] * 2
    return fn


@template()
def namedtuple_equality(op):
    def fn(x, y):
        a = op(x)
        return Point(a, y) == Point(a, y), Point(1, 2) != Point(1, 3)
    return fn


@template()
def namedtuple_own_add(op):
    def fn(x, y):
        s = Pair(op(x), y) + Pair(y, x)
        return s.total(), type(s).__name__
    return fn


@template()
def namedtuple_unpack(op):
    def fn(x, y):
        left, right = Pair(op(x), y)
        return left * right
    return fn


@template()
def torch_return_types(op):
    def fn(x, y):
        result = torch.max(torch.stack([op(x), y]), dim=0)
        return result.values + result.indices
    return fn


# ---------------------------------------------------------------- user classes

class Scaler:
    def __init__(self, factor):
        self.factor = factor

    def apply(self, t):
        return t * self.factor


class Base:
    def __init__(self, bias):
        self.bias = bias

    def run(self, t):
        return t + self.bias


class Derived(Base):
    def __init__(self, bias, gain):
        super().__init__(bias)
        self.gain = gain

    def run(self, t):
        return super().run(t) * self.gain


class WithProperty:
    def __init__(self, t):
        self._t = t

    @property
    def doubled(self):
        return self._t * 2

    @classmethod
    def make(cls, t):
        return cls(t)

    @staticmethod
    def helper(t):
        return t - 1


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b


class Vector:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        return Vector(self.t + other.t)

    def __mul__(self, k):
        return Vector(self.t * k)

    def __len__(self):
        return 3

    def __getitem__(self, i):
        return self.t[i]

    def __call__(self, s):
        return self.t * s


@dataclass
class Config:
    scale: float = 2.0
    names: list = dataclasses.field(default_factory=lambda: ["a"])


@dataclass(frozen=True)
class FrozenConfig:
    scale: float
    shift: float = 0.5


class Color(enum.Enum):
    RED = 1
    BLUE = 2


@template()
def user_class_constructed(op):
    def fn(x, y):
        s = Scaler(3.0)
        return s.apply(op(x)) + y
    return fn


@template(lambda: (torch.ones(3), Scaler(2.0)))
def user_object_argument(op):
    def fn(x, s):
        s.factor = s.factor + 1
        return op(s.apply(x))
    return fn


@template()
def super_chain(op):
    def fn(x, y):
        d = Derived(op(y), 2.0)
        return d.run(x)
    return fn


@template()
def property_classmethod_staticmethod(op):
    def fn(x, y):
        w = WithProperty.make(op(x))
        return w.doubled + WithProperty.helper(y)
    return fn


@template()
def slots_members(op):
    def fn(x, y):
        s = Slotted(op(x), y)
        s.b = s.b * 2
        return s.a + s.b
    return fn


@template()
def dunder_methods(op):
    def fn(x, y):
        v = (Vector(op(x)) + Vector(y)) * 2
        return v.t, len(v), v[0], v(3.0)
    return fn


@template()
def dataclass_built(op):
    def fn(x, y):
        cfg = Config(scale=3.0)
        frozen = FrozenConfig(2.0)
        return op(x) * cfg.scale + y * frozen.scale + frozen.shift, cfg.names
    return fn


@template(lambda: (torch.ones(3), Config()))
def dataclass_argument(op):
    def fn(x, cfg):
        return op(x) * cfg.scale, dataclasses.asdict(cfg)["names"]
    return fn


@template()
def isinstance_and_type(op):
    def fn(x, y):
        d = Derived(1.0, 2.0)
        return op(x) * float(isinstance(d, Base)), type(d).__name__, issubclass(Derived, Base)
    return fn


@template()
def hasattr_getattr_default(op):
    def fn(x, y):
        s = Scaler(2.0)
        found = hasattr(s, "factor"), hasattr(s, "missing"), hasattr([], "append"), hasattr({}, "nope")
        return op(x) * getattr(s, "factor") + getattr(s, "missing", 0.0), found
    return fn


@template(lambda: (torch.ones(3), [1.0], {"a": 2.0}))
def getattr_default_on_containers(op):
    def fn(x, lst, d):
        return op(x) + getattr(lst, "scale", 1.0) + getattr(d, "scale", 2.0)
    return fn


@template()
def callable_checks(op):
    def fn(x, y):
        v = Vector(x)
        return op(x), callable(v), callable(Scaler(1.0)), callable(len), callable(3)
    return fn


@template()
def class_attribute_access(op):
    def fn(x, y):
        return op(x) * Color.BLUE.value + y * len(Color), Color.RED.name
    return fn


@template()
def object_escapes(op):
    def fn(x, y):
        s = Scaler(op(x))
        s.extra = y
        return s
    return fn


@template()
def weakref_call(op):
    def fn(x, y):
        s = Scaler(2.0)
        ref = weakref.ref(s)
        return op(x) * ref().factor + y
    return fn


@template()
def other_module_functions(op):
    def fn(x, y):
        return other_module.scaled(op(x)) + other_module.shifted(y, "b") + other_module.uses_helper(x)
    return fn


@template()
def other_module_class(op):
    def fn(x, y):
        acc = other_module.Accumulator(op(x))
        acc.add(y).add(x)
        return acc.total
    return fn


# ---------------------------------------------------------------- functions and closures

def _logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@_logged
def _decorated(t, scale=2.0):
    return t * scale


@template()
def wraps_decorator(op):
    def fn(x, y):
        return _decorated(op(x), scale=3.0) + _decorated(y)
    return fn


@template()
def closures_and_nonlocal(op):
    def fn(x, y):
        count = 0

        def bump(t):
            nonlocal count
            count += 1
            return op(t) + count

        return bump(x) + bump(y), count
    return fn


@template()
def partial_and_lambda(op):
    def fn(x, y):
        mul = functools.partial(torch.mul, other=2.0)
        add = lambda a, b=1.0: a + b  # noqa: E731
        return add(mul(op(x)), y)
    return fn


@template()
def varargs_forwarding(op):
    def inner(a, b, *rest, scale=1.0, **extra):
        return (a + b + sum(rest)) * scale + extra.get("shift", 0.0)

    def fn(x, y):
        args = (op(x), y, x)
        return inner(*args, scale=2.0, **{"shift": 1.0})
    return fn


@template()
def keyword_only_and_defaults(op):
    def inner(t, /, k=2, *, m=3):
        return t * k + m

    def fn(x, y):
        return inner(op(x)) + inner(y, 1, m=0)
    return fn


@template()
def recursion_inlined(op):
    def power(t, n):
        return t if n == 1 else t * power(t, n - 1)

    def fn(x, y):
        return power(op(x), 3) + y
    return fn


# ---------------------------------------------------------------- sets and strings

@template()
def sets_and_frozensets(op):
    def fn(x, y):
        a = {1, 2, 3}
        b = frozenset([2, 3, 4])
        both = a & b
        return op(x) * len(both) + y * (1 in a), sorted(a | b), 4 in b
    return fn


@template()
def string_methods(op):
    def fn(x, y):
        name = "  Layer_Norm ".strip().lower()
        parts = name.split("_")
        label = "-".join(parts).upper()
        return op(x) * len(label) + y, label, f"{label}:{len(parts)}", name.startswith("layer")
    return fn


@template()
def string_formatting(op):
    def fn(x, y):
        key = "w{}".format(2)
        table = {"w2": 3.0}
        return op(x) * table[key] + y, "%s=%d" % ("n", 4)
    return fn


# ---------------------------------------------------------------- modules

class TwoLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 6)
        self.act = torch.nn.Tanh()
        self.fc2 = torch.nn.Linear(6, 6)

    def forward(self, t):
        return self.fc2(self.act(self.fc1(t)))


class CallOverride(torch.nn.Module):
    def forward(self, t):
        return t + 1

    def __call__(self, t):
        return super().__call__(t) * 10


class MethodShadowsSubmodule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.act = torch.nn.ReLU()

    def act(self, t):  # noqa: F811 - the class attribute is what Python finds first
        return t * 7

    def forward(self, t):
        return self.act(t)


class Blocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(6, 6) for _ in range(2)])
        self.heads = torch.nn.ModuleDict({"a": torch.nn.Linear(6, 2), "b": torch.nn.Linear(6, 2)})

    def forward(self, t):
        for layer in self.layers:
            t = torch.relu(layer(t))
        return {name: head(t) for name, head in self.heads.items()}


torch.manual_seed(0)
_MODULES = {"two": TwoLayer(), "override": CallOverride(), "shadow": MethodShadowsSubmodule(),
            "blocks": Blocks()}


@template()
def module_forward(op):
    def fn(x, y):
        return _MODULES["two"](op(x)) + y
    return fn


@template()
def module_call_override(op):
    def fn(x, y):
        return _MODULES["override"](op(x))
    return fn


@template()
def module_method_shadows_submodule(op):
    def fn(x, y):
        return _MODULES["shadow"](op(x))
    return fn


@template()
def module_lists_and_dicts(op):
    def fn(x, y):
        out = _MODULES["blocks"](op(x))
        return out["a"] + out["b"]
    return fn


@template()
def module_named_children(op):
    def fn(x, y):
        names = [name for name, _ in _MODULES["two"].named_children()]
        return op(x) * len(names), names
    return fn


@template()
def module_named_modules(op):
    def fn(x, y):
        count = sum(1 for _ in _MODULES["blocks"].named_modules())
        return op(x) * count
    return fn


@template()
def module_parameters_sum(op):
    def fn(x, y):
        total = sum(p.sum() for p in _MODULES["two"].parameters())
        return op(x) + total
    return fn


@template()
def sequential_indexing(op):
    seq = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.ReLU(), torch.nn.Linear(6, 6))

    def fn(x, y):
        return seq[1:](op(x)) + seq[0](y)
    return fn


# ---------------------------------------------------------------- opcodes and statements

@template()
def import_inside(op):
    def fn(x, y):
        import math as m
        from os import path
        return op(x) * m.pi + y, path.sep
    return fn


@template()
def match_statement(op):
    def fn(x, y):
        command = ("scale", 2.0)
        match command:
            case ("scale", k):
                out = op(x) * k
            case ("shift", k):
                out = op(x) + k
            case _:
                out = x
        return out + y
    return fn


@template()
def match_mapping_and_class(op):
    def fn(x, y):
        spec = {"kind": "add", "value": 3}
        match spec:
            case {"kind": "add", "value": int(v)}:
                out = op(x) + v
            case _:
                out = y
        match Point(1, 2):
            case Point(x=1, y=yy):
                out = out * yy
        return out
    return fn


@template()
def generator_function(op):
    def gen(t, n):
        for i in range(n):
            yield t * i

    def fn(x, y):
        return sum(gen(op(x), 3)) + y
    return fn


@template()
def yield_from_generator(op):
    def inner(t):
        yield t
        yield t * 2

    def outer(t):
        yield from inner(t)
        yield t * 3

    def fn(x, y):
        return torch.stack(list(outer(op(x)))).sum(0) + y
    return fn


@template()
def try_except_in_frame(op):
    def fn(x, y):
        try:
            raise ValueError("no")
        except ValueError:
            out = op(x)
        return out + y
    return fn


@template()
def try_finally_in_frame(op):
    def fn(x, y):
        log = []
        try:
            out = op(x) + y
        finally:
            log.append("done")
        return out, log
    return fn


@template()
def with_no_grad(op):
    def fn(x, y):
        with torch.no_grad():
            out = op(x) * 2
        return out + y
    return fn


@template()
def assert_and_del(op):
    def fn(x, y):
        tmp = op(x)
        assert tmp.shape == y.shape, "shapes"
        out = tmp + y
        del tmp
        return out
    return fn


@template()
def global_constant_and_math(op):
    def fn(x, y):
        return op(x) * math.sqrt(4.0) + y * math.floor(2.7) + math.cos(0.0)
    return fn


@template()
def os_environ_read(op):
    def fn(x, y):
        scale = float(os.environ.get("FASTDYNAMO_CORPUS_SCALE", "2.0"))
        return op(x) * scale + y
    return fn


@template()
def tensor_tolist_loop(op):
    def fn(x, y):
        total = 0.0
        for v in op(x).tolist():
            total += v
        return y * total
    return fn


@template()
def tensor_item_branch(op):
    def fn(x, y):
        if op(x).sum().item() > 0:
            return y * 2
        return y - 2
    return fn


@template()
def is_compiling_branch(op):
    def fn(x, y):
        if torch.compiler.is_compiling():
            return op(x) + y
        return op(x) + y
    return fn


@template()
def tensor_shapes_as_python(op):
    def fn(x, y):
        n = x.shape[0]
        view = op(x).reshape(2, n // 2)
        return view.sum(dim=1) * y.numel() + len(x.size())
    return fn


@template()
def operator_module(op):
    def fn(x, y):
        getter = operator.itemgetter(1)
        return operator.add(op(x), y) * getter([1, 2, 3]), operator.attrgetter("shape")(x)
    return fn


PROGRAMS: list[Program] = [
    Program(f"{name}[{i}]", factory(op), make_args)
    for name, factory, make_args in _TEMPLATES
    for i, op in enumerate(OPS)
]

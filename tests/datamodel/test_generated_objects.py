"""Property test: generated programs over user objects, descriptors, ``super()``,
dataclasses, proxies, a class with its own ``__getattribute__`` (a Hugging Face style
``attribute_map``), modules and function wrappers give eager's results compiled
(values, types, the state of every argument, exceptions), and keep giving them after
the arguments change between calls (an attribute added or removed, ``forward`` patched
on a module), which must recompile rather than reuse a stale entry. Every program runs
in one graph (``fullgraph=True``; a recompile for the change may add a second) except
those with a statement in ``BREAKING``, which must break for the reason named there.
``--hypothesis-profile=long`` runs thousands."""
from __future__ import annotations

import collections
import dataclasses
import functools

import torch
from hypothesis import given
from hypothesis import strategies as st

import fastdynamo
from fastdynamo.convert_frame import Recorder

from .object_helpers import build_program, programs_with_a_change, same


class Base:
    scale = 2

    def __init__(self, t):
        self.t = t

    def value(self):
        return self.t * self.scale

    @property
    def doubled(self):
        return self.t * 2

    @doubled.setter
    def doubled(self, v):
        self.t = v / 2

    @classmethod
    def make(cls, t):
        return cls(t)


class Child(Base):
    def value(self):
        return super().value() + 1

    def __getattr__(self, name):
        return len(name)


class Slotted:
    __slots__ = ("u", "w")

    def __init__(self, u):
        self.u = u


class Proxy:
    def __init__(self, target):
        object.__setattr__(self, "_target", target)

    def __getattr__(self, name):
        return getattr(self._target, name)

    def __setattr__(self, name, value):
        setattr(self._target, name, value)


class Mapped:
    """Attribute lookup through an ``attribute_map``, as Hugging Face configs do."""

    attribute_map = {"hidden": "n"}

    def __init__(self, n):
        self.n = n

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    def __getattr__(self, key):
        if key.startswith("auto_"):
            return len(key)
        raise AttributeError(key)


@dataclasses.dataclass
class Point:
    x: torch.Tensor
    k: int = 2


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.act = torch.nn.ReLU()

    def forward(self, t):
        return self.act(t) + 1

    def __call__(self, t):
        return super().__call__(t) * 2


@dataclasses.dataclass
class Record(collections.OrderedDict):
    """A small Hugging Face ``ModelOutput``: fields mirrored into the dict when set."""

    first: torch.Tensor | None = None
    hidden: torch.Tensor | None = None

    def __post_init__(self):
        for field in dataclasses.fields(self):
            if self.__dict__.get(field.name) is not None:
                self[field.name] = self.__dict__[field.name]

    def __setattr__(self, name, value):
        if name in {f.name for f in dataclasses.fields(self)} and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __getitem__(self, k):
        return dict(self.items())[k] if isinstance(k, str) else self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


class Bag(dict):
    pass


def twice(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) * 2
    return wrapper


@twice
def shifted(t, by=1):
    return t + by


NAMESPACE = {"torch": torch, "Base": Base, "Child": Child, "Slotted": Slotted, "Proxy": Proxy,
             "Point": Point, "shifted": shifted, "twice": twice, "Record": Record, "Bag": Bag,
             "Mapped": Mapped}

# Over: `a` (the running tensor), `obj` (a Child argument), `s` (a Slotted argument),
# `px` (a Proxy of obj), `m` (a Net argument), `rec` (a Record argument), `cf` (a Mapped
# argument), `log` (a list returned). {c}: 1..3.
STATEMENTS = [
    "a = a + obj.value() + obj.doubled",
    "obj.doubled = a + {c}\na = a + obj.t",
    "a = a + obj.missing_{c} + getattr(obj, 'scale', 0)",
    "a = a + hasattr(obj, 'extra') + hasattr(s, 'w') + callable(obj) + callable(m)",
    "c = Child.make(a)\nc.extra = {c}\nlog.append(c)\na = a + c.value()",
    "p = Point(a, k={c})\na = a + p.x * p.k\nlog.append(p)",
    "s.w = a * {c}\na = a + s.u + s.w",
    "px.t = a + {c}\na = a + px.t + obj.t",
    "a = m(a) + m.act(a)",
    "a = shifted(a, by={c}) + twice(lambda t: t - 1)(a)",
    "a = a + isinstance(obj, Base) + (type(obj) is Child) + (obj.__class__ is Child)",
    "b = Base(a)\nb.t = b.t + {c}\nlog.append(b.t)",
    "r = Record(a * {c}, hidden=a)\na = a + r[0] + r['hidden'] + len(r)\nlog.append(r)",
    "r = Record(a)\nr.hidden = a + {c}\nr['note'] = {c}\na = a + r.to_tuple()[-1] + ('note' in r)\nlog.append(r)",
    "d = Bag(k=a)\nd['n'] = {c}\nd.tag = {c}\na = a + d['k'] * len(d) + sum(d.values())\nlog.append(d)",
    "a = a + rec[0] + rec['first'] * len(rec) + ('hidden' in rec) + rec.first",
    "a = a + sum(rec.to_tuple()) + len(list(rec.keys()))\nlog.append(rec)",
    "rec['first'] = a * {c}\na = a + rec.first",
    "a = a * cf.hidden + cf.auto_{c} + getattr(cf, 'nope', {c}) + hasattr(cf, 'extra')",
    "k = Mapped(a)\na = a + k.hidden + object.__getattribute__(cf, 'n')\nlog.append(k)",
]
RETURNS = ["return a, obj, s, log", "return a, log, obj.t", "return [a, obj, s]", "return a, rec"]
# Statements that break the graph, and what the break's reason says: changing the items
# of a dict subclass from outside the frame is not modelled.
BREAKING = {"rec['first'] = ": "from outside the frame"}

# Changes made to the arguments between the first and the second compiled call.
CHANGES = ["pass", "obj.extra = 5", "del obj.t", "m.forward = lambda t: t * 7",
           "s.w = 1.0", "obj.missing_1 = 100", "obj.value = lambda: 3", "rec.hidden = rec.first * 2",
           "cf.n = 2.5", "cf.extra = 1", "cf.attribute_map = {'hidden': 'extra'}\ncf.extra = -1.0"]
# compiled once: the lambdas of both runs share their code (compared by code and cells)
_CHANGE_CODE = {change: compile(change, "<change>", "exec") for change in CHANGES}


def _arguments(seed, change):
    torch.manual_seed(seed)
    obj = Child(torch.randn(3))
    args = [torch.randn(3), obj, Slotted(torch.randn(3)), Proxy(obj), Net(), Record(torch.randn(3)), Mapped(1.5)]
    if change:
        exec(_CHANGE_CODE[change], {}, {"obj": obj, "s": args[2], "m": args[4], "rec": args[5],  # noqa: S102
                                         "cf": args[6]})
    return args


def _outcome(fn, args):
    try:
        return fn(*args), None
    except Exception as err:  # noqa: BLE001 - compared with the other run's
        return None, (type(err), str(err))


def _check(compiled, prog, seed, change, source):
    args_eager, args_compiled = _arguments(seed, change), _arguments(seed, change)
    expected, expected_error = _outcome(prog, args_eager)
    actual, actual_error = _outcome(compiled, args_compiled)
    assert actual_error == expected_error, source
    assert same(actual, expected), f"{actual!r} != {expected!r}\n{source}"
    assert same(args_compiled, args_eager), f"arguments differ\n{source}"


@given(programs_with_a_change("x, obj, s, px, m, rec, cf", STATEMENTS, RETURNS, CHANGES, most=4),
       st.integers(0, 2**16))
def test_generated_object_program_matches_eager(program, seed):
    source, change = program
    prog = build_program(source, NAMESPACE, "<generated-objects>")
    reason = next((why for text, why in BREAKING.items() if text in source), None)
    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.compile(prog, backend="eager", fullgraph=reason is None, _recorder=recorder)
    _check(compiled, prog, seed, None, source)
    breaks = [str(b) for b in recorder.breaks]
    if reason is None:
        assert (len(recorder.captures), breaks) == (1, []), source
    else:
        assert breaks and all(reason in b for b in breaks), (breaks, source)
        assert recorder.captures, source  # every statement has a tensor op
    _check(compiled, prog, seed + 1, change, f"{source}after: {change}")
    if reason is None:  # the same graph reused, or one recompile for the change
        assert len(recorder.captures) in (1, 2) and not recorder.breaks, (source, change)
    fastdynamo.reset()

"""Property test (issue #10): generated programs built from Python's data model — dicts
and their views mutated between reads, lazy iterators whose functions have side effects,
user classes with dunders, properties and ``super()``, namedtuples, modules that override
``__call__``, pattern matching, exceptions caught in the frame — give eager's results
compiled: return values and their types, the state of every argument afterwards,
exceptions, and again on a second call with a reordered dict and other values.

Every program runs in one graph (compiled with ``fullgraph=True``; the second call may
recompile once); a wrong value, type, side effect or exception, a graph break or a frame
left to run as Python fails. ``--hypothesis-profile=long`` runs thousands.
"""
from __future__ import annotations

import collections
import textwrap
import typing

import torch
from corpus.compare import same
from hypothesis import given
from hypothesis import strategies as st

import fastdynamo
from fastdynamo.convert_frame import Recorder

from .object_helpers import build_program


class Obj:
    def __init__(self, n):
        self.n = n

    def __call__(self, t):
        return t * self.n

    @property
    def double(self):
        return self.n * 2

    @classmethod
    def make(cls, n):
        return cls(n)

    @staticmethod
    def half(t):
        return t * 0.5


class Sub(Obj):
    def __init__(self, n):
        super().__init__(n + 1)

    def __add__(self, other):
        return Sub(self.n + other.n)


NT = collections.namedtuple("NT", "x y")


class TNT(typing.NamedTuple):
    x: typing.Any
    y: typing.Any

    def total(self):
        return self.x + self.y

    def __add__(self, other):
        return TNT(self.x + other.x, self.y + other.y)


class CallOverride(torch.nn.Module):
    def forward(self, t):
        return t + 1

    def __call__(self, t):
        return super().__call__(t) * 2


class Shadow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.act = torch.nn.ReLU()

    def act(self, t):  # noqa: F811 - the class attribute wins over the submodule
        return t * 3

    def forward(self, t):
        return self.act(t)


NAMESPACE = {"torch": torch, "Obj": Obj, "Sub": Sub, "NT": NT, "TNT": TNT,
             "CALL_OVERRIDE": CallOverride(), "SHADOW": Shadow()}

# Statements over: `a` (the running tensor), `y` (a tensor), `d` (a dict argument of
# floats), `lst` (a list argument of ints), `obj` (an Obj argument), `log` (a list the
# program returns). {c} is a small int.
STATEMENTS = [
    # dicts and views
    "keys = d.keys()\nd['k{c}'] = {c}.0\na = a + len(keys) + ('k{c}' in keys)",
    "values = d.values()\nd['v'] = 1.5\na = a + len(values) + sum(values)",
    "items = d.items()\nd.pop('v', None)\na = a + len(items)",
    "for key, value in d.items():\n    a = a * value + len(key)",
    "e = {{k: v * {c} for k, v in d.items() if k != 'p'}}\na = a + sum(e.values())",
    "d.setdefault('s', {c}.0)\na = a + d.get('s', 0.0) + d.get('missing', 1.0)",
    "d.update({{'u': 2.0}}, w={c}.0)\na = a + d['w']",
    # lazy iterators with effects
    "lst.extend(map(lambda v: len(lst) + v, [1, 2]))\na = a + lst[-1]",
    "pairs = list(zip([a], map(lambda v: log.append(v) or v, [1, 2, 3])))\na = pairs[0][0] + len(log)",
    "it = filter(lambda v: log.append(v) or v > {c}, lst)\na = a + next(it, 0) + len(log)",
    "a = a + sum(map(lambda t: t * {c}, [a, y]))",
    "e = dict(enumerate([a, y], start={c}))\na = e[{c}] + e[{c} + 1]",
    "it = iter(lst)\nfirst = next(it, 0)\nlst.append({c})\na = a + first + sum(it)",
    # namedtuples
    "p = NT(a, y)\na = p.x + p.y * (NT(a, y) == NT(a, y))",
    "p = TNT(a, y) + TNT(y, a)\na = p.total()",
    "p = NT({c}, a)._replace(x=2)\na = p.y * p.x",
    # user objects and classes
    "o = Sub({c})\na = a * (o + Sub(1)).n + o.double",
    "obj.n = obj.n + {c}\na = a * obj.n",
    "a = obj(a) + Obj.make({c}).half(y)",
    "a = a + callable(obj) + callable({c}) + hasattr(obj, 'n') + hasattr(obj, 'zz')",
    "a = a + getattr(lst, 'missing', {c}) + getattr(obj, 'n', 0)",
    "a = a + isinstance(obj, Obj) + isinstance(Sub(1), Obj) * {c}",
    # sorting by key functions (called by the trace, effects included)
    "order = sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))\na = a * order[0][1] + len(order)",
    "a = a + sorted(lst + [{c}], key=lambda v: log.append(v) or v % 3, reverse=True)[0]",
    # modules
    "a = CALL_OVERRIDE(a)",
    "a = SHADOW(a)",
    # sets, strings
    "s = {{1, 2}} | {{{c}}}\na = a + len(s) + ({c} in s)",
    "name = '-'.join(['w', str({c})]).upper()\na = a + len(name)",
    # control flow
    "match lst:\n    case [first, *rest]:\n        a = a + first + len(rest)\n    case _:\n        a = a - 1",
    "try:\n    raise ValueError('x')\nexcept ValueError:\n    a = a + {c}",
    "log.append(len(lst))\nlst.insert(0, {c})",
]
RETURNS = ["return a, d, lst, obj.n, log", "return (a, list(d.items()), log)",
           "return {{'a': a, 'keys': d.keys(), 'n': obj.n}}", "return a, d.values(), lst"]


@st.composite
def programs(draw):
    body = ["log = []"]
    for _ in range(draw(st.integers(1, 5))):
        template = draw(st.sampled_from(STATEMENTS))
        body.append(template.format(c=draw(st.integers(1, 3))))
    body.append(draw(st.sampled_from(RETURNS)).format())
    source = "def prog(x, y, d, lst, obj):\n    a = x * 2\n" + textwrap.indent("\n".join(body), "    ") + "\n"
    dicts = draw(st.permutations([("p", 1.0), ("q", 2.0), ("r", 0.5)]))
    lists = draw(st.lists(st.integers(0, 4), max_size=4))
    return source, dict(dicts), lists


def _arguments(seed, d, lst):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(3, generator=gen), torch.randn(3, generator=gen), dict(d), list(lst), Obj(2))


def _outcome(fn, args):
    try:
        return fn(*args), None
    except Exception as err:  # noqa: BLE001 - compared with the other run's
        return None, (type(err), str(err))


def _check(compiled, prog, args_eager, args_compiled, source):
    expected, expected_error = _outcome(prog, args_eager)
    actual, actual_error = _outcome(compiled, args_compiled)
    assert actual_error == expected_error, source
    assert same(actual, expected), f"{actual!r} != {expected!r}\n{source}"
    assert same(list(args_compiled), list(args_eager)), f"arguments differ\n{source}"


@given(programs(), st.integers(0, 2**16))
def test_generated_datamodel_program_matches_eager(program, seed):
    source, d, lst = program
    prog = build_program(source, NAMESPACE, "<generated-datamodel>")
    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.compile(prog, backend="eager", fullgraph=True, _recorder=recorder)
    _check(compiled, prog, _arguments(seed, d, lst), _arguments(seed, d, lst), source)
    assert (len(recorder.captures), recorder.breaks) == (1, []), source
    # Again, with the dict's keys reordered and other values: a cached entry must not
    # reuse what the first call's order or values decided.
    reordered = dict(reversed(list(d.items())))
    more = lst + [1]
    _check(compiled, prog, _arguments(seed + 1, reordered, more), _arguments(seed + 1, reordered, more),
           source)
    assert len(recorder.captures) in (1, 2) and not recorder.breaks, source  # reused, or one recompile
    fastdynamo.reset()

"""Property test (issues #10, #12): generated programs that call weak references from
outside the frame (live, to another object, dead) and made in it, read a function's
introspection (``__name__``, ``__qualname__``, ``__defaults__``, ``__kwdefaults__``,
``__code__.co_*``, ``inspect.signature(fn).parameters``) and compare identities
(``id(a) == id(b)``, ``a is b``), called in a generated sequence in which the referent,
the function and the aliasing of two arguments change (``other`` is ``obj`` or a distinct
equal object). Every call gives eager's value, type, exception and object state; the
first call compiles, a configuration repeated at once (or, without breaks, seen before)
adds no graph, and a program made only of statements captured whole runs under
``fullgraph=True`` with at most one graph per call and no break.
``--hypothesis-profile=long`` runs thousands."""
from __future__ import annotations

import functools
import inspect
import weakref

import torch
from examples_budget import share_of_profile
from hypothesis import given
from hypothesis import strategies as st

import fastdynamo

from .call_sequences import assert_graph_counts, run_sequence, with_repeats
from .object_helpers import build_program, programs_with_break_tags


class Box:
    def __init__(self, n):
        self.n = n
        self.t = torch.arange(3.0)


def plain(a):
    return a * 2


def with_defaults(a, b=2, *, c=3):
    return a + b * c


def keyword_only(a, *, c=5, d=1):
    return a - c + d


@functools.wraps(plain)
def wrapped(*args, **kwargs):
    return plain(*args, **kwargs) + 1


FUNCTIONS = [plain, with_defaults, keyword_only, wrapped]


class Objects:
    """The world of one run: ``first`` and a distinct equal ``second``, references to
    each, and a reference whose referent is gone."""

    def __init__(self):
        self.first, self.second = Box(2), Box(2)
        self.refs = {"first": weakref.ref(self.first), "second": weakref.ref(self.second)}
        gone = Box(0)
        self.refs["dead"] = weakref.ref(gone)
        del gone  # freed at once (no cycle): no gc.collect(), which costs ~0.1 s a world
        assert self.refs["dead"]() is None

    def reset(self):
        for box in (self.first, self.second):
            box.n, box.t = 2, torch.arange(3.0)

    def state(self):
        return [vars(self.first), vars(self.second)]


# (statement, what breaks it). Over: `a` (the running tensor), `obj` (the first object),
# `other` (obj itself or the second), `r` (a weakref to either, or dead), `fn` (one of
# FUNCTIONS). {c}: 1..3. `inspect.signature` of a function with `__wrapped__` breaks (it
# follows the chain); comparing two weak references breaks always.
NOTHING, WRAPPED, ALWAYS = frozenset(), frozenset({"wrapped"}), frozenset({"always"})
STATEMENTS = [
    ("box = r()\nif box is None:\n    a = a - {c}\nelse:\n    a = a + box.t * box.n", NOTHING),
    ("a = a + (r() is None) * {c} + (r() is not None)", NOTHING),
    ("a = a + getattr(r(), 'n', -{c})", NOTHING),
    ("a = a + (id(r()) == id(obj)) + (id(r()) == id(None))", NOTHING),
    ("a = a + (id(obj) == id(other)) * {c} + (id(other) != id(obj))", NOTHING),
    ("wr = weakref.ref(other)\na = a + wr().n + (wr() is not None)", NOTHING),
    ("a = a + weakref.ref(obj)().t * {c}", NOTHING),
    ("a = a + len(fn.__name__) + len(fn.__qualname__) * {c}", NOTHING),
    ("a = a + fn.__code__.co_argcount + fn.__code__.co_kwonlyargcount + len(fn.__code__.co_varnames)", NOTHING),
    ("a = a + (fn.__defaults__ or (0,))[0] + (fn.__defaults__ is None)", NOTHING),
    ("a = a + (fn.__kwdefaults__ or {{'c': 0}})['c']", NOTHING),
    ("a = a + len(inspect.signature(fn).parameters) + ('b' in inspect.signature(fn).parameters)", WRAPPED),
    ("a = a + fn(a) + hasattr(fn, '__wrapped__') * {c}", NOTHING),
    ("a = a + (fn is plain) + (id(fn) == id(with_defaults)) * {c}", NOTHING),
    ("other.n = other.n + {c}\na = a + obj.n", NOTHING),
    ("obj.t = a * {c}\na = a + other.t", NOTHING),
    ("a = a + (obj is other) * {c} + (obj == other)", NOTHING),
    ("a = a + (r() is obj) + (r() is not other)", NOTHING),
    ("if obj is other:\n    a = a - {c}\nother.n = 7\na = a + obj.n", NOTHING),
    ("a = a + (weakref.ref(obj) == r) * {c}", ALWAYS),
]
RETURNS = ["return a", "return a, obj.n, other.n", "return [a, r() is None]"]
REFERENTS = ["first", "second", "dead"]


# a configuration: (other is obj, the referent, the function's index)
configurations = st.tuples(st.booleans(), st.sampled_from(REFERENTS), st.integers(0, len(FUNCTIONS) - 1))


def _arguments(world, configuration, call):
    aliased, referent, function = configuration
    x = torch.randn(3, generator=torch.Generator().manual_seed(call))
    other = world.first if aliased else world.second
    return x, world.first, other, world.refs[referent], FUNCTIONS[function]


NAMESPACE = {"torch": torch, "weakref": weakref, "inspect": inspect, "plain": plain,
             "with_defaults": with_defaults}


@share_of_profile(0.25)  # an example is up to five calls, most of them compiling
@given(programs_with_break_tags("x, obj, other, r, fn", STATEMENTS, RETURNS),
       st.lists(configurations, min_size=1, max_size=4))
def test_generated_introspection_sequence_matches_eager(program, sequence):
    source, breaks_when = program
    met = {"always"} | {"wrapped" for _, _, function in sequence if FUNCTIONS[function] is wrapped}
    whole = not breaks_when & met
    sequence = with_repeats(sequence)
    fastdynamo.reset()
    prog = build_program(source, NAMESPACE, "<generated-introspection>")
    run = run_sequence(prog, sequence, Objects, _arguments, fullgraph=whole, source=source)
    assert_graph_counts(run, sequence, fullgraph=whole, source=source)
    fastdynamo.reset()

"""Programs whose bytecode differs most between CPython 3.11, 3.12 and 3.13: inlined
comprehensions (3.12 ``LOAD_FAST_AND_CLEAR``), ``super()`` (``LOAD_SUPER_ATTR``), slices
(``BINARY_SLICE``/``STORE_SLICE``), f-strings (3.13 ``CONVERT_VALUE``/``FORMAT_*``),
keyword calls (``KW_NAMES``/``CALL_KW``), nested functions with defaults and closures
(3.13 ``SET_FUNCTION_ATTRIBUTE``), and breaks at ``not``/``if`` on a tensor (3.13
``TO_BOOL``). Each is compiled against eager with the same graph count on every version."""
from __future__ import annotations

import io

import pytest
import torch

from .break_helpers import assert_matches_eager, call, vec

pytestmark = pytest.mark.usefixtures("fresh_cache")


def comprehension_shadows_a_local(t):
    i = 10
    parts = [t * i for i in range(3)]  # the frame's i is hidden, then put back
    return parts[2] + i


def comprehension_local_unbound_before(t):
    parts = [t + k for k in range(2)]
    return parts[0] * parts[1]


def comprehension_of_closures(t):
    scales = [lambda k=k: t * k for k in range(3)]
    return scales[2]() + scales[1]()


class Base(torch.nn.Module):
    def scale(self, t):
        return t * 2


class Child(Base):
    def scale(self, t):
        return super().scale(t) + 1

    def forward(self, t):
        return self.scale(t) - super(Child, self).scale(t)


CHILD = Child()


def call_super(t):
    return CHILD(t)


def slices(t, items):
    items[1:3] = [t.sum(), t.max()]
    return t[1:3] * 2, items[0:2], items[:]


def formatted(t, n):
    label = f"{n!r:>4}|{n:03d}|{n}|{n!s}"
    return t * len(label), label


def keyword_calls(t):
    return torch.sum(t, dim=0, keepdim=True), torch.cat([t, t], dim=0)


def nested_defaults_and_closure(t, n):
    def inner(x, k=n, *, m=2):
        return x * k + t * m

    return inner(t), inner(t, 3, m=4)


def not_on_tensor(t, buf):
    if not (t.sum() > 0):
        print("non-positive", file=buf)
        return t - 1
    return t + 1


def chained_on_tensor(t):
    if 0 < t.sum() < 10:
        return t * 2
    return t * 3


@pytest.mark.parametrize("fn, make, graphs", [
    (comprehension_shadows_a_local, lambda i: call(vec(i)), 1),
    (comprehension_local_unbound_before, lambda i: call(vec(i)), 1),
    (comprehension_of_closures, lambda i: call(vec(i)), 1),
    (call_super, lambda i: call(vec(i)), 1),
    (slices, lambda i: call(vec(i, 4), [0.0, 1.0, 2.0, 3.0]), 1),
    (formatted, lambda i: call(vec(i), 7), 1),
    (keyword_calls, lambda i: call(vec(i)), 1),
    (nested_defaults_and_closure, lambda i: call(vec(i), 5), 1),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_whole_frame_on_every_version(fn, make, graphs):
    assert_matches_eager(fn, make, calls=2, graphs=graphs, breaks=0)


@pytest.mark.parametrize("fn, make, graphs, breaks", [
    # the graph before the branch, then each branch's resume function (i = 0: sum <= 0)
    (not_on_tensor, lambda i: call(vec(i) - 1, io.StringIO()), 3, 2),
    # a break at each comparison: the frame, the resume function of the first test, then
    # of the second (kept middle operand), recompiled for the other sign
    (chained_on_tensor, lambda i: call(vec(i)), 5, 2),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_branch_on_tensor_on_every_version(fn, make, graphs, breaks):
    assert_matches_eager(fn, make, calls=3, graphs=graphs, breaks=breaks)

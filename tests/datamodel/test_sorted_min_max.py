"""``sorted``, ``min`` and ``max`` inside a compiled frame: sorting by a key function the
trace calls on each item (values of any kind, constant keys), Python's own order (stable,
``reverse``), and the errors eager raises (mixed types, an empty sequence) raised by the
frame run as Python, never an internal error."""
from __future__ import annotations

import pytest
import torch

from .helpers import check


def by_lambda(x, d):
    pairs = sorted(d.items(), key=lambda kv: -kv[1])
    return x + pairs[0][1], pairs


def stable_reverse(x):
    words = ["bb", "a", "cc", "d", "ee"]
    return x * 2, sorted(words, key=len, reverse=True), sorted(words, key=len)


def tensors_by_name(x, named):
    ordered = sorted(named, key=lambda pair: pair[0])
    return [t * x for _, t in ordered]


def key_with_side_effect(x, seen):
    def key(v):
        seen.append(v)
        return v % 3
    return x + len(seen), sorted([5, 3, 4, 1], key=key), seen


def tensor_key(x, ts):
    return sorted(ts, key=lambda t: t.sum())


@pytest.mark.parametrize("fn, args", [
    (by_lambda, (torch.ones(2), {"b": 2, "a": 1, "c": 3})),
    (stable_reverse, (torch.ones(2),)),
    (tensors_by_name, (torch.ones(2), [("z", torch.ones(2)), ("a", torch.full((2,), 3.0))])),
    (key_with_side_effect, (torch.ones(2), [])),
], ids=lambda v: getattr(v, "__name__", ""))
def test_sorted_by_a_key_function_is_captured(fn, args):
    check(fn, *args, graphs=1, breaks=0, fullgraph=True)


def test_sorted_by_a_tensor_key_runs_as_python():
    check(tensor_key, torch.ones(2), [torch.ones(2), torch.zeros(2)], graphs=1, breaks=1, fullgraph=False)


def mixed(x):
    return x + len(sorted([1, "a"]))


def empty_max(x):
    return x + max([])


def max_with_default(x):
    return x + max([], default=2)


def max_of_arguments(x):
    return x + max(3, 1, 2) + min([4, 5])


@pytest.mark.parametrize("fn", [mixed, empty_max], ids=lambda f: f.__name__)
def test_errors_are_eagers_raised_by_the_frame(fn):
    check(fn, torch.ones(2), graphs=0, fullgraph=False)


def test_min_and_max_forms():
    # keyword arguments: the call runs as Python, the addition after it in a resume function
    check(max_with_default, torch.ones(2), graphs=1, breaks=1)
    check(max_of_arguments, torch.ones(2), graphs=1, breaks=0, fullgraph=True)

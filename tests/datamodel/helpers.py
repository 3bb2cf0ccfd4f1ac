"""Compiled (``backend="eager"``) versus eager for the data-model tests: values, types,
exceptions, and how many graphs and breaks the compiled run recorded."""
from __future__ import annotations

import collections
import copy
import itertools
from dataclasses import dataclass

import torch

import fastdynamo
from fastdynamo.convert_frame import Recorder


@dataclass
class Outcome:
    value: object
    error: type | None
    graphs: int
    breaks: list
    internal_errors: list


def same(a, b) -> bool:
    """Equal values of the same types, tensors by value, containers item by item."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, (tuple, list, collections.deque)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (type({}.keys()), type({}.values()), type({}.items()))):
        return same(list(a), list(b))
    if isinstance(a, (map, filter, zip, enumerate)) or type(a).__name__.endswith("iterator") \
            or type(a).__module__ == "itertools":
        # consumes both: compare what is left (the first items of an infinite one)
        return same(list(itertools.islice(a, 50)), list(itertools.islice(b, 50)))
    return a == b


def compiled_with_recorder(fn):
    """``fn`` compiled (``backend="eager"``) after a reset, and the recorder of its
    captures and breaks."""
    fastdynamo.reset()
    recorder = Recorder()
    return fastdynamo.compile(fn, backend="eager", _recorder=recorder), recorder


def run(fn, *args, fullgraph=False, **kwargs) -> Outcome:
    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.compile(fn, backend="eager", fullgraph=fullgraph, _recorder=recorder)
    try:
        value, error = compiled(*args, **kwargs), None
    except Exception as err:  # noqa: BLE001 - compared with eager's
        value, error = None, type(err)
    return Outcome(value, error, len(recorder.captures), list(recorder.breaks), list(recorder.internal_errors))


def check(fn, *args, graphs: int, breaks: int | None = None, fullgraph: bool | None = None):
    """``fn(*args)`` compiled equals eager (on copies of the arguments), with ``graphs``
    graphs captured (and ``breaks`` breaks when given). ``fullgraph``: also compiled
    with ``fullgraph=True``, which must succeed (True) or raise FullGraphError (False)."""
    expected, expected_error = _eager(fn, args)
    got = run(fn, *copy.deepcopy(args))
    assert not got.internal_errors, got.internal_errors  # a compiler error is a bug, never a fallback
    assert got.error is expected_error, (got.error, expected_error, [str(b) for b in got.breaks])
    assert same(got.value, expected), (got.value, expected)
    assert got.graphs == graphs, (got.graphs, [str(b) for b in got.breaks])
    if breaks is not None:
        assert len(got.breaks) == breaks, [str(b) for b in got.breaks]
    if fullgraph is not None:
        expected, expected_error = _eager(fn, args)  # iterators compared above are consumed
        full = run(fn, *copy.deepcopy(args), fullgraph=True)
        if fullgraph:
            assert full.error is expected_error and full.graphs == 1, (full.error, full.breaks)
            assert same(full.value, expected), (full.value, expected)
        else:
            assert full.error is fastdynamo.FullGraphError, full.error
    return got


def _eager(fn, args):
    try:
        return fn(*copy.deepcopy(args)), None
    except Exception as err:  # noqa: BLE001 - compared with the compiled run's
        return None, type(err)

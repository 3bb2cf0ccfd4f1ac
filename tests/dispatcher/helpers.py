"""Shared helpers for the dispatcher tests: what a call did, and graph counts."""
from __future__ import annotations

import torch

import fastdynamo
from fastdynamo._runtime import native
from fastdynamo.convert_frame import Recorder


def entries(fn):
    """The cache entries of a compiled function's (or module's forward) code."""
    target = getattr(fn, "_fastdynamo_original", fn)
    code = getattr(target, "__code__", None) or type(target).forward.__code__
    return native().cache_entries(code)


def counts(dispatcher) -> tuple[int, int, int]:
    """(direct graph calls, transformed-code runs, calls through the frame hook)."""
    return dispatcher.direct_calls, dispatcher.code_calls, dispatcher.frame_calls


def compile_recorded(fn, **options):
    """``fastdynamo.compile(fn, backend="eager")`` and the recorder of what it captured:
    ``len(recorder.captures)`` is the number of graphs, ``recorder.breaks`` the breaks."""
    recorder = Recorder()
    options.setdefault("backend", "eager")
    return fastdynamo.compile(fn, _recorder=recorder, **options), recorder


def same(actual, expected):
    """Values and types equal, tensor by tensor (tuples element-wise)."""
    assert type(actual) is type(expected)
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected)
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            same(a, e)
    else:
        assert actual == expected

"""Shared by the dynamic-shape tests: compile with a recorder and count graphs."""
from __future__ import annotations

from typing import Any, Callable

import torch

import fastdynamo
from fastdynamo.convert_frame import Recorder


def compiled(fn: Callable, **options: Any) -> tuple[Callable, Recorder]:
    """``fastdynamo.compile(fn, backend="eager", **options)`` and what it captures."""
    recorder = Recorder()
    options.setdefault("backend", "eager")
    return fastdynamo.compile(fn, _recorder=recorder, **options), recorder


def graph_code(recorder: Recorder, index: int = -1) -> str:
    return recorder.captures[index].result.graph_module.code


def assert_same(actual: Any, expected: Any) -> None:
    assert type(actual) is type(expected)
    if isinstance(expected, torch.Tensor):
        assert actual.shape == expected.shape and actual.dtype == expected.dtype
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_same(a, e)
    else:
        assert actual == expected

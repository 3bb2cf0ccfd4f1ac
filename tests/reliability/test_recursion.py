"""Recursion: a compiled function calling its compiled self costs the recursion depth of
an eager call per level (the wrapper is skipped inside its own region), so depth 500
works under the default limit of 1000, and runaway recursion still raises
RecursionError."""
from __future__ import annotations

import sys
import threading
import warnings

import pytest
import torch

import fastdynamo
from fastdynamo._runtime import native


@pytest.fixture(autouse=True)
def _fresh():
    fastdynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", native().RecompileLimitWarning)  # n differs per level
        yield
    fastdynamo.reset()


def eager_countdown(x, n):
    if n == 0:
        return x
    return eager_countdown(x + 1, n - 1)


def countdown(x, n):
    if n == 0:
        return x
    return compiled_countdown(x + 1, n - 1)


compiled_countdown = fastdynamo.compile(countdown, backend="eager")


def _deepest(fn) -> int:
    low, high = 1, 3000
    while low < high:
        middle = (low + high + 1) // 2
        try:
            fn(torch.zeros(1), middle)
            low = middle
        except RecursionError:
            high = middle - 1
    return low


def test_depth_500_under_the_default_limit():
    assert sys.getrecursionlimit() == 1000
    out = compiled_countdown(torch.zeros(2), 500)
    assert torch.equal(out, torch.full((2,), 500.0))
    entries = native().cache_entries(countdown.__code__)
    assert 1 <= len(entries) <= native().get_recompile_limit()  # compiled levels, then run-only


def test_compiled_depth_is_close_to_eager_depth():
    eager = _deepest(eager_countdown)
    compiled = _deepest(compiled_countdown)
    assert compiled >= eager - 10, (eager, compiled)  # was a third of eager's depth


def test_depth_500_in_a_thread():
    results = []
    thread = threading.Thread(target=lambda: results.append(compiled_countdown(torch.zeros(1), 500)))
    thread.start()
    thread.join()
    assert len(results) == 1 and results[0].item() == 500.0


def runaway(x):
    return compiled_runaway(x + 1)


compiled_runaway = fastdynamo.compile(runaway, backend="eager")


def test_runaway_recursion_raises_recursion_error():
    with pytest.raises(RecursionError):
        compiled_runaway(torch.zeros(1))
    assert native().installed_evaluator() == "default"


def test_wrapper_runs_when_entered_from_another_region():
    other = fastdynamo.compile(lambda x, n: compiled_countdown(x, n) * 2, backend="eager")
    assert torch.equal(other(torch.zeros(1), 5), torch.full((1,), 10.0))
    assert native().get_code_action(compiled_countdown.__code__) == native().REGION_WRAPPER

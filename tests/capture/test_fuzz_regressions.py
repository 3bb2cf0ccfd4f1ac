"""Regressions found while running the hypothesis suites with the long profile.

Fixed: when the graph raises but the frame, run again as Python, succeeds although no
traced code could catch the error, the error was the compiler's (fallback.rerun): it is
raised under ``config.fallback_on_internal_error = False``, reported otherwise.

1. The rerun fallback (fallback.py, since "A graph that raises runs its frame again as
   Python") catches every ``Exception`` from the graph call, including a backend's own
   run-time errors, and reruns the frame as Python without a log line, even with
   ``config.fallback_on_internal_error = False`` (which tests/conftest.py sets so that
   "compiler bugs fail tests, not fall back to Python silently"). A Triton kernel that
   crashes on every call (tests/triton/test_fuzz_regressions.py, ``maximum(0-dim, x)``)
   thus passes every differential test that goes through ``fastdynamo.compile``. When the
   rerun does not raise, the graph's error was not the program's: with the strict setting
   it should propagate (or at least be reported).
"""
from __future__ import annotations

import pytest
import torch

import fastdynamo
from fastdynamo import config

pytestmark = pytest.mark.usefixtures("fresh_cache")


class BackendBug(RuntimeError):
    pass


def crashing_backend(gm, example_inputs):
    """A backend whose compiled graphs always fail at run time (a kernel bug)."""

    def run(*args):
        raise BackendBug("kernel crashed")

    return run


def add_one(x):
    return x + 1


def test_backend_runtime_error_is_not_swallowed_when_strict(monkeypatch):
    monkeypatch.setattr(config, "fallback_on_internal_error", False)
    compiled = fastdynamo.compile(add_one, backend=crashing_backend)
    with pytest.raises(BackendBug):
        compiled(torch.ones(3))


def test_program_error_still_matches_eager(monkeypatch):
    """What the fallback is for: an error eager raises too is eager's error."""
    monkeypatch.setattr(config, "fallback_on_internal_error", False)

    def bad_index(x, i):
        return x[i] + 1

    compiled = fastdynamo.compile(bad_index, backend="eager")
    assert torch.equal(compiled(torch.arange(3.0), torch.tensor([1])), torch.tensor([2.0]))
    with pytest.raises(IndexError):
        compiled(torch.arange(3.0), torch.tensor([7]))

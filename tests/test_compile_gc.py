"""The cyclic garbage collector during a compile (convert_frame._collector_paused): off
while the frame is traced and its graph compiled, so that the trace's objects are never
promoted to the old generation (whose growth starts a full collection of the process
heap mid-compile); one young collection after it frees the trace's garbage; the caller's
setting is restored whatever happens."""
from __future__ import annotations

import gc
import weakref

import pytest
import torch

import fastdynamo
from fastdynamo._runtime import native

pytestmark = pytest.mark.usefixtures("fresh_cache")


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def _function(x):
    return torch.relu(x) * 2 + 1


def _recording_backend(seen: list):
    """A backend that records whether the collector was on, and leaves a reference cycle
    (garbage once it returns) with a weak reference to it in ``seen``."""

    def backend(gm, example_inputs):
        cycle = _Cycle()
        seen.append((gc.isenabled(), weakref.ref(cycle)))
        return gm.forward

    return backend


def _graph_count(fn) -> int:
    return len(native().cache_entries(fn.__code__))


def test_collector_off_while_compiling_and_young_garbage_freed_after():
    seen: list = []
    x = torch.randn(8)
    collections: list[int] = []

    def on_collect(phase, info):
        if phase == "stop":
            collections.append(info["generation"])

    assert gc.isenabled()
    gc.callbacks.append(on_collect)
    try:
        result = fastdynamo.compile(_function, backend=_recording_backend(seen))(x)
    finally:
        gc.callbacks.remove(on_collect)
    torch.testing.assert_close(result, _function(x))
    assert _graph_count(_function) == 1
    assert len(seen) == 1
    enabled_in_backend, cycle = seen[0]
    assert enabled_in_backend is False
    assert gc.isenabled()
    assert cycle() is None  # the young collection after the compile freed the cycle
    assert 1 in collections and 2 not in collections


def test_collector_left_off_when_the_caller_turned_it_off():
    seen: list = []
    x = torch.randn(8)
    gc.disable()
    try:
        result = fastdynamo.compile(_function, backend=_recording_backend(seen))(x)
        assert not gc.isenabled()  # not switched on behind the caller's back
    finally:
        gc.enable()
    torch.testing.assert_close(result, _function(x))
    assert _graph_count(_function) == 1
    assert [enabled for enabled, _ in seen] == [False]


def _breaks(x):
    y = x + 1
    print("graph break")
    return y * 2


def test_collector_restored_when_the_compile_raises(capsys):
    compiled = fastdynamo.compile(_breaks, backend="eager", fullgraph=True)
    with pytest.raises(fastdynamo.FullGraphError):
        compiled(torch.randn(3))
    assert gc.isenabled()
    assert _graph_count(_breaks) == 0


def test_collector_restored_when_the_backend_raises():
    def failing_backend(gm, example_inputs):
        raise RuntimeError("backend bug")

    with pytest.raises(RuntimeError, match="backend bug"):
        fastdynamo.compile(_function, backend=failing_backend)(torch.randn(8))
    assert gc.isenabled()
    assert _graph_count(_function) == 0

"""Grad and inference mode are read from the bits of torch's thread-local AutogradState
found at calibration (rust/guards/torch_tls.rs `mode_bits`), with the autocast keys, in one
thread-local read: they must say what torch says on every thread, whatever the other
bits of that state hold, and a change must recompile on the direct path."""
from __future__ import annotations

import threading

import torch

from fastdynamo._runtime import native

from .helpers import compile_recorded, counts, same

STATE = ("torch_state",)


def relu_add(x, y):
    return torch.relu(x + y)


def mode_guards(grad, inference=False):
    runtime = native()
    guards = runtime.GuardSet([(STATE, ("grad_mode", grad)), (STATE, ("inference_mode", inference)),
                               (STATE, ("autocast", False))])

    def f():
        pass

    return guards, runtime.Frame(f.__code__, [], f.__globals__)


def test_other_autograd_bits_do_not_change_what_the_modes_read():
    on, frame = mode_guards(True)
    off, _ = mode_guards(False)
    multithreading = torch._C._is_multithreading_enabled()
    toggles = [
        (torch._C._set_fwd_grad_enabled, torch._C._is_fwd_grad_enabled()),
        (torch._C._set_multithreading_enabled, multithreading),
        (torch._C._set_view_replay_enabled, torch._C._is_view_replay_enabled()),
    ]
    for setter, before in toggles:
        setter(not before)
        try:
            assert on.check(frame) and not off.check(frame)
            with torch.no_grad():
                assert off.check(frame) and not on.check(frame)
        finally:
            setter(before)


def test_a_new_thread_reads_its_own_modes_on_the_direct_path():
    compiled, recorder = compile_recorded(relu_add)
    x, y = torch.randn(8), torch.randn(8)
    compiled(x, y)
    compiled(x, y)
    results = []

    def worker():
        with torch.no_grad():
            results.append(compiled(x, y))  # another grad mode: recompiles
            results.append(compiled(x, y))
        results.append(compiled(x, y))  # this thread's grad mode is on again
        with torch.inference_mode():
            results.append(compiled(x, y))  # runs as Python: frames are not compiled here

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert len(results) == 4
    for result in results:
        same(result, relu_add(x, y))
    assert results[3].is_inference() and not results[2].is_inference()
    assert len(recorder.captures) == 2 and counts(compiled)[0] == 3


def test_inference_mode_is_seen_by_the_state_guards():
    guards, frame = mode_guards(False, inference=True)
    assert not guards.check(frame)
    with torch.inference_mode():
        assert guards.check(frame)
        with torch.inference_mode(False):
            assert not guards.check(frame)
        with torch.enable_grad():  # grad mode on inside inference mode: still inference
            assert not guards.check(frame) and mode_guards(True, inference=True)[0].check(frame)
    assert not guards.check(frame)


def test_default_dtype_guard_reads_the_current_default_next_to_the_modes():
    runtime = native()
    guards = runtime.GuardSet([(STATE, ("grad_mode", True)), (STATE, ("default_dtype", torch.get_default_dtype()))])
    _, frame = mode_guards(True)
    assert guards.check(frame)
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert not guards.check(frame) and "get_default_dtype" in guards.failure_reason(frame)
    finally:
        torch.set_default_dtype(before)
    assert guards.check(frame)

"""The state guards read grad mode, inference mode and autocast in C++ (rust/ffi/torch_tls.rs,
calibrated against torch's Python readers): they must say what torch's readers say, in
every state and on every thread."""
from __future__ import annotations

import threading

import torch

from fastdynamo._runtime import native

STATE = ("torch_state",)


def state_guards():
    runtime = native()
    guards = runtime.GuardSet([(STATE, ("grad_mode", True)), (STATE, ("autocast", False)),
                               (STATE, ("inference_mode", False))])

    def f():
        pass

    return guards, runtime.Frame(f.__code__, [], f.__globals__)


def agrees_with_torch(guards, frame):
    expected = (torch.is_grad_enabled() and not torch._C._is_any_autocast_enabled()
                and not torch.is_inference_mode_enabled())
    return guards.check(frame) == expected


def test_each_mode_switched_on_fails_the_guards_as_torchs_readers_say():
    guards, frame = state_guards()
    assert guards.check(frame)
    with torch.no_grad():
        assert not guards.check(frame) and "is_grad_enabled" in guards.failure_reason(frame)
    inference_only = native().GuardSet([(STATE, ("inference_mode", False))])
    with torch.inference_mode():  # also turns grad mode off
        assert not guards.check(frame) and not inference_only.check(frame)
        assert "inference_mode" in inference_only.failure_reason(frame)
    assert inference_only.check(frame)
    with torch.autocast("cpu"):
        assert not guards.check(frame) and "autocast" in guards.failure_reason(frame)
    assert guards.check(frame)


def test_every_autocast_key_agrees_with_torchs_reader():
    guards, frame = state_guards()
    keys = [key for name, key in torch._C.DispatchKey.__members__.items() if name.startswith("Autocast")]
    assert keys
    for key in keys:
        torch._C._dispatch_tls_set_dispatch_key_excluded(key, False)
        try:
            assert agrees_with_torch(guards, frame), key
        finally:
            torch._C._dispatch_tls_set_dispatch_key_excluded(key, True)
    assert guards.check(frame)


def test_other_threads_read_their_own_modes():
    guards, frame = state_guards()
    seen = []

    def worker():
        seen.append(guards.check(frame))
        with torch.autocast("cpu"):
            seen.append(guards.check(frame))
        with torch.no_grad():
            seen.append(guards.check(frame))

    with torch.autocast("cpu"):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert not guards.check(frame)
    assert seen == [True, False, False] and guards.check(frame)

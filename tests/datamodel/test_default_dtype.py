"""The default dtype is global torch state a trace folds: factories and Python scalars
take it, and ``.dtype`` of their results is read as a constant. An entry compiled under
one default must not run under another (the ``default_dtype`` state guard, read in C++
by ``rust/ffi/torch_tls.rs`` where it agrees with ``torch.get_default_dtype()``)."""
from __future__ import annotations

import pytest
import torch

from fastdynamo._runtime import native

from .helpers import compiled_with_recorder, same

STATE = ("torch_state",)
DEFAULTS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


@pytest.fixture
def restore_default_dtype():
    before = torch.get_default_dtype()
    yield
    torch.set_default_dtype(before)


def factory_and_scalars(x, n):
    made = torch.ones(3) + n * 1.5  # a factory, and an int tensor promoted by a float
    return made, torch.get_default_dtype(), made.dtype is torch.float64, x + torch.tensor(0.5)


@pytest.mark.usefixtures("restore_default_dtype")
def test_a_new_default_dtype_recompiles_and_the_old_entry_is_reused_after():
    compiled, recorder = compiled_with_recorder(factory_and_scalars)
    x, n = torch.arange(3.0, dtype=torch.float64), torch.arange(3)
    for default in (torch.float32, torch.float64, torch.float32, torch.float64):
        torch.set_default_dtype(default)
        got, expected = compiled(x, n), factory_and_scalars(x, n)
        assert same(got, expected), (default, got, expected)
    assert len(recorder.captures) == 2  # one per default; switching back reuses the first


@pytest.mark.usefixtures("restore_default_dtype")
@pytest.mark.parametrize("default", DEFAULTS, ids=str)
def test_the_state_guard_holds_only_under_the_default_it_was_built_for(default):
    torch.set_default_dtype(default)
    guards = native().GuardSet([(STATE, ("default_dtype", default))])

    def f():
        pass

    frame = native().Frame(f.__code__, [], f.__globals__)
    assert guards.check(frame)
    for other in DEFAULTS:
        torch.set_default_dtype(other)
        assert guards.check(frame) is (other is default), (default, other)
        if other is not default:
            assert "get_default_dtype" in guards.failure_reason(frame)


@pytest.mark.usefixtures("restore_default_dtype")
def test_a_guard_built_under_another_default_still_answers_right():
    # built while the default is not the dtype it checks: no C++ code is sampled, so it
    # asks torch's Python reader
    guards = native().GuardSet([(STATE, ("default_dtype", torch.float64))])

    def f():
        pass

    frame = native().Frame(f.__code__, [], f.__globals__)
    torch.set_default_dtype(torch.float32)
    assert not guards.check(frame)
    torch.set_default_dtype(torch.float64)
    assert guards.check(frame)

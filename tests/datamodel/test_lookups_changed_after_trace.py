"""What a trace found missing must stay missing: a class that gains the attribute (or a
``__getattr__``, or its own ``__getattribute__``) after the trace, and hooks registered
on a module or globally after it, make the next call recompile instead of reusing a
graph built on the old answer."""
from __future__ import annotations

import pytest
import torch
from torch.nn.modules import module as module_mod

from .helpers import compiled_with_recorder


def _recompiles_to_eagers_answer(fn, change, break_after: str | None = None):
    """One graph, then after ``change`` a recompile: one more graph, or (when the change
    makes the frame unsupported) a break naming ``break_after``."""
    compiled, recorder = compiled_with_recorder(fn)
    x = torch.ones(2)
    assert torch.equal(compiled(x), fn(x))
    assert (len(recorder.captures), recorder.breaks) == (1, [])
    change()
    assert torch.equal(compiled(x), fn(x))
    reasons = [str(b) for b in recorder.breaks]
    if break_after is None:
        assert (len(recorder.captures), reasons) == (2, []), reasons
    else:
        assert reasons and all(break_after in r for r in reasons), reasons


def _fresh_class():
    class Plain:
        def __init__(self):
            self.n = 1
    return Plain


@pytest.mark.parametrize("read", ["getattr", "hasattr", "try"])
@pytest.mark.parametrize("made_in_frame", [False, True])
@pytest.mark.parametrize("gain", ["attribute", "__getattr__", "__getattribute__"])
def test_a_class_gaining_what_the_lookup_missed_recompiles(read, made_in_frame, gain):
    cls = _fresh_class()
    outside = cls()

    def looked_up(obj):
        if read == "getattr":
            return getattr(obj, "v", 3)
        if read == "hasattr":
            return hasattr(obj, "v") * 5
        try:
            return obj.v
        except AttributeError:
            return -1

    def fn(x):
        return x * looked_up(cls() if made_in_frame else outside)

    def change():
        if gain == "attribute":
            cls.v = 7
        elif gain == "__getattr__":
            cls.__getattr__ = lambda self, name: 9
        else:
            cls.__getattribute__ = lambda self, name: 11 if name == "v" else object.__getattribute__(self, name)

    _recompiles_to_eagers_answer(fn, change)


@pytest.mark.parametrize("register", ["forward", "forward_pre"])
def test_a_global_module_hook_registered_after_the_trace_recompiles(register):
    linear = torch.nn.Linear(2, 2)
    registrar = getattr(module_mod, f"register_module_{register}_hook")
    hook = (lambda mod, args, out: out * 0) if register == "forward" else (lambda mod, args: (args[0] * 0,))
    handles = []
    try:
        _recompiles_to_eagers_answer(lambda x: linear(x), lambda: handles.append(registrar(hook)),
                                     break_after="Linear has hooks")
    finally:
        for handle in handles:
            handle.remove()


def test_a_backward_hook_registered_after_the_trace_runs_on_the_next_call():
    linear = torch.nn.Linear(2, 2)
    calls = []
    compiled, _ = compiled_with_recorder(lambda x: linear(x).sum())
    compiled(torch.ones(2, requires_grad=True)).backward()
    linear.register_full_backward_hook(lambda mod, grad_in, grad_out: calls.append(len(grad_out)))
    compiled(torch.ones(2, requires_grad=True)).backward()
    assert calls == [1]  # the hook ran: the entry without it was not reused


def test_an_operator_a_class_defines_after_the_trace_recompiles():
    class Plain:
        pass

    class Table(dict):
        pass

    plain, table = Plain(), Table(a=1)

    def fn(x):
        return x * (plain == plain) + table["a"]

    def change():
        Plain.__eq__ = lambda self, other: 7
        Table.__getitem__ = lambda self, key: 13

    _recompiles_to_eagers_answer(fn, change)


@pytest.mark.parametrize("query, change, restore", [
    (torch.get_num_threads, lambda: torch.set_num_threads(3 - min(torch.get_num_threads(), 2)),
     torch.set_num_threads),  # another thread count, whatever the current one
    (torch.are_deterministic_algorithms_enabled, lambda: torch.use_deterministic_algorithms(True),
     torch.use_deterministic_algorithms),
])
def test_a_torch_state_query_is_asked_again_by_the_guard(query, change, restore):
    before = query()
    try:
        _recompiles_to_eagers_answer(lambda x: x * query(), change)
    finally:
        restore(before)


def test_transformer_encoder_follows_the_fast_path_switch():
    layer = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True).eval()
    compiled, recorder = compiled_with_recorder(layer)
    x = torch.randn(1, 3, 8)
    enabled = torch.backends.mha.get_fastpath_enabled()
    try:
        with torch.no_grad():
            for switch in (enabled, not enabled):
                torch.backends.mha.set_fastpath_enabled(switch)
                torch.testing.assert_close(compiled(x), layer(x))
    finally:
        torch.backends.mha.set_fastpath_enabled(enabled)
    assert (len(recorder.captures), recorder.breaks) == (2, [])  # one graph per switch position


def test_a_class_attribute_read_through_type_of_an_object_is_guarded():
    class Base:
        scale = 2

    class Child(Base):
        def __init__(self):
            self.n = 1

    outside = Child()

    def fn(x):
        return x * type(outside).scale + type(Child()).scale + outside.__class__.scale

    _recompiles_to_eagers_answer(fn, lambda: setattr(Base, "scale", 5))


@pytest.mark.parametrize("read", ["getattr", "hasattr"])
def test_a_class_gaining_an_attribute_looked_up_on_the_class_recompiles(read):
    cls = _fresh_class()

    def fn(x):
        return x * (getattr(cls, "v", 3) if read == "getattr" else hasattr(cls, "v") + 2)

    _recompiles_to_eagers_answer(fn, lambda: setattr(cls, "v", 7))

"""Guards on globals and builtins are answered by the dict's version tag while the dict
is unchanged (rust/guards/versioned.rs): every change to the dict must still be seen.
Rebinding, deleting or adding a name, the same code run with other globals, and the
verbose path's reason; on the direct path and on the frame path, results as eager's and
graphs counted."""
from __future__ import annotations

import types

import pytest
import torch

from fastdynamo._runtime import native

from .helpers import compile_recorded, counts, same

SOURCE = "def relu_add(x, y):\n    return torch.relu(x + y)\n"


def function_in(namespace):
    """`relu_add` defined in its own globals, so tests can rebind its `torch`."""
    exec(SOURCE, namespace)  # noqa: S102 - a fixed test source
    return namespace["relu_add"]


def fake_torch():
    """A module whose `relu` is another op: an entry traced with torch must not serve it."""
    fake = types.ModuleType("fake_torch")
    fake.relu = torch.sigmoid
    return fake


def test_rebinding_a_global_after_direct_hits_recompiles():
    namespace = {"torch": torch}
    fn = function_in(namespace)
    compiled, recorder = compile_recorded(fn)
    x, y = torch.randn(8), torch.randn(8)
    for _ in range(3):
        same(compiled(x, y), fn(x, y))
    assert counts(compiled) == (2, 0, 1) and len(recorder.captures) == 1
    namespace["torch"] = fake_torch()
    same(compiled(x, y), torch.sigmoid(x + y))
    same(compiled(x, y), fn(x, y))
    assert counts(compiled) == (3, 0, 2) and len(recorder.captures) == 2
    namespace["torch"] = torch  # the first entry serves again, without a compile
    same(compiled(x, y), torch.relu(x + y))
    assert counts(compiled) == (4, 0, 2) and len(recorder.captures) == 2


def test_rebinding_a_global_to_the_same_object_still_hits():
    namespace = {"torch": torch}
    fn = function_in(namespace)
    compiled, recorder = compile_recorded(fn)
    x, y = torch.randn(8), torch.randn(8)
    compiled(x, y)
    compiled(x, y)
    namespace["torch"] = torch  # a new version tag, the same binding
    namespace["unrelated"] = 1
    same(compiled(x, y), fn(x, y))
    assert counts(compiled) == (2, 0, 1) and len(recorder.captures) == 1


def test_deleting_a_global_raises_as_eager():
    namespace = {"torch": torch}
    fn = function_in(namespace)
    compiled, _ = compile_recorded(fn)
    x, y = torch.randn(8), torch.randn(8)
    compiled(x, y)
    compiled(x, y)
    del namespace["torch"]
    with pytest.raises(NameError, match="torch"):
        fn(x, y)
    with pytest.raises(NameError, match="torch"):
        compiled(x, y)
    assert counts(compiled)[0] == 1


def test_a_global_constant_change_recompiles():
    namespace = {"torch": torch, "SCALE": 2}
    exec("def scaled(x):\n    return torch.relu(x) * SCALE\n", namespace)  # noqa: S102
    fn = namespace["scaled"]
    compiled, recorder = compile_recorded(fn)
    x = torch.randn(8)
    same(compiled(x), fn(x))
    same(compiled(x), fn(x))
    assert counts(compiled) == (1, 0, 1)
    namespace["SCALE"] = 3
    same(compiled(x), fn(x))
    same(compiled(x), fn(x))
    assert counts(compiled) == (2, 0, 2) and len(recorder.captures) == 2


def test_one_code_with_two_globals_dicts_is_guarded_per_dict():
    """Entries live on the code object: the tag of one function's globals must not answer
    for another function of the same code with other globals."""
    first = function_in({"torch": torch})
    second = types.FunctionType(first.__code__, {"torch": fake_torch()}, "relu_add")
    compiled_first, first_recorder = compile_recorded(first)
    compiled_second, second_recorder = compile_recorded(second)
    x, y = torch.randn(8), torch.randn(8)
    for _ in range(3):
        same(compiled_first(x, y), torch.relu(x + y))
        same(compiled_second(x, y), torch.sigmoid(x + y))
    assert len(first_recorder.captures) == 1 and len(second_recorder.captures) == 1
    assert counts(compiled_first) == (2, 0, 1) and counts(compiled_second) == (2, 0, 1)


def test_the_frame_path_sees_a_rebound_global():
    """The hook's lookup (a function called from compiled code) uses the same guard sets."""
    namespace = {"torch": torch}
    inner = function_in(namespace)
    compiled, recorder = compile_recorded(lambda x, y: inner(x, y) * 2)
    x, y = torch.randn(8), torch.randn(8)
    same(compiled(x, y), inner(x, y) * 2)
    same(compiled(x, y), inner(x, y) * 2)
    graphs = len(recorder.captures)
    namespace["torch"] = fake_torch()
    same(compiled(x, y), torch.sigmoid(x + y) * 2)
    assert len(recorder.captures) == graphs + 1


def guard_set_on(namespace, source, check):
    runtime = native()

    def f():
        pass

    guards = runtime.GuardSet([(source, check)])
    return guards, runtime.Frame(f.__code__, [], namespace)


def test_guard_set_rechecks_after_each_change_of_the_dict():
    marker = object()
    namespace = {"marker": marker}
    guards, frame = guard_set_on(namespace, ("global", "marker"), ("id_is", marker))
    assert guards.check(frame) and guards.check(frame)
    namespace["marker"] = object()
    assert not guards.check(frame)
    assert "marker is" in guards.failure_reason(frame)
    namespace["marker"] = marker
    assert guards.check(frame)
    del namespace["marker"]
    assert not guards.check(frame) and "could not be read" in guards.failure_reason(frame)
    namespace["marker"] = marker
    namespace.clear()
    assert not guards.check(frame)


def test_guard_set_on_builtins_rechecks_after_a_change():
    builtins = {"len": len}
    runtime = native()

    def f():
        pass

    guards = runtime.GuardSet([(("builtin", "len"), ("id_is", len)), (("global", "n"), ("equals", 3))])
    frame = runtime.Frame(f.__code__, [], {"n": 3}, builtins)
    assert guards.check(frame) and guards.check(frame)
    builtins["len"] = abs
    assert not guards.check(frame)
    builtins["len"] = len
    assert guards.check(frame)
    other = runtime.Frame(f.__code__, [], {"n": 4}, builtins)
    assert not guards.check(other) and guards.check(frame)


def test_a_dict_subclass_as_globals_is_checked_as_before():
    class Namespace(dict):
        pass

    marker = object()
    namespace = Namespace(marker=marker)
    guards, frame = guard_set_on(namespace, ("global", "marker"), ("id_is", marker))
    assert guards.check(frame)
    namespace["marker"] = 1
    assert not guards.check(frame)

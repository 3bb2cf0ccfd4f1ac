"""Calling a weak reference from outside the frame (issue #12: LSTM's
``_flat_weight_refs``): the referent is read through the source ``ref()``
(``WeakRefCallSource``, an accessor of the native guards that calls only exact
``weakref.ref`` objects) and guarded by identity, or as dead. Compiled against eager,
with graph counts, including later calls where the referent changed or died, and the
``ref() is weight`` check of ``nn.LSTM``."""
from __future__ import annotations

import gc
import weakref

import pytest
import torch

import fastdynamo
from fastdynamo import _native
from fastdynamo.convert_frame import Recorder
from fastdynamo.guards.sources import LocalSource, WeakRefCallSource, resolve

from .object_helpers import compare

pytestmark = pytest.mark.usefixtures("fresh_cache")


class Box:
    def __init__(self, t):
        self.t = t


def compiled_with_recorder(fn, fullgraph=False):
    recorder = Recorder()
    return fastdynamo.compile(fn, backend="eager", fullgraph=fullgraph, _recorder=recorder), recorder


def read_referent(x, r):
    box = r()
    if box is None:
        return x - 1
    return box.t + x


def test_live_referent_is_one_graph():
    box = Box(torch.full((2,), 3.0))
    compare(read_referent, lambda: (torch.ones(2), weakref.ref(box)), fullgraph=True)


def test_dead_referent_is_one_graph():
    box = Box(torch.ones(2))
    ref = weakref.ref(box)
    del box
    gc.collect()
    compare(read_referent, lambda: (torch.ones(2), ref), fullgraph=True)


def test_referent_returned_is_the_same_object():
    box = Box(torch.ones(2))

    def fn(x, r):
        return r(), r().t * x

    compiled, recorder = compiled_with_recorder(fn, fullgraph=True)
    for _ in range(2):  # the second call is a cache hit
        got, value = compiled(torch.ones(2), weakref.ref(box))
        assert got is box and torch.equal(value, box.t)
    assert len(recorder.captures) == 1


def test_another_referent_recompiles():
    first, second = Box(torch.ones(2)), Box(torch.full((2,), 5.0))
    compiled, recorder = compiled_with_recorder(read_referent)
    x = torch.ones(2)
    assert torch.equal(compiled(x, weakref.ref(first)), first.t + x)
    assert torch.equal(compiled(x, weakref.ref(second)), second.t + x)  # id guard failed
    assert torch.equal(compiled(x, weakref.ref(first)), first.t + x)
    assert len(recorder.captures) == 2 and not recorder.breaks


def test_referent_that_dies_between_calls_recompiles():
    # no Recorder here: its records keep the guards' objects (the referent) alive
    box = Box(torch.full((2,), 2.0))
    ref = weakref.ref(box)
    compiled = fastdynamo.compile(read_referent, backend="eager")
    x = torch.ones(2)
    assert torch.equal(compiled(x, ref), box.t + x)
    del box
    gc.collect()
    assert ref() is None  # the compiled entry did not keep the referent alive
    assert torch.equal(compiled(x, ref), x - 1)  # eager's dead branch
    assert len(_native.cache_entries(read_referent.__code__)) == 2


def test_tensor_referent_is_a_graph_input():
    t = torch.arange(3.0)

    def fn(x, r):
        return r() * x

    compiled, recorder = compiled_with_recorder(fn, fullgraph=True)
    for _ in range(3):  # later calls hit the cache (the dispatcher reads r() natively)
        assert torch.equal(compiled(torch.full((3,), 2.0), weakref.ref(t)), t * 2)
    t.add_(1)  # same object, new values: no recompile, the graph reads the tensor
    assert torch.equal(compiled(torch.full((3,), 2.0), weakref.ref(t)), t * 2)
    assert len(recorder.captures) == 1


class WithRef(torch.nn.Module):
    """The check of ``nn.RNNBase._weights_have_changed``: ``ref() is not weight``."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(3))
        self.ref = weakref.ref(self.weight)

    def forward(self, x):
        changed = self.ref() is not self.weight
        return x * self.weight + (10 if changed else 0)


def test_weakref_to_a_parameter_compared_by_identity():
    model = WithRef()
    compiled, recorder = compiled_with_recorder(model.forward, fullgraph=True)
    x = torch.ones(3)
    torch.testing.assert_close(compiled(x), model(x))
    assert len(recorder.captures) == 1
    # a new parameter of the same metadata: eager now sees a change; so must the compiled one
    model.weight = torch.nn.Parameter(torch.full((3,), 2.0))
    expected = model(x)
    assert expected[0].item() == 12.0
    torch.testing.assert_close(compiled(x), expected)
    assert len(recorder.captures) == 2


def test_tensor_identity_between_arguments_matches_eager():
    # two sources of one tensor: the graph cannot guard that they stay one object
    def fn(x, y):
        return x is y, x + 1

    t = torch.ones(2)
    compiled, recorder = compiled_with_recorder(fn)
    for args in ((t, t), (t, torch.ones(2)), (t, t)):
        got, expected = compiled(*args), fn(*args)
        assert got[0] is expected[0] and torch.equal(got[1], expected[1])
    assert recorder.breaks and "identity of tensors x and y" in recorder.breaks[0].reason


def test_weakref_subclass_is_not_called_by_guards():
    # only exact weakref.ref objects are called by guards and transformed code: a
    # subclass's own __call__ runs exactly as often as in eager
    calls = []

    class CountingRef(weakref.ref):
        def __call__(self):
            calls.append(1)
            return super().__call__()

    box = Box(torch.ones(2))
    x = torch.ones(2)
    expected = read_referent(x, CountingRef(box))
    eager_calls, calls[:] = len(calls), []
    compiled, recorder = compiled_with_recorder(read_referent)
    for _ in range(2):
        assert torch.equal(compiled(x, CountingRef(box)), expected)
    assert len(calls) == 2 * eager_calls
    assert recorder.captures  # the frame compiled (the subclass's call itself may break)


def test_native_guard_reads_the_referent_and_dead_references():
    box, other = Box(1), Box(2)
    source = WeakRefCallSource(LocalSource(0, "r"))
    code = (lambda r: r).__code__
    alive = _native.GuardSet([(source.spec(), ("id_is", box))])
    dead = _native.GuardSet([(source.spec(), ("is_none",))])
    ref = weakref.ref(box)
    assert alive.check(_native.Frame(code, [ref], {}))
    assert not alive.check(_native.Frame(code, [weakref.ref(other)], {}))
    assert not dead.check(_native.Frame(code, [ref], {}))
    assert "r() is" in alive.failure_reason(_native.Frame(code, [weakref.ref(other)], {}))
    assert alive.failure_reason(_native.Frame(code, [lambda: box], {})) == "r() could not be read"
    assert resolve(source, [ref], {}, {}, None) is box
    ref_to_other = weakref.ref(other)
    del other
    gc.collect()
    assert dead.check(_native.Frame(code, [ref_to_other], {}))
    assert not alive.check(_native.Frame(code, [ref_to_other], {}))


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_lstm_is_one_graph(grad):
    from tests.models.zoo import BY_NAME

    case = BY_NAME["lstm"]
    model, args = case.build()
    with torch.set_grad_enabled(grad):
        expected = model(*args)
        report = fastdynamo.explain(model, backend="eager")(*args)
        assert (report.graph_count, report.graph_break_count) == (1, 0), [str(b) for b in report.break_reasons]
        compiled = fastdynamo.compile(model, backend="eager", fullgraph=True)
        for _ in range(2):
            got = compiled(*args)
            torch.testing.assert_close(got, expected)
            assert got.requires_grad == expected.requires_grad == grad

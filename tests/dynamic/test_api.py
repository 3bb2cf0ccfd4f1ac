"""The API of dynamic shapes: compile(dynamic=...), mark_dynamic, mark_static, and the
errors for bad input."""
from __future__ import annotations

import pytest
import torch

import fastdynamo
from fastdynamo.marks import dynamic_dims, static_dims

from .helpers import assert_same, compiled


def add_relu(x, y):
    return torch.relu(x + y)


def test_dynamic_must_be_none_or_bool():
    with pytest.raises(TypeError, match="dynamic must be None, True or False"):
        fastdynamo.compile(add_relu, dynamic="yes")
    with pytest.raises(TypeError, match="dynamic must be None, True or False"):
        fastdynamo.compile(dynamic=1)
    with pytest.raises(TypeError, match="dynamic must be None, True or False"):
        fastdynamo.compile(torch.nn.Linear(2, 2), dynamic=0)


def test_mark_dynamic_rejects_bad_input():
    x = torch.ones(2, 3)
    with pytest.raises(IndexError, match="dim 2 is out of range for a 2-d tensor"):
        fastdynamo.mark_dynamic(x, 2)
    with pytest.raises(IndexError, match="dim -3 is out of range"):
        fastdynamo.mark_dynamic(x, -3)
    with pytest.raises(ValueError, match="min=8 > max=4"):
        fastdynamo.mark_dynamic(x, 0, min=8, max=4)
    with pytest.raises(ValueError, match="negative"):
        fastdynamo.mark_dynamic(x, 0, min=-1)
    with pytest.raises(TypeError, match="dim must be an int"):
        fastdynamo.mark_dynamic(x, "0")
    with pytest.raises(TypeError, match="expects a tensor"):
        fastdynamo.mark_dynamic([1, 2], 0)
    with pytest.raises(TypeError, match="max must be an int"):
        fastdynamo.mark_dynamic(x, 0, max=2.5)
    with pytest.raises(IndexError, match="out of range for a 0-d tensor"):
        fastdynamo.mark_static(torch.tensor(1.0), 0)
    assert dynamic_dims(x) == {} and static_dims(x) == set()  # nothing half-applied


def test_marks_are_recorded_and_override_each_other():
    x = torch.ones(2, 3, 4)
    fastdynamo.mark_dynamic(x, [0, -1], min=2, max=16)
    assert dynamic_dims(x) == {0: (2, 16), 2: (2, 16)}
    fastdynamo.mark_static(x, 0)
    assert dynamic_dims(x) == {2: (2, 16)} and static_dims(x) == {0}
    fastdynamo.mark_dynamic(x, 0)
    assert dynamic_dims(x) == {0: (None, None), 2: (2, 16)} and static_dims(x) == set()


def _calls(fn, sizes, make):
    for n in sizes:
        args = make(n)
        assert_same(fn(*args), add_relu(*make(n)))


def _pair(n):
    torch.manual_seed(n)
    return torch.randn(n, 3), torch.randn(n, 3)


def test_automatic_recompiles_once_then_serves_every_size():
    fn, rec = compiled(add_relu)
    _calls(fn, [2], _pair)
    assert len(rec.captures) == 1
    assert "sym_size" not in rec.captures[0].result.graph_module.code
    _calls(fn, [3, 4, 5, 17, 64, 2, 9], _pair)
    assert len(rec.captures) == 2  # the second compile is symbolic: no third


def test_dynamic_true_is_symbolic_from_the_first_call():
    fn, rec = compiled(lambda x, y: torch.relu(x + y).reshape(x.shape[0] * x.shape[1]), dynamic=True)
    for n in (2, 3, 7, 30):
        x, y = _pair(n)
        assert_same(fn(x, y), torch.relu(x + y).reshape(n * 3))
    assert len(rec.captures) == 1
    assert "sym_size" in rec.captures[0].result.graph_module.code


def test_dynamic_false_compiles_each_size():
    fn, rec = compiled(add_relu, dynamic=False)
    _calls(fn, [2, 3, 4, 5], _pair)
    assert len(rec.captures) == 4
    assert all("sym_size" not in c.result.graph_module.code for c in rec.captures)


def test_mark_dynamic_with_dynamic_false():
    fn, rec = compiled(lambda x: x.sum(0) * x.shape[0], dynamic=False)
    for n in (3, 5, 8):
        x = torch.randn(n, 4)
        fastdynamo.mark_dynamic(x, 0)
        assert_same(fn(x), x.sum(0) * n)
    assert len(rec.captures) == 1


def test_mark_dynamic_range_is_guarded():
    fn, rec = compiled(lambda x: x * x.shape[0], dynamic=False)
    for n in (4, 8, 16):
        x = torch.randn(n)
        fastdynamo.mark_dynamic(x, 0, min=4, max=16)
        assert_same(fn(x), x * n)
    assert len(rec.captures) == 1
    x = torch.randn(17)  # outside the range: a static entry of its own
    fastdynamo.mark_dynamic(x, 0, min=4, max=16)
    assert_same(fn(x), x * 17)
    assert len(rec.captures) == 2
    guards = "\n".join(g.text() for g in rec.captures[0].result.guards)
    assert "x.size()[0] <= 16" in guards and "x.size()[0] >= 4" in guards


def test_mark_static_beats_dynamic_true():
    fn, rec = compiled(lambda x: x + 1, dynamic=True)
    for n in (3, 4):
        x = torch.randn(n, 5)
        fastdynamo.mark_static(x, 0)
        assert_same(fn(x), x + 1)
    assert len(rec.captures) == 2
    guards = "\n".join(g.text() for g in rec.captures[0].result.guards)
    assert "size=(3, ?)" in guards


def test_module_with_dynamic_true_keeps_parameters_static():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    recorder = fastdynamo.convert_frame.Recorder()
    opt = fastdynamo.OptimizedModule(model, backend="eager", dynamic=True, recorder=recorder)
    for n in (2, 3, 9):
        x = torch.randn(n, 4)
        assert_same(opt(x), model(x))
    assert len(recorder.captures) == 1
    guards = [g.text() for g in recorder.captures[0].result.guards]
    assert any("size=(?, 4)" in g for g in guards)
    assert not any("weight" in g and "?" in g for g in guards)

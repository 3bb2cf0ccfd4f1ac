"""Attribute precedence as Python resolves it: data descriptors on the type > instance
``__dict__`` > class attributes > ``__getattr__`` (wrong-result class 6 of issue #10)."""
import torch

import fastdynamo
from fastdynamo.convert_frame import Recorder

from .object_helpers import compare, fresh


class MethodNamedLikeSubmodule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.act = torch.nn.ReLU()  # lands in _modules: the class function below wins

    def act(self, t):
        return t * 7

    def forward(self, t):
        return self.act(t)


def test_class_method_beats_submodule():
    compare(lambda t, p: p(t), lambda: (-torch.ones(2), MethodNamedLikeSubmodule()), fullgraph=True)


class InstanceShadowsClassConstant:
    scale = 2

    def __init__(self, scale=None):
        if scale is not None:
            self.scale = scale


def test_instance_dict_beats_class_attribute():
    def fn(x, obj):
        return x * obj.scale

    compare(fn, lambda: (torch.ones(2), InstanceShadowsClassConstant(5)), fullgraph=True)
    compare(fn, lambda: (torch.ones(2), InstanceShadowsClassConstant()), fullgraph=True)


class WithProperty:
    def __init__(self):
        self.__dict__["value"] = 100  # a data descriptor still wins over this

    @property
    def value(self):
        return 3


def test_property_beats_instance_dict():
    compare(lambda x, obj: x * obj.value, lambda: (torch.ones(2), WithProperty()), fullgraph=True)


class Shadowed:
    def method(self, t):
        return t + 1


def test_instance_function_shadowing_a_method_is_called_and_guarded():
    def fn(x, obj):
        return obj.method(x)

    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.compile(fn, backend="eager", _recorder=recorder)
    obj, x = Shadowed(), torch.ones(2)
    assert torch.equal(compiled(x, obj), fn(x, obj))
    obj.method = lambda t: t * 10
    assert torch.equal(compiled(x, obj), fn(x, obj))
    assert len(recorder.captures) == 2


class Proxy:
    """Forwards reads and writes to another object."""

    def __init__(self, target):
        object.__setattr__(self, "_target", target)

    def __getattr__(self, name):
        return getattr(self._target, name)

    def __setattr__(self, name, value):
        setattr(self._target, name, value)


class Box:
    pass


def test_proxy_setattr_and_getattr_forward_to_the_target():
    def fn(x, proxy):
        proxy.w = x + 1
        return proxy.w * 2

    # the argument check compares the proxy's target (its instance dict) with eager's
    compare(fn, lambda: (torch.ones(2), Proxy(Box())), fullgraph=True)


def test_getattr_fallback_recompiles_when_instance_gains_the_name():
    class Defaults:
        def __getattr__(self, name):
            return 4

    def fn(x, obj):
        return x * obj.factor

    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.compile(fn, backend="eager", _recorder=recorder)
    obj, x = Defaults(), torch.ones(2)
    assert torch.equal(compiled(x, obj), fn(x, obj))
    obj.factor = 9
    assert torch.equal(compiled(x, obj), fn(x, obj))
    assert len(recorder.captures) == 2


class CustomGetattribute:
    def __getattribute__(self, name):
        return 5


def test_custom_getattribute_is_inlined():
    # (modelled since #12: the class's Python __getattribute__ runs in the trace;
    # tests/datamodel/test_custom_getattribute.py has the rest)
    compare(lambda x, obj: x * obj.anything, lambda: (torch.ones(2), CustomGetattribute()),
            graphs=1, breaks=0)


class SetattrDoubles:
    def __setattr__(self, name, value):
        object.__setattr__(self, name, value * 2)


def test_custom_setattr_storing_on_self_breaks_cleanly():
    def fn(x, obj):
        obj.n = 3
        return x + 1

    # the frame breaks at the store; the store, run as Python, calls __setattr__, whose
    # own frame breaks for the same reason
    compare(fn, fresh(torch.ones(2), SetattrDoubles()), graphs=1, breaks=2)


def test_submodule_attribute_and_parameter_lookup_unchanged():
    lin = torch.nn.Linear(2, 2)
    compare(lambda x, m: m(x) + m.weight.sum(), lambda: (torch.ones(2), lin), fullgraph=True)


def test_getattr_default_only_when_absent():
    def fn(x, lst, d, obj):
        return (x + getattr(lst, "scale", 1.0) + getattr(d, "scale", 2.0),
                getattr(obj, "scale", 0), getattr(obj, "absent", 5), lst.append(2))

    compare(fn, lambda: (torch.ones(2), [1], {"a": 1}, InstanceShadowsClassConstant(3)), fullgraph=True)


def test_getattr_of_a_missing_attribute_raises_like_eager():
    compare(lambda x, lst: x + lst.scale, fresh(torch.ones(2), [1]), graphs=0, breaks=1)

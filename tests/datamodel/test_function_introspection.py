"""Reading a function's or a bound method's own attributes in compiled code:
``fn.__code__`` (a constant, pinned on the function), ``__defaults__``/``__kwdefaults__``
(guarded values), ``method.__func__``/``__self__`` (the function and the instance),
and everything else a bound method delegates to its function (``__name__``,
``__wrapped__``, ...), as Hugging Face's decorators read them. Compiled equals eager, in
one graph; a changed ``__code__`` or default recompiles."""
from __future__ import annotations

import functools

import pytest
import torch

import fastdynamo
from fastdynamo.convert_frame import Recorder

from .helpers import check

pytestmark = pytest.mark.usefixtures("fresh_cache")


def with_config_defaults(func):
    """The shape of transformers' ``merge_with_config_defaults``: a ``functools.wraps``
    wrapper with ``*args, **kwargs`` that finds an argument's position in
    ``func.__code__.co_varnames``."""
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        if "scale" in func.__code__.co_varnames:
            index = func.__code__.co_varnames.index("scale") - 1  # -1 for self
            if len(args) <= index and kwargs.get("scale") is None:
                kwargs["scale"] = self.default_scale
        return func(self, *args, **kwargs)
    return wrapper


class Scaled(torch.nn.Module):
    default_scale = 3.0

    @with_config_defaults
    def forward(self, x, scale=None):
        return x * scale


def test_code_of_a_wrapped_function_in_a_decorator():
    check(Scaled(), torch.ones(2), graphs=1, breaks=0, fullgraph=True)
    check(Scaled(), torch.ones(2), 2.0, graphs=1, breaks=0, fullgraph=True)


def scaled_by_arg_count(x, fn):
    return x * fn.__code__.co_argcount + len(fn.__name__)


def two(a, b):
    return a + b


def three(a, b, c):
    return a + b + c


def test_code_is_a_constant_pinned_on_the_function():
    recorder = Recorder()
    compiled = fastdynamo.compile(scaled_by_arg_count, backend="eager", fullgraph=True, _recorder=recorder)
    assert torch.equal(compiled(torch.ones(2), two), scaled_by_arg_count(torch.ones(2), two))
    guards = [g.text() for g in recorder.captures[0].result.guards]
    assert any(g.startswith("fn.__code__ is <code") for g in guards), guards
    original = two.__code__
    try:
        two.__code__ = three.__code__   # the same function object, another code: recompiles
        assert torch.equal(compiled(torch.ones(2), two), scaled_by_arg_count(torch.ones(2), two))
    finally:
        two.__code__ = original
    assert len(recorder.captures) == 2


def with_defaults(a, b=2, *, c=5):
    return a * b + c


def read_defaults(x, fn):
    return x * fn.__defaults__[0] + fn.__kwdefaults__["c"]


def test_defaults_are_guarded_values():
    recorder = Recorder()
    compiled = fastdynamo.compile(read_defaults, backend="eager", fullgraph=True, _recorder=recorder)
    assert torch.equal(compiled(torch.ones(2), with_defaults), read_defaults(torch.ones(2), with_defaults))
    original = with_defaults.__defaults__
    try:
        with_defaults.__defaults__ = (7,)
        assert torch.equal(compiled(torch.ones(2), with_defaults), read_defaults(torch.ones(2), with_defaults))
    finally:
        with_defaults.__defaults__ = original
    assert len(recorder.captures) == 2


class Chunked(torch.nn.Module):
    def chunk(self, x, factor=2):
        """Doubles."""
        return x * factor

    def forward(self, x):
        method = self.chunk
        fn = method.__func__
        assert method.__self__ is self
        n = len(method.__name__) + len(fn.__qualname__) + method.__code__.co_argcount
        n += len(method.__doc__) + method.__defaults__[0]
        return fn(self, x) + n


def test_bound_method_func_self_and_delegated_attributes():
    check(Chunked(), torch.ones(2), graphs=1, breaks=0, fullgraph=True)


def traced(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1
    return wrapper


class Decorated(torch.nn.Module):
    @traced
    def step(self, x):
        return x * 2

    def plain(self, x):
        return x * 3

    def forward(self, x):
        out = x
        for method in (self.step, self.plain):
            if hasattr(method, "__wrapped__"):
                out = out + method.__wrapped__(self, x)
            else:
                out = out + method(x)
        return out + hasattr(self.plain, "__code__") + hasattr(self.plain, "missing")


def test_hasattr_on_a_bound_method_asks_its_function():
    check(Decorated(), torch.ones(2), graphs=1, breaks=0, fullgraph=True)


class SlotsOfMethod(torch.nn.Module):
    def forward(self, x):
        return x + (self.forward.__call__ is not None)


def test_method_type_attributes_other_than_func_and_self_break():
    got = check(SlotsOfMethod(), torch.ones(1), graphs=0)
    assert any("attribute '__call__' of a bound method" in b.reason for b in got.breaks)

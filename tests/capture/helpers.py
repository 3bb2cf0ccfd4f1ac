"""Helpers for capture tests: translate a function, build its transformed code and run
it the way the native runtime does (``FunctionType(code, globals, name, None,
closure)`` with the frame's argument values), then compare with eager."""
from __future__ import annotations

import inspect
import itertools
import types

import torch

from fastdynamo._runtime import native
from fastdynamo.backends import lookup_backend
from fastdynamo.bytecode import parameter_names
from fastdynamo.capture import Broken, translate
from fastdynamo.guards import compile_guards
from fastdynamo.transform.codegen import transformed_code

_counter = itertools.count()


def localsplus_for(fn, args, kwargs):
    """Argument values in localsplus order (what the hook hands the callback)."""
    sig = inspect.signature(fn)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    return [bound.arguments[name] if name in bound.arguments else () for name in parameter_names(fn.__code__)]


def capture(fn, *args, **kwargs):
    """Translate ``fn`` for these arguments; returns (Captured or Broken, callable that
    runs the transformed code like the hook does, or None)."""
    fn = getattr(fn, "__func__", fn)
    localsplus = localsplus_for(fn, args, kwargs)
    result = translate(fn.__code__, localsplus, fn.__globals__, fn.__globals__.get("__builtins__", __builtins__),
                       fn.__closure__)
    if isinstance(result, Broken):
        return result, None
    name = f"__test_compiled_fn_{next(_counter)}"
    fn.__globals__[name] = lookup_backend("eager")(result.graph_module, result.example_inputs)
    code = transformed_code(fn.__code__, compiled_fn_name=name, graph_inputs=result.graph_inputs,
                            output=result.output, effects=result.effects)
    new_fn = types.FunctionType(code, fn.__globals__, fn.__name__, None, fn.__closure__)
    return result, lambda *a, **k: _call_with_localsplus(new_fn, fn, a, k)


def _call_with_localsplus(new_fn, fn, args, kwargs):
    # The hook passes every argument explicitly (the transformed function has no defaults).
    sig = inspect.signature(fn)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    return new_fn(*bound.args, **bound.kwargs)


def frame_for(fn, *args, **kwargs):
    """A ``fastdynamo._native.Frame`` for a call of ``fn``: what the hook would hand the
    callback, to check captured guards with the real ``GuardSet``."""
    fn = getattr(fn, "__func__", fn)
    return native().Frame(fn.__code__, localsplus_for(fn, args, kwargs), fn.__globals__, None, fn.__closure__)


def assert_same(actual, expected, rtol=1e-5, atol=1e-5):
    """Values, shapes, dtypes and structure are equal."""
    assert type(actual) is type(expected), (type(actual), type(expected))
    if isinstance(expected, torch.Tensor):
        assert actual.shape == expected.shape, (actual.shape, expected.shape)
        assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
        assert actual.requires_grad == expected.requires_grad
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e, rtol, atol)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected)
        for k in expected:
            assert_same(actual[k], expected[k], rtol, atol)
    else:
        assert actual == expected


def check_capture(fn, *args, **kwargs):
    """Capture ``fn`` whole (one graph with at least one op: the native runtime runs a
    frame without tensor operations as Python), check that its guards (the native
    ``GuardSet``) accept the call it was captured from, run the transformed code and
    compare with eager; returns the Captured result."""
    result, run = capture(fn, *args, **kwargs)
    assert not isinstance(result, Broken), str(getattr(result, "reason", None))
    assert result.op_count > 0, f"{fn.__qualname__}: no tensor operation captured\n{result.graph_module.code}"
    result.graph_module.graph.lint()
    assert compile_guards(result.guards).check(frame_for(fn, *args, **kwargs)), [g.text() for g in result.guards]
    expected = fn(*args, **kwargs)
    assert_same(run(*args, **kwargs), expected)
    return result

"""Helpers for the kernel generator's tests, run through both renderers: Triton kernels in
Triton's interpreter on CPU (set up by the repository's root conftest.py, before triton
is imported) and C++ kernels compiled for this machine. A test that takes ``compare``
runs once per target; Triton options (block sizes) do not apply to C++ and are ignored there."""
from __future__ import annotations

import functools

import pytest
import torch

from kernel_targets import TARGETS, TOLERANCES


def assert_same(actual, expected, dtype=None):
    """Compiled output vs eager, recursively over tuples/lists; exact for non-floats."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e, dtype)
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected
        return
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    if expected.dtype.is_floating_point:
        tolerance = TOLERANCES[dtype or expected.dtype]
        torch.testing.assert_close(actual, expected, equal_nan=True, **tolerance)
    else:
        assert torch.equal(actual, expected), (actual, expected)


def float32_reference(fn, inputs):
    """Eager on float32 copies of half inputs, cast back: what the kernels compute (one
    rounding at the end), so half-type results can be held to 1-2 ulp."""
    widened = [t.float() if t.dtype in (torch.float16, torch.bfloat16) else t for t in inputs]
    result = fn(*widened)
    half = next(t.dtype for t in inputs if t.dtype in (torch.float16, torch.bfloat16))

    def narrow(value):
        if isinstance(value, (tuple, list)):
            return type(value)(narrow(v) for v in value)
        return value.to(half) if isinstance(value, torch.Tensor) and value.dtype == torch.float32 else value

    return narrow(result)


def compile_and_compare(fn, *inputs, options=None, dtype=None, expect_kernels=None, reference=None,
                        target="triton"):
    """Trace ``fn``, compile it for ``target``, check it against eager; return the compiled graph."""
    gm = torch.fx.symbolic_trace(fn) if not isinstance(fn, torch.fx.GraphModule) else fn
    compiled = TARGETS[target](gm, list(inputs), options)
    assert compiled.fallback_reason is None, compiled.fallback_reason
    expected = reference(fn, inputs) if reference else fn(*inputs)
    assert_same(compiled(*inputs), expected, dtype)
    if expect_kernels is not None:
        assert compiled.kernel_count == expect_kernels, open(compiled.source_path).read()
    return compiled


@pytest.fixture(params=sorted(TARGETS))
def target(request) -> str:
    """Each kernel target in turn."""
    return request.param


@pytest.fixture
def compare(target):
    return functools.partial(compile_and_compare, target=target)


@pytest.fixture(name="float32_reference")
def float32_reference_fixture():
    return float32_reference

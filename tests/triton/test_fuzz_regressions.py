"""Regressions found by the hypothesis suites (long profile), reduced to minimal programs.

Fixed: 0-dim values are now loaded as a block of one repeated element (render.py), as
stores already were.

1. ``torch.maximum(s, x)`` with ``s`` a 0-dim tensor (an input, or a reduction's result
   in its own buffer) and ``x`` a block: the kernel loads ``s`` as a Triton scalar
   (``tl.load(s + (0))``) and renders ``tl.where((s > x) | (s != s), s, x)``. In Triton's
   interpreter (3.9) a comparison of two scalars yields a handle typed like its operands
   (fp32), so when ``s != s`` is splatted against the block it becomes float32 zeros and
   ``|`` raises ``TypeError: ufunc 'bitwise_or' not supported``. ``torch.minimum(s, x)``
   fails the same way; with the block first (``torch.minimum(x, s)``) it works. Found by test_triton_random_graphs.py
   (ops amax(x, 0), amax(., 0), maximum(., x.sum(0))).
   Through ``fastdynamo.compile`` the wrong kernel is hidden: the graph raises, the frame
   reruns as Python (fallback.py) and the result is right, on every call.
"""
from __future__ import annotations

import pytest
import torch

import fastdynamo
from fastdynamo.backends.triton import compile_graph
from fastdynamo.convert_frame import Recorder


def max_scalar_first(s, x):
    return torch.maximum(s, x)


def max_of_reductions(x):
    # amax(x, 0).amax(0) is a 0-dim buffer loaded as a scalar by the kernel that sums x
    v = x.amax(0).amax(0)
    return v, torch.maximum(v, x.sum(0))


@pytest.mark.parametrize("op", [torch.maximum, torch.minimum])
@pytest.mark.parametrize("shape", [(5,), (3, 5)])
def test_maximum_of_0dim_input_and_block(compare, op, shape):
    s, x = torch.tensor(0.25), torch.randn(shape, generator=torch.Generator().manual_seed(0))
    compare(lambda s, x: op(s, x), s, x)


def test_maximum_of_two_reductions(compare):
    compare(max_of_reductions, torch.randn(3, 5, generator=torch.Generator().manual_seed(0)))


def test_minimum_block_first_works(compare):
    s, x = torch.tensor(0.25), torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
    compare(lambda s, x: torch.minimum(x, s), s, x)


def _recording_triton(calls):
    """The triton backend, recording each call of its compiled graphs and what it raised
    (fastdynamo's rerun fallback would otherwise swallow the error)."""

    def backend(gm, example_inputs):
        compiled = compile_graph(gm, list(example_inputs))

        def run(*args):
            try:
                result = compiled(*args)
            except Exception as error:
                calls.append(error)
                raise
            calls.append("ok")
            return result

        return run

    return backend


@pytest.mark.usefixtures("fresh_cache")
def test_maximum_of_0dim_input_through_compile():
    s, x = torch.tensor(0.25), torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
    expected = max_scalar_first(s, x)
    # the eager backend and the default one give eager's values...
    for backend in ("eager", "triton"):
        recorder = Recorder()
        torch.testing.assert_close(fastdynamo.compile(max_scalar_first, backend=backend, _recorder=recorder)(s, x),
                                   expected)
        assert len(recorder.captures) == 1
        fastdynamo.reset()
    # ...and the default backend's graph ran without raising (no rerun as Python)
    calls = []
    torch.testing.assert_close(fastdynamo.compile(max_scalar_first, backend=_recording_triton(calls))(s, x), expected)
    assert calls == ["ok"]

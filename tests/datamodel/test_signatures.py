"""``inspect.signature`` of a function or bound method from outside the frame, computed at
trace time and guarded on what it depends on (``__code__``, which parameters have
defaults, no ``__signature__``/``__wrapped__``): compiled equals eager in one graph; a
changed function recompiles; what is not modelled breaks with a reason."""
from __future__ import annotations

import inspect

import pytest
import torch
from transformers.pytorch_utils import apply_chunking_to_forward

import fastdynamo
from fastdynamo.convert_frame import Recorder

from .helpers import check

pytestmark = pytest.mark.usefixtures("fresh_cache")


class Marker:
    pass


MARK = Marker()


def target(a, b: int = 2, *args, c=MARK, d: "str" = "x", **kwargs) -> float:
    return a


def describe_parameters(x, fn):
    parameters = inspect.signature(fn).parameters
    out = x * len(parameters) + ("c" in parameters) + ("zzz" in parameters)
    for name in parameters:
        parameter = parameters[name]
        out = out + len(parameter.name) + int(parameter.kind) + (parameter.annotation is inspect.Parameter.empty)
        if name != "c":  # (an object default `is` a class: decided once sentinels are pinned)
            out = out + (parameter.default is parameter.empty)
    b = parameters["b"]
    out = out + b.default + (type(parameters["c"].default) is Marker) + (b.annotation is int)
    out = out + len(parameters["d"].default) + (parameters.get("nope") is None)
    return out + (inspect.signature(fn).return_annotation is float)


def test_parameters_names_kinds_defaults_annotations():
    check(describe_parameters, torch.ones(2), target, graphs=1, breaks=0, fullgraph=True)


class Layer(torch.nn.Module):
    def chunk(self, hidden):
        return hidden * 2

    def forward(self, x):
        return apply_chunking_to_forward(self.chunk, 0, 1, x)  # BERT's feed-forward


def test_transformers_apply_chunking_to_forward():
    check(Layer(), torch.ones(2, 3), graphs=1, breaks=0, fullgraph=True)


def count_parameters(x, fn):
    return x * len(inspect.signature(fn).parameters)


def two(a, b=1):
    return a + b


def test_a_changed_function_recompiles():
    recorder = Recorder()
    compiled = fastdynamo.compile(count_parameters, backend="eager", _recorder=recorder)
    x = torch.ones(2)
    assert torch.equal(compiled(x, two), count_parameters(x, two))
    saved = two.__code__, two.__defaults__
    try:
        two.__code__ = (lambda a, b, c=0: a).__code__   # one more parameter
        assert torch.equal(compiled(x, two), count_parameters(x, two))
        two.__wrapped__ = target                         # inspect follows it: unsupported
        assert torch.equal(compiled(x, two), count_parameters(x, two))
    finally:
        two.__code__, two.__defaults__ = saved
        del two.__wrapped__
    # two graphs for the two codes; with __wrapped__ the call breaks (x * n after it is
    # the resume function's graph)
    assert len(recorder.captures) == 3
    assert "which has __wrapped__" in recorder.breaks[0].reason


def signature_returned(x, fn):
    return x + 1, inspect.signature(fn)


def test_a_signature_that_outlives_the_trace_is_not_rebuilt():
    got = check(signature_returned, torch.ones(2), two, graphs=0, breaks=1)
    assert str(got.value[1]) == "(a, b=1)" and "cannot rebuild" in got.breaks[0].reason


def with_options(x, fn):
    return x * len(inspect.signature(fn, follow_wrapped=False).parameters)


def test_options_are_unsupported():
    got = check(with_options, torch.ones(2), two, graphs=1)
    assert "inspect.signature with follow_wrapped" in got.breaks[0].reason

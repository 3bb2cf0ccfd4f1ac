"""The real models of issue #12 (tests/models/zoo.py), compiled with ``fullgraph=True``:
one graph, no break, results equal to eager's, in ``torch.no_grad()``, in grad mode, and
in a training step (gradients and updated weights equal to eager's).

The Hugging Face models take a few seconds each; they carry the ``models`` marker, which
the default run includes (select or leave them out with ``-m models`` / ``-m "not models"``).
"""
from __future__ import annotations

from typing import Any

import pytest
import torch

import fastdynamo

from .zoo import CASES, ModelCase

pytestmark = [pytest.mark.usefixtures("fresh_cache"), pytest.mark.models]


def _flat(output: Any) -> list[torch.Tensor]:
    """The tensors of a model output, in order (ModelOutput, tuples, tensors, caches)."""
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, dict):
        return [t for value in output.values() for t in _flat(value)]
    if isinstance(output, (tuple, list)):
        return [t for value in output for t in _flat(value)]
    return []


def _assert_same_output(compiled: Any, eager: Any) -> None:
    assert type(compiled) is type(eager)
    if isinstance(eager, dict):
        assert list(compiled.keys()) == list(eager.keys())
    flat_compiled, flat_eager = _flat(compiled), _flat(eager)
    assert len(flat_compiled) == len(flat_eager)
    for got, want in zip(flat_compiled, flat_eager, strict=True):
        torch.testing.assert_close(got, want)


# Models not yet captured whole (issue #12 stays open on them), with where their breaks
# are: T5's decoder makes its cache from ``config.get_text_config(decoder=True)``, which
# deep-copies the config (``copy.deepcopy``, ``to_dict``) on every call. They are tested
# without ``fullgraph``: results equal to eager's, and every break in those files.
WHOLE = list(CASES)
# tests/training/ trains the torch.nn and torchvision models (eval and train mode, buffers).
HF_WHOLE = [case for case in WHOLE if case.name in ("gpt2", "bert", "t5", "llama")]


def _graph_count(model: torch.nn.Module, args: tuple) -> tuple[int, int]:
    report = fastdynamo.explain(model, backend="eager")(*args)
    return report.graph_count, report.graph_break_count


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("case", WHOLE, ids=[case.name for case in WHOLE])
def test_inference_is_one_graph_equal_to_eager(case: ModelCase, grad: bool) -> None:
    model, args = case.build()
    with torch.set_grad_enabled(grad):
        assert _graph_count(model, args) == (1, 0)
        expected = model(*args)
        compiled = fastdynamo.compile(model, backend="eager", fullgraph=True)
        first = compiled(*args)
        again = compiled(*args)  # a cache hit
    _assert_same_output(first, expected)
    _assert_same_output(again, expected)


@pytest.mark.parametrize("case", HF_WHOLE, ids=[case.name for case in HF_WHOLE])
def test_training_step_matches_eager(case: ModelCase) -> None:
    """Forward (compiled), the loss and ``backward`` and an SGD step outside: the
    gradients and the updated weights equal eager's, over two steps."""
    eager_model, args = case.build()
    model, _ = case.build()
    eager_model.train()
    model.train()
    _disable_dropout(eager_model)
    _disable_dropout(model)
    compiled = fastdynamo.compile(model, backend="eager", fullgraph=True)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (eager_model, model)]
    for _ in range(2):
        for step_model, optimizer in zip((eager_model, compiled), optimizers, strict=True):
            optimizer.zero_grad()
            case.loss(step_model(*args)).backward()
            optimizer.step()
        for (name, want), got in zip(eager_model.named_parameters(), model.parameters(), strict=True):
            torch.testing.assert_close(got.grad, want.grad, msg=f"gradient of {name}")
            torch.testing.assert_close(got, want, msg=f"parameter {name}")
    assert _graph_count(model, args) == (1, 0)


def _disable_dropout(model: torch.nn.Module) -> None:
    """Training mode without randomness: dropout draws from the generator, and the two
    models would draw different masks."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0


# Graphs whose every op is an ATen call (the fused encoder layer): the default backend
# runs the ATen ops, there being no kernel to generate.
NO_KERNELS = {"transformer_encoder"}


@pytest.mark.parametrize("case", WHOLE, ids=[case.name for case in WHOLE])
def test_default_backend_generates_cpp_kernels_equal_to_eager(case: ModelCase) -> None:
    """The default backend on CPU tensors: one graph with C++ kernels, results equal to
    eager's (also on a cache hit)."""
    from fastdynamo.convert_frame import Recorder

    model, args = case.build()
    recorder = Recorder()
    with torch.no_grad():
        expected = model(*args)
        compiled = fastdynamo.compile(model, fullgraph=True, _recorder=recorder)
        first = compiled(*args)
        again = compiled(*args)
    _assert_same_output(first, expected)
    _assert_same_output(again, expected)
    (capture,) = recorder.captures
    kernels = getattr(capture.compiled_fn, "kernel_count", 0)
    if case.name in NO_KERNELS:
        assert kernels == 0 and "no kernels" in capture.compiled_fn.fallback_reason
    else:
        assert kernels >= 1 and capture.compiled_fn.target.name == "cpp", capture.compiled_fn

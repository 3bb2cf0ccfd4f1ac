"""Shared by the training tests: compile on the default backend, find the training graphs
it returned, compare gradients with eager's."""
from __future__ import annotations

from typing import Any, Callable

import torch

import fastdynamo
from fastdynamo.backends.training import TrainingGraph
from fastdynamo.convert_frame import Recorder


def compile_recorded(fn: Callable[..., Any], **options: Any) -> tuple[Callable[..., Any], Recorder]:
    """``fastdynamo.compile`` on the default backend, with a recorder of its graphs."""
    recorder = Recorder()
    return fastdynamo.compile(fn, _recorder=recorder, **options), recorder


def training_graphs(recorder: Recorder) -> list[TrainingGraph]:
    return [c.compiled_fn for c in recorder.captures if isinstance(c.compiled_fn, TrainingGraph)]


def grads(tensors: list[torch.Tensor]) -> list[torch.Tensor | None]:
    return [None if t.grad is None else t.grad.clone() for t in tensors]


def assert_same_grads(got: list, want: list, scale_tolerance: float = 0.0) -> None:
    """Equal gradients (None where eager has None); ``scale_tolerance``: an absolute
    tolerance relative to the largest gradient of each tensor (fused reductions sum in
    another order than ATen's)."""
    assert len(got) == len(want)
    for index, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g is None) == (w is None), f"gradient {index}: {g is None=} {w is None=}"
        if w is not None:
            finite = w[w.isfinite()]
            atol = scale_tolerance * float(finite.abs().max() if finite.numel() else 0.0) + 1e-5
            torch.testing.assert_close(g, w, atol=atol, rtol=1e-3 if scale_tolerance else 1.3e-6, equal_nan=True,
                                       msg=lambda m, i=index: f"gradient {i}: {m}")

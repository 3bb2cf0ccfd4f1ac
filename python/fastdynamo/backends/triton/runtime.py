"""What generated wrappers call at run time: kernel launchers and layout fix-ups.

A :class:`KernelLauncher` holds one kernel, its static sizes and the candidate launch
configurations. In Triton's interpreter (or with one candidate) it uses the first; on a
GPU it times each candidate once on the first call and keeps the fastest for the
process. This module imports nothing from fastdynamo's native runtime.

>>> configs = [{"XBLOCK": 128, "num_warps": 4}]
>>> KernelLauncher(None, "pointwise", xnumel=1000, rnumel=1, configs=configs).grid(configs[0])
(8,)
"""
from __future__ import annotations

import logging
import os
import sys

import torch

logger = logging.getLogger("fastdynamo.backends.triton")


class InterpreterStateError(RuntimeError):
    """TRITON_INTERPRET is set now but triton was imported without it (or the reverse)."""


def interpreter_enabled() -> bool:
    """Whether kernels run in Triton's interpreter (``TRITON_INTERPRET=1`` before import).

    Raises InterpreterStateError when the flag and the imported triton disagree, since
    kernels would then fail in confusing ways.
    """
    requested = os.environ.get("TRITON_INTERPRET", "0") == "1"
    if "triton" not in sys.modules:
        return requested
    sigmoid = getattr(getattr(sys.modules.get("triton.language"), "standard", None), "sigmoid", None)
    imported_interpreted = type(sigmoid).__name__ == "InterpretedFunction"
    if sigmoid is not None and imported_interpreted != requested:
        raise InterpreterStateError(
            "TRITON_INTERPRET must be set before `import triton`: it is "
            f"{'set' if requested else 'unset'} now but triton was imported "
            f"{'with' if imported_interpreted else 'without'} it"
        )
    return requested


class KernelLauncher:
    """Launch one generated kernel with a chosen configuration (see module docstring)."""

    def __init__(self, kernel, template: str, xnumel: int, rnumel: int, configs: list):
        self.kernel = kernel
        self.template = template
        self.xnumel = xnumel
        self.rnumel = rnumel
        self.configs = list(configs)
        self.chosen: dict | None = self.configs[0] if len(self.configs) == 1 else None

    def grid(self, config: dict) -> tuple:
        return ((self.xnumel + config["XBLOCK"] - 1) // config["XBLOCK"],)

    def launch(self, config: dict, args: tuple) -> None:
        self.kernel[self.grid(config)](*args, **config)

    def __call__(self, *args) -> None:
        if self.chosen is None:
            self.chosen = self._choose(args)
        self.launch(self.chosen, args)

    def _choose(self, args: tuple) -> dict:
        on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
        if not on_gpu or interpreter_enabled():
            return self.configs[0]
        # Time each candidate once; kernels are pure functions of their inputs, so
        # re-running them into the same outputs is harmless.
        timings = []
        for config in self.configs:
            self.launch(config, args)  # compiles
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(5):
                self.launch(config, args)
            end.record()
            torch.cuda.synchronize()
            timings.append((start.elapsed_time(end), config))
        best = min(timings, key=lambda pair: pair[0])[1]
        logger.debug("picked %s for %s (%s)", best, self.kernel, timings)
        return best


def with_strides(tensor: torch.Tensor, shape: tuple, stride: tuple) -> torch.Tensor:
    """``tensor`` in the layout kernels were generated for (an extern may pick another).

    >>> with_strides(torch.ones(2, 3).t(), (3, 2), (2, 1)).stride()
    (2, 1)
    """
    if tuple(tensor.stride()) == tuple(stride) or tensor.numel() <= 1:
        return tensor
    out = torch.empty_strided(shape, stride, dtype=tensor.dtype, device=tensor.device)
    out.copy_(tensor)
    return out

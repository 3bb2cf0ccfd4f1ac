"""What generated Triton wrappers call at run time: kernel launchers, and whether kernels
can run in Triton's interpreter.

A :class:`KernelLauncher` holds one kernel, its static sizes (or, for a kernel whose
sizes are launch arguments, the number of rows of the call: the grid follows it) and
the candidate launch configurations. In Triton's interpreter (or with one candidate) it uses the first; on a
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
import threading

import torch

from .templates import next_power_of_two

logger = logging.getLogger("fastdynamo.backends.triton")


def interpreter_enabled() -> bool:
    """Whether kernels run in Triton's interpreter: ``TRITON_INTERPRET=1`` now (see
    :func:`interpreter_mismatch` for when that is not enough)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def interpreter_mismatch() -> str | None:
    """Why no kernel can run in this process, or None.

    ``triton.jit`` reads ``TRITON_INTERPRET`` each time it wraps a function: triton's own
    library when ``triton`` is imported, our kernels when their module is imported. Both
    must agree, so the flag must be set before ``triton`` is imported, and torch imports
    it early (``torch._dynamo``, which every ``FakeTensorMode`` loads, so the first
    capture). This never imports triton.
    """
    language = sys.modules.get("triton.language")
    sigmoid = getattr(getattr(language, "standard", None), "sigmoid", None)
    if sigmoid is None:
        return None  # not imported yet: the flag as it is now will hold for both
    imported_interpreted = type(sigmoid).__name__ == "InterpretedFunction"
    if imported_interpreted == interpreter_enabled():
        return None
    if imported_interpreted:
        return "triton was imported with TRITON_INTERPRET=1, which is no longer set"
    return "TRITON_INTERPRET=1 was set after triton was imported (torch imports it on the first capture)"


# Triton's interpreter runs a launch's programs one after another in Python, keeping the
# current program's index in one module-global builder (`interpreter_builder.grid_idx`,
# set per program, read by `tl.program_id`) and patching `triton.language` for the
# launch: two threads launching at once read each other's indices. Interpreter launches
# therefore run one at a time. (Re-entrant: a launch never waits on itself.)
_INTERPRETER_LAUNCH = threading.RLock()


class KernelLauncher:
    """Launch one generated kernel with a chosen configuration (see module docstring)."""

    def __init__(self, kernel, template: str, xnumel: int | None, rnumel: int | None, configs: list):
        self.kernel = kernel
        self.template = template
        self.xnumel = xnumel
        self.rnumel = rnumel
        self.configs = list(configs)
        self.chosen: dict | None = self.configs[0] if len(self.configs) == 1 else None

    def grid(self, config: dict, xnumel: int | None = None) -> tuple:
        rows = self.xnumel if xnumel is None else xnumel
        return ((rows + config["XBLOCK"] - 1) // config["XBLOCK"],)

    def launch(self, config: dict, args: tuple, xnumel: int | None = None, rnumel: int | None = None) -> None:
        if interpreter_enabled():
            config = self._fitted(config, xnumel, rnumel)
            with _INTERPRETER_LAUNCH:
                self.kernel[self.grid(config, xnumel)](*args, **config)
        else:
            self.kernel[self.grid(config, xnumel)](*args, **config)

    def _fitted(self, config: dict, xnumel: int | None, rnumel: int | None) -> dict:
        """In the interpreter, blocks shrink to this call's sizes: a kernel with sizes as
        arguments was generated with blocks for any size, and there a block larger than
        the data costs time (a reduction combines element by element in Python) while a
        new block size costs nothing. On a GPU a new block size is a new compiled binary:
        one configuration serves every size."""
        fitted = dict(config)
        if xnumel is not None:
            fitted["XBLOCK"] = min(config["XBLOCK"], next_power_of_two(xnumel))
        if rnumel is not None and self.template == "looped_reduction":
            fitted["RBLOCK"] = min(config["RBLOCK"], next_power_of_two(rnumel))
        return fitted

    def __call__(self, *args, xnumel: int | None = None, rnumel: int | None = None) -> None:
        """Launch on ``args``; ``xnumel``/``rnumel`` are this call's row count and row
        length when sizes are arguments."""
        if self.chosen is None:
            self.chosen = self._choose(args, xnumel)
        self.launch(self.chosen, args, xnumel, rnumel)

    def _choose(self, args: tuple, xnumel: int | None) -> dict:
        on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
        if not on_gpu or interpreter_enabled():
            return self.configs[0]
        # Time each candidate once; kernels are pure functions of their inputs, so
        # re-running them into the same outputs is harmless.
        timings = []
        for config in self.configs:
            self.launch(config, args, xnumel)  # compiles
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(5):
                self.launch(config, args, xnumel)
            end.record()
            torch.cuda.synchronize()
            timings.append((start.elapsed_time(end), config))
        best = min(timings, key=lambda pair: pair[0])[1]
        logger.debug("picked %s for %s (%s)", best, self.kernel, timings)
        return best

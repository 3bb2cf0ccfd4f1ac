"""The Triton kernel target: which inputs its kernels run on, and what they depend on.

* CUDA tensors: generated kernels.
* CPU tensors with ``TRITON_INTERPRET=1`` (set before triton is imported): the same
  kernels in Triton's interpreter (how the tests run them; slow by design).
* CPU tensors otherwise: ATen ops, said once per process (a warning).

Nothing here imports ``triton`` unless kernels are generated or run, so a process can
still set ``TRITON_INTERPRET=1`` after importing fastdynamo.

>>> TritonTarget().device_reason(torch.device("meta"))
'device meta'
"""
from __future__ import annotations

import dataclasses
import os

import torch

from . import runtime
from .render import TritonRenderer

CPU_WITHOUT_INTERPRETER = "CPU tensors without TRITON_INTERPRET=1 (set before triton is imported)"


@dataclasses.dataclass(frozen=True)
class TritonOptions:
    """Knobs that change generated code (they are part of the cache key).

    ``persistent_max``: rows up to this many elements reduce in one block.
    ``config_overrides``: template kind -> candidate launch configs (tests force small blocks).
    """

    persistent_max: int = 1024
    config_overrides: tuple = ()

    @staticmethod
    def from_env() -> "TritonOptions":
        return TritonOptions(persistent_max=int(os.environ.get("FASTDYNAMO_TRITON_PERSISTENT_MAX", "1024")))


@dataclasses.dataclass(frozen=True)
class TritonTarget:
    """The :class:`kernels.target.KernelTarget` for Triton."""

    options: TritonOptions = dataclasses.field(default_factory=TritonOptions.from_env)
    name: str = "triton"
    channels_last: bool = False  # 2-d convolutions read channels-last inputs
    choose: bool = False  # the default backend: kernels only where they pay (on a GPU)

    def renderer(self) -> TritonRenderer:
        return TritonRenderer(self.options.persistent_max, dict(self.options.config_overrides))

    def device_reason(self, device: torch.device) -> str | None:
        if device.type not in ("cpu", "cuda"):
            return f"device {device.type}"
        if device.type == "cpu" and not runtime.interpreter_enabled():
            return CPU_WITHOUT_INTERPRETER
        return runtime.interpreter_mismatch()

    def process_wide(self, reason: str) -> bool:
        return reason == CPU_WITHOUT_INTERPRETER or reason == runtime.interpreter_mismatch()

    def chooses(self, device: torch.device) -> bool:
        return self.choose and device.type == "cuda"  # (in the interpreter they never pay)

    def key_parts(self, device: torch.device) -> tuple:
        import triton

        return (torch.__version__, triton.__version__, runtime.interpreter_enabled(), _device_key(device))


def _device_key(device: torch.device) -> tuple:
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return ("cuda", index, torch.cuda.get_device_capability(index))
    return (device.type,)

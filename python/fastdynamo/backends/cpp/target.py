"""The C++ kernel target: CPU tensors get kernels compiled by the machine's C++ compiler.

The generated module is machine-independent (it holds the C++ source); the binary it
loads is keyed on the source, the compiler, its flags and the CPU's vector ISA (the
runtime's binary cache), so a cache directory shared between machines never loads a
wrong binary. No compiler, or a failed compile: ATen ops, the reason said once.

>>> CppTarget().device_reason(torch.device("cuda"))
'device cuda (the C++ target runs CPU tensors)'
"""
from __future__ import annotations

import dataclasses

import torch

from .render import CppRenderer
from .runtime import NO_TOOLCHAIN


@dataclasses.dataclass(frozen=True)
class CppOptions:
    """Knobs that change generated code (part of the cache key); none yet."""


@dataclasses.dataclass(frozen=True)
class CppTarget:
    """The :class:`kernels.target.KernelTarget` for C++."""

    options: CppOptions = dataclasses.field(default_factory=CppOptions)
    name: str = "cpp"
    channels_last: bool = True  # 2-d convolutions read channels-last inputs
    choose: bool = False  # the default backend: kernels only where they pay

    def renderer(self) -> CppRenderer:
        return CppRenderer()

    def device_reason(self, device: torch.device) -> str | None:
        if device.type != "cpu":
            return f"device {device.type} (the C++ target runs CPU tensors)"
        return None

    def process_wide(self, reason: str) -> bool:
        return reason.startswith(NO_TOOLCHAIN)

    def chooses(self, device: torch.device) -> bool:
        return self.choose

    def key_parts(self, device: torch.device) -> tuple:
        return (torch.__version__,)

"""What generated C++ wrappers call at run time: the compiled library and its kernels.

``load(source)`` compiles the graph's translation unit (the runtime header, then the
kernels) once per machine and configuration (the binary cache) and loads it;
``Library.kernel(name, dtypes, int_count)`` is one kernel as a callable
``kernel(*tensors, *ints)``: the native launcher (``_native.CpuKernel``: data pointers
read in Rust, the dtypes checked, no Python per tensor) when the extension has it, else
the same contract through ctypes.
"""
from __future__ import annotations

import ctypes
import logging
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import torch

from ..kernels.compiler import TargetUnavailable, strict
from . import binary_cache
from .cxx import ToolchainUnavailable

logger = logging.getLogger("fastdynamo.backends.cpp")
NO_TOOLCHAIN = "no C++ toolchain"

HEADER = Path(__file__).parent / "include" / "fastdynamo_kernels.h"


@lru_cache(maxsize=None)
def header_source() -> str:
    return HEADER.read_text().replace("#pragma once\n", "", 1)  # (it heads the translation unit)


class Library:
    """A loaded translation unit; ``kernel`` binds one of its functions."""

    def __init__(self, handle: ctypes.CDLL):
        self.handle = handle

    def kernel(self, name: str, dtypes: Sequence[torch.dtype], int_count: int) -> Any:
        function = getattr(self.handle, name)
        address = ctypes.cast(function, ctypes.c_void_p).value
        launcher = _native_launcher()
        if launcher is not None:
            return launcher(address, name, list(dtypes), int_count, self.handle)
        return CtypesKernel(function, name, tuple(dtypes), int_count)


def load(source: str) -> Library:
    """The library of ``source`` (kernels only; the runtime header goes first). No
    toolchain, or a compile error (a bug of the generator, raised in strict mode), is a
    :class:`TargetUnavailable`: the graph runs as ATen ops with that reason."""
    try:
        return Library(binary_cache.load(header_source() + "\n" + source))
    except ToolchainUnavailable as why:
        raise TargetUnavailable(f"{NO_TOOLCHAIN}: {why}") from None
    except binary_cache.CompileError as error:
        if strict():
            raise
        logger.warning("generated C++ failed to compile, the graph runs as ATen ops: %s", error)
        raise TargetUnavailable(f"generated C++ failed to compile ({error.source_path})") from None


def _native_launcher() -> Any:
    from ..._runtime import native

    return getattr(native(), "CpuKernel", None)


class CtypesKernel:
    """``kernel(*tensors, *ints)`` through ctypes: the launcher's contract in Python
    (dtypes and device checked, data pointers from ``data_ptr()``)."""

    def __init__(self, function: Any, name: str, dtypes: tuple, int_count: int):
        function.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64)]
        function.restype = None
        self.function, self.name, self.dtypes, self.int_count = function, name, dtypes, int_count
        self.pointers = ctypes.c_void_p * len(dtypes)
        self.ints = ctypes.c_int64 * max(int_count, 1)

    def __call__(self, *args: Any) -> None:
        tensors, ints = args[:len(self.dtypes)], args[len(self.dtypes):]
        if len(ints) != self.int_count:
            raise TypeError(f"kernel {self.name} takes {len(self.dtypes) + self.int_count} arguments, got {len(args)}")
        for position, (tensor, dtype) in enumerate(zip(tensors, self.dtypes, strict=True)):
            if not isinstance(tensor, torch.Tensor) or tensor.dtype != dtype or tensor.device.type != "cpu":
                raise TypeError(f"kernel {self.name}: argument {position} must be a CPU {dtype} tensor")
        self.function(self.pointers(*(t.data_ptr() for t in tensors)), self.ints(*ints))

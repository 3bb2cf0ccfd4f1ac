"""fastdynamo: a frame-level JIT compiler for PyTorch.

The native runtime (``fastdynamo._native``) is loaded lazily through
:mod:`fastdynamo._runtime`, so that pure-Python parts such as the Triton backend
import on machines where the extension was not built.
"""
from __future__ import annotations

import sys

from ._version import __version__

SUPPORTED_PYTHONS = ((3, 11),)

if sys.version_info[:2] not in SUPPORTED_PYTHONS:
    _names = ", ".join(f"{major}.{minor}" for major, minor in SUPPORTED_PYTHONS)
    raise ImportError(
        f"fastdynamo supports CPython {_names}; this is "
        f"{sys.version_info.major}.{sys.version_info.minor}"
    )

from . import config  # noqa: E402
from .api import OptimizedModule, compile, disable, reset  # noqa: E402
from .compiling import is_compiling  # noqa: E402
from .exc import FullGraphError  # noqa: E402
from .explain import ExplainOutput, explain  # noqa: E402

__all__ = [
    "ExplainOutput",
    "FullGraphError",
    "OptimizedModule",
    "__version__",
    "compile",
    "config",
    "disable",
    "explain",
    "is_compiling",
    "reset",
]

"""fastdynamo: a frame-level JIT compiler for PyTorch.

The native runtime (``fastdynamo._native``) is loaded lazily through
:mod:`fastdynamo._runtime`, so that pure-Python parts such as the Triton backend
import on machines where the extension was not built.
"""
from __future__ import annotations

import sys
import sysconfig

from ._version import __version__

# Each needs its own build of the native runtime (its frame layout and evaluator rules
# differ); `bytecode/version.py` holds the bytecode differences.
SUPPORTED_PYTHONS = ((3, 11), (3, 12), (3, 13))


def _unsupported_reason() -> str | None:
    """Why this interpreter cannot run fastdynamo, or None when it can."""
    names = ", ".join(f"{major}.{minor}" for major, minor in SUPPORTED_PYTHONS)
    this = f"{sys.version_info.major}.{sys.version_info.minor}"
    if sys.implementation.name != "cpython":
        return f"fastdynamo supports CPython {names}; this is {sys.implementation.name} {this}"
    if sys.version_info[:2] not in SUPPORTED_PYTHONS:
        return f"fastdynamo supports CPython {names}; this is {this}"
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return (f"fastdynamo supports CPython {names} with the GIL; this is a free-threaded "
                f"build ({this}t), whose frames and code objects it cannot hook")
    return None


if (_reason := _unsupported_reason()) is not None:
    raise ImportError(_reason)

from . import config  # noqa: E402
from .api import OptimizedModule, compile, disable, reset  # noqa: E402
from .compiling import is_compiling  # noqa: E402
from .exc import BackendCompilerFailed, FullGraphError  # noqa: E402
from .explain import ExplainOutput, explain  # noqa: E402
from .marks import mark_dynamic, mark_static  # noqa: E402

__all__ = [
    "ExplainOutput",
    "BackendCompilerFailed",
    "FullGraphError",
    "OptimizedModule",
    "__version__",
    "compile",
    "config",
    "disable",
    "explain",
    "is_compiling",
    "mark_dynamic",
    "mark_static",
    "reset",
]

"""Lazy access to the native extension, with a version check.

Everything that needs the PEP 523 hook goes through :func:`native`; modules that only
need torch (backends, bytecode tools) never import the extension.
"""
from __future__ import annotations

import functools
from types import ModuleType

from . import __version__


class NativeRuntimeError(ImportError):
    """The native extension is missing or does not match the Python package."""


@functools.cache
def native() -> ModuleType:
    """Return ``fastdynamo._native``, checking that it was built from this version.

    >>> native().runtime_version() == __version__
    True
    """
    try:
        from . import _native
    except ImportError as err:  # pragma: no cover - depends on the build
        raise NativeRuntimeError(_missing_native_message()) from err
    if _native.runtime_version() != __version__:
        raise NativeRuntimeError(
            f"fastdynamo._native is version {_native.runtime_version()}, "
            f"the Python package is {__version__}: reinstall with `pip install .`"
        )
    return _native


def _missing_native_message() -> str:
    """Why ``_native`` did not load: not built at all, or built for other versions only
    (each CPython version needs its own build)."""
    import sys
    from pathlib import Path

    built = sorted(p.name for p in Path(__file__).parent.glob("_native*.so"))
    this = f"{sys.version_info.major}.{sys.version_info.minor}"
    if built:
        return (f"fastdynamo's native runtime is not built for CPython {this} (found {', '.join(built)}); "
                f"install with `python{this} -m pip install .` or `make build-dev PYTHON=python{this}`")
    return "fastdynamo's native runtime is not built; install with `pip install .`"

"""Lazy access to the native extension, with a version check.

Everything that needs the PEP 523 hook goes through :func:`native`; modules that only
need torch (backends, bytecode tools) never import the extension.
"""
from __future__ import annotations

import functools
from types import CodeType
from typing import TYPE_CHECKING, Literal, Protocol

from ._version import __version__

if TYPE_CHECKING:
    from . import _native as _stub


class NativeRuntime(Protocol):
    """What the package uses of ``fastdynamo._native``, typed from its stub (``_native.pyi``).

    A type checker cannot name a module as a type; it can check that a module satisfies
    a protocol. :func:`native` returns the module as this protocol, so mypy checks the
    stub against these members and every call against them.
    """

    @property
    def CacheEntry(self) -> type[_stub.CacheEntry]: ...
    @property
    def GuardSet(self) -> type[_stub.GuardSet]: ...
    @property
    def Dispatcher(self) -> type[_stub.Dispatcher]: ...
    @property
    def DirectCall(self) -> type[_stub.DirectCall]: ...
    @property
    def SKIP(self) -> Literal[1]: ...
    @property
    def SKIP_RECURSIVE(self) -> Literal[2]: ...
    @property
    def REGION_WRAPPER(self) -> Literal[4]: ...
    def runtime_version(self) -> str: ...
    def set_callback(self, callback: _stub._CallbackSetting) -> _stub._CallbackSetting: ...
    def set_code_action(self, code: CodeType, action: _stub._Action) -> None: ...
    def cache_entries(self, code: CodeType) -> list[_stub.CacheEntry]: ...
    def publish_cache_entry(self, code: CodeType, entry: _stub.CacheEntry) -> bool: ...
    def reset(self) -> None: ...
    def set_recompile_limit(self, limit: int) -> None: ...


class NativeRuntimeError(ImportError):
    """The native extension is missing or does not match the Python package."""


@functools.cache
def native() -> NativeRuntime:
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

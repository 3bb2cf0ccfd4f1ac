"""Backend registry: a backend is ``backend(graph_module, example_inputs) -> callable``.

:data:`DEFAULT_BACKEND` (``"kernels"``: Triton kernels on CUDA, C++ kernels on CPU;
``"inductor"`` names it too) is what :func:`fastdynamo.compile` uses when no backend is
given, as Inductor is torch.compile's; ``"triton"`` and ``"cpp"`` force one code
generator, ``"eager"`` runs the captured graph as it is.

>>> @register_backend("noop")
... def noop(gm, example_inputs):
...     return gm.forward
>>> lookup_backend("noop") is noop
True
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

Backend = Callable[[Any, list], Callable[..., Any]]

DEFAULT_BACKEND = "kernels"
_REGISTRY: dict[str, Backend] = {}
# Built-in backends are imported on first lookup so that importing the registry is cheap.
_BUILTIN_MODULES = {"eager": "fastdynamo.backends.eager", "triton": "fastdynamo.backends.triton",
                    "cpp": "fastdynamo.backends.cpp", "kernels": "fastdynamo.backends.default",
                    "inductor": "fastdynamo.backends.default"}


def register_backend(name: str) -> Callable[[Backend], Backend]:
    """Register ``fn`` under ``name``; used as a decorator."""

    def register(fn: Backend) -> Backend:
        if not callable(fn):
            raise TypeError(f"backend {name!r} must be callable, got {type(fn).__name__}")
        _REGISTRY[name] = fn
        return fn

    return register


def lookup_backend(backend: str | Backend) -> Backend:
    """Resolve a backend name or callable to a callable backend."""
    if callable(backend):
        return backend
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a name or a callable, got {type(backend).__name__}")
    if backend not in _REGISTRY and backend in _BUILTIN_MODULES:
        importlib.import_module(_BUILTIN_MODULES[backend])
    try:
        return _REGISTRY[backend]
    except KeyError:
        raise ValueError(
            f"unknown backend {backend!r}; known: {sorted(set(_REGISTRY) | set(_BUILTIN_MODULES))}"
        ) from None


def frame_callable(compiled_fn: Callable[..., Any]) -> Callable[..., Any]:
    """What a compiled frame calls: the backend's callable, or the faster one it offers as
    ``fastdynamo_guarded`` for inputs that pass the frame's guards (the metadata it was
    compiled for), which it then does not check again."""
    return getattr(compiled_fn, "fastdynamo_guarded", compiled_fn)


def describe(compiled_fn: Any) -> str:
    """How a backend's callable runs its graph, in one line (what explain() prints).

    >>> describe(lambda x: x)
    'function'
    """
    described = getattr(compiled_fn, "fastdynamo_description", None)
    if described is not None:  # a callable that says for itself (a training graph's two halves)
        return str(described)
    reason = getattr(compiled_fn, "fallback_reason", None)
    if reason:
        return f"ATen ops: {reason}"
    kernels = getattr(compiled_fn, "kernel_count", None)
    if kernels is None:
        return type(compiled_fn).__name__
    target = getattr(getattr(compiled_fn, "target", None), "name", "generated")
    choice = getattr(compiled_fn, "choice", None)
    why = f" ({choice.why})" if choice is not None else ""
    return f"{kernels} {target} kernel{'s' if kernels != 1 else ''}{why}"


def list_backends() -> list[str]:
    """Names of the registered and built-in backends."""
    return sorted(set(_REGISTRY) | set(_BUILTIN_MODULES))

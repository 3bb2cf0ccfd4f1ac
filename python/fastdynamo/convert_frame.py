"""The callback the native runtime calls on a cache miss: frame in, cache entry out.

``ConvertFrame(backend, fullgraph)`` is what :func:`fastdynamo.compile` installs with
``native().set_callback``. For each intercepted frame it decides to skip it (library and
generated code, generators), translates it, compiles the graph with the backend, builds
the transformed code with :func:`fastdynamo.codegen.transformed_code` and returns a
``CacheEntry``. A frame that cannot be captured runs as ordinary Python (``SKIP``) and
the reason is recorded; with ``fullgraph=True`` it raises :class:`FullGraphError`.
"""
from __future__ import annotations

import inspect
import itertools
import os
import sysconfig
import threading
from dataclasses import dataclass, field
from types import CodeType
from typing import Any, Callable

import torch

from . import config, logs
from ._runtime import native
from .backends.eager import GENERATED_FILENAME_PREFIX
from .codegen import transformed_code
from .guards import compile_guards
from .symbolic import CaptureResult, translate
from .symbolic.exc import FullGraphError, Unsupported

_compiled_fn_counter = itertools.count()
# One translation at a time: FakeTensorMode and grad-mode juggling are process-global.
_compile_lock = threading.RLock()
_NOT_COMPILED_FLAGS = (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
                       | inspect.CO_ITERABLE_COROUTINE)


@dataclass
class BreakReason:
    """A frame that ran as ordinary Python, and why."""

    location: str  # file:line of the construct in user code
    reason: str
    where: list[tuple[str, int, str]] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.location}: {self.reason}"


@dataclass
class CaptureRecord:
    """A compiled frame, as explain and the demo report it."""

    code: CodeType
    result: CaptureResult
    transformed: CodeType


class Recorder:
    """Collects what the callback did (explain uses one)."""

    def __init__(self) -> None:
        self.captures: list[CaptureRecord] = []
        self.breaks: list[BreakReason] = []


def _package_dir(name: str) -> str | None:
    try:
        module = __import__(name)
    except ImportError:
        return None
    file = getattr(module, "__file__", None)
    return os.path.dirname(file) + os.sep if file else None


_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep


def _skip_dirs() -> tuple[str, ...]:
    dirs = [_package_dir(name) for name in config.skip_packages]
    # single-file stdlib modules resolve to the stdlib dir itself: handled by _STDLIB
    return tuple(d for d in dirs if d and d != _STDLIB)


def _mark_skip_recursive(runtime: Any, compiled_fn: Any) -> None:
    """The backend's callable is never user code: neither it nor what it calls is compiled."""
    target = getattr(compiled_fn, "__func__", compiled_fn)
    code = getattr(target, "__code__", None)
    if code is None and isinstance(compiled_fn, torch.nn.Module):
        code = getattr(type(compiled_fn).forward, "__code__", None)
    if code is None:
        code = getattr(getattr(type(compiled_fn), "__call__", None), "__code__", None)
    if code is not None:
        runtime.set_code_action(code, runtime.SKIP_RECURSIVE)


class ConvertFrame:
    """The compile callback for one ``fastdynamo.compile`` configuration."""

    def __init__(self, backend: Callable, fullgraph: bool = False, entry_codes: set | None = None,
                 recorder: Recorder | None = None):
        self.backend = backend
        self.fullgraph = fullgraph
        self.entry_codes = entry_codes if entry_codes is not None else set()
        self.recorder = recorder
        self._skip_dirs = _skip_dirs()

    def __call__(self, frame: Any) -> Any:
        runtime = native()
        code = frame.f_code
        skip = self.skip_action(code)
        if skip is not None:
            return getattr(runtime, skip)
        with _compile_lock:
            return self.compile_frame(runtime, frame)

    def skip_action(self, code: CodeType) -> str | None:
        """``"SKIP"``/``"SKIP_RECURSIVE"`` for frames never compiled on their own."""
        filename = code.co_filename
        if filename.startswith(GENERATED_FILENAME_PREFIX) or filename.startswith("<eval_with_key>"):
            return "SKIP_RECURSIVE"  # generated graph code: nothing below it is user code
        if code in self.entry_codes:
            return None
        if code.co_flags & _NOT_COMPILED_FLAGS or code.co_name == "<module>":
            return "SKIP"
        if filename.startswith(self._skip_dirs):
            return "SKIP"
        if filename.startswith(_STDLIB) and "site-packages" not in filename:
            return "SKIP"
        return None

    def compile_frame(self, runtime: Any, frame: Any) -> Any:
        code = frame.f_code
        if logs.enabled("recompiles"):
            entries = runtime.cache_entries(code)
            if entries:
                reason = entries[0].guards.failure_reason(frame)
                logs.emit("recompiles", f"recompiling {code.co_qualname} ({code.co_filename}:"
                          f"{code.co_firstlineno}): {reason or 'guards failed'}")
        result = translate(code, list(frame.localsplus), frame.f_globals, frame.f_builtins,
                           frame.closure, self.backend)
        if result.break_reason is not None:
            return self.record_break(runtime, code, result.break_reason)
        if result.op_count == 0 and not self.fullgraph:
            logs.emit("breaks", f"{code.co_qualname}: no tensor operations; runs as Python")
            return runtime.SKIP
        _mark_skip_recursive(runtime, result.compiled_fn)
        name = f"__compiled_fn_{next(_compiled_fn_counter)}"
        frame.f_globals[name] = result.compiled_fn
        new_code = transformed_code(code, compiled_fn_name=name, graph_inputs=result.graph_inputs,
                                    output=result.output_plan, effects=result.effects)
        self.log_capture(code, result, new_code)
        if self.recorder is not None:
            self.recorder.captures.append(CaptureRecord(code, result, new_code))
        return runtime.CacheEntry(compile_guards(result.guards), new_code)

    def record_break(self, runtime: Any, code: CodeType, err: Unsupported) -> Any:
        brk = BreakReason(err.location, err.reason, list(err.where))
        logs.emit("breaks", f"{code.co_qualname} runs as Python: {brk}")
        if self.recorder is not None:
            self.recorder.breaks.append(brk)
        if self.fullgraph:
            raise FullGraphError(f"fullgraph=True: cannot capture {code.co_qualname}: {brk}")
        return runtime.SKIP

    def log_capture(self, code: CodeType, result: CaptureResult, new_code: CodeType) -> None:
        where = f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno})"
        if logs.enabled("graph"):
            logs.emit("graph", f"captured graph for {where}", result.graph_module.code)
        if logs.enabled("guards"):
            logs.emit("guards", f"guards for {where}", "\n".join(g.text() for g in result.guards))
        if logs.enabled("bytecode"):
            logs.emit("bytecode", f"bytecode for {where}", logs.side_by_side(code, new_code))

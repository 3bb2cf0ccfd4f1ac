"""The callback the native runtime calls on a cache miss: frame in, cache entry out.

``ConvertFrame(backend, fullgraph)`` is what :func:`fastdynamo.compile` installs with
``native().set_callback``. It is the one place where the stages meet: for each
intercepted frame it decides to skip it (library and generated code, generators),
runs capture (:mod:`fastdynamo.capture`: plans, graph, guards), compiles the graph with
the backend, builds the transformed code (:mod:`fastdynamo.transform`) and returns a
``CacheEntry``. At a graph break it asks transform where to split, capture for the
state there, and transform for the split code. A frame that cannot be captured runs as
ordinary Python (``SKIP``) and the reason is recorded; with ``fullgraph=True`` it raises
:class:`FullGraphError`.
"""
from __future__ import annotations

import contextlib
import gc
import itertools
import linecache
import logging
import os
import sysconfig
import threading
import warnings
import weakref
from dataclasses import dataclass, field
from types import CodeType
from typing import Any, Callable, Iterator

import torch

from . import config, logs
from ._runtime import native
from .backends import frame_callable
from .backends.eager import GENERATED_FILENAME_PREFIX, graph_function_returning
from .backends.kernels.cache import GENERATED_MODULE_FILES
from .bytecode import format_side_by_side, version
from .capture import Broken, Captured, DynamicPolicy, translate, translate_to_break
from .dispatch import direct_call_for
from .exc import BackendCompilerFailed, FullGraphError, Unsupported
from .guards import compile_guards
from .guards.shape_guards import ShapeLoweringError
from .transform.codegen import transformed_code
from .transform.fallback import fallback_for
from .transform.graph_break import GraphCall, choose_region, split_frame

_compiled_fn_counter = itertools.count()
# One translation at a time: FakeTensorMode and grad-mode juggling are process-global.
_compile_lock = threading.RLock()
# Module bodies, and comprehensions called by Python code (their argument is an
# iterator the translator cannot read; traced frames inline them instead).
_NOT_COMPILED_NAMES = frozenset({"<module>", "<listcomp>", "<dictcomp>", "<setcomp>"})
_NOT_COMPILED_FLAGS = version.GENERATOR_FLAGS


# Automatic dynamic shapes: per code object, the sizes each tensor source had in its
# traces (None for a dim that changed); ``reset`` forgets them.
_frame_sizes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def forget_frame_sizes() -> None:
    _frame_sizes.clear()


# (globals dict, name) of every compiled graph stored for transformed code to load.
_installed_fns: list[tuple[dict, str]] = []


def _compiled_fn_name() -> str:
    return f"__compiled_fn_{next(_compiled_fn_counter)}"


def forget_compiled_fns() -> None:
    """Remove the compiled graphs from the globals they were stored in, and the sources of
    generated code from ``linecache`` and torch.fx's source cache (``reset``)."""
    while _installed_fns:
        f_globals, name = _installed_fns.pop()
        f_globals.pop(name, None)
    fx_sources = _fx_source_cache()
    while _generated_sources:
        name = _generated_sources.pop()
        linecache.cache.pop(name, None)
        fx_sources.pop(name, None)


# Pseudo-filenames of the code compiling a frame generated (graph code, torch.fx modules),
# registered in linecache for tracebacks; ``reset`` removes them.
_generated_sources: list[str] = []


def _fx_source_cache() -> dict:
    loader = getattr(torch.fx.graph_module, "_loader", None)
    cache = getattr(loader, "eval_cache", None)
    return cache if isinstance(cache, dict) else {}


def _generated_names() -> set[str]:
    return {name for name in itertools.chain(list(linecache.cache), list(_fx_source_cache())) if name.startswith("<")}


def _record_generated_sources(before: set[str]) -> None:
    _generated_sources.extend(_generated_names() - before)


@dataclass
class BreakReason:
    """A frame that ran as ordinary Python, and why."""

    location: str  # file:line of the construct in user code
    reason: str
    where: list[tuple[str, int, str]] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.location}: {self.reason}"


def frame_name(code: CodeType) -> str:
    """``qualname (file:line)``: how reports name a frame."""
    return f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno})"


@dataclass
class InternalError:
    """A frame that ran as Python because the compiler failed on it: while compiling it,
    or when its graph raised where the frame, run as Python, did not
    (``config.fallback_on_internal_error``; with it off the error is raised instead)."""

    frame: str  # frame_name() of the code
    error: str  # "TypeName: message"
    stage: str  # "compiling" or "running its graph"

    def __str__(self) -> str:
        return f"{self.frame}, {self.stage}: {self.error}"


@dataclass
class CaptureRecord:
    """A compiled frame, as explain and the demo report it."""

    code: CodeType
    result: Captured
    compiled_fn: Any
    transformed: CodeType


class Recorder:
    """Collects what the callback did (explain uses one)."""

    def __init__(self) -> None:
        self.captures: list[CaptureRecord] = []
        self.breaks: list[BreakReason] = []
        self.internal_errors: list[InternalError] = []

    def record_internal_error(self, code: CodeType, error: BaseException, stage: str) -> None:
        self.internal_errors.append(InternalError(frame_name(code), f"{type(error).__name__}: {error}", stage))


def _package_dir(name: str) -> str | None:
    try:
        module = __import__(name)
    except ImportError:
        return None
    file = getattr(module, "__file__", None)
    return os.path.dirname(file) + os.sep if file else None


_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep
# Pseudo-filenames of code generated at run time (dataclasses, namedtuple, exec/eval of a
# string, sympy's lambdify, torch's generated helpers).
_GENERATED_SOURCES = ("<string>", "<lambdifygenerated", "<torch", "<frozen ", "<__array_function__")


def _other_compiler_dirs() -> tuple[str, ...]:
    torch_dir = os.path.dirname(torch.__file__) + os.sep
    return tuple(torch_dir + sub + os.sep for sub in ("_dynamo", "_inductor", "compiler"))


_OTHER_COMPILER_DIRS = _other_compiler_dirs()


def _entry_passing_now(runtime: Any, frame: Any) -> Any:
    """An entry of the frame's code whose guards pass for it (pushed by another thread
    between the native lookup and this callback taking the compile lock)."""
    for entry in runtime.cache_entries(frame.f_code):
        if entry.guards.check(frame):
            return entry
    return None


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
        # reads the class's __call__ to get its code, not to test callability
        code = getattr(getattr(type(compiled_fn), "__call__", None), "__code__", None)  # noqa: B004
    if code is not None:
        runtime.set_code_action(code, runtime.SKIP_RECURSIVE)


def _unmodelled_torch_state() -> str | None:
    """Torch modes the translator does not model (their effect on dtypes and tensor
    kinds is not in the graph)."""
    if torch._C._is_any_autocast_enabled():
        return "autocast"
    if torch.is_inference_mode_enabled():
        return "inference mode"
    return None


# Internal errors raised (not run around) under ``config.fallback_on_internal_error =
# False``, for the test suite's check that none happened: raised, one can look exactly like
# the user's own error and pass for it.
STRICT_INTERNAL_ERRORS: list[str] = []


class _MetaFailureFilter(logging.Filter):
    """Drops FakeTensorMode's log of an op that raised on fake inputs ("failed while
    attempting to run meta for ..."): with mismatched shapes a trace meets the error the
    user's call will raise, ends the graph there (the break names the error) and the
    original Python raises it; torch's error log with its traceback would only repeat it
    before the user's own exception."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("failed while attempting to run meta")


_FAKE_TENSOR_LOG = logging.getLogger("torch._subclasses.fake_tensor")
_META_FAILURES = _MetaFailureFilter()


@contextlib.contextmanager
def _meta_failures_unlogged() -> Iterator[None]:
    _FAKE_TENSOR_LOG.addFilter(_META_FAILURES)
    try:
        yield
    finally:
        _FAKE_TENSOR_LOG.removeFilter(_META_FAILURES)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while a frame compiles, and one collection of the young
    generations after it (left alone when the caller turned the collector off).

    A trace keeps its variables, fake tensors and FX nodes alive from start to end (T5:
    hundreds of thousands of objects). Collected young while alive, they are promoted to
    the old generation, whose growth then starts a full collection of the whole process
    heap in the middle of the compile (T5 in a process holding ~500k objects: 0.4-0.6 s of
    a 1.7-2.3 s first call). Paused, they stay young; the trace over, most are garbage,
    and the young collection frees them without walking the old heap."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(1)


class ConvertFrame:
    """The compile callback for one ``fastdynamo.compile`` configuration."""

    def __init__(self, backend: Callable, fullgraph: bool = False, entry_codes: set | None = None,
                 recorder: Recorder | None = None, dynamic: bool | None = None):
        self.backend = backend
        self.dynamic = dynamic
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
            existing = _entry_passing_now(runtime, frame)
            if existing is not None:
                return existing  # another thread compiled this code while we waited
            sources_before = _generated_names()
            try:
                with _collector_paused(), _meta_failures_unlogged():
                    result = self.compile_frame(runtime, frame)
                if isinstance(result, runtime.CacheEntry):
                    # Visible before the lock is released: the GIL may pass to a thread
                    # that missed meanwhile before this callback is back in the hook.
                    runtime.publish_cache_entry(code, result)
                return result
            except (FullGraphError, BackendCompilerFailed):
                raise  # the user's to fix: not a compiler bug to run around
            except Exception as bug:  # noqa: BLE001 - a compiler bug must not break user code
                if not config.fallback_on_internal_error:
                    # strict (the tests): raised, and recorded too, since a bug can raise
                    # the very error the user's program would (the same operation failing)
                    STRICT_INTERNAL_ERRORS.append(f"{frame_name(code)}: {type(bug).__name__}: {bug}")
                    if self.recorder is not None:
                        self.recorder.record_internal_error(code, bug, "compiling")
                    raise
                return self.internal_error(runtime, code, bug)
            finally:
                _record_generated_sources(sources_before)

    def run_backend(self, code: CodeType, graph_module: Any, example_inputs: list) -> Any:
        """The backend's callable for a captured graph; a backend that raises or returns
        something uncallable is reported as torch.compile does (``BackendCompilerFailed``)."""
        if getattr(self.backend, "__module__", "").startswith("fastdynamo."):
            # our own backend: its failure is a compiler bug (an internal error, counted
            # by explain and run around when config.fallback_on_internal_error is on)
            return self.backend(graph_module, example_inputs)
        name = getattr(self.backend, "__qualname__", repr(self.backend))
        try:
            compiled_fn = self.backend(graph_module, example_inputs)
        except Exception as err:
            raise BackendCompilerFailed(f"backend {name} raised {type(err).__name__} compiling a graph of "
                                        f"{frame_name(code)}: {err}") from err
        if not callable(compiled_fn):
            raise BackendCompilerFailed(f"backend {name} returned {type(compiled_fn).__name__} for a graph of "
                                        f"{frame_name(code)}, not a callable")
        return compiled_fn

    def internal_error(self, runtime: Any, code: CodeType, bug: Exception) -> Any:
        """A bug in the compiler: the frame runs as Python, and the bug is reported."""
        reason = f"internal error: {type(bug).__name__}: {bug}"
        logs.emit("breaks", f"{code.co_qualname} runs as Python: {reason}")
        warnings.warn(f"fastdynamo: {frame_name(code)} runs as Python after a compiler {reason}",
                      RuntimeWarning, stacklevel=2)
        if self.recorder is not None:
            self.recorder.breaks.append(
                BreakReason(f"{code.co_filename}:{code.co_firstlineno}", reason))
            self.recorder.record_internal_error(code, bug, "compiling")
        return runtime.SKIP

    def skip_action(self, code: CodeType) -> str | None:
        """``"SKIP"``/``"SKIP_RECURSIVE"`` for frames never compiled on their own."""
        filename = code.co_filename
        if filename.startswith(GENERATED_FILENAME_PREFIX) or filename.startswith("<eval_with_key>") \
                or filename in GENERATED_MODULE_FILES:
            return "SKIP_RECURSIVE"  # generated graph code: nothing below it is user code
        if filename.startswith(_OTHER_COMPILER_DIRS):
            # torch.compile's own frames (its compiled-function wrappers, its compiler):
            # what runs below them is torch.compile's to compile, never ours.
            return "SKIP_RECURSIVE"
        if code in self.entry_codes:
            return None
        if filename.startswith(_GENERATED_SOURCES):
            # Code generated at run time by libraries: dataclass and namedtuple methods,
            # sympy's and torch's generated helpers, exec'd strings.
            return "SKIP"
        if code.co_flags & _NOT_COMPILED_FLAGS or code.co_name in _NOT_COMPILED_NAMES:
            return "SKIP"
        if not code.co_flags & version.CO_OPTIMIZED:
            return "SKIP"  # class bodies, exec'd code: their locals are a namespace dict
        if filename.startswith(self._skip_dirs):
            return "SKIP"
        if filename.startswith(_STDLIB) and "site-packages" not in filename:
            return "SKIP"
        if filename.startswith("<frozen "):
            return "SKIP"  # frozen standard-library modules (codecs, importlib, ...)
        return None

    def compile_frame(self, runtime: Any, frame: Any) -> Any:
        code = frame.f_code
        state = _unmodelled_torch_state()
        if state is not None:
            # Not a property of the code: run it as Python this time, try again next call.
            logs.emit("breaks", f"{code.co_qualname} runs as Python this call: {state} is active")
            return None
        if logs.enabled("recompiles"):
            entries = runtime.cache_entries(code)
            if entries:
                # every entry's first failing guard, most recently used first (a dynamic
                # entry's says which shape guard the new sizes broke)
                reasons = [e.guards.failure_reason(frame) or "guards failed" for e in entries]
                logs.emit("recompiles", f"recompiling {code.co_qualname} ({code.co_filename}:"
                          f"{code.co_firstlineno}): {'; '.join(reasons)}")
        result = self.with_shapes(code, lambda policy: translate(
            code, list(frame.localsplus), frame.f_globals, frame.f_builtins, frame.closure, policy))
        if isinstance(result, Broken):
            return self.compile_partial(runtime, frame, result.reason)
        if result.op_count == 0 and not self.fullgraph:
            logs.emit("breaks", f"{code.co_qualname}: no tensor operations; runs as Python")
            return runtime.SKIP
        # a whole frame always has a graph and a return value
        assert result.graph_module is not None and result.output is not None
        compiled_fn = self.run_backend(code, result.graph_module, result.example_inputs)
        name = _compiled_fn_name()
        fallback = fallback_for(runtime, code, result.mutates_inputs, result.draws_random)
        new_code = transformed_code(code, compiled_fn_name=name, graph_inputs=result.graph_inputs,
                                    output=result.output, effects=result.effects,
                                    fallback=fallback, grad_mode=torch.is_grad_enabled(),
                                    may_catch=result.traced_handlers)
        self.install_capture(runtime, frame, name, result, compiled_fn, new_code)
        direct = direct_call_for(runtime, result, frame_callable(compiled_fn), fallback is not None,
                                 torch.is_grad_enabled(), graph_function_returning)
        return runtime.CacheEntry(compile_guards(result.guards), new_code, direct)

    def with_shapes(self, code: CodeType, trace: Callable[[DynamicPolicy], Any]) -> Any:
        """``trace(policy)`` with this configuration's dynamic policy; again with static
        shapes if the symbolic trace assumed a shape condition the native guards cannot
        express."""
        try:
            return trace(self.policy(code))
        except ShapeLoweringError as why:
            logs.emit("dynamic", f"{code.co_qualname}: static shapes: {why}")
            return trace(DynamicPolicy(self.dynamic, None, static_only=True))

    def policy(self, code: CodeType) -> DynamicPolicy:
        seen = _frame_sizes.setdefault(code, {}) if self.dynamic is None else None
        return DynamicPolicy(self.dynamic, seen)

    def install_capture(self, runtime: Any, frame: Any, name: str, capture: Captured,
                        compiled_fn: Any, new_code: CodeType) -> None:
        """Store the compiled graph where ``new_code`` loads it (the frame's globals, as
        ``name``; ``reset`` removes it), and log and record the capture."""
        installed = frame_callable(compiled_fn)
        _mark_skip_recursive(runtime, installed)
        frame.f_globals[name] = installed
        _installed_fns.append((frame.f_globals, name))
        self.log_capture(frame.f_code, capture, new_code)
        if self.recorder is not None:
            self.recorder.captures.append(CaptureRecord(frame.f_code, capture, compiled_fn, new_code))

    def compile_partial(self, runtime: Any, frame: Any, err: Unsupported) -> Any:
        """A graph break at ``err``: compile the frame up to it and resume after it
        (:mod:`fastdynamo.transform.graph_break`), or run the whole frame as Python."""
        code = frame.f_code
        brk = BreakReason(err.location, err.reason, list(err.where))
        if self.fullgraph:
            raise FullGraphError(f"fullgraph=True: cannot capture {code.co_qualname}: {brk}")
        if self.recorder is not None:
            self.recorder.breaks.append(brk)
        name = _compiled_fn_name()
        try:
            capture, transformed = self.with_shapes(code, lambda policy: _split(runtime, frame, err, name, policy))
        except Unsupported as why:
            logs.emit("breaks", f"{code.co_qualname} runs as Python: {brk} (no resume: {why.reason})")
            return runtime.SKIP
        logs.emit("breaks", f"graph break in {code.co_qualname}: {brk}")
        if capture.graph_module is not None:
            compiled_fn = self.run_backend(code, capture.graph_module, capture.example_inputs)
            self.install_capture(runtime, frame, name, capture, compiled_fn, transformed)
        elif logs.enabled("bytecode"):
            logs.emit("bytecode", f"bytecode for {code.co_qualname} (no graph before the break)",
                      format_side_by_side(code, transformed))
        return runtime.CacheEntry(compile_guards(capture.guards), transformed)

    def log_capture(self, code: CodeType, result: Captured, new_code: CodeType) -> None:
        where = f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno})"
        if logs.enabled("graph") and result.graph_module is not None:
            logs.emit("graph", f"captured graph for {where}", result.graph_module.code)
        if logs.enabled("guards"):
            logs.emit("guards", f"guards for {where}", "\n".join(g.text() for g in result.guards))
        if logs.enabled("bytecode"):
            logs.emit("bytecode", f"bytecode for {where}", format_side_by_side(code, new_code))


def _split(runtime: Any, frame: Any, err: Unsupported, name: str,
           policy: DynamicPolicy) -> tuple[Captured, CodeType]:
    """Where to split (transform), the graph and the state there (capture), the split
    code (transform); raises ``Unsupported`` when the frame cannot be split."""
    code = frame.f_code
    region = choose_region(code, err)
    broken = translate_to_break(code, list(frame.localsplus), frame.f_globals, frame.f_builtins,
                                frame.closure, err, region.stop_step, policy)
    if broken.state is None or broken.graph is None:
        raise broken.reason
    capture = broken.graph
    graph = None
    if capture.graph_module is not None:
        fallback = fallback_for(runtime, code, capture.mutates_inputs, capture.draws_random)
        graph = GraphCall(name, capture.graph_inputs, fallback, capture.traced_handlers)
    transformed = split_frame(code, region, broken.state, graph,
                              mark_skip=lambda c: runtime.set_code_action(c, runtime.SKIP))
    return capture, transformed

"""Differential checks for graph breaks: run a function eagerly and compiled on fresh,
equal arguments and compare everything a user can observe: the result (values, dtypes,
``requires_grad``, identity with an argument), the exception (type and message), the
text printed into ``io.StringIO`` buffers, the state of mutated arguments (tensors,
lists, dicts, plain objects) and the grad mode after the call; and how many graphs (and
breaks) the compiled calls produced, so that a frame silently running as Python fails.

>>> import torch
>>> def f(x, buf):
...     print("hi", file=buf)
...     return x + 1
>>> compiled = assert_matches_eager(f, lambda i: call(torch.ones(2) * i, io.StringIO()), graphs=1, breaks=1)
"""
from __future__ import annotations

import inspect
import io
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

import fastdynamo
from fastdynamo.convert_frame import Recorder

BOOL_BREAK = "tensor used as a Python bool"
PRINT_BREAK = "print() has effects outside the graph"


def vec(i: int, n: int = 3) -> torch.Tensor:
    """A float vector whose sum is positive for even ``i``, negative for odd ``i``."""
    sign = 1.0 if i % 2 == 0 else -1.0
    return (torch.arange(n, dtype=torch.float32) + 1 + i) * sign


def leaf(i: int, n: int = 3) -> torch.Tensor:
    return vec(i, n).requires_grad_()


def bad_index(i: int) -> torch.Tensor:
    """A valid index for call 0, then one out of range that only the real data shows."""
    return torch.tensor([1 if i == 0 else 7])


@dataclass
class Call:
    """The arguments of one call."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def objects(self) -> list[Any]:
        """Arguments (and items of list/tuple arguments) an eager result may return as is."""
        found = []
        for value in [*self.args, *self.kwargs.values()]:
            found.append(value)
            if isinstance(value, (list, tuple)):
                found.extend(value)
        return found


def call(*args: Any, **kwargs: Any) -> Call:
    return Call(args, kwargs)


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None
    grad_enabled_after: bool = True


def run(fn: Callable, arguments: Call) -> Outcome:
    try:
        value = fn(*arguments.args, **arguments.kwargs)
    except Exception as err:  # noqa: BLE001 - compared with the other run's
        outcome = Outcome(error=err)
    else:
        outcome = Outcome(value=value)
    outcome.grad_enabled_after = torch.is_grad_enabled()
    return outcome


def assert_same_state(actual: Any, expected: Any, path: str = "result", *,
                      actual_objects: list | None = None, expected_objects: list | None = None) -> None:
    """``actual`` (compiled run) looks exactly like ``expected`` (eager run); an object the
    eager run returned from its arguments must be the matching argument of the compiled run."""
    if expected_objects is not None:
        for i, obj in enumerate(expected_objects):
            if expected is obj and not isinstance(obj, (int, float, str, bool, type(None))):
                assert actual is actual_objects[i], f"{path}: eager returned argument #{i} itself"
                break
    assert type(actual) is type(expected), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
    recurse = dict(actual_objects=actual_objects, expected_objects=expected_objects)
    if isinstance(expected, torch.Tensor):
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.requires_grad == expected.requires_grad, f"{path}: requires_grad"
        assert actual.is_inference() == expected.is_inference(), f"{path}: is_inference"
        assert (actual.grad_fn is None) == (expected.grad_fn is None), f"{path}: grad_fn"
        torch.testing.assert_close(actual.detach(), expected.detach(), equal_nan=True, msg=path)
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same_state(a, e, f"{path}[{i}]", **recurse)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_same_state(actual[key], expected[key], f"{path}[{key!r}]", **recurse)
    elif isinstance(expected, io.StringIO):
        assert actual.getvalue() == expected.getvalue(), f"{path}: printed text differs"
    elif isinstance(expected, torch.nn.Module):
        assert_same_state(actual.state_dict(), expected.state_dict(), f"{path}.state_dict()", **recurse)
    elif isinstance(expected, types.SimpleNamespace) or (
            hasattr(expected, "__dict__") and type(expected).__module__ not in ("builtins", "torch")
            and not callable(expected)):
        assert_same_state(vars(actual), vars(expected), f"{path}.__dict__", **recurse)
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def assert_same_outcome(compiled: Outcome, eager: Outcome, compiled_call: Call, eager_call: Call) -> None:
    if eager.error is not None:
        assert compiled.error is not None, f"eager raised {eager.error!r}, compiled returned {compiled.value!r}"
        assert type(compiled.error) is type(eager.error), f"{compiled.error!r} != {eager.error!r}"
        assert str(compiled.error) == str(eager.error)
    elif compiled.error is not None:
        raise AssertionError(f"compiled raised {compiled.error!r}; eager returned") from compiled.error
    else:
        assert_same_state(compiled.value, eager.value, actual_objects=compiled_call.objects(),
                          expected_objects=eager_call.objects())
    assert_same_state(compiled_call.args, eager_call.args, "arguments after the call")
    assert_same_state(compiled_call.kwargs, eager_call.kwargs, "keyword arguments after the call")
    assert compiled.grad_enabled_after == eager.grad_enabled_after, "grad mode after the call"


def compile_recorded(fn: Callable, **options: Any) -> tuple[Callable, Recorder]:
    """``fastdynamo.compile(fn, backend="eager", **options)`` and the recorder of what it
    captures, for :func:`assert_matches_eager` (``compiled=``, ``recorder=``)."""
    recorder = Recorder()
    options.setdefault("backend", "eager")
    return fastdynamo.compile(fn, _recorder=recorder, **options), recorder


def assert_matches_eager(fn: Callable, make_call: Callable[[int], Call], *, graphs: int | None,
                         breaks: int | None = None, calls: int = 3, compiled: Callable | None = None,
                         recorder: Recorder | None = None, eager: Callable | None = None) -> Callable:
    """Call ``fn`` eagerly and compiled (``backend="eager"``) with ``make_call(i)`` for
    ``i`` in ``range(calls)`` (a fresh, equal argument set for each run) and compare the
    outcomes. The first call compiles, later ones run from the cache (or recompile when
    ``make_call`` changes shapes). The grad mode is restored between calls so that a
    leaked mode fails the comparison instead of the next test.

    ``graphs`` is how many graphs the compiled calls capture in all (the frame, its
    resume functions and recompiles; 0 only for a function meant to run as Python), and
    ``breaks`` how many graph breaks they record. ``None`` leaves the count unchecked:
    only for generated programs, whose counts no one derived. A ``compiled`` function
    comes with its ``recorder`` (:func:`compile_recorded`); only what these calls add is
    counted."""
    if compiled is None:
        compiled, recorder = compile_recorded(fn)
    assert recorder is not None, "a compiled function comes with its recorder (compile_recorded)"
    graphs_before, breaks_before = len(recorder.captures), len(recorder.breaks)
    eager = eager if eager is not None else fn
    mode = torch.is_grad_enabled()
    for i in range(calls):
        eager_call, compiled_call = make_call(i), make_call(i)
        try:
            expected = run(eager, eager_call)
        finally:
            torch.set_grad_enabled(mode)
        try:
            actual = run(compiled, compiled_call)
        finally:
            torch.set_grad_enabled(mode)
        try:
            assert_same_outcome(actual, expected, compiled_call, eager_call)
        except AssertionError as err:
            raise AssertionError(f"call {i} of {fn.__qualname__}: {err}") from err.__cause__
    captured = recorder.captures[graphs_before:]
    recorded = [str(b) for b in recorder.breaks[breaks_before:]]
    if graphs is not None:
        frames = [f"{c.code.co_qualname}:{c.code.co_firstlineno}" for c in captured]
        assert len(captured) == graphs, (f"{fn.__qualname__}: {len(captured)} graphs, expected {graphs}: "
                                         f"{frames}; breaks: {recorded}")
    if breaks is not None:
        assert len(recorded) == breaks, f"{fn.__qualname__}: {len(recorded)} breaks, expected {breaks}: {recorded}"
    for capture in captured:
        capture.result.graph_module.graph.lint()
    return compiled


def line_of(fn: Callable, marker: str, occurrence: int = 0) -> str:
    """``file:line`` of the line of ``fn``'s source that contains ``marker``."""
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    lines, first = inspect.getsourcelines(fn)
    hits = [first + i for i, text in enumerate(lines) if marker in text]
    assert len(hits) > occurrence, f"{marker!r} not in the source of {fn.__qualname__}"
    return f"{fn.__code__.co_filename}:{hits[occurrence]}"


def explain(fn: Callable, *args: Any, **kwargs: Any) -> fastdynamo.ExplainOutput:
    """``fastdynamo.explain`` restoring the grad mode (an explained call may leak it)."""
    mode = torch.is_grad_enabled()
    try:
        return fastdynamo.explain(fn)(*args, **kwargs)
    finally:
        torch.set_grad_enabled(mode)


def assert_breaks(report: fastdynamo.ExplainOutput, graphs: int | None,
                  breaks: list[tuple[str, str]]) -> None:
    """``breaks`` lists ``(file:line, reason substring)`` in the order they happened."""
    found = [(b.location, b.reason) for b in report.break_reasons]
    assert len(found) == len(breaks), f"expected {len(breaks)} breaks, got {found}"
    for (location, reason), (want_location, want_reason) in zip(found, breaks):
        assert location == want_location, f"break at {location}, expected {want_location}: {found}"
        assert want_reason in reason, f"reason {reason!r} lacks {want_reason!r}"
    if graphs is not None:
        assert report.graph_count == graphs, f"{report.graph_count} graphs, expected {graphs}\n{report}"
    for gm in report.graphs:
        gm.graph.lint()

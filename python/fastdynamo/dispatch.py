"""What the native dispatcher needs to call a compiled graph without the frame.

``fastdynamo.compile`` returns a ``_native.Dispatcher`` (``rust/dispatch/``): on a call it
binds the arguments to the function's parameter slots, checks the cache entries' guards
against them, and on a hit calls the entry's compiled graph directly when the entry has
a :class:`DirectCall <fastdynamo._native.DirectCall>`; otherwise it runs the transformed
code, or calls the function with the frame hook on.

An entry gets a direct call when its transformed code is only the graph call: the frame
was captured whole, it has no side effects to replay, and its result is one of the
graph's outputs (or a tuple of them). The transformed code stays the reference: the
direct call reads the same sources, returns the same object, and leaves anything else
(an unreadable input, a graph error the transformed code's fallback handles) to it.

>>> from fastdynamo.plans import BuildTuple, GraphOutput, Shared
>>> direct_output(GraphOutput(0), [])
0
>>> direct_output(BuildTuple([GraphOutput(1), GraphOutput(0)]), [])
(1, 0)
>>> direct_output(Shared(0, BuildTuple([GraphOutput(0)])), [])
(0,)
>>> direct_output(GraphOutput(0), ["a store"]) is None
True
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .plans import BuildTuple, GraphOutput, Shared


def direct_output(plan: Any, effects: Sequence[Any]) -> int | tuple[int, ...] | None:
    """The graph outputs the frame returns (an index, or a tuple of indices for a tuple
    built from them), or None when the transformed code does more than pick them."""
    if effects:
        return None
    while isinstance(plan, Shared):  # built once and kept: the same object at the root
        plan = plan.plan
    if isinstance(plan, GraphOutput):
        return plan.index
    if isinstance(plan, BuildTuple):
        indices = tuple(item.index for item in plan.items if isinstance(item, GraphOutput))
        return indices if len(indices) == len(plan.items) else None
    return None


def direct_call_for(runtime: Any, capture: Any, compiled_fn: Any, has_fallback: bool,
                    grad_mode: bool, returning: Callable[[Any, Any], Any] | None = None) -> Any:
    """The ``DirectCall`` of ``compiled_fn`` for a whole-frame capture, or None (see
    :func:`direct_output`). ``returning(compiled_fn, output)``, when given, may return a
    variant of the graph function whose result is already the frame's (no tuple of all
    outputs to build and pick from); the call then returns what it returns."""
    output = direct_output(capture.output, capture.effects)
    if output is None:
        return None
    inputs = [source.spec() for source in capture.graph_inputs]
    narrowed = returning(compiled_fn, output) if returning is not None else None
    if narrowed is not None:
        return runtime.DirectCall(narrowed, inputs, None, has_fallback, grad_mode)
    return runtime.DirectCall(compiled_fn, inputs, output, has_fallback, grad_mode)


__all__ = ["direct_call_for", "direct_output"]

"""``fastdynamo.explain(fn)(*args, **kwargs)``: what compiling ``fn`` captured, and why
some frames run as Python.

>>> import torch, fastdynamo
>>> def f(x):
...     y = x * 2
...     print("side effect")
...     return y
>>> report = fastdynamo.explain(f)(torch.ones(2))  # doctest: +ELLIPSIS
side effect
>>> report.graph_count, report.graph_break_count
(1, 1)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .backends import DEFAULT_BACKEND, describe
from .convert_frame import BreakReason, InternalError, Recorder
from .transform.fallback import graph_errors_reported_to


@dataclass
class ExplainOutput:
    """The graphs, guards and break reasons of one explained call."""

    graphs: list[torch.fx.GraphModule] = field(default_factory=list)
    guards: list[list[str]] = field(default_factory=list)
    ops_per_graph: list[int] = field(default_factory=list)
    break_reasons: list[BreakReason] = field(default_factory=list)
    compiled_frames: list[str] = field(default_factory=list)
    # frames that ran as Python because the compiler failed on them (only with
    # ``config.fallback_on_internal_error`` on: off, the error is raised)
    internal_errors: list[InternalError] = field(default_factory=list)
    # Per graph, each input with symbolic sizes: "x: (s12, 3)" (dynamic shapes).
    symbolic_sizes: list[list[str]] = field(default_factory=list)
    # Per graph, how the backend runs it: "14 cpp kernels (measured: ...)", or
    # "ATen ops: <why>" (the default backend keeps kernels only where they pay).
    backend_notes: list[str] = field(default_factory=list)

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def graph_break_count(self) -> int:
        return len(self.break_reasons)

    @property
    def internal_error_count(self) -> int:
        return len(self.internal_errors)

    def __str__(self) -> str:
        lines = [f"Graph count: {self.graph_count}",
                 f"Graph break count: {self.graph_break_count}",
                 f"Op count: {sum(self.ops_per_graph)}"]
        if self.internal_errors:
            lines.append(f"Internal errors ({len(self.internal_errors)}), frames run as Python:")
            lines.extend(f"  {i}. {error}" for i, error in enumerate(self.internal_errors, 1))
        if self.break_reasons:
            lines.append("Break reasons:")
            for i, brk in enumerate(self.break_reasons, 1):
                lines.append(f"  {i}. {brk.location}: {brk.reason}")
        for i, (frame, gm, guards, ops) in enumerate(
                zip(self.compiled_frames, self.graphs, self.guards, self.ops_per_graph, strict=True), 1):
            lines.append(f"Graph {i} ({frame}, {ops} ops):")
            lines.extend("    " + line for line in gm.code.strip().splitlines())
            if i <= len(self.backend_notes):
                lines.append(f"  Backend: {self.backend_notes[i - 1]}")
            sizes = self.symbolic_sizes[i - 1] if i <= len(self.symbolic_sizes) else []
            if sizes:
                lines.append("  Symbolic sizes:")
                lines.extend(f"    {s}" for s in sizes)
            lines.append(f"  Guards ({len(guards)}):")
            lines.extend(f"    {g}" for g in guards)
        return "\n".join(lines)


def explain(fn: Callable, backend: str | Callable = DEFAULT_BACKEND,
            dynamic: bool | None = None) -> Callable[..., ExplainOutput]:
    """Return a function that runs ``fn`` compiled with ``backend`` and ``dynamic`` (from
    an empty cache) and reports what was captured instead of ``fn``'s result. See the
    module docstring."""
    from .api import compile, reset

    def run(*args: Any, **kwargs: Any) -> ExplainOutput:
        reset()
        recorder = Recorder()
        compiled = compile(fn, backend=backend, dynamic=dynamic, _recorder=recorder)
        with graph_errors_reported_to(lambda code, error: recorder.record_internal_error(
                code, error, "running its graph")):
            compiled(*args, **kwargs)
        report = ExplainOutput(break_reasons=list(recorder.breaks),
                               internal_errors=list(recorder.internal_errors))
        for capture in recorder.captures:
            assert capture.result.graph_module is not None  # recorded only when a graph ran
            report.graphs.append(capture.result.graph_module)
            report.guards.append([g.text() for g in capture.result.guards])
            report.ops_per_graph.append(capture.result.op_count)
            report.symbolic_sizes.append(_symbolic_sizes(capture.result.graph_module))
            report.backend_notes.append(describe(capture.compiled_fn))
            report.compiled_frames.append(
                f"{capture.code.co_qualname} at {capture.code.co_filename}:{capture.code.co_firstlineno}")
        reset()
        return report

    return run


def _symbolic_sizes(gm: torch.fx.GraphModule) -> list[str]:
    """``name: (s12, 3)`` for each placeholder whose FakeTensor has a symbolic size."""
    lines = []
    for node in gm.graph.nodes:
        val = node.meta.get("val") if node.op == "placeholder" else None
        if isinstance(val, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in val.shape):
            lines.append(f"{node.name}: ({', '.join(str(d) for d in val.shape)})")
    return lines

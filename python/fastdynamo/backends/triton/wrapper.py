"""The generated module: kernels, their launchers and a ``call(args)`` wrapper.

``call`` receives the graph inputs followed by the graph's parameters and buffers,
allocates each buffer a kernel writes with the strides ATen would give it, launches
kernels and externs in schedule order, drops intermediates after their last use and
returns the flat list of outputs.

>>> import torch
>>> from fastdynamo.backends.triton.lowering import trace_aten, lower
>>> from fastdynamo.backends.triton.fusion import fuse
>>> gm = torch.fx.symbolic_trace(lambda x: x.relu() @ x)
>>> source = generate_module(fuse(lower(trace_aten(gm, [torch.randn(3, 3)]).graph_module)), [], 1024, {})
>>> "torch.ops.aten.mm.default(buf0, arg0)" in source
True
"""
from __future__ import annotations

import math

import sympy
import torch

from . import sizes, templates
from .fusion import KernelGroup, Schedule
from .ir import BufferArg, ExternNode, extern_buffer_args
from .lowering import UnsupportedGraph
from .ops import COMBINE_HELPERS
from .render import render_kernel


def render_python_value(value) -> str:
    """Source for an extern's non-tensor argument.

    >>> render_python_value([1, float("inf"), torch.float16, None])
    '[1, float("inf"), torch.float16, None]'
    """
    if isinstance(value, BufferArg):
        text = value.buffer
        for target, args, kwargs in value.view_chain:
            text = render_call(target, (_Raw(text),) + tuple(args), kwargs)
        return text
    if isinstance(value, _Raw):
        return value.text
    if isinstance(value, sympy.Expr):
        return sizes.render_size(sizes.normalise(value))  # a symbolic size, bound in call()
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else 'float("-inf")'
        return repr(value)
    if isinstance(value, (list, tuple)):
        items = ", ".join(render_python_value(v) for v in value)
        return f"[{items}]" if isinstance(value, list) else f"({items}{',' if len(value) == 1 else ''})"
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if isinstance(value, (torch.memory_format, torch.layout)):
        return f"torch.{str(value).split('.')[-1]}"
    raise UnsupportedGraph(f"cannot write {type(value).__name__} argument {value!r} into source")


class _Raw:
    def __init__(self, text: str):
        self.text = text


def render_call(target, args: tuple, kwargs: dict) -> str:
    if not isinstance(target, torch._ops.OpOverload):
        raise UnsupportedGraph(f"extern {target} is not an ATen operator")
    name = f"torch.ops.{target.namespace}.{target._opname}.{target._overloadname}"
    parts = [render_python_value(a) for a in args]
    parts += [f"{key}={render_python_value(v)}" for key, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def generate_module(schedule: Schedule, attribute_names: list, persistent_max: int, config_overrides: dict) -> str:
    """Source of the whole generated module for ``schedule``."""
    graph = schedule.graph
    meta = graph.buffer_meta()
    inputs = [node.name for node in graph.nodes if node.kind == "input"]
    parts = [templates.MODULE_HEADER, COMBINE_HELPERS]
    launchers = []
    body: list[str] = []
    kernel_params: dict = {}
    launch_rows: dict = {}  # kernel -> its xnumel= and rnumel= arguments, where symbolic
    for step in schedule.steps:
        if isinstance(step, KernelGroup):
            kernel = render_kernel(schedule, step, persistent_max)
            parts.append(kernel.source)
            configs = templates.launch_configs(kernel.template, kernel.xnumel, kernel.rnumel,
                                               tuple(config_overrides.get(kernel.template, ())))
            launchers.append(f"{kernel.name}_launcher = _runtime.KernelLauncher("
                             f"{kernel.name}, {kernel.template!r}, "
                             f"{kernel.xnumel if isinstance(kernel.xnumel, int) else None}, "
                             f"{kernel.rnumel if isinstance(kernel.rnumel, int) else None}, {configs!r})")
            kernel_params[step.name] = kernel.params
            symbolic = {"xnumel": kernel.xnumel, "rnumel": kernel.rnumel}
            launch_rows[step.name] = "".join(f", {name}={render_python_value(size)}"
                                             for name, size in symbolic.items() if not isinstance(size, int))
    last_use = _last_uses(schedule, kernel_params)
    outputs = {out.buffer for out in graph.outputs if out.buffer}
    arguments = graph.arguments if graph.arguments is not None else inputs
    body.append(f"    {', '.join(arguments)}{',' if len(arguments) == 1 else ''} = args" if arguments else "    del args")
    body.extend(_size_binding_lines(graph.size_bindings))
    body.append(f"    device = {inputs[0]}.device" if inputs else "    device = None")
    for position, step in enumerate(schedule.steps):
        if isinstance(step, KernelGroup):
            for name in step.stores:
                shape, stride, dtype = meta[name]
                body.append(f"    {name} = torch.empty_strided({render_python_value(tuple(shape))}, "
                            f"{render_python_value(tuple(stride))}, dtype={dtype}, device=device)")
            body.append(f"    {step.name}_launcher({', '.join(kernel_params[step.name])}{launch_rows.get(step.name, '')})")
        else:
            body.extend(_extern_lines(step))
        dead = sorted(b for b, last in last_use.items() if last == position and b not in outputs
                      and b not in inputs and b not in graph.size_bindings)
        if dead:
            body.append(f"    del {', '.join(dead)}")
    results = [render_python_value(BufferArg(out.buffer, out.view_chain)) if out.buffer else render_python_value(out.constant)
               for out in graph.outputs]
    body.append(f"    return [{', '.join(results)}]")
    parts.append("\n" + "\n".join(launchers) + "\n")
    parts.append(f"KERNEL_COUNT = {schedule.kernel_count}\n")
    if graph.size_bindings:
        parts.append(f"SIZE_ARGUMENTS = {sorted(graph.size_bindings)!r}  # one kernel set for every size\n")
    parts.append(f"ATTRIBUTE_NAMES = {list(attribute_names)!r}\n")
    parts.append("FALLBACK_REASON = None\n\n\ndef call(args):\n" + "\n".join(body) + "\n")
    return "\n".join(parts)


def _size_binding_lines(bindings: dict) -> list[str]:
    """``s0 = arg0.size(0)``...: each symbolic size read from the inputs of the call."""
    reads = {"size": "{}.size({})", "stride": "{}.stride({})", "offset": "{}.storage_offset()", "value": "{}"}
    return [f"    {symbol} = {reads[kind].format(argument, dim)}" for symbol, (kind, argument, dim) in bindings.items()]


def _extern_lines(step: ExternNode) -> list[str]:
    call = render_call(step.target, step.args, step.kwargs)
    if len(step.outputs) == 1 and step.result_paths[0] == ():
        out = step.outputs[0]
        return [f"    {out.name} = {call}",
                f"    {out.name} = _runtime.with_strides({out.name}, {_layout(out)})"]
    lines = [f"    {step.name} = {call}"]
    for out, path in zip(step.outputs, step.result_paths, strict=True):
        lines.append(f"    {out.name} = _runtime.with_strides({step.name}{''.join(f'[{p}]' for p in path)}, "
                     f"{_layout(out)})")
    lines.append(f"    del {step.name}")
    return lines


def _layout(out) -> str:
    return f"{render_python_value(tuple(out.shape))}, {render_python_value(tuple(out.stride))}"


def _last_uses(schedule: Schedule, kernel_params: dict) -> dict:
    last: dict = {}
    for position, step in enumerate(schedule.steps):
        if isinstance(step, KernelGroup):
            used = kernel_params[step.name]
        else:
            used = [arg.buffer for arg in extern_buffer_args(step)] + [out.name for out in step.outputs]
        for buffer in used:
            last[buffer] = position
    return last


def fallback_module(reason: str, attribute_count: int = 0) -> str:
    """A module that tells the backend to run the graph as ATen ops (cached like any other)."""
    return (f"# Generated by fastdynamo's Triton backend: this graph runs as ATen ops.\n"
            f"KERNEL_COUNT = 0\nATTRIBUTE_NAMES = None\nFALLBACK_REASON = {reason!r}\n")


def static_only_module(reason: str) -> str:
    """For a symbolic key: the graph's sizes cannot be launch arguments, so kernels are
    generated per concrete size (cached, so no later process traces it again)."""
    return (f"# Generated by fastdynamo's Triton backend: kernels for this graph are per size.\n"
            f"KERNEL_COUNT = 0\nATTRIBUTE_NAMES = None\nFALLBACK_REASON = None\nSTATIC_ONLY = {reason!r}\n")

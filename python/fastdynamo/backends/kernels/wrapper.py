"""The generated module: kernels, how they are declared, and a ``forward(*args)`` wrapper.

``forward`` receives the graph inputs followed by the graph's parameters and buffers,
allocates each buffer a kernel writes with the strides ATen would give it, runs
kernels and externs in schedule order, drops intermediates after their last use and
returns the tuple of outputs (``call(args)`` is the same over a list, returning a list).
What is language-specific (the module's imports, how kernels are defined and launched,
how a buffer is allocated) comes from the :class:`target.Renderer`.

>>> import torch
>>> from fastdynamo.backends.kernels.lowering import trace_aten, lower
>>> from fastdynamo.backends.kernels.fusion import fuse
>>> from fastdynamo.backends.triton.render import TritonRenderer
>>> gm = torch.fx.symbolic_trace(lambda x: x.relu() @ x)
>>> source = generate_module(fuse(lower(trace_aten(gm, [torch.randn(3, 3)]).graph_module)), [], TritonRenderer())
>>> "torch.mm(buf0, arg0)" in source
True
"""
from __future__ import annotations

from .externs import Source, render_call, render_python_value
from .fusion import KernelGroup, Schedule
from .ir import BufferArg, ExternNode, extern_buffer_args
from .target import Renderer


def generate_module(schedule: Schedule, attribute_names: list, renderer: Renderer) -> str:
    """Source of the whole generated module for ``schedule``."""
    graph = schedule.graph
    meta = graph.buffer_meta()
    inputs = [node.name for node in graph.nodes if node.kind == "input"]
    kernels = {step.name: renderer.render_kernel(schedule, step) for step in schedule.kernels()}
    kernel_params = {name: kernel.params for name, kernel in kernels.items()}
    last_use = _last_uses(schedule, kernel_params)
    outputs = {out.buffer for out in graph.outputs if out.buffer}
    arguments = graph.arguments if graph.arguments is not None else inputs
    body: list[str] = []
    body.extend(_size_binding_lines(graph.size_bindings))
    body.append(f"    device = {inputs[0]}.device" if inputs else "    device = None")
    for position, step in enumerate(schedule.steps):
        if isinstance(step, KernelGroup):
            kernel = kernels[step.name]
            for name in step.stores:
                shape, stride, dtype = meta[name]
                body.append("    " + renderer.allocation(name, render_python_value(tuple(shape)),
                                                         render_python_value(tuple(stride)), dtype))
            symbolic = {"xnumel": kernel.xnumel, "rnumel": kernel.rnumel}
            size_arguments = "".join(f", {key}={render_python_value(size)}"
                                     for key, size in symbolic.items() if not isinstance(size, int))
            body.append("    " + renderer.launch_line(kernel, size_arguments))
        else:
            body.extend(_extern_lines(step))
        dead = sorted(b for b, last in last_use.items() if last == position and b not in outputs
                      and b not in inputs and b not in graph.size_bindings)
        if dead:
            body.append(f"    del {', '.join(dead)}")
    results = [_argument(BufferArg(out.buffer, out.view_chain)) if out.buffer else render_python_value(out.constant)
               for out in graph.outputs]
    body.append(f"    return ({', '.join(results)}{',' if len(results) == 1 else ''})")
    parts = [renderer.module_header(), renderer.kernel_section(list(kernels.values()))]
    parts.append(f"KERNEL_COUNT = {schedule.kernel_count}\n")
    if graph.size_bindings:
        parts.append(f"SIZE_ARGUMENTS = {sorted(graph.size_bindings)!r}  # one kernel set for every size\n")
    parts.append(f"ATTRIBUTE_NAMES = {list(attribute_names)!r}\n")
    parts.append(f"FALLBACK_REASON = None\n\n\ndef forward({', '.join(arguments)}):\n" + "\n".join(body) + "\n")
    parts.append(_CALL)
    return "\n".join(parts)


_CALL = '''
def call(args):
    """``forward`` over a list of the inputs, returning a list."""
    return list(forward(*args))
'''


def _argument(value: BufferArg) -> str:
    """A buffer as an extern argument or output: one ``_runtime.reinterpret`` call for a
    static view of a buffer the wrapper allocated, else the view chain replayed."""
    if value.layout is not None:
        shape, stride, offset = value.layout
        return f"_runtime.reinterpret({value.buffer}, {shape!r}, {stride!r}, {offset})"
    return render_python_value(value)


def _render_argument(value) -> object:
    if isinstance(value, BufferArg):
        return Source(_argument(value))
    if isinstance(value, (list, tuple)):
        return type(value)(_render_argument(v) for v in value)
    if isinstance(value, dict):
        return {key: _render_argument(v) for key, v in value.items()}
    return value


def _size_binding_lines(bindings: dict) -> list[str]:
    """``s0 = arg0.size(0)``...: each symbolic size read from the inputs of the call."""
    reads = {"size": "{}.size({})", "stride": "{}.stride({})", "offset": "{}.storage_offset()", "value": "{}"}
    return [f"    {symbol} = {reads[kind].format(argument, dim)}" for symbol, (kind, argument, dim) in bindings.items()]


def _extern_lines(step: ExternNode) -> list[str]:
    args = tuple(_render_argument(a) for a in step.args)
    kwargs = {key: _render_argument(v) for key, v in step.kwargs.items()}
    call = render_call(step.target, args, kwargs, step.spelling)
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


def fallback_module(reason: str) -> str:
    """A module that tells the backend to run the graph as ATen ops (cached like any other)."""
    return (f"# Generated by fastdynamo: this graph runs as ATen ops.\n"
            f"KERNEL_COUNT = 0\nATTRIBUTE_NAMES = None\nFALLBACK_REASON = {reason!r}\n")


def static_only_module(reason: str) -> str:
    """For a symbolic key: the graph's sizes cannot be launch arguments, so kernels are
    generated per concrete size (cached, so no later process traces it again)."""
    return (f"# Generated by fastdynamo: kernels for this graph are per size.\n"
            f"KERNEL_COUNT = 0\nATTRIBUTE_NAMES = None\nFALLBACK_REASON = None\nSTATIC_ONLY = {reason!r}\n")

"""The generated module: kernels, how they are declared, and a ``forward(*args)`` wrapper.

``forward`` receives the graph inputs followed by the graph's parameters and buffers,
allocates each buffer a kernel writes with the strides ATen would give it, runs
kernels and externs in schedule order, drops intermediates after their last use, stores
the new values of inputs written in place (:mod:`in_place`) and returns the tuple of
outputs (``call(args)`` is the same over a list, returning a list).
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
from .in_place import plan_in_place
from .ir import BufferArg, ExternNode, extern_buffer_args
from .target import Renderer


def generate_module(schedule: Schedule, attribute_names: list, renderer: Renderer) -> str:
    """Source of the whole generated module for ``schedule``."""
    graph = schedule.graph
    meta = graph.buffer_meta()
    inputs = [node.name for node in graph.nodes if node.kind == "input" and node.name not in graph.constants]
    schedule.in_place = plan_in_place(schedule)
    kernels = {step.name: renderer.render_kernel(schedule, step) for step in schedule.kernels()}
    kernel_params = {name: kernel.params for name, kernel in kernels.items()}
    last_use = _last_uses(schedule, kernel_params)
    views = _Views(schedule, kernel_params, inputs)
    outputs = {out.buffer for out in graph.outputs if out.buffer}
    arguments = graph.arguments if graph.arguments is not None else inputs
    body: list[str] = ["    " + line for line in renderer.forward_prologue(inputs)] if kernels else []
    if graph.input_writes:  # inputs sharing memory: the ATen ops, as eager runs them
        tensors = ", ".join(name for name in arguments if name in inputs)
        body[:0] = [f"    if _runtime.storages_shared(({tensors},)):",
                    f"        return ATEN_FORWARD({', '.join(arguments[:len(arguments) - len(attribute_names)])})"]
    body.extend(_size_binding_lines(graph.size_bindings))
    dead_at = {position: sorted(b for b, last in last_use.items() if last == position and b not in outputs
                                and b not in inputs and b not in graph.size_bindings and b not in graph.constants)
               for position in range(len(schedule.steps))}
    reuse = {name: free for name, free in _plan_reuse(schedule, meta, dead_at, views).items()
             if name not in schedule.in_place}
    for position, step in enumerate(schedule.steps):
        if isinstance(step, KernelGroup):
            kernel = kernels[step.name]
            for name in step.stores:
                if name in schedule.in_place:
                    body.append(f"    {name} = {schedule.in_place[name]}  # the input, written in place")
                    continue
                if name in reuse:
                    body.append(f"    {name} = {reuse[name]}; del {reuse[name]}  # reuse")
                    continue
                shape, stride, dtype = meta[name]
                body.append("    " + renderer.allocation(name, render_python_value(tuple(shape)),
                                                         render_python_value(tuple(stride)), dtype))
            symbolic = {"xnumel": kernel.xnumel, "rnumel": kernel.rnumel}
            size_arguments = "".join(f", {key}={render_python_value(size)}"
                                     for key, size in symbolic.items() if not isinstance(size, int))
            if kernel.xnumel != 0 and kernel.rnumel != 0:  # (an empty result is only allocated)
                body.append("    " + renderer.launch_line(kernel, size_arguments))
        else:
            body.extend(views.extern_lines(step))
        dead = [b for b in dead_at[position] if b not in reuse.values()]
        if dead:
            body.append(f"    del {', '.join(dead)}")
    results = [views.argument(BufferArg(out.buffer, out.view_chain, out.layout)) if out.buffer
               else render_python_value(out.constant) for out in graph.outputs]
    written = {output for _, output in graph.input_writes}
    for argument, output in graph.input_writes:
        if schedule.in_place.get(graph.outputs[output].buffer) != argument:
            body.append(f"    {argument}.copy_({results[output]})  # the input's new value")
    results = [result for position, result in enumerate(results) if position not in written]
    body.append(f"    return ({', '.join(results)}{',' if len(results) == 1 else ''})")
    parts = [renderer.module_header(), renderer.kernel_section(list(kernels.values()))]
    parts.extend(f"{name} = {_constant(value)}\n" for name, value in graph.constants.items())
    parts.append(f"KERNEL_COUNT = {schedule.kernel_count}\n")
    if graph.input_writes:
        parts.append("WRITES_INPUTS = True  # measured on copies of the inputs\n")
        parts.append("ATEN_FORWARD = None  # the graph's ATen ops, set by the compiler\n")
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


# ATen ops whose results have, by construction, the strides their meta functions give
# (a new row-major tensor): their outputs need no ``with_strides`` check before a kernel.
LAYOUT_EXACT = frozenset({"mm", "addmm", "bmm", "baddbmm", "mv", "addmv", "embedding", "cat", "index_select",
                          "lift_fresh_copy"})


class _Views:
    """Which buffers have, at run time, the strides their FakeTensors have (so a static
    view of them is one ``reinterpret`` call): those kernels write (allocated with those
    strides, at offset 0), constants, the inputs (the frame's guards pin their strides)
    and extern outputs passed through ``with_strides``, which is done for those a kernel
    reads or a view is made of. Other views replay their ATen view calls."""

    def __init__(self, schedule: Schedule, kernel_params: dict, inputs: list):
        graph = schedule.graph
        self.allocated = {name for step in schedule.kernels() for name in step.stores} | set(graph.constants)
        self.extern_outputs = {out.name for step in schedule.steps if isinstance(step, ExternNode)
                               for out in step.outputs}
        viewed = {arg.buffer for step in schedule.steps if isinstance(step, ExternNode)
                  for arg in extern_buffer_args(step) if arg.layout is not None}
        viewed |= {out.buffer for out in graph.outputs if out.buffer and out.layout is not None}
        read = {name for params in kernel_params.values() for name in params}
        self.normalized = (read | viewed) & self.extern_outputs
        self.known = self.allocated | self.normalized | set(inputs)

    def argument(self, value: BufferArg) -> str:
        """A buffer as an extern argument or output (see the class docstring)."""
        if value.layout is None or value.buffer not in self.known:
            return render_python_value(BufferArg(value.buffer, value.view_chain))
        shape, stride, offset = value.layout
        return f"_runtime.reinterpret({value.buffer}, {shape!r}, {stride!r}, {offset})"

    def rendered(self, value) -> object:
        if isinstance(value, BufferArg):
            return Source(self.argument(value))
        if isinstance(value, (list, tuple)):
            return type(value)(self.rendered(v) for v in value)
        if isinstance(value, dict):
            return {key: self.rendered(v) for key, v in value.items()}
        return value

    def extern_lines(self, step: ExternNode) -> list[str]:
        args = tuple(self.rendered(a) for a in step.args)
        kwargs = {key: self.rendered(v) for key, v in step.kwargs.items()}
        call = render_call(step.target, args, kwargs, step.spelling)
        exact = getattr(step.target, "_opname", None) in LAYOUT_EXACT
        if len(step.outputs) == 1 and step.result_paths[0] == ():
            return [f"    {step.outputs[0].name} = {self.output(step.outputs[0], call, exact)}"]
        lines = [f"    {step.name} = {call}"]
        for out, path in zip(step.outputs, step.result_paths, strict=True):
            lines.append(f"    {out.name} = {self.output(out, step.name + ''.join(f'[{p}]' for p in path), exact)}")
        lines.append(f"    del {step.name}")
        return lines

    def output(self, out, value: str, exact: bool) -> str:
        if out.name not in self.normalized or exact:
            return value
        return f"_runtime.with_strides({value}, {_layout(out)})"


def _plan_reuse(schedule: Schedule, meta: dict, dead_at: dict, views: "_Views") -> dict:
    """New buffer -> a dead buffer of the same shape, strides and dtype that it takes over
    (no allocation, no free: what memory planning buys). Only buffers kernels write are
    taken over, and not one an extern read (its result may be a view of it)."""
    viewed = {arg.buffer for step in schedule.steps if isinstance(step, ExternNode) and not _fresh_output(step)
              for arg in extern_buffer_args(step)}
    pool: dict = {}
    reuse: dict = {}
    for position, step in enumerate(schedule.steps):
        if isinstance(step, KernelGroup):
            for name in step.stores:
                free = pool.get(meta[name])
                if free:
                    reuse[name] = free.pop()
        for name in dead_at[position]:
            if name in views.allocated and name not in viewed:
                pool.setdefault(meta[name], []).append(name)
    return reuse


def _fresh_output(step: ExternNode) -> bool:
    schema = getattr(step.target, "_schema", None)
    return schema is not None and all(ret.alias_info is None for ret in schema.returns)


def _constant(value) -> str:
    """Source that makes ``value`` (a small contiguous tensor) at the module's import."""
    dtype, device = render_python_value(value.dtype), render_python_value(value.device)
    if value.numel() == 0:
        return f"torch.empty({render_python_value(tuple(value.shape))}, dtype={dtype}, device={device})"
    data = render_python_value(value.flatten().tolist())
    return f"torch.tensor({data}, dtype={dtype}, device={device}).reshape({render_python_value(tuple(value.shape))})"


def _size_binding_lines(bindings: dict) -> list[str]:
    """``s0 = arg0.size(0)``...: each symbolic size read from the inputs of the call."""
    reads = {"size": "{}.size({})", "stride": "{}.stride({})", "offset": "{}.storage_offset()", "value": "{}"}
    return [f"    {symbol} = {reads[kind].format(argument, dim)}" for symbol, (kind, argument, dim) in bindings.items()]


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

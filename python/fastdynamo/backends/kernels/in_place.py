"""Which inputs written in place a kernel can write directly.

Lowering makes an in-place op on a graph input functional and records the input's last
value as an extra output (``KernelGraph.input_writes``); the wrapper stores it into the
caller's tensor. By default that is a copy after the kernels (``arg.copy_(buf)``), always
correct. A kernel may instead write the new value straight into the input (no buffer, no
copy: an optimizer step reads and writes each parameter and state tensor once) when
nothing can read the old value after it is overwritten:

* the value is stored by a pointwise kernel, with the input's shape, strides and dtype,
  and is no other output and no extern's argument;
* no later step reads the input (the old value), and no other write targets it;
* inside that kernel, every read of the input is at the element being written (each
  element is read, then written, by the same iteration).

Such a kernel's pointers then alias, so the C++ renderer drops ``__restrict__`` on them
(``Schedule.in_place``).
"""
from __future__ import annotations

from .fusion import KernelGroup, Schedule, group_loads
from .ir import ExternNode, extern_buffer_args, iter_loads


def plan_in_place(schedule: Schedule) -> dict[str, str]:
    """buffer -> the input it is written into, for the writes that can be direct."""
    graph = schedule.graph
    if not graph.input_writes:
        return {}
    meta = graph.buffer_meta()
    nodes = graph.node_map()
    reads = [_reads(step, nodes) for step in schedule.steps]
    extern_args = {arg.buffer for step in schedule.steps if isinstance(step, ExternNode)
                   for arg in extern_buffer_args(step)}
    output_counts: dict[str, int] = {}
    for out in graph.outputs:
        if out.buffer:
            output_counts[out.buffer] = output_counts.get(out.buffer, 0) + 1
    targets = [argument for argument, _ in graph.input_writes]
    position_of = {name: i for i, step in enumerate(schedule.steps) if isinstance(step, KernelGroup)
                   for name in step.stores}
    plan: dict[str, str] = {}
    for argument, output in graph.input_writes:
        ref = graph.outputs[output]
        buffer = ref.buffer
        position = position_of.get(buffer) if buffer else None
        if position is None or ref.view_chain or targets.count(argument) != 1:
            continue
        group = schedule.steps[position]
        if group.kind != "pointwise" or output_counts[buffer] != 1 or buffer in extern_args or buffer in plan:
            continue
        if not _same_layout(meta[buffer], meta[argument]):
            continue
        if any(argument in later for later in reads[position + 1:]):
            continue
        if _reads_elsewhere(group, nodes, argument, buffer):
            continue
        plan[buffer] = argument
    return plan


def _same_layout(a: tuple, b: tuple) -> bool:
    shape_a, stride_a, dtype_a = a
    shape_b, stride_b, dtype_b = b
    static = all(isinstance(v, int) for v in (*shape_a, *(stride_a or ()), *shape_b, *(stride_b or ())))
    return static and stride_a is not None and (tuple(shape_a), tuple(stride_a), dtype_a) == \
        (tuple(shape_b), tuple(stride_b), dtype_b)


def _reads(step, nodes: dict) -> set:
    if isinstance(step, ExternNode):
        return {arg.buffer for arg in extern_buffer_args(step)}
    members = set(step.members)
    return {load.buffer for name in step.members for load in iter_loads(nodes[name].body)
            if load.buffer not in members}


def _reads_elsewhere(group: KernelGroup, nodes: dict, argument: str, buffer: str) -> bool:
    """Some member of ``group`` reads ``argument`` at an element other than the one of
    ``buffer`` the same iteration writes."""
    written_at = tuple(group.canonical_index(nodes[buffer]))
    members = set(group.members)
    for name in group.members:
        node = nodes[name]
        for read, index in group_loads(nodes, members, node.body, group.var_map(node)):
            if read == argument and tuple(index) != written_at:
                return True
    return False


__all__ = ["plan_in_place"]

"""Greedy fusion: group kernel-IR nodes into kernels and decide what is written to memory.

Nodes are visited in topological order. A pointwise or reduction node joins the group
of its latest producer when the iteration spaces agree, else a later group that reads one
of the buffers it reads (a sibling: every input of the node is in memory by then):

* a pointwise group (iteration shape S) takes pointwise nodes of shape S, and turns
  into a reduction group when a reduction over an S-shaped input joins it;
* a reduction group (input space S, reduced dims D) takes pointwise nodes of shape S
  (the row elements), pointwise nodes of the reduced shape (per-row values) and other
  reductions over (S, D);

as long as every in-group reduction the node reaches is read at the current row. Inside
a group, values are recomputed or reused from registers; a node is written to memory
only if it is a graph output, an extern's argument or read by another group.

Before grouping, pointwise values whose shape is not their consumers' are inlined into
those consumers, recomputed per element as Inductor does, instead of being a kernel of
their own that splits the chain: values computed from graph inputs alone (a bias or a
scale vector broadcast over rows, ``torch.tanh(y)`` in ``x * torch.tanh(y)``), and cheap
intermediate values (at most :data:`INLINE_INTERMEDIATE_OPS` operations: the negated
half that RoPE concatenates).

>>> import torch
>>> from fastdynamo.backends.kernels.lowering import trace_aten, lower
>>> gm = torch.fx.symbolic_trace(lambda x: torch.softmax(x, -1))
>>> schedule = fuse(lower(trace_aten(gm, [torch.randn(4, 8)]).graph_module))
>>> schedule.kernel_count, [g.kind for g in schedule.kernels()]
(1, ['reduction'])
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field

import torch

from . import indexing
from .indexing import ZERO, Var
from .ir import (
    ExternNode,
    IndexValue,
    IRVerificationError,
    KernelGraph,
    Load,
    Op,
    PointwiseNode,
    ReductionNode,
    extern_buffer_args,
    iter_loads,
)
from .opset import TRANSCENDENTAL

# Largest body (in operations) a consumer may grow to by inlining: reads of one value at
# several indices duplicate its expression, so unbounded inlining can blow up.
INLINE_MAX_OPS = 64
# An intermediate pointwise value read only in another iteration space is recomputed in
# its consumers when it is this cheap (the negated half of RoPE's rotation, a slice's
# scale) instead of being a kernel of its own.
INLINE_INTERMEDIATE_OPS = 4
# A value holding a transcendental op is recomputed in its consumers only when that adds
# at most this many evaluations over computing it once (a few us, about a kernel launch
# and the store and load a kernel of its own would add; a gate or bias vector broadcast
# over a few rows stays in its consumer): RoPE's cos and sin of a (positions, dim) table,
# read by every head of every layer in both halves, took 40 us a Llama step recomputed
# (x4 per head, x3 per consumer: thousands of extra evaluations).
INLINE_TRANSCENDENTAL_EXTRA = 256


@dataclass
class KernelGroup:
    """One generated kernel: its iteration space, members (topological) and stores."""

    name: str
    kind: str  # "pointwise" | "reduction"
    full_shape: tuple
    reduced_dims: tuple = ()
    members: list = field(default_factory=list)
    stores: list = field(default_factory=list)

    @property
    def x_shape(self) -> tuple:
        return tuple(s for d, s in enumerate(self.full_shape) if d not in self.reduced_dims)

    @property
    def r_shape(self) -> tuple:
        return tuple(s for d, s in enumerate(self.full_shape) if d in self.reduced_dims)

    def dim_vars(self) -> tuple:
        """Per dimension of ``full_shape``: the group variable iterating it."""
        result, x_count, r_count = [], 0, 0
        for d, size in enumerate(self.full_shape):
            if d in self.reduced_dims:
                result.append(Var(f"r{r_count}", size) if size != 1 else ZERO)
                r_count += 1
            else:
                result.append(Var(f"x{x_count}", size) if size != 1 else ZERO)
                x_count += 1
        return tuple(result)

    def space_of(self, node) -> str | None:
        """'full', 'row' (one value per reduced row) or None if the node does not fit."""
        if isinstance(node, ReductionNode):
            if self.kind == "reduction" and node.full_shape == self.full_shape and node.reduced_dims == self.reduced_dims:
                return "row"
            return None
        if not isinstance(node, PointwiseNode):
            return None
        if node.shape == self.full_shape:
            return "full"
        if self.kind == "reduction" and node.shape in (self.x_shape, self._keepdim_shape()):
            return "row"
        return None

    def _keepdim_shape(self) -> tuple:
        return tuple(1 if d in self.reduced_dims else s for d, s in enumerate(self.full_shape))

    def canonical_index(self, node) -> tuple:
        """The index of ``node``'s element that the current group position computes."""
        dim_vars = self.dim_vars()
        if isinstance(node, ReductionNode):
            return node.output_index(dim_vars)
        if node.shape == self.full_shape:
            return dim_vars
        if len(node.shape) == len(self.full_shape):
            return tuple(ZERO if d in self.reduced_dims else v for d, v in enumerate(dim_vars))
        return tuple(v for d, v in enumerate(dim_vars) if d not in self.reduced_dims)

    def var_map(self, node) -> dict:
        """Node variables -> group index expressions, for rendering its body in place."""
        if isinstance(node, ReductionNode):
            return {var.name: expr for var, expr in zip(node.vars, self.dim_vars(), strict=True)}
        return {var.name: expr for var, expr in zip(node.vars, self.canonical_index(node), strict=True)}


@dataclass
class Schedule:
    """Steps in execution order: KernelGroup or ExternNode; plus the fused graph."""

    graph: KernelGraph
    steps: list
    realized: set
    # buffer -> the input a kernel writes it into (in_place.py, set by the wrapper)
    in_place: dict = field(default_factory=dict)

    @property
    def kernel_count(self) -> int:
        return len(self.kernels())

    def kernels(self) -> list:
        return [s for s in self.steps if isinstance(s, KernelGroup)]

    def verify(self) -> None:
        """Check the schedule: every computed node in one group, reads only of what is
        in memory by then, in-group reductions read at the current row."""
        self.graph.verify()
        nodes = self.graph.node_map()
        available = {n.name for n in self.graph.nodes if n.kind == "input"}
        placed: set = set()
        for step in self.steps:
            if isinstance(step, ExternNode):
                for arg in extern_buffer_args(step):
                    _check(arg.buffer in available, f"{step.name} reads {arg.buffer} before it is written")
                available.update(out.name for out in step.outputs)
                continue
            members = set(step.members)
            for name in step.members:
                node = nodes[name]
                _check(name not in placed, f"{name} is in two groups")
                placed.add(name)
                _check(step.space_of(node) is not None, f"{name} does not fit {step.name}'s iteration space")
                if not isinstance(node, (PointwiseNode, ReductionNode)):
                    raise IRVerificationError(f"{name}: only pointwise and reduction nodes fuse")
                for buffer, index in group_loads(nodes, members, node.body, step.var_map(node)):
                    if buffer in members:
                        _check(tuple(index) == tuple(step.canonical_index(nodes[buffer])),
                               f"{name} reads reduction {buffer} off its row")
                    else:
                        _check(buffer in available, f"{name} reads {buffer} before it is written")
            _check(set(step.stores) <= members, f"{step.name} stores a value it does not compute")
            available.update(step.stores)
        computed = {n.name for n in self.graph.nodes if n.kind in ("pointwise", "reduction")}
        _check(computed == placed, f"nodes in no group: {sorted(computed - placed)}")
        for out in self.graph.outputs:
            _check(out.buffer is None or out.buffer in available, f"output {out.buffer} never written")


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise IRVerificationError(message)


def group_loads(nodes: dict, members: set, expr, var_map: dict, memo: set | None = None):
    """(buffer, index) for every read that ``expr`` makes from outside the group's
    pointwise members, looking through those members as if inlined."""
    memo = set() if memo is None else memo
    for load in iter_loads(expr):
        index = tuple(indexing.substitute(e, var_map) for e in load.index)
        target = nodes.get(load.buffer)
        if load.buffer in members and isinstance(target, PointwiseNode):
            key = (load.buffer, index)
            if key in memo:
                continue
            memo.add(key)
            inner_map = {var.name: e for var, e in zip(target.vars, index, strict=True)}
            yield from group_loads(nodes, members, target.body, inner_map, memo)
        else:
            yield load.buffer, index


def eliminate_dead_nodes(graph: KernelGraph) -> KernelGraph:
    """Drop nodes nothing reads (decompositions leave some, and a model computes values
    it never uses): pointwise and reduction nodes, and externs that are pure ATen
    functions (no written argument, no random numbers drawn)."""
    live = {out.buffer for out in graph.outputs if out.buffer}
    kept = []
    for node in reversed(graph.nodes):
        if node.kind in ("pointwise", "reduction") and node.name not in live:
            continue
        if isinstance(node, ExternNode) and _pure(node.target) and not any(out.name in live for out in node.outputs):
            continue
        kept.append(node)
        if isinstance(node, ExternNode):
            live.update(arg.buffer for arg in extern_buffer_args(node))
        elif node.kind != "input":
            live.update(load.buffer for load in iter_loads(node.body))
    return dataclasses.replace(graph, nodes=list(reversed(kept)), outputs=list(graph.outputs))


def _pure(target) -> bool:
    """An ATen operator whose only effect is its result."""
    schema = getattr(target, "_schema", None)
    if schema is None or schema.is_mutable or getattr(target, "namespace", None) not in ("aten", "prims"):
        return False
    return torch.Tag.nondeterministic_seeded not in getattr(target, "tags", ())


def inline_broadcast_inputs(graph: KernelGraph) -> KernelGraph:
    """Inline pointwise nodes computed from graph inputs alone, or cheap ones, into
    consumers of another iteration space (see the module docstring); graph outputs and
    extern arguments stay.

    >>> import torch
    >>> from fastdynamo.backends.kernels.lowering import trace_aten, lower
    >>> gm = torch.fx.symbolic_trace(lambda x, y: x * torch.tanh(y))
    >>> graph = lower(trace_aten(gm, [torch.randn(3, 4), torch.randn(4)]).graph_module)
    >>> [n.kind for n in inline_broadcast_inputs(graph).nodes]
    ['input', 'input', 'pointwise']
    """
    inputs = {node.name for node in graph.nodes if node.kind == "input"}
    kept = {out.buffer for out in graph.outputs if out.buffer}
    kept.update(arg.buffer for node in graph.nodes if isinstance(node, ExternNode) for arg in extern_buffer_args(node))
    bodies = {node.name: node.body for node in graph.nodes if isinstance(node, (PointwiseNode, ReductionNode))}
    spaces = {node.name: getattr(node, "full_shape", node.shape) for node in graph.nodes if node.name in bodies}
    consumers: dict = defaultdict(set)
    from_inputs: dict = {}
    for node in graph.nodes:
        if node.name in bodies:
            for load in iter_loads(node.body):
                consumers[load.buffer].add(node.name)
        if isinstance(node, PointwiseNode):
            from_inputs[node.name] = all(load.buffer in inputs or from_inputs.get(load.buffer, False)
                                         for load in iter_loads(node.body))
    # Latest first: inlining a node makes its consumers read its producers, which are
    # visited after it and may then be inlined too.
    for node in reversed(graph.nodes):
        users = consumers[node.name]
        if not isinstance(node, PointwiseNode) or node.name in kept or not users:
            continue
        if not from_inputs[node.name] and _op_count(node.body) > INLINE_INTERMEDIATE_OPS:
            continue
        if any(spaces[user] == node.shape for user in users):
            continue  # a consumer shares its iteration space: ordinary fusion joins them
        if _has_transcendental(node.body) and not _few_repeats(node, {user: bodies[user] for user in users}, spaces):
            continue
        inlined = {user: _inline_loads(bodies[user], node) for user in users}
        if any(_op_count(body) > INLINE_MAX_OPS for body in inlined.values()):
            continue
        bodies.update(inlined)
        for load in iter_loads(node.body):
            consumers[load.buffer].discard(node.name)
            consumers[load.buffer].update(users)
        consumers[node.name] = set()
    nodes = [dataclasses.replace(node, body=bodies[node.name]) if node.name in bodies else node
             for node in graph.nodes]
    return eliminate_dead_nodes(dataclasses.replace(graph, nodes=nodes, outputs=list(graph.outputs)))


def _inline_loads(expr, node: PointwiseNode):
    """``expr`` with every read of ``node`` replaced by ``node``'s body at that index."""
    if isinstance(expr, Load) and expr.buffer == node.name:
        mapping = {var.name: index for var, index in zip(node.vars, expr.index, strict=True)}
        return _substitute_vars(node.body, mapping)
    if isinstance(expr, Op):
        return dataclasses.replace(expr, args=tuple(_inline_loads(arg, node) for arg in expr.args))
    return expr


def _substitute_vars(expr, mapping: dict):
    if isinstance(expr, Load):
        return dataclasses.replace(expr, index=tuple(indexing.substitute(e, mapping) for e in expr.index))
    if isinstance(expr, IndexValue):
        return dataclasses.replace(expr, index=indexing.substitute(expr.index, mapping))
    if isinstance(expr, Op):
        return dataclasses.replace(expr, args=tuple(_substitute_vars(arg, mapping) for arg in expr.args))
    return expr


def _has_transcendental(expr) -> bool:
    return isinstance(expr, Op) and (expr.name in TRANSCENDENTAL or any(_has_transcendental(a) for a in expr.args))


def _few_repeats(node: PointwiseNode, user_bodies: dict, spaces: dict) -> bool:
    """Recomputing ``node`` in its users evaluates it at most
    :data:`INLINE_TRANSCENDENTAL_EXTRA` times more than computing it once (static sizes
    only: a symbolic one may be any size)."""
    once = _static_numel(node.shape)
    if once is None:
        return False
    evaluations = 0
    for user, body in user_bodies.items():
        numel = _static_numel(spaces[user])
        if numel is None:
            return False
        evaluations += numel * sum(1 for load in iter_loads(body) if load.buffer == node.name)
    return evaluations - once <= INLINE_TRANSCENDENTAL_EXTRA


def _static_numel(shape: tuple) -> int | None:
    numel = 1
    for size in shape:
        if not isinstance(size, int):
            return None
        numel *= size
    return numel


def _op_count(expr) -> int:
    return 1 + sum(_op_count(arg) for arg in expr.args) if isinstance(expr, Op) else 0


def fuse(graph: KernelGraph) -> Schedule:
    """Group the nodes of ``graph`` into kernels (see the module docstring)."""
    graph = inline_broadcast_inputs(eliminate_dead_nodes(graph))
    nodes = graph.node_map()
    step_of: dict[str, int] = {}  # buffer -> index of the step that produces it
    readers: dict[str, set[int]] = defaultdict(set)  # buffer -> indices of the groups reading it
    steps: list = []
    for node in graph.nodes:
        if node.kind == "input":
            step_of[node.name] = -1
            continue
        if isinstance(node, ExternNode):
            steps.append(node)
            for out in node.outputs:
                step_of[out.name] = len(steps) - 1
            continue
        reads = {load.buffer for load in iter_loads(node.body)}
        latest = max((step_of[buffer] for buffer in reads), default=-1)
        position = _join_some_group(steps, latest, node, nodes, reads, readers)
        if position is None:
            position = len(steps)
            steps.append(_new_group(node, position))
        step_of[node.name] = position
        for buffer in reads:
            readers[buffer].add(position)
    realized = _decide_stores(graph, steps, nodes)
    return Schedule(graph, steps, realized)


def _join_some_group(steps: list, latest: int, node, nodes: dict, reads: set, readers: dict) -> int | None:
    """The position of the group ``node`` joins: its latest producer's (the last one when
    it reads only graph inputs), else a later group (every input of ``node`` is in memory
    by then) that reads one of the buffers ``node`` reads (``readers``: buffer -> the
    groups reading it): siblings of one producer (the two halves of SiLU's backward after
    a matmul, side branches of a chain) share a kernel and its loads."""
    # A node reading only graph inputs may join any group; the latest one lets side
    # branches of a chain (x.exp() + x.tanh()) share it.
    first = latest if latest >= 0 else len(steps) - 1
    if first >= 0 and isinstance(steps[first], KernelGroup) and _try_join(steps[first], node, nodes):
        return first
    later = set().union(*(readers[buffer] for buffer in reads)) if reads else range(latest + 1, len(steps))
    for position in sorted((p for p in later if p > latest and p != first), reverse=True):
        group = steps[position]
        if isinstance(group, KernelGroup) and _try_join(group, node, nodes):
            return position
    return None


def _new_group(node, position: int) -> KernelGroup:
    if isinstance(node, ReductionNode):
        return KernelGroup(f"kernel{position}", "reduction", node.full_shape, node.reduced_dims, [node.name])
    return KernelGroup(f"kernel{position}", "pointwise", node.shape, (), [node.name])


def _try_join(group: KernelGroup, node, nodes: dict) -> bool:
    candidate = group
    if group.kind == "pointwise" and isinstance(node, ReductionNode) and node.full_shape == group.full_shape:
        candidate = KernelGroup(group.name, "reduction", group.full_shape, node.reduced_dims, list(group.members))
    if candidate.space_of(node) is None:
        return False
    members = set(candidate.members)
    for buffer, index in group_loads(nodes, members, node.body, candidate.var_map(node)):
        if buffer in members and tuple(index) != tuple(candidate.canonical_index(nodes[buffer])):
            return False  # a reduction read off the current row: needs it in memory first
    group.kind, group.reduced_dims = candidate.kind, candidate.reduced_dims
    group.members.append(node.name)
    return True


def _decide_stores(graph: KernelGraph, steps: list, nodes: dict) -> set:
    group_of = {name: step for step in steps if isinstance(step, KernelGroup) for name in step.members}
    needed = {out.buffer for out in graph.outputs if out.buffer}
    for step in steps:
        if isinstance(step, ExternNode):
            needed.update(arg.buffer for arg in extern_buffer_args(step))
            continue
        members = set(step.members)
        for name in step.members:
            for load in iter_loads(nodes[name].body):
                if load.buffer not in members:
                    needed.add(load.buffer)
    for step in steps:
        if isinstance(step, KernelGroup):
            step.stores = [name for name in step.members if name in needed]
    return {name for name in needed if name in group_of}



def reduction_depths(group: KernelGroup, nodes: dict) -> dict:
    """Per member: how many passes over the row must finish before its value is known
    (a reduction that reads another reduction's result runs in the pass after it)."""
    members = set(group.members)
    depths: dict = {}

    def expr_depth(expr) -> int:
        deepest = 0
        for load in iter_loads(expr):
            if load.buffer in members:
                deepest = max(deepest, node_depth(load.buffer))
        return deepest

    def node_depth(name: str) -> int:
        if name not in depths:
            node = nodes[name]
            depths[name] = expr_depth(node.body) + (1 if isinstance(node, ReductionNode) else 0)
        return depths[name]

    for name in group.members:
        node_depth(name)
    return depths

"""Split a joint forward/backward ATen graph into a forward and a backward graph, choosing
what the forward saves by a minimum cut (our own; torch's partitioners are not used).

Why a cut: every value the backward reads from the forward is either saved (it stays
alive from the forward to the backward: memory) or recomputed in the backward from
values that are saved. Cheap pointwise and view ops are worth recomputing (the backward's
kernels fuse them into their consumers, so recomputing costs no memory traffic);
matmuls, convolutions, reductions and random ops are not. So each joint node ``n`` that
does not depend on a tangent becomes an edge ``n.in -> n.out`` whose capacity is its
size in bytes; the graph's inputs hang from the source, every value a backward node
reads is tied to the sink, and a node that must not be recomputed is tied to the source.
The edges the minimum cut crosses are the saved tensors: the least memory that still
gives the backward all it needs.

This is what AOTAutograd calls a partition function, ``partition(joint_module,
joint_inputs, *, num_fwd_outputs)``, with AOTAutograd's conventions for the halves: the
forward returns its outputs then the saved tensors; the backward takes the saved
tensors then the tangents and returns the gradients.
"""
from __future__ import annotations

import logging
import operator
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx
from torch._functorch._aot_autograd.descriptors import InputMutationAOTOutput, SavedForBackwardsAOTOutput
from torch.fx.experimental.symbolic_shapes import optimization_hint

from .maxflow import INFINITE, FlowGraph

log = logging.getLogger(__name__)
# the element count charged for a size with no hint (an unbacked size)
_UNKNOWN_NUMEL = 4096
PARTITION_KEY = "fastdynamo_partition"


class PartitionRefused(Exception):
    """The joint graph has something the partitioner does not handle (RNG state
    inputs, saved non-tensors): the graph runs as ATen ops, with this reason."""


@dataclass
class Partition:
    """What the cut chose, kept for explain() and the tests."""

    saved: list[str]
    saved_bytes: int
    recomputed: list[str]  # forward nodes the backward graph computes again


def is_tangent(node: fx.Node) -> bool:
    return node.op == "placeholder" and "tangents" in str(node.target)


def _is_backward_seed(node: fx.Node) -> bool:
    return node.op == "placeholder" and any(key in str(node.target) for key in ("bwd_seed", "bwd_base_offset"))


def is_symbolic_scalar(node: fx.Node) -> bool:
    return isinstance(node.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool))


def _value_bytes(node: fx.Node) -> int | None:
    """Bytes a saved value holds (a symbolic size counts at the size the capture saw,
    a saved symbolic scalar one byte), None when it cannot be saved."""
    value = node.meta.get("val")
    if is_symbolic_scalar(node):
        return 1
    if not isinstance(value, torch.Tensor):
        return None
    numel = optimization_hint(value.numel(), fallback=_UNKNOWN_NUMEL)
    return max(numel * value.element_size(), 1)


def recomputable(node: fx.Node) -> bool:
    """Cheap to compute again in the backward: pointwise ops, views, tuple items,
    factories. Never random ops (the backward would draw other numbers)."""
    if node.op != "call_function":
        return False
    target = node.target
    if target is operator.getitem:
        return True
    if not isinstance(target, torch._ops.OpOverload):
        return False
    tags = target.tags
    if torch.Tag.nondeterministic_seeded in tags:
        return False
    if torch.Tag.pointwise in tags or target.is_view:
        return True
    return not any(isinstance(arg, fx.Node) for arg in node.all_input_nodes)  # a factory


def _ancestors(outputs: list, stop: set[fx.Node] | None = None) -> set[fx.Node]:
    seen: set[fx.Node] = set()
    stack = [n for n in outputs if isinstance(n, fx.Node)]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if stop is None or node not in stop:
            stack.extend(node.all_input_nodes)
    return seen


def _descendants(starts: list[fx.Node]) -> set[fx.Node]:
    seen: set[fx.Node] = set()
    stack = list(starts)
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(node.users)
    return seen


def mutated_inputs(placeholders: list[fx.Node], fw_descs: list) -> list[fx.Node]:
    """Inputs that the runtime writes after the forward returns (AOTAutograd's epilogue
    copies a mutated input's new value, an output of the forward, into it)."""
    written = {d.mutated_input for d in fw_descs if isinstance(d, InputMutationAOTOutput)}
    return [p for p in placeholders
            if p.meta.get("aot_runtime_epilogue_input_mutation") or p.meta.get("desc") in written]


def choose_saved(graph: fx.Graph, fw_outputs: list, bw_outputs: list, fw_descs: list) -> list[fx.Node]:
    """The forward values to save, in graph order: the minimum cut described above."""
    placeholders = list(graph.find_nodes(op="placeholder"))
    backward_only = _descendants([p for p in placeholders if is_tangent(p) or _is_backward_seed(p)])
    required_fw = _ancestors(fw_outputs)
    needed = required_fw | _ancestors(bw_outputs)
    # A written input's value is not the one the backward needs (its version changes,
    # autograd refuses it), so neither it nor anything computed from it may be saved as
    # the input or recomputed in the backward.
    mutated = mutated_inputs(placeholders, fw_descs)
    pinned = _descendants(mutated)
    flow = FlowGraph()
    for node in graph.nodes:
        if node not in needed or node in backward_only or node.op == "output":
            continue
        size = _value_bytes(node)
        if node.op == "placeholder":
            flow.add_edge("source", (node, "in"), INFINITE)
            # an input is alive anyway: saving it costs (almost) nothing
            capacity = INFINITE if node in pinned or size is None else 1
        else:
            capacity = INFINITE if size is None else size
            if node in pinned or (node in required_fw and not recomputable(node)):
                flow.add_edge("source", (node, "in"), INFINITE)
        flow.add_edge((node, "in"), (node, "out"), capacity)
        for user in node.users:
            if user in backward_only or user.op == "output":
                if user in backward_only or node in bw_outputs:
                    flow.add_edge((node, "out"), "sink", INFINITE)
            elif user in needed:
                flow.add_edge((node, "out"), (user, "in"), INFINITE)
    value, side = flow.min_cut("source", "sink")
    if value >= INFINITE:
        raise PartitionRefused("no finite cut: the backward needs a forward value that cannot be saved")
    return [n for n in graph.nodes if (n, "in") in side and (n, "out") not in side]


def extract(graph: fx.Graph, inputs: list[fx.Node], outputs: list, descs: list | None, owner: torch.nn.Module,
            what: str) -> fx.GraphModule:
    """The part of ``graph`` that computes ``outputs`` from ``inputs`` (in that order)."""
    new = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    for node in inputs:
        env[node] = new.placeholder(node.name)
        env[node].meta = dict(node.meta)
    needed = _ancestors(outputs, stop=set(inputs))
    for node in graph.nodes:
        if node not in needed or node in env or node.op == "output":
            continue
        if node.op == "placeholder":
            raise AssertionError(f"the {what} graph needs {node.name}, which is not one of its inputs")
        env[node] = new.node_copy(node, lambda n: env[n])
    out = new.output(tuple(env[o] if isinstance(o, fx.Node) else o for o in outputs))
    if descs is not None:
        out.meta["desc"] = descs
    new.eliminate_dead_code()
    module = fx.GraphModule(owner, new)
    module.graph.lint()
    return module


def partition(joint: fx.GraphModule, _joint_inputs: Any, *, num_fwd_outputs: int,
              **_ignored: Any) -> tuple[fx.GraphModule, fx.GraphModule]:
    """AOTAutograd's partition function: ``(forward, backward)`` graph modules.

    ``joint.meta[PARTITION_KEY]`` (a :class:`Partition`) records the choice."""
    graph = joint.graph
    output = next(iter(graph.find_nodes(op="output")))
    outputs = list(output.args[0])
    descs = output.meta.get("desc")
    fw_outputs, bw_outputs = outputs[:num_fwd_outputs], outputs[num_fwd_outputs:]
    placeholders = list(graph.find_nodes(op="placeholder"))
    if any("rng_state" in str(p.target) for p in placeholders):
        raise PartitionRefused("RNG state inputs in a joint graph")
    saved = choose_saved(graph, fw_outputs, bw_outputs, list(descs[:num_fwd_outputs]) if descs else [])
    primals = [p for p in placeholders if not is_tangent(p) and not _is_backward_seed(p)]
    backward_inputs = [p for p in placeholders if is_tangent(p) or _is_backward_seed(p)]
    backward = extract(graph, saved + backward_inputs, bw_outputs,
                       descs[num_fwd_outputs:] if descs else None, joint, "backward")
    used = {n.name for n in backward.graph.find_nodes(op="placeholder") if n.users}
    # AOTAutograd's order: the forward returns the saved tensors then the saved
    # symbolic scalars; the backward takes the scalars first
    symbols = [n for n in saved if n.name in used and is_symbolic_scalar(n)]
    saved = [n for n in saved if n.name in used and not is_symbolic_scalar(n)]
    backward = extract(graph, symbols + saved + backward_inputs, bw_outputs,
                       descs[num_fwd_outputs:] if descs else None, joint, "backward")
    saved += symbols
    forward = extract(graph, primals, fw_outputs + saved, None, joint, "forward")
    if descs:
        forward.graph.find_nodes(op="output")[0].meta["desc"] = [*descs[:num_fwd_outputs], *(SavedForBackwardsAOTOutput(i) for i in range(len(saved)))]
    computed_in_forward = {n.name for n in forward.graph.nodes if n.op == "call_function"}
    recomputed = [n.name for n in backward.graph.nodes if n.op == "call_function" and n.name in computed_in_forward]
    record = Partition([n.name for n in saved], sum(_value_bytes(n) or 0 for n in saved), recomputed)
    joint.meta[PARTITION_KEY] = record
    log.debug("partition: %d saved (%d bytes), %d recomputed", len(saved), record.saved_bytes, len(recomputed))
    return forward, backward

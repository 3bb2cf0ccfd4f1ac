"""Eager's ``None`` gradients for inputs the loss does not reach.

AOTAutograd's backward runs when any output of the graph gets a gradient, and it returns
a gradient for every input some output depends on: an input that only the outputs the
loss left out depend on gets zeros (AOTAutograd materializes the missing tangents),
where eager leaves its ``.grad`` ``None``. That is a different training step: an
optimizer skips a parameter whose gradient is ``None`` but applies weight decay, or
Adam's moments, to a zero gradient (BERT's pooler, when the loss reads only the last
hidden state).

So an input requiring grad that reaches some but not all of the outputs passes through
a gate: an identity whose backward returns ``None`` unless one of the outputs it reaches
got a gradient in this call's backward. A hook on each of those outputs records it
(tensor hooks run before the graph's backward node, with ``None`` for an output no loss
reads; that node runs before the gates'). Graphs whose every gradient input reaches
every output, most of them, get no gate and no hook.

>>> gm = torch.fx.symbolic_trace(lambda x, w, v: ((x * w).sum(), (x * v).sum()))
>>> plan = GatePlan.of(gm)
>>> plan.gated_inputs([torch.randn(2), torch.randn(2, requires_grad=True),
...                    torch.randn(2, requires_grad=True)])  # w and v: one output each
[1, 2]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

# graph calls whose result carries no gradient of their arguments
_DETACHING = frozenset({torch.Tensor.detach, torch.detach, "detach"})


@dataclass(frozen=True)
class GatePlan:
    """For each input (by position): the outputs (by position) that depend on it."""

    reached: dict[int, frozenset[int]]

    @staticmethod
    def of(gm: torch.fx.GraphModule) -> "GatePlan":
        placeholders = list(gm.graph.find_nodes(op="placeholder"))
        (output,) = gm.graph.find_nodes(op="output")
        returned = output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],)
        positions: dict[torch.fx.Node, set[int]] = {node: set() for node in gm.graph.nodes}
        for index, value in enumerate(returned):
            if isinstance(value, torch.fx.Node):
                positions[value].add(index)
        for node in reversed(list(gm.graph.nodes)):  # users before the nodes they use
            for user in node.users:
                if user.op != "output" and not _detaches(user):
                    positions[node] |= positions[user]
        return GatePlan({index: frozenset(positions[node]) for index, node in enumerate(placeholders)})

    def gated_inputs(self, example_inputs: list) -> list[int]:
        """The inputs requiring grad that reach some but not all of the outputs the
        inputs requiring grad reach."""
        grad_inputs = [index for index, value in enumerate(example_inputs)
                       if isinstance(value, torch.Tensor) and value.requires_grad and index in self.reached]
        every = frozenset().union(*(self.reached[index] for index in grad_inputs))
        return [index for index in grad_inputs if self.reached[index] and self.reached[index] != every]

    def wrap(self, run: Callable[..., Any], example_inputs: list) -> Callable[..., Any]:
        """``run`` with gates on the gated inputs (``run`` itself when there are none)."""
        gated = {index: self.reached[index] for index in self.gated_inputs(example_inputs)}
        if not gated:
            return run
        state = _GateState(gated, sorted(frozenset().union(*gated.values())))

        # a function, not a partial: the frame marks its code skipped recursively, so
        # what it calls is never captured as user code
        def gated_run(*args: Any) -> Any:
            return _gated_call(state, run, args)
        gated_run.gate_state = state  # type: ignore[attr-defined]
        return gated_run


def _detaches(node: torch.fx.Node) -> bool:
    try:
        return node.target in _DETACHING
    except TypeError:  # an unhashable target
        return False


class _GateState:
    """What one graph's gates know. The first call in grad mode runs the :class:`_Gates`
    node; from its results, when every hooked output is a direct output of AOTAutograd's
    one autograd node (``CompiledFunctionBackward``) and every gated input one of its
    inputs, later calls gate on that node instead (:class:`_NodeGate`): one post hook per
    call, no extra node, no view per input (~45 us a step for Llama's 19 gated inputs)."""

    def __init__(self, gated: dict, hooked: list):
        self.gated, self.hooked = gated, hooked
        self.node_gate: _NodeGate | None = None
        self.decided = False


def _gated_call(state: _GateState, run: Callable[..., Any], args: tuple) -> Any:
    if not torch.is_grad_enabled():
        return run(*args)
    if state.node_gate is not None:
        results = run(*args)
        state.node_gate.attach(results)
        return results
    reached: set[int] = set()
    values = list(args)
    through = [index for index in state.gated
               if isinstance(values[index], torch.Tensor) and values[index].requires_grad]
    passed: tuple = ()
    if through:
        # one autograd node for every gated input: a node per input cost ~5 us each
        passed = _Gates.apply(reached, [state.gated[index] for index in through], *(values[i] for i in through))
        for index, value in zip(through, passed, strict=True):
            values[index] = value
    results = run(*values)
    for index in state.hooked:
        value = results[index]
        if isinstance(value, torch.Tensor) and value.requires_grad:
            value.register_hook(_Recorder(reached, index))
    if not state.decided and len(through) == len(state.gated):
        state.decided = True
        state.node_gate = _NodeGate.of(state, results, dict(zip(through, passed, strict=True)))
    return results


class _NodeGate:
    """A post hook on the graph's autograd node: it sees which of the node's outputs got
    a gradient (``None`` for those no loss reached: the node materializes zeros only
    inside its own backward) and returns ``None`` as the gradient of each gated input
    whose outputs all got none, as the :class:`_Gates` node would. ``output_slots``: the
    hooked outputs' positions among the node's outputs; ``input_slots``: the gated inputs'
    positions among its inputs (AOTAutograd's flat arguments: fixed for the graph)."""

    def __init__(self, anchor: int, output_slots: dict, input_slots: dict, gated: dict):
        self.anchor, self.output_slots, self.input_slots, self.gated = anchor, output_slots, input_slots, gated

    @staticmethod
    def of(state: _GateState, results: Any, passed: dict) -> "_NodeGate | None":
        """The node gate for the graph whose first gated call returned ``results``
        (``passed``: each gated input's value after the :class:`_Gates` node), or None
        when this graph's outputs or inputs are not the node's own."""
        outputs = [index for index in state.hooked
                   if isinstance(results[index], torch.Tensor) and results[index].requires_grad]
        nodes = {id(results[index].grad_fn): results[index].grad_fn for index in outputs}
        if len(nodes) != 1:
            return None
        (node,) = nodes.values()
        if type(node).__name__ != "CompiledFunctionBackward":
            return None
        edges = list(node.next_functions)
        input_slots = {}
        for index, value in passed.items():
            slots = [slot for slot, (function, number) in enumerate(edges)
                     if function is value.grad_fn and number == value.output_nr]
            if len(slots) != 1:
                return None
            input_slots[index] = slots[0]
        output_slots = {index: results[index].output_nr for index in outputs}
        return _NodeGate(outputs[0], output_slots, input_slots, state.gated)

    def attach(self, results: Any) -> None:
        node = results[self.anchor].grad_fn
        if node is not None:
            node.register_hook(self)

    def __call__(self, grad_inputs: tuple, grad_outputs: tuple) -> tuple | None:
        reached = {index for index, slot in self.output_slots.items() if grad_outputs[slot] is not None}
        closed = [slot for index, slot in self.input_slots.items() if not reached & self.gated[index]]
        if not closed:
            return None  # (the node's gradients, unchanged)
        grads = list(grad_inputs)
        for slot in closed:
            grads[slot] = None
        return tuple(grads)


class _Recorder:
    """A tensor hook: the output got a gradient in this backward (None: no loss read it)."""

    def __init__(self, reached: set, index: int):
        self.reached, self.index = reached, index

    def __call__(self, grad: torch.Tensor | None) -> None:
        if grad is not None:
            self.reached.add(self.index)


class _Gates(torch.autograd.Function):
    """Identity forward on each gated input; backward: each input's gradient if an
    output that input reaches got one (``outputs[i]``: the outputs input ``i`` reaches)."""

    @staticmethod
    def forward(ctx, reached, outputs, *values):
        ctx.reached, ctx.outputs = reached, outputs
        return tuple(value.view_as(value) for value in values)

    @staticmethod
    def backward(ctx, *grads):
        reached = ctx.reached
        return (None, None, *(grad if reached & outputs else None
                              for grad, outputs in zip(grads, ctx.outputs, strict=True)))

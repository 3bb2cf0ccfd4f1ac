"""Small cleanup passes on captured FX graphs; each leaves a graph that passes
``graph.lint()``.

>>> import torch, operator
>>> g = torch.fx.Graph(); x = g.placeholder("x")
>>> dead = g.call_function(operator.add, (x, 1)); _ = g.output(x)
>>> eliminate_dead_code(g)
1
"""
from __future__ import annotations

import operator
from typing import Any, Mapping

import torch
import torch.fx

# Python operators that write to their first argument (``x += y``, ``x[i] = y``).
INPLACE_OPERATORS = frozenset({operator.iadd, operator.isub, operator.imul, operator.itruediv,
                               operator.ifloordiv, operator.imod, operator.ipow, operator.iand,
                               operator.ior, operator.ixor, operator.ilshift, operator.irshift,
                               operator.imatmul, operator.setitem})


def mutates_first_argument(op: str, target: Any, kwargs: Mapping[str, Any]) -> bool:
    """True for a graph call (``op`` is ``call_function`` or ``call_method``) that writes
    to its first argument: ``inplace=True``, an in-place operator, or torch's naming
    convention for in-place ops (``add_``, ``Tensor.mul_``).

    >>> mutates_first_argument("call_method", "add_", {}), mutates_first_argument("call_method", "add", {})
    (True, False)
    >>> mutates_first_argument("call_function", operator.iadd, {})
    True
    """
    if kwargs.get("inplace") is True or target in INPLACE_OPERATORS:
        return True
    name = target if op == "call_method" else getattr(target, "__name__", "")
    return isinstance(name, str) and name.endswith("_") and not name.startswith("_")


def is_effectful(node: torch.fx.Node) -> bool:
    """True for nodes that mutate state (in-place ops, grad mode switches)."""
    if node.op in ("placeholder", "output") or node.meta.get("inplace"):
        return True
    if node.op == "call_function" and node.target is torch._C._set_grad_enabled:
        return True
    if node.op in ("call_function", "call_method"):
        return mutates_first_argument(node.op, node.target, node.kwargs)
    return False


def eliminate_dead_code(graph: torch.fx.Graph) -> int:
    """Remove nodes whose results are unused and that have no effect; returns how many."""
    removed = 0
    for node in reversed(list(graph.nodes)):
        if not node.users and not is_effectful(node):
            graph.erase_node(node)
            removed += 1
    return removed


def count_ops(graph: torch.fx.Graph) -> int:
    """Number of call nodes (what explain reports as ops per graph)."""
    return sum(1 for n in graph.nodes if n.op in ("call_function", "call_method", "call_module"))

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

import torch
import torch.fx

# Nodes that matter even when nothing reads their result.
_EFFECTFUL_TARGETS = {torch._C._set_grad_enabled, operator.setitem, operator.iadd, operator.isub,
                      operator.imul, operator.itruediv, operator.ifloordiv, operator.imod,
                      operator.ipow, operator.iand, operator.ior, operator.ixor, operator.ilshift,
                      operator.irshift, operator.imatmul}


def is_effectful(node: torch.fx.Node) -> bool:
    """True for nodes that mutate state (in-place ops, grad mode switches)."""
    if node.op in ("placeholder", "output"):
        return True
    if node.meta.get("inplace"):
        return True
    if node.op == "call_method":
        return _is_inplace_name(node.target)
    if node.op == "call_function":
        if node.target in _EFFECTFUL_TARGETS:
            return True
        return _is_inplace_name(getattr(node.target, "__name__", ""))
    return False


def _is_inplace_name(name: str) -> bool:
    return name.endswith("_") and not name.startswith("_")


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

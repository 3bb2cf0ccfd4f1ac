"""The loop nest of one C++ kernel: which dimensions of a group become one loop.

A group iterates its space dimension by dimension (kept dimensions outside, reduced ones
inside). Two neighbouring dimensions become **one** loop when every address the group
computes stays free of ``//`` and ``%`` once the two are written as one variable
(``x0 = y // n``, ``x1 = y % n``): a contiguous ``(rows, cols)`` space is one loop of
``rows * cols`` iterations, which the compiler vectorizes and OpenMP splits evenly; a
transposed read keeps two loops and plain address arithmetic. Sizes of 1 get no loop.

>>> from fastdynamo.backends.kernels.indexing import Var, add, mul, render
>>> x0, x1 = Var("x0", 4), Var("x1", 8)
>>> nest = merge_dims([x0, x1], [add(mul(x0, 8), x1)])
>>> [(v.name, v.extent) for v in nest.loops], render(nest.substitution["x1"])
([('y0', 32)], 'y0 % 8')
>>> nest = merge_dims([x0, x1], [add(x0, mul(x1, 4))])   # a transposed read: two loops
>>> [v.name for v in nest.loops]
['x0', 'x1']
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ..kernels import indexing, sizes
from ..kernels.indexing import FloorDiv, Mod, Var


@dataclass
class LoopNest:
    """``loops`` outermost first; ``substitution`` maps each original variable to an
    expression over the loop variables."""

    loops: list
    substitution: dict = field(default_factory=dict)


def merge_dims(dims: list, expressions: list, prefix: str = "y") -> LoopNest:
    """Merge neighbouring dimensions of ``dims`` (Vars, outermost first; non-Vars are
    size-1 dimensions and dropped) while ``expressions`` stay free of ``//`` and ``%``
    over the merged variable (see the module docstring)."""
    loops = [d for d in dims if isinstance(d, Var)]
    substitution: dict = {v.name: v for v in loops}
    counter = itertools.count()
    position = len(loops) - 1
    while position > 0:
        outer, inner = loops[position - 1], loops[position]
        merged = Var(f"{prefix}{next(counter)}", sizes.normalise(outer.extent * inner.extent))
        step = {outer.name: indexing.floordiv(merged, inner.extent), inner.name: indexing.mod(merged, inner.extent)}
        rewritten = [indexing.substitute(e, step) for e in expressions]
        if all(not _divides(e, merged.name) for e in rewritten):
            expressions = rewritten
            substitution = {name: indexing.substitute(e, step) for name, e in substitution.items()}
            loops[position - 1:position + 1] = [merged]
            position = min(position, len(loops) - 1)
        else:
            position -= 1
    return LoopNest(loops, substitution)


def _divides(expr, name: str) -> bool:
    """Whether ``expr`` divides or takes the remainder of an expression over ``name``."""
    if isinstance(expr, (FloorDiv, Mod)):
        return name in indexing.free_vars(expr.expr) or _divides(expr.expr, name)
    if isinstance(expr, indexing.Sum):
        return any(_divides(term, name) for term in expr.terms)
    if isinstance(expr, indexing.Scaled):
        return _divides(expr.expr, name)
    return False

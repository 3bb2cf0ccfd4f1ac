"""Integer index expressions: the address arithmetic of the kernel IR.

Every index is a non-negative integer expression over loop variables, built from
``+``, ``*`` by a constant, ``//`` and ``%`` by a constant. Constructors simplify as
they build, using each variable's extent (its loop bound), so that views such as a
reshape followed by its inverse collapse back to plain variables.

>>> i = Var("i0", 4); j = Var("j0", 8)
>>> render(add(mul(i, 8), j))
'i0 * 8 + j0'
>>> render(mod(j, 8))
'j0'
>>> render(floordiv(add(mul(i, 8), j), 8))
'i0'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Union

IndexExpr = Union["Var", "Const", "Sum", "Scaled", "FloorDiv", "Mod"]


@dataclass(frozen=True)
class Var:
    """A loop variable ranging over ``0 <= name < extent``."""

    name: str
    extent: int


@dataclass(frozen=True)
class Const:
    value: int


@dataclass(frozen=True)
class Sum:
    """``sum(terms) + offset``; terms are never Sum or Const (kept flat)."""

    terms: tuple
    offset: int


@dataclass(frozen=True)
class Scaled:
    """``expr * factor`` with ``factor >= 2``."""

    expr: IndexExpr
    factor: int


@dataclass(frozen=True)
class FloorDiv:
    expr: IndexExpr
    divisor: int


@dataclass(frozen=True)
class Mod:
    expr: IndexExpr
    modulus: int


ZERO = Const(0)


def upper_bound(expr: IndexExpr) -> int:
    """Exclusive upper bound of ``expr`` (all expressions are non-negative).

    >>> upper_bound(add(mul(Var("a", 3), 4), Var("b", 4)))
    12
    """
    if isinstance(expr, Var):
        return expr.extent
    if isinstance(expr, Const):
        return expr.value + 1
    if isinstance(expr, Sum):
        return sum(upper_bound(term) - 1 for term in expr.terms) + expr.offset + 1
    if isinstance(expr, Scaled):
        return (upper_bound(expr.expr) - 1) * expr.factor + 1
    if isinstance(expr, FloorDiv):
        return (upper_bound(expr.expr) - 1) // expr.divisor + 1
    if isinstance(expr, Mod):
        return min(expr.modulus, upper_bound(expr.expr))
    raise TypeError(f"not an index expression: {expr!r}")


def _split(expr: IndexExpr) -> tuple[IndexExpr, int]:
    """``expr`` as (atom, factor) so that sums can merge like terms."""
    if isinstance(expr, Scaled):
        return expr.expr, expr.factor
    return expr, 1


def _scaled(atom: IndexExpr, factor: int) -> IndexExpr:
    if factor == 0:
        return ZERO
    return atom if factor == 1 else Scaled(atom, factor)


def add(*exprs: IndexExpr | int) -> IndexExpr:
    """Sum of expressions, merging like terms and folding constants."""
    coefficients: dict[IndexExpr, int] = {}
    offset = 0
    pending = [as_index(e) for e in exprs]
    while pending:
        expr = pending.pop(0)
        if isinstance(expr, Const):
            offset += expr.value
        elif isinstance(expr, Sum):
            pending.extend(expr.terms)
            offset += expr.offset
        else:
            atom, factor = _split(expr)
            coefficients[atom] = coefficients.get(atom, 0) + factor
    _recombine_div_mod(coefficients)
    terms = tuple(_scaled(atom, f) for atom, f in coefficients.items() if f != 0)
    if not terms:
        return Const(offset)
    if len(terms) == 1 and offset == 0:
        return terms[0]
    return Sum(terms, offset)


def _recombine_div_mod(coefficients: dict[IndexExpr, int]) -> None:
    # (e // m) * m * c + (e % m) * c == e * c: what a reshape to more dims followed by
    # contiguous address arithmetic produces; folding it keeps loads vectorisable.
    for atom in list(coefficients):
        if not isinstance(atom, Mod) or atom not in coefficients:
            continue
        quotient = FloorDiv(atom.expr, atom.modulus)
        c = coefficients[atom]
        if coefficients.get(quotient) == c * atom.modulus:
            del coefficients[atom], coefficients[quotient]
            inner, factor = _split(atom.expr)
            coefficients[inner] = coefficients.get(inner, 0) + c * factor


def mul(expr: IndexExpr | int, factor: int) -> IndexExpr:
    """``expr * factor`` for a constant ``factor >= 0``."""
    expr = as_index(expr)
    if factor < 0:
        raise ValueError("index factors must be non-negative")
    if isinstance(expr, Const):
        return Const(expr.value * factor)
    if isinstance(expr, Sum):
        return add(*(mul(t, factor) for t in expr.terms), expr.offset * factor)
    atom, inner = _split(expr)
    return _scaled(atom, inner * factor)


def floordiv(expr: IndexExpr | int, divisor: int) -> IndexExpr:
    """``expr // divisor`` simplified with the bounds of ``expr``."""
    expr = as_index(expr)
    if divisor == 1:
        return expr
    if isinstance(expr, Const):
        return Const(expr.value // divisor)
    if upper_bound(expr) <= divisor:
        return ZERO
    if isinstance(expr, Scaled) and expr.factor % divisor == 0:
        return mul(expr.expr, expr.factor // divisor)
    if isinstance(expr, Sum):
        # Pull out the terms that are exact multiples when the rest stays below divisor.
        multiples = [t for t in expr.terms if _split(t)[1] % divisor == 0]
        rest = [t for t in expr.terms if _split(t)[1] % divisor != 0]
        rest_expr = add(*rest, expr.offset)
        if multiples and upper_bound(rest_expr) <= divisor:
            return add(*(mul(_split(t)[0], _split(t)[1] // divisor) for t in multiples))
    if isinstance(expr, FloorDiv):
        return FloorDiv(expr.expr, expr.divisor * divisor)
    return FloorDiv(expr, divisor)


def mod(expr: IndexExpr | int, modulus: int) -> IndexExpr:
    """``expr % modulus`` simplified with the bounds of ``expr``."""
    expr = as_index(expr)
    if modulus == 1:
        return ZERO
    if isinstance(expr, Const):
        return Const(expr.value % modulus)
    if upper_bound(expr) <= modulus:
        return expr
    if isinstance(expr, Scaled) and expr.factor % modulus == 0:
        return ZERO
    if isinstance(expr, Sum):
        kept = [t for t in expr.terms if _split(t)[1] % modulus != 0]
        if len(kept) != len(expr.terms):
            return mod(add(*kept, expr.offset % modulus), modulus)
    return Mod(expr, modulus)


def as_index(value: IndexExpr | int) -> IndexExpr:
    if isinstance(value, int):
        return Const(value)
    return value


def substitute(expr: IndexExpr, mapping: Mapping[str, IndexExpr]) -> IndexExpr:
    """Replace variables by name, re-simplifying on the way up.

    >>> render(substitute(add(Var("i", 4), 1), {"i": mul(Var("x", 2), 2)}))
    'x * 2 + 1'
    """
    if isinstance(expr, Var):
        return mapping.get(expr.name, expr)
    if isinstance(expr, Const):
        return expr
    if isinstance(expr, Sum):
        return add(*(substitute(t, mapping) for t in expr.terms), expr.offset)
    if isinstance(expr, Scaled):
        return mul(substitute(expr.expr, mapping), expr.factor)
    if isinstance(expr, FloorDiv):
        return floordiv(substitute(expr.expr, mapping), expr.divisor)
    if isinstance(expr, Mod):
        return mod(substitute(expr.expr, mapping), expr.modulus)
    raise TypeError(f"not an index expression: {expr!r}")


def free_vars(expr: IndexExpr) -> set[str]:
    """Names of the variables ``expr`` depends on."""
    if isinstance(expr, Var):
        return {expr.name}
    if isinstance(expr, Const):
        return set()
    if isinstance(expr, Sum):
        return set().union(*(free_vars(t) for t in expr.terms))
    return free_vars(expr.expr)


def render(expr: IndexExpr) -> str:
    """Python/Triton source for ``expr`` (variables render as their names)."""
    if isinstance(expr, Var):
        return expr.name
    if isinstance(expr, Const):
        return str(expr.value)
    if isinstance(expr, Sum):
        parts = [render(t) for t in expr.terms]
        if expr.offset:
            parts.append(str(expr.offset))
        return " + ".join(parts)
    if isinstance(expr, Scaled):
        return f"{_render_operand(expr.expr)} * {expr.factor}"
    if isinstance(expr, FloorDiv):
        return f"{_render_operand(expr.expr)} // {expr.divisor}"
    if isinstance(expr, Mod):
        return f"{_render_operand(expr.expr)} % {expr.modulus}"
    raise TypeError(f"not an index expression: {expr!r}")


def _render_operand(expr: IndexExpr) -> str:
    text = render(expr)
    return text if isinstance(expr, (Var, Const)) else f"({text})"


def linear_offset(index: tuple, strides: tuple) -> IndexExpr:
    """Element offset of a multi-dimensional ``index`` in a buffer with ``strides``.

    >>> render(linear_offset((Var("a", 2), Var("b", 3)), (3, 1)))
    'a * 3 + b'
    """
    return add(*(mul(i, s) for i, s in zip(index, strides, strict=True)))


def unravel(linear: IndexExpr, shape: tuple) -> tuple:
    """Row-major multi-dimensional index of position ``linear`` in ``shape``.

    >>> [render(e) for e in unravel(Var("x", 6), (2, 3))]
    ['x // 3', 'x % 3']
    """
    index = []
    stride = 1
    for size in reversed(shape):
        index.append(mod(floordiv(linear, stride), size) if size != 1 else ZERO)
        stride *= size
    return tuple(reversed(index))


def ravel(index: tuple, shape: tuple) -> IndexExpr:
    """Row-major linear position of ``index`` in ``shape`` (inverse of unravel)."""
    strides = contiguous_strides(shape)
    return linear_offset(index, strides)


def contiguous_strides(shape: tuple) -> tuple:
    strides = []
    running = 1
    for size in reversed(shape):
        strides.append(running)
        running *= max(size, 1)
    return tuple(reversed(strides))

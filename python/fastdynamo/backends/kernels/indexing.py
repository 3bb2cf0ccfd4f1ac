"""Integer index expressions: the address arithmetic of the kernel IR.

Every index is a non-negative integer expression over loop variables, built from
``+``, ``*`` by a constant, ``//`` and ``%`` by a constant. Constructors simplify as
they build, using each variable's extent (its loop bound), so that views such as a
reshape followed by its inverse collapse back to plain variables.

The constants (extents, factors, divisors, offsets) are :data:`sizes.Size`: ints, or
symbolic sizes of a graph captured with dynamic shapes. With symbols a simplification
happens only when :mod:`sizes` proves it holds for every value of the symbols.

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
from typing import Callable, Mapping, Union

import sympy

from . import sizes
from .sizes import Size

IndexExpr = Union["Var", "Const", "Sum", "Scaled", "FloorDiv", "Mod"]


@dataclass(frozen=True)
class Var:
    """A loop variable ranging over ``0 <= name < extent``."""

    name: str
    extent: Size


@dataclass(frozen=True)
class Const:
    value: Size


@dataclass(frozen=True)
class Sum:
    """``sum(terms) + offset``; terms are never Sum or Const (kept flat)."""

    terms: tuple
    offset: Size


@dataclass(frozen=True)
class Scaled:
    """``expr * factor`` with ``factor >= 2``."""

    expr: IndexExpr
    factor: Size


@dataclass(frozen=True)
class FloorDiv:
    expr: IndexExpr
    divisor: Size


@dataclass(frozen=True)
class Mod:
    expr: IndexExpr
    modulus: Size


ZERO = Const(0)


def upper_bound(expr: IndexExpr) -> Size:
    """Exclusive upper bound of ``expr`` (all expressions are non-negative).

    >>> upper_bound(add(mul(Var("a", 3), 4), Var("b", 4)))
    12
    """
    if isinstance(expr, Var):
        return expr.extent
    if isinstance(expr, Const):
        return expr.value + 1
    if isinstance(expr, Sum):
        return _sized(sum(upper_bound(term) - 1 for term in expr.terms) + expr.offset + 1)
    if isinstance(expr, Scaled):
        return _sized((upper_bound(expr.expr) - 1) * expr.factor + 1)
    if isinstance(expr, FloorDiv):
        # (u - 1) // d + 1 == ceil(u / d): the spelling that cancels symbolic factors
        return sizes.ceil_div(upper_bound(expr.expr), expr.divisor)
    if isinstance(expr, Mod):
        return sizes.size_min(expr.modulus, upper_bound(expr.expr))
    raise TypeError(f"not an index expression: {expr!r}")


def _sized(value: Size) -> Size:
    return value if isinstance(value, int) else sizes.normalise(value.expand())


def _split(expr: IndexExpr) -> tuple[IndexExpr, Size]:
    """``expr`` as (atom, factor) so that sums can merge like terms."""
    if isinstance(expr, Scaled):
        return expr.expr, expr.factor
    return expr, 1


def _scaled(atom: IndexExpr, factor: Size) -> IndexExpr:
    factor = sizes.normalise(factor)
    if factor == 0:
        return ZERO
    return atom if factor == 1 else Scaled(atom, factor)


def add(*exprs: IndexExpr | Size) -> IndexExpr:
    """Sum of expressions, merging like terms and folding constants."""
    coefficients: dict[IndexExpr, Size] = {}
    offset: Size = 0
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
    offset = _sized(offset)
    terms = tuple(_scaled(atom, f) for atom, f in coefficients.items() if sizes.normalise(f) != 0)
    if not terms:
        return Const(offset)
    if len(terms) == 1 and offset == 0:
        return terms[0]
    return Sum(terms, offset)


def _recombine_div_mod(coefficients: dict[IndexExpr, Size]) -> None:
    # (e // m) * m * c + (e % m) * c == e * c: what a reshape to more dims followed by
    # contiguous address arithmetic produces; folding it keeps loads vectorisable.
    for atom in list(coefficients):
        if not isinstance(atom, Mod) or atom not in coefficients:
            continue
        quotient = FloorDiv(atom.expr, atom.modulus)
        c = coefficients[atom]
        if quotient in coefficients and sizes.normalise(coefficients[quotient] - c * atom.modulus) == 0:
            del coefficients[atom], coefficients[quotient]
            inner, factor = _split(atom.expr)
            coefficients[inner] = coefficients.get(inner, 0) + c * factor


def mul(expr: IndexExpr | int, factor: Size) -> IndexExpr:
    """``expr * factor`` for a constant ``factor >= 0``."""
    expr = as_index(expr)
    factor = sizes.normalise(factor)
    if isinstance(factor, int) and factor < 0:
        raise ValueError("index factors must be non-negative")
    if isinstance(expr, Const):
        return Const(_sized(expr.value * factor))
    if isinstance(expr, Sum):
        return add(*(mul(t, factor) for t in expr.terms), expr.offset * factor)
    atom, inner = _split(expr)
    return _scaled(atom, inner * factor)


def floordiv(expr: IndexExpr | int, divisor: Size) -> IndexExpr:
    """``expr // divisor`` simplified with the bounds of ``expr``."""
    expr = as_index(expr)
    divisor = sizes.normalise(divisor)
    if divisor == 1:
        return expr
    if isinstance(expr, Const):
        return Const(sizes.floor_div(expr.value, divisor))
    if sizes.provably_le(upper_bound(expr), divisor):
        return ZERO
    if isinstance(expr, Scaled) and (quotient := sizes.exact_quotient(expr.factor, divisor)) is not None:
        return mul(expr.expr, quotient)
    if isinstance(expr, Sum):
        # Pull out the terms that are exact multiples when the rest stays below divisor.
        quotients = [sizes.exact_quotient(_split(t)[1], divisor) for t in expr.terms]
        multiples = [(t, q) for t, q in zip(expr.terms, quotients, strict=True) if q is not None]
        rest = [t for t, q in zip(expr.terms, quotients, strict=True) if q is None]
        rest_expr = add(*rest, expr.offset)
        if multiples and sizes.provably_le(upper_bound(rest_expr), divisor):
            return add(*(mul(_split(t)[0], q) for t, q in multiples))
    if isinstance(expr, FloorDiv):
        return FloorDiv(expr.expr, _sized(expr.divisor * divisor))
    return FloorDiv(expr, divisor)


def mod(expr: IndexExpr | int, modulus: Size) -> IndexExpr:
    """``expr % modulus`` simplified with the bounds of ``expr``."""
    expr = as_index(expr)
    modulus = sizes.normalise(modulus)
    if modulus == 1:
        return ZERO
    if isinstance(expr, Const) and isinstance(expr.value, int) and isinstance(modulus, int):
        return Const(expr.value % modulus)
    if sizes.provably_le(upper_bound(expr), modulus):
        return expr
    if isinstance(expr, Scaled) and sizes.exact_quotient(expr.factor, modulus) is not None:
        return ZERO
    if isinstance(expr, Sum):
        kept = [t for t in expr.terms if sizes.exact_quotient(_split(t)[1], modulus) is None]
        if len(kept) != len(expr.terms):
            offset = expr.offset % modulus if isinstance(expr.offset, int) and isinstance(modulus, int) else expr.offset
            return mod(add(*kept, offset), modulus)
    return Mod(expr, modulus)


def as_index(value: IndexExpr | Size) -> IndexExpr:
    """An index expression; a size (an int, or a symbolic one such as a slice's start
    ``s1 - 2``) is a constant of the index arithmetic."""
    if isinstance(value, (int, sympy.Expr)):
        return Const(sizes.normalise(value))
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


@dataclass(frozen=True)
class Spelling:
    """How a renderer writes index arithmetic: its operators for ``//`` and ``%`` (index
    expressions are never negative, so C's truncating ``/`` is exact) and its sizes."""

    floordiv: str
    mod: str
    size: Callable[[Size], str]


PYTHON = Spelling("//", "%", sizes.render_kernel_size)  # Python, the wrapper's and Triton's


def render(expr: IndexExpr, spelling: Spelling = PYTHON) -> str:
    """Source for ``expr`` in ``spelling`` (variables render as their names)."""
    if isinstance(expr, Var):
        return expr.name
    if isinstance(expr, Const):
        return spelling.size(expr.value)
    if isinstance(expr, Sum):
        parts = [render(t, spelling) for t in expr.terms]
        if expr.offset != 0:
            parts.append(spelling.size(expr.offset))
        return " + ".join(parts)
    if isinstance(expr, Scaled):
        return f"{_render_operand(expr.expr, spelling)} * {spelling.size(expr.factor)}"
    if isinstance(expr, FloorDiv):
        return f"{_render_operand(expr.expr, spelling)} {spelling.floordiv} {spelling.size(expr.divisor)}"
    if isinstance(expr, Mod):
        return f"{_render_operand(expr.expr, spelling)} {spelling.mod} {spelling.size(expr.modulus)}"
    raise TypeError(f"not an index expression: {expr!r}")


def _render_operand(expr: IndexExpr, spelling: Spelling) -> str:
    text = render(expr, spelling)
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
        # a size 0 leaves no position to index (the kernel has no work, but its index is
        # still rendered): no division by it or by a product with it
        empty = isinstance(size, int) and size == 0
        index.append(mod(floordiv(linear, stride), size) if not (sizes.is_one(size) or empty) else ZERO)
        stride = _sized(stride * sizes.at_least_one(size))
    return tuple(reversed(index))


def ravel(index: tuple, shape: tuple) -> IndexExpr:
    """Row-major linear position of ``index`` in ``shape`` (inverse of unravel)."""
    strides = contiguous_strides(shape)
    return linear_offset(index, strides)


def contiguous_strides(shape: tuple) -> tuple:
    strides = []
    running: Size = 1
    for size in reversed(shape):
        strides.append(running)
        running = _sized(running * sizes.at_least_one(size))
    return tuple(reversed(strides))

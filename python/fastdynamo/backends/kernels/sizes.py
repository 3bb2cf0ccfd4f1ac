"""Sizes that are ints or symbolic expressions, and the facts the code generator may use.

A graph captured with symbolic sizes reaches the backend with sizes such as ``s0`` or
``s0 * s1`` (sympy expressions over the symbols :mod:`symbolic` names: ``s0, s1, ...``
for tensor sizes and strides, ``v0, v1, ...`` for int inputs). Everything that does
arithmetic on sizes (index expressions, shapes, strides, block counts) takes
``Size = int | sympy.Expr`` and asks this module what is *provable for every value*
the symbols may take. The facts used: a size symbol is at least 2 (the ShapeEnv
specialises sizes 0 and 1; :mod:`symbolic` refuses a symbol whose range starts lower),
an int symbol is any integer, and inside :func:`symbol_ranges` each symbol's range
from the ShapeEnv (a module generated there serves only sizes in those ranges: the
signature checks them). A question that cannot be proved is answered "no",
which only costs a simplification, never correctness. Static sizes take the plain-int
paths, unchanged.

>>> s0, s1 = size_symbol(0), size_symbol(1)
>>> provably_le(s1, s0 * s1), provably_le(s0, s1), provably_le(3, 4)
(True, False, True)
>>> exact_quotient(4 * s0 * s1, s1), exact_quotient(s0, s1), ceil_div(s0 * s1, s1)
(4*s0, None, s0)
>>> render_size(s0 * s1 - 1)
'(-1) + s0*s1'
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
from typing import Iterator, Union

import sympy

Size = Union[int, sympy.Expr]
SMALLEST_SYMBOLIC_SIZE = 2
# Functions a size may contain and still be written into a kernel: Triton's integer `//`
# and `%` agree with Python's on the non-negative values sizes take.
_KERNEL_ATOMS = (sympy.Symbol, sympy.Integer, sympy.Add, sympy.Mul, sympy.Pow)


# canonical symbol -> (lower, upper) bounds (None: unbounded), while generating a module
_RANGES: contextvars.ContextVar[tuple] = contextvars.ContextVar("symbol_ranges", default=())


@contextlib.contextmanager
def symbol_ranges(ranges: dict) -> Iterator[None]:
    """Let the proofs below use each symbol's range (a module generated here must only
    serve inputs whose sizes lie in these ranges)."""
    token = _RANGES.set(tuple(sorted(ranges.items(), key=lambda item: str(item[0]))))
    try:
        yield
    finally:
        _RANGES.reset(token)


class SymbolicRefused(Exception):
    """A symbolic graph cannot get kernels that serve every size; kernels are then
    generated per concrete size instead (the message says why)."""


@functools.lru_cache(maxsize=None)
def size_symbol(index: int) -> sympy.Symbol:
    """The canonical symbol ``s<index>`` generated code names a size by (>= 2)."""
    return sympy.Symbol(f"s{index}", integer=True, positive=True)


@functools.lru_cache(maxsize=None)
def value_symbol(index: int) -> sympy.Symbol:
    """The canonical symbol ``v<index>`` for an int input (any integer)."""
    return sympy.Symbol(f"v{index}", integer=True)


def is_size_symbol(symbol: sympy.Symbol) -> bool:
    return bool(symbol.is_positive)


def normalise(value: Size) -> Size:
    """A sympy integer as a Python int; anything else unchanged."""
    if isinstance(value, sympy.Expr) and value.is_Integer:
        return int(value)
    return value


def is_one(value: Size) -> bool:
    """Whether ``value`` is the constant 1 (a shape over size symbols is not known to be;
    shapes never hold int symbols, see :meth:`symbolic.SymbolicSignature.shape_size`)."""
    return isinstance(value, int) and value == 1


def at_least_one(value: Size) -> Size:
    """``max(value, 1)`` for a dimension size: a symbolic one is already >= 1."""
    return max(value, 1) if isinstance(value, int) else value


def provably_le(a: Size, b: Size) -> bool:
    """``a <= b`` for every value of the symbols (False when not provable)."""
    if isinstance(a, int) and isinstance(b, int):
        return a <= b
    if isinstance(a, sympy.Min):  # an upper bound min(m, u) is below b if either is
        return any(provably_le(normalise(arg), b) for arg in a.args)
    difference = sympy.expand(sympy.sympify(b) - sympy.sympify(a))
    if _provably_nonnegative(difference):
        return True
    ranges = _RANGES.get()
    return bool(ranges) and _bounded_below_by_zero(difference, sorted(difference.free_symbols, key=str), ranges)


@functools.lru_cache(maxsize=4096)
def _provably_nonnegative(expr: sympy.Expr) -> bool:
    if expr.is_Integer:
        return int(expr) >= 0
    symbols = sorted(expr.free_symbols, key=str)
    if all(map(is_size_symbol, symbols)) and expr.is_polynomial(*symbols):
        # With s = t + 2 and t >= 0, a polynomial in t with no negative coefficient is
        # non-negative; plain interval arithmetic loses s0*s1 - s1 >= 0.
        shifted = sympy.expand(expr.xreplace({s: s + SMALLEST_SYMBOLIC_SIZE for s in symbols}))
        if shifted.is_Integer:
            return int(shifted) >= 0
        if all(coefficient >= 0 for coefficient in sympy.Poly(shifted, *symbols).coeffs()):
            return True
    return _bounded_below_by_zero(expr, symbols)


def _bounded_below_by_zero(expr: sympy.Expr, symbols: list, known: tuple = ()) -> bool:
    from torch.utils._sympy.numbers import int_oo
    from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

    ranges = {s: ValueRanges(SMALLEST_SYMBOLIC_SIZE, int_oo) if is_size_symbol(s) else ValueRanges(-int_oo, int_oo)
              for s in symbols}
    for symbol, (lower, upper) in known:
        if symbol in ranges:
            default = ranges[symbol]
            ranges[symbol] = ValueRanges(default.lower if lower is None else max(lower, default.lower),
                                         default.upper if upper is None else upper)
    try:
        lower = bound_sympy(expr, ranges).lower
    except Exception:  # noqa: BLE001 - an expression the range analysis does not know: unproved
        return False
    return bool(lower.is_number and lower >= 0)


def exact_quotient(dividend: Size, divisor: Size) -> Size | None:
    """``dividend / divisor`` when it is an integer for every value of the symbols, else None."""
    if isinstance(dividend, int) and isinstance(divisor, int):
        return dividend // divisor if dividend % divisor == 0 else None
    quotient = sympy.cancel(sympy.sympify(dividend) / sympy.sympify(divisor))
    if sympy.fraction(quotient)[1] != 1:
        return None
    if not quotient.free_symbols:
        return normalise(quotient) if quotient.is_Integer else None
    symbols = sorted(quotient.free_symbols, key=str)
    if not quotient.is_polynomial(*symbols) or not all(c.is_Integer for c in sympy.Poly(quotient, *symbols).coeffs()):
        return None  # e.g. s0 / 2: not an integer for every s0
    return normalise(quotient)


def ceil_div(a: Size, b: Size) -> Size:
    """``ceil(a / b)`` for positive ``b``; torch's FloorDiv cancels common factors."""
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    from torch.utils._sympy.functions import FloorDiv

    return normalise(-FloorDiv(-sympy.sympify(a), sympy.sympify(b)))


def floor_div(a: Size, b: Size) -> Size:
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    from torch.utils._sympy.functions import FloorDiv

    return normalise(FloorDiv(sympy.sympify(a), sympy.sympify(b)))


def size_min(a: Size, b: Size) -> Size:
    if provably_le(a, b):
        return a
    if provably_le(b, a):
        return b
    return normalise(sympy.Min(a, b))


def render_size(value: Size) -> str:
    """Python source for a size (symbols by their names)."""
    if isinstance(value, int):
        return str(value)
    from torch.utils._sympy.printers import PythonPrinter

    return PythonPrinter().doprint(value)


def check_kernel_size(value: Size) -> None:
    """Refuse a size a kernel cannot compute: only ``+``, ``*``, positive integer powers and
    torch's ``//``/``%`` have a spelling in every renderer (a ``max`` or a float has none)."""
    if isinstance(value, int):
        return
    from torch.utils._sympy.functions import FloorDiv, PythonMod

    for node in sympy.preorder_traversal(value):
        negative_power = isinstance(node, sympy.Pow) and not (node.exp.is_Integer and node.exp > 0)
        if negative_power or not isinstance(node, (*_KERNEL_ATOMS, FloorDiv, PythonMod)):
            raise SymbolicRefused(f"size {value} has no kernel spelling")


def render_kernel_size(value: Size) -> str:
    """Python (and Triton) source for a size inside a kernel, parenthesised when compound.

    >>> render_kernel_size(size_symbol(0) * size_symbol(1)), render_kernel_size(4)
    ('(s0*s1)', '4')
    """
    check_kernel_size(value)
    return f"({render_size(value)})" if not isinstance(value, int) and not value.is_Symbol else render_size(value)


def size_symbols(value: object) -> set:
    """The symbols a size depends on."""
    return set(value.free_symbols) if isinstance(value, sympy.Basic) else set()

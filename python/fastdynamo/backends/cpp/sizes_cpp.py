"""C++ spelling of sizes and index arithmetic (the renderer's expression printer).

Index expressions are never negative, so C's truncating ``/`` and ``%`` are exact for
them. A symbolic size may hold an int input's symbol (any integer): its ``//`` and ``%``
are torch's floor forms and become the runtime header's ``fd_div_floor``/``fd_remainder``.
Loop variables and size symbols are ``int64_t``; a constant beyond ``int`` is written
``INT64_C(...)``, so no product of constants overflows ``int``.

>>> from fastdynamo.backends.kernels.sizes import size_symbol
>>> render(size_symbol(0) * size_symbol(1) - 1), render(7)
('(-1 + s0*s1)', '7')
"""
from __future__ import annotations

import sympy

from ..kernels import sizes
from ..kernels.indexing import Spelling
from ..kernels.sizes import Size


def render(value: Size) -> str:
    """C++ source for a size: an int64 constant, or the symbols' expression."""
    if isinstance(value, int):
        return _integer(value)
    sizes.check_kernel_size(value)
    text = _expression(value)
    return text if value.is_Symbol else f"({text})"


def _expression(expr: sympy.Expr) -> str:
    from torch.utils._sympy.functions import FloorDiv, PythonMod

    if expr.is_Integer:
        return _integer(int(expr))
    if expr.is_Symbol:
        return str(expr)
    if isinstance(expr, sympy.Add):
        return " + ".join(_operand(term) for term in sorted(expr.args, key=sympy.default_sort_key))
    if isinstance(expr, sympy.Mul):
        return "*".join(_operand(factor) for factor in sorted(expr.args, key=sympy.default_sort_key))
    if isinstance(expr, sympy.Pow):
        return "*".join([_operand(expr.base)] * int(expr.exp))
    if isinstance(expr, FloorDiv):
        return f"fd_div_floor({_int64(expr.args[0])}, {_int64(expr.args[1])})"
    if isinstance(expr, PythonMod):
        return f"fd_remainder({_int64(expr.args[0])}, {_int64(expr.args[1])})"
    raise sizes.SymbolicRefused(f"size {expr} has no C++ spelling")


def _int64(expr: sympy.Expr) -> str:
    return f"static_cast<int64_t>({_expression(expr)})"


def _integer(value: int) -> str:
    return str(value) if -2**31 < value < 2**31 else f"INT64_C({value})"


def _operand(expr: sympy.Expr) -> str:
    text = _expression(expr)
    return f"({text})" if isinstance(expr, sympy.Add) else text


SPELLING = Spelling("/", "%", render)

"""Shape guards: a ``ShapeEnv``'s sympy conditions lowered to the tuple form the native
guard tree evaluates (``rust/guards/shape_expr.rs``) without calling Python.

Each variable is a *load*: a size or stride of a tensor reached from a source. The
lowering knows integer constants, symbols, ``+ * **`` (integer exponents), torch's
``FloorDiv``/``Mod``/``PythonMod``/``CleanDiv``, ``Max``/``Min``, the six comparisons and
``And``/``Or``/``Not``; anything else raises :class:`ShapeLoweringError` (the caller then
compiles the frame with static shapes).

>>> import sympy
>>> s0, s1, s2 = sympy.symbols("s0 s1 s2", integer=True, positive=True)
>>> lower(sympy.Eq(s0 * s1, s2), {s0: 0, s1: 1, s2: 2})
('eq', ('mul', ('var', 0), ('var', 1)), ('var', 2))
>>> lower(s0 >= 2, {s0: 0})
('ge', ('var', 0), ('const', 2))
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sympy

from .sources import Source

SHAPE_ENV = ("shape_env",)


@dataclass(frozen=True)
class ShapeEnvSource(Source):
    """Not a path: marks the one guard of an entry that relates its symbolic sizes."""

    def name(self) -> str:
        return "shapes"

    def spec(self) -> tuple:
        return SHAPE_ENV


class ShapeLoweringError(Exception):
    """A shape condition the native evaluator cannot express."""


@dataclass(frozen=True)
class ShapeLoad:
    """``source.size()[dim]`` (kind ``"size"``) or ``.stride()[dim]`` (``"stride"``) of a
    tensor of type ``value_type``, or the int ``source`` itself (``"value"``)."""

    source: Source
    kind: str
    dim: int
    value_type: type

    def text(self) -> str:
        if self.kind == "value":
            return self.source.name()
        return f"{self.source.name()}.{self.kind}()[{self.dim}]"

    def spec(self) -> tuple:
        return (self.source.spec(), self.kind, self.dim, self.value_type)


_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def _torch_functions() -> dict[str, str]:
    """sympy function classes of torch by name -> operator of the lowered form."""
    return {"FloorDiv": "floordiv", "CleanDiv": "floordiv", "IntTrueDiv": "",
            "Mod": "mod", "PythonMod": "mod", "Max": "max", "Min": "min"}


_COMPARISONS = {sympy.Eq: "eq", sympy.Ne: "ne", sympy.StrictLessThan: "lt", sympy.LessThan: "le",
                sympy.StrictGreaterThan: "gt", sympy.GreaterThan: "ge"}


def lower(expr: Any, variables: dict) -> tuple:
    """``expr`` as nested tuples; ``variables`` maps each free symbol to its load index."""
    if expr is sympy.true or expr is True:
        return ("const", 1)
    if expr is sympy.false or expr is False:
        return ("const", 0)
    if isinstance(expr, sympy.Symbol):
        if expr not in variables:
            raise ShapeLoweringError(f"symbol {expr} has no size or stride to read")
        return ("var", variables[expr])
    if isinstance(expr, sympy.Integer) or isinstance(expr, int):
        value = int(expr)
        if not _INT64[0] <= value <= _INT64[1]:
            raise ShapeLoweringError(f"constant {value} does not fit 64 bits")
        return ("const", value)
    for cls, name in _COMPARISONS.items():
        if isinstance(expr, cls):
            return (name, lower(expr.lhs, variables), lower(expr.rhs, variables))
    if isinstance(expr, sympy.Add):
        return ("add", *(lower(a, variables) for a in expr.args))
    if isinstance(expr, sympy.Mul):
        return ("mul", *(lower(a, variables) for a in expr.args))
    if isinstance(expr, sympy.Pow):
        base, exp = expr.args
        if not isinstance(exp, sympy.Integer) or int(exp) < 0:
            raise ShapeLoweringError(f"power with exponent {exp}")
        return ("pow", lower(base, variables), int(exp))
    if isinstance(expr, sympy.And):
        return ("and", *(lower(a, variables) for a in expr.args))
    if isinstance(expr, sympy.Or):
        return ("or", *(lower(a, variables) for a in expr.args))
    if isinstance(expr, sympy.Not):
        return ("not", lower(expr.args[0], variables))
    name = _torch_functions().get(type(expr).__name__, "")
    if name:
        return (name, *(lower(a, variables) for a in expr.args))
    raise ShapeLoweringError(f"cannot lower {type(expr).__name__} ({expr}) to a native shape guard")


def shape_guard_check(loads: list[ShapeLoad], exprs: list[tuple], texts: list[str]) -> tuple:
    """The check of the one ``("shape_env",)`` guard of an entry."""
    return ("shape_exprs", tuple(load.spec() for load in loads), tuple(exprs), tuple(texts))

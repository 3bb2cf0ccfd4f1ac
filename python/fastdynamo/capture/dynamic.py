"""Dynamic shapes: which input dims are symbolic (:class:`DynamicPolicy`), and the
symbolic sizes of one capture (:class:`SymbolicShapes`): torch's ``ShapeEnv`` and
FakeTensors with symbolic sizes, sizes as graph nodes, and the guards the trace assumed.

A symbolic size reaches the graph as a ``sym_size``/``sym_stride`` node on the tensor's
placeholder (and arithmetic nodes over them), so the graph takes the same tensor inputs
as a static one. Python code that needs a concrete value (``range(n)``, a returned
size, an unbuildable expression) specialises it: ``int(s)`` records ``s == value``.

>>> import torch
>>> from fastdynamo.guards.sources import LocalSource
>>> policy = DynamicPolicy(True)
>>> policy.symbolic_dims(torch.ones(4, 1), LocalSource(0, "x"), "f")
{0: (None, None)}
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import sympy
import torch
import torch.fx
from torch._guards import GuardSource
from torch._guards import Source as TorchSource
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    StatelessSymbolicContext,
    free_unbacked_symbols,
)

from .. import logs
from ..exc import unsupported
from ..guards import Guard, tensor_match
from ..guards.shape_guards import (
    ShapeEnvSource,
    ShapeLoad,
    ShapeLoweringError,
    lower,
    shape_guard_check,
)
from ..guards.sources import AttrSource, Source
from ..marks import dynamic_dims, static_dims
from .shape_env import TraceShapeEnv
from .variables.symbolic import concrete, has_symbolic

__all__ = ["DynamicPolicy", "SymbolicShapes", "concrete", "has_symbolic"]

Bounds = tuple[int | None, int | None]


class DynamicPolicy:
    """``dynamic=`` of one compile configuration, for one trace of one code object.

    ``seen`` (automatic mode) is the code's record of the sizes each tensor source had
    in earlier traces, ``None`` where a dim already changed: a dim that differs from
    the record is made symbolic ("automatic dynamic").
    """

    def __init__(self, mode: bool | None, seen: dict[str, tuple[int | None, ...]] | None = None,
                 static_only: bool = False):
        self.mode = mode
        self.seen = seen
        self.static_only = static_only

    def symbolic_dims(self, tensor: torch.Tensor, source: Source, where: str) -> dict[int, Bounds]:
        """The dims of ``tensor`` (read from ``source``) to trace with symbolic sizes."""
        shape = tuple(tensor.shape)
        changed = self._automatic(source.name(), shape, where)
        if self.static_only:
            return {}
        marked, pinned = dynamic_dims(tensor), static_dims(tensor)
        # Parameters and module attributes keep static sizes under dynamic=True (torch's
        # force_parameter_static_shapes); a mark or an observed change still applies.
        everything = self.mode is True and not isinstance(tensor, torch.nn.Parameter) \
            and not isinstance(source, AttrSource)
        dims: dict[int, Bounds] = {}
        for dim, size in enumerate(shape):
            if dim in pinned or not (dim in marked or dim in changed or everything):
                continue
            low, high = marked.get(dim, (None, None))
            if size in (0, 1):
                logs.emit("dynamic", f"{where}: {source.name()} dim {dim} has size {size}: specialised")
                continue
            if (low is not None and size < low) or (high is not None and size > high):
                logs.emit("dynamic", f"{where}: {source.name()} dim {dim} size {size} is outside its "
                          f"mark_dynamic range [{low}, {high}]: static this time")
                continue
            dims[dim] = (low, high)
        return dims

    def symbolic_int(self, value: int, source: Source, where: str) -> bool:
        """Whether the int argument ``source`` is traced as a symbol: under automatic
        dynamic, once its value changed between traces (an int crossing a graph break
        into a resume function, a length passed in); never for 0 and 1."""
        if self.mode is not None or self.seen is None or self.static_only:
            return False
        key = f"int {source.name()}"
        before = self.seen.get(key)
        self.seen[key] = (value,) if before is None or before == (value,) else (None,)
        changed = before is not None and before != (value,)
        if before is not None and changed and before != (None,):
            logs.emit("dynamic", f"{where}: int {source.name()} becomes symbolic: value changed "
                      f"{before[0]} -> {value} since the last compilation (automatic dynamic)")
        if changed and value in (0, 1):
            logs.emit("dynamic", f"{where}: int {source.name()} is {value}: specialised")
            return False
        return changed

    def _automatic(self, name: str, shape: tuple[int, ...], where: str) -> set[int]:
        """Dims whose size differs from an earlier trace (recorded as None from then on)."""
        if self.mode is not None or self.seen is None:
            return set()
        before = self.seen.get(name)
        if before is None or len(before) != len(shape):
            self.seen[name] = shape
            return set()
        changed = {d for d, (old, new) in enumerate(zip(before, shape, strict=True)) if old != new}
        for dim in sorted(changed):
            if before[dim] is not None:
                logs.emit("dynamic", f"{where}: {name} dim {dim} becomes symbolic: size changed "
                          f"{before[dim]} -> {shape[dim]} since the last compilation (automatic dynamic)")
        self.seen[name] = tuple(None if d in changed else size for d, size in enumerate(shape))
        return changed


@dataclass(frozen=True)
class _NamedSource(TorchSource):
    """A fastdynamo source as torch's ShapeEnv names sources (symbol provenance)."""

    source: Source

    @property
    def name(self) -> str:
        return self.source.name()

    @property
    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL

    def reconstruct(self, codegen: Any) -> None:  # pragma: no cover - never code-generated
        raise NotImplementedError


@dataclass
class _SymbolicInput:
    source: Source
    example: torch.Tensor
    fake: torch.Tensor
    node: torch.fx.Node


@dataclass
class _IntInput:
    source: Source
    node: torch.fx.Node


class SymbolicShapes:
    """The ShapeEnv of one capture and the inputs whose sizes it tracks."""

    def __init__(self) -> None:
        self.env = TraceShapeEnv()
        self.inputs: list[_SymbolicInput] = []
        self.int_inputs: list[_IntInput] = []
        self.loads: dict[sympy.Symbol, ShapeLoad] = {}
        self._nodes: dict[sympy.Symbol, torch.fx.Node] = {}

    def fake_tensor(self, mode: Any, tensor: torch.Tensor, source: Source, dims: dict[int, Bounds]):
        """A FakeTensor whose ``dims`` have fresh symbols (other sizes static)."""
        sizes = [DimDynamic.DYNAMIC if d in dims else DimDynamic.STATIC for d in range(tensor.dim())]
        context: StatelessSymbolicContext = StatelessSymbolicContext(dynamic_sizes=sizes)
        fake = mode.from_tensor(tensor, source=_NamedSource(source), symbolic_context=context)
        if isinstance(fake.storage_offset(), torch.SymInt):
            raise unsupported(f"{source.name()}: symbolic storage offset")
        for kind, values in (("size", fake.shape), ("stride", fake.stride())):
            for dim, value in enumerate(values):
                expr = value.node.expr if isinstance(value, torch.SymInt) else None
                if isinstance(expr, sympy.Symbol) and expr not in self.loads:
                    self.loads[expr] = ShapeLoad(source, kind, dim, type(tensor))
        for dim, (low, high) in dims.items():
            symbol = fake.shape[dim].node.expr
            if low is not None or high is not None:
                self.env.constrain_symbol_range(symbol, compiler_min=max(low or 2, 2),
                                                compiler_max=high if high is not None else sys_maxsize())
        return fake

    def int_symbol(self, value: int, source: Source, node: torch.fx.Node) -> torch.SymInt:
        """A fresh symbol for the int graph input ``node`` read from ``source``."""
        named = _NamedSource(source)
        symbol = self.env.create_symbol(value, named, dynamic_dim=DimDynamic.DYNAMIC, positive=None)
        sym = self.env.create_symintnode(symbol, hint=value, source=named)
        assert isinstance(sym, torch.SymInt), "a fresh DYNAMIC symbol is never a constant"
        self.loads[symbol] = ShapeLoad(source, "value", 0, int)
        self.int_inputs.append(_IntInput(source, node))
        node.meta["example_value"] = node.meta["val"] = sym
        return sym

    def add_input(self, source: Source, example: torch.Tensor, fake: torch.Tensor, node: torch.fx.Node) -> None:
        self.inputs.append(_SymbolicInput(source, example, fake, node))

    @property
    def symbolic(self) -> bool:
        return bool(self.loads)

    # -- results ---------------------------------------------------------------
    def check_result(self, name: str, result: Any) -> None:
        """Results whose size depends on tensor data (``nonzero``) are not captured."""
        if free_unbacked_symbols(result):
            raise unsupported(f"{name}: result size depends on tensor data")

    # -- graph -----------------------------------------------------------------
    def graph_value(self, graph: torch.fx.Graph, value: Any) -> Any:
        """``value`` with every SymInt replaced by a node computing it from the inputs
        (or, when that cannot be built, by its value: a guard)."""
        if isinstance(value, (torch.SymInt, torch.SymBool, torch.SymFloat)):
            return self._sym_node(graph, value)
        if isinstance(value, torch.Size):
            return tuple(self.graph_value(graph, v) for v in value)
        if isinstance(value, (tuple, list)):
            return type(value)(self.graph_value(graph, v) for v in value)
        if isinstance(value, slice):
            return slice(self.graph_value(graph, value.start), self.graph_value(graph, value.stop),
                         self.graph_value(graph, value.step))
        if isinstance(value, dict):
            return {k: self.graph_value(graph, v) for k, v in value.items()}
        return value

    def _sym_node(self, graph: torch.fx.Graph, value: Any) -> Any:
        expr = self.env.simplify(value.node.expr)
        if expr.is_number:
            return concrete(value)
        if isinstance(value, torch.SymInt):
            try:
                return self._build(graph, expr)
            except ShapeLoweringError:
                pass
        return concrete(value)  # specialised: records value == its example

    def _build(self, graph: torch.fx.Graph, expr: Any) -> Any:
        if isinstance(expr, sympy.Integer):
            return int(expr)
        if isinstance(expr, sympy.Symbol):
            return self._symbol_node(graph, expr)
        ops = {sympy.Add: operator.add, sympy.Mul: operator.mul}
        for cls, op in ops.items():
            if isinstance(expr, cls):
                args = [self._build(graph, a) for a in expr.args]
                node = args[0]
                for arg in args[1:]:
                    node = graph.call_function(op, (node, arg))
                return node
        binary = {"FloorDiv": operator.floordiv, "CleanDiv": operator.floordiv,
                  "Mod": operator.mod, "PythonMod": operator.mod}
        binary_op = binary.get(type(expr).__name__)
        if binary_op is not None and len(expr.args) == 2:
            return graph.call_function(binary_op, (self._build(graph, expr.args[0]),
                                                   self._build(graph, expr.args[1])))
        if isinstance(expr, sympy.Pow) and isinstance(expr.args[1], sympy.Integer) and expr.args[1] >= 0:
            return graph.call_function(operator.pow, (self._build(graph, expr.args[0]), int(expr.args[1])))
        raise ShapeLoweringError(f"cannot compute {expr} in the graph")

    def _symbol_node(self, graph: torch.fx.Graph, symbol: Any) -> torch.fx.Node:
        if symbol in self._nodes:
            return self._nodes[symbol]
        load = self.loads.get(symbol)
        if load is None:
            raise ShapeLoweringError(f"symbol {symbol} has no input")
        if load.kind == "value":  # an int input: its placeholder is the symbol
            return next(i.node for i in self.int_inputs if i.source == load.source)
        placeholder = next(i.node for i in self.inputs if i.source == load.source)
        op = torch.ops.aten.sym_size.int if load.kind == "size" else torch.ops.aten.sym_stride.int
        last_placeholder = [n for n in graph.nodes if n.op == "placeholder"][-1]
        with graph.inserting_after(last_placeholder):
            node = graph.call_function(op, (placeholder, load.dim))
        self._nodes[symbol] = node
        return node

    # -- guards ------------------------------------------------------------------
    def guards(self) -> list[Guard]:
        """The relaxed tensor guards of the inputs and the one shape guard relating their
        symbolic sizes; raises ShapeLoweringError when a condition has no native form."""
        loads: list[ShapeLoad] = []
        variables: dict[Any, int] = {}
        texts: dict[Any, sympy.Symbol] = {}

        def variable(symbol: Any, load: ShapeLoad) -> None:
            variables[symbol] = len(loads)
            loads.append(load)
            texts[symbol] = sympy.Symbol(load.text())

        for symbol, load in self.loads.items():
            variable(symbol, load)
        conditions: list[Any] = []
        tensor_guards = []
        for inp in self.inputs:
            sizes: list[int | None] = []
            strides: list[int | None] = []
            for kind, values, out in (("size", inp.fake.shape, sizes), ("stride", inp.fake.stride(), strides)):
                for dim, value in enumerate(values):
                    if not isinstance(value, torch.SymInt) or value.node.expr.is_number:
                        out.append(int(value))  # static, or specialised since by a guard
                        continue
                    out.append(None)
                    load = ShapeLoad(inp.source, kind, dim, type(inp.example))
                    expr = _raw_expr(value)
                    if self.loads.get(expr) == load:
                        continue  # the dim that defines the symbol
                    alias = sympy.Dummy(load.text())
                    variable(alias, load)
                    conditions.append(sympy.Eq(alias, expr, evaluate=False))
            tensor_guards.append(Guard(inp.source, tensor_match(inp.example, sizes, strides)))
        conditions.extend(g.expr for g in self.env.guards)
        for symbol in self.loads:
            bounds = self.env.var_to_range.get(symbol)
            if bounds is None:
                continue
            if isinstance(bounds.lower, sympy.Integer):
                conditions.append(sympy.Ge(symbol, int(bounds.lower), evaluate=False))
            if isinstance(bounds.upper, sympy.Integer):
                conditions.append(sympy.Le(symbol, int(bounds.upper), evaluate=False))
        exprs = [lower(c, variables) for c in conditions]
        text = [_text(c.xreplace(texts)) for c in conditions]
        shape_guard = Guard(ShapeEnvSource(), shape_guard_check(loads, exprs, text))
        return [*tensor_guards, shape_guard]

    def describe_sizes(self) -> list[str]:
        """``x: (s0, 3)`` per symbolic input, for explain."""
        lines = []
        for inp in self.inputs:
            dims = ", ".join(str(d) for d in inp.fake.shape)
            lines.append(f"{inp.source.name()}: ({dims})")
        return lines


def _raw_expr(value: torch.SymInt) -> Any:
    """The symbol or expression a size was created with (``node.expr`` applies the
    replacements found since, which would turn a defining dim into an alias)."""
    node = value.node
    return getattr(node, "_expr", node.expr)


_RELATIONS = {sympy.Eq: "==", sympy.Ne: "!=", sympy.StrictLessThan: "<", sympy.LessThan: "<=",
              sympy.StrictGreaterThan: ">", sympy.GreaterThan: ">="}


def _text(condition: Any) -> str:
    for cls, op in _RELATIONS.items():
        if isinstance(condition, cls):
            return f"{condition.lhs} {op} {condition.rhs}"
    return str(condition)


def sys_maxsize() -> int:
    import sys

    return sys.maxsize

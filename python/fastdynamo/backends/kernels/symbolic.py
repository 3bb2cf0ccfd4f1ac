"""Graphs captured with symbolic sizes: which sizes are launch arguments, and when one
generated module serves the inputs of a call.

The capture leaves a FakeTensor with symbolic sizes (or a ``SymInt``) in each
placeholder's ``meta["val"]``, all from one ``ShapeEnv``. :func:`signature_of` names the
symbols ``s0, s1, ...`` in order of first appearance over the inputs (the generated
source and the cache key then do not depend on the capture's symbol names), and records
where ``call`` reads each one: a size, a stride or the value of an int input (named
``v0, v1, ...``: any integer, used as a value, never as a size of a tensor). The
module generated from the signature serves every call whose inputs
:meth:`SymbolicSignature.matches`: the same dtypes, devices and aliasing, sizes and
strides that the expressions give for the bound symbols, each symbol within its range
and every fact of the ShapeEnv (its guards over these symbols) true. Under
:func:`fastdynamo.compile` the frame's guards already check all of it; a direct call
is checked once per distinct input metadata.

>>> import torch
>>> gm = torch.fx.symbolic_trace(lambda x: x + 1)
>>> signature_of(gm) is None  # no symbolic sizes (no FakeTensors at all): static kernels
True
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any, Iterator

import sympy
import torch

from . import sizes
from .sizes import Size, SymbolicRefused

logger = logging.getLogger("fastdynamo.backends.kernels")


@dataclass(frozen=True)
class TensorPattern:
    """What a tensor input must look like, sizes as canonical expressions."""

    shape: tuple
    stride: tuple
    storage_offset: Size
    dtype: torch.dtype
    device: torch.device


@dataclass(frozen=True)
class SizePattern:
    """An int input whose value is the symbolic ``size``."""

    size: Size


@dataclass(frozen=True)
class Binding:
    """Where ``call`` reads a symbol: ``kind`` of input ``position`` (at ``dim``)."""

    kind: str  # "size" | "stride" | "offset" | "value"
    position: int
    dim: int = 0


class SymbolicSignature:
    """The symbolic inputs of one graph; see the module docstring."""

    def __init__(self, shape_env: Any, values: list) -> None:
        self.shape_env = shape_env
        self.values = values  # the placeholders' FakeTensors / SymInts, for tracing
        self.canonical: dict[sympy.Symbol, sympy.Symbol] = {}  # capture's -> s0, s1, ...
        self.bindings: dict[sympy.Symbol, Binding] = {}  # by canonical symbol
        self._bind_symbols()
        self.patterns = tuple(self._pattern(value) for value in values)
        self.ranges = {symbol: self._range(captured, symbol) for captured, symbol in self.canonical.items()}
        self.facts = self._facts()

    # ---- building -----------------------------------------------------------------------
    def _bind_symbols(self) -> None:
        # tensors first: an int input that equals a tensor's size is that size
        for position, value in enumerate(self.values):
            if isinstance(value, torch.Tensor):
                for dim, size in enumerate(value.shape):
                    self._bind(size, Binding("size", position, dim))
                for dim, stride in enumerate(value.stride()):
                    self._bind(stride, Binding("stride", position, dim))
                self._bind(value.storage_offset(), Binding("offset", position))
        for position, value in enumerate(self.values):
            if isinstance(value, torch.SymInt):
                self._bind(value, Binding("value", position))

    def _bind(self, value: object, binding: Binding) -> None:
        expr = self._raw(value)
        if isinstance(expr, sympy.Symbol) and expr not in self.canonical:
            count = sum(1 for b in self.bindings.values() if (b.kind == "value") == (binding.kind == "value"))
            symbol = sizes.value_symbol(count) if binding.kind == "value" else sizes.size_symbol(count)
            self.canonical[expr] = symbol
            self.bindings[symbol] = binding

    def _raw(self, value: object) -> Size:
        if isinstance(value, torch.SymInt):
            value = value.node.expr
        if isinstance(value, sympy.Expr):
            # replacements and the ShapeEnv's facts (Max(1, s1 - 1) is s1 - 1 as s1 >= 2)
            return sizes.normalise(self.shape_env.simplify(value))
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise SymbolicRefused(f"a {type(value).__name__} where a size was expected")

    def size(self, value: object) -> Size:
        """``value`` (an int, a SymInt or a capture expression) over the canonical symbols."""
        expr = self._raw(value)
        if isinstance(expr, int):
            return expr
        unbound = expr.free_symbols - set(self.canonical)
        if unbound:
            raise SymbolicRefused(f"size {expr} depends on {sorted(map(str, unbound))}, which no input gives")
        return sizes.normalise(expr.xreplace(self.canonical))

    def shape_size(self, value: object) -> Size:
        """A tensor's size or stride: like :meth:`size`, but never over an int input's
        symbol (which may be 1, 0 or negative; the code generator assumes sizes are not)."""
        size = self.size(value)
        if not all(map(sizes.is_size_symbol, sizes.size_symbols(size))):
            raise SymbolicRefused(f"an int input is a tensor size ({size})")
        return size

    def _pattern(self, value: torch.Tensor | torch.SymInt) -> TensorPattern | SizePattern:
        if isinstance(value, torch.SymInt):
            return SizePattern(self.size(value))
        return TensorPattern(tuple(self.shape_size(s) for s in value.shape),
                             tuple(self.shape_size(s) for s in value.stride()),
                             self.shape_size(value.storage_offset()), value.dtype, value.device)

    def _range(self, captured: sympy.Symbol, symbol: sympy.Symbol) -> tuple:
        value_range = self.shape_env.var_to_range.get(captured)
        lower = getattr(value_range, "lower", None)
        upper = getattr(value_range, "upper", None)
        # torch's int_oo is not a sympy Integer: an unbounded end is None
        bounds = (int(lower) if lower is not None and lower.is_Integer else None,
                  int(upper) if upper is not None and upper.is_Integer else None)
        if sizes.is_size_symbol(symbol) and (bounds[0] is None or bounds[0] < sizes.SMALLEST_SYMBOLIC_SIZE):
            raise SymbolicRefused(f"{captured} may be smaller than {sizes.SMALLEST_SYMBOLIC_SIZE} ({value_range})")
        return bounds

    def _facts(self) -> tuple:
        """The ShapeEnv's guards over bound symbols, canonical (guards only about
        sizes no input gives do not concern the kernels)."""
        facts = []
        for guard in self.shape_env.guards:
            expr = self.shape_env.replace(guard.expr)
            symbols = expr.free_symbols
            if not symbols & set(self.canonical):
                continue
            if symbols - set(self.canonical):
                raise SymbolicRefused(f"shape guard {guard.expr} relates input sizes to sizes no input gives")
            canonical = expr.xreplace(self.canonical)
            if canonical is not sympy.true:
                facts.append(canonical)
        return tuple(sorted(set(facts), key=str))

    # ---- use ----------------------------------------------------------------------------
    def key(self) -> tuple:
        """Everything about the inputs that generated code depends on, without sizes."""
        return (tuple(self.patterns), tuple(self.ranges.items()), tuple(str(fact) for fact in self.facts))

    def bind(self, inputs: list) -> dict | None:
        """Canonical symbol -> its value in ``inputs``; None if an input is not the kind
        its binding reads."""
        values: dict[sympy.Symbol, int] = {}
        for symbol, binding in self.bindings.items():
            value = inputs[binding.position] if binding.position < len(inputs) else None
            read = _read(binding, value)
            if read is None:
                return None
            values[symbol] = read
        return values

    def matches(self, inputs: list) -> bool:
        """Whether the module generated for this signature computes ``inputs`` exactly."""
        if len(inputs) != len(self.patterns):
            return False
        values = self.bind(inputs)
        if values is None:
            return False
        for symbol, (lower, upper) in self.ranges.items():
            if (lower is not None and values[symbol] < lower) or (upper is not None and values[symbol] > upper):
                return False
        if not all(_pattern_holds(pattern, value, values) for pattern, value in zip(self.patterns, inputs, strict=True)):
            return False
        return all(_holds(fact, values) for fact in self.facts)

    @contextlib.contextmanager
    def no_new_guards(self) -> Iterator[None]:
        """Trace under the capture's ShapeEnv without adding to what it assumes: a
        branch on a size nothing decided raises :class:`SymbolicRefused` (the guards of
        the frame were already built; kernels that needed another one would be wrong
        for some of the sizes the entry accepts)."""
        before = _shape_env_state(self.shape_env)
        refuse = getattr(self.shape_env, "error_on_new_guards", None)
        try:
            with refuse() if refuse is not None else contextlib.nullcontext():
                yield
        except RuntimeError as error:
            if type(error).__name__ != "_ShapeEnvGuardError":
                raise
            raise SymbolicRefused(f"the ATen trace needs a new shape guard ({error})") from None
        if _shape_env_state(self.shape_env) != before:
            raise SymbolicRefused("the ATen trace added a shape guard")


def _read(binding: Binding, value: object) -> int | None:
    """The int ``binding`` reads from an input, None if the input is not of that kind."""
    if binding.kind == "value":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if not isinstance(value, torch.Tensor):
        return None
    if binding.kind == "offset":
        return int(value.storage_offset())
    reads = value.shape if binding.kind == "size" else value.stride()
    return int(reads[binding.dim]) if binding.dim < len(reads) else None


def _holds(fact: sympy.Basic, values: dict) -> bool:
    try:
        return bool(fact.xreplace(values))
    except TypeError:  # did not evaluate to a truth value: not known to hold
        return False


def _pattern_holds(pattern: TensorPattern | SizePattern, value: object, values: dict) -> bool:
    if isinstance(pattern, SizePattern):
        return isinstance(value, int) and _evaluate(pattern.size, values) == value
    if not isinstance(value, torch.Tensor) or value.dtype != pattern.dtype or value.device != pattern.device:
        return False
    if value.dim() != len(pattern.shape):
        return False
    expected = [_evaluate(e, values) for e in (*pattern.shape, *pattern.stride, pattern.storage_offset)]
    actual = [*value.shape, *value.stride(), value.storage_offset()]
    return expected == actual


def _evaluate(size: Size, values: dict) -> int:
    return size if isinstance(size, int) else int(size.xreplace(values))


def _shape_env_state(shape_env: Any) -> tuple:
    return (len(shape_env.guards), len(shape_env.replacements), len(getattr(shape_env, "divisible", ())),
            getattr(shape_env, "num_deferred_runtime_asserts", 0))


def signature_of(gm: torch.fx.GraphModule) -> SymbolicSignature | None:
    """The graph's symbolic signature; None when its inputs have static sizes (or the
    sizes cannot be launch arguments: the reason is logged, kernels are then per size)."""
    values = [node.meta.get("val") for node in gm.graph.nodes if node.op == "placeholder"]
    if not all(isinstance(v, (torch.Tensor, torch.SymInt)) for v in values):
        return None
    shape_env = _shape_env(values)
    if shape_env is None:
        return None
    try:
        return SymbolicSignature(shape_env, values)
    except SymbolicRefused as why:
        logger.info("kernels per concrete size: %s", why)
        return None


def has_symbolic_sizes(gm: torch.fx.GraphModule) -> bool:
    """Whether a placeholder of ``gm`` has a symbolic size, stride or value."""
    return _shape_env([node.meta.get("val") for node in gm.graph.nodes if node.op == "placeholder"]) is not None


def _shape_env(values: list) -> Any:
    """The ShapeEnv behind the symbolic sizes of ``values``, None if every size is static."""
    for value in values:
        if isinstance(value, torch.SymInt) and not isinstance(value.node.expr, sympy.Integer):
            return value.node.shape_env
        if isinstance(value, torch.Tensor):
            for size in (*value.shape, *value.stride(), value.storage_offset()):
                if isinstance(size, torch.SymInt) and not isinstance(size.node.expr, sympy.Integer):
                    return size.node.shape_env
    return None

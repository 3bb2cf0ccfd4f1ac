"""The vocabulary of generated programs (:mod:`generated_programs`): one drawer per kind of
step, each returning a :class:`Draft` (the step's source and how its result relates to
its operands), and :func:`unspecified_of`, which follows the positions where eager's
value is not a rule (see :mod:`generated_programs`) through a step.

Kinds: unary math (exp/log/tanh/sigmoid/erf/sqrt/rsqrt/sin/cos/abs/neg/relu/...), binary
arithmetic with tensors, 0-d tensors or Python scalars on either side, maximum/minimum,
comparisons, logical ops, where, clamp (scalar bounds with NaN, ±0, ±inf, or tensor
bounds), casts, pow by 2/3/0.5/-1/-0.5, integer ``//``/``%``/trunc division by nonzero
constants (negative too), reductions (sum/amax/amin/mean/var/argmax/argmin over any dims,
keepdim or not), softmax/log_softmax/layer norm, and views (reshape, view, flatten,
permute, transpose, t, unsqueeze, squeeze, slices with steps and offsets, select,
expand, contiguous). ``dynamic`` programs draw only steps whose source holds at every
size (``reshape(-1)``, ``expand(2, -1)``, slices by small constants, ``x.shape[-1:]``).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

import torch
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode


@dataclass(frozen=True)
class Value:
    """A value of the program while it is drawn or run: its eager tensor, its unspecified
    positions (a bool tensor of its shape, or None: none) and its working precision (the
    least precise float dtype computed on the way; None for inputs: exact data)."""

    name: str
    tensor: torch.Tensor
    unspecified: torch.Tensor | None
    precision: torch.dtype | None = None


@dataclass(frozen=True)
class Draft:
    """A step's source and what the tests need to know of it.

    ``effect`` says how unspecified positions flow (:func:`unspecified_of`):
    ``pointwise`` (from the operands, broadcast), ``tie`` (maximum/minimum: also where the
    operands are a ``+0.0``/``-0.0`` pair), ``cast`` (also a float out of an integer
    type's range), ``reduce`` over ``dims`` (None: all) and ``tie_reduce`` (amax/amin:
    also a zero result of a row holding both zeros), ``row`` (softmax, layer norm: a row
    with one is unspecified throughout), ``view`` (the same view of them).
    ``lowers``: the kernel IR has a lowering for this op (not a view, not an extern)."""

    code: str
    operands: tuple = ()
    effect: str = "pointwise"
    lowers: bool = True
    dims: tuple | None = None
    keepdim: bool = False
    empty: bool = False  # its result has no elements (set once it ran)
    operand_meta: tuple = ()  # (shape, dtype) of each operand, when drawn

    def with_operands(self, values: dict) -> "Draft":
        return replace(self, operand_meta=tuple((tuple(values[name].tensor.shape), values[name].tensor.dtype)
                                                for name in self.operands))

    open_bugs: frozenset = frozenset()  # open bugs this step meets (OPEN_BUG_CHECKS)

    def with_result(self, tensor: torch.Tensor, operands_by_size: list, scope: dict) -> "Draft":
        """Once it ran: ``tensor`` (at the first size), its first operand at each size and
        the values it read (``scope``, at the first size)."""
        bugs = frozenset(letter for letter, check in OPEN_BUG_CHECKS.items()
                         if check(self, tensor, operands_by_size, scope))
        return replace(self, empty=tensor.numel() == 0, open_bugs=bugs)


SCALARS = (2, -3, 0, 1, 0.5, -1.5, 0.0, -0.0, math.inf, -math.inf, math.nan, True)
CLAMP_BOUNDS = (None, 0.0, -0.0, 0.5, -1, 1.5, math.inf, -math.inf, math.nan)
UNARY = ("exp", "log", "tanh", "sigmoid", "erf", "sqrt", "rsqrt", "sin", "cos", "abs", "neg", "relu", "floor",
         "ceil", "exp2", "log2", "reciprocal", "logical_not", "isnan")
ARITHMETIC = ("torch.add({a}, {b})", "torch.add({a}, {b}, alpha=2)", "{a} + {b}", "{a} - {b}", "{b} - {a}",
              "{a} * {b}", "{a} / {b}", "{b} / {a}")
COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
LOGICAL = ("logical_and", "logical_or", "logical_xor")
POWERS = (2, 3, 0.5, -1, 2.0, -0.5)
DIVISORS = (2, 3, -2, -3, 5, -7, 1, -1)
INTEGER_DIVISIONS = ("{a} // {c}", "{a} % {c}", "torch.div({a}, {c}, rounding_mode='trunc')",
                     "torch.div({a}, {c}, rounding_mode='floor')")
CAST_TARGETS = (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool)
# slices that hold at any size >= 2 (dynamic programs), then ones only static shapes take
SAFE_SLICES = (":", "1:", ":-1", "::2", "1::2", "-2:")
SLICES = SAFE_SLICES + ("1:3", "::3", "2:", ":1", "-1:", "1:-1:2")


def scalar_source(value) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "math.nan"
    if isinstance(value, float) and math.isinf(value):
        return "math.inf" if value > 0 else "-math.inf"
    return repr(value)


def dtype_source(dtype: torch.dtype) -> str:
    return str(dtype)  # "torch.float32"


def pick(draw, pool: list) -> Value:
    """A value of the pool, the most recent ones first (chains shrink to chains)."""
    return pool[-1 - draw(st.integers(0, len(pool) - 1))]


def broadcasts(a: torch.Size, b: torch.Size) -> bool:
    try:
        torch.broadcast_shapes(a, b)
    except RuntimeError:
        return False
    return True


def partner(draw, pool: list, a: Value, scalars: bool = True) -> tuple[str, tuple]:
    """A second operand for ``a``: a value it broadcasts with (itself included), or a
    Python scalar; returns its source and the value names it reads."""
    candidates = [v for v in pool if broadcasts(v.tensor.shape, a.tensor.shape)]
    if scalars and draw(st.integers(0, 3)) == 3:
        return scalar_source(draw(st.sampled_from(SCALARS))), ()
    other = pick(draw, candidates)
    return other.name, (other.name,)


def draw_dims(draw, rank: int, single: bool = False):
    """Dims to reduce: None (all), one dim or several, in negative spelling now and then."""
    if rank == 0:
        return draw(st.sampled_from([0, -1] if single else [None, 0, -1]))
    if not single and draw(st.integers(0, 3)) == 0:
        return None
    if single or draw(st.booleans()):
        return draw(st.integers(-rank, rank - 1))
    chosen = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    return tuple(d - rank if draw(st.booleans()) else d for d in chosen)


def _normalised(dims, rank: int):
    if dims is None:
        return None
    dims = (dims,) if isinstance(dims, int) else dims
    return tuple(sorted({d % max(rank, 1) for d in dims})) if rank else ()


# ---- the drawers -------------------------------------------------------------------------------

def draw_unary(draw, pool, dynamic):
    a = pick(draw, pool)
    op = draw(st.sampled_from(UNARY))
    form = draw(st.sampled_from(["torch.{op}({a})", "{a}.{op}()"] + (["-{a}"] if op == "neg" else [])))
    return Draft(form.format(op=op, a=a.name), (a.name,))


def draw_arithmetic(draw, pool, dynamic):
    a = pick(draw, pool)
    b, names = partner(draw, pool, a)
    form = draw(st.sampled_from(ARITHMETIC))
    return Draft(form.format(a=a.name, b=b), (a.name, *names))


def draw_maximum(draw, pool, dynamic):
    a = pick(draw, pool)
    b, names = partner(draw, pool, a, scalars=False)
    op = draw(st.sampled_from(["maximum", "minimum"]))
    form = draw(st.sampled_from(["torch.{op}({a}, {b})", "{a}.{op}({b})"]))
    return Draft(form.format(op=op, a=a.name, b=b), (a.name, *names), effect="tie")


def draw_comparison(draw, pool, dynamic):
    a = pick(draw, pool)
    b, names = partner(draw, pool, a)
    return Draft(f"({a.name} {draw(st.sampled_from(COMPARISONS))} {b})", (a.name, *names))


def draw_logical(draw, pool, dynamic):
    a = pick(draw, pool)
    b, names = partner(draw, pool, a, scalars=False)
    return Draft(f"torch.{draw(st.sampled_from(LOGICAL))}({a.name}, {b})", (a.name, *names))


def draw_where(draw, pool, dynamic):
    a = pick(draw, pool)
    conditions = [v for v in pool if v.tensor.dtype == torch.bool and broadcasts(v.tensor.shape, a.tensor.shape)]
    if conditions and draw(st.booleans()):
        condition = pick(draw, conditions)
        condition_source, condition_names = condition.name, (condition.name,)
    else:
        compared = pick(draw, [v for v in pool if broadcasts(v.tensor.shape, a.tensor.shape)])
        condition_source = f"({compared.name} > {scalar_source(draw(st.sampled_from([0, 0.5, -1])))})"
        condition_names = (compared.name,)
    b, names = partner(draw, pool, a)
    first, second = (a.name, b) if draw(st.booleans()) else (b, a.name)
    return Draft(f"torch.where({condition_source}, {first}, {second})", (*condition_names, a.name, *names))


def draw_clamp(draw, pool, dynamic):
    a = pick(draw, pool)
    if draw(st.integers(0, 3)) == 0:  # tensor bounds
        low, low_names = partner(draw, pool, a, scalars=False)
        high, high_names = (partner(draw, pool, a, scalars=False) if draw(st.booleans()) else ("None", ()))
        return Draft(f"torch.clamp({a.name}, min={low}, max={high})", (a.name, *low_names, *high_names))
    low, high = draw(st.sampled_from(CLAMP_BOUNDS)), draw(st.sampled_from(CLAMP_BOUNDS))
    if low is None and high is None:
        return Draft(f"{a.name}.relu()", (a.name,))
    form = draw(st.sampled_from(["torch.clamp({a}, min={low}, max={high})", "{a}.clamp({low}, {high})"]))
    if high is None and draw(st.booleans()):
        form = "{a}.clamp_min({low})"
    elif low is None and draw(st.booleans()):
        form = "{a}.clamp_max({high})"
    return Draft(form.format(a=a.name, low=scalar_source(low), high=scalar_source(high)), (a.name,))


def draw_cast(draw, pool, dynamic):
    a = pick(draw, pool)
    dtype = draw(st.sampled_from(CAST_TARGETS))
    return Draft(f"{a.name}.to({dtype_source(dtype)})", (a.name,), "cast", lowers=dtype != a.tensor.dtype)


def draw_pow(draw, pool, dynamic):
    a = pick(draw, pool)
    exponent = draw(st.sampled_from(POWERS))
    form = draw(st.sampled_from(["{a} ** {e}", "torch.pow({a}, {e})"]))
    return Draft(form.format(a=a.name, e=exponent), (a.name,))


def draw_integer_division(draw, pool, dynamic):
    a = pick(draw, pool)
    divisor = draw(st.sampled_from(DIVISORS))
    form = draw(st.sampled_from(INTEGER_DIVISIONS))
    integral = not a.tensor.dtype.is_floating_point
    lowers = integral and divisor != -1 and (a.tensor.dtype != torch.bool or "trunc" not in form)
    return Draft(form.format(a=a.name, c=divisor), (a.name,), lowers=lowers)


def draw_reduction(draw, pool, dynamic):
    a = pick(draw, pool)
    rank = a.tensor.dim()
    op = draw(st.sampled_from(["sum", "amax", "amin", "mean", "var", "sum"]))
    dims = draw_dims(draw, rank)
    keepdim = draw(st.booleans())
    effect = "tie_reduce" if op in ("amax", "amin") else "reduce"
    extra = f", correction={draw(st.sampled_from([0, 1]))}" if op == "var" else ""
    if op in ("sum", "mean") and draw(st.integers(0, 3)) == 0:
        extra = f", dtype={dtype_source(draw(st.sampled_from(CAST_TARGETS[:5])))}"
    if dims is None and op != "var":
        return Draft(f"{a.name}.{op}({extra.removeprefix(', ')})", (a.name,), effect, dims=None, keepdim=False)
    dim_source = "" if dims is None else f"dim={dims!r}, "
    code = f"{a.name}.{op}({dim_source}keepdim={keepdim}{extra})"
    return Draft(code, (a.name,), effect, dims=_normalised(dims, rank), keepdim=keepdim)


def draw_arg_reduction(draw, pool, dynamic):
    a = pick(draw, pool)
    op = draw(st.sampled_from(["argmax", "argmin"]))
    if draw(st.integers(0, 3)) == 0:
        return Draft(f"{a.name}.{op}()", (a.name,), "reduce")
    dim, keepdim = draw_dims(draw, a.tensor.dim(), single=True), draw(st.booleans())
    return Draft(f"{a.name}.{op}(dim={dim}, keepdim={keepdim})", (a.name,), "reduce",
                 dims=_normalised(dim, a.tensor.dim()), keepdim=keepdim)


def draw_normalisation(draw, pool, dynamic):
    a = pick(draw, pool)
    rank = a.tensor.dim()
    op = draw(st.sampled_from(["softmax", "log_softmax", "layer_norm"] if rank else ["softmax", "log_softmax"]))
    if op == "layer_norm":
        count = draw(st.integers(1, rank))
        shape = f"{a.name}.shape[-{count}:]" if dynamic else repr(tuple(a.tensor.shape[-count:]))
        return Draft(f"F.layer_norm({a.name}, {shape})", (a.name,), "row", dims=tuple(range(rank - count, rank)))
    dim = draw_dims(draw, rank, single=True)
    form = draw(st.sampled_from(["torch.{op}({a}, dim={d})", "{a}.{op}({d})", "torch.{op}({a}, {d}, dtype={t})"]))
    code = form.format(op=op, a=a.name, d=dim, t=dtype_source(draw(st.sampled_from(CAST_TARGETS[:4]))))
    return Draft(code, (a.name,), "row", dims=_normalised(dim, rank))


def draw_view(draw, pool, dynamic):
    a = pick(draw, pool)
    shape = tuple(a.tensor.shape)
    rank = len(shape)
    kinds = ["reshape", "flatten", "unsqueeze", "squeeze", "contiguous", "expand"]
    kinds += ["permute", "transpose", "slice", "select"] if rank else []
    kinds += ["t"] if rank <= 2 else []
    kinds += ["view"] if not dynamic else []
    kind = draw(st.sampled_from(kinds))
    code = _VIEWS[kind](draw, a.name, shape, dynamic)
    return Draft(code, (a.name,), "view", lowers=False)


def _reshape_target(draw, shape: tuple, dynamic: bool) -> str:
    if dynamic or not shape:
        return "-1"
    merged = [shape[:i] + (shape[i] * shape[i + 1],) + shape[i + 2:] for i in range(len(shape) - 1)]
    split = [shape[:i] + (2, s // 2) + shape[i + 1:] for i, s in enumerate(shape) if s % 2 == 0 and s > 2]
    options = [(-1,), shape[::-1], shape + (1,), (1,) + shape] + merged + split
    return ", ".join(map(str, draw(st.sampled_from(options))))


def _expand_target(draw, shape: tuple, dynamic: bool) -> str:
    sizes = [str(draw(st.sampled_from([2, 3]))) if size == 1 and draw(st.booleans()) else "-1" for size in shape]
    if draw(st.booleans()) or not sizes:
        sizes.insert(0, str(draw(st.sampled_from([1, 2]))))
    return ", ".join(sizes)


def _slices(draw, shape: tuple, dynamic: bool) -> str:
    count = draw(st.integers(1, len(shape)))
    parts = [draw(st.sampled_from(SAFE_SLICES if dynamic else SLICES)) for _ in range(count)]
    if count < len(shape) and draw(st.booleans()):
        parts = ["...", *parts[1:]] if len(parts) > 1 else ["...", parts[0]]
    return ", ".join(parts)


def _select(draw, name: str, shape: tuple, dynamic: bool) -> str:
    dims = [d for d, size in enumerate(shape) if size > 0]
    if not dims:
        return f"{name}[:]"
    dim = draw(st.sampled_from(dims))
    index = draw(st.sampled_from([0, -1] if dynamic else list(range(-shape[dim], shape[dim]))))
    return f"{name}.select({dim}, {index})" if draw(st.booleans()) else f"{name}[{':, ' * dim}{index}]"


_VIEWS = {
    "reshape": lambda draw, a, shape, dynamic: f"{a}.reshape({_reshape_target(draw, shape, dynamic)})",
    "view": lambda draw, a, shape, dynamic: f"{a}.view({_reshape_target(draw, shape, dynamic)})",
    "flatten": lambda draw, a, shape, dynamic: (
        f"{a}.flatten()" if len(shape) < 2 or draw(st.booleans()) else f"{a}.flatten({len(shape) - 2})"),
    "unsqueeze": lambda draw, a, shape, dynamic: f"{a}.unsqueeze({draw(st.integers(-len(shape) - 1, len(shape)))})",
    "squeeze": lambda draw, a, shape, dynamic: (
        f"{a}.squeeze()" if not shape or draw(st.booleans())
        else f"{a}.squeeze({draw(st.integers(-len(shape), len(shape) - 1))})"),
    "contiguous": lambda draw, a, shape, dynamic: f"{a}.contiguous()",
    "expand": lambda draw, a, shape, dynamic: f"{a}.expand({_expand_target(draw, shape, dynamic)})",
    "permute": lambda draw, a, shape, dynamic: f"{a}.permute{tuple(draw(st.permutations(range(len(shape)))))!r}".replace(",)", ")"),
    "transpose": lambda draw, a, shape, dynamic: (
        f"{a}.transpose({draw(st.integers(-len(shape), len(shape) - 1))}, {draw(st.integers(-len(shape), len(shape) - 1))})"),
    "t": lambda draw, a, shape, dynamic: f"{a}.t()",
    "slice": lambda draw, a, shape, dynamic: f"{a}[{_slices(draw, shape, dynamic)}]",
    "select": lambda draw, a, shape, dynamic: _select(draw, a, shape, dynamic),
}

# kind -> (drawer, weight)
DRAWERS = {
    "unary": (draw_unary, 4), "arithmetic": (draw_arithmetic, 4), "maximum": (draw_maximum, 2),
    "comparison": (draw_comparison, 1), "logical": (draw_logical, 1), "where": (draw_where, 1),
    "clamp": (draw_clamp, 2), "cast": (draw_cast, 2), "pow": (draw_pow, 1),
    "integer_division": (draw_integer_division, 1), "reduction": (draw_reduction, 3),
    "arg_reduction": (draw_arg_reduction, 1), "normalisation": (draw_normalisation, 2), "view": (draw_view, 4),
}
_KINDS = [kind for kind, (_, weight) in DRAWERS.items() for _ in range(weight)]


def draw_step(draw, pool: list, dynamic: bool) -> Draft:
    return DRAWERS[draw(st.sampled_from(_KINDS))][0](draw, pool, dynamic)


# ---- unspecified positions, precision ---------------------------------------------------------

# float dtypes from the most precise (float64) to the least (bfloat16)
PRECISION_ORDER = (torch.float64, torch.float32, torch.float16, torch.bfloat16)


def least_precise(dtypes) -> torch.dtype | None:
    floats = [d for d in dtypes if d in PRECISION_ORDER]
    return max(floats, key=PRECISION_ORDER.index) if floats else None


def unspecified_of(draft: Draft, operands: list, result: torch.Tensor, scope: dict) -> torch.Tensor | None:
    """The result's unspecified positions (see :class:`Draft` and :mod:`generated_programs`)."""
    if draft.effect == "view":
        (operand,) = operands
        if operand.unspecified is None:
            return None
        return eval(draft.code, {**scope, operand.name: operand.unspecified})
    inherited = [v.unspecified for v in operands if v.unspecified is not None]
    if draft.effect in ("reduce", "tie_reduce", "row"):
        return _reduced_unspecified(draft, operands[0], inherited, result)
    mask = None
    for inner in inherited:
        mask = inner if mask is None else mask | inner
    own = _OWN_UNSPECIFIED.get(draft.effect, lambda operands, result: None)(operands, result)
    if own is not None:
        mask = own if mask is None else mask | own
    return None if mask is None else mask.expand(result.shape).clone()


def _tie(operands: list, result: torch.Tensor) -> torch.Tensor | None:
    """maximum/minimum: where the operands are a ``+0.0``/``-0.0`` pair."""
    if not result.dtype.is_floating_point:
        return None
    a, b = (v.tensor.to(result.dtype) for v in operands)
    return torch.broadcast_to((a == 0) & (b == 0) & (a.signbit() != b.signbit()), result.shape)


def _out_of_range(operands: list, result: torch.Tensor) -> torch.Tensor | None:
    """A float cast to an integer type: NaN, ±inf, or a value whose integer part the type
    cannot hold."""
    (operand,) = operands
    if not operand.tensor.dtype.is_floating_point or result.dtype.is_floating_point or result.dtype == torch.bool:
        return None
    info = torch.iinfo(result.dtype)
    x = operand.tensor.double()
    return ~((x > float(info.min) - 1) & (x < float(info.max) + 1))


_OWN_UNSPECIFIED = {"tie": _tie, "cast": _out_of_range}


def _reduced_unspecified(draft: Draft, operand: Value, inherited: list, result: torch.Tensor):
    mask = _reduce_any(inherited[0], draft.dims, True) if inherited else None
    if draft.effect == "tie_reduce" and result.dtype.is_floating_point:
        x = operand.tensor
        negative, positive = (x == 0) & x.signbit(), (x == 0) & ~x.signbit()
        both = _reduce_any(negative, draft.dims, True) & _reduce_any(positive, draft.dims, True)
        mask = both if mask is None else mask | both
    if mask is None:
        return None
    if draft.effect == "row":
        return mask.expand(result.shape)
    return mask.reshape(result.shape) if not draft.keepdim else mask.expand(result.shape)


def significant_strides(tensor: torch.Tensor) -> tuple:
    """Per dim, its stride where the dim has more than one element (else None)."""
    if tensor.numel() == 0:
        return ()
    return tuple(stride if size > 1 else None for size, stride in zip(tensor.shape, tensor.stride(), strict=True))


def meta_layout_differs(draft: Draft, result: torch.Tensor, scope: dict) -> bool:
    """The step run on FakeTensors (torch's meta functions, what kernels allocate by) has
    other significant strides than eager's result."""
    with FakeTensorMode() as mode:
        fakes = {name: mode.from_tensor(scope[name]) for name in draft.operands}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            fake = eval(draft.code, {**scope, **fakes})
    return significant_strides(fake) != significant_strides(result)


# ---- steps that meet an open bug (tests/cpp/test_kernel_regressions.py, "Open") --------------

def _softmax_of_empty_non_float(draft: Draft, result, operands: list, scope: dict) -> bool:
    """B: softmax's decomposition fails on an empty bool or integer tensor."""
    return "softmax" in draft.code and result.numel() == 0 and not operands[0].dtype.is_floating_point


def _normalises_constant_row(draft: Draft, result, operands: list, scope: dict) -> bool:
    """C: layer norm or var of a row of equal values is not exactly 0."""
    normalises = "layer_norm" in draft.code or ".var(" in draft.code
    return normalises and any(has_constant_row(x, draft.dims) for x in operands)


def _meta_layout_differs(draft: Draft, result, operands: list, scope: dict) -> bool:
    """D: torch's meta strides of the step, which kernels allocate by, are not eager's."""
    return draft.effect != "view" and meta_layout_differs(draft, result, scope)


def _layer_norm_of_negative_zero(draft: Draft, result, operands: list, scope: dict) -> bool:
    """E: layer norm keeps the sign of a -0.0 whose row mean is 0; eager's zeros are +0.0."""
    if "layer_norm" not in draft.code:
        return False
    for x in operands:
        if x.numel():
            negative_zero = ((x == 0) & x.signbit()).any(dim=draft.dims)
            if (negative_zero & (x.double().sum(dim=draft.dims) == 0)).any():
                return True
    return False


def truncates_a_negative_fraction(draft: Draft, operands: list, result: torch.Tensor) -> bool:
    """F (with a later step that makes the integer a float again): a float in (-1, 0) cast
    to an integer type; g++ folds ``(float)(int64_t)x`` to ``truncf(x)``, -0.0 where eager
    has +0.0."""
    if draft.effect != "cast" or result.dtype.is_floating_point or result.dtype == torch.bool:
        return False
    return any(x.dtype.is_floating_point and ((x > -1) & (x < 0)).any() for x in operands)


OPEN_BUG_CHECKS = {"B": _softmax_of_empty_non_float, "C": _normalises_constant_row, "D": _meta_layout_differs,
                   "E": _layer_norm_of_negative_zero}


def has_constant_row(x: torch.Tensor, dims) -> bool:
    """Some row over ``dims`` (None: all) holds two or more equal finite values only."""
    if not x.dtype.is_floating_point or x.numel() == 0 or x.dim() == 0:
        return False
    dims = tuple(range(x.dim())) if dims is None else dims
    if math.prod(x.shape[d] for d in dims) < 2:
        return False
    first = x.amax(dim=dims, keepdim=True)
    constant = ((x == first) & x.isfinite()).all(dim=dims)
    return bool(constant.any())


def _reduce_any(mask: torch.Tensor, dims, keepdim: bool) -> torch.Tensor:
    """``mask.any`` over ``dims`` (None: all), the reduced dims kept."""
    if mask.dim() == 0:
        return mask.clone()
    if dims is None:
        return mask.any().reshape([1] * mask.dim())
    return mask.any(dim=dims, keepdim=keepdim) if dims else mask.clone()

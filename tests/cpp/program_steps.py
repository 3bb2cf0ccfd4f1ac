"""The vocabulary of generated programs (:mod:`generated_programs`): one drawer per kind of
step, each returning a :class:`Draft` (the step's source and how its result relates to
its operands and how exact it is). What eager's results do and do not determine is
:mod:`eager_rules`.

Kinds: unary math (exp/log/tanh/sigmoid/erf/sqrt/rsqrt/sin/cos/abs/neg/relu/...), binary
arithmetic with tensors, 0-d tensors or Python scalars on either side, maximum/minimum,
comparisons, logical ops, where, clamp (scalar bounds with NaN, ±0, ±inf, or tensor
bounds), casts, pow by 2/3/0.5/-1/-0.5, integer ``//``/``%``/trunc division by nonzero
constants (negative too), reductions (sum/amax/amin/mean/var/argmax/argmin over any dims,
keepdim or not, sum/mean with a ``dtype``), softmax/log_softmax (with a ``dtype`` too) and
layer norm, and views (reshape, view, flatten,
permute, transpose, t, unsqueeze, squeeze, slices with steps and offsets, select,
expand, contiguous), ``cat`` (values of one shape, promoting their dtypes; two slices
of one value in swapped order, as rotary embeddings do) and ``slice_scatter``. ``dynamic`` programs draw only steps whose source holds at every
size (``reshape(-1)``, ``expand(2, -1)``, slices by small constants, ``x.shape[-1:]``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from hypothesis import strategies as st


@dataclass(frozen=True)
class Value:
    """A value of the program while it is drawn or run: its eager tensor, its unspecified
    positions (a bool tensor of its shape, or None: none) and its working precision (the
    least precise float dtype computed on the way; None for inputs: exact data)."""

    name: str
    tensor: torch.Tensor
    unspecified: torch.Tensor | None
    precision: torch.dtype | None = None
    exact: bool = True  # every correct implementation gives these bits (eager_rules.result_is_exact)


@dataclass(frozen=True)
class Draft:
    """A step's source and what the tests need to know of it.

    ``effect`` says how unspecified positions flow (:func:`eager_rules.unspecified_of`):
    ``pointwise`` (from the operands, broadcast), ``tie`` (maximum/minimum: also where the
    operands are a ``+0.0``/``-0.0`` pair), ``cast``, ``reduce`` over ``dims`` (None: all) and ``tie_reduce`` (amax/amin:
    also a zero result of a row holding both zeros), ``row`` (softmax, layer norm: a row
    with one is unspecified throughout), ``view`` (the same view of them), ``rearrange``
    (the same op on every operand's positions: ``cat``, ``slice_scatter``).
    ``lowers``: the kernel IR has a lowering for this op (not a view, not an extern)."""

    code: str
    operands: tuple = ()
    effect: str = "pointwise"
    lowers: bool = True
    dims: tuple | None = None
    keepdim: bool = False
    rounding: str = "exact"  # ROUNDINGS
    # where the result jumps with its operand: ("integer", x) floor/ceil/a cast to an
    # integer type, ("zero", x) a cast to bool, ("compare", a, b) a comparison; sources
    discontinuity: tuple | None = None
    empty: bool = False  # its result has no elements (set once it ran)
    operand_meta: tuple = ()  # (shape, dtype) of each operand, when drawn
    open_bugs: frozenset = frozenset()  # the open bugs this step meets (eager_rules.OPEN_BUG_CHECKS)

    def with_operands(self, values: dict) -> "Draft":
        return replace(self, operand_meta=tuple((tuple(values[name].tensor.shape), values[name].tensor.dtype)
                                                for name in self.operands))


# How a step's float result relates to exact operands: "exact" (a selection, a sign, a
# view, a conversion: the same bits anywhere), "rounded" (one IEEE rounding in the result
# dtype: the same bits for float32/float64 results, not for half types, which kernels
# compute in float32), "approximate" (transcendental functions, sums: an ulp or so).
ROUNDINGS = ("exact", "rounded", "approximate")
EXACT_UNARY = frozenset({"abs", "neg", "relu", "floor", "ceil", "logical_not", "isnan"})
ROUNDED_UNARY = frozenset({"sqrt", "reciprocal"})
ROUNDED_POWERS = frozenset({2, 0.5, -1})  # x * x, sqrt, 1 / x


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
    rounding = "exact" if op in EXACT_UNARY else "rounded" if op in ROUNDED_UNARY else "approximate"
    jump = ("integer", a.name) if op in ("floor", "ceil") else None
    return Draft(form.format(op=op, a=a.name), (a.name,), rounding=rounding, discontinuity=jump)


def draw_arithmetic(draw, pool, dynamic):
    a = pick(draw, pool)
    b, names = partner(draw, pool, a)
    form = draw(st.sampled_from(ARITHMETIC))
    return Draft(form.format(a=a.name, b=b), (a.name, *names), rounding="rounded")


def draw_maximum(draw, pool, dynamic):
    a = pick(draw, pool)
    b, names = partner(draw, pool, a, scalars=False)
    op = draw(st.sampled_from(["maximum", "minimum"]))
    form = draw(st.sampled_from(["torch.{op}({a}, {b})", "{a}.{op}({b})"]))
    return Draft(form.format(op=op, a=a.name, b=b), (a.name, *names), effect="tie")


def draw_comparison(draw, pool, dynamic):
    a = pick(draw, pool)
    b, names = partner(draw, pool, a)
    return Draft(f"({a.name} {draw(st.sampled_from(COMPARISONS))} {b})", (a.name, *names),
                 discontinuity=("compare", a.name, b))


def draw_logical(draw, pool, dynamic):
    a = pick(draw, pool)
    b, names = partner(draw, pool, a, scalars=False)
    return Draft(f"torch.{draw(st.sampled_from(LOGICAL))}({a.name}, {b})", (a.name, *names))


def draw_bitwise(draw, pool, dynamic):
    """``&``, ``|``, ``^`` and ``~`` of masks (bools: the logical ops, in kernels) or of
    integers (bit operations: ATen ops)."""
    a = pick(draw, pool)
    if a.tensor.dtype.is_floating_point:
        mask = f"({a.name} > 0)"
    elif draw(st.booleans()):
        mask = f"({a.name} != 0)"
    else:
        mask = a.name
    if draw(st.integers(0, 3)) == 0:
        return Draft(f"~{mask}", (a.name,))
    b = pick(draw, [v for v in pool if broadcasts(v.tensor.shape, a.tensor.shape)])
    other = f"({b.name} < 1)" if b.tensor.dtype != a.tensor.dtype or b.tensor.dtype.is_floating_point else b.name
    return Draft(f"{mask} {draw(st.sampled_from('&|^'))} {other}", (a.name, b.name))


def draw_where(draw, pool, dynamic):
    a = pick(draw, pool)
    conditions = [v for v in pool if v.tensor.dtype == torch.bool and broadcasts(v.tensor.shape, a.tensor.shape)]
    if conditions and draw(st.booleans()):
        condition = pick(draw, conditions)
        condition_source, condition_names = condition.name, (condition.name,)
    else:
        compared = pick(draw, [v for v in pool if broadcasts(v.tensor.shape, a.tensor.shape)])
        threshold = scalar_source(draw(st.sampled_from([0, 0.5, -1])))
        condition_source, condition_names = f"({compared.name} > {threshold})", (compared.name,)
    b, names = partner(draw, pool, a)
    first, second = (a.name, b) if draw(st.booleans()) else (b, a.name)
    jump = ("compare", compared.name, threshold) if condition_source.startswith("(") else None
    return Draft(f"torch.where({condition_source}, {first}, {second})", (*condition_names, a.name, *names),
                 discontinuity=jump)


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
    jump = ("zero", a.name) if dtype == torch.bool else None if dtype.is_floating_point else ("integer", a.name)
    return Draft(f"{a.name}.to({dtype_source(dtype)})", (a.name,), "cast", lowers=dtype != a.tensor.dtype,
                 discontinuity=jump)


def draw_pow(draw, pool, dynamic):
    a = pick(draw, pool)
    exponent = draw(st.sampled_from(POWERS))
    form = draw(st.sampled_from(["{a} ** {e}", "torch.pow({a}, {e})"]))
    rounding = "rounded" if exponent in ROUNDED_POWERS else "approximate"
    return Draft(form.format(a=a.name, e=exponent), (a.name,), rounding=rounding)


def draw_integer_division(draw, pool, dynamic):
    # A float operand must be exact: the result jumps, or (``%``) keeps the operand's
    # absolute error, so an ulp of a transcendental result would be a wrong answer.
    candidates = [v for v in pool if v.exact or not v.tensor.dtype.is_floating_point]
    if not candidates:
        return draw_unary(draw, pool, dynamic)
    a = pick(draw, candidates)
    divisor = draw(st.sampled_from(DIVISORS))
    form = draw(st.sampled_from(INTEGER_DIVISIONS))
    integral = not a.tensor.dtype.is_floating_point
    if integral and divisor == -1 and "trunc" in form:
        divisor = -2  # eager's trunc division of the lowest integer by -1 kills the process (SIGFPE)
    lowers = integral and divisor != -1 and (a.tensor.dtype != torch.bool or "trunc" not in form)
    return Draft(form.format(a=a.name, c=divisor), (a.name,), lowers=lowers, rounding="rounded")


def draw_reduction(draw, pool, dynamic):
    a = pick(draw, pool)
    rank = a.tensor.dim()
    op = draw(st.sampled_from(["sum", "amax", "amin", "mean", "var", "sum"]))
    dims = draw_dims(draw, rank)
    keepdim = draw(st.booleans())
    effect = "tie_reduce" if op in ("amax", "amin") else "reduce"
    rounding = "exact" if op in ("amax", "amin") else "approximate"
    extra = f", correction={draw(st.sampled_from([0, 1]))}" if op == "var" else ""
    if op in ("sum", "mean") and draw(st.integers(0, 3)) == 0:
        extra = f", dtype={dtype_source(draw(st.sampled_from(CAST_TARGETS[:5])))}"
    if dims is None and op != "var":
        return Draft(f"{a.name}.{op}({extra.removeprefix(', ')})", (a.name,), effect, dims=None, keepdim=False,
                     rounding=rounding)
    dim_source = "" if dims is None else f"dim={dims!r}, "
    code = f"{a.name}.{op}({dim_source}keepdim={keepdim}{extra})"
    return Draft(code, (a.name,), effect, dims=_normalised(dims, rank), keepdim=keepdim, rounding=rounding)


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
        return Draft(f"F.layer_norm({a.name}, {shape})", (a.name,), "row", dims=tuple(range(rank - count, rank)),
                     rounding="approximate")
    dim = draw_dims(draw, rank, single=True)
    form = draw(st.sampled_from(["torch.{op}({a}, dim={d})", "{a}.{op}({d})", "torch.{op}({a}, {d}, dtype={t})"]))
    code = form.format(op=op, a=a.name, d=dim, t=dtype_source(draw(st.sampled_from(CAST_TARGETS[:4]))))
    return Draft(code, (a.name,), "row", dims=_normalised(dim, rank), rounding="approximate")


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


def draw_cat(draw, pool, dynamic):
    """``torch.cat`` of values of one shape, of two slices of one value swapped, or
    ``torch.slice_scatter`` of one value into another; the split point is 1 in dynamic
    programs (it holds at every size)."""
    a = pick(draw, pool)
    shape = tuple(a.tensor.shape)
    sized = [d for d, size in enumerate(shape) if size >= 2]
    if not sized:
        return draw_unary(draw, pool, dynamic)
    dim = draw(st.sampled_from(sized))
    prefix = ":, " * dim
    split = 1 if dynamic else draw(st.integers(1, shape[dim] - 1))
    form = draw(st.sampled_from(["pieces", "swapped", "scatter"]))
    if form == "pieces":
        same = [v for v in pool if tuple(v.tensor.shape) == shape]
        others = [pick(draw, same) for _ in range(draw(st.integers(1, 3)))]
        names = (a.name, *(v.name for v in others))
        return Draft(f"torch.cat([{', '.join(names)}], {dim})", tuple(dict.fromkeys(names)), "rearrange",
                     lowers=not dynamic)
    if form == "swapped":
        code = f"torch.cat([{a.name}[{prefix}{split}:], {a.name}[{prefix}:{split}]], {dim - len(shape)})"
        return Draft(code, (a.name,), "rearrange", lowers=not dynamic)
    same = [v for v in pool if tuple(v.tensor.shape) == shape and v.tensor.dtype == a.tensor.dtype]
    source = pick(draw, same)
    end = shape[dim] if dynamic else draw(st.integers(split, shape[dim]))
    start = split if dynamic else draw(st.integers(0, end - 1))
    piece = f"{source.name}[{prefix}{start}:{end}]" if not dynamic else f"{source.name}[{prefix}1:]"
    code = f"torch.slice_scatter({a.name}, {piece}, {dim}, {start}{'' if dynamic else f', {end}'})"
    return Draft(code, (a.name, source.name), "rearrange", lowers=not dynamic)


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
    "comparison": (draw_comparison, 1), "logical": (draw_logical, 1), "bitwise": (draw_bitwise, 1), "where": (draw_where, 1),
    "clamp": (draw_clamp, 2), "cast": (draw_cast, 2), "pow": (draw_pow, 1),
    "integer_division": (draw_integer_division, 1), "reduction": (draw_reduction, 3),
    "arg_reduction": (draw_arg_reduction, 1), "normalisation": (draw_normalisation, 2), "view": (draw_view, 4),
    "cat": (draw_cat, 1),
}
_KINDS = [kind for kind, (_, weight) in DRAWERS.items() for _ in range(weight)]


def draw_step(draw, pool: list, dynamic: bool) -> Draft:
    return DRAWERS[draw(st.sampled_from(_KINDS))][0](draw, pool, dynamic)

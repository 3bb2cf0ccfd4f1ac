"""What eager's result of a generated program determines, and what it leaves open.

Each step of a program (:mod:`program_steps`) is run eagerly by :mod:`generated_programs`,
and these rules say, for its result:

* its **unspecified positions** (:func:`unspecified_of`), left out of the comparison:
  a ``+0.0``/``-0.0`` pair in ``maximum``/``minimum`` (ATen's scalar path returns the first
  operand, its vectorized path the second, so the sign depends on the element's place in
  the row; our kernels return the second, as the vectorized path does); a zero ``amax``/
  ``amin`` of a row holding both zeros (either, by path); a step whose result jumps with
  its operand (floor/ceil, a cast to an integer type or to bool, a comparison) where an
  inexact operand is within 16 ulps of the jump (an ulp of ``exp`` decides which side);
  and every position computed from one of those (a later reciprocal turns a zero's sign
  into an infinity);
* its **working precision** (:func:`least_precise`): the least precise float dtype it was
  computed through (a float64 mean of float32 values is only as good as float32);
* whether it is **exact** (:func:`result_is_exact`): the same bits from every correct
  implementation (a selection, a conversion, one IEEE rounding in float32/float64), as
  opposed to an ulp or so (transcendental functions, sums in another order, half-type
  arithmetic that kernels do in float32);
* which **open bugs** it meets (:data:`OPEN_BUG_CHECKS`, tests/cpp/test_kernel_regressions.py).
"""
from __future__ import annotations

import warnings

import torch
from program_steps import Draft, Value
from torch._subclasses.fake_tensor import FakeTensorMode

# ---- precision and exactness --------------------------------------------------------------------

# float dtypes from the most precise (float64) to the least (bfloat16)
PRECISION_ORDER = (torch.float64, torch.float32, torch.float16, torch.bfloat16)


EPSILON = {dtype: torch.finfo(dtype).eps for dtype in PRECISION_ORDER}
NEAR_ULPS = 16  # how close to a jump an inexact operand makes the result unspecified


def least_precise(dtypes) -> torch.dtype | None:
    floats = [d for d in dtypes if d in PRECISION_ORDER]
    return max(floats, key=PRECISION_ORDER.index) if floats else None


def result_is_exact(draft: Draft, operands: list, result: torch.Tensor) -> bool:
    """The step's result has the same bits from every correct implementation (see the
    module docstring); integers and bools always (their flips are unspecified positions)."""
    if not result.dtype.is_floating_point:
        return True
    if not all(v.exact for v in operands):
        return False
    return draft.rounding == "exact" or (draft.rounding == "rounded" and result.dtype in (torch.float32,
                                                                                          torch.float64))


# ---- unspecified positions ----------------------------------------------------------------------


def unspecified_of(draft: Draft, operands: list, result: torch.Tensor, scope: dict) -> torch.Tensor | None:
    """The result's unspecified positions (see :class:`Draft` and :mod:`generated_programs`)."""
    if draft.effect == "view":
        (operand,) = operands
        if operand.unspecified is None:
            return None
        return eval(draft.code, {**scope, operand.name: operand.unspecified})
    if draft.effect == "rearrange":  # the same op on the positions: a cat of the masks
        if all(v.unspecified is None for v in operands):
            return None
        masks = {v.name: torch.zeros(v.tensor.shape, dtype=torch.bool) if v.unspecified is None else v.unspecified
                 for v in operands}
        return eval(draft.code, {**scope, **masks})
    inherited = [v.unspecified for v in operands if v.unspecified is not None]
    if draft.effect in ("reduce", "tie_reduce", "row"):
        return _reduced_unspecified(draft, operands[0], inherited, result)
    mask = None
    for inner in inherited:
        mask = inner if mask is None else mask | inner
    for own in (_OWN_UNSPECIFIED.get(draft.effect, lambda operands, result: None)(operands, result),
                _near_a_jump(draft, operands, result, scope), _amplified(draft, operands)):
        if own is not None:
            mask = own if mask is None else mask | own
    return None if mask is None else mask.expand(result.shape).clone()


AMPLIFIED_ABOVE = 8.0  # |x| from which exp(x)'s result is not held to its dtype's tolerance


def _amplified(draft: Draft, operands: list) -> torch.Tensor | None:
    """Where ``exp`` of an inexact operand multiplies its relative error by ``|x|`` past
    the tolerance: ``exp(x)`` of an ``x`` off by an ulp at 72 is off by 72 ulps (a chain
    of four ``exp`` of values in [-2, 2]), which any correct implementation may be."""
    if not draft.code.startswith("torch.exp(") or not operands or operands[0].exact:
        return None
    x = operands[0].tensor
    if not x.dtype.is_floating_point:
        return None
    return x.abs() > AMPLIFIED_ABOVE


def _near_a_jump(draft: Draft, operands: list, result: torch.Tensor, scope: dict) -> torch.Tensor | None:
    """Where an inexact float operand is within NEAR_ULPS of the step's discontinuity."""
    if draft.discontinuity is None:
        return None
    kind, *sources = draft.discontinuity
    values = {v.name: v for v in operands}
    inexact = [values[s] for s in sources if s in values and not values[s].exact]
    if not inexact:
        return None
    epsilon = NEAR_ULPS * EPSILON[least_precise([v.tensor.dtype for v in inexact] + [v.precision for v in inexact])]
    a, *rest = (torch.as_tensor(eval(s, scope)).double() for s in sources)
    if kind == "integer":
        near = (a - a.round()).abs() <= epsilon * a.abs().clamp(min=1)
    elif kind == "zero":
        near = a.abs() <= epsilon
    else:
        (b,) = rest
        near = (a - b).abs() <= epsilon * torch.maximum(a.abs(), b.abs())
    return torch.broadcast_to(near & near.isfinite() if near.dtype.is_floating_point else near, result.shape)


def _tie(operands: list, result: torch.Tensor) -> torch.Tensor | None:
    """maximum/minimum: where the operands are a ``+0.0``/``-0.0`` pair."""
    if not result.dtype.is_floating_point:
        return None
    a, b = (v.tensor.to(result.dtype) for v in operands)
    return torch.broadcast_to((a == 0) & (b == 0) & (a.signbit() != b.signbit()), result.shape)


_OWN_UNSPECIFIED = {"tie": _tie}


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

def _meta_layout_differs(draft: Draft, result, operands: list, scope: dict) -> bool:
    """D: torch's meta strides of the step, which kernels allocate by, are not eager's."""
    return draft.effect != "view" and meta_layout_differs(draft, result, scope)


def open_bugs_of(draft: Draft, result: torch.Tensor, operands_by_size: list, scope: dict) -> frozenset:
    """The open bugs a step meets: ``result`` at the first size, its first operand at each
    size, the values it read (``scope``, at the first size)."""
    return frozenset(letter for letter, check in OPEN_BUG_CHECKS.items()
                     if check(draft, result, operands_by_size, scope))


OPEN_BUG_CHECKS = {"D": _meta_layout_differs}


def _reduce_any(mask: torch.Tensor, dims, keepdim: bool) -> torch.Tensor:
    """``mask.any`` over ``dims`` (None: all), the reduced dims kept."""
    if mask.dim() == 0:
        return mask.clone()
    if dims is None:
        return mask.any().reshape([1] * mask.dim())
    return mask.any(dim=dims, keepdim=keepdim) if dims else mask.clone()

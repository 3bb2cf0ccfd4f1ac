"""Compiled outputs against eager's: values, dtypes, shapes, strides and the signs of zeros.

The rules (:func:`assert_output_matches`):

* shape and dtype equal;
* strides equal on every dim of size > 1 when the tensor has elements (torch's own
  "significant strides": a stride of a dim of size 0 or 1 addresses nothing);
* integers and bools exactly equal;
* floats within :data:`kernel_targets.TOLERANCES` of their working precision (the
  least precise float dtype they were computed through: the dtype itself, or a less
  precise one on the way), NaN exactly where the expected value has NaN
  (``equal_nan``), and where both are zero, the same sign bit;
* unspecified positions (:mod:`generated_programs`: a ``+0.0``/``-0.0`` tie of
  maximum/minimum/amax/amin, or a value computed from one) are left out of the value and sign checks; every other
  position is held to them.

Half-type results are compared with eager run on float32 copies of the half inputs and
cast to the result's dtype (``widen_half`` of :func:`generated_programs.run_eager`):
kernels compute half types in float32 and round once, on store, as
``tests/triton/conftest.py``'s ``float32_reference`` does for one dtype.
"""
from __future__ import annotations

import torch
from eager_rules import least_precise, significant_strides
from kernel_targets import TOLERANCES


def assert_output_matches(actual, expected: torch.Tensor, reference: torch.Tensor | None = None,
                          unspecified: torch.Tensor | None = None, precision: torch.dtype | None = None,
                          where: str = "output") -> None:
    """``actual`` (compiled) against ``expected`` (eager); values against ``reference``
    when given (the float32 reference of a half result), see the module docstring."""
    assert isinstance(actual, torch.Tensor), f"{where}: {type(actual).__name__}, eager gives a tensor"
    assert actual.shape == expected.shape, f"{where}: shape {tuple(actual.shape)}, eager {tuple(expected.shape)}"
    assert actual.dtype == expected.dtype, f"{where}: dtype {actual.dtype}, eager {expected.dtype}"
    assert significant_strides(actual) == significant_strides(expected), (
        f"{where}: strides {actual.stride()}, eager {expected.stride()} (shape {tuple(expected.shape)})")
    reference = expected if reference is None else reference.to(expected.dtype)
    kept = torch.ones(expected.shape, dtype=torch.bool) if unspecified is None else ~unspecified
    got, want = actual[kept], reference[kept]
    if not expected.dtype.is_floating_point:
        mismatch = got != want
        assert not mismatch.any(), f"{where}: {_first_mismatches(actual, reference, kept, mismatch)}"
        return
    try:
        tolerance = TOLERANCES[least_precise([expected.dtype, precision])]
        torch.testing.assert_close(got, want, equal_nan=True, **tolerance)
    except AssertionError as error:
        raise AssertionError(f"{where}: {error}\ncompiled {actual}\nexpected {reference}") from None
    zeros = (got == 0) & (want == 0)
    signs = got[zeros].signbit() != want[zeros].signbit()
    assert not signs.any(), f"{where}: the sign of a zero differs\ncompiled {actual}\nexpected {reference}"


def _first_mismatches(actual: torch.Tensor, expected: torch.Tensor, kept: torch.Tensor, mismatch) -> str:
    positions = kept.nonzero()[mismatch.nonzero().flatten()][:5].tolist()
    shown = ", ".join(f"{tuple(p)}: {actual[tuple(p)].item()} != {expected[tuple(p)].item()}" for p in positions)
    return f"values differ at {shown}\ncompiled {actual}\nexpected {expected}"

"""The decomposition table that takes a graph down to the ATen ops lowering knows.

torch's core ATen table plus torch's own decompositions for the composite ops that
lowering wants in pieces (softmax, GELU, ...). A few are written here instead because
torch's versions go through ``prims`` reductions (``prims.var``) that the kernel IR would
have to special-case; these say the same thing with ``sum`` so that variance, layer
norm and means are ordinary reductions that fuse.

>>> import torch
>>> table = decomposition_table()
>>> torch.ops.aten.native_layer_norm.default in table
True
"""
from __future__ import annotations

import functools

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

aten = torch.ops.aten

# Composite ops whose torch decompositions produce only ATen ops lowering handles.
_TORCH_DECOMPOSED = [
    aten._softmax,
    aten._log_softmax,
    aten.gelu,
    aten.silu,
    aten.hardtanh,
    aten.leaky_relu,
    aten.elu,
    aten.hardsigmoid,
    aten.hardswish,
    aten.mish,
    aten.addcmul,
    aten.addcdiv,
    aten.lerp,
    # inference batch norm: pointwise over the running statistics (training mode writes
    # them, and such a graph runs as ATen ops)
    aten.native_batch_norm,
    aten._native_batch_norm_legit_no_training,
]


def _reduced_count(x: torch.Tensor, dims) -> int:
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return x.numel()
    if x.dim() == 0:
        return 1  # ATen takes dim 0 or -1 of a 0-d tensor: its one element
    dims = [dims] if isinstance(dims, int) else dims
    count = 1
    for d in dims:
        count *= x.shape[d]
    return count


def _dims(x: torch.Tensor, dims):
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(x.dim()))
    return [dims] if isinstance(dims, int) else list(dims)


def _mean(x, dim=None, keepdim=False, *, dtype=None):
    # sum in the result dtype's accumulator, then one division: what ATen computes.
    out_dtype = dtype or x.dtype
    total = aten.sum.dim_IntList(x, _dims(x, dim), keepdim, dtype=out_dtype)
    return aten.div.Tensor(total, _reduced_count(x, dim))


def _mean_all(x, *, dtype=None):
    return _mean(x, None, False, dtype=dtype)


def _centered(x, dims: list, count):
    """``(mean, x - mean)`` over ``dims``, from values shifted by the row's first one: a
    row of equal values has mean exactly that value and deviations exactly +0.0, as
    eager's (Welford) kernels give, where ``sum / n`` is not the value and layer norm would
    scale the rounding by ``rsqrt(eps)``. The shift is a view, read by the same fused
    kernels; empty rows are not shifted."""
    # (a symbolic size is at least 2: the capture specializes 0 and 1)
    if x.dim() == 0 or any(isinstance(x.shape[d], int) and x.shape[d] == 0 for d in dims):
        mean = aten.div.Tensor(aten.sum.dim_IntList(x, dims, True), count)
        return mean, aten.sub.Tensor(x, mean)
    shift = x
    for d in dims:
        shift = aten.slice.Tensor(shift, d, 0, 1)
    shifted = aten.sub.Tensor(x, shift)
    shifted_mean = aten.div.Tensor(aten.sum.dim_IntList(shifted, dims, True), count)
    return aten.add.Tensor(shift, shifted_mean), aten.sub.Tensor(shifted, shifted_mean)


def _var(x, dim=None, *, correction=None, keepdim=False):
    return _var_mean(x, dim, correction=correction, keepdim=keepdim)[0]


def _var_mean(x, dim=None, *, correction=None, keepdim=False):
    dims = _dims(x, dim)
    count = _reduced_count(x, dim)
    correction = 1 if correction is None else correction
    # Two passes over the row (mean, then squared deviations), both fused into one kernel.
    mean, deviation = _centered(x, dims, count)
    if not keepdim and x.dim() > 0:
        mean = aten.squeeze.dims(mean, dims)
    # (a symbolic count is at least 2: with a correction of at most 1 the divisor is positive)
    positive = isinstance(count, int) and count > correction or not isinstance(count, int) and correction <= 1
    return _mean_of_squares(deviation, dims, keepdim, max(count - correction, 0), positive), mean


def _mean_of_squares(deviation, dims: list, keepdim: bool, divisor, positive: bool):
    """``sum(d * d) / divisor``, each square divided before the sum when the divisor is
    known to be positive (scaled by ``1 / divisor`` when it is an int): a sum of squares
    of values near 1e19 overflows float32 where the variance does not (eager's Welford
    kernels never form the sum)."""
    squares = aten.mul.Tensor(deviation, deviation)
    if not positive:
        return aten.div.Tensor(aten.sum.dim_IntList(squares, dims, keepdim), divisor)
    scaled = aten.mul.Tensor(squares, 1.0 / divisor) if isinstance(divisor, int) else aten.div.Tensor(squares, divisor)
    return aten.sum.dim_IntList(scaled, dims, keepdim)


def _std(x, dim=None, *, correction=None, keepdim=False):
    return aten.sqrt.default(_var(x, dim, correction=correction, keepdim=keepdim))


def _native_layer_norm(x, normalized_shape, weight, bias, eps):
    dims = list(range(x.dim() - len(normalized_shape), x.dim()))
    count = _reduced_count(x, dims)
    compute = x.to(torch.float32) if x.dtype in (torch.float16, torch.bfloat16) else x
    mean, deviation = _centered(compute, dims, count)
    # (the sum, then the division, as ATen's kernel: its variance overflows as this does)
    variance = aten.div.Tensor(aten.sum.dim_IntList(aten.mul.Tensor(deviation, deviation), dims, True), count)
    rstd = aten.rsqrt.default(aten.add.Tensor(variance, eps))
    out = aten.mul.Tensor(deviation, rstd)
    if weight is not None:
        out = aten.mul.Tensor(out, weight)
    if bias is not None:
        out = aten.add.Tensor(out, bias)
    # ATen's kernel writes a contiguous output whatever the input's layout (pointwise
    # ops would keep a transposed input's strides); a no-op for a contiguous input
    return out.to(x.dtype).contiguous(), mean, rstd


def _empty_passes_through(op):
    """torch's decomposition of ``op`` (softmax), except that a tensor without elements is
    returned as it is, as eager does without running a kernel: the decomposition's
    ``x - amax(x)`` is not defined for bools."""
    decomposition = get_decompositions([op])[op.default]

    def decompose(x, dim, half_to_float):
        numel = x.numel()
        if isinstance(numel, int) and numel == 0:
            return aten._to_copy.default(x, dtype=torch.float32) if half_to_float else aten.clone.default(x)
        return decomposition(x, dim, half_to_float)

    return decompose


_INT64_MAX = 2 ** 63 - 1


def _slice_scatter(base, src, dim=0, start=None, end=None, step=1):
    """``base`` with ``src`` written over ``base[start:end]`` along ``dim``, as a ``cat`` of
    ``src`` and the pieces of ``base`` around it: one pointwise kernel that fuses with its
    producers and consumers (RoPE's backward adds two of these), where the ATen op copies
    ``base`` and then ``src``. Only where the bounds are known without a new shape guard
    (step 1, bounds in range, ``src`` of the slice's shape) and ``base`` is contiguous (the
    op's result has ``base``'s strides, a ``cat``'s is contiguous); else the op itself."""
    from torch._prims_common import is_contiguous_or_false
    from torch.fx.experimental.symbolic_shapes import statically_known_true as known

    if step != 1 or base.dim() == 0 or base.dtype != src.dtype or base.dim() != src.dim():
        return NotImplemented
    if not is_contiguous_or_false(base):
        return NotImplemented
    dim = dim % base.dim()
    size = base.shape[dim]
    start = 0 if start is None else start
    end = size if end is None or (isinstance(end, int) and end >= _INT64_MAX) else end
    if not (isinstance(start, int) and 0 <= start) or not known(start <= end) or not known(end <= size):
        return NotImplemented
    if not known(src.shape[dim] == end - start) or not all(
            known(a == b) for d, (a, b) in enumerate(zip(base.shape, src.shape, strict=True)) if d != dim):
        return NotImplemented
    pieces = [aten.slice.Tensor(base, dim, 0, start)] if start else []
    pieces.append(src)
    if not known(end == size):
        pieces.append(aten.slice.Tensor(base, dim, end, size))
    if len(pieces) == 1:  # the whole dim: base's (contiguous) layout, not src's
        return aten.clone.default(src, memory_format=torch.contiguous_format)
    return aten.cat.default(pieces, dim)


_OWN = {
    aten.slice_scatter.default: _slice_scatter,
    aten._softmax.default: _empty_passes_through(aten._softmax),
    aten._log_softmax.default: _empty_passes_through(aten._log_softmax),
    aten.mean.dim: _mean,
    aten.mean.default: _mean_all,
    aten.var.correction: _var,
    aten.var_mean.correction: _var_mean,
    aten.std.correction: _std,
    aten.native_layer_norm.default: _native_layer_norm,
}


# Ops the core table decomposes that stay one ATen call (an extern), as in Inductor:
# attention's fused kernel beats its matmul-and-softmax decomposition.
_KEPT = (
    aten.scaled_dot_product_attention.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
)


def _channels_last_convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    # A 2-d convolution reads its input in channels-last order: oneDNN's kernels are
    # 1.3-1.6x faster on it (mobilenet's, one thread), the result comes back in that
    # order and the pointwise kernels after it keep it.
    if x.dim() != 4 or x.is_contiguous(memory_format=torch.channels_last):
        return NotImplemented  # make_fx: the op as it is
    x = x.contiguous(memory_format=torch.channels_last)
    return aten.convolution.default(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


@functools.cache
def decomposition_table(channels_last: bool = False) -> dict:
    """op overload -> decomposition function, as ``make_fx`` takes it; ``channels_last``:
    2-d convolutions read channels-last inputs (:func:`lowering.trace_aten` restores the
    graph's output layouts)."""
    table = dict(core_aten_decompositions())
    for op in _KEPT:
        table.pop(op, None)
    table.update(get_decompositions(_TORCH_DECOMPOSED))
    table.update(_OWN)
    if channels_last:
        table[aten.convolution.default] = _channels_last_convolution
    return table

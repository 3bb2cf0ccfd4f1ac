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


def _var(x, dim=None, *, correction=None, keepdim=False):
    dims = _dims(x, dim)
    count = _reduced_count(x, dim)
    correction = 1 if correction is None else correction
    # Two passes over the row (mean, then squared deviations): numerically what ATen
    # does, and both passes fuse into one kernel.
    mean = aten.div.Tensor(aten.sum.dim_IntList(x, dims, True), count)
    deviation = aten.sub.Tensor(x, mean)
    squares = aten.sum.dim_IntList(aten.mul.Tensor(deviation, deviation), dims, keepdim)
    return aten.div.Tensor(squares, max(count - correction, 0))


def _var_mean(x, dim=None, *, correction=None, keepdim=False):
    mean = aten.div.Tensor(aten.sum.dim_IntList(x, _dims(x, dim), keepdim), _reduced_count(x, dim))
    return _var(x, dim, correction=correction, keepdim=keepdim), mean


def _std(x, dim=None, *, correction=None, keepdim=False):
    return aten.sqrt.default(_var(x, dim, correction=correction, keepdim=keepdim))


def _native_layer_norm(x, normalized_shape, weight, bias, eps):
    dims = list(range(x.dim() - len(normalized_shape), x.dim()))
    count = _reduced_count(x, dims)
    compute = x.to(torch.float32) if x.dtype in (torch.float16, torch.bfloat16) else x
    mean = aten.div.Tensor(aten.sum.dim_IntList(compute, dims, True), count)
    deviation = aten.sub.Tensor(compute, mean)
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


_OWN = {
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

"""Triton source for one kernel group.

A group's members are rendered by substitution: reading an in-group pointwise node at
some index inlines its body there, reading an in-group reduction uses the row's
reduced value, anything else is a masked ``tl.load``. Each distinct expression becomes
one temporary (common-subexpression elimination by source text), so a value read
twice at the same index is computed once.

Persistent reductions are straight-line code over a whole row. Looped reductions run
one pass over the row per reduction depth (a reduction that needs another reduction's
result runs in the pass after it); values needed in a later pass are recomputed there
from their inputs, never stored.

>>> import torch
>>> from fastdynamo.backends.kernels.lowering import trace_aten, lower
>>> from fastdynamo.backends.kernels.fusion import fuse
>>> schedule = fuse(lower(trace_aten(torch.fx.symbolic_trace(lambda x: x.exp() + 1), [torch.randn(8)]).graph_module))
>>> kernel = render_kernel(schedule, schedule.kernels()[0], persistent_max=1024)
>>> "tl.exp(" in kernel.source and kernel.template == "pointwise"
True
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch

from ..kernels import indexing, sizes
from ..kernels.fusion import KernelGroup, Schedule, reduction_depths
from ..kernels.ir import Constant, IndexValue, Load, Op, PointwiseNode, ReductionNode, SizeValue
from ..kernels.opset import PointwiseOp, accumulator_dtype, compute_dtype, reduction_identity
from ..kernels.scope import Scope
from ..kernels.target import RenderedKernel
from . import templates
from .op_rules import COMBINE_HELPERS, REDUCTION_RULES, pointwise_rule, render_literal, triton_dtype


@dataclass
class TritonKernel(RenderedKernel):
    """A rendered Triton kernel and the template (launch shape) it uses."""

    template: str = "pointwise"


@dataclass
class _Value:
    """Rendered value: source text and the dtype the kernel holds it in."""

    text: str
    dtype: torch.dtype
    constant: float | None = None  # the Python value when the text is a literal


INT32_LIMIT = 2**31 - 1


class _KernelRenderer:
    def __init__(self, schedule: Schedule, group: KernelGroup, persistent_max: int):
        self.group = group
        self.nodes = schedule.graph.node_map()
        self.meta = schedule.graph.buffer_meta()
        self.members = set(group.members)
        self.xnumel = sizes.normalise(math.prod(group.x_shape))
        self.rnumel = sizes.normalise(math.prod(group.r_shape))
        self.template = templates.template_kind(group.kind, self.rnumel, persistent_max)
        self.params: list = []
        self.size_names = sorted(schedule.graph.size_bindings)
        self.counter = 0
        self.reduction_values: dict = {}
        self.index_dtype = torch.int64 if self._needs_int64() else torch.int32

    def _needs_int64(self) -> bool:
        extents = [self.xnumel * self.rnumel]
        for shape, stride, _ in self.meta.values():
            if stride is not None and shape:
                extents.append(sum((s - 1) * st for s, st in zip(shape, stride, strict=True)) + 1)
        # a symbolic extent has no bound but the symbols' ranges: 64-bit addresses
        return not all(sizes.provably_le(extent, INT32_LIMIT) for extent in extents)

    # ---- expressions -------------------------------------------------------------------
    def emit(self, scope: Scope, key, text: str, dtype: torch.dtype) -> _Value:
        cached = scope.lookup(key)
        if cached is not None:
            return cached
        name = f"tmp{self.counter}"
        self.counter += 1
        scope.lines.append(f"{scope.indent}{name} = {text}")
        value = _Value(name, dtype)
        scope.cache[key] = value
        return value

    def convert(self, scope: Scope, value: _Value, dtype: torch.dtype) -> _Value:
        target = compute_dtype(dtype)
        if value.dtype == target:
            return value
        if value.constant is not None:
            return _Value(render_literal(value.constant, target), target, value.constant)
        text = f"({value.text} != 0)" if target == torch.bool else f"{value.text}.to({triton_dtype(target)})"
        return self.emit(scope, ("convert", value.text, target), text, target)

    def value(self, scope: Scope, expr, var_map: dict) -> _Value:
        if isinstance(expr, Constant):
            dtype = compute_dtype(expr.dtype)
            return _Value(render_literal(expr.value, dtype), dtype, expr.value)
        if isinstance(expr, IndexValue):
            index = indexing.substitute(expr.index, var_map)
            if isinstance(index, indexing.Const):
                dtype = compute_dtype(expr.dtype)
                return _Value(render_literal(index.value, dtype), dtype, index.value)
            raw = _Value(f"({indexing.render(index)})", self.index_dtype)
            return self.convert(scope, raw, expr.dtype)
        if isinstance(expr, SizeValue):
            # `+ 0 * xindex` makes a block, as 0-d loads do (a lone scalar is not stored
            # or compared like one in the interpreter)
            text = f"{sizes.render_kernel_size(expr.size)} + 0 * xindex"
            return self.convert(scope, self.emit(scope, ("size", text), text, torch.int64), expr.dtype)
        if isinstance(expr, Load):
            return self.load(scope, expr, var_map)
        if isinstance(expr, Op):
            return self.operation(scope, expr, var_map)
        raise TypeError(f"cannot render {expr!r}")

    def operation(self, scope: Scope, op: Op, var_map: dict) -> _Value:
        args = [self.value(scope, arg, var_map) for arg in op.args]
        result_dtype = compute_dtype(op.dtype)
        if op.name is PointwiseOp.CAST:
            return self.cast(scope, args[0], op.params[0])
        if args and all(a.constant is not None for a in args):
            # All-literal operands would make a Python scalar; anchor the first as a tensor.
            first = args[0]
            args[0] = self.emit(scope, ("anchor", first.text, first.dtype),
                                f"tl.full([], {first.text}, {triton_dtype(first.dtype)})", first.dtype)
        rule = pointwise_rule(op.name, op.operand_dtype)
        converted = range(len(args)) if rule.converted is None else rule.converted
        if op.operand_dtype is not None:
            args = [self.convert(scope, a, op.operand_dtype) if i in converted else a for i, a in enumerate(args)]
        text = rule.template.format(*(a.text for a in args))
        return self.emit(scope, text, text, result_dtype)

    def cast(self, scope: Scope, value: _Value, target: torch.dtype) -> _Value:
        if value.constant is not None:
            folded = torch.tensor(value.constant).to(target).item()
            return _Value(render_literal(folded, compute_dtype(target)), compute_dtype(target), folded)
        if target in (torch.float16, torch.bfloat16) and value.dtype != target:
            # Round through the narrow type: an explicit cast must lose what ATen loses.
            # From float32, as ATen converts (c10's half types are made from a float); an
            # integer straight to bfloat16 is its bits read as a float's in the interpreter.
            value = self.convert(scope, value, torch.float32)
            text = f"{value.text}.to({triton_dtype(target)}).to(tl.float32)"
            return self.emit(scope, text, text, torch.float32)
        return self.convert(scope, value, target)

    def load(self, scope: Scope, load: Load, var_map: dict) -> _Value:
        index = tuple(indexing.substitute(e, var_map) for e in load.index)
        node = self.nodes.get(load.buffer)
        if load.buffer in self.members and isinstance(node, PointwiseNode):
            inner = {var.name: e for var, e in zip(node.vars, index, strict=True)}
            return self.value(scope, node.body, inner)
        if load.buffer in self.members and isinstance(node, ReductionNode):
            return self.reduction_value(scope, node)
        shape, stride, dtype = self.meta[load.buffer]
        offset = indexing.linear_offset(index, stride)
        self.use_param(load.buffer)
        mask = self.mask_for(indexing.free_vars(offset))
        mask_text = f", {mask}, other=0" if mask else ""
        # A 0-d value is loaded as a block of the same element (as stores do): Triton's
        # interpreter tags a comparison of two single values with their float type, and
        # `|` on it then fails (maximum(s, x) with a 0-d s).
        where = _block_offset(offset)
        text = f"tl.load({load.buffer} + ({where}){mask_text})"
        raw = self.emit(scope, text, text, dtype)
        if compute_dtype(dtype) != dtype:
            return self.convert(scope, raw, compute_dtype(dtype))
        return raw

    def mask_for(self, variables: set) -> str | None:
        uses_r = any(v.startswith("r") for v in variables)
        uses_x = any(v.startswith("x") for v in variables)
        if self.group.kind == "pointwise":
            return "xmask" if variables else None
        if uses_r:
            return "xrmask" if uses_x or not sizes.is_one(self.xnumel) else "rmask"
        return "xmask" if uses_x else None

    def use_param(self, buffer: str) -> None:
        if buffer not in self.params:
            self.params.append(buffer)

    # ---- reductions ------------------------------------------------------------------------
    def reduction_value(self, scope: Scope, node: ReductionNode) -> _Value:
        if node.name in self.reduction_values:
            return self.reduction_values[node.name]
        if self.template == "looped_reduction":
            raise AssertionError(f"{node.name} read before its pass ran (depth ordering bug)")
        rule = REDUCTION_RULES[node.reduction_type]
        acc_dtype = accumulator_dtype(node.reduction_type, _body_dtype(node), node.dtype)
        value = self.convert(scope, self.value(scope, node.body, self.group.var_map(node)), acc_dtype)
        identity = render_literal(reduction_identity(node.reduction_type, acc_dtype), acc_dtype)
        masked = self.emit(scope, ("masked", node.name), f"tl.where(xrmask, {value.text}, {identity})", acc_dtype)
        fields = {"acc": masked.text}
        if rule.with_index:
            index = self.emit(scope, ("rindex", node.name),
                              f"tl.where(xrmask, rindex, {INT32_LIMIT}) + tl.zeros([XBLOCK, RBLOCK], tl.int32)", torch.int32)
            fields["acc_index"] = index.text
        result_dtype = torch.int32 if rule.with_index else acc_dtype
        result = self.emit(scope, ("reduced", node.name), rule.finish.format(**fields), result_dtype)
        self.reduction_values[node.name] = result
        return result

    def looped_reduction(self, before: Scope, loop: Scope, after: Scope, node: ReductionNode) -> None:
        rule = REDUCTION_RULES[node.reduction_type]
        acc_dtype = accumulator_dtype(node.reduction_type, _body_dtype(node), node.dtype)
        identity = render_literal(reduction_identity(node.reduction_type, acc_dtype), acc_dtype)
        acc = f"acc_{node.name}"
        before.lines.append(f"{before.indent}{acc} = tl.full([XBLOCK, RBLOCK], {identity}, {triton_dtype(acc_dtype)})")
        value = self.convert(loop, self.value(loop, node.body, self.group.var_map(node)), acc_dtype)
        if rule.with_index:
            acc_index = f"{acc}_index"
            before.lines.append(f"{before.indent}{acc_index} = tl.full([XBLOCK, RBLOCK], {INT32_LIMIT}, tl.int32)")
            combined = rule.combine.format(acc=acc, acc_index=acc_index, value=value.text, index="rindex")
            loop.lines.append(f"{loop.indent}{acc}_next, {acc_index}_next = {combined}")
            loop.lines.append(f"{loop.indent}{acc} = tl.where(xrmask, {acc}_next, {acc})")
            loop.lines.append(f"{loop.indent}{acc_index} = tl.where(xrmask, {acc_index}_next, {acc_index})")
            finish = rule.finish.format(acc=acc, acc_index=acc_index)
        else:
            combined = rule.combine.format(acc=acc, value=value.text)
            loop.lines.append(f"{loop.indent}{acc} = tl.where(xrmask, {combined}, {acc})")
            finish = rule.finish.format(acc=acc)
        result_dtype = torch.int32 if rule.with_index else acc_dtype
        self.reduction_values[node.name] = self.emit(after, ("reduced", node.name), finish, result_dtype)

    # ---- stores and layout ---------------------------------------------------------------
    def store(self, scope: Scope, name: str) -> None:
        node = self.nodes[name]
        if isinstance(node, ReductionNode):
            value = self.reduction_value(scope, node)
        else:
            assert isinstance(node, PointwiseNode), f"{name}: a kernel stores only the nodes it computes"
            value = self.value(scope, node.body, self.group.var_map(node))
        shape, stride, dtype = self.meta[name]
        offset = indexing.linear_offset(self.group.canonical_index(node), stride)
        offset_text = _block_offset(offset)
        if value.constant is not None:
            block = "[XBLOCK]" if self.group.kind == "pointwise" else "[XBLOCK, 1]"
            text = f"tl.full({block}, {render_literal(value.constant, dtype)}, {triton_dtype(dtype)})"
        elif value.dtype != dtype:
            text = f"{value.text}.to({triton_dtype(dtype)})"
        else:
            text = value.text
        space = self.group.space_of(node)
        mask = "xmask" if self.group.kind == "pointwise" or space == "row" else "xrmask"
        self.use_param(name)
        scope.lines.append(f"{scope.indent}tl.store({name} + ({offset_text}), {text}, {mask})")

    def index_lines(self, indent: str, linear: str, shape: tuple, prefix: str, extent: int) -> list:
        lines = []
        for position, expr in enumerate(indexing.unravel(indexing.Var(linear, extent), shape)):
            if not sizes.is_one(shape[position]):
                lines.append(f"{indent}{prefix}{position} = {indexing.render(expr)}")
        return lines

    # ---- kernels ---------------------------------------------------------------------------
    def render(self) -> TritonKernel:
        body = getattr(self, f"_body_{self.template}")()
        xnumel, rnumel = sizes.render_kernel_size(self.xnumel), sizes.render_kernel_size(self.rnumel)
        # the size symbols this kernel reads (generated names never clash with s<N>)
        used = [name for name in self.size_names if re.search(rf"\b{name}\b", f"{body} {xnumel} {rnumel}")]
        params = "".join(f"{p}, " for p in [*self.params, *used])
        widen = ".to(tl.int64)" if self.index_dtype == torch.int64 else ""
        source = templates.KERNEL_TEMPLATES[self.template].format(
            name=self.group.name, params=params, xnumel=xnumel, rnumel=rnumel, widen=widen, body=body,
            decorator=templates.jit_decorator(used), sizes=templates.size_prologue(used, widen))
        return TritonKernel(self.group.name, source, [*self.params, *used], self.xnumel, self.rnumel, used,
                            self.template)

    def _body_pointwise(self) -> str:
        scope = Scope("    ")
        scope.lines += self.index_lines("    ", "xindex", self.group.full_shape, "x", self.xnumel)
        for name in self.group.stores:
            self.store(scope, name)
        return "\n".join(scope.lines)

    def _body_persistent_reduction(self) -> str:
        scope = Scope("    ")
        scope.lines += self.index_lines("    ", "xindex", self.group.x_shape, "x", self.xnumel)
        scope.lines += self.index_lines("    ", "rindex", self.group.r_shape, "r", self.rnumel)
        for name in self.group.stores:
            self.store(scope, name)
        return "\n".join(scope.lines)

    def _body_looped_reduction(self) -> str:
        outer = Scope("    ")
        outer.lines += self.index_lines("    ", "xindex", self.group.x_shape, "x", self.xnumel)
        depth = reduction_depths(self.group, self.nodes)
        final_pass = max(depth.values(), default=0)
        row_stores = [n for n in self.group.stores if self.group.space_of(self.nodes[n]) == "row"]
        full_stores = [n for n in self.group.stores if n not in row_stores]
        for pass_number in range(final_pass + 1):
            reductions = [node for n in self.group.members
                          if isinstance(node := self.nodes[n], ReductionNode) and depth[n] == pass_number + 1]
            stores = [n for n in full_stores if depth[n] == pass_number]
            if not reductions and not stores:
                continue
            loop = Scope("        ", parent=outer)
            loop.lines += self.index_lines("        ", "rindex", self.group.r_shape, "r", self.rnumel)
            after = Scope("    ", parent=outer)
            for node in reductions:
                self.looped_reduction(outer, loop, after, node)
            for name in stores:
                self.store(loop, name)
            outer.lines.append(templates.ROW_LOOP.format(body="\n".join(loop.lines)))
            outer.lines += after.lines
            outer.cache.update(after.cache)
        for name in row_stores:
            self.store(outer, name)
        return "\n".join(outer.lines)


def _body_dtype(node: ReductionNode) -> torch.dtype:
    return node.body.dtype


def render_kernel(schedule: Schedule, group: KernelGroup, persistent_max: int) -> TritonKernel:
    """Source of the Triton kernel for ``group`` (see the module docstring)."""
    return _KernelRenderer(schedule, group, persistent_max).render()


class TritonRenderer:
    """The :class:`kernels.target.Renderer` for Triton: kernels are ``@triton.jit``
    functions in the generated module, each launched through a ``KernelLauncher``."""

    spelling = indexing.PYTHON

    def __init__(self, persistent_max: int = 1024, config_overrides: dict | None = None):
        self.persistent_max = persistent_max
        self.config_overrides = dict(config_overrides or {})

    def module_header(self) -> str:
        return templates.MODULE_HEADER + "\n" + COMBINE_HELPERS

    def render_kernel(self, schedule: Schedule, group: KernelGroup) -> TritonKernel:
        return render_kernel(schedule, group, self.persistent_max)

    def kernel_section(self, kernels: list) -> str:
        lines = [kernel.source for kernel in kernels]
        launchers = []
        for kernel in kernels:
            configs = templates.launch_configs(kernel.template, kernel.xnumel, kernel.rnumel,
                                               tuple(self.config_overrides.get(kernel.template, ())))
            static = [size if isinstance(size, int) else None for size in (kernel.xnumel, kernel.rnumel)]
            launchers.append(f"{kernel.name}_launcher = _triton_runtime.KernelLauncher({kernel.name}, "
                             f"{kernel.template!r}, {static[0]}, {static[1]}, {configs!r})")
        return "\n".join(lines) + "\n\n" + "\n".join(launchers) + "\n"

    def forward_prologue(self, inputs: list[str]) -> list[str]:
        return [f"device = {inputs[0]}.device" if inputs else "device = None"]

    def launch_line(self, kernel: RenderedKernel, size_arguments: str) -> str:
        return f"{kernel.name}_launcher({', '.join(kernel.params)}{size_arguments})"

    def allocation(self, name: str, shape: str, stride: str, dtype: torch.dtype) -> str:
        return f"{name} = torch.empty_strided({shape}, {stride}, dtype={dtype}, device=device)"


def _block_offset(offset) -> str:
    """An element offset as a block: a constant one (a 0-d value, one element of a
    piece of a cat) plus ``0 * xindex``, keeping its value."""
    text = indexing.render(offset)
    return text if indexing.free_vars(offset) else f"{text} + 0 * xindex"

"""capture/shape_rules.py: each rule's result against torch's own (meta or decomposition
under the Python dispatcher, as a symbolic trace runs it), in two fresh ShapeEnvs with
the same inputs: sizes, strides, storage offset, dtype, device, aliasing, version, and
the guards and replacements each left in its ShapeEnv; inputs with symbolic and static
sizes. Then whole captures with the rules on and off: same graph, same guards."""
from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable

import pytest
import torch
from models.zoo import LSTMClassifier  # tests/models' lstm
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext
from torch.utils._python_dispatch import TorchDispatchMode

from fastdynamo import config
from fastdynamo.capture import shape_rules
from fastdynamo.capture.dynamic import _NamedSource
from fastdynamo.capture.shape_env import TraceShapeEnv
from fastdynamo.guards.sources import LocalSource

from .helpers import assert_same, compiled

aten = torch.ops.aten


class Spec:
    """An input: a real tensor and which of its dims are symbolic, any other value, or a
    function of the FakeTensors made before it (a shape of symbolic sizes)."""

    def __init__(self, value: Any, dims: tuple[int, ...] = (), derive: Callable | None = None):
        self.value, self.dims, self.derive = value, dims, derive  # derive: a view of the FakeTensor


def _fake_args(mode: FakeTensorMode, specs: list[Spec]) -> list[Any]:
    args = []
    for i, spec in enumerate(specs):
        if callable(spec.value):
            args.append(spec.value(args))
            continue
        if not isinstance(spec.value, torch.Tensor):
            args.append(spec.value)
            continue
        sizes = [DimDynamic.DYNAMIC if d in spec.dims else DimDynamic.STATIC for d in range(spec.value.dim())]
        context = StatelessSymbolicContext(dynamic_sizes=sizes)
        source = _NamedSource(LocalSource(i, f"arg{i}"))
        fake = mode.from_tensor(spec.value, source=source, symbolic_context=context)
        if spec.derive is not None:
            with mode, enable_python_dispatcher():
                fake = spec.derive(fake)
        args.append(fake)
    return args


class _RuleMode(TorchDispatchMode):
    """Runs the op given by its rule, from a dispatch mode above the fake mode, as
    ``_AtenEffects`` does in a capture (below autograd); ``declined`` when it returned None."""

    def __init__(self, fake_mode: FakeTensorMode, target: Any):
        super().__init__()
        self.fake_mode, self.target, self.declined = fake_mode, target, False

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        result = shape_rules.run_rule(func, args, kwargs or {}, self.fake_mode)
        if result is None:
            self.declined |= func == self.target
            return func(*args, **(kwargs or {}))
        return result


def _run(func: Any, specs: list[Spec], kwargs: dict, by_rule: bool,
         target: Any = None) -> tuple[Any, list, TraceShapeEnv]:
    env = TraceShapeEnv()
    mode = FakeTensorMode(shape_env=env)
    args = _fake_args(mode, specs)
    with mode, enable_python_dispatcher():
        if not by_rule:
            return func(*args, **kwargs), args, env
        rules = _RuleMode(mode, target or func)
        with rules:
            result = func(*args, **kwargs)
    return (None if rules.declined else result), args, env


def _metadata(value: Any, args: list) -> Any:
    if isinstance(value, (tuple, list)):
        return [_metadata(v, args) for v in value]
    storage = value.untyped_storage()._cdata
    return ([str(s) for s in value.shape], [str(s) for s in value.stride()], str(value.storage_offset()),
            value.dtype, value.device, value.requires_grad, value._version, value._is_view(),
            [i for i, a in enumerate(args) if a is value],
            [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.untyped_storage()._cdata == storage])


def _state(env: TraceShapeEnv) -> tuple:
    return ([str(g.expr) for g in env.guards], {str(k): str(v) for k, v in env.replacements.items()},
            sorted(str(k) for k in env.var_to_range),
            {str(k): [str(r.expr) for r in v] for k, v in env.deferred_runtime_asserts.items()})


def assert_rule_matches_torch(func: Any, specs: list[Spec], target: Any = None, **kwargs: Any) -> None:
    """``target``: the op whose rule is tested, when ``func`` is a function that calls it."""
    expected, expected_args, expected_env = _run(func, specs, kwargs, by_rule=False)
    actual, actual_args, actual_env = _run(func, specs, kwargs, by_rule=True, target=target)
    assert actual is not None, "the rule did not apply"
    assert _metadata(actual, actual_args) == _metadata(expected, expected_args)
    assert [a._version for a in actual_args if isinstance(a, torch.Tensor)] == \
        [a._version for a in expected_args if isinstance(a, torch.Tensor)]
    assert _state(actual_env) == _state(expected_env)


def assert_rule_declines(func: Any, specs: list[Spec], target: Any = None, **kwargs: Any) -> None:
    """The rule leaves the op to torch (which may well raise: an invalid view); ``target``:
    the op whose rule is tested, when ``func`` is a function that calls it."""
    mode = FakeTensorMode(shape_env=TraceShapeEnv())
    args = _fake_args(mode, specs)
    rules = _RuleMode(mode, target or func)
    with mode, enable_python_dispatcher(), rules, contextlib.suppress(RuntimeError, ValueError, IndexError):
        func(*args, **kwargs)
    assert rules.declined


# (shape, symbolic dims): symbolic batch, size-1 trailing dims (a squeeze-excite block's
# scale), two symbolic dims, and no symbolic dim at all (a parameter in a symbolic trace).
SHAPES = [((4, 16, 8, 8), (0,)), ((4, 16, 1, 1), (0,)), ((3, 5), (0, 1)), ((4, 16, 8, 8), ()),
          ((2, 7, 32), (1,))]
UNARY = ["relu", "hardswish", "hardsigmoid", "silu", "sigmoid", "tanh", "gelu", "neg", "rsqrt", "cos", "sin"]


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("shape,dims", SHAPES)
def test_unary_matches_torch(name: str, shape: tuple, dims: tuple) -> None:
    assert_rule_matches_torch(getattr(aten, name).default, [Spec(torch.randn(shape), dims)])


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("shape,dims", SHAPES)
def test_unary_inplace_matches_torch(name: str, shape: tuple, dims: tuple) -> None:
    assert_rule_matches_torch(getattr(aten, name + "_").default, [Spec(torch.randn(shape), dims)])


def test_gelu_tanh_matches_torch() -> None:
    assert_rule_matches_torch(aten.gelu.default, [Spec(torch.randn(4, 8), (0,))], approximate="tanh")


@pytest.mark.parametrize("spec", [
    Spec(torch.randn(8, 4).t(), (0,)),                 # transposed: torch picks the strides
    Spec(torch.randn(4, 8)[:, :4], (0,)),              # a slice: not contiguous
    Spec(torch.randn(4, 8, dtype=torch.float16), (0,)),  # computes in float32
    Spec(torch.randint(0, 5, (4, 8)), (0,)),           # integers: another result dtype
    Spec(torch.randn(4, 8).expand(3, 4, 8), (1,)),     # overlapping
])
def test_unary_declines_what_it_cannot_prove(spec: Spec) -> None:
    assert_rule_declines(aten.relu.default, [spec])
    assert_rule_declines(aten.relu_.default, [spec])


def _bn_specs(shape: tuple, dims: tuple, weights: bool) -> list[Spec]:
    channels = shape[1]
    weight = Spec(torch.randn(channels)) if weights else Spec(None)
    return [Spec(torch.randn(shape), dims), weight, weight, Spec(torch.randn(channels)),
            Spec(torch.rand(channels) + 0.5), Spec(0.1), Spec(1e-5)]


@pytest.mark.parametrize("shape,dims", [((4, 16, 8, 8), (0,)), ((4, 16, 8, 8), (0, 2, 3)), ((4, 16, 8, 8), ()),
                                        ((5, 6), (0,))])
@pytest.mark.parametrize("weights", [True, False])
def test_batch_norm_no_training_matches_torch(shape: tuple, dims: tuple, weights: bool) -> None:
    assert_rule_matches_torch(aten._native_batch_norm_legit_no_training.default, _bn_specs(shape, dims, weights))


def test_batch_norm_declines_symbolic_channels() -> None:
    """Channels of the input symbolic, statistics static: equal only by a guard."""
    assert_rule_declines(aten._native_batch_norm_legit_no_training.default, _bn_specs((4, 16, 8, 8), (1,), True))


@pytest.mark.parametrize("shape,dims", [((2, 7, 32), (1,)), ((2, 7, 32), (0, 1)), ((2, 7, 32), ()), ((9, 32), (0,))])
@pytest.mark.parametrize("weights", [True, False])
def test_layer_norm_matches_torch(shape: tuple, dims: tuple, weights: bool) -> None:
    weight = Spec(torch.randn(32)) if weights else Spec(None)
    assert_rule_matches_torch(aten.native_layer_norm.default,
                              [Spec(torch.randn(shape), dims), Spec([32]), weight, weight, Spec(1e-5)])


def test_layer_norm_over_two_dims_matches_torch() -> None:
    assert_rule_matches_torch(aten.native_layer_norm.default,
                              [Spec(torch.randn(3, 4, 8), (0,)), Spec([4, 8]), Spec(torch.randn(4, 8)),
                               Spec(torch.randn(4, 8)), Spec(1e-5)])


def test_layer_norm_declines_a_symbolic_normalised_dim() -> None:
    assert_rule_declines(aten.native_layer_norm.default,
                         [Spec(torch.randn(2, 7, 32), (2,)), Spec([32]), Spec(None), Spec(None), Spec(1e-5)])


@pytest.mark.parametrize("dims", [(0,), ()])
def test_addmm_matches_torch(dims: tuple) -> None:
    assert_rule_matches_torch(aten.addmm.default, [Spec(torch.randn(32)), Spec(torch.randn(6, 16), dims),
                                                   Spec(torch.randn(16, 32))])


def test_addmm_with_beta_alpha_matches_torch() -> None:
    assert_rule_matches_torch(aten.addmm.default, [Spec(torch.randn(32)), Spec(torch.randn(6, 16), (0,)),
                                                   Spec(torch.randn(16, 32))], beta=2, alpha=0.5)


def test_addmm_declines_a_symbolic_inner_dim() -> None:
    """``a``'s columns symbolic, ``b``'s rows static: equal only by a guard torch adds."""
    assert_rule_declines(aten.addmm.default, [Spec(torch.randn(32)), Spec(torch.randn(6, 16), (1,)),
                                              Spec(torch.randn(16, 32))])


def _sizes(*items: Any) -> Spec:
    """A shape argument: ints, and ``(i, d)`` for the size ``d`` of FakeTensor argument ``i``."""
    return Spec(lambda args: [args[i].shape[d] if isinstance(item, tuple) else item
                              for item in items for i, d in [item if isinstance(item, tuple) else (0, 0)]])


@pytest.mark.parametrize("shape,dims,new", [
    ((2, 7, 32), (1,), _sizes((0, 0), (0, 1), 2, 16)),   # split the last dim (heads)
    ((2, 7, 32), (1,), _sizes((0, 0), (0, 1), -1, 16)),  # ... with -1
    ((2, 7, 2, 16), (1,), _sizes((0, 0), (0, 1), -1)),   # merge heads back
    ((2, 7, 32), (1,), _sizes(-1, 32)),                  # linear's 3-d to 2-d
    ((2, 7, 32), (0, 1), _sizes(-1, 32)),
    ((2, 7, 32), (1,), _sizes(-1)),                      # flatten
    ((2, 7, 32), (), _sizes(14, 32)),                    # no symbol at all
    ((4, 16, 1, 1), (0,), _sizes((0, 0), -1)),           # flatten(1) after pooling
])
@pytest.mark.parametrize("name", ["view", "_unsafe_view"])
def test_view_matches_torch(name: str, shape: tuple, dims: tuple, new: Spec) -> None:
    assert_rule_matches_torch(getattr(aten, name).default, [Spec(torch.randn(shape), dims), new])


@pytest.mark.parametrize("shape,dims,new", [
    ((14, 32), (0,), _sizes(2, -1, 32)),        # s0 // 2: torch guards on divisibility
    ((8, 4), (0,), _sizes(4, -1)),              # not a split or merge: torch says 4*(s0//4)
    ((2, 7, 32), (1,), _sizes((0, 0), (0, 1), 1, 32)),  # a new size-1 dim
    ((2, 7, 32), (1,), _sizes((0, 0), -1, -1)),  # two -1s: torch's error
])
def test_view_declines_what_it_cannot_prove(shape: tuple, dims: tuple, new: Spec) -> None:
    assert_rule_declines(aten.view.default, [Spec(torch.randn(shape), dims), new])


def test_view_declines_merging_non_contiguous_dims() -> None:
    assert_rule_declines(aten.view.default, [Spec(torch.randn(4, 8).t(), (0,)), _sizes(-1)])
    assert_rule_declines(aten.view.default, [Spec(torch.randn(2, 6, 96), (1,), lambda t: t[:, :, 32:64]),
                                             _sizes(-1)])


def test_view_of_a_slice_matches_torch() -> None:
    """A third of a fused qkv projection (split in the graph: a static storage offset)."""
    assert_rule_matches_torch(aten.view.default, [Spec(torch.randn(2, 7, 96), (1,), lambda t: t[:, :, 32:64]),
                                                  _sizes((0, 0), (0, 1), -1, 16)])
    assert_rule_matches_torch(aten.view.default, [Spec(torch.randn(2, 7, 96), (1,), lambda t: t[:, :, 32:64]),
                                                  _sizes(-1, 32)])


@pytest.mark.parametrize("x,dims,new", [
    (torch.randn(2, 7, 2, 16).transpose(1, 2), (2,), _sizes(2, 2, (0, 2), 16)),  # same sizes, transposed
    (torch.randn(2, 7, 2, 16).transpose(1, 2), (2,), _sizes(2, 2, (0, 2), 4, 4)),
    (torch.randn(8, 6).t(), (1,), _sizes(2, 3, (0, 1))),
])
def test_view_of_a_strided_input_matches_torch(x: torch.Tensor, dims: tuple, new: Spec) -> None:
    assert_rule_matches_torch(aten.view.default, [Spec(x, dims), new])


@pytest.mark.parametrize("shape,dims,strided", [((2, 7, 4, 8), (1,), False), ((2, 7, 4, 8), (0, 1), True),
                                                ((3, 5), (0,), False), ((3, 5), (), True)])
@pytest.mark.parametrize("pair", [(1, -1), (-1, -2), (0, 1), (0, 0)])
def test_transpose_matches_torch(shape: tuple, dims: tuple, strided: bool, pair: tuple) -> None:
    x = torch.randn(shape)
    x = x.transpose(0, 1).contiguous().transpose(0, 1) if strided else x
    assert_rule_matches_torch(aten.transpose.int, [Spec(x, dims), Spec(pair[0]), Spec(pair[1])])


@pytest.mark.parametrize("shape,dims", [((7, 32), (0,)), ((7, 32), (0, 1)), ((32,), (0,)), ((5, 3), ())])
def test_t_matches_torch(shape: tuple, dims: tuple) -> None:
    assert_rule_matches_torch(aten.t.default, [Spec(torch.randn(shape), dims)])


@pytest.mark.parametrize("dim", [0, 1, 2, 3, -1, -4])
@pytest.mark.parametrize("shape,dims", [((2, 7, 32), (1,)), ((5, 7, 3), (0, 1)), ((2, 7, 32), ())])
def test_unsqueeze_matches_torch(dim: int, shape: tuple, dims: tuple) -> None:
    assert_rule_matches_torch(aten.unsqueeze.default, [Spec(torch.randn(shape), dims), Spec(dim)])


def test_unsqueeze_of_a_transposed_input_matches_torch() -> None:
    assert_rule_matches_torch(aten.unsqueeze.default, [Spec(torch.randn(6, 5).t(), (0, 1)), Spec(1)])


BINARY_CASES = [
    # (a second operand computed from the first shares its symbols, as in a capture)
    ([Spec(torch.randn(2, 7, 32), (1,)), Spec(lambda args: args[0].exp())], {}),
    ([Spec(torch.randn(2, 7, 32), (1,)), Spec(torch.randn(32))], {}),            # a weight
    ([Spec(torch.randn(32)), Spec(torch.randn(2, 7, 32), (1,))], {}),            # ... first
    ([Spec(torch.randn(2, 7, 32), (1,)), Spec(lambda args: args[0].sum(-1, keepdim=True))], {}),  # rms norm
    ([Spec(torch.randn(4, 16, 8, 8), (0,)), Spec(lambda args: args[0].sum((2, 3), keepdim=True))], {}),
    ([Spec(torch.randn(2, 7, 32), (1,)), Spec(0.5)], {}),
    ([Spec(3), Spec(torch.randn(2, 7, 32), (1,))], {}),
    ([Spec(torch.randn(2, 7, 32), ()), Spec(torch.randn(32))], {}),
]


@pytest.mark.parametrize("name,specs,kwargs", [
    (name, specs, kwargs) for name in ("add", "sub", "mul", "div") for specs, kwargs in BINARY_CASES
    if isinstance(specs[0].value, torch.Tensor) or name in ("add", "mul")])  # a number first: add and mul
def test_binary_matches_torch(name: str, specs: list, kwargs: dict) -> None:
    assert_rule_matches_torch(getattr(aten, name).Tensor, specs, **kwargs)


def test_add_with_alpha_matches_torch() -> None:
    assert_rule_matches_torch(aten.add.Tensor, [Spec(torch.randn(2, 7, 32), (1,)), Spec(torch.randn(32))], alpha=2)


@pytest.mark.parametrize("specs", [
    [Spec(torch.randn(2, 7, 32), (1,)), Spec(torch.randn(2, 7, 32), (1,), lambda t: t.transpose(0, 1).contiguous()
                                                                            .transpose(0, 1))],
    [Spec(torch.randn(2, 7, 32), (1,)), Spec(torch.randn(7, 32), (0,))],  # s0 against s1: a guard
    [Spec(torch.randn(2, 7, 32), (1,)), Spec(torch.randn(32, dtype=torch.float64))],  # promotion
    [Spec(torch.randn(2, 7, 32), (1,)), Spec(torch.tensor(2.0))],  # a 0-d tensor
    [Spec(torch.randn(2, 7, 32), (1,)), Spec(True)],
])
def test_binary_declines_what_it_cannot_prove(specs: list) -> None:
    assert_rule_declines(aten.mul.Tensor, specs)


@pytest.mark.parametrize("exponent", [2, 3, -1, 0.5, 2.0])
@pytest.mark.parametrize("shape,dims", SHAPES)
def test_pow_scalar_matches_torch(exponent: float, shape: tuple, dims: tuple) -> None:
    assert_rule_matches_torch(aten.pow.Tensor_Scalar, [Spec(torch.randn(shape), dims), Spec(exponent)])


@pytest.mark.parametrize("specs", [
    [Spec(torch.randn(4, 8), (0,)), Spec(2j)],    # a complex result
    [Spec(torch.randn(4, 8), (0,)), Spec(True)],
    [Spec(torch.randn(8, 4).t(), (0,)), Spec(2)],  # transposed
    [Spec(torch.randint(0, 5, (4, 8)), (0,)), Spec(2)],
])
def test_pow_scalar_declines_what_it_cannot_prove(specs: list) -> None:
    assert_rule_declines(aten.pow.Tensor_Scalar, specs)


@pytest.mark.parametrize("shape,dims,reduced", [
    ((2, 7, 32), (1,), [-1]),        # rms norm's variance
    ((2, 7, 32), (1,), [1]),         # over the symbolic dim
    ((2, 7, 32), (0, 1), [0, 2]),
    ((4, 16, 8, 8), (0,), [2, 3]),   # global pooling
    ((4, 16, 8, 8), (0, 2, 3), [-1, -2]),
    ((2, 7, 32), (), [2]),
])
@pytest.mark.parametrize("keepdim", [True, False])
def test_mean_dim_matches_torch(shape: tuple, dims: tuple, reduced: list, keepdim: bool) -> None:
    assert_rule_matches_torch(aten.mean.dim, [Spec(torch.randn(shape), dims), Spec(reduced), Spec(keepdim)])


def test_mean_dim_with_keepdim_by_name_matches_torch() -> None:
    assert_rule_matches_torch(aten.mean.dim, [Spec(torch.randn(2, 7, 32), (1,)), Spec([-1])], keepdim=True)
    assert_rule_matches_torch(aten.mean.dim, [Spec(torch.randn(2, 7, 32), (1,)), Spec([-1])])


@pytest.mark.parametrize("specs,kwargs", [
    ([Spec(torch.randn(8, 4).t(), (0,)), Spec([-1]), Spec(True)], {}),  # transposed
    ([Spec(torch.randn(4, 8), (0,)), Spec([-1]), Spec(True)], {"dtype": torch.float64}),
    ([Spec(torch.randn(4, 8), (0,)), Spec([1, -1]), Spec(True)], {}),    # a dim twice: torch's error
    ([Spec(torch.randn(4, 8), (0,)), Spec([]), Spec(True)], {}),         # every dim
    ([Spec(torch.randn(4, 8, dtype=torch.float16), (0,)), Spec([-1]), Spec(True)], {}),
])
def test_mean_dim_declines_what_it_cannot_prove(specs: list, kwargs: dict) -> None:
    assert_rule_declines(aten.mean.dim, specs, **kwargs)


@pytest.mark.parametrize("a,dims,b", [
    (torch.randn(6, 16), (0,), torch.randn(32, 16).t()),  # linear's weight, transposed
    (torch.randn(6, 16), (0,), torch.randn(16, 32)),
    (torch.randn(6, 16), (), torch.randn(16, 32)),
    (torch.randn(16, 6).t(), (0,), torch.randn(16, 32)),
])
def test_mm_matches_torch(a: torch.Tensor, dims: tuple, b: torch.Tensor) -> None:
    assert_rule_matches_torch(aten.mm.default, [Spec(a, dims), Spec(b)])


def test_mm_declines_a_symbolic_inner_dim() -> None:
    assert_rule_declines(aten.mm.default, [Spec(torch.randn(6, 16), (1,)), Spec(torch.randn(16, 32))])


def _tensors(x: torch.Tensor, dims: tuple, make: Callable) -> Spec:
    """A list of FakeTensors made from one input (so that they share its symbols)."""
    return Spec(x, dims, make)


CAT_CASES = [
    (_tensors(torch.randn(1, 7, 8), (1,), lambda t: [t, t.exp()]), -1),    # rotary's (freqs, freqs)
    (_tensors(torch.randn(1, 7, 8), (1,), lambda t: [t, t.exp()]), 1),     # along the symbolic dim
    (_tensors(torch.randn(2, 7, 8), (0, 1), lambda t: [t, t.exp(), t.cos()]), 0),
    (_tensors(torch.randn(2, 7, 2, 16), (1,), lambda t: [torch.empty(0), t.transpose(1, 2)]), -2),  # key cache
    (_tensors(torch.randn(2, 7, 2, 16), (1,), lambda t: [t.transpose(1, 2), torch.empty(0)]), -2),
    (_tensors(torch.randn(2, 7, 2, 16), (1,),                                # rotate_half
              lambda t: [t.transpose(1, 2)[..., 8:].neg(), t.transpose(1, 2)[..., :8]]), -1),
    (_tensors(torch.randn(2, 3, 4, 4), (0,), lambda t: [t, t.exp()]), 1),   # channels of images
    (_tensors(torch.randn(2, 3, 4, 4), (0, 2, 3), lambda t: [t.permute(0, 2, 3, 1), t.permute(0, 2, 3, 1)]), 1),
    (_tensors(torch.randn(7), (0,), lambda t: [t, torch.ones(5)]), 0),
    (_tensors(torch.randn(2, 7, 8), (1,), lambda t: [t[:, :1], t]), 1),     # a slice of the symbolic dim
    (_tensors(torch.randn(4, 5), (), lambda t: [t, torch.ones(3, 5)]), 0),
]


@pytest.mark.parametrize("tensors,dim", CAT_CASES)
def test_cat_matches_torch(tensors: Spec, dim: int) -> None:
    assert_rule_matches_torch(aten.cat.default, [tensors, Spec(dim)])


@pytest.mark.parametrize("tensors,dim", [
    (_tensors(torch.randn(2, 7, 8), (1,), lambda t: [t, t.double()]), 0),      # type promotion
    (_tensors(torch.randn(2, 7, 8), (1,), lambda t: [t, torch.ones(5)]), 0),   # torch's error
    (_tensors(torch.randn(2, 3, 4, 4), (0,), lambda t: [t.contiguous(memory_format=torch.channels_last)] * 2), 1),
    (_tensors(torch.randn(2, 0, 8), (0,), lambda t: [t, t]), 0),               # empty
])
def test_cat_declines_what_it_cannot_prove(tensors: Spec, dim: int) -> None:
    assert_rule_declines(aten.cat.default, [tensors, Spec(dim)])


def test_cat_declines_symbols_that_must_be_equal() -> None:
    """s0 against s1 in a dim that is not concatenated: equal only by a guard."""
    assert_rule_declines(lambda a, b, dim: aten.cat.default([a, b], dim),
                         [Spec(torch.randn(2, 7, 8), (1,)), Spec(torch.randn(2, 5, 8), (1,)), Spec(-1)],
                         target=aten.cat.default)


@pytest.mark.parametrize("x,dims,bounds", [
    (torch.randn(2, 7, 2, 16).transpose(1, 2), (2,), (3, 0, 8)),      # rotate_half's halves
    (torch.randn(2, 7, 2, 16).transpose(1, 2), (2,), (3, 8, sys.maxsize)),
    (torch.randn(2, 7, 2, 16).transpose(1, 2), (2,), (-1, -12, 100)),
    (torch.randn(2, 7, 32), (1,), (1, 0, sys.maxsize)),                 # the whole of a symbolic dim
    (torch.randn(2, 7, 32), (1,), (1, None, None)),
    (torch.randn(2, 7, 32), (1,), (1,)),
    (torch.randn(2, 7, 32), (1,), (0, 1)),                              # a symbolic offset
    (torch.randn(2, 7, 32), (1,), (0, 0, 1)),                           # 0 * a symbolic stride
    (torch.randn(2, 7, 32), (1,), (2, 1, 30, 3)),                       # a step
    (torch.randn(2, 7, 96), (1,), (2, 32, 64)),
    (torch.randn(7, 96)[:, 32:], (0,), (1, 16, 48)),                   # a slice of a slice
])
def test_slice_matches_torch(x: torch.Tensor, dims: tuple, bounds: tuple) -> None:
    assert_rule_matches_torch(aten.slice.Tensor, [Spec(x, dims), *[Spec(b) for b in bounds]])


@pytest.mark.parametrize("dims,bounds", [
    ((1,), (1, 0, 4)),       # part of a symbolic dim: torch compares with its size
    ((1,), (1, 1, sys.maxsize)),
    ((), (2, 5, 3)),         # empty
    ((), (2, 0, 8, 0)),      # step 0: torch's error
])
def test_slice_declines_what_it_cannot_prove(dims: tuple, bounds: tuple) -> None:
    assert_rule_declines(aten.slice.Tensor, [Spec(torch.randn(2, 7, 32), dims), *[Spec(b) for b in bounds]])


@pytest.mark.parametrize("x,dims,dim,index", [
    (torch.randn(8, 7, 32).transpose(0, 1), (0,), 1, -1),   # an RNN's last step (batch first)
    (torch.randn(8, 7, 32).transpose(0, 1), (0,), 1, 0),
    (torch.randn(8, 7, 32).transpose(0, 1), (0,), 1, 3),
    (torch.randn(2, 7, 32), (1,), 0, 1),                    # a symbolic stride
    (torch.randn(2, 7, 32), (1,), -1, 5),
    (torch.randn(2, 7, 32), (), 2, -32),
])
def test_select_matches_torch(x: torch.Tensor, dims: tuple, dim: int, index: int) -> None:
    assert_rule_matches_torch(aten.select.int, [Spec(x, dims), Spec(dim), Spec(index)])


@pytest.mark.parametrize("dims,dim,index", [((1,), 1, 2), ((), 0, 2), ((), 0, -3)])
def test_select_declines_what_it_cannot_prove(dims: tuple, dim: int, index: int) -> None:
    """A symbolic dim (torch compares the index with it), an index out of range."""
    assert_rule_declines(aten.select.int, [Spec(torch.randn(2, 7, 32), dims), Spec(dim), Spec(index)])


@pytest.mark.parametrize("x,dims,dim", [
    (torch.randn(1, 7, 32), (1,), 0),   # an LSTM's hidden state
    (torch.randn(7, 1, 32), (0,), -2),
    (torch.randn(7, 32, 1), (0, 1), 2),
    (torch.randn(1, 7, 32).transpose(1, 2), (2,), 0),
])
def test_squeeze_dim_matches_torch(x: torch.Tensor, dims: tuple, dim: int) -> None:
    assert_rule_matches_torch(aten.squeeze.dim, [Spec(x, dims), Spec(dim)])


@pytest.mark.parametrize("dims,dim", [((1,), 1), ((), 2)])
def test_squeeze_dim_declines_a_dim_not_of_size_one(dims: tuple, dim: int) -> None:
    assert_rule_declines(aten.squeeze.dim, [Spec(torch.randn(1, 7, 32), dims), Spec(dim)])


@pytest.mark.parametrize("x,dims,dim", [
    (torch.randn(1, 7, 32), (1,), 0),   # an LSTM's initial state, one layer
    (torch.randn(3, 7, 32), (1,), 0),
    (torch.randn(3, 7, 4), (1,), -1),
    (torch.randn(7, 3, 4).transpose(0, 1), (1,), 0),
    (torch.randn(3, 4), (), 1),
])
def test_unbind_matches_torch(x: torch.Tensor, dims: tuple, dim: int) -> None:
    assert_rule_matches_torch(aten.unbind.int, [Spec(x, dims), Spec(dim)])


def test_unbind_declines_a_symbolic_dim() -> None:
    assert_rule_declines(aten.unbind.int, [Spec(torch.randn(3, 7, 4), (1,)), Spec(1)])


@pytest.mark.parametrize("tensors,dim", [
    (_tensors(torch.randn(7, 32), (0,), lambda t: [t]), 0),              # an LSTM's final states
    (_tensors(torch.randn(7, 32), (0,), lambda t: [t, t.exp()]), 0),
    (_tensors(torch.randn(7, 32), (0,), lambda t: [t, t.exp()]), 1),
    (_tensors(torch.randn(7, 32), (0,), lambda t: [t, t.exp(), t]), -1),  # a new last dim
    (_tensors(torch.randn(7), (0,), lambda t: [t, t]), 0),
    (_tensors(torch.randn(3, 4), (), lambda t: [t, t]), 1),
])
def test_stack_matches_torch(tensors: Spec, dim: int) -> None:
    assert_rule_matches_torch(aten.stack.default, [tensors, Spec(dim)])


@pytest.mark.parametrize("tensors,dim", [
    (_tensors(torch.randn(2, 7, 4), (1,), lambda t: [t, t]), 0),               # 4-d: a memory format
    (_tensors(torch.randn(2, 7), (1,), lambda t: [t, t.double()]), 0),
    (_tensors(torch.randn(2, 7), (1,), lambda t: [t, t.t()]), 0),               # torch's error
])
def test_stack_declines_what_it_cannot_prove(tensors: Spec, dim: int) -> None:
    assert_rule_declines(aten.stack.default, [tensors, Spec(dim)])


def test_stack_declines_symbols_that_must_be_equal() -> None:
    assert_rule_declines(lambda a, b: aten.stack.default([a, b]),
                         [Spec(torch.randn(2, 7), (1,)), Spec(torch.randn(2, 5), (1,))], target=aten.stack.default)


CPU = {"device": torch.device("cpu"), "pin_memory": False}


@pytest.mark.parametrize("sizes", [_sizes(1, (0, 0), 32), _sizes((0, 0), (0, 1)), _sizes(3, 4), _sizes((0, 1))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_zeros_matches_torch(sizes: Spec, dtype: torch.dtype) -> None:
    assert_rule_matches_torch(lambda x, shape, **kwargs: aten.zeros.default(shape, **kwargs),
                              [Spec(torch.randn(7, 5), (0, 1)), sizes], target=aten.zeros.default, dtype=dtype, **CPU)


@pytest.mark.parametrize("kwargs", [{"dtype": torch.int64, **CPU}, {"dtype": torch.float32}, {**CPU},
                                    {"dtype": torch.float32, "device": torch.device("cpu"), "pin_memory": True},
                                    {"dtype": torch.float32, "layout": torch.sparse_coo, **CPU}])
def test_zeros_declines_what_it_cannot_prove(kwargs: dict) -> None:
    assert_rule_declines(lambda x, shape, **kw: aten.zeros.default(shape, **kw),
                         [Spec(torch.randn(7, 5), (0,)), _sizes((0, 0), 3)], target=aten.zeros.default, **kwargs)


def test_zeros_declines_a_size_that_may_be_zero() -> None:
    assert_rule_declines(lambda x, shape, **kw: aten.zeros.default(shape, **kw),
                         [Spec(torch.randn(7, 5), (0,)), _sizes((0, 0), 0)], target=aten.zeros.default,
                         dtype=torch.float32, **CPU)


@pytest.mark.parametrize("x,dims,kwargs", [
    (torch.randn(8, 7, 16).transpose(0, 1), (0,), {"memory_format": torch.contiguous_format}),  # lstm's input
    (torch.randn(2, 7, 16), (1,), {"memory_format": torch.contiguous_format}),
    (torch.randn(2, 7, 16), (1,), {}),
    (torch.randn(2, 7, 16), (1,), {"memory_format": torch.preserve_format}),
    (torch.randint(0, 5, (2, 7)), (1,), {}),
])
def test_clone_matches_torch(x: torch.Tensor, dims: tuple, kwargs: dict) -> None:
    assert_rule_matches_torch(aten.clone.default, [Spec(x, dims)], **kwargs)


@pytest.mark.parametrize("kwargs", [{}, {"memory_format": torch.channels_last}])
def test_clone_declines_what_it_cannot_prove(kwargs: dict) -> None:
    """A transposed input keeps its layout (torch's choice of strides), channels last."""
    assert_rule_declines(aten.clone.default, [Spec(torch.randn(4, 3, 5, 5).transpose(0, 1), (1,))], **kwargs)


def _lstm_layer_args(batch_first: bool, dtype: torch.dtype = torch.float32) -> list[Spec]:
    shape = (3, 8, 16) if batch_first else (8, 3, 16)
    symbolic = (0,) if batch_first else (1,)
    state = Spec(lambda args: args[0].new_zeros(1, args[0].shape[symbolic[0]], 32, dtype=dtype))
    return [Spec(torch.randn(shape), symbolic), Spec(torch.randn(128, 16)), Spec(torch.randn(128, 32)),
            Spec(torch.randn(128)), Spec(torch.randn(128)), state, state, Spec(False), Spec([]), Spec(2),
            Spec(32), Spec(1), Spec(True), Spec(False), Spec(batch_first), Spec(False)]


@pytest.mark.parametrize("batch_first", [True, False])
def test_mkldnn_rnn_layer_matches_torch(batch_first: bool) -> None:
    assert_rule_matches_torch(aten.mkldnn_rnn_layer.default, _lstm_layer_args(batch_first))


def test_mkldnn_rnn_layer_declines_states_of_another_dtype() -> None:
    assert_rule_declines(aten.mkldnn_rnn_layer.default, _lstm_layer_args(True, dtype=torch.float64))


def test_rules_do_not_apply_outside_fake_mode() -> None:
    assert shape_rules.run_rule(aten.relu.default, (torch.ones(3),), {}, FakeTensorMode()) is None


# -- whole captures: rules on and off ------------------------------------------------
class ConvBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.act = torch.nn.Hardswish(inplace=True)
        self.gate = torch.nn.Hardsigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.act(self.bn(self.conv(x)))
        return y * self.gate(y.mean((2, 3), keepdim=True))


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(self.norm(x).reshape(-1, 16))
        return self.down(torch.nn.functional.gelu(h).relu().tanh()).reshape(x.shape)


class RmsRotary(torch.nn.Module):
    """An RMS norm, a projection without bias and a rotary embedding (llama's shapes)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(16) + 0.5)
        self.proj = torch.nn.Linear(16, 16, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(-1, keepdim=True)
        q = self.proj(self.weight * (x * torch.rsqrt(variance + 1e-6)))
        rotated = torch.cat((-q[..., 8:], q[..., :8]), dim=-1)
        angles = torch.arange(x.shape[1]).float()[:, None] * torch.linspace(0.1, 1.0, 16)
        return q * torch.cat((angles.cos(), angles.cos())[:1], dim=0) + rotated * angles.sin()


def _capture(module: torch.nn.Module, inputs: list[torch.Tensor], rules: bool, monkeypatch) -> tuple:
    monkeypatch.setattr(config, "symbolic_shape_rules", rules)
    fn, recorder = compiled(module.eval(), dynamic=True)
    with torch.no_grad():
        for x in inputs:
            assert_same(fn(x), module(x))
    assert len(recorder.captures) == 1, "one symbolic graph serves every size"
    result = recorder.captures[0].result
    return result.graph_module.code, [(g.source, repr(g.check)) for g in result.guards]


@pytest.mark.parametrize("module,shapes", [(ConvBlock, [(2, 3, 8, 8), (5, 3, 6, 7)]),
                                           (Mlp, [(2, 5, 16), (3, 9, 16)]),
                                           (RmsRotary, [(2, 5, 16), (3, 9, 16)]),
                                           (LSTMClassifier, [(2, 8, 16), (5, 8, 16)])])
def test_captures_are_the_same_with_and_without_rules(module: Callable, shapes: list, monkeypatch) -> None:
    torch.manual_seed(0)
    model = module()
    inputs = [torch.randn(s) for s in shapes]
    used: list[Any] = []
    for func, rule in list(shape_rules.RULES.items()):
        monkeypatch.setitem(shape_rules.RULES, func, _counting(rule, func, used))
    with_rules = _capture(model, inputs, True, monkeypatch)
    assert used, "no rule applied in the capture"
    import fastdynamo
    fastdynamo.reset()
    used.clear()
    without_rules = _capture(model, inputs, False, monkeypatch)
    assert not used
    assert with_rules == without_rules


class _CacheKeptOn:
    """``FakeTensorMode.cache_enabled`` that stays True whatever a trace sets."""

    def __get__(self, mode: Any, owner: Any = None) -> bool:
        return True

    def __set__(self, mode: Any, value: bool) -> None:
        pass


def _cache_uses() -> int:
    return FakeTensorMode.cache_hits + FakeTensorMode.cache_misses + sum(FakeTensorMode.cache_bypasses.values())


def test_symbolic_traces_run_without_the_fake_tensor_cache(monkeypatch) -> None:
    """The dispatch cache costs more than it saves with symbols (output_graph.py): off in a
    symbolic trace, and the capture is the one the cache would have given."""
    torch.manual_seed(0)
    model = RmsRotary()
    inputs = [torch.randn(2, 5, 16), torch.randn(3, 9, 16)]
    before = _cache_uses()
    without_cache = _capture(model, inputs, True, monkeypatch)
    assert _cache_uses() == before
    import fastdynamo
    fastdynamo.reset()
    monkeypatch.setattr(FakeTensorMode, "cache_enabled", _CacheKeptOn(), raising=False)
    with_cache = _capture(model, inputs, True, monkeypatch)
    assert _cache_uses() > before
    assert with_cache == without_cache


def _counting(rule: Callable, func: Any, used: list) -> Callable:
    def counted(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
        result = rule(mode, args, kwargs)
        if result is not None:
            used.append(func)
        return result
    return counted

"""capture/shape_rules.py: each rule's result against torch's own (meta or decomposition
under the Python dispatcher, as a symbolic trace runs it), in two fresh ShapeEnvs with
the same inputs: sizes, strides, storage offset, dtype, device, aliasing, version, and
the guards and replacements each left in its ShapeEnv; inputs with symbolic and static
sizes. Then whole captures with the rules on and off: same graph, same guards."""
from __future__ import annotations

import contextlib
from typing import Any, Callable

import pytest
import torch
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


def _run(func: Any, specs: list[Spec], kwargs: dict, by_rule: bool) -> tuple[Any, list, TraceShapeEnv]:
    env = TraceShapeEnv()
    mode = FakeTensorMode(shape_env=env)
    args = _fake_args(mode, specs)
    with mode, enable_python_dispatcher():
        if not by_rule:
            return func(*args, **kwargs), args, env
        rules = _RuleMode(mode, func)
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


def assert_rule_matches_torch(func: Any, specs: list[Spec], **kwargs: Any) -> None:
    expected, expected_args, expected_env = _run(func, specs, kwargs, by_rule=False)
    actual, actual_args, actual_env = _run(func, specs, kwargs, by_rule=True)
    assert actual is not None, "the rule did not apply"
    assert _metadata(actual, actual_args) == _metadata(expected, expected_args)
    assert [a._version for a in actual_args if isinstance(a, torch.Tensor)] == \
        [a._version for a in expected_args if isinstance(a, torch.Tensor)]
    assert _state(actual_env) == _state(expected_env)


def assert_rule_declines(func: Any, specs: list[Spec], **kwargs: Any) -> None:
    """The rule leaves the op to torch (which may well raise: an invalid view)."""
    mode = FakeTensorMode(shape_env=TraceShapeEnv())
    args = _fake_args(mode, specs)
    rules = _RuleMode(mode, func)
    with mode, enable_python_dispatcher(), rules, contextlib.suppress(RuntimeError, ValueError):
        func(*args, **kwargs)
    assert rules.declined


# (shape, symbolic dims): symbolic batch, size-1 trailing dims (a squeeze-excite block's
# scale), two symbolic dims, and no symbolic dim at all (a parameter in a symbolic trace).
SHAPES = [((4, 16, 8, 8), (0,)), ((4, 16, 1, 1), (0,)), ((3, 5), (0, 1)), ((4, 16, 8, 8), ()),
          ((2, 7, 32), (1,))]
UNARY = ["relu", "hardswish", "hardsigmoid", "silu", "sigmoid", "tanh", "gelu"]


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
                                           (Mlp, [(2, 5, 16), (3, 9, 16)])])
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


def _counting(rule: Callable, func: Any, used: list) -> Callable:
    def counted(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Any:
        result = rule(mode, args, kwargs)
        if result is not None:
            used.append(func)
        return result
    return counted

"""End to end through the native runtime: fastdynamo.compile, explain, reset, disable,
logs, recompiles."""
from __future__ import annotations

import pytest
import torch

import fastdynamo
from fastdynamo._runtime import native

pytestmark = pytest.mark.usefixtures("fresh_cache")

THRESHOLD = 1


def entries(fn):
    fn = getattr(fn, "_fastdynamo_original", fn)
    return native().cache_entries(getattr(fn, "__code__", None) or type(fn).forward.__code__)


def test_public_api_names():
    assert set(fastdynamo.__all__) >= {"compile", "explain", "reset", "disable", "config", "FullGraphError"}


def test_compile_function_decorator_forms():
    def f(x):
        return torch.relu(x) * 2

    x = torch.randn(4)
    for compiled in (fastdynamo.compile(f), fastdynamo.compile()(f), fastdynamo.compile(backend="eager")(f)):
        torch.testing.assert_close(compiled(x), f(x))
    assert len(entries(f)) == 1


def test_callable_backend_receives_graph_and_examples():
    seen = []

    def backend(gm, example_inputs):
        seen.append((gm, [tuple(t.shape) for t in example_inputs]))
        return gm.forward

    @fastdynamo.compile(backend=backend)
    def f(x, y):
        return x @ y

    f(torch.ones(2, 3), torch.ones(3, 4))
    assert len(seen) == 1 and seen[0][1] == [(2, 3), (3, 4)]


def test_recompiles_on_new_shape_and_dtype_and_reuses_entries():
    def f(x):
        return x.sin() + x.shape[0]

    cf = fastdynamo.compile(f)
    for x in (torch.randn(3), torch.randn(5), torch.randn(3).double(), torch.randn(3)):
        torch.testing.assert_close(cf(x), f(x))
    assert len(entries(f)) == 3


def test_module_wrapper_state_and_modes():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5), torch.nn.LayerNorm(4))
    compiled = fastdynamo.compile(model)
    assert list(compiled.state_dict()) == list(model.state_dict())
    assert [p for p in compiled.parameters()] == [p for p in model.parameters()]
    x = torch.randn(8, 4)
    compiled.eval()
    assert not model.training
    torch.testing.assert_close(compiled(x), model(x))
    compiled.train()
    torch.manual_seed(1)
    out = compiled(x)
    torch.manual_seed(1)
    torch.testing.assert_close(out, model(x))
    assert len(entries(model)) == 2  # eval and train entries


def test_optimizer_step_seen_without_recompile():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    compiled = fastdynamo.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 3)
    for _ in range(3):
        opt.zero_grad()
        loss = compiled(x).pow(2).mean()
        loss.backward()
        opt.step()
        torch.testing.assert_close(compiled(x), model(x))
    assert len(entries(model)) == 1


class Gated(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.use_gate = True

    def forward(self, x):
        y = self.lin(x)
        if self.use_gate:
            y = y * torch.sigmoid(y)
        return y * THRESHOLD


def test_config_attribute_global_and_grad_mode_recompile():
    global THRESHOLD
    model = Gated()
    compiled = fastdynamo.compile(model)
    x = torch.randn(2, 3)
    torch.testing.assert_close(compiled(x), model(x))
    model.use_gate = False
    torch.testing.assert_close(compiled(x), model(x))
    THRESHOLD = 2
    try:
        torch.testing.assert_close(compiled(x), model(x))
    finally:
        THRESHOLD = 1
    with torch.no_grad():
        out = compiled(x)
        assert not out.requires_grad
    assert len(entries(model)) == 4


def test_unsupported_runs_eagerly_and_fullgraph_raises(capsys):
    def f(x):
        y = x * 2
        print("eager side effect")
        return y

    torch.testing.assert_close(fastdynamo.compile(f)(torch.ones(2)), torch.ones(2) * 2)
    assert "eager side effect" in capsys.readouterr().out
    fastdynamo.reset()
    with pytest.raises(fastdynamo.FullGraphError, match=r"test_api.py:\d+: print"):
        fastdynamo.compile(f, fullgraph=True)(torch.ones(2))


def test_batchnorm_train_mode_falls_back_correctly():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    reference = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    reference.load_state_dict(model.state_dict())
    compiled = fastdynamo.compile(model)
    x = torch.randn(8, 4)
    torch.testing.assert_close(compiled(x), reference(x))
    # the running statistics were updated exactly as in eager
    torch.testing.assert_close(model[1].running_mean, reference[1].running_mean)
    assert int(model[1].num_batches_tracked) == 1


def test_data_dependent_branch_is_correct():
    def f(x):
        if x.sum() > 0:
            return x + 1
        return x - 1

    cf = fastdynamo.compile(f)
    for x in (torch.ones(2), -torch.ones(2)):
        torch.testing.assert_close(cf(x), f(x))


def test_disable_runs_eagerly():
    calls = []

    @fastdynamo.disable
    def helper(x):
        calls.append(1)
        return x + 1

    def f(x):
        return helper(x) * 2

    torch.testing.assert_close(fastdynamo.compile(f)(torch.ones(2)), torch.full((2,), 4.0))
    assert calls == [1]


def test_nested_frames_compile_when_outer_breaks():
    def inner(x):
        return x.cos() * 3

    def outer(x):
        print("break")
        return inner(x)

    def outer_loop(x):
        for _ in range(2):
            print("break")
            x = inner(x)
        return x

    torch.testing.assert_close(fastdynamo.compile(outer)(torch.ones(2)), inner(torch.ones(2)))
    # After the break, the resume function inlines inner: one graph holds cos and mul.
    report = fastdynamo.explain(outer)(torch.ones(2))
    assert report.graph_count == 1 and report.graph_break_count == 1, report.break_reasons
    assert "cos" in report.graphs[0].code
    assert not entries(inner)
    # A break inside a loop runs the loop as Python: inner compiles on its own.
    torch.testing.assert_close(fastdynamo.compile(outer_loop)(torch.ones(2)),
                               inner(inner(torch.ones(2))))
    assert len(entries(inner)) == 1


def test_explain_reports_graphs_guards_and_breaks():
    def f(x, n):
        for _ in range(n):
            x = torch.tanh(x)
        return x

    report = fastdynamo.explain(f)(torch.ones(3), 2)
    assert report.graph_count == 1 and report.graph_break_count == 0
    assert report.ops_per_graph == [2]
    assert "n == 2" in report.guards[0]
    assert "Graph count: 1" in str(report)

    def g(x):
        return x.nonzero()

    report = fastdynamo.explain(g)(torch.ones(3))
    assert report.graph_break_count == 1
    assert "test_api.py:" in report.break_reasons[0].location
    assert "nonzero" in report.break_reasons[0].reason


def test_logs(capsys):
    from fastdynamo import logs

    logs.set_logs("graph,guards,bytecode,recompiles")
    try:
        cf = fastdynamo.compile(lambda x: x + 1)
        cf(torch.ones(2))
        cf(torch.ones(3))
    finally:
        logs.set_logs("")
    err = capsys.readouterr().err
    for kind in ("graph", "guards", "bytecode", "recompiles"):
        assert f"[fastdynamo:{kind}]" in err
    assert "ORIGINAL" in err and "TRANSFORMED" in err
    assert "size()[0] == 2" in err or "got 3" in err


def test_reset_drops_entries():
    def f(x):
        return x * 5

    fastdynamo.compile(f)(torch.ones(1))
    assert len(entries(f)) == 1
    fastdynamo.reset()
    assert len(entries(f)) == 0


def test_values_made_by_each_call_are_guarded_by_value():
    def f(x, dev, r, size, sl):
        return x.to(dev).reshape(size)[sl] + len(r)

    compiled = fastdynamo.compile(f)
    x = torch.arange(6.0)
    for _ in range(3):  # fresh device, range, Size and slice objects on every call
        out = compiled(x, torch.device("cpu"), range(3), torch.Size([2, 3]), slice(0, 1))
        torch.testing.assert_close(out, f(x, torch.device("cpu"), range(3), torch.Size([2, 3]), slice(0, 1)))
    assert len(entries(f)) == 1
    out = compiled(x, torch.device("cpu"), range(4), torch.Size([3, 2]), slice(1, 3))
    torch.testing.assert_close(out, f(x, torch.device("cpu"), range(4), torch.Size([3, 2]), slice(1, 3)))
    assert len(entries(f)) == 2


def test_reset_removes_compiled_graphs_from_globals():
    def f(x):
        return x.sin() + 1

    fastdynamo.compile(f)(torch.ones(2))
    assert any(name.startswith("__compiled_fn_") for name in f.__globals__)
    fastdynamo.reset()
    assert not any(name.startswith("__compiled_fn_") for name in f.__globals__)
    torch.testing.assert_close(fastdynamo.compile(f)(torch.ones(2)), f(torch.ones(2)))


@pytest.mark.internal_errors
def test_internal_compiler_error_falls_back_with_a_warning(monkeypatch):
    from fastdynamo import config, convert_frame

    def f(x):
        return x.cos()

    def broken(*args, **kwargs):
        raise AttributeError("simulated translator bug")

    monkeypatch.setattr(config, "fallback_on_internal_error", True)
    monkeypatch.setattr(convert_frame, "translate", broken)
    with pytest.warns(RuntimeWarning, match="simulated translator bug"):
        out = fastdynamo.compile(f)(torch.ones(2))
    torch.testing.assert_close(out, torch.ones(2).cos())
    monkeypatch.setattr(config, "fallback_on_internal_error", False)
    fastdynamo.reset()
    with pytest.raises(AttributeError, match="simulated translator bug"):
        fastdynamo.compile(f)(torch.ones(2))


def test_entries_compiled_outside_autocast_and_inference_mode_are_not_used_inside():
    def f(x):
        return x @ x

    compiled = fastdynamo.compile(f)
    x = torch.ones(2, 2)
    compiled(x)
    assert len(entries(f)) == 1
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = compiled(x)
    assert out.dtype == torch.bfloat16  # eager's dtype under autocast
    with torch.inference_mode():
        out = compiled(x)
    assert out.is_inference()
    assert len(entries(f)) == 1  # those calls ran as Python, nothing was compiled for them
    assert compiled(x).dtype == torch.float32


def test_compiling_or_explaining_a_compiled_callable_works_on_the_original():
    def relu_add(x, y):
        return torch.relu(x + y)

    seen = []

    def recording(gm, example_inputs):
        seen.append(len(example_inputs))
        return gm.forward

    x, y = torch.randn(3), torch.randn(3)
    compiled = fastdynamo.compile(relu_add, backend="eager")
    compiled(x, y)
    report = fastdynamo.explain(compiled)(x, y)
    assert report.graph_count == 1 and report.ops_per_graph == [2]
    again = fastdynamo.compile(compiled, backend=recording)
    assert torch.equal(again(x, y), relu_add(x, y)) and seen == [2]  # the new backend compiled it

    module = torch.nn.Linear(3, 2)
    wrapped = fastdynamo.compile(fastdynamo.compile(module, backend="eager"), backend="eager")
    assert wrapped._orig_mod is module and list(wrapped.state_dict()) == ["weight", "bias"]
    assert fastdynamo.explain(fastdynamo.compile(module))(x).graph_count == 1

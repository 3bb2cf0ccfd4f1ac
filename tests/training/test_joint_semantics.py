"""Issue #22 item 1: a graph that needs autograd is traced forward and backward together,
partitioned by our min-cut and compiled on the default backend; eager's semantics stay:
mutated inputs and buffers, ``detach``, ``no_grad`` inside, shared parameters, inputs
without grad, ``retain_graph=True``, double backward refused clearly."""
from __future__ import annotations

import pytest
import torch

import fastdynamo
from fastdynamo.backends import describe
from fastdynamo.convert_frame import Recorder
from fastdynamo.backends.training import compile_training

from .helpers import assert_same_grads, compile_recorded, grads, training_graphs

pytestmark = pytest.mark.usefixtures("fresh_cache")


def leaves(*shapes: tuple[int, ...], requires_grad: bool = True) -> list[torch.Tensor]:
    torch.manual_seed(0)
    return [torch.randn(shape, requires_grad=requires_grad) for shape in shapes]


def run_both(fn, make_inputs, backward=lambda out: out.sum().backward(), **options):
    """fn eager and compiled on fresh equal inputs: outputs, gradients, the recorder."""
    eager_inputs, compiled_inputs = make_inputs(), make_inputs()
    want = fn(*eager_inputs)
    backward(want)
    compiled, recorder = compile_recorded(fn, **options)
    got = compiled(*compiled_inputs)
    backward(got)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert_same_grads(grads(compiled_inputs), grads(eager_inputs), 1e-5)
    return eager_inputs, compiled_inputs, recorder


def test_kernels_run_in_both_halves():
    def fn(x, w):
        return torch.tanh(x @ w).mul(2).sum(-1)

    _, _, recorder = run_both(fn, lambda: leaves((4, 8), (8, 8)))
    (graph,) = training_graphs(recorder)
    assert graph.forward_half.kernel_count > 0 and graph.backward_half.kernel_count > 0
    assert graph.forward_half.fallback_reason is None and graph.backward_half.fallback_reason is None
    line = describe(graph)  # what explain() prints for the graph
    assert line.startswith("training graph: forward ") and " cpp kernels; backward " in line, line


def test_input_mutation_of_a_tensor_without_grad():
    def fn(x, w):
        x.add_(1)
        return x * w

    eager, compiled, _ = run_both(fn, lambda: leaves((5,), requires_grad=False) + leaves((5,)))
    torch.testing.assert_close(compiled[0], eager[0])  # the write happened once


def test_batch_norm_running_statistics_update_as_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    eager_model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    eager_model.load_state_dict(model.state_dict())
    x = torch.randn(2, 3, 6, 6)
    compiled, recorder = compile_recorded(model)
    for _ in range(2):
        eager_model(x).square().mean().backward()
        compiled(x).square().mean().backward()
    for (name, got), want in zip(model.state_dict().items(), eager_model.state_dict().values(), strict=True):
        torch.testing.assert_close(got, want, msg=name)  # running_mean, running_var, num_batches_tracked
    assert_same_grads(grads(list(model.parameters())), grads(list(eager_model.parameters())), 1e-4)
    assert len(training_graphs(recorder)) == 1


def test_detach_stops_the_gradient():
    def fn(x, w):
        return (x * w).detach() * w + x.sin()

    run_both(fn, lambda: leaves((6,), (6,)))


def test_no_grad_region_inside_the_graph():
    def fn(x, w):
        with torch.no_grad():
            scale = (x * w).sum()
        return x * scale + w.exp()

    run_both(fn, lambda: leaves((6,), (6,)))


def test_shared_parameter_used_twice_sums_its_gradients():
    torch.manual_seed(0)
    linear = torch.nn.Linear(4, 4)
    model = torch.nn.Sequential(linear, torch.nn.Tanh(), linear)
    x = torch.randn(3, 4)
    model(x).sum().backward()
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled, recorder = compile_recorded(model)
    compiled(x).sum().backward()
    assert_same_grads([p.grad for p in model.parameters()], want)
    assert len(list(model.parameters())) == 2 and len(training_graphs(recorder)) == 1


def test_inputs_without_grad_get_no_gradient():
    def fn(x, w, bias):
        return torch.relu(x @ w + bias)

    def make():
        x, w = leaves((3, 4), (4, 2))
        x.requires_grad_(False)
        return [x, w, torch.ones(2)]

    _, compiled, _ = run_both(fn, make)
    assert compiled[0].grad is None and compiled[2].grad is None


def test_retain_graph_allows_a_second_backward():
    def twice(out):
        out.sum().backward(retain_graph=True)
        out.sum().backward()

    run_both(lambda x, w: (x * w).sigmoid(), lambda: leaves((5,), (5,)), backward=twice)


def test_double_backward_is_refused_clearly():
    x, w = leaves((4,), (4,))
    compiled, _ = compile_recorded(lambda x, w: (x * w).sin())
    out = compiled(x, w).sum()
    (first,) = torch.autograd.grad(out, [w], create_graph=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(first.sum(), [w])


def test_several_steps_reuse_one_graph():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.GELU(), torch.nn.LayerNorm(6))
    eager_model = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.GELU(), torch.nn.LayerNorm(6))
    eager_model.load_state_dict(model.state_dict())
    compiled, recorder = compile_recorded(model)
    x = torch.randn(4, 6)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, eager_model)]
    for _ in range(3):
        for forward, optimizer in zip((compiled, eager_model), optimizers, strict=True):
            optimizer.zero_grad()
            forward(x).pow(2).mean().backward()
            optimizer.step()
        for got, want in zip(model.parameters(), eager_model.parameters(), strict=True):
            torch.testing.assert_close(got, want)
    assert len(recorder.captures) == 1 and len(training_graphs(recorder)) == 1


def test_triton_kernels_in_both_halves():
    # Triton's interpreter on CPU tensors (root conftest): the same training path, Triton
    # kernels for the forward and the backward (a CUDA machine runs them compiled)
    def fn(x, w):
        return torch.nn.functional.layer_norm(torch.tanh(x @ w), (8,)).sum(-1)

    _, _, recorder = run_both(fn, lambda: leaves((4, 8), (8, 8)), backend="triton")
    (graph,) = training_graphs(recorder)
    assert graph.target.name == "triton"
    assert graph.forward_half.kernel_count > 0 and graph.backward_half.kernel_count > 0


def test_a_raising_backward_runs_its_aten_graph_unless_strict():
    calls = []

    def broken_kernels(half, _inputs):
        def run(*args):
            calls.append(half)
            raise RuntimeError("a kernel bug")
        return run

    gm = torch.fx.symbolic_trace(lambda x, w: ((x * w).sin(),))
    for strict in (False, True):
        x, w = leaves((3,), (3,))
        run = compile_training(gm, [x, w], broken_kernels, strict=strict)
        if strict:
            with pytest.raises(RuntimeError, match="a kernel bug"):
                run(x, w)
            continue
        run(x, w)[0].sum().backward()  # both halves fell back to their ATen graphs
        torch.testing.assert_close(w.grad, (x * w).cos().detach() * x)
        assert run.forward_half.fallback_reason.startswith("internal error: RuntimeError('a kernel bug')")
        assert run.backward_half.fallback_reason.startswith("internal error")
    assert len(calls) == 3  # forward and backward once each, then the strict forward


class TwoHeads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(4, 4)
        self.head_a = torch.nn.Linear(4, 2)
        self.head_b = torch.nn.Linear(4, 2)

    def forward(self, x):
        h = self.body(x).tanh()
        return self.head_a(h), self.head_b(h)


@pytest.mark.parametrize("used", ["a", "b", "both", "a_then_b"])
def test_a_parameter_the_loss_does_not_reach_keeps_a_none_gradient(used):
    # AOTAutograd's backward gives head_b zeros when only head_a's output is in the loss;
    # AdamW would then decay head_b's weights, which eager leaves alone.
    torch.manual_seed(0)
    eager = TwoHeads()
    model = TwoHeads()
    model.load_state_dict(eager.state_dict())
    recorder = Recorder()
    compiled = fastdynamo.compile(model, _recorder=recorder)
    optimizers = [torch.optim.AdamW(m.parameters(), lr=0.1, weight_decay=0.5) for m in (eager, model)]
    x = torch.randn(3, 4)
    for step in range(3):
        for forward, opt in ((eager, optimizers[0]), (compiled, optimizers[1])):
            opt.zero_grad()
            a, b = forward(x)
            which = used if used != "a_then_b" else ("a" if step == 0 else "b")
            loss = {"a": a.sum(), "b": b.pow(2).sum(), "both": a.sum() + b.sum()}[which]
            loss.backward()
            opt.step()
        for (name, p), q in zip(model.named_parameters(), eager.parameters(), strict=True):
            assert (p.grad is None) == (q.grad is None), name
            if q.grad is not None:
                torch.testing.assert_close(p.grad, q.grad, msg=name)
            torch.testing.assert_close(p.detach(), q.detach(), msg=name)
    (record,) = recorder.captures
    assert record.compiled_fn.backward_half.kernel_count > 0


def test_after_its_first_call_a_graph_gates_on_its_autograd_node():
    # The first call runs the _Gates node and learns the graph's autograd node; later
    # calls gate with one post hook on that node (no extra node in the backward).
    torch.manual_seed(0)
    model = TwoHeads()
    recorder = Recorder()
    compiled = fastdynamo.compile(model, _recorder=recorder)
    x = torch.randn(3, 4)
    for step in range(3):
        model.zero_grad(set_to_none=True)
        a, _ = compiled(x)
        a.sum().backward()
        assert model.head_b.weight.grad is None and model.head_a.weight.grad is not None, step
    (record,) = recorder.captures
    state = record.compiled_fn.run.gate_state
    assert state.node_gate is not None and sorted(state.node_gate.input_slots) == sorted(state.gated)
    names = {type(function).__name__ for function, _ in a.grad_fn.next_functions if function is not None}
    assert "BackwardCFunction" not in names and "_GatesBackward" not in names


class TwoInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.head_a = torch.nn.Linear(4, 2)
        self.head_b = torch.nn.Linear(4, 2)

    def forward(self, u, v):
        return self.head_a(u), self.head_b(v).tanh()


def test_gated_inputs_that_are_activations_get_eager_none_gradients():
    # u and v are not leaves, and each reaches one output: what the gate returns for
    # them flows further back into the body's parameters.
    def run(forward, body, x, which):
        h = body(x)
        a, b = forward(h[:, :4].relu(), h[:, 4:].sigmoid())
        (a.sum() if which == "a" else b.sum()).backward()

    torch.manual_seed(0)
    eager_body, eager = torch.nn.Linear(4, 8), TwoInputs()
    body, model = torch.nn.Linear(4, 8), TwoInputs()
    body.load_state_dict(eager_body.state_dict())
    model.load_state_dict(eager.state_dict())
    recorder = Recorder()
    compiled = fastdynamo.compile(model, _recorder=recorder)
    x = torch.randn(3, 4)
    for which in ("a", "b", "a", "b"):  # the first call, then the node gate
        for m in (eager_body, eager, body, model):
            m.zero_grad(set_to_none=True)
        run(eager, eager_body, x, which)
        run(compiled, body, x, which)
        for p, q in zip([*body.parameters(), *model.parameters()],
                        [*eager_body.parameters(), *eager.parameters()], strict=True):
            assert (p.grad is None) == (q.grad is None)
            if q.grad is not None:
                torch.testing.assert_close(p.grad, q.grad)
    (record,) = recorder.captures
    state = record.compiled_fn.run.gate_state
    assert {0, 1} <= set(state.gated) and state.node_gate is not None


def test_a_retained_graph_gates_each_backward_on_its_own_gradients():
    torch.manual_seed(0)
    eager, model = TwoHeads(), TwoHeads()
    model.load_state_dict(eager.state_dict())
    compiled = fastdynamo.compile(model)
    x = torch.randn(3, 4)
    for _ in range(3):
        results = {}
        for name, forward, module in (("eager", eager, eager), ("compiled", compiled, model)):
            module.zero_grad(set_to_none=True)
            a, b = forward(x)
            a.sum().backward(retain_graph=True)
            first = module.head_b.weight.grad
            b.sum().backward()
            results[name] = (first, module.head_b.weight.grad.clone(), module.head_a.weight.grad.clone())
        assert results["eager"][0] is None and results["compiled"][0] is None
        torch.testing.assert_close(results["compiled"][1], results["eager"][1])
        torch.testing.assert_close(results["compiled"][2], results["eager"][2])

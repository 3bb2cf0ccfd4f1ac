"""OptimizedModule through the dispatcher: a module without hooks has its class's forward
called directly (and its graph called with no frame on a hit); hooks, an instance
forward and the like send the call through the module, exactly as eager."""
from __future__ import annotations

import torch

import fastdynamo
from fastdynamo._runtime import native

from .helpers import compile_recorded, counts, entries, same


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, scale=1.0):
        return torch.relu(self.linear(x)) * scale


def compiled_net():
    torch.manual_seed(0)
    net = Net()
    compiled, recorder = compile_recorded(net)
    return net, compiled, recorder


def test_module_without_hooks_hits_the_graph_directly():
    net, compiled, recorder = compiled_net()
    dispatch = compiled._dispatch
    assert type(dispatch) is native().Dispatcher and dispatch.target is net
    x = torch.randn(2, 4)
    with torch.no_grad():
        for _ in range(3):
            same(compiled(x), net(x))
        same(compiled(x, scale=1.0), net(x))
        same(compiled.forward(x), net(x))
    assert counts(dispatch) == (4, 0, 1) and len(recorder.captures) == 1
    assert entries(net)[0].direct.hits == 4


def test_changed_parameter_is_read_at_each_call():
    net, compiled, recorder = compiled_net()
    x = torch.randn(2, 4)
    with torch.no_grad():
        compiled(x)
        net.linear.weight.mul_(2)
        same(compiled(x), net(x))
        net.linear.weight = torch.nn.Parameter(torch.ones(3, 4))
        same(compiled(x), net(x))
    assert len(recorder.captures) <= 2 and compiled._dispatch.direct_calls >= 1


def test_forward_hooks_run_as_in_eager():
    net, compiled, recorder = compiled_net()
    x, calls = torch.randn(2, 4), []
    with torch.no_grad():
        compiled(x)
        handle = net.register_forward_hook(lambda module, args, out: calls.append("post") or out * 0)
        pre = net.register_forward_pre_hook(lambda module, args: calls.append("pre"))
        same(compiled(x), torch.zeros(2, 3))
        assert calls == ["pre", "post"]
        assert counts(compiled._dispatch) == (0, 0, 2)
        handle.remove()
        pre.remove()
        same(compiled(x), net(x))
    assert counts(compiled._dispatch) == (1, 0, 2)
    assert len(recorder.captures) == 2  # forward, and the hook (`out * 0`), run under the callback


def test_global_hooks_run_as_in_eager():
    _, compiled, _ = compiled_net()
    x, calls = torch.randn(2, 4), []
    compiled(x)
    handle = torch.nn.modules.module.register_module_forward_hook(
        lambda module, args, out: calls.append(type(module).__name__))
    try:
        compiled(x)
    finally:
        handle.remove()
    assert "Net" in calls and compiled._dispatch.frame_calls == 2


def test_instance_forward_is_called_like_eager():
    net, compiled, _ = compiled_net()
    x = torch.randn(2, 4)
    compiled(x)
    net.forward = lambda x: x - 1
    same(compiled(x), x - 1)
    assert compiled._dispatch.direct_calls == 0 and compiled._dispatch.frame_calls == 2


def test_module_state_and_reset():
    net, compiled, recorder = compiled_net()
    x = torch.randn(2, 4)
    with torch.no_grad():
        compiled(x)
        compiled(x)
        fastdynamo.reset()
        same(compiled(x), net(x))
        compiled(x)
    assert len(recorder.captures) == 2 and counts(compiled._dispatch) == (2, 0, 2)
    assert compiled.state_dict().keys() == net.state_dict().keys()


def test_module_graph_break_goes_through_the_frame():
    class Breaks(torch.nn.Module):
        def forward(self, x):
            y = x + 1
            print("", end="")
            return y * 2

    module = Breaks()
    compiled, recorder = compile_recorded(module)
    x = torch.randn(3)
    for _ in range(2):
        same(compiled(x), module(x))
    assert recorder.breaks and compiled._dispatch.direct_calls == 0


def test_a_forward_decorated_with_a_star_args_wrapper_is_served_without_a_frame():
    """Like transformers' decorated forwards: `wrapper(self, *args, **kwargs)` calling the
    real forward; the dispatcher binds *args and **kwargs and calls the graph directly."""
    import functools

    def decorated(forward):
        @functools.wraps(forward)
        def wrapper(self, *args, **kwargs):
            return forward(self, *args, **kwargs)
        return wrapper

    class Wrapped(Net):
        @decorated
        def forward(self, x, scale=1.0):
            return torch.relu(self.linear(x)) * scale

    torch.manual_seed(0)
    net = Wrapped()
    compiled, recorder = compile_recorded(net)
    x = torch.randn(2, 4)
    with torch.no_grad():
        for _ in range(3):
            same(compiled(x), net(x))
            same(compiled(x, scale=2.0), net(x, scale=2.0))
    assert len(recorder.captures) == 2 and counts(compiled._dispatch) == (4, 0, 2)

"""Calling modules: a class that overrides ``__call__`` runs the override, and patching
``m.forward`` after the first call recompiles (wrong-result class 4 of issue #10)."""
import torch

from .helpers import compiled_with_recorder
from .object_helpers import compare, fresh


class Scaled(torch.nn.Module):
    def forward(self, t):
        return t + 1

    def __call__(self, t):
        return super().__call__(t) * 10


class ScaledTwoArgSuper(Scaled):
    def __call__(self, t):
        return super(Scaled, self).__call__(t) - 1


class NoSuper(torch.nn.Module):
    def forward(self, t):
        return t + 1

    def __call__(self, t):
        return self.forward(t) * 2


def test_call_override_runs():
    def fn(x, m):
        return m(x)

    for cls in (Scaled, ScaledTwoArgSuper, NoSuper):
        compare(fn, lambda cls=cls: (torch.ones(2), cls()), fullgraph=True)


def test_call_override_on_submodule():
    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Scaled()

        def forward(self, t):
            return self.inner(t) + 1

    compare(lambda x, m: m(x), lambda: (torch.ones(2), Outer()), fullgraph=True)


class Lin(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = torch.nn.ReLU()

    def forward(self, t):
        return self.sub(t) + 1


def test_patching_forward_of_a_global_submodule_recompiles():
    m = Lin()

    def call_m(t):
        return m(t)

    compiled, recorder = compiled_with_recorder(call_m)
    x = -torch.ones(2)
    assert torch.equal(compiled(x), call_m(x))
    m.sub.forward = lambda t: t * 100
    assert torch.equal(compiled(x), call_m(x))
    assert len(recorder.captures) == 2


def test_patching_forward_of_a_module_argument_recompiles():
    def call(m, t):
        return m(t) * 2

    compiled, recorder = compiled_with_recorder(call)
    m, x = Lin(), torch.ones(2)
    assert torch.equal(compiled(m, x), call(m, x))
    m.forward = lambda t: t - 5
    assert torch.equal(compiled(m, x), call(m, x))
    del m.forward
    assert torch.equal(compiled(m, x), call(m, x))
    assert len(recorder.captures) == 2  # the unpatched entry is reused after the del


def test_patched_forward_is_called_on_first_call():
    def make():
        m = Lin()
        m.sub.forward = lambda t: t * 7
        return torch.ones(2), m

    compare(lambda x, m: m(x), make, fullgraph=True)


def test_patching_a_helper_method_recompiles():
    class Helper(torch.nn.Module):
        def scale(self, t):
            return t * 2

        def forward(self, t):
            return self.scale(t)

    def call(m, t):
        return m(t)

    compiled, recorder = compiled_with_recorder(call)
    m, x = Helper(), torch.ones(2)
    assert torch.equal(compiled(m, x), call(m, x))
    m.scale = lambda t: t * 3
    assert torch.equal(compiled(m, x), call(m, x))
    assert len(recorder.captures) == 2


def test_plain_module_call_still_one_graph():
    compare(lambda x, m: m(x), fresh(torch.ones(2), Lin()), fullgraph=True)


def test_sequential_slice_is_called_as_a_sequential():
    def make():
        torch.manual_seed(0)
        seq = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 3))
        return torch.ones(3), seq

    def fn(x, seq):
        tail = seq[1:]
        return tail(x) + seq[0](x), len(tail), isinstance(tail, torch.nn.Sequential), tail[-1](x)

    compare(fn, make, fullgraph=True)


def test_module_slice_leaving_the_frame_is_not_rebuilt_wrongly():
    def make():
        torch.manual_seed(0)
        return torch.ones(3), torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh())

    def fn(x, seq):
        return seq[1:], x + 1

    def check(x, seq):
        tail, y = fn(x, seq)
        return type(tail), len(tail), tail[0] is seq[1], y

    compare(check, make)  # inlined: the slice stays inside the frame
    compare(fn, make, graphs=0, breaks=1)  # returned: the frame runs as Python

"""Dict order is semantics (issue #10, class 5): a trace that iterated a dict argument
(or a module's ``_modules``) must not be reused for the same keys in another order, nor
for a container module that grew."""
import torch

import fastdynamo
from fastdynamo.capture.variables.dict_order import keys_order_guardable
from fastdynamo.convert_frame import Recorder

from .helpers import check

x = torch.ones(2)


def weighted(x, d):
    out = x
    for k, v in d.items():
        out = out * v + k  # not commutative in the order of the items
    return out


def test_reordered_dict_argument_is_not_a_stale_graph():
    fastdynamo.reset()
    compiled = fastdynamo.compile(weighted, backend="eager")
    first = {1: 2.0, 3: 5.0}
    reordered = {3: 5.0, 1: 2.0}
    assert torch.equal(compiled(x, first), weighted(x, first))
    assert torch.equal(compiled(x, reordered), weighted(x, reordered))
    assert torch.equal(compiled(x, first), weighted(x, first))


def test_dict_argument_read_by_key_needs_no_order():
    def fn(x, d):
        return x * d["a"] + d["b"]
    check(fn, x, {"b": 1.0, "a": 3.0}, graphs=1, breaks=0, fullgraph=True)


def test_iterating_a_dict_argument_is_guarded_or_breaks():
    got = check(weighted, x, {1: 2.0, 3: 5.0}, graphs=1 if keys_order_guardable() else 0)
    if not keys_order_guardable():
        assert "key order" in str(got.breaks[0])


def test_mutated_dict_argument_keeps_the_callers_order():
    def fn(x, d):
        d["c"] = x + 1  # written back by pops and an update: the caller's order stays
        d["a"] = 5
        del d["b"]
        d["b"] = 7  # deleted and inserted again: moves to the end, as in Python
        return d
    fastdynamo.reset()
    rec = Recorder()
    compiled = fastdynamo.compile(fn, backend="eager", _recorder=rec)
    for d in ({"a": 1, "b": 2, "z": 0}, {"z": 0, "b": 2, "a": 1}):
        expected = fn(x, dict(d))
        got = compiled(x, d)
        assert got is d and list(got) == list(expected) and got["a"] == 5
    assert len(rec.captures) == 1 and not rec.breaks  # the trace does not depend on the order


class Chain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.ReLU()])

    def forward(self, t):
        for layer in self.layers:
            t = layer(t)
        return t * len(self.layers)


def test_module_list_that_grows_recompiles():
    torch.manual_seed(0)
    model = Chain()
    rec = Recorder()
    compiled = fastdynamo.compile(model, backend="eager", _recorder=rec)
    fastdynamo.reset()
    assert torch.equal(compiled(x), model(x))
    model.layers.append(torch.nn.Tanh())
    assert torch.equal(compiled(x), model(x))
    assert len(rec.captures) == 2


class Named(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.parts = torch.nn.ModuleDict({"scale": Scale(3.0), "shift": Shift(1.0)})

    def forward(self, t):
        for part in self.parts.values():
            t = part(t)
        return t


class Scale(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, t):
        return t * self.k


class Shift(Scale):
    def forward(self, t):
        return t + self.k


def test_module_dict_reordered_is_not_a_stale_graph():
    model = Named()
    fastdynamo.reset()
    compiled = fastdynamo.compile(model, backend="eager")
    assert torch.equal(compiled(x), model(x))
    scale = model.parts.pop("scale")
    model.parts["scale"] = scale  # same keys, other order
    assert torch.equal(compiled(x), model(x))

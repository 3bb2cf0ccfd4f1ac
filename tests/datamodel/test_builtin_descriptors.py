"""Methods of built-in containers called through their class (``dict.get(d, k)``,
``list.__len__(l)``, ``OrderedDict.__len__(od)``), and ``OrderedDict`` objects from
outside the frame (a module's hook tables), read only: compiled vs eager, with graph
counts (issue #12)."""
from __future__ import annotations

import collections
import copy

import torch

import fastdynamo

from .object_helpers import compare, fresh


def test_dict_and_list_descriptors_called_explicitly():
    def fn(x, d, seq):
        made = {"a": x}
        return (dict.get(made, "a") * dict.__len__(d) + list.__len__(seq) + dict.get(d, "zz", 3),
                list.__getitem__(seq, 0), tuple.__len__((1, 2)), dict.__contains__(d, "q"))

    compare(fn, fresh(torch.ones(2), {"q": 1}, [1, 2]), fullgraph=True)


def test_descriptor_on_another_type_breaks():
    def fn(x, d):
        return x + dict.__len__(d)  # an OrderedDict: dict's slot is not the modelled one

    compare(fn, fresh(torch.ones(2), collections.OrderedDict(a=1)), graphs=0, breaks=1)


def test_mutating_descriptor_on_a_frame_list():
    def fn(x, seq):
        list.append(seq, x * 2)
        dict.__setitem__(made := {}, "k", 1)
        return made, len(seq)

    compare(fn, fresh(torch.ones(2), [1]), fullgraph=True)


def test_outside_ordered_dict_is_read():
    def fn(x, od):
        return x * len(od) + od["b"], list(od), collections.OrderedDict.__len__(od)

    compare(fn, lambda: (torch.ones(2), collections.OrderedDict([("b", 2), ("a", 1)])), fullgraph=True)


def test_outside_ordered_dict_recompiles_on_change():
    def fn(x, od):
        return x * len(od), list(od)

    fastdynamo.reset()
    compiled = fastdynamo.compile(fn, backend="eager")
    od = collections.OrderedDict(a=1)
    assert compiled(torch.ones(1), od)[1] == ["a"]
    od["b"] = 2
    assert compiled(torch.ones(1), od)[1] == ["a", "b"]
    od.move_to_end("a")
    assert compiled(torch.ones(1), od)[1] == ["b", "a"]


def test_changing_an_outside_ordered_dict_breaks():
    def fn(x, od):
        od["c"] = 3
        od.move_to_end("a")
        return x + 1

    compare(fn, lambda: (torch.ones(2), collections.OrderedDict(a=1, b=2)), graphs=1, breaks=2)


def test_transformer_encoder_in_one_graph():
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)
    torch.manual_seed(0)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    x = torch.randn(2, 5, 16)
    expected = model(x)
    fastdynamo.reset()
    report = fastdynamo.explain(copy.deepcopy(model), backend="eager")(x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), [b.reason for b in report.break_reasons]
    got = fastdynamo.compile(model, backend="eager", fullgraph=True)(x)
    assert torch.allclose(got, expected, atol=1e-6)

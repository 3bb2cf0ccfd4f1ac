"""A frame that mutates one object and reads another of the same kind, or reaches one
object through two paths, relies on which of its sources are one object. That is
guarded natively (``a is not b`` / ``a is b``): such frames compile to one graph, a call
that aliases them differently recompiles, and results and effects equal eager's.
Caches made by the frame (transformers' ``DynamicCache`` and a cache-like class) are
rebuilt after the graph with their final contents."""
from __future__ import annotations

import pytest
import torch
from transformers.cache_utils import DynamicCache, DynamicLayer

import fastdynamo
from fastdynamo.convert_frame import Recorder

from .helpers import check

pytestmark = pytest.mark.usefixtures("fresh_cache")


class Box:
    def __init__(self, n=0):
        self.n = n


def compiled_with_recorder(fn):
    fastdynamo.reset()
    recorder = Recorder()
    return fastdynamo.compile(fn, backend="eager", _recorder=recorder), recorder


def guard_texts(recorder, capture=-1):
    return [g.text() for g in recorder.captures[capture].result.guards]


def state(value):
    """Plain data standing for a test object's state (tensors as lists)."""
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [state(v) for v in value]
    if hasattr(value, "__dict__"):
        return {k: state(v) for k, v in vars(value).items()}
    return value


# ---------------------------------------------------------------- two objects, one mutated

def mutate_one_read_other(x, a, b):
    a.n = 5
    return x + b.n


def test_mutating_one_of_two_objects_is_one_graph_guarded_distinct():
    check(mutate_one_read_other, torch.ones(2), Box(1), Box(2), graphs=1, breaks=0, fullgraph=True)
    compiled, recorder = compiled_with_recorder(mutate_one_read_other)
    a, b = Box(1), Box(2)
    assert torch.equal(compiled(torch.ones(2), a, b), torch.full((2,), 3.0)) and (a.n, b.n) == (5, 2)
    assert "a is not b" in guard_texts(recorder)
    # the same object twice: the write is seen by the read (eager gives 6); recompiles
    one = Box(1)
    assert torch.equal(compiled(torch.ones(2), one, one), torch.full((2,), 6.0)) and one.n == 5
    assert len(recorder.captures) == 2 and "a is b" in guard_texts(recorder)
    # two objects again: the first entry serves it
    c, d = Box(9), Box(2)
    assert torch.equal(compiled(torch.ones(2), c, d), torch.full((2,), 3.0)) and (c.n, d.n) == (5, 2)
    e = Box(3)
    assert torch.equal(compiled(torch.ones(2), e, e), torch.full((2,), 6.0)) and e.n == 5
    assert len(recorder.captures) == 2 and not recorder.breaks


def test_one_object_through_two_arguments_is_one_graph_guarded_same():
    shared = Box(1)
    check(mutate_one_read_other, torch.ones(2), shared, shared, graphs=1, breaks=0, fullgraph=True)


# ---------------------------------------------------------------- list elements

def mutate_first_read_second(x, items):
    items[0].n = items[0].n + 1
    return x * items[1].n


def test_two_list_elements_mutated_and_read_then_the_same_object_twice():
    compiled, recorder = compiled_with_recorder(mutate_first_read_second)
    for make in (lambda: [Box(1), Box(3)], lambda: (lambda b: [b, b])(Box(1)), lambda: [Box(1), Box(3)]):
        eager_items, compiled_items = make(), make()
        expected = mutate_first_read_second(torch.ones(2), eager_items)
        assert torch.equal(compiled(torch.ones(2), compiled_items), expected)
        assert state(compiled_items) == state(eager_items)
        assert (compiled_items[0] is compiled_items[1]) == (eager_items[0] is eager_items[1])
    # distinct, then one object (a recompile), then distinct again (the first entry)
    assert len(recorder.captures) == 2 and not recorder.breaks
    assert "items[0] is not items[1]" in guard_texts(recorder, 0)


class Layer:
    def __init__(self):
        self.keys = None

    def update(self, k):
        self.keys = k if self.keys is None else torch.cat([self.keys, k], -1)
        return self.keys


class Cache:
    def __init__(self, n):
        self.layers = [Layer() for _ in range(n)]

    def update(self, k, index):
        return self.layers[index].update(k)


def update_every_layer(x, cache):
    out = x
    for index in range(len(cache.layers)):
        out = out + cache.update(x * (index + 1), index).sum()
    return out


def test_a_cache_from_outside_updated_per_layer():
    check(update_every_layer, torch.ones(2), Cache(3), graphs=1, breaks=0, fullgraph=True)
    compiled, recorder = compiled_with_recorder(update_every_layer)
    for _ in range(2):
        eager_cache, compiled_cache = Cache(3), Cache(3)
        assert torch.equal(compiled(torch.ones(2), compiled_cache), update_every_layer(torch.ones(2), eager_cache))
        assert state(compiled_cache) == state(eager_cache)
    assert len(recorder.captures) == 1  # a fresh cache of fresh layers: the same entry
    assert "distinct_objects(cache.layers[0], cache.layers[1], cache.layers[2])" in guard_texts(recorder)
    shared = Layer()
    eager_cache, compiled_cache = Cache(3), Cache(3)
    eager_cache.layers[2] = eager_cache.layers[0]
    compiled_cache.layers = [shared, Layer(), shared]
    assert torch.equal(compiled(torch.ones(2), compiled_cache), update_every_layer(torch.ones(2), eager_cache))
    assert state(compiled_cache) == state(eager_cache)
    assert len(recorder.captures) == 2


def test_transformers_dynamic_cache_from_outside():
    def attend(x, cache):
        k, v = cache.update(x, x * 2, 0)
        k2, v2 = cache.update(x + 1, x, 1)
        return k.sum() + v2.sum()

    def make():
        return DynamicCache(ddp_cache_data=[(torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4))] * 2)

    compiled, recorder = compiled_with_recorder(attend)
    x = torch.randn(1, 1, 3, 4)
    for _ in range(2):
        eager_cache, compiled_cache = make(), make()
        assert torch.equal(compiled(x, compiled_cache), attend(x, eager_cache))
        assert state(compiled_cache.layers) == state(eager_cache.layers)
    assert len(recorder.captures) == 1 and not recorder.breaks
    assert any(t.startswith("cache.layers[0] is not cache.layers[1]") for t in guard_texts(recorder))


# ---------------------------------------------------------------- caches made by the frame

def make_and_fill_a_cache(x):
    cache = Cache(2)
    a = cache.update(x, 0)
    b = cache.update(x * 2, 1)
    cache.update(x + 1, 0)
    return a + b, cache


def test_a_cache_like_class_made_in_the_frame_is_returned_with_its_contents():
    compiled, recorder = compiled_with_recorder(make_and_fill_a_cache)
    value, cache = compiled(torch.ones(2))
    assert len(recorder.captures) == 1 and not recorder.breaks
    expected_value, expected_cache = make_and_fill_a_cache(torch.ones(2))
    assert type(cache) is Cache and all(type(layer) is Layer for layer in cache.layers)
    assert torch.equal(value, expected_value) and state(cache) == state(expected_cache)
    assert cache.layers[0] is not cache.layers[1]


def make_a_dynamic_cache(x):
    cache = DynamicCache()
    k, v = cache.update(x, x * 2, 0)
    k2, v2 = cache.update(x + 1, x, 1)
    k3, v3 = cache.update(x + 2, x, 0)
    return k3.sum() + v2.sum(), cache


def test_transformers_dynamic_cache_made_in_the_frame_is_rebuilt():
    x = torch.randn(1, 2, 3, 4)
    expected, expected_cache = make_a_dynamic_cache(x)
    compiled, recorder = compiled_with_recorder(make_a_dynamic_cache)
    for _ in range(2):
        value, cache = compiled(x)
        assert torch.equal(value, expected) and type(cache) is DynamicCache
        assert [type(layer) for layer in cache.layers] == [DynamicLayer, DynamicLayer]
        assert state(cache.layers) == state(expected_cache.layers)
        assert cache.get_seq_length() == expected_cache.get_seq_length() == 6
    assert len(recorder.captures) == 1 and not recorder.breaks


# ---------------------------------------------------------------- containers and cells

def append_to_first(x, a, b):
    a.append(1)
    return x + len(b)


def test_two_lists_one_mutated():
    check(append_to_first, torch.ones(1), [0], [0], graphs=1, breaks=0, fullgraph=True)


def test_one_list_through_two_arguments_still_breaks():
    shared = [0]  # the append runs as Python, the rest is the resume function's graph
    got = check(append_to_first, torch.ones(1), shared, shared, graphs=1, breaks=1)
    assert any("are the same list" in b.reason for b in got.breaks)


def test_dict_mutated_and_a_dict_inside_it_read():
    """The shape of transformers' ``to_dict``: the frame writes ``output`` and reads
    ``output['labels']``, another dict (a later call could pass the dict in itself)."""
    def strip(x, output):
        labels = output["labels"]
        output["count"] = len(labels)
        return x + len(output)

    check(strip, torch.ones(1), {"labels": {0: "a", 1: "b"}}, graphs=1, breaks=0, fullgraph=True)


def test_a_dict_inside_itself_runs_as_python():
    """Arguments are wrapped item by item: a container inside itself is refused (it
    recursed until a RecursionError escaped to the caller before)."""
    def strip(x, output):
        labels = output["labels"]
        output["count"] = len(labels)
        return x + len(output)

    selfish = {}
    selfish["labels"] = selfish
    got = check(strip, torch.ones(1), selfish, graphs=0)
    assert any("a dict that contains itself" in b.reason for b in got.breaks)


def cache_made_when_missing(x, past=None):
    """The Hugging Face pattern: ``if past_key_values is None: past_key_values = DynamicCache()``."""
    if past is None:
        past = Cache(1)
    other = Cache(1)
    past.update(x, 0)
    flags = (past is not None, past is other, past is past, other is not past, past is None)
    return x + sum(flags), past


def test_identity_of_objects_made_by_the_frame_is_decided():
    compiled, recorder = compiled_with_recorder(cache_made_when_missing)
    value, cache = compiled(torch.ones(2))
    expected, expected_cache = cache_made_when_missing(torch.ones(2))
    assert torch.equal(value, expected) and state(cache) == state(expected_cache)
    given, expected_given = Cache(1), Cache(1)
    value, cache = compiled(torch.ones(2), given)
    expected, _ = cache_made_when_missing(torch.ones(2), expected_given)
    assert torch.equal(value, expected) and cache is given and state(given) == state(expected_given)
    assert len(recorder.captures) == 2 and not recorder.breaks

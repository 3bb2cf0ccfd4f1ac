"""Classes with their own attribute lookup (issue #12): a Python ``__getattribute__`` is
inlined, ``super().__getattribute__`` / ``object.__getattribute__`` run the generic
lookup, an ``AttributeError`` raised inside calls ``__getattr__`` and makes ``hasattr``
False, guards read values through ``object.__getattribute__`` (never the class's own
lookup), and Hugging Face configs (``attribute_map``, per-layer config views, the
attention registry) compile in one graph."""
import collections.abc

import pytest
import torch

from fastdynamo.guards.sources import GenericAttrSource, LocalSource, resolve

from .helpers import compiled_with_recorder
from .object_helpers import compare, fresh


class Config:
    """Hugging Face's ``PreTrainedConfig`` lookup, in miniature."""

    attribute_map = {"hidden_size": "n_embd", "heads": "n_head"}

    def __init__(self, n_embd=3, n_head=2):
        self.n_embd = n_embd
        self.n_head = n_head
        self.scale = 0.5

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    def twice(self):
        return self.hidden_size * 2

    @property
    def total(self):
        return self.n_embd + self.heads


def test_attribute_map_lookup_in_one_graph():
    def fn(x, cfg):
        return x * cfg.hidden_size + cfg.heads * cfg.scale, cfg.twice(), cfg.total, cfg.n_embd

    compare(fn, fresh(torch.ones(2), Config()), fullgraph=True)


def test_values_are_guarded_through_the_generic_lookup():
    def fn(x, cfg):
        return x * cfg.hidden_size

    compiled, recorder = compiled_with_recorder(fn)
    x, cfg = torch.ones(2), Config()
    assert torch.equal(compiled(x, cfg), fn(x, cfg))
    guards = [g.text() for g in recorder.captures[0].result.guards]
    assert "object.__getattribute__(cfg, 'n_embd') == 3" in guards
    cfg.n_embd = 7
    assert torch.equal(compiled(x, cfg), x * 7)
    assert len(recorder.captures) == 2


def test_changing_the_attribute_map_recompiles():
    def fn(x, cfg):
        return x * cfg.hidden_size

    compiled, recorder = compiled_with_recorder(fn)
    x, cfg = torch.ones(2), Config()
    assert torch.equal(compiled(x, cfg), x * 3)
    cfg.attribute_map = {"hidden_size": "scale"}  # shadows the class's map on this instance
    assert torch.equal(compiled(x, cfg), fn(x, cfg))
    assert torch.equal(compiled(x, cfg), x * 0.5)
    assert len(recorder.captures) == 2


def test_replacing_the_class_getattribute_recompiles():
    class Local(Config):
        pass

    def fn(x, cfg):
        return x * cfg.hidden_size

    compiled, recorder = compiled_with_recorder(fn)
    x, cfg = torch.ones(2), Local()
    assert torch.equal(compiled(x, cfg), x * 3)
    Local.__getattribute__ = lambda self, key: 10 if key == "hidden_size" else object.__getattribute__(self, key)
    assert torch.equal(compiled(x, cfg), fn(x, cfg))
    assert torch.equal(compiled(x, cfg), x * 10)
    assert len(recorder.captures) == 2


CALLS = []


class Counting:
    """Its lookup has a side effect: guards and loads must never run it."""

    def __init__(self):
        self.w = torch.full((2,), 3.0)
        self.n = 2

    def __getattribute__(self, key):
        CALLS.append(key)
        return object.__getattribute__(self, key)


def test_guards_and_loads_never_run_the_class_lookup():
    def fn(x, obj):
        return x * obj.w + obj.n

    compiled, recorder = compiled_with_recorder(fn)
    obj, x = Counting(), torch.ones(2)
    CALLS.clear()
    expected = fn(x, obj)
    eager_calls = list(CALLS)
    # The first call traces (the compiler's own isinstance checks read obj.__class__
    # through the class's lookup then); the cache hits run guards and the graph only.
    CALLS.clear()  # (its length is guarded: each call starts from an empty list)
    assert torch.equal(compiled(x, obj), expected)
    for _ in range(2):
        CALLS.clear()
        assert torch.equal(compiled(x, obj), expected)
        assert CALLS == eager_calls  # the list append is a side effect, replayed once
    assert len(recorder.captures) == 1 and not recorder.breaks


class Fallback:
    """``__getattribute__`` raising AttributeError sends the lookup to ``__getattr__``."""

    def __init__(self):
        self.real = 4

    def __getattribute__(self, key):
        if key.startswith("hidden_"):
            raise AttributeError(key)
        return object.__getattribute__(self, key)

    def __getattr__(self, key):
        if key == "hidden_ok":
            return 100
        raise AttributeError(key)


class PropertyRaises:
    def __getattr__(self, key):
        return len(key)

    @property
    def broken(self):
        raise AttributeError("from the getter")


def test_attribute_error_calls_getattr():
    def fn(x, obj, prop):
        return x + obj.real + obj.hidden_ok + prop.broken + prop.other

    compare(fn, lambda: (torch.ones(2), Fallback(), PropertyRaises()), fullgraph=True)


def test_attribute_error_escaping_the_frame_is_eagers():
    # the frame breaks at the load and runs as Python; so do the lookup's own frames,
    # whose raise leaves them
    compare(lambda x, obj: x + obj.hidden_nope, fresh(torch.ones(2), Fallback()), graphs=0, breaks=3)


def test_other_exceptions_are_not_swallowed():
    class Raises(Config):
        def __getattr__(self, key):
            return 0

        def __getattribute__(self, key):
            if key == "bad":
                raise ValueError(key)
            return object.__getattribute__(self, key)

    def fn(x, obj):
        try:
            return x + obj.bad
        except ValueError:
            return x - 1

    compare(fn, lambda: (torch.ones(2), Raises()), fullgraph=True)


@pytest.mark.parametrize("make", [Config, Fallback, PropertyRaises, Counting])
def test_hasattr_and_getattr_default(make):
    names = ["hidden_size", "n_embd", "missing", "hidden_ok", "hidden_nope", "broken", "real", "w"]

    def fn(x, obj):
        return [hasattr(obj, n) for n in names], [getattr(obj, n, -1) for n in names], x + 1

    compare(fn, lambda: (torch.ones(2), make()), fullgraph=True)


def test_hasattr_false_recompiles_when_the_attribute_appears():
    def fn(x, cfg):
        return x + 1 if hasattr(cfg, "later") else x - 1

    compiled, recorder = compiled_with_recorder(fn)
    x, cfg = torch.ones(2), Config()
    assert torch.equal(compiled(x, cfg), x - 1)
    cfg.later = 1
    assert torch.equal(compiled(x, cfg), x + 1)
    assert len(recorder.captures) == 2


def test_explicit_generic_lookup_and_instance_dict():
    class Sub(Config):
        def __getattribute__(self, key):
            if key == "n_head":
                return -1
            return super().__getattribute__(key)

    def fn(x, cfg):
        d = object.__getattribute__(cfg, "__dict__")
        return (x * object.__getattribute__(cfg, "n_embd") + cfg.n_head + cfg.heads,
                d.get("scale"), d.get("nope", 9), "n_embd" in d, "nope" in d, d["n_head"])

    compare(fn, fresh(torch.ones(2), Sub()), fullgraph=True)


def test_missing_instance_dict_key_raises_key_error_in_the_trace():
    def fn(x, cfg):
        try:
            return x + object.__getattribute__(cfg, "__dict__")["nope"]
        except KeyError:
            return x - 1

    compare(fn, fresh(torch.ones(2), Config()), fullgraph=True)


def test_a_config_made_in_the_frame():
    def fn(x):
        cfg = Config(n_embd=5)
        return x * cfg.hidden_size, hasattr(cfg, "missing"), getattr(cfg, "heads", 0)

    compare(fn, lambda: (torch.ones(2),), fullgraph=True)


class Holder:
    table = {"a": 2}


def test_mutating_kwargs_does_not_conflict_with_other_dicts():
    def fn(x, holder, **kwargs):
        scale = kwargs.pop("scale", 1)
        return x * scale + holder.table["a"], kwargs

    compiled, recorder = compiled_with_recorder(fn)
    x = torch.ones(2)
    assert repr(compiled(x, Holder(), scale=3, keep=1)) == repr(fn(x, Holder(), scale=3, keep=1))
    assert (len(recorder.captures), len(recorder.breaks)) == (1, 0), [str(b) for b in recorder.breaks]


# -- iteration and membership through the class's own methods --------------------------

class Layers(collections.abc.Sequence):
    def __init__(self, n):
        self._n = n

    def __len__(self):
        return self._n

    def __getitem__(self, i):
        if i >= self._n:
            raise IndexError(i)
        return i * 10


class OldStyle:
    def __getitem__(self, i):
        if i >= 3:
            raise IndexError(i)
        return i + 1


class Registry(collections.abc.Mapping):
    _global = {"sdpa": 1, "eager": 2}

    def __init__(self):
        self._local = {"mine": 3}

    def __getitem__(self, key):
        if key in self._local:
            return self._local[key]
        return self._global[key]

    def __iter__(self):
        return iter({**self._global, **self._local})

    def __len__(self):
        return len(self._global.keys() | self._local.keys())


def test_iterating_user_sequences_and_mappings():
    def fn(x, layers, old, reg):
        return (x + sum(layers), [v for v in old], list(reg), "sdpa" in reg, "nope" in reg, 20 in layers,
                reg.get("mine"), reg.get("nope", 0), len(layers))

    compare(fn, fresh(torch.ones(2), Layers(3), OldStyle(), Registry()), fullgraph=True)


def test_iterating_a_class_without_python_methods_still_breaks():
    class Opaque:
        pass

    def fn(x, obj):
        return x + sum(obj)

    compare(fn, fresh(torch.ones(2), Opaque()), graphs=0, breaks=1)


# -- the generic source ---------------------------------------------------------------

def test_generic_attr_source_reads_through_object_getattribute():
    cfg = Config()
    source = GenericAttrSource(LocalSource(0, "cfg"), "hidden_size")
    assert source.spec() == ("generic_attr", ("local", 0, "cfg"), "hidden_size")
    assert source.name() == "object.__getattribute__(cfg, 'hidden_size')"
    with pytest.raises(AttributeError):
        resolve(source, [cfg], {}, {}, None)  # the generic lookup knows no alias
    assert resolve(GenericAttrSource(LocalSource(0, "cfg"), "n_embd"), [cfg], {}, {}, None) == 3


# -- Hugging Face -----------------------------------------------------------------------

def test_hugging_face_config_in_one_graph():
    import transformers  # (a test dependency, as for tests/models/zoo.py)

    make = lambda: transformers.GPT2Config(n_embd=8, n_layer=2, n_head=2, vocab_size=16)  # noqa: E731

    def fn(x, cfg):
        per_layer = [c.hidden_size for c in cfg.per_layer_config]
        return (x * cfg.hidden_size + cfg.num_attention_heads, hasattr(cfg, "nope"),
                getattr(cfg, "nope", 3), getattr(cfg, "layer_types", None), cfg.is_heterogeneous,
                per_layer, len(cfg.per_layer_config))

    compare(fn, lambda: (torch.ones(2), make()), fullgraph=True)


def test_hugging_face_attention_registry():
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    def fn(x):
        found = ALL_ATTENTION_FUNCTIONS.get_interface("sdpa", None)
        return x + 1, found, "eager" in ALL_ATTENTION_FUNCTIONS, "sdpa" in ALL_ATTENTION_FUNCTIONS

    compare(fn, lambda: (torch.ones(2),), fullgraph=True)

"""Instances of user subclasses of ``dict``/``OrderedDict`` made inside the compiled frame
(Hugging Face's ``ModelOutput``, issue #12): built in the graph's frame with their own
``__init__``/``__post_init__``/``__setattr__``/``__setitem__`` traced, read (attributes,
``out[0]``, ``out["k"]``, ``to_tuple()``, iteration, ``len``, ``keys()``), mutated, and
rebuilt after the graph with the same class, dict items in order and instance dict.

Each test compares the compiled run with eager on the value, its exact type, its dict
items in order and its instance dict, the arguments' state and exceptions, and asserts
the number of graphs and breaks."""
from __future__ import annotations

import collections
import dataclasses
import importlib
from dataclasses import fields

import torch

import fastdynamo
from fastdynamo.convert_frame import Recorder

from .object_helpers import compare, fresh
from .object_helpers import same as same_value


class MiniOutput(collections.OrderedDict):
    """A small ``ModelOutput``: fields mirrored in the dict when not None."""

    def __post_init__(self):
        class_fields = fields(self)
        if not len(class_fields):
            raise ValueError(f"{self.__class__.__name__} has no fields.")
        if not all(field.default is None for field in class_fields[1:]):
            raise ValueError(f"{self.__class__.__name__} should not have more than one required field.")
        for field in class_fields:
            v = self.__dict__.get(field.name)
            if v is not None:
                self[field.name] = v

    def __setattr__(self, name, value):
        if name in {f.name for f in fields(self)} and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class Out(MiniOutput):
    logits: torch.Tensor | None = None
    hidden: torch.Tensor | None = None
    extra: tuple | None = None


@dataclasses.dataclass
class Required(MiniOutput):
    first: torch.Tensor
    second: torch.Tensor  # no default: __post_init__ raises ValueError


class PlainDict(dict):
    """A dict subclass without overrides, with an instance attribute."""

    def describe(self):
        return len(self), sorted(self)


def same(a, b) -> bool:
    """Equal values and types; for dict subclasses also the items in order and the
    instance dict."""
    if isinstance(a, dict) and type(a) is not dict:
        return type(a) is type(b) and same_value(list(a.items()), list(b.items())) \
            and same_value(vars(a), vars(b))
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return same_value(a, b)


def check(fn, make_args, graphs: int = 1, breaks: int = 0, first_break: str | None = None) -> Recorder:
    """Compiled vs eager with :func:`same`, then the graph and break counts (breaks
    include those of callees compiled on their own once the frame ran as Python) and
    the reason of the frame's own break."""
    expected_exc = got_exc = None
    try:
        expected = fn(*make_args())
    except Exception as err:  # noqa: BLE001 - compared with the compiled run
        expected, expected_exc = None, type(err)
    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.compile(fn, backend="eager", _recorder=recorder)
    try:
        got = compiled(*make_args())
    except Exception as err:  # noqa: BLE001 - compared with eager
        got, got_exc = None, type(err)
    reasons = [str(b) for b in recorder.breaks]
    assert got_exc is expected_exc, (got_exc, expected_exc, reasons)
    assert same(got, expected), (got, expected)
    assert (len(recorder.captures), len(recorder.breaks)) == (graphs, breaks), reasons
    if first_break is not None:
        assert first_break in recorder.breaks[0].reason, reasons
    return recorder


def test_constructed_and_returned_exactly():
    def fn(x):
        return Out(logits=x + 1, extra=(x, 2))

    check(fn, fresh(torch.ones(3)))
    out = fastdynamo.compile(fn, backend="eager", fullgraph=True)(torch.ones(3))
    assert type(out) is Out and list(out) == ["logits", "extra"]
    assert list(vars(out)) == ["logits", "hidden", "extra"] and out.hidden is None


def test_reads_inside_the_frame():
    def fn(x):
        out = Out(logits=x * 2, hidden=x - 1)
        keys = list(out.keys())
        total = out[0] + out["hidden"] + out.logits
        first, second = out.to_tuple()
        return total, first is out.logits, second, keys, len(out), "hidden" in out, \
            [k for k in out], bool(out), out.get("extra", 5)

    check(fn, fresh(torch.ones(2)))


def test_mutated_in_frame_then_returned():
    def fn(x):
        out = Out(logits=x)
        out.hidden = x * 3          # __setattr__ mirrors it into the dict
        out["extra"] = (x + 1,)      # __setitem__ mirrors it into the instance dict
        out.note = "attribute only"  # not a field: instance dict only
        return out

    check(fn, fresh(torch.ones(2)))


def test_none_fields_stay_out_of_the_dict():
    def fn(x):
        out = Out(logits=None, hidden=x + 1)
        return out, len(out), out[0]

    check(fn, fresh(torch.ones(2)))


def test_post_init_value_error_like_eager():
    def fn(x):
        return Required(x + 1, x)

    check(fn, fresh(torch.ones(2)), graphs=1, breaks=3, first_break="raise ValueError")


def test_out_of_range_index_like_eager():
    def fn(x):
        return Out(logits=x + 1)[1]

    check(fn, fresh(torch.ones(2)), graphs=1, breaks=2, first_break="raised IndexError")


def test_one_object_in_two_places():
    def fn(x, box):
        out = Out(logits=x + 1)
        box.held = out
        return out

    class Box:
        pass

    def run(x, box):
        out = fn(x, box)
        return out, box.held is out

    check(run, lambda: (torch.ones(2), Box()))


def test_instance_dict_through___dict__():
    def fn(x):
        out = Out(logits=x + 1)
        out.__dict__["tag"] = 1
        return out, out.tag, out.__dict__.get("hidden", "absent"), list(out.__dict__)

    check(fn, fresh(torch.ones(2)))


def test_plain_dict_subclass():
    def fn(x):
        d = PlainDict(a=x, b=2)
        d["c"] = x * 2
        d.label = "p"
        del d["b"]
        n, keys = d.describe()
        return d, n, keys, dict(d), d.pop("c") + 1, d.setdefault("z", 0)

    check(fn, fresh(torch.ones(2)))


def test_dict_subclass_across_a_graph_break():
    def fn(x):
        out = Out(logits=x + 1, hidden=x)
        print("break")  # a graph break: out is rebuilt for the rest of the frame
        return out

    check(fn, fresh(torch.ones(2)), graphs=1, breaks=1)


def test_unmodelled_ordered_dict_method_breaks():
    def fn(x):
        d = Out(logits=x + 1)
        d.popitem()  # OrderedDict.popitem on a subclass calls its __getitem__/__delitem__
        return d

    check(fn, fresh(torch.ones(2)), graphs=0, breaks=4, first_break="OrderedDict.popitem on a Out")


def test_missing_hook_breaks():
    class WithMissing(dict):
        def __missing__(self, key):
            return key * 2

    def fn(x):
        d = WithMissing(a=x + 1)
        return d["bb"], d["a"] + 1

    check(fn, fresh(torch.ones(2)), graphs=2, breaks=2, first_break="__missing__")


def test_model_output_of_transformers():
    transformers = importlib.import_module("transformers.modeling_outputs")
    BaseModelOutputWithPast = transformers.BaseModelOutputWithPast

    def fn(x):
        out = BaseModelOutputWithPast(last_hidden_state=x + 1, hidden_states=(x, x * 2))
        return out, out[0], out["hidden_states"], out.to_tuple(), list(out.keys()), len(out)

    recorder = check(fn, fresh(torch.ones(2)))
    assert recorder.captures
    out = fastdynamo.compile(fn, backend="eager", fullgraph=True)(torch.ones(2))[0]
    assert type(out) is BaseModelOutputWithPast
    assert list(vars(out)) == ["last_hidden_state", "cache", "hidden_states", "attentions"]


def test_model_output_past_key_values_property():
    transformers = importlib.import_module("transformers.modeling_outputs")

    def fn(x):
        out = transformers.BaseModelOutputWithPast(last_hidden_state=x, cache=(x * 2,))
        return out.past_key_values, out["cache"], "cache" in out

    check(fn, fresh(torch.ones(2)))


def test_model_output_pytree_registration_is_traced():
    # __post_init__ calls _register_model_output_pytree_node(type(self)): in a trace
    # torch.compiler.is_compiling() is True and it returns at once, as under
    # torch.compile; eager's call is a no-op too, since __init_subclass__ registered
    # the class when it was made (the registry is left as it was).
    generic = importlib.import_module("transformers.utils.generic")
    transformers = importlib.import_module("transformers.modeling_outputs")
    registered = set(generic._registered_model_output_types)
    assert transformers.CausalLMOutputWithPast in registered

    def fn(x):
        return transformers.CausalLMOutputWithPast(logits=x * 2)

    check(fn, fresh(torch.ones(2)))
    assert generic._registered_model_output_types == registered


class Recorded(collections.OrderedDict):
    """OrderedDict's own __init__ stores through the subclass's __setitem__."""

    def __setitem__(self, key, value):
        super().__setitem__(key, (value, "seen"))


class Counted(dict):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.count = len(self)


def test_builtin_init_of_ordered_dict_calls_the_subclass_setitem():
    def fn(x):
        return Recorded([("a", x + 1)], b=2)

    check(fn, fresh(torch.ones(2)))


def test_python_init_over_dict_init():
    def fn(x):
        d = Counted({"a": x + 1}, b=2)
        return d, d.count, list(d.items())

    check(fn, fresh(torch.ones(2)))


def test_finfo_of_a_constant_dtype_is_a_constant():
    def fn(x):
        return x.clamp(min=torch.finfo(x.dtype).min / 2), torch.iinfo(torch.int8).max

    check(fn, fresh(torch.ones(2)))


def test_attributes_of_an_outside_dict_subclass_are_read():
    # dict's __getattribute__ is the generic lookup: not a customised one
    class Tagged(dict):
        pass

    def fn(x, d):
        return x * d.scale

    def make():
        d = Tagged(a=1)
        d.scale = 3
        return torch.ones(2), d

    check(fn, make)


def test_compare_with_objects_helper():
    # the shared helper compares dict items; instance dicts are compared above
    def fn(x):
        return Out(logits=x * 2)

    compare(fn, fresh(torch.ones(2)), fullgraph=True)


def test_object_new_of_a_dict_subclass_raises_like_eager():
    def fn(x):
        return object.__new__(PlainDict), x + 1

    check(fn, fresh(torch.ones(2)), graphs=0, breaks=1, first_break="dict.__new__")


def _outside_out():
    torch.manual_seed(0)
    return Out(logits=torch.randn(2), hidden=torch.randn(2)), torch.ones(2)


def test_outside_dict_subclass_items_are_read():
    def fn(out, x):
        return (out[0] + out["hidden"] + out.logits * x, out.to_tuple(), len(out), list(out.keys()),
                "logits" in out, "extra" in out, [k for k in out], dict(out))

    check(fn, _outside_out)


def test_outside_dict_subclass_recompiles_when_its_items_change():
    def fn(out, x):
        return x + len(out), list(out)

    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.compile(fn, backend="eager", _recorder=recorder)
    out, x = _outside_out()
    assert compiled(out, x)[1] == ["logits", "hidden"]
    out["extra"] = 1  # a new key: the items guard fails
    assert compiled(out, x)[1] == ["logits", "hidden", "extra"]
    assert (len(recorder.captures), len(recorder.breaks)) == (2, 0)


LOUD_CALLS: list = []


class Loud(dict):
    def __getitem__(self, key):
        LOUD_CALLS.append(key)
        return dict.__getitem__(self, key) * 10


def test_guards_do_not_call_the_overridden_getitem():
    def fn(d, x):
        return x * dict.get(d, "a") + d["a"]

    d = Loud(a=2)
    check(fn, lambda: (d, torch.ones(2)))
    before = len(LOUD_CALLS)
    compiled = fastdynamo.compile(fn, backend="eager")
    compiled(d, torch.ones(2))
    compiled(d, torch.ones(2))
    # one call each (the traced d["a"], its append replayed): guards read the items
    # through dict_items_of, never through the override
    assert len(LOUD_CALLS) - before == 2


def test_changing_an_outside_dict_subclass_breaks():
    def fn(out, x):
        out["extra"] = x * 2  # Out.__setitem__ stores through OrderedDict's: not modelled
        return out

    check(fn, _outside_out, graphs=1, breaks=2, first_break="from outside the frame")


class Registry(dict):
    def get(self, key):
        return super().get(key) or {}


REGISTRY = Registry(known={"scale": 3})


def test_registry_read_through_super_get():
    def fn(x):
        return x * REGISTRY.get("known")["scale"], REGISTRY.get("unknown")

    check(fn, fresh(torch.ones(2)))


def test_dict_subclass_read_after_a_graph_break():
    def fn(x):
        out = Out(logits=x + 1, hidden=x)
        print("break")  # the rest runs in a resume function, where out comes from outside
        return out[0] + out["hidden"] + len(out), out

    check(fn, fresh(torch.ones(2)), graphs=2, breaks=1)

"""``copy.deepcopy`` inside a compiled frame (issue #12: T5 deep-copies its config on
every call): plain data and plain user objects are copied in the graph's frame, the copy
keeps the original's sharing and key order, the original never changes, ``delattr``
and ``del obj.name`` work on the copy, and what deepcopy would not treat as plain data
(``__deepcopy__``, ``__slots__``, tensors) runs as Python with the same result."""
import copy

import torch

from .helpers import check, compiled_with_recorder
from .object_helpers import AttributeMapped


class Settings:
    def __init__(self):
        self.scale = 2
        self.name = "s"
        self.sizes = [1, 2]
        self.labels = {0: "a", 1: "b"}
        self.pair = (1, "x")


class Mapped(AttributeMapped):
    """Hugging Face's config lookup: ``attribute_map`` through ``__getattribute__``."""

    attribute_map = {"hidden": "width"}

    def __init__(self):
        self.width = 3
        self.decoder_start = 5


class WithDeepcopy(Settings):
    def __deepcopy__(self, memo):
        made = WithDeepcopy()
        made.name = "custom"
        return made


class Slotted:
    __slots__ = ("a",)

    def __init__(self):
        self.a = 1


def test_copy_is_changed_and_the_original_is_not():
    def fn(x, s):
        c = copy.deepcopy(s)
        c.scale = 5
        c.sizes.append(3)
        c.labels[2] = "c"
        return x * c.scale + s.scale, len(c.sizes), len(s.sizes), list(c.labels), list(s.labels), c.pair

    check(fn, torch.ones(2), Settings(), graphs=1, breaks=0, fullgraph=True)


def test_copy_leaving_the_frame_is_a_new_object_with_copied_attributes():
    settings = Settings()

    def fn(x, s):
        return x + 1, copy.deepcopy(s)

    compiled, recorder = compiled_with_recorder(fn)
    _, made = compiled(torch.ones(2), settings)
    assert len(recorder.captures) == 1 and not recorder.breaks
    assert type(made) is Settings and made is not settings
    assert vars(made) == vars(settings) and list(vars(made)) == list(vars(settings))
    assert made.sizes is not settings.sizes and made.labels is not settings.labels
    made.sizes.append(9)
    assert settings.sizes == [1, 2]


def test_shared_references_stay_shared_in_the_copy_and_aliasing_is_guarded():
    def fn(x, s):
        c = copy.deepcopy(s)
        c.sizes.append(7)
        return x + len(c.labels), c.labels is c.sizes, len(c.labels)

    shared, separate = Settings(), Settings()
    shared.labels = shared.sizes = [1]
    separate.labels, separate.sizes = [1], [1]
    compiled, recorder = compiled_with_recorder(fn)
    for obj in (separate, shared, separate):
        got, want = compiled(torch.ones(1), obj), fn(torch.ones(1), copy.deepcopy(obj))
        assert torch.equal(got[0], want[0]) and got[1:] == want[1:], (got, want)
    assert not recorder.breaks and len(recorder.captures) >= 2  # the aliasing change recompiled


def test_custom_lookup_and_setattr_run_on_the_copy():
    def fn(x, cfg):
        c = copy.deepcopy(cfg)
        value = c.decoder_start
        delattr(c, "decoder_start")
        c.hidden = 7  # through attribute_map: c.width
        return x * c.hidden + value, hasattr(c, "decoder_start"), cfg.width, cfg.decoder_start

    check(fn, torch.ones(2), Mapped(), graphs=1, breaks=0, fullgraph=True)


def test_del_of_a_missing_attribute_raises_attribute_error_in_the_frame():
    def fn(x, s):
        c = copy.deepcopy(s)
        del c.scale
        try:
            del c.scale
        except AttributeError:
            return x - 1, hasattr(c, "scale")
        return x, True

    check(fn, torch.ones(2), Settings(), graphs=1, breaks=0, fullgraph=True)


def test_stores_of_the_frame_are_copied():
    def fn(x, s):
        s.scale = 4
        s.extra = 1
        c = copy.deepcopy(s)
        return x * c.scale, c.extra, list(vars(c))

    check(fn, torch.ones(2), Settings(), graphs=1, breaks=0, fullgraph=True)


def test_instance_dict_of_a_copy_is_copied_in_order():
    def fn(x, s):
        c = copy.deepcopy(s)
        out = copy.deepcopy(c.__dict__)
        out["scale"] = 9
        return x * c.scale, list(out.items())

    check(fn, torch.ones(2), Settings(), graphs=1, breaks=0, fullgraph=True)


def test_plain_containers_and_constants():
    def fn(x, data):
        c = copy.deepcopy(data)
        c["l"].append(torch.float32)
        return x + len(c["l"]), c, data

    check(fn, torch.ones(2), {"l": [1, (2, "a")], "n": None, "f": 1.5}, graphs=1, breaks=0, fullgraph=True)


def test_unmodelled_values_run_as_python_with_the_same_result():
    def with_method(x, s):
        return x + 1, copy.deepcopy(s).name

    def slotted(x, s):
        return x + 1, copy.deepcopy(s).a

    def tensors(x, data):
        c = copy.deepcopy(data)
        c[0].add_(1)
        return x + c[0], data[0]

    check(with_method, torch.ones(2), WithDeepcopy(), graphs=1, fullgraph=False)
    check(slotted, torch.ones(2), Slotted(), graphs=1, fullgraph=False)
    check(tensors, torch.ones(2), [torch.zeros(2)], graphs=1, breaks=1, fullgraph=False)


def test_hugging_face_get_text_config_copies_in_one_graph():
    transformers = __import__("pytest").importorskip("transformers")
    config = transformers.T5Config(d_model=8, d_kv=4, d_ff=16, num_layers=1, num_heads=2, vocab_size=32,
                                   decoder_start_token_id=0)

    def fn(x, cfg):
        decoder = cfg.get_text_config(decoder=True)
        return (x * decoder.d_model, decoder is cfg, decoder.num_hidden_layers, decoder.start_token_id,
                hasattr(decoder, "decoder_start_token_id"), cfg.decoder_start_token_id)

    compiled, recorder = compiled_with_recorder(fn)
    got, want = compiled(torch.ones(2), config), fn(torch.ones(2), config)
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    assert len(recorder.captures) == 1 and not recorder.breaks, [str(b) for b in recorder.breaks]
    assert config.decoder_start_token_id == 0  # the original keeps its attributes

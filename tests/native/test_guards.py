"""Guard sets: every source and check, fast and verbose paths, bad specs."""
from __future__ import annotations

import types

import pytest
import torch

from fastdynamo import guards as g
from fastdynamo.guards.sources import (
    AttrSource,
    BuiltinSource,
    ClosureSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    TypeSource,
)

CONFIG_FLAG = True


class Holder:
    def __init__(self):
        self.size = 3
        self.items = {"k": [10, 20]}


def frame_for(native, *args, closure=None, global_ns=None):
    code = compile("def f(a, b, c): pass", "<test>", "exec").co_consts[0]
    values = list(args) + [None] * (3 - len(args))
    return native.Frame(code, values, global_ns if global_ns is not None else globals(), closure=closure)


def check(native, guards, frame):
    guard_set = g.compile_guards(guards)
    return guard_set.check(frame), guard_set.failure_reason(frame)


A, B = LocalSource(0, "a"), LocalSource(1, "b")


@pytest.mark.parametrize(
    "guard, value, reason",
    [
        (g.Guard(A, g.type_is(int)), 3, None),
        (g.Guard(A, g.type_is(int)), 3.0, "type(a) is int, got float"),
        (g.Guard(A, g.equals(4)), 4, None),
        (g.Guard(A, g.equals(4)), 8, "a == 4, got 8"),
        (g.Guard(A, g.equals(1)), True, "a == 1, got True"),
        (g.Guard(A, g.equals((1, "x"))), (1, "x"), None),
        (g.Guard(A, g.len_is(2)), [1, 2], None),
        (g.Guard(A, g.len_is(2)), [1], "len(a) == 2, got 1"),
        (g.Guard(A, g.is_none()), None, None),
        (g.Guard(A, g.is_none()), 0, "a is None, got int"),
        (g.Guard(A, g.not_none()), None, "a is not None, got None"),
    ],
)
def test_value_checks(native, guard, value, reason):
    passed, text = check(native, [guard], frame_for(native, value))
    assert passed is (reason is None)
    assert text == reason


def test_identity(native):
    marker = object()
    guards = [g.Guard(A, g.id_is(marker))]
    assert check(native, guards, frame_for(native, marker)) == (True, None)
    passed, text = check(native, guards, frame_for(native, object()))
    assert not passed and text.startswith("a is <object object at")


def test_sources(native):
    holder = Holder()
    cell = types.CellType(7)
    guards = [
        g.Guard(AttrSource(A, "size"), g.equals(3)),
        g.Guard(ItemSource(ItemSource(AttrSource(A, "items"), "k"), 1), g.equals(20)),
        g.Guard(GlobalSource("CONFIG_FLAG"), g.equals(True)),
        g.Guard(BuiltinSource("len"), g.id_is(len)),
        g.Guard(ClosureSource(0, "free"), g.equals(7)),
        g.Guard(TypeSource(A), g.id_is(Holder)),
    ]
    assert check(native, guards, frame_for(native, holder, closure=(cell,))) == (True, None)
    holder.items["k"][1] = 21
    assert check(native, guards, frame_for(native, holder, closure=(cell,))) == (
        False,
        "a.items['k'][1] == 20, got 21",
    )
    cell.cell_contents = 8
    holder.items["k"][1] = 20
    assert check(native, guards, frame_for(native, holder, closure=(cell,)))[1] == "free == 7, got 8"


def test_global_changes_fail(native):
    namespace = {"CONFIG_FLAG": False}
    guards = [g.Guard(GlobalSource("CONFIG_FLAG"), g.equals(True))]
    assert check(native, guards, frame_for(native, 0, global_ns=namespace))[1] == "CONFIG_FLAG == True, got False"
    del namespace["CONFIG_FLAG"]
    assert check(native, guards, frame_for(native, 0, global_ns=namespace))[1] == "CONFIG_FLAG could not be read"


def test_missing_attribute_fails_without_leaving_an_exception(native):
    guards = [g.Guard(AttrSource(A, "missing"), g.equals(1))]
    assert check(native, guards, frame_for(native, Holder())) == (False, "a.missing could not be read")


def test_tensor_match(native):
    example = torch.zeros(4, 3)
    guards = [g.Guard(A, g.tensor_match(example))]
    assert check(native, guards, frame_for(native, torch.ones(4, 3))) == (True, None)
    cases = [
        (torch.zeros(8, 3), "a.size()[0] == 4, got 8"),
        (torch.zeros(3, 4).t(), "a.stride()[0] == 3, got 1"),
        (torch.zeros(4, 3, dtype=torch.float64), "a.dtype == torch.float32, got torch.float64"),
        (torch.zeros(4, 3, device="meta"), "a.device == device(type='cpu'), got device(type='meta')"),
        (torch.zeros(4, 3, requires_grad=True), "a.requires_grad == False, got True"),
        (torch.zeros(4, 3, 1), "a.ndim == 2, got 3"),
        (torch.nn.Parameter(torch.zeros(4, 3)), "type(a) is torch.Tensor, got torch.nn.parameter.Parameter"),
        (4.0, "type(a) is torch.Tensor, got float"),
    ]
    for value, reason in cases:
        assert check(native, guards, frame_for(native, value)) == (False, reason)


def test_tensor_dynamic_dims(native):
    guards = [g.Guard(A, g.tensor_match(torch.zeros(4, 3), sizes=(None, 3), strides=(None, 1)))]
    assert check(native, guards, frame_for(native, torch.zeros(9, 3)))[0]
    assert check(native, guards, frame_for(native, torch.zeros(9, 2)))[1] == "a.size()[1] == 3, got 2"


def test_torch_state(native):
    guards = [g.Guard(None, g.grad_mode(True)), g.Guard(None, g.default_dtype(torch.float32))]
    frame = frame_for(native, 0)
    assert check(native, guards, frame) == (True, None)
    with torch.no_grad():
        assert check(native, guards, frame) == (False, "torch.is_grad_enabled() == True, got False")
    torch.set_default_dtype(torch.float64)
    try:
        assert check(native, guards, frame) == (
            False,
            "torch.get_default_dtype() == torch.float32, got torch.float64",
        )
    finally:
        torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("grad, inference, autocast", [(g_, i, a) for g_ in (False, True) for i in (False, True)
                                                      for a in (False, True)])
def test_mode_guards_checked_at_once_fail_exactly_when_one_differs(native, grad, inference, autocast):
    """The fast path compares grad, inference and autocast mode in one step: each state of
    the three modes passes the guards that expect it, and fails as the verbose path does."""
    guards = [g.Guard(None, g.grad_mode(grad)), g.Guard(None, g.inference_mode(inference)),
              g.Guard(None, g.autocast(autocast)), g.Guard(None, g.default_dtype(torch.float32))]
    frame = frame_for(native, 0)
    for now_grad in (False, True):
        for now_inference in (False, True):
            for now_autocast in (False, True):
                with torch.inference_mode(now_inference), torch.set_grad_enabled(now_grad), \
                        torch.autocast("cpu", enabled=now_autocast):
                    expected = (torch.is_grad_enabled(), torch.is_inference_mode_enabled(),
                                torch._C._is_any_autocast_enabled()) == (grad, inference, autocast)
                    passed, reason = check(native, guards, frame)
                assert passed is expected and (reason is None) is expected


def test_a_mode_guarded_both_ways_never_passes(native):
    guards = [g.Guard(None, g.grad_mode(True)), g.Guard(None, g.grad_mode(False))]
    frame = frame_for(native, 0)
    for enabled in (False, True):
        with torch.set_grad_enabled(enabled):
            passed, reason = check(native, guards, frame)
        assert not passed and reason.startswith("torch.is_grad_enabled() == ")


def test_checks_on_a_node_run_before_its_children(native):
    # The type check on `a` fails first; `a.size` is never read from the int.
    guards = [g.Guard(AttrSource(A, "size"), g.equals(3)), g.Guard(A, g.type_is(Holder))]
    assert check(native, guards, frame_for(native, 5))[1] == "type(a) is test_guards.Holder, got int"


@pytest.mark.parametrize(
    "spec, message",
    [
        ([("local", 0, "a")], "a guard is a \\(source, check\\) pair"),
        ([(("nowhere", 0), ("is_none",))], "unknown source kind"),
        ([(("local", 0, "a"), ("bogus",))], "unknown check kind"),
        ([(("local", 0, "a"), ("equals", object()))], "equals needs an int"),
        ([(("attr", ("local", 0, "a"), 3), ("is_none",))], "expected a str"),
        ([(("local", 0, "a"), ("type_is", 3))], "type_is needs a type"),
        ([(("local", 0, "a"), ("tensor", 1, (), ()))], "tensor example lacks tensor attributes"),
    ],
)
def test_bad_specs_raise_value_error(native, spec, message):
    with pytest.raises(ValueError, match=message):
        native.GuardSet(spec)


def test_guard_text_matches_native_reason_format():
    assert g.Guard(A, g.equals(4)).text() == "a == 4"
    assert g.Guard(AttrSource(A, "w"), g.len_is(2)).text() == "len(a.w) == 2"
    assert "size=(4, ?)" in g.Guard(A, g.tensor_match(torch.zeros(4, 2), sizes=(4, None))).text()


def test_a_source_hashes_as_its_fields_computed_once() -> None:
    """Sources key dicts all through a trace: the dataclass hash (of the field tuple),
    kept after the first call; equal sources still find each other."""
    base = LocalSource(0, "self")
    source = AttrSource(ItemSource(AttrSource(base, "layers"), 0), "weight")
    assert "_hash" not in source.__dict__
    assert hash(source) == hash((ItemSource(AttrSource(base, "layers"), 0), "weight"))
    assert source.__dict__["_hash"] == hash(source)
    again = AttrSource(ItemSource(AttrSource(LocalSource(0, "self"), "layers"), 0), "weight")
    assert {source: 1}[again] == 1 and again == source
    assert AttrSource(base, "bias") != AttrSource(base, "weight")

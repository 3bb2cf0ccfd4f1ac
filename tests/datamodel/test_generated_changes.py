"""Property test: what a trace relied on changes between two calls. Generated programs
read classes, instances, functions, dicts, builtins and torch's state (attributes and
their absence, ``getattr`` defaults, ``hasattr``, operators a class may or may not
define, methods, default arguments, code objects, globals, the default dtype and
torch.backends flags); between the first and the
second compiled call one generated change is made to that world (a class gains an
attribute, an operator or ``__getattr__``, a method or a function's code is replaced, a
global or builtin is rebound...). The second call must give eager's answer after the
same change, which only a guard on what changed can ensure: an entry reused after the
change is a wrong result. Every program runs in one graph (``fullgraph=True``) and the
second call adds at most one, except after a hook is registered on a module the program
calls: then the second call must break, saying the module has hooks. Each example builds a fresh world (classes included), so
examples never see each other's changes. ``--hypothesis-profile=long`` runs thousands."""
from __future__ import annotations

import torch
from examples_budget import share_of_profile
from hypothesis import given

import fastdynamo
from fastdynamo.convert_frame import Recorder

from .object_helpers import build_program, programs_with_a_change


def make_world() -> dict:
    """Fresh classes, instances and functions: the globals of one example's program."""

    class Base:
        scale = 2

        def __init__(self):
            self.n = 1

        def value(self, t):
            return t * self.scale

    class Child(Base):
        pass

    class Table(dict):
        pass

    def helper(t, k=2):
        return t * k

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = torch.nn.ReLU()
            self.scale = 2.0

        def forward(self, t):
            return self.block(t - 1) * self.scale

    return {"torch": torch, "Base": Base, "Child": Child, "helper": helper, "obj": Child(),
            "table": Table(a=1.0), "LIMIT": 3, "names": {"k": 1.0}, "net": Net()}


# Over `a` (the running tensor), the world's globals, `log` (returned). {c}: 1..3.
STATEMENTS = [
    "a = a * obj.scale + obj.n",
    "a = a + getattr(obj, 'extra', {c}) + hasattr(obj, 'flag') * 10",
    "a = obj.value(a) + Child.scale",
    "a = a + helper(a) + helper(a, {c})",
    "a = a * (obj == obj) + (obj != Child())",
    "a = a + table['a'] + len(table) + ('b' in table)",
    "a = a * LIMIT + len(names) + names.get('k', 0.0)",
    "a = a + abs(-{c}) + len([1, 2])",
    "a = a * torch.get_num_threads() + isinstance(obj, Base)",
    "b = Child()\na = a + getattr(b, 'extra', 0) + b.scale * hasattr(b, 'flag')",
    "try:\n    a = a + obj.missing\nexcept AttributeError:\n    a = a - {c}",
    "a = a + getattr(Child, 'extra', {c}) + hasattr(Base, 'flag') + Child.scale",
    "a = a + type(obj).scale + (type(obj) is Child) + len(type(obj).__name__)",
    "a = net(a) + net.training",
    "a = net.block(a) + getattr(net, 'extra', {c})",
    "a = a + torch.ones(3) * 1.5 + (torch.get_default_dtype() is torch.float64) * {c}",
    "a = a * (2 if torch.backends.cudnn.deterministic else 3) + torch.backends.mkldnn.enabled",
]
RETURNS = ["return a, log", "return a, log, obj.n"]
# Changes to the world between the two calls (`w` is the world's namespace).
CHANGES = [
    "pass",
    "w['Base'].scale = 5",
    "w['Child'].scale = 7",
    "w['Child'].extra = 4",
    "w['Base'].flag = True",
    "w['Base'].__getattr__ = lambda self, name: 11",
    "w['Base'].missing = 13",
    "w['Base'].__eq__ = lambda self, other: 17",
    "w['Base'].value = lambda self, t: t - 1",
    "w['obj'].extra = 19",
    "w['obj'].n = 23",
    "w['helper'].__defaults__ = (29,)",
    "w['helper'].__code__ = (lambda t, k=2: t + k).__code__",
    "w['helper'] = lambda t, k=2: t - k",
    "w['LIMIT'] = 31",
    "w['names']['k'] = 37.0",
    "w['names']['other'] = 1.0",
    "w['abs'] = lambda v: 41",
    "w['len'] = lambda v: 43",
    "w['table']['b'] = 2.0",
    "type(w['table']).__getitem__ = lambda self, key: 47.0",
    "type(w['table']).__len__ = lambda self: 53",
    "w['obj'].__class__ = w['Base']",
    "torch.set_num_threads(3 - min(torch.get_num_threads(), 2))",
    "torch.set_default_dtype(torch.float64)",
    "torch.backends.cudnn.deterministic = not torch.backends.cudnn.deterministic",
    "torch.backends.mkldnn.enabled = not torch.backends.mkldnn.enabled",
    "w['net'].eval()",
    "w['net'].scale = 5.0",
    "w['net'].block = torch.nn.Tanh()",
    "w['net'].extra = 59",
    "w['net'].forward = lambda t: t * 61",
    "type(w['net']).forward = lambda self, t: t * 67",
    "w['net'].register_forward_hook(lambda m, args, out: out + 71)",
    "w['net'].block.register_forward_pre_hook(lambda m, args: (args[0] + 73,))",
]
# Changes after which a program that makes one of the calls cannot be captured: its
# second call must break and say why.
BREAKING_CHANGES = {"w['net'].register_forward_hook": ("has hooks", ("net(",)),
                    "w['net'].block.register_forward_pre_hook": ("has hooks", ("net(", "net.block("))}
_CHANGE_CODE = {change: compile(change, "<change>", "exec") for change in CHANGES}


def _torch_state() -> tuple:
    """The global torch state the changes touch, to give back after each change."""
    return (torch.get_num_threads(), torch.get_default_dtype(), torch.backends.cudnn.deterministic,
            torch.backends.mkldnn.enabled)


def _restore(state: tuple) -> None:
    threads, dtype, deterministic, mkldnn = state
    torch.set_num_threads(threads)
    torch.set_default_dtype(dtype)
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.mkldnn.enabled = mkldnn


def _outcome(fn):
    try:
        # (float32 whatever the default dtype: the input's own guard must not be what
        # notices a new default)
        return fn(torch.arange(3.0, dtype=torch.float32)), None
    except Exception as err:  # noqa: BLE001 - compared with the other run's
        return None, (type(err), str(err))


def _same(actual, expected) -> bool:
    if isinstance(expected, torch.Tensor):
        return isinstance(actual, torch.Tensor) and actual.dtype == expected.dtype and torch.equal(actual, expected)
    if isinstance(expected, (tuple, list)):
        return type(actual) is type(expected) and len(actual) == len(expected) and \
            all(_same(a, e) for a, e in zip(actual, expected, strict=True))
    return type(actual) is type(expected) and actual == expected


@share_of_profile(1.0)  # all of the profile's examples, without the explain phase's tracer
@given(programs_with_a_change("x", STATEMENTS, RETURNS, CHANGES, most=4))
def test_a_change_after_the_trace_gives_eagers_answer(program):
    source, change = program
    eager = build_program(source, make_world(), "<generated-changes>")
    prog = build_program(source, make_world(), "<generated-changes>")
    state = _torch_state()
    fastdynamo.reset()
    recorder = Recorder()
    why = next((reason for text, (reason, calls) in BREAKING_CHANGES.items()
                if change.startswith(text) and any(call in source for call in calls)), None)
    compiled = fastdynamo.compile(prog, backend="eager", fullgraph=why is None, _recorder=recorder)
    try:
        for round_ in ("before", "after"):
            if round_ == "after":
                for fn in (eager, prog):
                    _restore(state)  # each world changes from the same state
                    exec(_CHANGE_CODE[change], {"torch": torch}, {"w": fn.__globals__})  # noqa: S102
            expected, expected_error = _outcome(eager)
            actual, actual_error = _outcome(compiled)
            where = f"{source}{round_}: {change}"
            assert actual_error == expected_error, where
            assert _same(actual, expected), f"{actual!r} != {expected!r}\n{where}"
        reasons = [str(b) for b in recorder.breaks]
        if why is None:
            assert not reasons and len(recorder.captures) in (1, 2), (source, change)
        else:
            assert reasons and all(why in r for r in reasons), (reasons, source, change)
    finally:
        _restore(state)
        fastdynamo.reset()

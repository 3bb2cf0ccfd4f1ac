"""Compiled-vs-eager checks for the data-model tests of user objects, modules and
functions: values, types, the state of the arguments after the call (side effects),
exceptions, and how many graphs and breaks the compiled run produced."""
from __future__ import annotations

import copy
import functools
import textwrap
import types

import torch
from hypothesis import strategies as st

import fastdynamo
from fastdynamo.convert_frame import Recorder


def same(a, b) -> bool:
    """Equal values of the same types, tensors compared exactly, objects by their
    class and instance attributes (in order)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        if type(a) is not dict and hasattr(a, "__dict__") and not same(vars(a), vars(b)):
            return False  # a dict subclass: its instance dict too
        return list(a) == list(b) and all(same(dict.__getitem__(a, k), dict.__getitem__(b, k)) for k in a)
    if isinstance(a, torch.nn.Module):
        return a is b or same(dict(a.named_parameters()), dict(b.named_parameters()))
    if isinstance(a, types.MethodType):
        return a.__func__ is b.__func__ and same(a.__self__, b.__self__)
    if isinstance(a, functools.partial):
        return same((a.func, a.args, a.keywords), (b.func, b.args, b.keywords))
    if isinstance(a, types.FunctionType):
        cells = [[c.cell_contents for c in f.__closure__ or ()] for f in (a, b)]
        return a is b or (a.__code__ is b.__code__ and same(*cells))
    if isinstance(a, type):
        return a == b
    if hasattr(a, "__dict__"):
        return same(vars(a), vars(b))
    if hasattr(type(a), "__slots__") and not isinstance(a, (int, float, str)):
        names = [n for k in type(a).__mro__ for n in getattr(k, "__slots__", ())]
        return all(same(getattr(a, n, None), getattr(b, n, None)) for n in names)
    return a == b


def _run(fn, args):
    try:
        return fn(*args), None
    except Exception as err:  # noqa: BLE001 - compared with the compiled run
        return None, type(err)


def compare(fn, make_args, graphs: int = 1, breaks: int = 0, fullgraph: bool = False) -> Recorder:
    """Run ``fn(*make_args())`` eagerly and compiled (fresh arguments for each run) and
    assert the same result, argument state and exception; then the capture counts."""
    expected_args = make_args()
    expected, expected_exc = _run(fn, expected_args)
    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.compile(fn, backend="eager", fullgraph=fullgraph, _recorder=recorder)
    got_args = make_args()
    got, got_exc = _run(compiled, got_args)
    assert got_exc == expected_exc, (got_exc, expected_exc, [str(b) for b in recorder.breaks])
    assert same(got, expected), (got, expected)
    assert same(list(got_args), list(expected_args)), "arguments differ after the call"
    reasons = [str(b) for b in recorder.breaks]
    assert (len(recorder.captures), len(recorder.breaks)) == (graphs, breaks), reasons
    return recorder


def counts(compiled_recorder: Recorder) -> tuple[int, int]:
    return len(compiled_recorder.captures), len(compiled_recorder.breaks)


def fresh(*values):
    """``make_args`` returning deep copies of ``values`` on every call."""
    return lambda: copy.deepcopy(values)


class AttributeMapped:
    """Hugging Face's ``PreTrainedConfig`` lookup: names in the class's ``attribute_map``
    read and write another attribute, through ``__getattribute__`` and ``__setattr__``."""

    attribute_map: dict = {}

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)


def build_program(source: str, namespace: dict, filename: str):
    """The function ``prog`` defined by a generated program's ``source``, compiled under
    ``filename`` with ``namespace`` (copied) as its globals, named like a module's."""
    namespace = {"__name__": "generated", **namespace}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - test programs
    return namespace["prog"]


def program_source(signature: str, body: list[str]) -> str:
    """``def prog(<signature>):`` with ``body``, one statement (or block) per item."""
    return f"def prog({signature}):\n" + textwrap.indent("\n".join(body), "    ") + "\n"


def programs_with_a_change(signature: str, statements: list[str], returns: list[str], changes: list[str],
                           most: int):
    """Programs of 1..``most`` statements (``{c}`` drawn from 1..3) over a running tensor
    ``a`` and a ``log`` list, one of ``returns``, and the change made to the arguments
    between the first and the second compiled call."""
    @st.composite
    def programs(draw):
        body = ["a = x", "log = []"]
        for _ in range(draw(st.integers(1, most))):
            body.append(draw(st.sampled_from(statements)).format(c=draw(st.integers(1, 3))))
        body.append(draw(st.sampled_from(returns)))
        return program_source(signature, body), draw(st.sampled_from(changes))
    return programs()


def programs_with_break_tags(signature: str, statements: list[tuple[str, frozenset]], returns: list[str]):
    """Programs of 1..4 tagged statements (``{c}`` drawn from 1..3) after ``a = x * 2``,
    one of ``returns``, with the union of the chosen statements' tags (when they break)."""
    @st.composite
    def programs(draw):
        chosen = [draw(st.sampled_from(statements)) for _ in range(draw(st.integers(1, 4)))]
        body = ["a = x * 2"] + [text.format(c=draw(st.integers(1, 3))) for text, _ in chosen]
        body.append(draw(st.sampled_from(returns)))
        return program_source(signature, body), frozenset().union(*(tags for _, tags in chosen))
    return programs()

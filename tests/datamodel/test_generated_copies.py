"""Property test: generated programs that copy (``copy.copy``) and deep-copy plain data and user objects (a
Hugging Face style config with ``attribute_map``, a plain settings object whose lists
may be shared), change the copies (assignment, ``delattr``, ``del``, list and dict
changes, ``vars``), and ask ``is`` between values from outside the frame. Every
statement is modelled, so each program compiles with ``fullgraph=True`` into one graph
and gives eager's values, types and argument state; a second call with arguments that
share differently (two attributes holding one list, or not) or that gained an attribute
must recompile rather than reuse the first entry. ``--hypothesis-profile=long`` runs
thousands."""
from __future__ import annotations

import copy

import torch
from hypothesis import given
from hypothesis import strategies as st

import fastdynamo
from fastdynamo.convert_frame import Recorder

from .object_helpers import AttributeMapped, build_program, programs_with_a_change, same


class Config(AttributeMapped):
    attribute_map = {"hidden": "width"}

    def __init__(self, width):
        self.width = width
        self.decoder_layers = 2
        self.labels = {0: "a", 1: "b"}


class Settings:
    def __init__(self):
        self.scale = 2
        self.sizes = [1, 2]
        self.extra = [3]


NAMESPACE = {"copy": copy, "torch": torch}

# Over: `a` (the running tensor), `cf` (a Config), `st` (a Settings), `log` (returned).
# {c}: 1..3.
STATEMENTS = [
    "c = copy.deepcopy(cf)\nc.hidden = {c}\na = a * c.hidden + cf.hidden\nlog.append(c.width)",
    "c = copy.deepcopy(cf)\nn = c.decoder_layers\ndelattr(c, 'decoder_layers')\nc.layers = n + {c}\n"
    "a = a + c.layers + hasattr(c, 'decoder_layers')\nlog.append(sorted(vars(c)))",
    "c = copy.deepcopy(st)\nc.sizes.append({c})\na = a + len(c.sizes) + len(st.sizes) + (c.sizes is c.extra)",
    "c = copy.deepcopy(st)\ndel c.scale\na = a + hasattr(c, 'scale') + len(vars(c))",
    "d = copy.deepcopy(vars(copy.deepcopy(st)))\nd['scale'] = {c}\na = a + d['scale']\nlog.append(list(d))",
    "c = copy.deepcopy(cf)\nc.labels[{c}] = 'x'\na = a + len(c.labels) + len(cf.labels)\nlog.append(c.labels)",
    "a = a + (st.sizes is st.extra) + (st.sizes is not st.extra) * {c}",
    "st.scale = {c}\nc = copy.deepcopy(st)\na = a * c.scale\nlog.append(st.scale)",
    "pair = copy.deepcopy([st.sizes, st.extra, (st.scale, 'k')])\npair[0].append({c})\n"
    "a = a + len(pair[1]) + (pair[0] is pair[1])\nlog.append(pair)",
    # copy.copy: new containers and objects sharing their values
    "c = copy.copy(st)\nshared = c.sizes is st.sizes\nc.sizes = c.sizes + [{c}]\nc.scale = {c}\n"
    "a = a * st.scale + len(st.sizes) + len(c.sizes) + shared",
    "c = copy.copy(cf)\nc.hidden = {c}\na = a * c.hidden + cf.hidden + (c.labels is cf.labels)\nlog.append(c)",
    "lst = copy.copy(st.sizes)\nlst.append({c})\nd = copy.copy(vars(st))\nd['k'] = 1\n"
    "a = a + len(lst) + len(st.sizes) + len(d)\nlog.append(list(d))",
]
RETURNS = ["return a, log", "return a, log, st.sizes, cf.width"]

# Between the two compiled calls: the second call's arguments share differently or
# have another attribute (each must recompile, not reuse the entry).
CHANGES = ["pass", "st.extra = st.sizes", "st.more = 1", "cf.width = 2.5", "cf.labels = {5: 'z'}"]


def _arguments(seed, change):
    torch.manual_seed(seed)
    args = [torch.randn(3), Config(1.5), Settings()]
    exec(change, {}, {"cf": args[1], "st": args[2]})  # noqa: S102 - test changes
    return args


def _check(compiled, prog, seed, change, source):
    args_eager, args_compiled = _arguments(seed, change), _arguments(seed, change)
    expected = prog(*args_eager)
    actual = compiled(*args_compiled)
    assert same(actual, expected), f"{actual!r} != {expected!r}\n{source}"
    assert same(args_compiled, args_eager), f"arguments differ\n{source}"


@given(programs_with_a_change("x, cf, st", STATEMENTS, RETURNS, CHANGES, most=3), st.integers(0, 2**16))
def test_generated_copy_program_is_one_graph_matching_eager(program, seed):
    source, change = program
    prog = build_program(source, NAMESPACE, "<generated-copies>")
    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.compile(prog, backend="eager", fullgraph=True, _recorder=recorder)
    _check(compiled, prog, seed, "pass", source)
    assert len(recorder.captures) == 1 and not recorder.breaks, source
    _check(compiled, prog, seed + 1, change, f"{source}after: {change}")
    assert len(recorder.captures) <= 2 and not recorder.breaks, source
    fastdynamo.reset()

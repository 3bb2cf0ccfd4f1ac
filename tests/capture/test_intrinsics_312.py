"""3.12+'s ``CALL_INTRINSIC_2`` (type parameters, ``except*``) and ``CLEANUP_THROW`` (an
exception thrown into ``yield from``): none is traced. A frame that runs them breaks with
a reason that names what is not traced, and matches eager. The opcodes do not exist on
3.11, and the type-parameter syntax does not parse there (the programs are compiled from
source text, with this file's name so that they are not skipped as generated code)."""
from __future__ import annotations

import dis
import sys
import textwrap

import pytest

from fastdynamo.bytecode import version
from fastdynamo.capture.opcodes.build import BuildOpcodes
from fastdynamo.exc import Unsupported

from .break_helpers import assert_matches_eager, call, compile_recorded, vec

pytestmark = [pytest.mark.usefixtures("fresh_cache"),
              pytest.mark.skipif(sys.version_info < (3, 12), reason="3.12+ opcodes and syntax")]

_PROGRAMS = '''
def bounded(t):
    def scale[T: float](v: T) -> T:
        return v * 2
    return scale(t) + 1

def constrained(t):
    def scale[T: (int, float)](v: T) -> T:
        return v * 2
    return scale(t) - 1

def inner():
    yield 1
    yield 2

def delegating():
    got = yield from inner()
    return got

def sums_a_delegating_generator(t):
    return t + sum(delegating())

def throws_into_yield_from(t):
    t = t + 1
    gen = delegating()
    next(gen)
    try:
        gen.throw(KeyError("k"))
    except KeyError:
        t = t * 3
    return t - 1

def handles_an_exception_group(t):
    t = t + 1
    try:
        raise ExceptionGroup("g", [ValueError(1)])
    except* ValueError:
        t = t * 2
    return t - 1
'''


def _programs() -> dict:
    namespace: dict = {"__name__": __name__}
    exec(compile(textwrap.dedent(_PROGRAMS), __file__, "exec"), namespace)  # noqa: S102 - test programs
    return namespace


PROGRAMS = _programs() if sys.version_info >= (3, 12) else {}
TYPE_PARAMETERS = "type parameters (PEP 695"


def _opnames(fn) -> set[str]:
    return {inst.opname for inst in dis.get_instructions(fn, show_caches=False)}


def _reasons(recorder) -> list[str]:
    return [b.reason for b in recorder.breaks]


@pytest.mark.parametrize("name, intrinsic", [("bounded", "INTRINSIC_TYPEVAR_WITH_BOUND"),
                                             ("constrained", "INTRINSIC_TYPEVAR_WITH_CONSTRAINTS")])
def test_type_parameters_break_at_call_intrinsic_2_and_match_eager(name, intrinsic):
    fn = PROGRAMS[name]
    compiled, recorder = compile_recorded(fn)
    # The definition breaks the frame (and the generic-parameters function, which runs as
    # Python, breaks at its own intrinsics); the resume function's graph calls `scale`
    # inlined, and is recompiled for each call's new `scale` function object.
    assert_matches_eager(fn, lambda i: call(vec(i)), calls=2, graphs=2, breaks=3,
                         compiled=compiled, recorder=recorder)
    reasons = _reasons(recorder)
    assert any(r.startswith(f"CALL_INTRINSIC_2 {intrinsic}: {TYPE_PARAMETERS}") for r in reasons), reasons
    assert any(r.startswith(f"CALL_INTRINSIC_2 INTRINSIC_SET_FUNCTION_TYPE_PARAMS: {TYPE_PARAMETERS}")
               for r in reasons), reasons


def test_except_star_matches_eager():
    # The exception group's construction stops the trace before its handler (and the
    # handler's CALL_INTRINSIC_2 INTRINSIC_PREP_RERAISE_STAR) is reached.
    fn = PROGRAMS["handles_an_exception_group"]
    assert "CALL_INTRINSIC_2" in _opnames(fn)
    compiled, recorder = compile_recorded(fn)
    assert_matches_eager(fn, lambda i: call(vec(i)), calls=2, graphs=1, breaks=2,
                         compiled=compiled, recorder=recorder)
    assert any("ExceptionGroup" in r for r in _reasons(recorder)), _reasons(recorder)


def test_prep_reraise_star_names_except_star():
    index = version.INTRINSIC_2_NAMES.index("INTRINSIC_PREP_RERAISE_STAR")
    inst = type("Inst", (), {"arg": index})()
    with pytest.raises(Unsupported, match=r"INTRINSIC_PREP_RERAISE_STAR: except\* \(exception groups\)"):
        BuildOpcodes.CALL_INTRINSIC_2(None, inst)


def test_yield_from_with_its_cleanup_throw_handler_is_one_graph():
    assert "CLEANUP_THROW" in _opnames(PROGRAMS["delegating"])
    fn = PROGRAMS["sums_a_delegating_generator"]
    assert_matches_eager(fn, lambda i: call(vec(i)), calls=2, graphs=1, breaks=0)


def test_throw_into_yield_from_runs_as_python_and_matches_eager():
    # The translator never throws into a generator (CLEANUP_THROW's handler names that):
    # throw() breaks the frame at its own call, which runs as Python.
    fn = PROGRAMS["throws_into_yield_from"]
    compiled, recorder = compile_recorded(fn)
    assert_matches_eager(fn, lambda i: call(vec(i)), calls=2, graphs=0, breaks=1,
                         compiled=compiled, recorder=recorder)
    assert any("'throw'" in r for r in _reasons(recorder)), _reasons(recorder)

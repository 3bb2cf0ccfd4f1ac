"""Every corpus program (tests/corpus/programs.py) compiled equals eager: values, types,
argument state and exceptions; and each one is compiled (at least one graph, or it
says why it ran as Python)."""
from __future__ import annotations

import pytest

import fastdynamo
from fastdynamo.convert_frame import Recorder

from .compare import compare
from .programs import PROGRAMS

pytestmark = pytest.mark.usefixtures("fresh_cache")


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_corpus_program_matches_eager(program):
    recorder = Recorder()
    compiled = fastdynamo.compile(program.fn, backend="eager", _recorder=recorder)
    for _ in range(2):  # the first call captures, the second runs the cached entry
        difference = compare(program, compiled)
        assert difference is None, difference
    # Nothing runs as Python without a recorded reason.
    assert recorder.captures or recorder.breaks, "no graph and no reason"

"""``os.environ`` reads in compiled code are constants guarded on the entry they read:
a changed value, or a key that appears or disappears, recompiles; eager's results."""
from __future__ import annotations

import os

import pytest
import torch

import fastdynamo

pytestmark = pytest.mark.usefixtures("fresh_cache")

KEY = "FASTDYNAMO_TEST_ENVIRON_SCALE"


def scaled(x):
    scale = float(os.environ.get(KEY, "2.0"))
    if KEY in os.environ:
        scale += 0.5
    return x * scale + float(os.getenv(KEY, "0"))


def test_environ_reads_are_guarded_on_the_entry(monkeypatch):
    monkeypatch.delenv(KEY, raising=False)
    fastdynamo.reset()
    recorder = fastdynamo.convert_frame.Recorder()
    compiled = fastdynamo.compile(scaled, backend="eager", fullgraph=True, _recorder=recorder)
    x = torch.ones(2)
    for value in (None, "3.0", "3.0", "4.0", None):
        if value is None:
            monkeypatch.delenv(KEY, raising=False)
        else:
            monkeypatch.setenv(KEY, value)
        assert torch.equal(compiled(x), scaled(x)), value
    # absent, 3.0, 4.0: three entries (the repeated values reuse them)
    assert len(recorder.captures) == 3


def test_writing_the_environment_breaks_the_graph(monkeypatch):
    monkeypatch.delenv(KEY, raising=False)

    def writes(x):
        os.environ[KEY] = "1"
        return x + 1

    recorder = fastdynamo.convert_frame.Recorder()
    try:
        out = fastdynamo.compile(writes, backend="eager", _recorder=recorder)(torch.ones(2))
        assert torch.equal(out, torch.full((2,), 2.0)) and os.environ[KEY] == "1"
    finally:
        os.environ.pop(KEY, None)
    # the write breaks; x + 1 after it is the resume function's graph
    assert len(recorder.breaks) == 1 and len(recorder.captures) == 1, [str(b) for b in recorder.breaks]

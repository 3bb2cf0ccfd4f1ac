"""capture/shape_env.py: the trace's ShapeEnv names one source location, so a dynamic
compilation does not import the torch modules torch's stack search needs (~0.5 s on the
first dynamic compilation of a process), and keeps working as torch's."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

import fastdynamo
from fastdynamo.capture.shape_env import TraceShapeEnv

from .helpers import compiled

# The directory the suite imports fastdynamo from (the checkout's python/ after
# `make build-dev`, or site-packages after `pip install .`), for the child process.
PACKAGE_PARENT = Path(fastdynamo.__file__).resolve().parents[1]


def test_a_dynamic_compilation_imports_no_export_or_inductor_module() -> None:
    program = textwrap.dedent("""
        import sys, torch, fastdynamo
        from fastdynamo.convert_frame import Recorder
        recorder = Recorder()
        f = fastdynamo.compile(lambda x: torch.relu(x) * 2, backend="eager", dynamic=True, _recorder=recorder)
        assert torch.equal(f(torch.ones(3, 2)), torch.ones(3, 2) * 2)
        assert len(recorder.captures) == 1
        print(sorted(m for m in ("torch.export._trace", "torch._inductor.sizevars")
                     if m in sys.modules))
    """)
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_PARENT)}
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stderr


def test_locations_name_the_trace() -> None:
    env = TraceShapeEnv()
    assert str(env._get_sloc()) == "(fastdynamo trace)"
    assert str(env._get_sloc("a default range")) == "(a default range)"


def test_guards_and_symbols_are_torchs() -> None:
    """Sizes become symbols and the trace's branches guards, as with torch's ShapeEnv."""
    def f(x):
        return x * 2 if x.shape[0] > 3 else x - 1
    fn, recorder = compiled(f, dynamic=True)
    for n in (5, 7, 9):
        x = torch.randn(n, 2)
        assert torch.equal(fn(x), f(x))
    assert len(recorder.captures) == 1
    assert torch.equal(fn(torch.randn(2, 2) * 0 + 1), torch.zeros(2, 2))  # the other branch
    assert len(recorder.captures) == 2

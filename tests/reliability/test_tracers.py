"""sys.settrace / sys.setprofile beside compiled code: the trace and profile functions
(and what they call) are never intercepted, profiled calls use the cache, and while a
trace function is set (debuggers, coverage) frames run as Python, so coverage.py reports
every line of a compiled function and pdb stops on any of them."""
from __future__ import annotations

import json
import sys
import textwrap

import pytest
import torch

import fastdynamo
from fastdynamo._runtime import native

from .helpers import run_python


@pytest.fixture(autouse=True)
def _fresh():
    fastdynamo.reset()
    yield
    sys.settrace(None)
    sys.setprofile(None)
    fastdynamo.reset()


def work(x):
    y = x * 2
    return y + 1


seen: dict = {}


def recording_tracer(frame, event, arg):
    # a string comparison and a dict update: code a compiler could guard and break on
    key = (frame.f_code.co_name, event)
    seen[key] = seen.get(key, 0) + 1
    if event == "call":
        return recording_tracer
    return None


def _never_intercepted(fn):
    rt = native()
    return rt.cache_entries(fn.__code__) == [] and rt.get_code_action(fn.__code__) == rt.DEFAULT


def test_profile_function_is_never_compiled_and_calls_hit_the_cache():
    compiled = fastdynamo.compile(work, backend="eager")
    x = torch.ones(3)
    compiled(x)
    (entry,) = native().cache_entries(work.__code__)
    hits = entry.hits
    sys.setprofile(recording_tracer)
    try:
        for _ in range(50):
            assert torch.equal(compiled(x), x * 2 + 1)
    finally:
        sys.setprofile(None)
    assert _never_intercepted(recording_tracer)
    assert native().cache_entries(work.__code__) == [entry] and entry.hits == hits + 50
    assert seen[("run", "call")] >= 50  # the profiler saw the compiled region's calls


def test_trace_function_is_never_compiled_and_traced_code_runs_as_python():
    compiled = fastdynamo.compile(work, backend="eager")
    x = torch.ones(3)
    compiled(x)
    (entry,) = native().cache_entries(work.__code__)
    hits = entry.hits
    seen.clear()
    sys.settrace(recording_tracer)
    try:
        for _ in range(20):
            assert torch.equal(compiled(x), x * 2 + 1)
    finally:
        sys.settrace(None)
    assert _never_intercepted(recording_tracer)
    assert seen[("work", "line")] == 2 * 20  # each line of the original, each call
    assert entry.hits == hits  # run as Python while traced, cached entry kept
    compiled(x)
    assert entry.hits == hits + 1


def test_a_function_compiled_while_traced_compiles_after_tracing_stops():
    def other(x):
        return x - 1

    compiled = fastdynamo.compile(other, backend="eager")
    sys.settrace(recording_tracer)
    try:
        assert torch.equal(compiled(torch.ones(2)), torch.zeros(2))
    finally:
        sys.settrace(None)
    assert native().cache_entries(other.__code__) == []
    assert fastdynamo.explain(other, backend="eager")(torch.ones(2)).graph_count == 1


PROGRAM = textwrap.dedent('''\
    import torch, fastdynamo

    def f(x):
        y = x * 2
        z = y + 1
        return z

    compiled = fastdynamo.compile(f, backend="eager")

    def main():
        for _ in range(3):
            out = compiled(torch.ones(2))
        print("result", out.tolist())

    if __name__ == "__main__":
        main()
    ''')


def test_coverage_reports_every_line_of_a_compiled_function(tmp_path):
    pytest.importorskip("coverage")  # in the `test` extras
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    result = run_python(f"""
        import coverage, json, runpy, sys
        cov = coverage.Coverage(data_file=None, include=[{str(program)!r}])
        cov.start()
        runpy.run_path({str(program)!r}, run_name="__main__")
        cov.stop()
        _, statements, _, missing, _ = cov.analysis2({str(program)!r})
        print(json.dumps({{"statements": statements, "missing": missing}}))
        """)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert "result [3.0, 3.0]" in result.stdout
    assert report["missing"] == [] and {4, 5, 6, 11, 12} <= set(report["statements"])


def test_pdb_stops_on_a_line_of_a_compiled_function(tmp_path):
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    commands = f"break {program}:6\ncontinue\np y\ncontinue\ncontinue\ncontinue\n"
    result = run_python(f"""
        import pdb, sys
        sys.path.insert(0, {str(tmp_path)!r})
        import program
        program.compiled(program.torch.ones(2))  # compiled before the debugger starts
        pdb.Pdb().runcall(program.main)
        """, stdin=commands)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("program.py(6)f()") == 3  # each of the three calls
    assert "tensor([2., 2.])" in result.stdout and "result [3.0, 3.0]" in result.stdout

"""The probed toolchain is kept on disk: a second process with the same compiler, CPU and
settings runs the compiler for nothing but kernels (no ``--version``, no probe build);
another compiler binary, or another requested level, is probed again."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import json
    from fastdynamo.backends.cpp import binary_cache, toolchain
    found = toolchain.toolchain()
    binary_cache.load('extern "C" int answer() { return 42; }')
    print(json.dumps({"isa": found.isa.value, "flags": list(found.compile_flags)}))
""")


def _logging_compiler(folder, name="c++"):
    """A compiler that records each call's arguments, then runs g++."""
    log = folder / f"{name}.log"
    script = folder / name
    script.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec g++ "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script, log


def _run(env):
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _calls(log):
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="the key reads the CPU's features there")
def test_a_second_process_skips_the_probe_and_a_new_compiler_is_probed(tmp_path, subprocess_env):
    compiler, log = _logging_compiler(tmp_path)
    env = subprocess_env(cache_dir=tmp_path / "cache", CXX=str(compiler))
    first = _run(env)
    probing = _calls(log)
    assert any(call == "--version" for call in probing) and len(probing) >= 3  # version, probe, kernel
    log.unlink()
    second = _run(env)  # the toolchain from disk, the binary from disk: the compiler never runs
    assert second == first and _calls(log) == []
    assert len(list((tmp_path / "cache" / "toolchain").glob("*.json"))) == 1

    _run({**env, "FASTDYNAMO_CPP_ISA": "none"})  # another level: probed, kept apart
    assert "--version" in _calls(log)
    assert len(list((tmp_path / "cache" / "toolchain").glob("*.json"))) == 2
    log.unlink()
    other, other_log = _logging_compiler(tmp_path, "g++-wrapper")
    _run({**env, "CXX": str(other)})  # another compiler binary: probed again
    assert "--version" in _calls(other_log)

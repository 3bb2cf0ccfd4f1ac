"""The C++ toolchain: discovery, flags, the on-disk binary cache, OpenMP and processes.

Each compile costs g++ ~0.1-0.5 s and each child process ~2 s (it imports torch), so
sources are tiny and children run two at a time.
"""
from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pytest
import torch

from fastdynamo.backends.cpp import binary_cache, isa, openmp
from fastdynamo.backends.cpp import toolchain as toolchain_module
from fastdynamo.backends.cpp.binary_cache import STATS, CompileError, binary_key, build, load
from fastdynamo.backends.cpp.cxx import CompilerFamily, ToolchainUnavailable, find_compiler
from fastdynamo.backends.cpp.isa import VectorLevel
from fastdynamo.backends.cpp.toolchain import discover, toolchain

AXPY = textwrap.dedent("""
    extern "C" void axpy(const float* __restrict__ x, float* __restrict__ y, float a, long n) {
      #pragma omp simd
      for (long i = 0; i < n; ++i) y[i] += a * x[i];
    }
""")


@pytest.fixture(autouse=True)
def fresh_binaries(fresh_cache) -> Iterator[Path]:
    """An empty cache directory per test, and no library loaded by an earlier test."""
    binary_cache.clear_memory()
    yield fresh_cache.disk()
    binary_cache.clear_memory()


def pointer(tensor: torch.Tensor) -> ctypes.c_void_p:
    return ctypes.c_void_p(tensor.data_ptr())


def test_compile_load_and_call_through_ctypes(fresh_binaries):
    before = STATS.copy()
    library = load(AXPY)
    x, y = torch.arange(10, dtype=torch.float32), torch.ones(10)
    library.axpy(pointer(x), pointer(y), ctypes.c_float(2.0), ctypes.c_long(10))
    assert y.tolist() == [1.0 + 2.0 * i for i in range(10)]
    assert load(AXPY) is library
    binary_cache.clear_memory()
    load(AXPY)
    counts = {name: STATS[name] - before[name] for name in ("compiles", "memory_hits", "disk_hits")}
    assert counts == {"compiles": 1, "memory_hits": 1, "disk_hits": 1}
    path = binary_cache.binary_path(AXPY)
    assert path.parent == fresh_binaries / "cpp" and path.suffix == ".so"
    assert path.with_suffix(".cpp").read_text() == AXPY
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, path.with_suffix(".cpp").name])


def test_flags_keep_ieee_semantics():
    """NaN, infinities and signed zeros come out bit for bit as eager's: no -ffast-math,
    no contraction of a * b + c into one rounding."""
    library = load(textwrap.dedent("""
        #include <cmath>
        extern "C" void f(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out, long n) {
          #pragma omp simd
          for (long i = 0; i < n; ++i) {
            float y = a[i] * b[i] + a[i];
            out[3 * i] = y; out[3 * i + 1] = y > 0.0f ? y : 0.01f * y; out[3 * i + 2] = std::sqrt(b[i]);
          }
        }
    """))
    special = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-45, 3.0, -2.5, 1 / 3, 1e30]
    a = torch.tensor([p for p in special for _ in special] * 2, dtype=torch.float32)
    b = torch.tensor([q for _ in special for q in special] * 2, dtype=torch.float32)
    out = torch.empty(3 * a.numel())
    library.f(pointer(a), pointer(b), pointer(out), ctypes.c_long(a.numel()))
    y = a * b + a
    expected = torch.stack([y, torch.where(y > 0, y, 0.01 * y), torch.sqrt(b)], 1).flatten()
    assert torch.equal(out.isnan(), expected.isnan())
    numbers = ~expected.isnan()  # bit for bit: -0.0 is not 0.0, 1e-45 is not flushed to zero
    assert torch.equal(out[numbers].view(torch.int32), expected[numbers].view(torch.int32))


def test_key_changes_with_source_flags_level_and_compiler():
    chain = toolchain()
    key = binary_key(AXPY, chain.key_parts())
    other_level = VectorLevel.NONE if chain.isa is not VectorLevel.NONE else VectorLevel.AVX2
    changed = {
        "source": binary_key(AXPY + "\n", chain.key_parts()),
        "flags": binary_key(AXPY, replace(chain, compile_flags=(*chain.compile_flags, "-O2")).key_parts()),
        "link": binary_key(AXPY, replace(chain, link_flags=chain.link_flags[:-1]).key_parts()),
        "level": binary_key(AXPY, replace(chain, isa=other_level).key_parts()),
        "version": binary_key(AXPY, replace(chain, compiler=replace(chain.compiler, version="g++ 99")).key_parts()),
        "path": binary_key(AXPY, replace(chain, compiler=replace(chain.compiler, path="/opt/g++")).key_parts()),
    }
    assert key not in changed.values() and len(set(changed.values())) == len(changed)
    assert key == binary_key(AXPY, toolchain().key_parts())


def test_compile_error_carries_the_compilers_message(fresh_binaries):
    source = 'extern "C" int broken() { return undeclared_name; }\n'
    with pytest.raises(CompileError) as caught:
        build(source)
    assert "undeclared_name" in caught.value.stderr and "error" in str(caught.value)
    assert caught.value.source_path.read_text() == source  # kept for debugging
    assert len(caught.value.stderr.splitlines()) <= 41
    files = [p.name for p in (fresh_binaries / "cpp").iterdir()]
    assert files == [caught.value.source_path.name]  # no binary, no temporary left


def test_an_unresolved_symbol_is_a_compile_error_not_a_dlopen_failure():
    with pytest.raises(CompileError, match="not_defined_anywhere"):
        build('extern "C" int not_defined_anywhere(); extern "C" int f() { return not_defined_anywhere(); }\n')


def test_missing_compiler_is_toolchain_unavailable_with_a_reason():
    with pytest.raises(ToolchainUnavailable) as caught:
        discover({**os.environ, "CXX": "/nonexistent"})
    assert caught.value.reason == "$CXX is '/nonexistent', and '/nonexistent' is not an executable file"
    with pytest.raises(ToolchainUnavailable, match="none of c\\+\\+, g\\+\\+, clang\\+\\+ is on PATH"):
        discover({"PATH": "/nonexistent-dir"})


def test_toolchain_unavailable_is_kept_for_the_process(monkeypatch):
    monkeypatch.setattr(toolchain_module, "_CURRENT", None)
    monkeypatch.setenv("CXX", "/nonexistent")
    calls = []
    monkeypatch.setattr(toolchain_module, "discover", lambda: calls.append(1) or discover())
    reasons = []
    for _ in range(2):
        with pytest.raises(ToolchainUnavailable) as caught:
            toolchain()
        reasons.append(caught.value.reason)
    assert reasons == [reasons[0]] * 2 and "/nonexistent" in reasons[0] and calls == [1]


def fake_compiler(directory: Path, version: str, refuse: str = "") -> str:
    """A script that answers ``--version`` with ``version``, fails on any argument
    matching the shell pattern ``refuse`` (when given) and runs the real compiler otherwise."""
    real = find_compiler().command[0]
    refusal = f'  case "$arg" in {refuse}) echo "error: unknown argument: $arg" >&2; exit 1;; esac\n' if refuse else ""
    script = directory / "fake-c++"
    script.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "{version}"; exit 0; fi\n'
                      f'for arg in "$@"; do\n{refusal}  :\ndone\nexec {real} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_compiler_identity_and_family_come_from_version(tmp_path):
    fake = discover({**os.environ, "CXX": fake_compiler(tmp_path, "clang version 99.0 (fake)")})
    assert fake.compiler.family is CompilerFamily.CLANG
    assert fake.compiler.identity == (str(tmp_path / "fake-c++"), "clang version 99.0 (fake)")
    assert binary_key(AXPY, fake.key_parts()) != binary_key(AXPY, toolchain().key_parts())
    load(AXPY, fake)  # it builds (the real compiler underneath)


def test_a_refused_level_falls_back_with_a_note(tmp_path):
    if toolchain().isa is not VectorLevel.AVX512:
        pytest.skip("needs a CPU with AVX-512 to see it refused")
    chain = discover({**os.environ, "CXX": fake_compiler(tmp_path, "g++ (fake) 12", refuse="-mavx512f")})
    assert chain.isa is VectorLevel.AVX2 and chain.openmp == toolchain().openmp
    assert any(note.startswith("avx512 left out") and "unknown argument: -mavx512f" in note for note in chain.notes)


def test_refused_openmp_builds_without_threads(tmp_path):
    chain = discover({**os.environ, "CXX": fake_compiler(tmp_path, "g++ (fake) 12", refuse="-fopenmp")})
    assert not chain.openmp and "-fopenmp-simd" in chain.compile_flags and chain.openmp_runtime is None
    assert chain.isa is toolchain().isa
    assert any(note.startswith("OpenMP off") for note in chain.notes)


def test_a_compiler_that_builds_nothing_is_unavailable(tmp_path):
    with pytest.raises(ToolchainUnavailable, match="(?s)cannot build a shared library.*unknown argument: -O3"):
        discover({**os.environ, "CXX": fake_compiler(tmp_path, "g++ (fake) 12", refuse="-O3")})


def test_requested_level(monkeypatch):
    assert discover({**os.environ, "FASTDYNAMO_CPP_ISA": "none"}).isa is VectorLevel.NONE
    with pytest.raises(ValueError, match=re.escape("'sse9' is not one of avx512|avx2|none")):
        discover({**os.environ, "FASTDYNAMO_CPP_ISA": "sse9"})
    monkeypatch.setattr(toolchain_module, "cpuinfo_features", lambda: frozenset({"avx2", "fma", "f16c"}))
    monkeypatch.setattr(toolchain_module.platform, "machine", lambda: "x86_64")
    assert discover({k: v for k, v in os.environ.items() if k != "FASTDYNAMO_CPP_ISA"}).isa is VectorLevel.AVX2
    with pytest.raises(ToolchainUnavailable, match="avx512 asks for a level this CPU does not run"):
        discover({**os.environ, "FASTDYNAMO_CPP_ISA": "avx512"})


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="compares with /proc/cpuinfo")
def test_feature_program_agrees_with_cpuinfo():
    """The detection used where there is no /proc/cpuinfo, checked against it here."""
    from_cpuinfo = isa.cpuinfo_features()
    assert from_cpuinfo is not None
    assert toolchain_module.features_by_program(toolchain().compiler) == from_cpuinfo & isa.ALL_FEATURES


def test_openmp_kernel_uses_torchs_runtime_and_its_threads():
    chain = toolchain()
    if chain.compiler.family is not CompilerFamily.GNU:
        assert not chain.openmp and any("OpenMP off" in note for note in chain.notes)
        pytest.skip("Clang's OpenMP calls cannot link against torch's libgomp")
    assert chain.openmp and chain.openmp_runtime == str(openmp.torch_runtime())
    runtimes = openmp.loaded_runtimes()
    assert Path(chain.openmp_runtime) in runtimes
    library = load(textwrap.dedent("""
        #include <omp.h>
        extern "C" int threads_seen(int threads) {
          int seen = 0;
          #pragma omp parallel num_threads(threads) reduction(+: seen)
          seen += 1;
          return seen;
        }
    """))
    assert library.threads_seen(2) == 2 and library.threads_seen(1) == 1
    assert openmp.loaded_runtimes() == runtimes  # no second runtime came with the kernel


CHILD = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from fastdynamo.backends.cpp import binary_cache
    source, barrier = sys.argv[1], Path(sys.argv[2]) if len(sys.argv) > 2 else None
    if barrier:  # start compiling together with the other child
        (barrier / f"ready-{os.getpid()}").touch()
        while len(list(barrier.glob("ready-*"))) < 2:
            time.sleep(0.01)
    library = binary_cache.load(source)
    print(json.dumps({"stats": dict(binary_cache.STATS), "path": str(binary_cache.binary_path(source)),
                      "answer": library.answer()}))
""")


def start_child(environment: dict[str, str], source: str, barrier: Path | None = None) -> subprocess.Popen:
    arguments = [sys.executable, "-c", CHILD, source, *([str(barrier)] if barrier else [])]
    return subprocess.Popen(arguments, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result_of(child: subprocess.Popen) -> dict:
    stdout, stderr = child.communicate(timeout=180)
    assert child.returncode == 0, stderr
    return json.loads(stdout.strip().splitlines()[-1])


def test_processes_sharing_one_cache_directory(fresh_binaries, subprocess_env, tmp_path):
    """This process builds; a second one with the same flags loads that binary without
    compiling; two more with another level start compiling one source together (a
    barrier), both succeed and share one binary of their own. One round of children:
    each costs a torch import."""
    source = 'extern "C" int answer() { return 42; }\n'
    path = build(source)
    environment = subprocess_env(cache_dir=fresh_binaries)  # the same FASTDYNAMO_CPP_ISA as this process
    other = {**environment, "FASTDYNAMO_CPP_ISA": "none" if toolchain().isa is not VectorLevel.NONE else "avx2"}
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    children = [start_child(environment, source), start_child(other, source, barrier),
                start_child(other, source, barrier)]
    same, *together = [result_of(child) for child in children]
    assert same["answer"] == 42 and same["path"] == str(path) and same["stats"] == {"disk_hits": 1}
    assert [result["answer"] for result in together] == [42, 42]
    assert together[0]["path"] == together[1]["path"] != str(path)
    assert {sum(result["stats"].get("compiles", 0) for result in together)} <= {1, 2}
    files = sorted(p.name for p in (fresh_binaries / "cpp").iterdir())
    assert [name for name in files if name.startswith(".tmp-")] == [] and len(files) == 4  # 2 x (.cpp, .so)


@pytest.mark.skipif(shutil.which("clang++") is None, reason="clang++ is not installed")
def test_real_clang_builds_without_a_second_openmp_runtime():
    chain = discover({**os.environ, "CXX": "clang++"})
    assert chain.compiler.family is CompilerFamily.CLANG
    runtime, runtimes = openmp.torch_runtime(), openmp.loaded_runtimes()
    if runtime is not None and runtime.name.startswith("libgomp"):
        assert not chain.openmp and any("__kmpc" in note for note in chain.notes)
    library = load(AXPY, chain)
    x, y = torch.ones(5), torch.zeros(5)
    library.axpy(pointer(x), pointer(y), ctypes.c_float(3.0), ctypes.c_long(5))
    assert y.tolist() == [3.0] * 5
    assert openmp.loaded_runtimes() == runtimes

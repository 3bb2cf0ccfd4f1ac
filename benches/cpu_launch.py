"""What calling a generated CPU kernel costs: ``_native.CpuKernel`` against ctypes.

A kernel of the generator's ABI (``void k(void* const* buffers, const int64_t* sizes)``)
that does almost nothing, called with 3 tiny float32 tensors and 1 int, in ns per call:
``CpuKernel`` (addresses read in place, and forced through torch's ``data_ptr()``),
ctypes with ``argtypes`` set and ``t.data_ptr()`` ints (what a generated wrapper would do
without the launcher), and for scale a no-op Python function call and ``torch.add(x, x)``
on 8 elements. Best of several repetitions; run with ``OMP_NUM_THREADS=1``::

    OMP_NUM_THREADS=1 PYTHONPATH=python python benches/cpu_launch.py
"""
from __future__ import annotations

import argparse
import ctypes
import subprocess
import tempfile
import timeit
from pathlib import Path

import torch

from fastdynamo import _native

SOURCE = r"""
#include <stdint.h>
extern "C" {
int64_t calls = 0;
void launched(void* const* buffers, const int64_t* sizes) {
    calls += sizes[0] + (buffers[0] != buffers[2]);
}
void launched_ctypes(void* a, void* b, void* c, int64_t n) {
    calls += n + (a != c);
}
}
"""


def build(directory: Path) -> ctypes.CDLL:
    source = directory / "kernel.cpp"
    source.write_text(SOURCE)
    library = directory / "kernel.so"
    subprocess.run(["g++", "-O2", "-shared", "-fPIC", str(source), "-o", str(library)], check=True)
    return ctypes.CDLL(str(library))


def best_ns(statement: str, namespace: dict, number: int, repeat: int) -> float:
    """Best ns per execution of ``statement``, timed in ``timeit``'s own loop (no
    function call around it: the statement runs as a generated wrapper would run it)."""
    times = timeit.repeat(statement, globals=namespace, number=number, repeat=repeat)
    return min(times) / number * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        lib = build(Path(directory))
        address = ctypes.cast(lib.launched, ctypes.c_void_p).value
        with_ctypes = lib.launched_ctypes
        with_ctypes.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        with_ctypes.restype = None

        def noop(a, b, c, n):
            pass

        namespace = {
            "x": torch.ones(8), "y": torch.ones(8), "out": torch.empty(8), "torch": torch, "noop": noop,
            "kernel": _native.CpuKernel(address, "launched", [torch.float32] * 3, 1, lib),
            "released": _native.CpuKernel(address, "launched", [torch.float32] * 3, 1, lib, release_gil=True),
            "with_ctypes": with_ctypes,
        }

        def time(statement: str, number: int = options.number) -> float:
            return best_ns(statement, namespace, number, options.repeat)

        def forced() -> float:
            previous = _native._cpu_kernel_force_python(True)
            try:
                return time("kernel(x, y, out, 8)", options.number // 4)
            finally:
                _native._cpu_kernel_force_python(previous)

        rows = [
            ("(a) CpuKernel, addresses read in place", time("kernel(x, y, out, 8)")),
            ("    CpuKernel, release_gil=True", time("released(x, y, out, 8)")),
            ("    CpuKernel, forced through Python data_ptr()", forced()),
            ("(b) ctypes, argtypes set, t.data_ptr() ints",
             time("with_ctypes(x.data_ptr(), y.data_ptr(), out.data_ptr(), 8)")),
            ("(c) no-op Python function, 4 arguments", time("noop(x, y, out, 8)")),
            ("(d) torch.add(x, x), 8 elements", time("torch.add(x, x)", options.number // 4)),
            ("    empty statement (timing loop alone)", time("pass")),
        ]
        forced_reads = namespace["kernel"].python_reads
        assert forced_reads == 3 * (options.number // 4) * options.repeat, forced_reads  # only forced
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), best of {options.repeat} "
          f"repetitions ({options.number} calls each, a quarter for the slow rows)")
    width = max(len(name) for name, _ in rows)
    print(f"{'':{width}}  ns/call")
    for name, ns in rows:
        print(f"{name:{width}}  {ns:7.1f}")


if __name__ == "__main__":
    main()

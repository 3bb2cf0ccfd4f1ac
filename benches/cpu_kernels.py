"""CPU kernels side by side: eager, Inductor (``torch.compile``) and fastdynamo's default
backend (C++ kernels), with this machine's copy bandwidth measured in the same run. (Not
``kernels.py``: ``benches/`` is on ``sys.path`` in models.py, and transformers imports a
top-level ``kernels`` module, Hugging Face's kernel hub, wherever it finds one.)

    OMP_NUM_THREADS=1 PYTHONPATH=python python benches/cpu_kernels.py [--sizes 3,4,5,6,7] [--cols 1024]
        [--rounds 7] [--keep-freed-memory]

Cases, float32, ``(rows, cols)`` with ``rows = round(10^k / cols)`` (at least 1):
  gate        ``silu(x * scale + bias) * y``: a SwiGLU-style gate after a per-column affine
              (scale, bias of ``cols``), the pointwise chain of the issue's target
  affine_relu ``relu(x * scale + bias) + y``: the same traffic without a transcendental
  softmax     ``softmax(x, -1)``
  layer_norm  ``layer_norm(x, (cols,), w, b)``
  rms_norm    ``rms_norm(x, (cols,), w, eps=1e-6)``
Each is compiled per size (``dynamic=False`` for both compilers; fastdynamo with
``FASTDYNAMO_KERNELS_CHOICE=kernels`` unless set, so that its kernels are timed even where
its compile-time measurement would keep the ATen ops), checked against eager (allclose),
then timed with the three systems interleaved round by round: best of
``--rounds`` rounds, CPU time of this thread (one intra-op thread everywhere). GB/s is the
bytes of the inputs and the output (each read or written once) over the time.

Copy bandwidth, per size, in the same run: torch's ``dst.copy_(src)`` into a kept
destination, ``src.clone()`` (a fresh output per call, as every system above allocates its
output), and a C++ copy loop built by fastdynamo's toolchain (``binary_cache``) and timed
inside the library. "% of copy" is against the best of ``copy_`` and the C++ loop.
Outputs of 32 MiB and more are fresh ``mmap``s per call under glibc's default malloc and
every page faults on first write; ``--keep-freed-memory`` runs the same under
``GLIBC_TUNABLES`` that keep freed memory in the heap, to show that cost apart.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import sys
import warnings
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "benches"))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402  (the system compared against)
import torch.nn.functional as F  # noqa: E402
from bench_timing import best, interleaved, thread_seconds  # noqa: E402

import fastdynamo  # noqa: E402
from fastdynamo.backends.cpp import binary_cache  # noqa: E402
from fastdynamo.convert_frame import Recorder  # noqa: E402

KEEP_FREED_MEMORY = "glibc.malloc.mmap_threshold=4294967295:glibc.malloc.trim_threshold=17179869184"
# The target: a fused pointwise chain at the largest size, this share of the copy
# bandwidth; the gate is the chain it names, affine_relu the same traffic without exp.
TARGET_CASES, TARGET_SHARE = ("gate", "affine_relu"), 0.8


def gate(x, y, scale, bias):
    return F.silu(x * scale + bias) * y


def affine_relu(x, y, scale, bias):
    return torch.relu(x * scale + bias) + y


def softmax(x):
    return torch.softmax(x, -1)


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


def rms_norm(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, eps=1e-6)


def inputs(case: Callable, rows: int, cols: int) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(rows)
    x = torch.randn(rows, cols)
    row = {"w": torch.rand(cols) + 0.5, "b": torch.randn(cols)}
    if case in (gate, affine_relu):
        return x, torch.randn(rows, cols), row["w"], row["b"]
    return {softmax: (x,), layer_norm: (x, row["w"], row["b"]), rms_norm: (x, row["w"])}[case]


CASES: dict[str, Callable] = {fn.__name__: fn for fn in (gate, affine_relu, softmax, layer_norm, rms_norm)}

COPY_SOURCE = r"""
#include <cstdint>
#include <ctime>
static double fd_thread_now() {
  timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec;
}
__attribute__((noinline)) static void copy_floats(const float* __restrict__ src, float* __restrict__ dst,
                                                  int64_t n) {
  #pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}
// Seconds per copy: the best of `batches` batches of `reps` copies (CPU time of the thread).
extern "C" double time_copy(const float* src, float* dst, int64_t n, int64_t reps, int batches) {
  double best = 1e30;
  for (int b = 0; b < batches; ++b) {
    double t = fd_thread_now();
    for (int64_t r = 0; r < reps; ++r) copy_floats(src, dst, n);
    t = (fd_thread_now() - t) / reps;
    best = t < best ? t : best;
  }
  return best;
}
"""


def reps_for(elements: int) -> int:
    """Calls per round: ~2*10^6 elements' worth, at least 2."""
    return max(2, 2_000_000 // elements)


def copy_bandwidths(elements: int, rounds: int, library: ctypes.CDLL) -> dict[str, float]:
    """GB/s (read + write) of a copy of ``elements`` float32: torch's copy_ into a kept
    destination, clone (a fresh destination per call), the C++ loop."""
    src, dst = torch.randn(elements), torch.empty(elements)
    reps = reps_for(elements)
    seconds = best(interleaved({"copy_": lambda: dst.copy_(src), "clone": src.clone}, reps, rounds,
                               clock=thread_seconds))
    library.time_copy.restype = ctypes.c_double
    seconds["C++ loop"] = library.time_copy(ctypes.c_void_p(src.data_ptr()), ctypes.c_void_p(dst.data_ptr()),
                                            ctypes.c_int64(elements), ctypes.c_int64(reps), ctypes.c_int(rounds))
    moved = 2 * elements * 4
    return {name: moved / s / 1e9 for name, s in seconds.items()}


def compiled_pair(fn: Callable, args: tuple) -> tuple[Callable, Callable, str]:
    """Inductor's and fastdynamo's compiled ``fn`` (both called once), and how fastdynamo
    ran it: its kernel count, or why it ran ATen ops."""
    torch._dynamo.reset()
    fastdynamo.reset()
    inductor = torch.compile(fn, dynamic=False)
    recorder = Recorder()
    ours = fastdynamo.compile(fn, dynamic=False, _recorder=recorder)
    with torch.no_grad():
        inductor(*args)
        ours(*args)
    notes = []
    for capture in recorder.captures:
        reason = getattr(capture.compiled_fn, "fallback_reason", None)
        notes.append(f"ATen: {reason}" if reason else str(getattr(capture.compiled_fn, "kernel_count", "?")))
    return inductor, ours, ",".join(notes) or "no graph"


def _equal(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    return actual.shape == expected.shape and torch.allclose(actual, expected, rtol=1e-4, atol=1e-5)


def measure(name: str, rows: int, cols: int, rounds: int) -> dict:
    fn = CASES[name]
    args = inputs(fn, rows, cols)
    inductor, ours, kernels = compiled_pair(fn, args)
    with torch.no_grad():
        expected = fn(*args)
        equal = _equal(ours(*args), expected) and _equal(inductor(*args), expected)
        systems = {"eager": lambda: fn(*args), "inductor": lambda: inductor(*args),
                   "fastdynamo": lambda: ours(*args)}
        seconds = best(interleaved(systems, reps_for(rows * cols), rounds, clock=thread_seconds))
    moved = sum(t.numel() * t.element_size() for t in args) + expected.numel() * expected.element_size()
    return {"seconds": seconds, "moved": moved, "equal": equal, "kernels": kernels}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="3,4,5,6,7", help="exponents k of the 10^k elements")
    parser.add_argument("--cols", type=int, default=1024, help="row width (all cases)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--keep-freed-memory", action="store_true",
                        help=f"run under GLIBC_TUNABLES={KEEP_FREED_MEMORY}")
    options = parser.parse_args()
    if options.keep_freed_memory and os.environ.get("GLIBC_TUNABLES") != KEEP_FREED_MEMORY:
        # glibc reads its tunables at start-up: run this script again under them.
        environ = {**os.environ, "GLIBC_TUNABLES": KEEP_FREED_MEMORY}
        os.execve(sys.executable, [sys.executable, *sys.argv], environ)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    os.environ.setdefault("FASTDYNAMO_KERNELS_CHOICE", "kernels")  # read when a graph compiles
    library = ctypes.CDLL(str(binary_cache.build(COPY_SOURCE)))
    sizes = [max(1, round(10 ** int(k) / options.cols)) for k in options.sizes.split(",")]
    allocator = f"GLIBC_TUNABLES={os.environ['GLIBC_TUNABLES']}" if "GLIBC_TUNABLES" in os.environ else \
        "glibc's default malloc"
    print(f"torch {torch.__version__}, 1 intra-op thread, {allocator}; best of {options.rounds} interleaved "
          "rounds, CPU time of the thread")
    copies = {rows: copy_bandwidths(rows * options.cols, options.rounds, library) for rows in sizes}
    print("\ncopy bandwidth, GB/s (read + write)\n| elements | torch copy_ | torch clone (fresh output) | C++ loop |")
    print("|---|---|---|---|")
    for rows, found in copies.items():
        print(f"| {rows * options.cols} | {found['copy_']:.1f} | {found['clone']:.1f} | {found['C++ loop']:.1f} |")
    print_kernels(options, sizes, copies)


def print_kernels(options: argparse.Namespace, sizes: list[int], copies: dict[int, dict[str, float]]) -> None:
    print("\n| case | elements | eager us | Inductor us | fastdynamo us | fastdynamo / Inductor "
          "| GB/s eager | GB/s Inductor | GB/s fastdynamo | % of copy: Inductor | % of copy: fastdynamo "
          "| fastdynamo kernels | equal |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    verdicts = []
    for name in options.cases.split(","):
        for rows in sizes:
            row = measure(name, rows, options.cols, options.rounds)
            s = row["seconds"]
            gbs = {system: row["moved"] / seconds / 1e9 for system, seconds in s.items()}
            copy = max(copies[rows]["copy_"], copies[rows]["C++ loop"])
            elements = rows * options.cols
            print(f"| {name} | {elements} | {s['eager'] * 1e6:.1f} | {s['inductor'] * 1e6:.1f} "
                  f"| {s['fastdynamo'] * 1e6:.1f} | {s['fastdynamo'] / s['inductor']:.2f} | {gbs['eager']:.1f} "
                  f"| {gbs['inductor']:.1f} | {gbs['fastdynamo']:.1f} | {gbs['inductor'] / copy:.0%} "
                  f"| {gbs['fastdynamo'] / copy:.0%} | {row['kernels']} | {row['equal']} |", flush=True)
            if name in TARGET_CASES and rows == sizes[-1]:
                share = gbs["fastdynamo"] / copy
                verdicts.append(f"{name} at {elements} elements: {share:.0%} of the copy bandwidth "
                                f"({copy:.1f} GB/s), {gbs['fastdynamo'] / copies[rows]['clone']:.0%} of a "
                                f"fresh-output copy's; target >= {TARGET_SHARE:.0%}: "
                                f"{'met' if share >= TARGET_SHARE else 'MISSED'}")
    print()
    for verdict in verdicts:
        print(f"target: {verdict}")


if __name__ == "__main__":
    main()

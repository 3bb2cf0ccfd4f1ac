"""Triton kernels across many sizes: what each ``dynamic=`` setting generates.

    PYTHONPATH=python python benches/triton_dynamic.py [--sizes N]

On a CUDA machine the kernels run on the GPU; without one, in Triton's interpreter on
CPU (``TRITON_INTERPRET=1`` is set here, before anything imports triton: slow, use few
sizes). Per case, calling with N sizes of one dimension: graphs compiled, generated
modules (kernel sets) and kernels, each setting with an empty kernel cache, results
equal to eager's; then the time of one call at the last size with each setting's
module (a static one: literal sizes; a symbolic one: sizes as launch arguments) and
the total time of the N first calls (capture, code generation, launches).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import torch.nn.functional as F  # noqa: E402

import fastdynamo  # noqa: E402
from fastdynamo.backends.kernels import cache  # noqa: E402
from fastdynamo.convert_frame import Recorder  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def bias_relu(x, b):
    return torch.relu(x * 2 + b)


def row_softmax(x):
    return torch.softmax(x, -1)


def layer_norm(x):
    return F.layer_norm(x, (x.shape[-1],))


# case -> (function, inputs for size n)
CASES = {
    "pointwise (n, 64) + bias": (bias_relu, lambda n: (torch.randn(n, 64), torch.randn(64))),
    "softmax over rows of n*16": (row_softmax, lambda n: (torch.randn(8, 16 * n),)),
    "layer norm (n, 32)": (layer_norm, lambda n: (torch.randn(n, 32),)),
}
SETTINGS = {"dynamic=False": False, "automatic": None, "dynamic=True": True}


def run(fn, make, sizes: list, dynamic) -> dict:
    fastdynamo.reset()
    os.environ["FASTDYNAMO_CACHE_DIR"] = tempfile.mkdtemp(prefix="fastdynamo-bench-")
    cache.clear_memory()
    recorder = Recorder()
    compiled = fastdynamo.compile(fn, backend="triton", dynamic=dynamic, _recorder=recorder)
    codegen = cache.STATS["codegen"]
    start = time.perf_counter()
    ok = True
    for n in sizes:
        torch.manual_seed(n)
        inputs = [t.to(DEVICE) for t in make(n)]
        ok &= torch.allclose(compiled(*inputs), fn(*inputs), atol=1e-4)
    total = time.perf_counter() - start
    modules = {id(m): m for record in recorder.captures
               for m in getattr(record.compiled_fn, "specialisations", {}).values() if m is not None}
    last = [t.to(DEVICE) for t in make(sizes[-1])]
    return {"graphs": len(recorder.captures), "modules": cache.STATS["codegen"] - codegen,
            "kernels": sum(m.KERNEL_COUNT for m in modules.values()), "ok": ok, "total_s": total,
            "call_ms": _call_ms(compiled, last)}


def _call_ms(compiled, inputs: list) -> float:
    compiled(*inputs)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    repeats = 5 if DEVICE == "cpu" else 100
    start = time.perf_counter()
    for _ in range(repeats):
        compiled(*inputs)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, default=8, help="how many sizes to call with (2, 3, ...)")
    sizes = list(range(2, 2 + parser.parse_args().sizes))
    where = "GPU" if DEVICE == "cuda" else "Triton's interpreter on CPU"
    print(f"{len(sizes)} sizes ({sizes[0]}..{sizes[-1]}), kernels in {where}")
    print("| case | setting | graphs | kernel sets generated | kernels generated | one call at the last size (ms) "
          "| all first calls (s) | equal to eager |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for case, (fn, make) in CASES.items():
        for setting, dynamic in SETTINGS.items():
            r = run(fn, make, sizes, dynamic)
            print(f"| {case} | {setting} | {r['graphs']} | {r['modules']} | {r['kernels']} | {r['call_ms']:.1f} "
                  f"| {r['total_s']:.2f} | {r['ok']} |")


if __name__ == "__main__":
    main()

"""GPU check for the Triton backend: correctness, then speed next to Inductor and eager.

Run on a CUDA machine: ``python benches/gpu_check.py`` (under 5 minutes). It drives the
backend directly on FX graphs, so it needs neither the native extension nor a Rust
toolchain, and it tolerates a Python version the package does not list (the version
check lives in ``fastdynamo/__init__.py``, which this script bypasses on purpose).
Without a CUDA device it prints "no CUDA device" and exits 0.

Prints, per case: max error vs eager and the kernel count (a case that falls back to
ATen ops, or raises, counts as a failure; one missing from an older torch is skipped);
then for the large cases time per call and achieved GB/s (bytes of inputs + outputs /
time) for fastdynamo, torch.compile (Inductor) and eager, cold compile time per kernel
(empty caches), and the issue's targets: at least Inductor's speed on each case, and at
least 70% of the memory bandwidth on the contiguous pointwise chain (the nominal figure
from the device properties; a device-to-device copy's is printed next to it). Exits 1
on a correctness failure.
"""
from __future__ import annotations

import importlib
import os
import sys
import tempfile
import time
import types
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[1] / "python"


def import_backend():
    """fastdynamo.backends.triton without the package's import-time version check."""
    sys.path.insert(0, str(PYTHON_DIR))
    try:
        importlib.import_module("fastdynamo")
    except ImportError:
        stub = types.ModuleType("fastdynamo")
        stub.__path__ = [str(PYTHON_DIR / "fastdynamo")]
        stub.__version__ = "0.1.0"
        sys.modules["fastdynamo"] = stub
    return importlib.import_module("fastdynamo.backends.triton")


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device")
        return 0
    # Cold caches, so compile times are real: ours and Triton's.
    os.environ["FASTDYNAMO_CACHE_DIR"] = tempfile.mkdtemp(prefix="fastdynamo-gpu-check-")
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-gpu-check-"))
    os.environ.pop("TRITON_INTERPRET", None)
    backend = import_backend()
    import torch.nn.functional as F

    torch.manual_seed(0)
    device = torch.device("cuda")
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  python {sys.version.split()[0]}")

    def pointwise_chain(x, y):
        return torch.sigmoid((x * 1.5 + y).exp().clamp(max=4.0)) * torch.tanh(y) + x

    def softmax(x):
        return torch.softmax(x, -1)

    def layer_norm(x, w, b):
        return F.layer_norm(x, (x.shape[-1],), w, b)

    def rms_norm(x, w):
        return F.rms_norm(x, (x.shape[-1],), w)

    def gelu_bias_residual(x, b, r):
        return F.gelu(x + b) + r

    def row_sum(x):
        return x.sum(-1)

    def reductions(x):
        return x.amax(0), x.argmax(1), x.var(1), x.mean(0, keepdim=True)

    def middle_dim(x):
        return x.sum(1), x.amin(1, keepdim=True)

    def sliced(x, y):
        return (x[:, 1:-1] * 2 + y[::2]).relu()

    def mixed_externs(x, w):
        return torch.softmax(x @ w, -1) * 2 + 1

    def on(*shape, dtype=torch.float32):
        return torch.randn(*shape, device=device, dtype=dtype)

    correctness = {
        "pointwise_chain": (pointwise_chain, (on(37, 129), on(129))),
        "pointwise_transposed": (pointwise_chain, (on(129, 37).t(), on(129))),
        "softmax": (softmax, (on(64, 1000),)),
        "softmax_looped": (softmax, (on(16, 5000),)),
        "layer_norm": (layer_norm, (on(64, 768), on(768), on(768))),
        "layer_norm_fp16": (layer_norm, (on(64, 768, dtype=torch.float16), on(768, dtype=torch.float16),
                                         on(768, dtype=torch.float16))),
        "rms_norm_bf16": (rms_norm, (on(64, 4096, dtype=torch.bfloat16), on(4096, dtype=torch.bfloat16))),
        "gelu_bias_residual": (gelu_bias_residual, (on(33, 257), on(257), on(33, 257))),
        "reductions": (reductions, (on(48, 300),)),
        "reductions_middle_dim": (middle_dim, (on(6, 333, 7),)),
        "sliced_inputs": (sliced, (on(40, 66), on(80, 70)[:, 3:67])),
        "mixed_externs": (mixed_externs, (on(33, 64), on(64, 100))),
    }
    failures = 0
    print("\ncorrectness (max abs error vs eager)")
    for name, (fn, inputs) in correctness.items():
        if fn is rms_norm and not hasattr(F, "rms_norm"):
            print(f"  {name:24s} skipped: torch {torch.__version__} has no F.rms_norm")
            continue
        try:
            compiled = backend.compile_graph(torch.fx.symbolic_trace(fn), list(inputs))
            ok, error = _compare(compiled(*inputs), fn(*inputs))
        except Exception as crash:  # noqa: BLE001 - report every case, then fail
            failures += 1
            print(f"  {name:24s} ERROR {type(crash).__name__}: {crash}")
            continue
        fallback = compiled.fallback_reason
        failures += (not ok) + bool(fallback)
        print(f"  {name:24s} kernels={compiled.kernel_count}  max_err={error:.2e}  {'ok' if ok else 'MISMATCH'}"
              f"{'  FALLBACK: ' + fallback if fallback else ''}")

    big = {
        "pointwise_chain 16M": (pointwise_chain, (on(4096, 4096), on(4096))),
        "softmax 8192x4096": (softmax, (on(8192, 4096),)),
        "layer_norm 8192x4096": (layer_norm, (on(8192, 4096), on(4096), on(4096))),
        "row_sum 8192x8192": (row_sum, (on(8192, 8192),)),
    }
    copy_gbs, nominal_gbs = _copy_bandwidth_gbs(), _nominal_bandwidth_gbs()
    peak_gbs = nominal_gbs or copy_gbs
    print(f"\nmemory bandwidth: nominal {nominal_gbs or float('nan'):.0f} GB/s, device-to-device copy "
          f"{copy_gbs:.0f} GB/s; the target uses the {'nominal' if nominal_gbs else 'copy'} figure")
    print(f"\n{'case':24s} {'impl':10s} {'ms':>8s} {'GB/s':>8s} {'cold compile':>14s}")
    verdicts = []
    for name, (fn, inputs) in big.items():
        gm = torch.fx.symbolic_trace(fn)
        start = time.perf_counter()
        compiled = backend.compile_graph(gm, list(inputs))
        out = compiled(*inputs)
        torch.cuda.synchronize()
        cold = time.perf_counter() - start
        moved = sum(t.numel() * t.element_size() for t in inputs) + _bytes(out)
        per_kernel = cold / max(compiled.kernel_count, 1)
        rows = [("fastdynamo", compiled, f"{per_kernel:.2f}s/kernel x{compiled.kernel_count}")]
        try:
            start = time.perf_counter()
            inductor = torch.compile(fn)
            inductor(*inputs)
            torch.cuda.synchronize()
            rows.append(("inductor", inductor, f"{time.perf_counter() - start:.2f}s total"))
        except Exception as error:  # an old torch or a missing compiler must not stop the check
            print(f"  {name:24s} inductor   unavailable: {type(error).__name__}: {error}")
        rows.append(("eager", fn, ""))
        times = {}
        for impl, callable_, compile_note in rows:
            times[impl] = ms = _time_ms(callable_, inputs)
            print(f"  {name:24s} {impl:10s} {ms:8.3f} {moved / ms / 1e6:8.1f} {compile_note:>14s}")
        if "inductor" in times:
            speed = times["inductor"] / times["fastdynamo"]
            verdicts.append(f"{name}: {speed:.2f}x Inductor's speed (target >= 1.00) "
                            f"{'met' if speed >= 1.0 else 'MISSED'}")
        if name.startswith("pointwise_chain"):
            achieved = moved / times["fastdynamo"] / 1e6
            share = achieved / peak_gbs
            verdicts.append(f"{name}: {share:.0%} of the memory bandwidth, {achieved / copy_gbs:.0%} of a copy's "
                            f"(target >= 70%) {'met' if share >= 0.7 else 'MISSED'}")
    print("\ntargets:")
    for verdict in verdicts:
        print(f"  {verdict}")
    print("\nresult:", "all correct" if failures == 0 else f"{failures} FAILURES (mismatch, fallback or error)")
    return 1 if failures else 0


def _copy_bandwidth_gbs() -> float:
    """GB/s of a 1 GiB device-to-device copy (read + write)."""
    import torch

    source = torch.empty(2**28, device="cuda")
    target = torch.empty_like(source)
    ms = _time_ms(lambda a, b: b.copy_(a), (source, target))
    return 2 * source.numel() * source.element_size() / ms / 1e6


def _nominal_bandwidth_gbs() -> float | None:
    """2 x memory clock x bus width from the device properties (None where torch lacks them)."""
    import torch

    properties = torch.cuda.get_device_properties(torch.cuda.current_device())
    clock_khz = getattr(properties, "memory_clock_rate", 0)
    bus_bits = getattr(properties, "memory_bus_width", 0)
    return 2 * clock_khz * 1e3 * bus_bits / 8 / 1e9 if clock_khz and bus_bits else None


def _compare(actual, expected) -> tuple:
    import torch

    if isinstance(expected, (tuple, list)):
        results = [_compare(a, e) for a, e in zip(actual, expected, strict=True)]
        return all(r[0] for r in results), max(r[1] for r in results)
    if not expected.dtype.is_floating_point:
        equal = torch.equal(actual, expected)
        return equal, 0.0 if equal else float("inf")
    tolerance = {torch.float16: 2e-2, torch.bfloat16: 6e-2}.get(expected.dtype, 1e-4)
    error = (actual.float() - expected.float()).abs().max().item()
    ok = torch.allclose(actual.float(), expected.float(), atol=tolerance, rtol=tolerance)
    return ok and actual.shape == expected.shape and actual.dtype == expected.dtype, error


def _bytes(value) -> int:
    if isinstance(value, (tuple, list)):
        return sum(_bytes(v) for v in value)
    return value.numel() * value.element_size()


def _time_ms(fn, inputs, repeats: int = 20) -> float:
    import torch

    for _ in range(3):
        fn(*inputs)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn(*inputs)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats


if __name__ == "__main__":
    sys.exit(main())

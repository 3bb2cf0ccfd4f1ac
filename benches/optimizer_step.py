"""Adam's ``opt.step()`` over a tiny transformer's parameters (and over one parameter of
2^20 elements, where the kernels' arithmetic dominates): eager against
``torch.compile(opt.step)`` (Inductor) and ``fastdynamo.compile(opt.step)`` (the default
backend's C++ kernels: one fused kernel per parameter), one thread.

Each system steps its own copy of the model (the same initial weights and gradients).
First calls: the first step (it makes the state: fastdynamo compiles once for it) and
the second (the steady-state graph), each timed alone, fastdynamo's kernel cache empty
(a fresh ``FASTDYNAMO_CACHE_DIR``; Inductor's own on-disk caches are as this machine
left them). Warm: seconds per step, systems interleaved round by round, best round.
The largest difference from eager's parameters after all the steps is printed (rounding
only: fused kernels round differently; each step moves a weight by about ``lr``).

    OMP_NUM_THREADS=1 PYTHONPATH=python python benches/optimizer_step.py [--rounds 15]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("FASTDYNAMO_CACHE_DIR", tempfile.mkdtemp(prefix="fastdynamo-optimizer-bench-"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from bench_timing import best, interleaved  # noqa: E402

import fastdynamo  # noqa: E402


def tiny_transformer() -> torch.nn.Module:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
    return torch.nn.Sequential(torch.nn.Embedding(100, 64), torch.nn.TransformerEncoder(layer, num_layers=2,
                                                                                        enable_nested_tensor=False),
                               torch.nn.Linear(64, 100))


def with_gradients(model: torch.nn.Module) -> torch.nn.Module:
    generator = torch.Generator().manual_seed(1)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=generator) * 1e-2
    return model


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def one_large_parameter() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.ParameterList([torch.nn.Parameter(torch.randn(1 << 20))])


MODELS = {"a tiny transformer": tiny_transformer, "one 2^20-element parameter": one_large_parameter}


def run(title: str, build, args) -> None:
    systems = ["eager", "fastdynamo"] + ([] if args.no_inductor else ["torch.compile"])
    models = {name: with_gradients(build()) for name in systems}
    optimizers = {name: torch.optim.Adam(model.parameters(), lr=1e-3) for name, model in models.items()}
    steps = {"eager": optimizers["eager"].step, "fastdynamo": fastdynamo.compile(optimizers["fastdynamo"].step)}
    if "torch.compile" in systems:
        steps["torch.compile"] = torch.compile(optimizers["torch.compile"].step)
    params = sum(p.numel() for p in models["eager"].parameters())
    tensors = len(list(models["eager"].parameters()))
    print(f"\nAdam over {title}: {tensors} parameter tensors, {params} elements; "
          f"{torch.get_num_threads()} thread(s); torch {torch.__version__}")
    first = {name: (timed(step), timed(step)) for name, step in steps.items()}
    samples = interleaved(steps, calls=args.calls, rounds=args.rounds)
    warm = best(samples)
    total = 2 + args.calls * args.rounds
    print(f"{'system':<14} {'1st step':>10} {'2nd step':>10} {'warm step':>10} {'vs eager':>9} "
          f"{f'max |diff| after {total} steps':>28}")
    for name in systems:
        one, two = first[name]
        diff = max((q - p).abs().max().item() for p, q in zip(models["eager"].parameters(),
                                                               models[name].parameters(), strict=True))
        print(f"{name:<14} {one * 1e3:>8.1f}ms {two * 1e3:>8.1f}ms {warm[name] * 1e6:>8.0f}us "
              f"{warm['eager'] / warm[name]:>8.2f}x {diff:>28.2e}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--no-inductor", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    for title, build in MODELS.items():
        run(title, build, args)


if __name__ == "__main__":
    main()

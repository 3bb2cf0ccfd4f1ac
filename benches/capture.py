"""Capture benchmarks, side by side with torch.compile(backend="eager"), in one run.

    PYTHONPATH=python python benches/capture.py [--quick]

- cache-hit overhead above eager of relu(x + y) on an 8-element tensor, and of
  functions with 8 and 64 tensor inputs;
- cold capture time (first call, after a reset) of the demo model and corpus functions.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402  (the thing we compare against)

import fastdynamo  # noqa: E402
from fastdynamo.__main__ import TinyNet  # noqa: E402


def relu_add(x, y):
    return torch.relu(x + y)


def make_sum(count):
    params = ", ".join(f"t{i}" for i in range(count))
    body = " + ".join(f"t{i}" for i in range(count))
    namespace = {"torch": torch}
    exec(f"def sum_{count}({params}):\n    return {body}\n", namespace)
    return namespace[f"sum_{count}"]


def corpus_mlp(x, w1, w2):
    return torch.relu(x @ w1).softmax(-1) @ w2


def corpus_views(x):
    y = x.transpose(0, 1).reshape(-1)
    return y[::2].sum() + x.mean(0)


def per_call_ns(fn, args, n, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(n):
            fn(*args)
        best = min(best, (time.perf_counter_ns() - start) / n)
    return best


def overhead_table(n, repeats):
    print("\n## Cache-hit overhead above eager (ns per call)")
    print(f"{'function':<22}{'eager':>10}{'fastdynamo':>12}{'torch.compile':>15}{'fd over':>9}{'tc over':>9}")
    cases = [("relu(x + y), 8 elems", relu_add, [torch.randn(8), torch.randn(8)])]
    for count in (8, 64):
        cases.append((f"{count} tensor inputs", make_sum(count), [torch.randn(8) for _ in range(count)]))
    rows = []
    for name, fn, args in cases:
        ours = fastdynamo.compile(fn, backend="eager")
        theirs = torch.compile(fn, backend="eager")
        for compiled in (ours, theirs):
            torch.testing.assert_close(compiled(*args), fn(*args))
            compiled(*args)
        eager = per_call_ns(fn, args, n, repeats)
        ours_ns = per_call_ns(ours, args, n, repeats)
        theirs_ns = per_call_ns(theirs, args, n, repeats)
        rows.append((name, eager, ours_ns, theirs_ns))
        print(f"{name:<22}{eager:10.0f}{ours_ns:12.0f}{theirs_ns:15.0f}{ours_ns - eager:9.0f}{theirs_ns - eager:9.0f}")
    return rows


def cold_ms(compile_fn, fn, args, reset):
    reset()
    compiled = compile_fn(fn)
    start = time.perf_counter()
    compiled(*args)
    return (time.perf_counter() - start) * 1e3


def cold_table():
    print("\n## Cold capture time, first call (ms)")
    print(f"{'function':<14}{'fastdynamo':>12}{'torch.compile':>15}{'ratio':>8}")
    model = TinyNet().eval()
    cases = [
        ("demo model", model, [torch.randn(4, 32)]),
        ("relu_add", relu_add, [torch.randn(8), torch.randn(8)]),
        ("corpus_mlp", corpus_mlp, [torch.randn(4, 16), torch.randn(16, 16), torch.randn(16, 8)]),
        ("corpus_views", corpus_views, [torch.randn(6, 4)]),
    ]
    for name, fn, args in cases:
        ours = cold_ms(lambda f: fastdynamo.compile(f, backend="eager"), fn, args, fastdynamo.reset)
        theirs = cold_ms(lambda f: torch.compile(f, backend="eager"), fn, args, torch._dynamo.reset)
        print(f"{name:<14}{ours:12.1f}{theirs:15.1f}{ours / theirs:8.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n, repeats = (2_000, 3) if args.quick else (20_000, 5)
    torch.set_num_threads(1)
    print(f"# fastdynamo capture benchmarks (torch {torch.__version__})")
    with torch.no_grad():
        overhead_table(n, repeats)
        cold_table()


if __name__ == "__main__":
    main()

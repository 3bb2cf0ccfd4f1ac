"""``python -m fastdynamo``: compile a small model, show what was captured, time it.

Prints the captured FX graph, its guards, how the default backend (``kernels``) ran it
(C++ kernels on CPU, Triton kernels on a CUDA device, or the ATen ops where kernels do
not pay), the per-call time eager vs compiled, and checks that the outputs match.
"""
from __future__ import annotations

import time

import torch

import fastdynamo
from fastdynamo.backends import DEFAULT_BACKEND, describe
from fastdynamo.convert_frame import Recorder


class TinyNet(torch.nn.Module):
    def __init__(self, dim: int = 32):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.layers = torch.nn.ModuleList([torch.nn.Linear(dim, dim) for _ in range(3)])
        self.residual = True

    def forward(self, x):
        h = self.norm(x)
        for layer in self.layers:
            y = torch.nn.functional.gelu(layer(h))
            h = h + y if self.residual else y
        return h.softmax(dim=-1)


def _per_call_us(fn, x, repeats: int = 300) -> float:
    for _ in range(10):
        fn(x)
    start = time.perf_counter()
    for _ in range(repeats):
        fn(x)
    return (time.perf_counter() - start) / repeats * 1e6


def main() -> None:
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = TinyNet().eval().to(device)
    x = torch.randn(4, 32, device=device)

    report = fastdynamo.explain(model)(x)
    print(report)

    recorder = Recorder()
    compiled = fastdynamo.compile(model, _recorder=recorder)
    with torch.no_grad():
        expected = model(x)
        actual = compiled(x)
        torch.testing.assert_close(actual, expected)
        eager_us = _per_call_us(model, x)
        compiled_us = _per_call_us(compiled, x)
    print(f"\nbackend {DEFAULT_BACKEND!r} on {device} (under torch.no_grad()):")
    for capture in recorder.captures:
        print(f"  {capture.code.co_qualname}: {describe(capture.compiled_fn)}")
    print(f"outputs match: {tuple(actual.shape)} {actual.dtype}")
    print(f"per call: eager {eager_us:.1f} us, compiled {compiled_us:.1f} us "
          f"({eager_us / compiled_us:.2f}x)")


if __name__ == "__main__":
    main()

"""Compilations of the zoo's models over several batch sizes / sequence lengths:
fastdynamo (dynamic=None, automatic) against ``torch.compile(backend="eager")``.

    PYTHONPATH=python python benches/dynamic_counts.py [model ...]

Prints, per model, the sizes called, how many graphs each compiler compiled, and
whether every result equals eager's.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from models.zoo import BY_NAME  # noqa: E402

import fastdynamo  # noqa: E402
from fastdynamo.convert_frame import Recorder  # noqa: E402

# model -> (which input dim varies, sizes)
PLANS = {
    "mobilenet_v3_small": (0, list(range(1, 9))),
    "bert": (1, list(range(4, 13))),
    "gpt2": (1, list(range(4, 13))),
    "llama": (1, list(range(4, 13))),
    "transformer_encoder": (1, list(range(4, 13))),
    "lstm": (0, list(range(1, 9))),
}


def resized(args: tuple, dim: int, size: int) -> tuple:
    first = args[0]
    shape = list(first.shape)
    shape[dim] = size
    torch.manual_seed(size)
    if first.dtype in (torch.int64, torch.int32):
        new = torch.randint(0, 96, shape, dtype=first.dtype)
    else:
        new = torch.randn(shape, dtype=first.dtype)
    return (new, *args[1:])


def leaves(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if hasattr(value, "to_tuple"):
        value = value.to_tuple()
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in leaves(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in leaves(v)]
    return []


def same(a, b) -> bool:
    la, lb = leaves(a), leaves(b)
    return len(la) == len(lb) and all(x.shape == y.shape and torch.allclose(x, y, atol=1e-5) for x, y in zip(la, lb, strict=True))


def count_torch(model, calls) -> int:
    import torch._dynamo as dynamo

    dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(model, backend=backend)
    with torch.no_grad():
        for args in calls:
            compiled(*args)
    return len(graphs)


def count_fastdynamo(model, calls, dynamic) -> tuple[int, bool]:
    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.OptimizedModule(model, backend="eager", dynamic=dynamic, recorder=recorder)
    ok = True
    with torch.no_grad():
        for args in calls:
            ok &= same(compiled(*args), model(*args))
    return len(recorder.captures), ok


def main(names: list[str]) -> None:
    print(f"{'model':22} {'sizes':10} {'fd static':>9} {'fd auto':>8} {'torch auto':>10}  equal")
    for name in names or list(PLANS):
        dim, sizes = PLANS[name]
        model, args = BY_NAME[name].build()
        calls = [resized(args, dim, s) for s in sizes]
        static, ok_static = count_fastdynamo(model, calls, False)
        auto, ok_auto = count_fastdynamo(model, calls, None)
        theirs = count_torch(model, calls)
        span = f"{sizes[0]}..{sizes[-1]}"
        print(f"{name:22} {span:10} {static:9} {auto:8} {theirs:10}  {ok_static and ok_auto}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

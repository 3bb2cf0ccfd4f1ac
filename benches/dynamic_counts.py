"""Compilations of the zoo's models over several batch sizes / sequence lengths:
fastdynamo (dynamic=None, automatic) against ``torch.compile(backend="eager")``.

    PYTHONPATH=python python benches/dynamic_counts.py [model ...]

Prints, per model, the sizes called, how many graphs each compiler compiled, whether
every result equals eager's, and the time of the second call: the one that recompiles
with the changed dimension symbolic (CPU time of the call less eager's for the same
input, best of ``--repeats`` fresh runs; the first call pays one-time set-up, the
second only the dynamic compilation; eager runs each input first, so that kernels'
first use of a size is not counted as compilation).
"""
from __future__ import annotations

import argparse
import sys
import time
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


def timed(fn, args) -> tuple[object, float]:
    start = time.thread_time()
    result = fn(*args)
    return result, time.thread_time() - start


def eager_time(model, args, repeats: int = 5) -> float:
    with torch.no_grad():
        return min(timed(model, args)[1] for _ in range(repeats))


def count_torch(model, calls) -> tuple[int, float]:
    """Graphs torch.compile(backend="eager") compiled, and the second call's time."""
    import torch._dynamo as dynamo

    dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(model, backend=backend)
    times = []
    with torch.no_grad():
        for args in calls:
            model(*args)  # kernels' first-use set-up for this size is not compilation
            times.append(timed(compiled, args)[1])
    return len(graphs), times[1]


def count_fastdynamo(model, calls, dynamic) -> tuple[int, bool, float]:
    """Graphs fastdynamo compiled, whether every result equals eager's, and the second
    call's time."""
    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.OptimizedModule(model, backend="eager", dynamic=dynamic, recorder=recorder)
    ok = True
    times = []
    with torch.no_grad():
        for args in calls:
            expected = model(*args)  # first, as for torch.compile
            result, seconds = timed(compiled, args)
            times.append(seconds)
            ok &= same(result, expected)
    return len(recorder.captures), ok, times[1]


def second_compile_ms(count, model, calls, repeats: int, *extra) -> tuple[int, bool, float]:
    """``count(model, calls, *extra)`` run ``repeats`` times: its count and equality (the
    last run's) and the best second-call time less eager's, in ms."""
    best = float("inf")
    for _ in range(repeats):
        *outcome, seconds = count(model, calls, *extra)
        best = min(best, seconds)
    ok = outcome[1] if len(outcome) > 1 else True
    return outcome[0], ok, (best - eager_time(model, calls[1])) * 1e3


def main(names: list[str], repeats: int) -> None:
    print(f"{'model':22} {'sizes':10} {'fd static':>9} {'fd auto':>8} {'torch auto':>10}  equal"
          f" {'2nd compile fd ms':>18} {'torch ms':>9} {'fd/torch':>8}")
    for name in names or list(PLANS):
        dim, sizes = PLANS[name]
        model, args = BY_NAME[name].build()
        calls = [resized(args, dim, s) for s in sizes]
        static, ok_static, _ = count_fastdynamo(model, calls, False)
        auto, ok_auto, ours = second_compile_ms(count_fastdynamo, model, calls, repeats, None)
        theirs_count, _, theirs = second_compile_ms(count_torch, model, calls, repeats)
        span = f"{sizes[0]}..{sizes[-1]}"
        print(f"{name:22} {span:10} {static:9} {auto:8} {theirs_count:10}  {str(ok_static and ok_auto):5}"
              f" {ours:18.1f} {theirs:9.1f} {ours / theirs:8.2f}", flush=True)


if __name__ == "__main__":
    # Times are CPU times of this thread: run kernels on it too (compilation is
    # single-threaded; the eager part of a call then counts where it runs).
    torch.set_num_threads(1)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help=f"models to run (default: all of {', '.join(PLANS)})")
    parser.add_argument("--repeats", type=int, default=3, help="fresh runs per compiler; the best second call counts")
    options = parser.parse_args()
    main(options.models, options.repeats)

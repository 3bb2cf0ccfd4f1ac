"""The dynamic-shape rows of ``benches/models.py`` (issue #13): compilations of the zoo's
models over several batch sizes / sequence lengths, fastdynamo (``dynamic=None``,
automatic, and ``dynamic=False``) against ``torch.compile``'s automatic dynamic, both with
an eager backend, and the time of the second compilation.

    PYTHONPATH=python python benches/models.py --dynamic [--repeats N] [names...]

Per model: the sizes called, how many graphs each compiler compiled, whether every
result equals eager's, and the time of the second call: the one that recompiles with the
changed dimension symbolic (CPU time of the call less eager's for the same input, best of
``repeats`` fresh runs; the first call pays one-time set-up, the second only the dynamic
compilation; eager runs each input first, so that kernels' first use of a size is not
counted as compilation). Times are CPU times of this thread, with one intra-op thread.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import torch

import fastdynamo
from fastdynamo.convert_frame import Recorder

# model -> (which input dim varies, what it is, sizes)
PLANS: dict[str, tuple[int, str, list[int]]] = {
    "mobilenet_v3_small": (0, "batch", list(range(1, 9))),
    "lstm": (0, "batch", list(range(1, 9))),
    "bert": (1, "sequence", list(range(4, 13))),
    "llama": (1, "sequence", list(range(4, 13))),
    "gpt2": (1, "sequence", list(range(4, 13))),
    "transformer_encoder": (1, "sequence", list(range(4, 13))),
}

HEADER = ("| model | sizes called | fastdynamo `dynamic=False` | fastdynamo automatic "
          "| torch.compile automatic | equal to eager | 2nd compile: fastdynamo "
          "| 2nd compile: torch.compile | ratio |\n|---|---|---|---|---|---|---|---|---|")


def resized(args: tuple, dim: int, size: int) -> tuple:
    """``args`` with the first input's ``dim`` of size ``size`` (fresh random values)."""
    first = args[0]
    shape = list(first.shape)
    shape[dim] = size
    torch.manual_seed(size)
    if first.dtype in (torch.int64, torch.int32):
        new = torch.randint(0, 96, shape, dtype=first.dtype)
    else:
        new = torch.randn(shape, dtype=first.dtype)
    return (new, *args[1:])


def _leaves(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if hasattr(value, "to_tuple"):
        value = value.to_tuple()
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _leaves(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _leaves(v)]
    return []


def _same(a: Any, b: Any) -> bool:
    la, lb = _leaves(a), _leaves(b)
    return len(la) == len(lb) and all(x.shape == y.shape and torch.allclose(x, y, atol=1e-5)
                                      for x, y in zip(la, lb, strict=True))


def _timed(fn: Callable, args: tuple) -> tuple[Any, float]:
    start = time.thread_time()
    result = fn(*args)
    return result, time.thread_time() - start


def _eager_time(model: Callable, args: tuple, repeats: int = 5) -> float:
    with torch.no_grad():
        return min(_timed(model, args)[1] for _ in range(repeats))


def count_torch(model: torch.nn.Module, calls: list[tuple]) -> tuple[int, bool, float]:
    """Graphs torch.compile (an eager backend that counts) compiled, True, and the second
    call's time."""
    import torch._dynamo as dynamo

    dynamo.reset()
    graphs = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(model, backend=backend)
    times = []
    with torch.no_grad():
        for args in calls:
            model(*args)  # kernels' first-use set-up for this size is not compilation
            times.append(_timed(compiled, args)[1])
    return len(graphs), True, times[1]


def count_fastdynamo(model: torch.nn.Module, calls: list[tuple], dynamic: bool | None) -> tuple[int, bool, float]:
    """Graphs fastdynamo compiled (every frame and resume function), whether every result
    equals eager's, and the second call's time."""
    fastdynamo.reset()
    recorder = Recorder()
    compiled = fastdynamo.OptimizedModule(model, backend="eager", dynamic=dynamic, recorder=recorder)
    ok = True
    times = []
    with torch.no_grad():
        for args in calls:
            expected = model(*args)  # first, as for torch.compile
            result, seconds = _timed(compiled, args)
            times.append(seconds)
            ok &= _same(result, expected)
    return len(recorder.captures), ok, times[1]


def _second_compile_ms(count: Callable, model: torch.nn.Module, calls: list[tuple], repeats: int,
                       *extra: Any) -> tuple[int, bool, float]:
    """``count(model, calls, *extra)`` run ``repeats`` times: its count and equality (the
    last run's) and the best second-call time less eager's, in ms."""
    best = float("inf")
    for _ in range(repeats):
        graphs, ok, seconds = count(model, calls, *extra)
        best = min(best, seconds)
    return graphs, ok, (best - _eager_time(model, calls[1])) * 1e3


def measure(name: str, build: Callable[[], tuple[torch.nn.Module, tuple]], repeats: int) -> dict[str, Any]:
    """One dynamic-shape row: compile counts and second-compile times."""
    dim, what, sizes = PLANS[name]
    model, args = build()
    calls = [resized(args, dim, s) for s in sizes]
    static, ok_static, _ = count_fastdynamo(model, calls, False)
    auto, ok_auto, ours = _second_compile_ms(count_fastdynamo, model, calls, repeats, None)
    theirs_count, _, theirs = _second_compile_ms(count_torch, model, calls, repeats)
    return {"model": name, "sizes": f"{what} {sizes[0]}..{sizes[-1]}", "static": static, "auto": auto,
            "torch": theirs_count, "equal": ok_static and ok_auto, "fd ms": ours, "torch ms": theirs}


def print_rows(cases: list, repeats: int) -> None:
    """The dynamic-shape table for the cases of ``tests/models/zoo.py`` that have a plan."""
    # Compilation is single-threaded: with one intra-op thread the eager part of a call
    # counts where it runs, on this thread's CPU time.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    print(f"dynamic shapes: inference, backend='eager' for both; 2nd compile: CPU ms of the recompiling call "
          f"less eager's, best of {repeats} fresh runs")
    print(HEADER)
    try:
        for case in cases:
            if case.name not in PLANS:
                continue
            row = measure(case.name, case.build, repeats)
            print(f"| {row['model']} | {row['sizes']} | {row['static']} | {row['auto']} | {row['torch']} "
                  f"| {row['equal']} | {row['fd ms']:.0f} ms | {row['torch ms']:.0f} ms "
                  f"| {row['fd ms'] / row['torch ms']:.2f} |", flush=True)
    finally:
        torch.set_num_threads(threads)

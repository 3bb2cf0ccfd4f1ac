"""The training rows of ``benches/models.py --mode train --backends default``: eager,
``torch.compile(model)`` (Inductor) and ``fastdynamo.compile(model)`` (default backend:
joint graph, our partition, C++ kernels for both halves on CPU), one training step
(zero_grad, forward, loss, ``loss.backward()``, SGD step outside the compiled model),
dropout off, one intra-op thread.

    OMP_NUM_THREADS=1 PYTHONPATH=python python benches/models.py --mode train --backends default [names...]

Each model runs in a fresh process with empty caches (new ``FASTDYNAMO_CACHE_DIR`` and
``TORCHINDUCTOR_CACHE_DIR``); each system first compiles a tiny function (process
set-up: imports, compiler probes, not put on the model). Columns:
  first call  the first training step of the compiled model (capture, joint trace,
              partition, code generation, C++ compiles; Inductor's the same), wall time.
  warm        median per-step time over interleaved rounds, as a ratio to eager's.
  peak        the largest total of live CPU tensor bytes during one warm step, from the
              profiler's CPU allocator events (``profile_memory=True``: every allocation
              and free of torch's CPU allocator), relative to the step's start; tracemalloc
              does not see torch's allocations and the process RSS is dominated by
              allocator caching, so this is the honest number for tensors.
  grads       gradients after the first step allclose to eager's (rtol 1e-3, atol 1e-4
              times the largest gradient).
Targets (issue #22): warm at or below Inductor's and never above eager's, peak at or
below eager's, first call at most a third of Inductor's.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benches"))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402  (the system compared against)
from bench_timing import interleaved, medians  # noqa: E402
from tests.models.zoo import BY_NAME  # noqa: E402

import fastdynamo  # noqa: E402
from fastdynamo.backends import describe  # noqa: E402
from fastdynamo.convert_frame import Recorder  # noqa: E402

clock = time.perf_counter
CHILD_TIMEOUT_S = 900
SYSTEMS = ("eager", "inductor", "fastdynamo")


def _build(name: str) -> tuple[torch.nn.Module, tuple]:
    model, args = BY_NAME[name].build()
    model.train()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model, args


def _stepper(name: str, model: torch.nn.Module, forward: Callable) -> Callable[[tuple], torch.Tensor]:
    case = BY_NAME[name]
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step(args: tuple) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = case.loss(forward(*args))
        loss.backward()
        optimizer.step()
        return loss
    return step


def peak_bytes(run: Callable[[], Any]) -> int:
    """Largest live CPU tensor bytes during ``run()``, relative to its start (see the module docstring)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    live = peak = 0
    for event in sorted((e for e in prof.events() if e.cpu_memory_usage), key=lambda e: e.time_range.start):
        live += event.cpu_memory_usage
        peak = max(peak, live)
    return peak


def _grads_close(model: torch.nn.Module, reference: torch.nn.Module) -> bool:
    for got, want in zip(model.parameters(), reference.parameters(), strict=True):
        g = torch.zeros_like(got) if got.grad is None else got.grad
        w = torch.zeros_like(want) if want.grad is None else want.grad
        if not torch.allclose(g, w, rtol=1e-3, atol=1e-4 * float(w.abs().max()) + 1e-6):
            return False
    return True


def child(name: str, calls: int, rounds: int) -> dict[str, Any]:
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    tiny = torch.nn.Linear(4, 4)
    for compile_tiny in (torch.compile, fastdynamo.compile):  # process set-up, not the model's
        compile_tiny(tiny)(torch.randn(2, 4)).sum().backward()
    torch._dynamo.reset()
    fastdynamo.reset()
    models = {system: _build(name) for system in SYSTEMS}
    args = models["eager"][1]
    recorder = Recorder()
    forwards = {"eager": models["eager"][0], "inductor": torch.compile(models["inductor"][0]),
                "fastdynamo": fastdynamo.compile(models["fastdynamo"][0], _recorder=recorder)}
    steps = {system: _stepper(name, models[system][0], forwards[system]) for system in SYSTEMS}
    row: dict[str, Any] = {"model": name}
    steps["eager"](args)  # eager's own first-use set-up (oneDNN, MKL)
    for system in ("inductor", "fastdynamo"):
        start = clock()
        steps[system](args)
        row[f"{system} first"] = clock() - start
    reference = _build(name)[0]
    _stepper(name, reference, reference)(args)
    # the first step's gradients (each model took exactly one step from equal weights, eager two)
    row["grads equal"] = {system: _grads_close(models[system][0], reference) for system in ("inductor", "fastdynamo")}
    for step in steps.values():
        for _ in range(3):
            step(args)
    warm = medians(interleaved({system: (lambda step=step: step(args)) for system, step in steps.items()},
                               calls, rounds))
    row["warm"] = warm
    row["peak"] = {system: peak_bytes(lambda step=step: step(args)) for system, step in steps.items()}
    row["fastdynamo runs"] = [describe(capture.compiled_fn) for capture in recorder.captures]
    row["graphs"] = len(recorder.captures)
    row["kernels"] = sum(getattr(capture.compiled_fn, "kernel_count", 0) or 0 for capture in recorder.captures)
    return row


def _run_child(name: str, calls: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"fastdynamo-train-{name}-") as root:
        environ = {**os.environ, "OMP_NUM_THREADS": "1", "FASTDYNAMO_CACHE_DIR": str(Path(root, "fastdynamo")),
                   "TORCHINDUCTOR_CACHE_DIR": str(Path(root, "inductor"))}
        done = subprocess.run([sys.executable, __file__, name, str(calls), str(rounds)], capture_output=True,
                              text=True, env=environ, timeout=CHILD_TIMEOUT_S)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("ROW "):
            return json.loads(line[4:])
    tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
    raise RuntimeError(f"process for {name} exited {done.returncode}:\n{tail}")


HEADER = ("| model | fastdynamo graphs/kernels | first call: Inductor | fastdynamo | ratio "
          "| warm / eager: Inductor | fastdynamo | fastdynamo / Inductor | peak MB: eager | Inductor | fastdynamo "
          "| grads equal: Inductor | fastdynamo | eager step us |\n" + "|---" * 14 + "|")


def print_rows(cases: list, calls: int, rounds: int = 5) -> None:
    print(f"training step (forward, loss.backward(), SGD step), default backends, 1 intra-op thread; "
          f"warm: median of {rounds} interleaved rounds of {calls} steps; peak: profiler CPU allocator events")
    print(HEADER)
    notes = []
    for case in cases:
        try:
            row = _run_child(case.name, calls, rounds)
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            print(f"| {case.name} | ERROR: {' '.join(str(error).split())[:300]} |", flush=True)
            continue
        warm, peak, first = row["warm"], row["peak"], row
        cells = [f"{row['graphs']}/{row['kernels']}", f"{first['inductor first']:.2f} s",
                 f"{first['fastdynamo first']:.2f} s", f"{first['fastdynamo first'] / first['inductor first']:.2f}",
                 f"{warm['inductor'] / warm['eager']:.2f}x", f"{warm['fastdynamo'] / warm['eager']:.2f}x",
                 f"{warm['fastdynamo'] / warm['inductor']:.2f}",
                 *(f"{peak[s] / 1e6:.2f}" for s in SYSTEMS),
                 str(row["grads equal"]["inductor"]), str(row["grads equal"]["fastdynamo"]),
                 f"{warm['eager'] * 1e6:.0f}"]
        print(f"| {case.name} | " + " | ".join(cells) + " |", flush=True)
        notes += [f"{case.name}: {run}" for run in row["fastdynamo runs"]]
    for note in notes:
        print(f"note: {note}")


if __name__ == "__main__":
    name_, calls_, rounds_ = sys.argv[1:4]
    print("ROW " + json.dumps(child(name_, int(calls_), int(rounds_))), flush=True)

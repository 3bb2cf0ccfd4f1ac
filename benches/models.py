"""Real models side by side (issue #12): fastdynamo and ``torch.compile``, both with
``backend="eager"``, on the tiny models of ``tests/models/zoo.py``, in one process.

    PYTHONPATH=python python benches/models.py [--mode inference|train] [--calls N] [names...]
    PYTHONPATH=python python benches/models.py --dynamic [--repeats N] [names...]
    PYTHONPATH=python python benches/models.py --backends default [--repeats N] [names...]
    PYTHONPATH=python python benches/models.py --mode train --backends default [names...]

For each model and system it prints the graphs and graph breaks (each system's own
``explain``), the first call's time (capture included) and the warm time per call as a
ratio to eager's, measured interleaved in this run. ``inference`` runs under
``torch.no_grad()``; ``train`` runs forward and ``loss.backward()`` in grad mode.
``--dynamic`` prints the dynamic-shape rows instead (``benches/dynamic_rows.py``):
compilations over several batch sizes or sequence lengths, side by side with
torch.compile, and the time of the second (dynamic) compilation. ``--backends default``
prints the default backends' rows instead (``benches/default_rows.py``): Inductor and
fastdynamo's C++ kernels, first calls with empty and warm disk caches (fresh processes),
warm time, outputs against eager's; with ``--mode train``, the training-step rows
(``benches/train_rows.py``): first step, warm step, peak memory, gradients against eager's.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402  (the system compared against)
from tests.models.zoo import CASES, ModelCase  # noqa: E402

import fastdynamo  # noqa: E402

sys.path.insert(0, str(ROOT / "benches"))
import default_rows  # noqa: E402
import dynamic_rows  # noqa: E402
import train_rows  # noqa: E402
from bench_timing import interleaved, medians  # noqa: E402

clock = time.perf_counter


def _step(case: ModelCase, mode: str) -> Callable[[Callable, tuple], Any]:
    """One call of the model as the benchmark times it."""
    if mode == "inference":
        def infer(model: Callable, args: tuple) -> Any:
            with torch.no_grad():
                return model(*args)
        return infer

    def train(model: Callable, args: tuple) -> Any:
        loss = case.loss(model(*args))
        loss.backward()
        return loss
    return train


def _counts(system: str, model: torch.nn.Module, args: tuple, mode: str) -> tuple[int, int]:
    """Graphs and graph breaks of one call, from the system's own explain."""
    grad = torch.enable_grad() if mode == "train" else torch.no_grad()
    with grad:
        if system == "fastdynamo":
            report = fastdynamo.explain(model, backend="eager")(*args)
            return report.graph_count, report.graph_break_count
        torch._dynamo.reset()
        result = torch._dynamo.explain(model)(*args)
        torch._dynamo.reset()
        return result.graph_count, result.graph_break_count


def _compiled(system: str, model: torch.nn.Module) -> Callable:
    if system == "fastdynamo":
        fastdynamo.reset()
        return fastdynamo.compile(model, backend="eager")
    torch._dynamo.reset()
    return torch.compile(model, backend="eager")


def _first_call(step: Callable, fn: Callable, args: tuple) -> float:
    start = clock()
    step(fn, args)
    return clock() - start


def _warm_times(step: Callable, fns: dict[str, Callable], args: tuple, calls: int,
                rounds: int = 5) -> dict[str, float]:
    """Median per-call time of each function, the functions interleaved round by round so
    that the machine's noise falls on all of them alike."""
    return medians(interleaved({name: (lambda fn=fn: step(fn, args)) for name, fn in fns.items()}, calls, rounds))


def measure(case: ModelCase, mode: str, calls: int) -> dict[str, Any]:
    step = _step(case, mode)
    row: dict[str, Any] = {"model": case.name}
    fns: dict[str, Callable] = {}
    model, args = case.build()
    fns["eager"] = model
    for system in ("fastdynamo", "torch.compile"):
        row[system + " counts"] = _counts(system, model, args, mode)
        compiled = _compiled(system, model)
        row[system + " first"] = _first_call(step, compiled, args)
        fns[system] = compiled
        for _ in range(3):
            step(compiled, args)  # warm every cache before timing
    warm = _warm_times(step, fns, args, calls)
    for system in ("fastdynamo", "torch.compile"):
        row[system + " warm"] = warm[system] / warm["eager"]
    row["eager us"] = warm["eager"] * 1e6
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("inference", "train"), default="inference")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--backends", "--backend", choices=("eager", "default"), default="eager",
                        help="eager: both with backend='eager' (this table); default: Inductor and "
                             "fastdynamo's kernels (benches/default_rows.py; --mode train: benches/train_rows.py)")
    parser.add_argument("names", nargs="*")
    _add_dynamic_options(parser)
    options = parser.parse_args()
    warnings.filterwarnings("ignore")
    cases = [case for case in CASES if not options.names or case.name in options.names]
    if options.dynamic:
        dynamic_rows.print_rows(cases, options.repeats)
        return
    if options.backends == "default" and options.mode == "train":
        train_rows.print_rows(cases, options.calls)
        return
    if options.backends == "default":
        default_rows.print_rows(cases, options.repeats, options.calls)
        return
    print(f"mode: {options.mode}; backend='eager' for both; warm time / eager's, median of interleaved rounds")
    print("| model | torch.compile graphs/breaks | fastdynamo graphs/breaks | first call: torch.compile "
          "| first call: fastdynamo | warm / eager: torch.compile | warm / eager: fastdynamo | eager us |")
    print("|---|---|---|---|---|---|---|---|")
    for case in cases:
        row = measure(case, options.mode, options.calls)
        tc, fd = row["torch.compile counts"], row["fastdynamo counts"]
        print(f"| {case.name} | {tc[0]}/{tc[1]} | {fd[0]}/{fd[1]} | {row['torch.compile first']:.2f} s "
              f"| {row['fastdynamo first']:.2f} s | {row['torch.compile warm']:.2f}x "
              f"| {row['fastdynamo warm']:.2f}x | {row['eager us']:.0f} |", flush=True)


# -- dynamic shapes (issue #13) --------------------------------------------------------
def _add_dynamic_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dynamic", action="store_true",
                        help="the dynamic-shape rows: compile counts over several sizes, 2nd compile time")
    parser.add_argument("--repeats", type=int, default=3,
                        help="--dynamic: fresh runs per compiler, the best second call counts; "
                             "--backends default: fresh processes per first call with a warm disk "
                             "cache (and the ATen path's), the best counts")


if __name__ == "__main__":
    main()

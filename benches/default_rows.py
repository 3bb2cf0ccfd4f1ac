"""The default-backend rows of ``benches/models.py``: eager, ``torch.compile(model)``
(Inductor) and ``fastdynamo.compile(model)`` (C++ kernels on CPU), inference under
``torch.no_grad()``, one intra-op thread.

    OMP_NUM_THREADS=1 PYTHONPATH=python python benches/models.py --backends default [--repeats N] [names...]

Each model runs in fresh processes, so that nothing one compiled is in memory for another:
  cold  empty caches (a new ``FASTDYNAMO_CACHE_DIR``, a new ``TORCHINDUCTOR_CACHE_DIR``
        and ``torch._dynamo.reset()``): each system's first call of the model (capture and
        C++ compile), whether its outputs equal eager's (allclose), then the warm time per
        call of the three systems, interleaved round by round (median).
  disk  a new process on the cache the cold one filled: fastdynamo's first call.
  aten  a new process: fastdynamo's first call with ``backend="eager"`` (the ATen path,
        capture only), what a warm disk cache should cost about as much as.
``disk`` and ``aten`` alternate ``--repeats`` times; the best of each counts (the
machine's noise only adds to a first call), by the wall and in CPU time of the process. Before the
model, each process compiles and calls a tiny function with each system it uses (its
own cache directory, filled by the cold process for the disk one), so that one-time set-up
of the process (imports, the compiler probes, worker pools) is not put on the model; that
set-up is reported on its own. Targets: first call at most a third of Inductor's; with a
warm disk cache at most 1.2x the ATen path's first call; warm geomean at most 0.9x
Inductor's.
"""
from __future__ import annotations

import json
import math
import os
import statistics
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
import torch._inductor.utils  # noqa: E402
from bench_timing import interleaved, medians  # noqa: E402
from tests.models.zoo import BY_NAME  # noqa: E402

import fastdynamo  # noqa: E402
from fastdynamo.backends import describe  # noqa: E402
from fastdynamo.backends.cpp import binary_cache  # noqa: E402
from fastdynamo.backends.kernels import cache as module_cache  # noqa: E402
from fastdynamo.convert_frame import Recorder  # noqa: E402

clock = time.perf_counter  # wall time: the first call waits on the C++ compiler's processes
CHILD_TIMEOUT_S = 600
TARGETS = {"cold": 1 / 3, "disk": 1.2, "geomean": 0.9}


def _setup_function(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x) * 2 + 1


# -- in a child process ----------------------------------------------------------------
def _leaves(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if hasattr(value, "to_tuple"):  # transformers' ModelOutput
        value = value.to_tuple()
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _leaves(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _leaves(v)]
    return []


def _match(actual: Any, expected: Any) -> dict[str, Any]:
    """allclose over the output's tensors (rtol 1e-4, atol 1e-5), and the largest error."""
    pairs = list(zip(_leaves(actual), _leaves(expected), strict=False))
    same = len(_leaves(actual)) == len(_leaves(expected)) and all(
        a.shape == e.shape and torch.allclose(a, e, rtol=1e-4, atol=1e-5) for a, e in pairs)
    error = max(((a.double() - e.double()).abs().max().item() for a, e in pairs if a.numel()), default=0.0)
    return {"equal": same, "max error": error}


def _first_call(fn: Callable, args: tuple) -> tuple[Any, float, float]:
    """The result, wall seconds and CPU seconds of this process and the children it
    waited for (the C++ compiler's; not a worker pool's, so Inductor is timed by the wall)."""
    start, start_cpu = clock(), _cpu_seconds()
    with torch.no_grad():
        result = fn(*args)
    return result, clock() - start, _cpu_seconds() - start_cpu


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _use_cache(fastdynamo_dir: str | None = None, inductor_dir: str | None = None) -> None:
    """Point a system at a cache directory from its next compilation on."""
    if fastdynamo_dir:
        os.environ["FASTDYNAMO_CACHE_DIR"] = fastdynamo_dir
    if inductor_dir:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = inductor_dir
        torch._inductor.utils.clear_caches()
        torch._dynamo.reset()


def _setup(dirs: dict[str, str], systems: tuple[str, ...]) -> dict[str, float]:
    """Each system's first call of a tiny function: the process's one-time costs."""
    x = torch.randn(8)
    seconds = {}
    for system in systems:
        if system == "inductor":
            _use_cache(inductor_dir=dirs["inductor setup"])
            seconds[system] = _first_call(torch.compile(_setup_function), (x,))[1]
        else:
            _use_cache(fastdynamo_dir=dirs["fastdynamo setup"])
            backend = "eager" if system == "aten" else "kernels"
            seconds[system] = _first_call(fastdynamo.compile(_setup_function, backend=backend), (x,))[1]
    return seconds


def _fastdynamo_report(recorder: Recorder) -> dict[str, Any]:
    """What fastdynamo compiled: graphs, breaks, kernels, graphs run as ATen ops."""
    fallbacks = [str(reason) for capture in recorder.captures
                 if (reason := getattr(capture.compiled_fn, "fallback_reason", None))]
    kernels = sum(getattr(capture.compiled_fn, "kernel_count", 0) or 0 for capture in recorder.captures)
    return {"graphs": len(recorder.captures), "breaks": len(recorder.breaks), "kernels": kernels,
            "runs": [describe(capture.compiled_fn) for capture in recorder.captures],
            "fallbacks": fallbacks, "internal errors": [str(error) for error in recorder.internal_errors],
            "C++ compiles": binary_cache.STATS["compiles"], "modules generated": module_cache.STATS["codegen"]}


def child(role: str, name: str, dirs: dict[str, str], calls: int, rounds: int) -> dict[str, Any]:
    """One process's part of a row (``role``: cold, disk or aten; see the module docstring)."""
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    model, args = BY_NAME[name].build()
    with torch.no_grad():
        expected = model(*args)
        model(*args)  # eager's own first-use set-up (oneDNN, MKL) is nobody's compile time
    systems = {"cold": ("kernels", "inductor"), "disk": ("kernels",), "aten": ("aten",)}[role]
    row: dict[str, Any] = {"setup": _setup(dirs, systems)}
    _use_cache(fastdynamo_dir=dirs["fastdynamo"])
    recorder = Recorder()
    ours = fastdynamo.compile(model, backend="eager" if role == "aten" else "kernels", _recorder=recorder)
    result, row["first"], row["first cpu"] = _first_call(ours, args)
    row["fastdynamo"] = {**_fastdynamo_report(recorder), **_match(result, expected)}
    if role != "cold":
        return row
    _use_cache(inductor_dir=dirs["inductor"])
    inductor = torch.compile(model)
    result, row["inductor first"], _ = _first_call(inductor, args)
    row["inductor"] = _match(result, expected)
    fns = {"eager": model, "inductor": inductor, "fastdynamo": ours}
    with torch.no_grad():
        for fn in fns.values():
            for _ in range(3):
                fn(*args)  # every cache warm before timing
        warm = medians(interleaved({system: (lambda fn=fn: fn(*args)) for system, fn in fns.items()},
                                   calls, rounds))
    row["warm"] = warm
    return row


# -- in the parent ---------------------------------------------------------------------
def _run_child(role: str, name: str, dirs: dict[str, str], calls: int, rounds: int) -> dict[str, Any]:
    environ = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, __file__, role, name, json.dumps(dirs), str(calls), str(rounds)]
    done = subprocess.run(command, capture_output=True, text=True, env=environ, timeout=CHILD_TIMEOUT_S)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("ROW "):
            return json.loads(line[4:])
    tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
    raise RuntimeError(f"{role} process for {name} exited {done.returncode}:\n{tail}")


def measure(name: str, repeats: int, calls: int, rounds: int) -> dict[str, Any]:
    """One model's row: the cold process, then the disk and ATen processes alternated
    (``repeats`` each, the best counts)."""
    with tempfile.TemporaryDirectory(prefix=f"fastdynamo-bench-{name}-") as root:
        dirs = {key: str(Path(root, key.replace(" ", "-"))) for key in
                ("fastdynamo", "fastdynamo setup", "inductor", "inductor setup")}
        row = _run_child("cold", name, dirs, calls, rounds)
        runs: dict[str, list[dict[str, Any]]] = {"disk": [], "aten": []}
        for _ in range(repeats):
            for role in runs:
                runs[role].append(_run_child(role, name, dirs, calls, rounds))
    for role, found in runs.items():
        row[role] = {"first": min(run["first"] for run in found),
                     "first cpu": min(run["first cpu"] for run in found),
                     "setup": min(next(iter(run["setup"].values())) for run in found),
                     "fastdynamo": found[-1]["fastdynamo"]}
    return row


HEADER = ("| model | fastdynamo graphs/breaks/kernels | first call, empty cache: Inductor | fastdynamo | ratio "
          "| first call, warm disk cache: fastdynamo | ATen path | ratio | ratio, CPU time | ratio with process set-up "
          "| warm / eager: Inductor | fastdynamo | fastdynamo / Inductor | equal to eager: fastdynamo | Inductor "
          "| eager us |\n" + "|---" * 16 + "|")


def _cells(row: dict[str, Any]) -> list[str]:
    fd, disk, aten, warm = row["fastdynamo"], row["disk"], row["aten"], row["warm"]
    with_setup = (disk["first"] + disk["setup"]) / (aten["first"] + aten["setup"])
    how = f"{fd['graphs']}/{fd['breaks']}/{fd['kernels']}" + (" (ATen ops)" if fd["fallbacks"] else "")
    return [how, f"{row['inductor first']:.2f} s",
            f"{row['first']:.2f} s", f"{row['first'] / row['inductor first']:.2f}",
            f"{disk['first']:.3f} s", f"{aten['first']:.3f} s", f"{disk['first'] / aten['first']:.2f}",
            f"{disk['first cpu'] / aten['first cpu']:.2f}", f"{with_setup:.2f}", f"{warm['inductor'] / warm['eager']:.2f}x",
            f"{warm['fastdynamo'] / warm['eager']:.2f}x", f"{warm['fastdynamo'] / warm['inductor']:.2f}",
            str(fd["equal"]) + ("" if fd["equal"] else f" ({fd['max error']:.1e})"),
            str(row["inductor"]["equal"]), f"{warm['eager'] * 1e6:.0f}"]


def _notes(name: str, row: dict[str, Any]) -> list[str]:
    """How fastdynamo ran each graph, and what looks wrong: internal errors, compiles on a
    warm cache, another choice between kernels and ATen ops in the warm-cache process."""
    cold, disk = row["fastdynamo"], row["disk"]["fastdynamo"]
    notes = [f"{name}: {run}" for run in cold["runs"]]
    if bool(disk["fallbacks"]) != bool(cold["fallbacks"]):
        notes.append(f"{name}: with a warm disk cache: {'; '.join(disk['runs'])}")
    for label, report in (("empty cache", cold), ("warm disk cache", disk)):
        notes += [f"{name} ({label}): internal error {error}" for error in report["internal errors"]]
    if disk["C++ compiles"] or disk["modules generated"]:
        notes.append(f"{name}: with a warm disk cache, {disk['C++ compiles']} C++ compiles and "
                     f"{disk['modules generated']} modules generated")
    return notes


def print_rows(cases: list, repeats: int, calls: int, rounds: int = 5) -> None:
    """The default-backend table for ``cases`` (``tests/models/zoo.py``), then geomeans,
    process set-up and the targets."""
    print(f"inference, default backends (Inductor; fastdynamo 'kernels': C++ on CPU), 1 intra-op thread; "
          f"warm: median of {rounds} interleaved rounds of {calls} calls; first calls with a warm disk "
          f"cache and the ATen path's: best of {repeats} fresh processes each")
    print(HEADER)
    rows, notes = {}, []
    for case in cases:
        try:
            rows[case.name] = row = measure(case.name, repeats, calls, rounds)
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            print(f"| {case.name} | ERROR: {' '.join(str(error).split())[:300]} |", flush=True)
            continue
        print(f"| {case.name} | " + " | ".join(_cells(row)) + " |", flush=True)
        notes += _notes(case.name, row)
    if rows:
        _print_summary(rows)
    for note in notes:
        print(f"note: {note}")


def _geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def _print_summary(rows: dict[str, dict[str, Any]]) -> None:
    warm = {system: _geomean([row["warm"][system] / row["warm"]["eager"] for row in rows.values()])
            for system in ("inductor", "fastdynamo")}
    cold = max(row["first"] / row["inductor first"] for row in rows.values())
    disk = max(row["disk"]["first"] / row["aten"]["first"] for row in rows.values())
    disk_cpu = max(row["disk"]["first cpu"] / row["aten"]["first cpu"] for row in rows.values())
    setup = {kind: statistics.median(pick(row) for row in rows.values()) for kind, pick in (
        ("Inductor", lambda r: r["setup"]["inductor"]), ("fastdynamo, empty cache", lambda r: r["setup"]["kernels"]),
        ("fastdynamo, warm disk cache", lambda r: r["disk"]["setup"]), ("ATen path", lambda r: r["aten"]["setup"]))}
    ratio = warm["fastdynamo"] / warm["inductor"]
    print(f"\ngeomean warm / eager over {len(rows)} models: Inductor {warm['inductor']:.3f}x, "
          f"fastdynamo {warm['fastdynamo']:.3f}x; fastdynamo / Inductor {ratio:.3f}")
    print("process set-up (first call of a tiny function, median over models): "
          + ", ".join(f"{kind} {seconds:.3f} s" for kind, seconds in setup.items()))
    for label, value, target in (("first call / Inductor's, empty cache, worst model", cold, TARGETS["cold"]),
                                 ("first call / ATen path's, warm disk cache, worst model", disk, TARGETS["disk"]),
                                 ("the same in CPU time", disk_cpu, TARGETS["disk"]),
                                 ("geomean warm / Inductor's", ratio, TARGETS["geomean"])):
        print(f"target: {label}: {value:.2f} (at most {target:.2f}) {'met' if value <= target else 'MISSED'}")


if __name__ == "__main__":
    role_, name_, dirs_, calls_, rounds_ = sys.argv[1:6]
    print("ROW " + json.dumps(child(role_, name_, json.loads(dirs_), int(calls_), int(rounds_))), flush=True)

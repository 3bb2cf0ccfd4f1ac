"""Whether a graph's generated code pays: kernels, or the graph's own ATen ops.

Generated code is never meant to be slower than the ATen ops it replaces, so the choice
is made per graph when it is compiled (the choice is a speed question only: both
callables compute eager's values):

* a module without kernels (every op an extern: an LSTM or a fused attention layer
  captured whole) runs the ATen ops, which call torch's own high-level functions;
* otherwise, by ``FASTDYNAMO_KERNELS_CHOICE`` (default ``measure``): ``measure`` times both
  on the example inputs, interleaved, and keeps the kernels only if they are faster
  (a graph whose ATen run alone takes longer than :data:`MEASURE_MAX_SECONDS` keeps them
  unmeasured: what they fuse is then a small share, and measuring would cost seconds);
  ``kernels`` always keeps them (the test suite, for determinism), ``aten`` never does.

A measured choice is kept beside the generated module (``<key>.choice.json``), so a later
process with a warm cache decides the same way without measuring again. The measurement
runs the graph a few times with torch's random state saved and restored; kernels never write their inputs, and graphs that write to an input or draw
random numbers never get kernels, so running them is invisible to the program.

>>> Choice(True, "measured: kernels 12.0 us, ATen ops 30.0 us").kernels
True
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

MEASURE_MAX_SECONDS = 0.02
ROUNDS = 5
SAMPLE_SECONDS = 2e-4
VARIABLE = "FASTDYNAMO_KERNELS_CHOICE"
MODES = ("measure", "kernels", "aten")


@dataclass(frozen=True)
class Choice:
    """``kernels``: run the generated module; ``why``: the sentence explain() shows."""

    kernels: bool
    why: str


def mode() -> str:
    value = os.environ.get(VARIABLE, "measure")
    if value not in MODES:
        raise ValueError(f"{VARIABLE}={value!r}: expected one of {', '.join(MODES)}")
    return value


def choose(kernel_count: int, kernels: Callable[..., Any], aten: Callable[..., Any], inputs: list,
           kept: Path | None = None) -> Choice:
    """The choice for a module with ``kernel_count`` kernels whose forward is ``kernels``,
    against the graph's ATen ops ``aten`` (a callable making them), on ``inputs``; ``kept``:
    where a measured choice is kept for later processes (see the module docstring)."""
    if kernel_count == 0:
        return Choice(False, "no kernels: every op is an ATen call")
    selected = mode()
    if selected != "measure":
        return Choice(selected == "kernels", f"{VARIABLE}={selected}")
    remembered = _read(kept)
    if remembered is not None:
        return remembered
    choice = _measure(kernels, aten(), inputs)
    _write(kept, choice)
    return choice


def _read(path: Path | None) -> Choice | None:
    try:
        data = json.loads(path.read_text()) if path is not None and path.exists() else None
        return Choice(bool(data["kernels"]), f"{data['why']}, in an earlier process") if data else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(path: Path | None, choice: Choice) -> None:
    if path is None:
        return
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(handle, "w") as file:
            json.dump({"kernels": choice.kernels, "why": choice.why}, file)
        os.replace(temporary, path)
    except OSError:
        pass  # kept or not, the choice holds for this process


def _measure(kernels: Callable[..., Any], aten: Callable[..., Any], inputs: list) -> Choice:
    devices = [t.device for t in inputs if isinstance(t, torch.Tensor) and t.device.type == "cuda"]
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        aten_first = _seconds(aten, inputs)
        if aten_first > MEASURE_MAX_SECONDS:
            return Choice(True, f"not measured: one ATen run takes {aten_first * 1e3:.0f} ms")
        _seconds(kernels, inputs)  # first call: whatever is initialised lazily
        repeats = max(1, min(20, int(SAMPLE_SECONDS / max(aten_first, 1e-7))))  # short graphs: longer samples
        kernel_times, aten_times = [], []
        for _ in range(ROUNDS):
            kernel_times.append(_seconds(kernels, inputs, repeats))
            aten_times.append(_seconds(aten, inputs, repeats))
    fastest_kernels, fastest_aten = min(kernel_times), min(aten_times)
    why = f"measured: kernels {fastest_kernels * 1e6:.1f} us, ATen ops {fastest_aten * 1e6:.1f} us"
    return Choice(fastest_kernels < fastest_aten, why)


def _seconds(fn: Callable[..., Any], inputs: list, repeats: int = 1) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        fn(*inputs)
    return (time.perf_counter() - start) / repeats

"""Timing helpers shared by the benches: systems interleaved round by round, so that the
noise of a shared machine falls on all of them alike.

>>> times = interleaved({"a": lambda: None, "b": lambda: None}, calls=10, rounds=3)
>>> sorted(times), all(len(samples) == 3 for samples in times.values())
(['a', 'b'], True)
"""
from __future__ import annotations

import statistics
import time
from typing import Callable


def interleaved(fns: dict[str, Callable[[], object]], calls: int, rounds: int,
                clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    """Seconds per call of each function in each round: every round runs ``calls`` calls
    of each function in turn."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = clock()
            for _ in range(calls):
                fn()
            samples[name].append((clock() - start) / calls)
    return samples


def medians(samples: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(times) for name, times in samples.items()}


def best(samples: dict[str, list[float]]) -> dict[str, float]:
    return {name: min(times) for name, times in samples.items()}


def thread_seconds() -> float:
    """CPU time of this thread (page faults it takes included; time the machine gives to
    other processes excluded): for one-thread kernels on shared cores."""
    return time.thread_time_ns() * 1e-9

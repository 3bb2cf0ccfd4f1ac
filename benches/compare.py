"""Side-by-side runtime benchmarks: ratios measured in one run.

    PYTHONPATH=python python benches/compare.py [--quick]

Sections:
  hook      per-call cost of a tiny Python function: no evaluator, a pass-through
            evaluator (the floor of any PEP 523 hook), fastdynamo with the frame marked
            skipped, and torch.compile's runtime in run-only mode.
  break     per-call cost of Python running after a graph break: a compiled function that
            breaks, then calls a tiny function a million times with the hook active; no
            compiler, the pass-through evaluator, fastdynamo.compile and torch.compile.
  dispatch  a cache hit with 1, 8 and 64 tensor arguments (hook + guards + dispatch),
            against calling the transformed function directly.
  guards    guard evaluation per tensor, timed inside Rust.
  dispatcher  cache hits through what fastdynamo.compile returns (the native dispatcher,
            graph called directly): relu(x + y) (static, and dynamic=True: a symbolic
            entry whose shape guards run natively), 1, 8 and 64 tensor arguments and a
            module, against eager and torch.compile(backend="eager") (same dynamic=).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import torch  # noqa: E402

import fastdynamo  # noqa: E402
from fastdynamo import guards as g  # noqa: E402
from fastdynamo._runtime import native  # noqa: E402
from fastdynamo.guards.sources import LocalSource  # noqa: E402

N = native()
# CPU time of this thread: the machine's cores are shared, and time spent running other
# processes while this one waits is not the cost of what is measured.
clock = time.thread_time_ns


def identity(x):
    return x


def call_loop(fn, arg, n):
    start = clock()
    for _ in range(n):
        fn(arg)
    return (clock() - start) / n


def best_of(configs, n, repeats):
    """Runs every config `repeats` times, interleaved, and keeps each one's best."""
    best = {name: float("inf") for name in configs}
    for _ in range(repeats):
        for name, (enter, exit_, fn) in configs.items():
            enter()
            try:
                best[name] = min(best[name], call_loop(fn, 1, n))
            finally:
                exit_()
    return best


def nothing():
    pass


def torch_compile_run_only():
    """torch.compile's evaluator in run-only mode (its cheapest interception)."""
    try:
        from torch._C._dynamo.eval_frame import set_eval_frame

        return (lambda: set_eval_frame(False), lambda: set_eval_frame(None))
    except Exception:  # noqa: BLE001 - report what this torch offers
        return None


def bench_hook(n, repeats):
    N.set_code_action(identity.__code__, N.SKIP)
    configs = {
        "no evaluator": (nothing, nothing, identity),
        "pass-through": (lambda: N._set_passthrough_evaluator(True), lambda: N._set_passthrough_evaluator(False), identity),
        "fastdynamo, skipped": (lambda: N.set_callback(False), lambda: N.set_callback(None), identity),
    }
    dynamo = torch_compile_run_only()
    if dynamo:
        configs["torch.compile run-only"] = (*dynamo, identity)
    best = best_of(configs, n, repeats)
    base = best["no evaluator"]
    floor = best["pass-through"] - base
    print("\n## Per-call hook cost (tiny Python function)")
    print(f"{'evaluator':<26}{'ns/call':>10}{'overhead ns':>13}{'x floor':>9}")
    for name, ns in best.items():
        over = ns - base
        ratio = "" if name == "no evaluator" else f"{over / floor:9.2f}"
        print(f"{name:<26}{ns:10.1f}{over:13.1f}{ratio}")
    N.reset()
    return best


def tiny(a):
    return a + 1


def breaks_then_loops(x, n):
    """Some tensor work, a graph break, then `n` calls of a tiny Python function.

    `installed_evaluator()` is an opaque C call: fastdynamo and torch.compile both break
    the graph there. Without graph-break support fastdynamo runs this whole frame as
    Python; with it, the loop is the tail of a resume function whose trace gives up. In
    both cases the loop runs as ordinary Python with the compiler's evaluator installed,
    so every `tiny` call goes through it, which is what this section measures."""
    y = x + 1
    evaluator = N.installed_evaluator()
    acc = 0
    for _ in range(n):
        acc = tiny(acc)
    return y, acc, evaluator


def with_passthrough(x, n):
    N._set_passthrough_evaluator(True)
    try:
        return breaks_then_loops(x, n)
    finally:
        N._set_passthrough_evaluator(False)


def bench_graph_break(n, repeats):
    """Extra ns per `tiny` call over no compiler, each configuration run `repeats` times,
    interleaved: from each configuration's best repetition, and the median over
    repetitions of the difference to no compiler in the same repetition. A repetition times one whole call
    (the compiled wrapper and graph included: a few us, under 0.01 ns per loop call)."""
    N.reset()
    configs = {
        "no compiler": (breaks_then_loops, "default"),
        "pass-through": (with_passthrough, "passthrough"),
        "fastdynamo": (fastdynamo.compile(breaks_then_loops), "fastdynamo"),
    }
    try:
        configs["torch.compile"] = (torch.compile(breaks_then_loops, backend="eager"), "other")
    except Exception as err:  # noqa: BLE001 - report what this torch offers
        print(f"torch.compile unavailable: {err}")
    x = torch.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.compile's graph-break warning
        # Warm up with a short loop: torch.compile unrolls loops while tracing (a 1M-call
        # loop takes minutes), then marks the loop's frame as having no graph and runs it
        # as Python, which is the state measured here.
        for name, (fn, evaluator) in configs.items():
            y, acc, seen = fn(x, 10)
            assert acc == 10 and seen == evaluator, (name, acc, seen)
    # tiny was intercepted: fastdynamo's callback saw its first frame and marked it SKIP,
    # so each call below pays the hook's skipped-frame path.
    assert N.get_code_action(tiny.__code__) == N.SKIP
    times = {name: [] for name in configs}
    for _ in range(repeats):
        for name, (fn, evaluator) in configs.items():
            start = clock()
            y, acc, seen = fn(x, n)
            times[name].append((clock() - start) / n)
            assert acc == n and seen == evaluator, (name, acc, seen)
    assert N.get_code_action(tiny.__code__) == N.SKIP
    best = {name: min(t) for name, t in times.items()}
    base = times["no compiler"]
    # Within one repetition the configurations run back to back, so their differences
    # share the machine's state; the median of those is robust to load from elsewhere.
    paired = {name: statistics.median(t - b for t, b in zip(times[name], base, strict=True))
              for name in configs}
    floor, floor_paired = best["pass-through"] - best["no compiler"], paired["pass-through"]
    print(f"\n## After a graph break: {n:,} calls of a tiny function with the hook active ({repeats} repetitions)")
    print(f"{'configuration':<16}{'ns/call':>9}{'extra ns':>10}{'x floor':>9}{'paired median':>15}{'x floor':>9}")
    for name in configs:
        over = best[name] - best["no compiler"]
        ratios = ("", "") if name == "no compiler" else (f"{over / floor:.2f}", f"{paired[name] / floor_paired:.2f}")
        print(f"{name:<16}{best[name]:9.1f}{over:10.1f}{ratios[0]:>9}{paired[name]:15.1f}{ratios[1]:>9}")
    N.reset()
    return best


def make_function(count):
    params = ", ".join(f"t{i}" for i in range(count))
    namespace = {}
    exec(f"def original({params}):\n    return t0\n", namespace)
    exec(f"def transformed({params}):\n    return t0\n", namespace)
    return namespace["original"], namespace["transformed"]


def bench_dispatch(n, repeats):
    print("\n## Cache-hit dispatch (hook + guards + call of the transformed code)")
    print(f"{'tensors':>8}{'hit ns':>10}{'direct ns':>11}{'overhead ns':>13}")
    results = {}
    for count in (1, 8, 64):
        tensors = [torch.randn(8) for _ in range(count)]
        original, transformed = make_function(count)
        guards = [g.Guard(LocalSource(i, f"t{i}"), g.tensor_match(t)) for i, t in enumerate(tensors)]
        entry = N.CacheEntry(g.compile_guards(guards), transformed.__code__)
        N.set_callback(lambda frame, e=entry, code=original.__code__: e if frame.f_code is code else None)
        original(*tensors)
        N.set_callback(False)
        hit, direct = [], []
        for _ in range(repeats):
            start = clock()
            for _ in range(n):
                original(*tensors)
            hit.append((clock() - start) / n)
            N.set_callback(None)
            start = clock()
            for _ in range(n):
                transformed(*tensors)
            direct.append((clock() - start) / n)
            N.set_callback(False)
        N.set_callback(None)
        assert N.cache_entries(original.__code__)[0].hits >= n * repeats
        results[count] = (min(hit), min(direct))
        print(f"{count:>8}{min(hit):10.1f}{min(direct):11.1f}{min(hit) - min(direct):13.1f}")
    N.reset()
    return results


def bench_guards(n, repeats):
    print("\n## Guard evaluation (timed in Rust)")
    count = 64
    tensors = [torch.randn(4, 8) for _ in range(count)]
    code = make_function(count)[0].__code__
    frame = N.Frame(code, tensors, globals())
    guard_set = g.compile_guards(g.Guard(LocalSource(i, f"t{i}"), g.tensor_match(t)) for i, t in enumerate(tensors))
    assert guard_set.check(frame)
    per_tensor = min(guard_set.time_check(frame, n) / n / count for _ in range(repeats))
    print(f"tensor guard: {per_tensor:.1f} ns per tensor ({count} tensors, 2-d)")
    bench_entry_guards(max(n // 10, 200), repeats * 20)
    return per_tensor


def entry_guards(dynamic, args):
    """The guards of relu_add's entry compiled with ``dynamic=``."""
    from fastdynamo.convert_frame import Recorder

    fastdynamo.reset()
    recorder = Recorder()
    fastdynamo.compile(relu_add, backend="eager", dynamic=dynamic, _recorder=recorder)(*args)
    guards = recorder.captures[-1].result.guards
    fastdynamo.reset()
    return g.compile_guards(guards)


def bench_entry_guards(n, repeats):
    """Every guard of relu_add's entry, static and dynamic (its shape guards: two size
    loads, the equality and the bounds), best of many short runs."""
    args = [torch.randn(8), torch.randn(8)]
    frame = N.Frame(relu_add.__code__, args, globals())
    times = {}
    for label, dynamic in (("static", None), ("dynamic", True)):
        guard_set = entry_guards(dynamic, args)
        assert guard_set.check(frame)
        times[label] = min(guard_set.time_check(frame, n) / n for _ in range(repeats))
    print(f"relu(x + y) entry: {times['static']:.1f} ns static, {times['dynamic']:.1f} ns dynamic "
          f"(shape guards +{times['dynamic'] - times['static']:.1f} ns)")


def relu_add(x, y):
    return torch.relu(x + y)


def make_sum(count):
    params = ", ".join(f"t{i}" for i in range(count))
    body = " + ".join(f"t{i}" for i in range(count)) if count > 1 else "t0 + 1"
    namespace = {"torch": torch}
    exec(f"def sum_{count}({params}):\n    return {body}\n", namespace)
    return namespace[f"sum_{count}"]


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.linear(x))


def per_call(fn, args, n):
    start = clock()
    for _ in range(n):
        fn(*args)
    return (clock() - start) / n


def bench_dispatcher(n, repeats):
    """Eager, fastdynamo.compile and torch.compile(backend="eager") on the same calls,
    interleaved, best of `repeats`; no grad (the module's parameters need none)."""
    print("\n## Cache hit through the dispatcher, ns per call (no grad)")
    print(f"{'case':<22}{'eager':>9}{'fastdynamo':>12}{'torch.compile':>15}{'fd over':>9}{'tc over':>9}{'direct':>8}")
    cases = [("relu(x + y)", relu_add, [torch.randn(8), torch.randn(8)]),
             ("relu(x + y) dynamic", relu_add, [torch.randn(8), torch.randn(8)])]
    for count in (1, 8, 64):
        cases.append((f"{count} tensor argument{'s' if count > 1 else ''}", make_sum(count),
                      [torch.randn(8) for _ in range(count)]))
    torch.manual_seed(0)
    cases.append(("module (Linear+relu)", SmallNet(), [torch.randn(2, 8)]))
    rows = {}
    with torch.no_grad():
        for name, fn, args in cases:
            fastdynamo.reset()
            torch._dynamo.reset()
            dynamic = True if name.endswith("dynamic") else None
            ours = fastdynamo.compile(fn, backend="eager", dynamic=dynamic)
            theirs = torch.compile(fn, backend="eager", dynamic=dynamic)
            for compiled in (ours, theirs):
                torch.testing.assert_close(compiled(*args), fn(*args))
                compiled(*args)
            dispatcher = ours._dispatch if isinstance(ours, fastdynamo.OptimizedModule) else ours
            before = dispatcher.direct_calls
            best = {"eager": float("inf"), "fastdynamo": float("inf"), "torch.compile": float("inf")}
            for _ in range(repeats):
                for label, target in (("eager", fn), ("fastdynamo", ours), ("torch.compile", theirs)):
                    best[label] = min(best[label], per_call(target, args, n))
            direct = dispatcher.direct_calls - before == n * repeats
            eager, fd, tc = best["eager"], best["fastdynamo"], best["torch.compile"]
            rows[name] = best
            print(f"{name:<22}{eager:9.0f}{fd:12.0f}{tc:15.0f}{fd - eager:9.0f}{tc - eager:9.0f}{'yes' if direct else 'NO':>8}")
    fastdynamo.reset()
    return rows


SECTIONS = ("hook", "break", "dispatch", "guards", "dispatcher")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    parser.add_argument("--only", choices=SECTIONS, action="append", help="run only these sections")
    args = parser.parse_args()
    n, repeats = (20_000, 3) if args.quick else (400_000, 15)
    loop_calls = 20_000 if args.quick else 1_000_000
    sections = args.only or SECTIONS
    print(f"# fastdynamo runtime benchmarks (python {sys.version.split()[0]}, torch {torch.__version__})")
    if "hook" in sections:
        bench_hook(n, repeats)
    if "break" in sections:
        bench_graph_break(loop_calls, 3 if args.quick else 25)
    if "dispatch" in sections:
        bench_dispatch(n // 4, repeats)
    if "guards" in sections:
        bench_guards(max(n // 40, 1000), repeats)
    if "dispatcher" in sections:
        bench_dispatcher(max(n // 40, 1000), repeats)


if __name__ == "__main__":
    main()

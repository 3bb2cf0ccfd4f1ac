"""Instructions per cache hit through the dispatcher, over eager, counted by callgrind.

    PYTHONPATH=python python benches/dispatcher_callgrind.py [relu|dynamic|1|8|64|module ...]

Deterministic where `compare.py --only dispatcher` is noisy (shared cores): each case runs
in its own `valgrind --tool=callgrind` process with instrumentation off until the
function is compiled and warm (the import of torch is not counted), then N eager calls and
N calls of `fastdynamo.compile(fn, backend="eager")` are counted separately
(`--zero-before=getppid --dump-before=getpgrp`: `os.getppid()` and `os.getpgrp()` mark
the loops). Prints eager and compiled instructions per call and the difference; the dump
files stay in the output folder for `callgrind_annotate` (compare the two parts of a case
function by function to see where the difference goes). A heap consolidation inside
malloc (`malloc_consolidate`, millions of instructions, once in a while) can land in
either loop: look for it in the annotation before trusting a 64-argument row.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = ("relu", "dynamic", "1", "8", "64", "module")


def child(case: str, calls: int, signal: str) -> None:
    """Runs under callgrind: compile, warm up, wait to be instrumented, then the loops."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    import torch
    from compare import SmallNet, make_sum, relu_add

    import fastdynamo

    if case in ("relu", "dynamic"):
        fn, args = relu_add, [torch.randn(8), torch.randn(8)]
    elif case == "module":
        torch.manual_seed(0)
        fn, args = SmallNet(), [torch.randn(2, 8)]
    else:
        fn, args = make_sum(int(case)), [torch.randn(8) for _ in range(int(case))]
    torch.set_grad_enabled(False)
    ours = fastdynamo.compile(fn, backend="eager", dynamic=True if case == "dynamic" else None)
    for _ in range(50):
        ours(*args)
        fn(*args)
    dispatcher = ours._dispatch if isinstance(ours, fastdynamo.OptimizedModule) else ours
    before = dispatcher.direct_calls
    Path(signal + ".ready").write_text(str(os.getpid()))
    while not os.path.exists(signal + ".go"):  # busy: callgrind takes commands while running
        pass
    for target in (fn, ours):
        os.getppid()  # counters zeroed here
        for _ in range(calls):
            target(*args)
        os.getpgrp()  # and dumped here
    if dispatcher.direct_calls - before != calls:
        raise SystemExit(f"{case}: not every call was a direct hit")


def totals(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise ValueError(f"no totals in {path}")


def measure(case: str, calls: int, folder: Path) -> tuple[float, float]:
    """(eager, compiled) instructions per call for one case, in a callgrind child."""
    signal = str(folder / f"signal-{case}")
    out = folder / f"callgrind-{case}"
    command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--zero-before=getppid",
               "--dump-before=getpgrp", f"--callgrind-out-file={out}.%p",
               sys.executable, __file__, "--child", case, "--calls", str(calls), "--signal", signal]
    env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="1")
    with open(folder / f"valgrind-{case}.log", "w") as log:
        process = subprocess.Popen(command, env=env, stderr=log, cwd=Path(__file__).parent)  # noqa: S603
        while not os.path.exists(signal + ".ready"):
            if process.poll() is not None:
                raise SystemExit(f"{case}: the child exited early, see {log.name}")
            time.sleep(0.5)
        pid = Path(signal + ".ready").read_text()
        subprocess.run(["callgrind_control", "-i", "on", pid], check=True, capture_output=True)  # noqa: S603, S607
        Path(signal + ".go").touch()
        if process.wait() != 0:
            raise SystemExit(f"{case}: the child failed, see {log.name}")
    parts = sorted(folder.glob(f"callgrind-{case}.*.[0-9]*"))
    eager, compiled = (totals(part) / calls for part in parts[:2])
    return eager, compiled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", nargs="*", help=f"of {', '.join(CASES)} (default: relu 64)")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--out", help="folder for the callgrind files (default: a new temporary one)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--signal", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.calls, args.signal)
        return
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("needs valgrind (callgrind) on PATH")
    unknown = set(args.cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}: choose from {', '.join(CASES)}")
    folder = Path(args.out or tempfile.mkdtemp(prefix="fastdynamo-callgrind-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"# instructions per call, {args.calls} calls each (files in {folder})")
    print(f"{'case':<10}{'eager':>12}{'fastdynamo':>12}{'over':>9}")
    for case in args.cases or ["relu", "64"]:
        eager, compiled = measure(case, args.calls, folder)
        print(f"{case:<10}{eager:12.0f}{compiled:12.0f}{compiled - eager:9.0f}")


if __name__ == "__main__":
    main()

//! Criterion benches of the runtime inside an embedded CPython (`cargo bench`).
//!
//! Per call of a tiny Python function: no evaluator, a pass-through evaluator (the floor
//! of any PEP 523 hook), and fastdynamo with the frame marked skipped; a cache hit with
//! 1, 8 and 64 tensor arguments, and its baseline (the transformed code called directly);
//! one tensor guard check.
//!
//! The embedded interpreter is the one `PyO3` built against (`PYO3_PYTHON`, a venv's
//! `python` when one is active; `make bench PYTHON=python3.12` for another version). It
//! gets that interpreter's site-packages, where torch is, and says which version it is.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::ffi::CString;
use std::time::Duration;

const SETUP: &str = r#"
import torch
def tiny(x):
    return x

def make(count):
    params = ", ".join(f"t{i}" for i in range(count))
    ns = {}
    exec(f"def original({params}):\n    return t0\ndef transformed({params}):\n    return t0\n", ns)
    tensors = tuple(torch.randn(8) for _ in range(count))
    spec = [(("local", i, f"t{i}"), ("tensor", t, tuple(t.shape), t.stride())) for i, t in enumerate(tensors)]
    entry = native.CacheEntry(native.GuardSet(spec), ns["transformed"].__code__)
    native.set_callback(lambda frame: entry if frame.f_code is ns["original"].__code__ else None)
    ns["original"](*tensors)
    native.set_callback(None)
    return ns["original"], tensors, ns["transformed"]

hits = {n: make(n) for n in (1, 8, 64)}
guard_tensor = torch.randn(4, 8)
guard_code = (lambda t0: t0).__code__
one_guard = native.GuardSet([(("local", 0, "t0"), ("tensor", guard_tensor, (4, 8), (8, 1)))])
guard_frame = native.Frame(guard_code, [guard_tensor], {})
"#;

/// `site.addsitedir` for each site-packages directory of the interpreter built against: an
/// embedded `CPython` finds its base installation, not the venv the build used.
fn add_build_site_packages(py: Python<'_>) {
    let python = env!("FASTDYNAMO_BUILD_PYTHON");
    let output = std::process::Command::new(python)
        .args(["-c", "import site, sys; print(sys.version.split()[0]); print(*site.getsitepackages(), sep='\\n')"])
        .output()
        .expect("running the interpreter built against");
    assert!(output.status.success(), "{python} could not report its site-packages");
    let text = String::from_utf8(output.stdout).expect("utf-8");
    let mut lines = text.lines();
    let version = lines.next().expect("a version line");
    let site = py.import("site").expect("site");
    for directory in lines {
        site.call_method1("addsitedir", (directory,)).expect("addsitedir");
    }
    let sys = py.import("sys").expect("sys");
    let embedded: String = sys.getattr("version").unwrap().extract().unwrap();
    assert!(embedded.starts_with(version), "embedded CPython {embedded} is not {python}'s {version}");
    eprintln!("criterion benches on CPython {version} ({python})");
}

fn setup(py: Python<'_>) -> Bound<'_, PyDict> {
    add_build_site_packages(py);
    let module = fastdynamo::python_module(py).expect("native module");
    let globals = PyDict::new(py);
    globals.set_item("native", &module).expect("set");
    py.run(&CString::new(SETUP).expect("no NUL"), Some(&globals), None).expect("setup runs");
    globals
}

fn hook_cost(c: &mut Criterion) {
    Python::attach(|py| {
        let globals = setup(py);
        let native = globals.get_item("native").unwrap().unwrap();
        let tiny = globals.get_item("tiny").unwrap().unwrap();
        let arg = (1,).into_pyobject(py).unwrap();
        let mut group = c.benchmark_group("hook_per_call");
        group.bench_function("no_evaluator", |b| b.iter(|| tiny.call1(&arg).unwrap()));
        native.call_method1("_set_passthrough_evaluator", (true,)).unwrap();
        group.bench_function("pass_through", |b| b.iter(|| tiny.call1(&arg).unwrap()));
        native.call_method1("_set_passthrough_evaluator", (false,)).unwrap();
        let skip = native.getattr("SKIP").unwrap();
        native.call_method1("set_code_action", (tiny.getattr("__code__").unwrap(), skip)).unwrap();
        native.call_method1("set_callback", (false,)).unwrap();
        group.bench_function("fastdynamo_skipped", |b| b.iter(|| tiny.call1(&arg).unwrap()));
        native.call_method1("set_callback", (py.None(),)).unwrap();
        group.finish();

        let mut group = c.benchmark_group("cache_hit");
        native.call_method1("set_callback", (false,)).unwrap();
        let hits = globals.get_item("hits").unwrap().unwrap();
        for count in [1_usize, 8, 64] {
            let pair = hits.get_item(count).unwrap();
            let function = pair.get_item(0).unwrap();
            let tensors = pair.get_item(1).unwrap().cast_into::<PyTuple>().unwrap();
            group.bench_with_input(BenchmarkId::from_parameter(count), &count, |b, _| {
                b.iter(|| function.call1(&tensors).unwrap());
            });
        }
        native.call_method1("set_callback", (py.None(),)).unwrap();
        group.finish();

        // The baseline of a hit: the transformed code called directly, no evaluator.
        let mut group = c.benchmark_group("cache_hit_baseline_direct_call");
        for count in [1_usize, 8, 64] {
            let triple = hits.get_item(count).unwrap();
            let transformed = triple.get_item(2).unwrap();
            let tensors = triple.get_item(1).unwrap().cast_into::<PyTuple>().unwrap();
            group.bench_with_input(BenchmarkId::from_parameter(count), &count, |b, _| {
                b.iter(|| transformed.call1(&tensors).unwrap());
            });
        }
        group.finish();

        let guard_set = globals.get_item("one_guard").unwrap().unwrap();
        let frame = globals.get_item("guard_frame").unwrap().unwrap();
        c.bench_function("tensor_guard_check", |b| {
            b.iter_custom(|iters| {
                let ns: u128 = guard_set.call_method1("time_check", (&frame, iters)).unwrap().extract().unwrap();
                Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
            });
        });
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = hook_cost
}
criterion_main!(benches);

//! `cargo test`: the runtime inside an embedded interpreter, driven from Rust.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::ffi::CString;
use std::sync::{Mutex, MutexGuard};

/// The callback and the evaluator are process-wide and cargo runs tests on several
/// threads: a test that installs a callback holds this for its whole run, or another
/// test's `set_callback(None)` lands between its calls (seen on CPython 3.12 in CI).
static PROCESS_WIDE_HOOK: Mutex<()> = Mutex::new(());

/// Taken before attaching to the interpreter, never while attached, so that a waiting
/// thread does not hold the GIL.
fn hook_lock() -> MutexGuard<'static, ()> {
    PROCESS_WIDE_HOOK.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs `code` with the module importable as `native`, returning the `result` variable.
fn run_with_module(code: &str) -> String {
    Python::attach(|py| {
        let module = PyModule::new(py, "_native").expect("module");
        crate::module_api::register(&module).expect("register");
        let globals = PyDict::new(py);
        globals.set_item("native", &module).expect("set");
        let source = CString::new(code).expect("no NUL");
        py.run(&source, Some(&globals), None).expect("snippet runs");
        globals.get_item("result").expect("lookup").expect("result set").to_string()
    })
}

#[test]
fn hook_compiles_on_miss_then_hits() {
    let _serial = hook_lock();
    let result = run_with_module(
        r#"
def f(x):
    return x + 1
def f_fast(x):
    return x + 100
seen = []
def callback(frame):
    if frame.f_code is not f.__code__:
        return None
    seen.append(frame.f_locals["x"])
    guards = native.GuardSet([(("local", 0, "x"), ("type_is", type(frame.f_locals["x"])))])
    return native.CacheEntry(guards, f_fast.__code__)
native.set_callback(callback)
values = [f(1), f(2), f(3.0)]
native.set_callback(None)
result = (values, seen, native.installed_evaluator())
"#,
    );
    assert_eq!(result, "([101, 102, 103.0], [1, 3.0], 'default')");
}

#[test]
fn verbose_guard_reason() {
    let result = run_with_module(
        r#"
guards = native.GuardSet([(("local", 0, "n"), ("equals", 4))])
code = (lambda n: n).__code__
result = (guards.failure_reason(native.Frame(code, [8], {})), guards.failure_reason(native.Frame(code, [4], {})))
"#,
    );
    assert_eq!(result, "('n == 4, got 8', None)");
}

#[test]
fn non_callable_callback_is_a_type_error() {
    let _serial = hook_lock();
    let result = run_with_module(
        r"
try:
    native.set_callback(3)
    result = 'accepted'
except TypeError as err:
    result = str(err)
",
    );
    assert_eq!(result, "callback must be None, False or a callable, not int");
}

#[test]
fn actions_round_trip() {
    use crate::cache::Action;
    for action in [Action::Default, Action::Skip, Action::SkipRecursive, Action::RunOnly] {
        assert_eq!(Action::from_int(action as i64), Some(action));
    }
    assert_eq!(Action::from_int(7), None);
}

const SKIP_AND_HIT: &str = r#"
def f(x):
    return x + 1
def f_fast(x):
    return x + 100
def g(x):
    return x * 2
seen = []
def callback(frame):
    seen.append(frame.f_code.co_name)
    if frame.f_code is f.__code__:
        return native.CacheEntry(native.GuardSet([(("local", 0, "x"), ("type_is", int))]), f_fast.__code__)
    return native.SKIP if frame.f_code is g.__code__ else None
native.set_callback(callback)
values = [f(1), g(2), f(3), g(4)]
native.set_callback(None)
result = (values, [name for name in seen if name in ("f", "g")], native.get_code_action(g.__code__))
"#;

/// One test, not two: the in-place read is process-wide and cargo runs tests in parallel.
#[test]
fn code_extra_read_in_place_and_through_cpython_decide_alike() {
    let _serial = hook_lock();
    // Module registration runs the probe; the layout of every supported CPython (3.11-3.13) must pass it.
    run_with_module("result = 0");
    assert!(crate::ffi::code_extra::direct_read_enabled());
    assert_eq!(run_with_module(SKIP_AND_HIT), "([101, 4, 103, 8], ['f', 'g'], 1)");
    Python::attach(|py| crate::ffi::code_extra::set_direct_read(py, false));
    let without = run_with_module(SKIP_AND_HIT);
    Python::attach(|py| crate::ffi::code_extra::set_direct_read(py, true));
    assert_eq!(without, "([101, 4, 103, 8], ['f', 'g'], 1)");
    assert!(crate::ffi::code_extra::direct_read_enabled());
}

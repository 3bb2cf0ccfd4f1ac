//! The module-level functions of `fastdynamo._native`.

use crate::cache::{self, Action, CacheEntry};
use crate::errors::Error;
use crate::ffi::{code_extra, hook};
use crate::frame_info::Frame;
use pyo3::prelude::*;

/// The version this extension was built from; the Python package checks it at load.
#[pyfunction]
fn runtime_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Marks `code` with an action: `DEFAULT`, `SKIP`, `SKIP_RECURSIVE`, `RUN_ONLY` or `REGION_WRAPPER`.
#[pyfunction]
fn set_code_action(py: Python<'_>, code: &Bound<'_, PyAny>, action: i64) -> PyResult<()> {
    let action = Action::from_int(action)
        .ok_or_else(|| Error::BadValue(format!("unknown action {action}; use DEFAULT, SKIP, SKIP_RECURSIVE, RUN_ONLY or REGION_WRAPPER")))?;
    code_extra::state_or_attach(code.as_borrowed())?.set_action(py, action);
    Ok(())
}

/// The action of `code` (DEFAULT when it has no state).
#[pyfunction]
fn get_code_action(py: Python<'_>, code: &Bound<'_, PyAny>) -> i64 {
    code_extra::state(code.as_borrowed()).map_or(Action::Default, |s| s.action(py)) as i64
}

/// The cache entries of `code`, most recently used first.
#[pyfunction]
fn cache_entries(py: Python<'_>, code: &Bound<'_, PyAny>) -> Vec<Py<CacheEntry>> {
    code_extra::state(code.as_borrowed()).map(|s| s.entries(py)).unwrap_or_default()
}

/// Adds `entry` to the cache of `code` (most recently used first) unless it is there
/// already or `code` is at the recompile limit; returns whether it is there now. The
/// compile callback calls this before releasing its lock (see `convert_frame`).
#[pyfunction]
fn publish_cache_entry(py: Python<'_>, code: &Bound<'_, PyAny>, entry: &Bound<'_, CacheEntry>) -> PyResult<bool> {
    Ok(code_extra::state_or_attach(code.as_borrowed())?.publish(py, entry))
}

/// Drops every cache entry and skip mark of every code object.
#[pyfunction]
fn reset(py: Python<'_>) {
    cache::reset_all(py);
}

/// Entries per code object before it runs eagerly on misses (default 8).
#[pyfunction]
fn set_recompile_limit(limit: usize) -> PyResult<()> {
    if limit == 0 {
        return Err(Error::BadValue("the recompile limit must be at least 1".to_owned()).into());
    }
    cache::set_recompile_limit(limit);
    Ok(())
}

#[pyfunction]
fn get_recompile_limit() -> usize {
    cache::recompile_limit()
}

/// Which evaluator is installed: "default", "fastdynamo", "passthrough" or "other".
#[pyfunction]
fn installed_evaluator(py: Python<'_>) -> &'static str {
    match hook::installed(py) {
        hook::Installed::Default => "default",
        hook::Installed::Ours => "fastdynamo",
        hook::Installed::Passthrough => "passthrough",
        hook::Installed::Other => "other",
    }
}

/// Benches and tests: install (True) or remove (False) a pass-through evaluator.
#[pyfunction]
fn _set_passthrough_evaluator(py: Python<'_>, enabled: bool) {
    hook::set_passthrough(py, enabled);
}

/// Benches and tests: frames the pass-through evaluator has evaluated so far.
#[pyfunction]
fn _passthrough_frames() -> usize {
    hook::passthrough_frames()
}

/// Tests: whether the hook reads `co_extra` in place (its layout verified at import on
/// this interpreter) rather than through `_PyCode_GetExtra`.
#[pyfunction]
fn _code_extra_read_in_place() -> bool {
    code_extra::direct_read_enabled()
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    code_extra::init(py)?;
    crate::ffi::c_recursion::init();
    module.add_function(wrap_pyfunction!(runtime_version, module)?)?;
    module.add_function(wrap_pyfunction!(crate::callback::set_callback, module)?)?;
    module.add_function(wrap_pyfunction!(crate::callback::get_callback, module)?)?;
    module.add_function(wrap_pyfunction!(set_code_action, module)?)?;
    module.add_function(wrap_pyfunction!(get_code_action, module)?)?;
    module.add_function(wrap_pyfunction!(cache_entries, module)?)?;
    module.add_function(wrap_pyfunction!(publish_cache_entry, module)?)?;
    module.add_function(wrap_pyfunction!(reset, module)?)?;
    module.add_function(wrap_pyfunction!(set_recompile_limit, module)?)?;
    module.add_function(wrap_pyfunction!(get_recompile_limit, module)?)?;
    module.add_function(wrap_pyfunction!(installed_evaluator, module)?)?;
    module.add_function(wrap_pyfunction!(_set_passthrough_evaluator, module)?)?;
    module.add_function(wrap_pyfunction!(_passthrough_frames, module)?)?;
    module.add_function(wrap_pyfunction!(_code_extra_read_in_place, module)?)?;
    module.add_class::<CacheEntry>()?;
    module.add_class::<Frame>()?;
    crate::guards::register(module)?;
    crate::dispatch::register(module)?;
    crate::cpu_kernel::register(module)?;
    module.add("RecompileLimitWarning", py.get_type::<crate::RecompileLimitWarning>())?;
    module.add("DEFAULT", Action::Default as i64)?;
    module.add("SKIP", Action::Skip as i64)?;
    module.add("SKIP_RECURSIVE", Action::SkipRecursive as i64)?;
    module.add("RUN_ONLY", Action::RunOnly as i64)?;
    module.add("REGION_WRAPPER", Action::RegionWrapper as i64)?;
    module.add("DEFAULT_RECOMPILE_LIMIT", cache::DEFAULT_RECOMPILE_LIMIT)?;
    Ok(())
}

//! `fastdynamo._native`: the PEP 523 frame evaluator, per-code caches and guards.
//!
//! Only registration lives here; see `eval_frame.rs` for what happens to a frame.

#![deny(unsafe_code)]

mod cache;
mod callback;
mod cpu_kernel;
mod dispatch;
mod errors;
mod eval_frame;
#[allow(unsafe_code)] // the one home of unsafe code; every block says why it is sound
mod ffi;
mod frame_info;
mod guards;
mod module_api;
#[cfg(test)]
mod embedded_tests;

use pyo3::prelude::*;

pyo3::create_exception!(
    fastdynamo._native,
    RecompileLimitWarning,
    pyo3::exceptions::PyUserWarning,
    "A code object reached the recompile limit and now runs eagerly on cache misses."
);

/// Builds the `_native` module without importing it (embedding: benches, cargo tests).
pub fn python_module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let module = PyModule::new(py, "_native")?;
    module_api::register(&module)?;
    Ok(module)
}

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module_api::register(module)
}

//! Per-code state stored in `co_extra`, freed with the code object.

use crate::cache::CodeState;
use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi::{self, PyObject, Py_ssize_t};
use pyo3::prelude::*;
use pyo3::Borrowed;
use std::os::raw::{c_int, c_void};
use std::sync::OnceLock;

extern "C" {
    fn _PyEval_RequestCodeExtraIndex(free: unsafe extern "C" fn(*mut c_void)) -> Py_ssize_t;
    fn _PyCode_GetExtra(code: *mut PyObject, index: Py_ssize_t, extra: *mut *mut c_void) -> c_int;
    fn _PyCode_SetExtra(code: *mut PyObject, index: Py_ssize_t, extra: *mut c_void) -> c_int;
}

static INDEX: OnceLock<Py_ssize_t> = OnceLock::new();

/// Requests our `co_extra` slot, once per process.
pub fn init(_py: Python<'_>) -> PyResult<()> {
    if INDEX.get().is_some() {
        return Ok(());
    }
    // SAFETY: called with the GIL held; `free_code_state` matches CPython's `freefunc`.
    let index = unsafe { _PyEval_RequestCodeExtraIndex(free_code_state) };
    if index < 0 {
        return Err(PyRuntimeError::new_err("no co_extra index left (at most 255 per interpreter)"));
    }
    let _ = INDEX.set(index);
    Ok(())
}

fn index() -> Py_ssize_t {
    *INDEX.get().expect("co_extra index requested at module init")
}

/// The state attached to `code`, if any. This is the first thing the hook does for
/// every frame.
#[inline]
pub fn state<'a>(code: Borrowed<'a, '_, PyAny>) -> Option<&'a CodeState> {
    let mut slot: *mut c_void = std::ptr::null_mut();
    // SAFETY: `code` is a live object; _PyCode_GetExtra checks that it is a code object
    // and that our index is in range, and leaves `slot` NULL otherwise. A non-NULL slot
    // was set by `state_or_attach` to a leaked `Box<CodeState>` that lives until the code
    // object dies, which outlives 'a.
    unsafe {
        if _PyCode_GetExtra(code.as_ptr(), index(), &raw mut slot) != 0 {
            ffi::PyErr_Clear();
            return None;
        }
        slot.cast::<CodeState>().as_ref()
    }
}

/// The state attached to `code`, creating it on first use. `code` must be a code object.
pub fn state_or_attach<'a>(code: Borrowed<'a, '_, PyAny>) -> PyResult<&'a CodeState> {
    if let Some(state) = state(code) {
        return Ok(state);
    }
    // SAFETY: PyCode_Check only reads the type.
    if unsafe { ffi::PyCode_Check(code.as_ptr()) } == 0 {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "expected a code object, got {}",
            code.get_type().name()?
        )));
    }
    let raw = Box::into_raw(Box::new(CodeState::new(code.as_ptr() as usize)));
    // SAFETY: `code` is a live code object (checked above) and the GIL is held. On success
    // CPython owns `raw` and hands it to `free_code_state` when the code dies.
    let status = unsafe { _PyCode_SetExtra(code.as_ptr(), index(), raw.cast()) };
    if status != 0 {
        // SAFETY: CPython did not take `raw`; reclaim it.
        drop(unsafe { Box::from_raw(raw) });
        return Err(PyErr::fetch(code.py()));
    }
    crate::cache::register(code.as_ptr() as usize);
    // SAFETY: just stored; lives as long as the code object, which outlives 'a.
    Ok(unsafe { &*raw })
}

/// The state of a code object known to be alive by its address (from the registry that
/// `free_code_state` keeps up to date).
pub fn state_at(py: Python<'_>, code_address: usize) -> Option<&CodeState> {
    // SAFETY: registered addresses are removed before their code object is freed, and
    // callers hold the GIL, so the code object is alive here.
    let code = unsafe { Borrowed::from_ptr(py, code_address as *mut PyObject) };
    // SAFETY: the borrow's lifetime is bounded by the GIL token borrowed above.
    state(code).map(|s| unsafe { &*std::ptr::from_ref(s) })
}

/// CPython's `freefunc` for our slot: runs when a code object with state is deallocated.
unsafe extern "C" fn free_code_state(ptr: *mut c_void) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: CPython passes back exactly the pointer `state_or_attach` leaked, once.
    let state = unsafe { Box::from_raw(ptr.cast::<CodeState>()) };
    crate::cache::unregister(state.code_address());
    // SAFETY: CPython frees code objects with the GIL held (also during finalization,
    // when PyO3's `attach` would refuse), so references can be released right here.
    let py = unsafe { Python::assume_attached() };
    state.release(py);
}

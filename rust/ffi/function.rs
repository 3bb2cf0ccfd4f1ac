//! The fields of a Python function that a call binds against, read through CPython's
//! `PyFunction_Get*` (no attribute lookup, no new reference).

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFunction, PyTuple};
use pyo3::Borrowed;

/// A function object whose fields are read in place.
#[derive(Clone, Copy)]
pub struct FunctionRef<'a, 'py>(Borrowed<'a, 'py, PyFunction>);

impl<'a, 'py> FunctionRef<'a, 'py> {
    pub fn new(function: Borrowed<'a, 'py, PyFunction>) -> Self {
        Self(function)
    }

    pub fn py(self) -> Python<'py> {
        self.0.py()
    }

    fn field(self, read: unsafe extern "C" fn(*mut ffi::PyObject) -> *mut ffi::PyObject) -> Option<Borrowed<'a, 'py, PyAny>> {
        // SAFETY: `self.0` is a live function object (its type was checked when the
        // Borrowed was made); the getters return a borrowed reference owned by the
        // function, or NULL for an unset field, without setting an exception.
        unsafe {
            let ptr = read(self.0.as_ptr());
            (!ptr.is_null()).then(|| Borrowed::from_ptr(self.0.py(), ptr))
        }
    }

    /// `__code__` (a function always has one).
    pub fn code(self) -> Option<Borrowed<'a, 'py, PyAny>> {
        self.field(ffi::PyFunction_GetCode)
    }

    /// `__defaults__`, a tuple or None.
    pub fn defaults(self) -> Option<Borrowed<'a, 'py, PyTuple>> {
        self.field(ffi::PyFunction_GetDefaults).and_then(|d| d.cast::<PyTuple>().ok())
    }

    /// `__kwdefaults__`, a dict or None.
    pub fn keyword_defaults(self) -> Option<Borrowed<'a, 'py, PyDict>> {
        self.field(ffi::PyFunction_GetKwDefaults).and_then(|d| d.cast::<PyDict>().ok())
    }

    /// `__globals__`.
    pub fn globals(self) -> Option<Borrowed<'a, 'py, PyAny>> {
        self.field(ffi::PyFunction_GetGlobals)
    }

    /// `__closure__`, a tuple of cells or None.
    pub fn closure(self) -> Option<Borrowed<'a, 'py, PyTuple>> {
        self.field(ffi::PyFunction_GetClosure).and_then(|c| c.cast::<PyTuple>().ok())
    }
}

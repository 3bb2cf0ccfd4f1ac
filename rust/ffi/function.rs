//! The fields of a Python function that a call binds against, read from the function
//! object's own struct (no attribute lookup, no call, no new reference).

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

    /// The function's fields, read in place: a struct read, no call.
    fn object(self) -> &'a ffi::PyFunctionObject {
        // SAFETY: `self.0` is a live object of exactly the function type (PyO3 checks
        // `PyFunction_Check`, an exact type test, when the Borrowed is cast; the type
        // cannot be subclassed), so it is a `PyFunctionObject`, alive for 'a.
        unsafe { &*self.0.as_ptr().cast::<ffi::PyFunctionObject>() }
    }

    fn field(self, pointer: *mut ffi::PyObject) -> Option<Borrowed<'a, 'py, PyAny>> {
        // SAFETY: a field of the live function: NULL (unset) or a reference the function
        // owns, the same borrowed reference `PyFunction_GetCode` and the other getters
        // return (they read these fields after an exact type check), without the call.
        (!pointer.is_null()).then(|| unsafe { Borrowed::from_ptr(self.0.py(), pointer) })
    }

    /// `__code__` (a function always has one).
    pub fn code(self) -> Option<Borrowed<'a, 'py, PyAny>> {
        self.field(self.object().func_code)
    }

    /// `__defaults__`, a tuple or None.
    pub fn defaults(self) -> Option<Borrowed<'a, 'py, PyTuple>> {
        self.field(self.object().func_defaults).and_then(|d| d.cast::<PyTuple>().ok())
    }

    /// `__kwdefaults__`, a dict or None.
    pub fn keyword_defaults(self) -> Option<Borrowed<'a, 'py, PyDict>> {
        self.field(self.object().func_kwdefaults).and_then(|d| d.cast::<PyDict>().ok())
    }

    /// `__globals__`.
    pub fn globals(self) -> Option<Borrowed<'a, 'py, PyAny>> {
        self.field(self.object().func_globals)
    }

    /// `__closure__`, a tuple of cells or None.
    pub fn closure(self) -> Option<Borrowed<'a, 'py, PyTuple>> {
        self.field(self.object().func_closure).and_then(|c| c.cast::<PyTuple>().ok())
    }
}

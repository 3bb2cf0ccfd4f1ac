//! The crate's one error type, turned into Python exceptions only at the boundary.

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::fmt;

#[derive(Debug)]
pub enum Error {
    /// A guard spec that does not follow `guards/__init__.py`'s format.
    BadGuardSpec(String),
    /// Something that must be callable was not.
    NotCallable(String),
    /// An argument outside its allowed range.
    BadValue(String),
    /// An argument of the wrong type (or a tensor of the wrong kind: dtype, device...).
    WrongType(String),
    /// An int that does not fit the C type it is passed as.
    Overflow(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadGuardSpec(why) => write!(f, "bad guard spec: {why}"),
            Error::NotCallable(why)
            | Error::BadValue(why)
            | Error::WrongType(why)
            | Error::Overflow(why) => f.write_str(why),
        }
    }
}

impl From<Error> for PyErr {
    #[cold]
    fn from(err: Error) -> PyErr {
        match err {
            Error::NotCallable(_) | Error::WrongType(_) => PyTypeError::new_err(err.to_string()),
            Error::Overflow(_) => PyOverflowError::new_err(err.to_string()),
            Error::BadGuardSpec(_) | Error::BadValue(_) => PyValueError::new_err(err.to_string()),
        }
    }
}

/// Reports an internal failure of the frame hook, which then evaluates the frame normally:
/// an internal error never unwinds into CPython.
#[cold]
pub fn report_internal_error(py: Python<'_>, what: &str) {
    let err = pyo3::exceptions::PyRuntimeError::new_err(format!("fastdynamo internal error: {what}"));
    crate::ffi::object::write_unraisable(py, err, "fastdynamo frame evaluator");
}

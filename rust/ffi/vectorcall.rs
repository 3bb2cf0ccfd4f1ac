//! Vectorcall for a pyclass: CPython calls a Rust function with the caller's argument
//! array, with no tuple or dict built (PyO3 gives classes only `tp_call`).
//!
//! A class opts in by holding a [`VectorcallSlot`] field and calling [`enable`] on each
//! new instance: the slot's offset from the object's start becomes the type's
//! `tp_vectorcall_offset` and the type gets `Py_TPFLAGS_HAVE_VECTORCALL`. The class keeps
//! a `__call__` (PyO3's `tp_call`), which `callable()` needs and CPython uses only when
//! the slot is empty.

use super::object::Arguments;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::Borrowed;
use std::panic::AssertUnwindSafe;

/// What a vectorcall-enabled class does when called.
pub trait VectorcallTarget {
    /// `callable(*args[..positional], **dict(zip(kwnames, args[positional..])))`.
    fn vectorcall<'py>(
        callable: Borrowed<'_, 'py, PyAny>,
        args: Arguments<'_>,
        positional: usize,
        kwnames: Option<Borrowed<'_, 'py, PyTuple>>,
    ) -> PyResult<Bound<'py, PyAny>>;
}

/// The per-instance field CPython reads the function pointer from.
#[repr(transparent)]
pub struct VectorcallSlot(ffi::vectorcallfunc);

// SAFETY: a plain function pointer, written once before the object is shared.
unsafe impl Sync for VectorcallSlot {}
// SAFETY: as above.
unsafe impl Send for VectorcallSlot {}

impl VectorcallSlot {
    pub fn new<T: VectorcallTarget>() -> Self {
        Self(trampoline::<T>)
    }
}

/// Whether instances found on a class bind to the instance they are looked up on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// Like functions: the class has a `__get__` returning a method, and its type is
    /// marked a method descriptor, so `obj.attr(...)` may call it with `obj` first.
    LikeFunction,
    /// Never: `obj.attr(...)` calls the instance with the call's own arguments.
    Never,
}

/// Points the type of `object` at `slot` (a field inside `object`). Fails when the slot is
/// not inside the object, or when another instance placed it elsewhere. With
/// [`Binding::LikeFunction`] the type is also marked a method descriptor.
pub fn enable(object: &Bound<'_, PyAny>, slot: &VectorcallSlot, binding: Binding) -> PyResult<()> {
    let start = object.as_ptr() as usize;
    let field = std::ptr::from_ref(slot) as usize;
    let type_object = object.get_type();
    let raw_type = type_object.as_type_ptr();
    // SAFETY: `raw_type` is the live type of a live object; reading its size is plain.
    let size = usize::try_from(unsafe { (*raw_type).tp_basicsize }).unwrap_or(0);
    let offset = field.wrapping_sub(start);
    if field < start || offset + std::mem::size_of::<VectorcallSlot>() > size {
        return Err(pyo3::exceptions::PySystemError::new_err("vectorcall slot outside the object"));
    }
    let offset = isize::try_from(offset).map_err(|_| pyo3::exceptions::PySystemError::new_err("bad offset"))?;
    // SAFETY: the GIL is held (token in `object`); the type is a heap type made by PyO3
    // that only this module creates instances of, and every instance has the slot at the
    // same offset (a field of the same Rust struct), so setting the offset and the flag
    // is valid for all of them. CPython reads both only when calling an instance.
    unsafe {
        let current = (*raw_type).tp_vectorcall_offset;
        if current != 0 && current != offset {
            return Err(pyo3::exceptions::PySystemError::new_err("vectorcall offset differs between instances"));
        }
        (*raw_type).tp_vectorcall_offset = offset;
        (*raw_type).tp_flags |= ffi::Py_TPFLAGS_HAVE_VECTORCALL;
        if binding == Binding::LikeFunction {
            (*raw_type).tp_flags |= ffi::Py_TPFLAGS_METHOD_DESCRIPTOR;
        }
    }
    Ok(())
}

/// What CPython calls: the caller's arguments, in place.
unsafe extern "C" fn trampoline<T: VectorcallTarget>(
    callable: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: usize,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls vectorcall functions with the GIL held, a live callable, and
    // `nargs + len(kwnames)` live borrowed argument references at `args`; kwnames is NULL
    // or a tuple of str.
    let (py, callable, arguments, positional, kwnames) = unsafe {
        let py = Python::assume_attached();
        let positional = usize::try_from(ffi::PyVectorcall_NARGS(nargsf)).unwrap_or(0);
        let keywords = if kwnames.is_null() { 0 } else { usize::try_from(ffi::PyTuple_GET_SIZE(kwnames)).unwrap_or(0) };
        let names = (!kwnames.is_null()).then(|| Borrowed::from_ptr(py, kwnames).cast_unchecked::<PyTuple>());
        let arguments = Arguments::new(args, positional + keywords);
        (py, Borrowed::from_ptr(py, callable), arguments, positional, names)
    };
    // A panic must never unwind into CPython: it becomes the call's exception.
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
        T::vectorcall(callable, arguments, positional, kwnames)
    }))
    .unwrap_or_else(|_| {
        Err(pyo3::panic::PanicException::new_err(
            "panic in a fastdynamo vectorcall",
        ))
    });
    match result {
        Ok(value) => value.into_ptr(),
        Err(err) => {
            err.restore(py);
            std::ptr::null_mut()
        }
    }
}

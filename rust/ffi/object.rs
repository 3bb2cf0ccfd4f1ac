//! Raw object calls that PyO3 does not expose without allocating.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple, PyType};
use pyo3::Borrowed;

extern "C" {
    // CPython's lookup of a name along a type's MRO, without descriptors (what attribute
    // lookup finds on the type; served from the type cache). Exported on 3.11-3.13.
    fn _PyType_Lookup(cls: *mut ffi::PyTypeObject, name: *mut ffi::PyObject) -> *mut ffi::PyObject;
}

/// Whether some class of `cls`'s MRO defines `name`.
pub fn type_defines(cls: &Bound<'_, PyType>, name: &Bound<'_, PyString>) -> bool {
    // SAFETY: `cls` is a live type and `name` a live str, both held by the caller; the
    // lookup returns a borrowed reference or NULL and never sets an exception.
    unsafe { !_PyType_Lookup(cls.as_ptr().cast(), name.as_ptr()).is_null() }
}

/// Arguments up to this count are passed from a stack buffer.
const STACK_ARGS: usize = 16;

/// `callable(*args, **dict(zip(kwnames, args[len(args)-len(kwnames):])))` through
/// vectorcall, without building a tuple or dict.
pub fn vectorcall<'py>(
    callable: &Bound<'py, PyAny>,
    args: &[Borrowed<'_, 'py, PyAny>],
    kwnames: Option<&Bound<'py, PyTuple>>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut stack = [std::ptr::null_mut::<ffi::PyObject>(); STACK_ARGS];
    let heap: Vec<*mut ffi::PyObject>;
    let pointers: &[*mut ffi::PyObject] = if args.len() <= STACK_ARGS {
        for (slot, arg) in stack.iter_mut().zip(args) {
            *slot = arg.as_ptr();
        }
        &stack[..args.len()]
    } else {
        heap = args.iter().map(|arg| arg.as_ptr()).collect();
        &heap
    };
    // SAFETY: each pointer is a live reference held by `args` for the whole call.
    let arguments = unsafe { Arguments::new(pointers.as_ptr(), pointers.len()) };
    vectorcall_arguments(callable, arguments, kwnames)
}

/// Reports an exception that cannot propagate (we are inside CPython's frame machinery),
/// naming where it happened.
pub fn write_unraisable(py: Python<'_>, err: PyErr, context: &str) {
    err.restore(py);
    let context = pyo3::types::PyString::new(py, context);
    // SAFETY: an exception is set (just restored) and the GIL is held.
    unsafe { ffi::PyErr_WriteUnraisable(context.as_ptr()) };
}

/// A run of argument pointers, all set: a frame's slots (`localsplus[0..len]`) or a buffer.
#[derive(Clone, Copy)]
pub struct Arguments<'f> {
    pointers: &'f [*mut ffi::PyObject],
}

impl<'f> Arguments<'f> {
    /// # Safety
    /// `start` must point at `len` non-NULL strong references that stay alive for 'f.
    pub(crate) unsafe fn new(start: *const *mut ffi::PyObject, len: usize) -> Self {
        if len == 0 {
            return Self { pointers: &[] }; // `start` may be NULL (a call with no arguments)
        }
        // SAFETY: per the contract above.
        Self { pointers: unsafe { std::slice::from_raw_parts(start, len) } }
    }

    pub fn len(&self) -> usize {
        self.pointers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pointers.is_empty()
    }

    /// Argument `index`, borrowed for as long as the arguments live.
    #[inline]
    pub fn get<'py>(&self, py: Python<'py>, index: usize) -> Option<Borrowed<'f, 'py, PyAny>> {
        let ptr = *self.pointers.get(index)?;
        // SAFETY: every pointer is a live, non-NULL reference for 'f (constructor contract).
        Some(unsafe { Borrowed::from_ptr(py, ptr) })
    }

    /// The first `count` arguments (all of them if there are fewer).
    #[must_use]
    pub fn prefix(&self, count: usize) -> Self {
        Self { pointers: &self.pointers[..count.min(self.pointers.len())] }
    }

    /// The arguments after the first `count`.
    #[must_use]
    pub fn after(&self, count: usize) -> Self {
        Self { pointers: &self.pointers[count.min(self.pointers.len())..] }
    }
}

/// A buffer of argument pointers, filled from objects that stay alive for `'a`; hands
/// them out as [`Arguments`] for a call or a guard check. Up to [`STACK_ARGS`] live
/// inline (no allocation).
pub struct ArgumentBuffer<'a> {
    inline: [*mut ffi::PyObject; STACK_ARGS],
    len: usize,
    heap: Vec<*mut ffi::PyObject>,
    _borrows: std::marker::PhantomData<&'a ()>,
}

impl<'a> ArgumentBuffer<'a> {
    pub fn with_capacity(capacity: usize) -> Self {
        let heap = if capacity > STACK_ARGS { Vec::with_capacity(capacity) } else { Vec::new() };
        Self { inline: [std::ptr::null_mut(); STACK_ARGS], len: 0, heap, _borrows: std::marker::PhantomData }
    }

    #[inline]
    fn push_pointer(&mut self, pointer: *mut ffi::PyObject) {
        if self.heap.capacity() == 0 && self.len < STACK_ARGS {
            self.inline[self.len] = pointer;
        } else {
            if self.heap.capacity() == 0 {
                // The inline buffer is full: move to the heap (a buffer made larger than
                // the inline one starts there).
                self.heap.extend_from_slice(&self.inline[..self.len]);
            }
            self.heap.push(pointer);
        }
        self.len += 1;
    }

    #[inline]
    pub fn push(&mut self, value: Borrowed<'a, '_, PyAny>) {
        self.push_pointer(value.as_ptr());
    }

    pub fn extend(&mut self, arguments: Arguments<'a>) {
        for &pointer in arguments.pointers {
            self.push_pointer(pointer);
        }
    }

    pub fn arguments(&self) -> Arguments<'_> {
        let pointers = if self.heap.capacity() == 0 { &self.inline[..self.len] } else { &self.heap[..] };
        Arguments { pointers }
    }
}

/// Like [`vectorcall`], passing a frame's argument slots in place.
pub fn vectorcall_arguments<'py>(
    callable: &Bound<'py, PyAny>,
    arguments: Arguments<'_>,
    kwnames: Option<&Bound<'py, PyTuple>>,
) -> PyResult<Bound<'py, PyAny>> {
    let keyword_count = kwnames.map_or(0, |names| names.len());
    assert!(keyword_count <= arguments.pointers.len(), "more keyword names than arguments");
    let positional = arguments.pointers.len() - keyword_count;
    let names = kwnames.map_or(std::ptr::null_mut(), Bound::as_ptr);
    // SAFETY: `arguments` are live borrowed references (its constructor's contract) that the
    // callee does not own; `names` is NULL or a tuple naming the last `keyword_count`.
    let result = unsafe {
        ffi::PyObject_Vectorcall(callable.as_ptr(), arguments.pointers.as_ptr(), positional, names)
    };
    // SAFETY: a new reference or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(callable.py(), result) }
}

/// The contents of a cell object, or None for an empty cell or a non-cell.
pub fn cell_contents<'py>(cell: &Bound<'py, PyAny>) -> Option<Bound<'py, PyAny>> {
    // SAFETY: PyCell_Check reads the type; PyCell_Get returns a new reference or NULL for
    // an empty cell without setting an exception. The GIL is held (token in `cell`).
    unsafe {
        if ffi::PyCell_Check(cell.as_ptr()) == 0 {
            return None;
        }
        Bound::from_owned_ptr_or_opt(cell.py(), ffi::PyCell_Get(cell.as_ptr()))
    }
}

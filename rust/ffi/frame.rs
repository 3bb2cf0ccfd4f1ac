//! A read-only view of a `_PyInterpreterFrame` handed to the evaluator hook.

use super::layout::layout;
use pyo3::ffi::{PyObject, PyThreadState};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::Borrowed;
use std::marker::PhantomData;
use std::os::raw::c_void;

/// `co_flags` bits of code whose frames belong to a generator-like object.
const GENERATOR_LIKE_FLAGS: i32 = 0x20 | 0x80 | 0x100 | 0x200; // GENERATOR, COROUTINE, ITERABLE_COROUTINE, ASYNC_GENERATOR
const FRAME_OWNED_BY_THREAD: i8 = 0;

/// A frame the hook is deciding about. Valid for the duration of one hook call, during
/// which CPython keeps the frame, its code, function and globals alive.
#[derive(Clone, Copy)]
pub struct FrameRef<'py> {
    frame: *mut c_void,
    py: Python<'py>,
    _not_send: PhantomData<*mut ()>,
}

impl<'py> FrameRef<'py> {
    /// # Safety
    /// `frame` must be the live frame CPython passed to the evaluator on this thread, and
    /// the returned view must not outlive that evaluator call.
    pub(crate) unsafe fn new(py: Python<'py>, frame: *mut c_void) -> Self {
        Self { frame, py, _not_send: PhantomData }
    }

    pub fn raw(self) -> *mut c_void {
        self.frame
    }

    pub fn py(self) -> Python<'py> {
        self.py
    }

    fn field<T: Copy>(self, offset: usize) -> T {
        // SAFETY: `offset` comes from the shim's `offsetof` for a field of type T in
        // `_PyInterpreterFrame`, and `self.frame` is live (constructor contract).
        unsafe { self.frame.cast::<u8>().add(offset).cast::<T>().read() }
    }

    fn object(self, offset: usize) -> Borrowed<'py, 'py, PyAny> {
        let ptr: *mut PyObject = self.field(offset);
        // SAFETY: f_code, f_func, f_globals and f_builtins are never NULL in a frame being
        // evaluated, and the frame holds them (strongly or via the function) for the call.
        unsafe { Borrowed::from_ptr(self.py, ptr) }
    }

    pub fn code(self) -> Borrowed<'py, 'py, PyAny> {
        self.object(layout().frame_code)
    }

    pub fn function(self) -> Borrowed<'py, 'py, PyAny> {
        self.object(layout().frame_func)
    }

    pub fn globals(self) -> Borrowed<'py, 'py, PyAny> {
        self.object(layout().frame_globals)
    }

    pub fn builtins(self) -> Borrowed<'py, 'py, PyAny> {
        self.object(layout().frame_builtins)
    }

    /// `co_flags` of the frame's code.
    pub fn code_flags(self) -> i32 {
        code_field(self.code().as_ptr(), layout().code_flags)
    }

    /// True for generator, coroutine and async-generator code: such frames are never
    /// intercepted (their first evaluation only creates the generator object).
    pub fn is_generator_like(self) -> bool {
        self.code_flags() & GENERATOR_LIKE_FLAGS != 0
    }

    pub fn owned_by_thread(self) -> bool {
        self.field::<i8>(layout().frame_owner) == FRAME_OWNED_BY_THREAD
    }

    /// Whether evaluation already began: the instruction pointer moved from where a fresh
    /// frame has it (`_PyCode_CODE(co) - 1` for 3.11/3.12's `prev_instr`, `_PyCode_CODE(co)`
    /// for 3.13's `instr_ptr`).
    pub fn has_started(self) -> bool {
        let instr: *const u8 = self.field(layout().frame_instr);
        let first = self.code().as_ptr().cast::<u8>().wrapping_add(layout().code_adaptive);
        instr != first.wrapping_offset(layout().fresh_instr_delta)
    }

    /// Whether a `PyFrameObject` was made for this frame. A frame the hook answers itself
    /// must have none: it is released without the hand-over to the frame object that the
    /// interpreter does.
    pub fn has_frame_object(self) -> bool {
        !self.field::<*mut PyObject>(layout().frame_frame_obj).is_null()
    }

    /// `localsplus[index]`, or None when that slot is empty (NULL) or out of range.
    pub fn local(self, index: usize) -> Option<Borrowed<'py, 'py, PyAny>> {
        let count: i32 = code_field(self.code().as_ptr(), layout().code_nlocalsplus);
        if index >= usize::try_from(count).unwrap_or(0) {
            return None;
        }
        let slot = layout().frame_localsplus + index * std::mem::size_of::<*mut PyObject>();
        let ptr: *mut PyObject = self.field(slot);
        // SAFETY: a non-NULL localsplus slot holds a strong reference owned by the frame.
        (!ptr.is_null()).then(|| unsafe { Borrowed::from_ptr(self.py, ptr) })
    }

    /// The function's `__closure__` tuple, if any.
    pub fn closure(self) -> Option<Borrowed<'py, 'py, PyTuple>> {
        let func = self.function().as_ptr().cast::<u8>();
        // SAFETY: f_func is a live PyFunctionObject; `func_closure` is at the offset the
        // shim reported and is NULL or a tuple of cells.
        unsafe {
            let closure = func.add(layout().func_closure).cast::<*mut PyObject>().read();
            (!closure.is_null()).then(|| Borrowed::from_ptr(self.py, closure).cast_unchecked())
        }
    }
}

fn code_field<T: Copy>(code: *mut PyObject, offset: usize) -> T {
    // SAFETY: callers pass a live PyCodeObject and an offset of a T-typed field reported
    // by the shim.
    unsafe { code.cast::<u8>().add(offset).cast::<T>().read() }
}

impl<'py> FrameRef<'py> {
    /// `localsplus[0..count]` if every slot is set: the arguments of a fresh frame.
    pub fn arguments(self, count: usize) -> Option<super::object::Arguments<'py>> {
        if (0..count).any(|i| self.local(i).is_none()) {
            return None;
        }
        let start = self.frame.cast::<u8>().wrapping_add(layout().frame_localsplus);
        // SAFETY: the first `count` slots are in range and non-NULL (checked above), owned by
        // the frame, which outlives 'py's use in the hook call.
        Some(unsafe { super::object::Arguments::new(start.cast(), count) })
    }
}

extern "C" {
    #[cfg(Py_3_12)]
    fn fd_frame_clear_and_pop(tstate: *mut PyThreadState, frame: *mut c_void);
}

/// Releases a frame the hook answered without evaluating it (its result came from a
/// cache entry or an error). From 3.12 on the evaluator that receives a frame owns it:
/// CPython's own evaluator clears it and pops it off the thread's data stack when it
/// returns, so a hook that answers instead must do the same, or the function, code and
/// arguments leak a reference per call. On 3.11 the caller does it.
///
/// # Safety
/// `tstate` and `frame` are the evaluator's own arguments; the frame is fresh, owned by
/// the thread, has no frame object, and is not touched after this call.
pub(crate) unsafe fn release_answered(tstate: *mut PyThreadState, frame: FrameRef<'_>) {
    debug_assert!(frame.owned_by_thread() && !frame.has_frame_object());
    #[cfg(Py_3_12)]
    // SAFETY: per this function's contract, which is the C helper's.
    unsafe {
        fd_frame_clear_and_pop(tstate, frame.raw());
    }
    #[cfg(not(Py_3_12))]
    let _ = (tstate, frame);
}

//! Per-code state stored in `co_extra`, freed with the code object.
//!
//! The hook reads the slot of every frame's code. `_PyCode_GetExtra` does that with a
//! call and checks (code type, index against the interpreter's user count); the hook
//! instead reads `co_extra` in place once [`verify_direct_read`] has checked, on a probe
//! code object, that `_PyCodeObjectExtra` is laid out as below.

use super::frame::FrameRef;
use super::layout::layout;
use crate::cache::CodeState;
use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi::{self, PyObject, Py_ssize_t};
use pyo3::prelude::*;
use pyo3::Borrowed;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::OnceLock;

// 3.12 renamed these to `PyUnstable_*`; the old names remain only as static inline
// wrappers in the headers, with no symbol to link.
extern "C" {
    #[cfg_attr(Py_3_12, link_name = "PyUnstable_Eval_RequestCodeExtraIndex")]
    fn _PyEval_RequestCodeExtraIndex(free: unsafe extern "C" fn(*mut c_void)) -> Py_ssize_t;
    #[cfg_attr(Py_3_12, link_name = "PyUnstable_Code_GetExtra")]
    fn _PyCode_GetExtra(code: *mut PyObject, index: Py_ssize_t, extra: *mut *mut c_void) -> c_int;
    #[cfg_attr(Py_3_12, link_name = "PyUnstable_Code_SetExtra")]
    fn _PyCode_SetExtra(code: *mut PyObject, index: Py_ssize_t, extra: *mut c_void) -> c_int;
}

static INDEX: OnceLock<Py_ssize_t> = OnceLock::new();

/// Our index for the in-place read, or -1 while it is off (not verified yet, or the probe
/// failed: then every read goes through `_PyCode_GetExtra`).
static DIRECT_INDEX: AtomicIsize = AtomicIsize::new(-1);
/// `offsetof(PyCodeObject, co_extra)` and `offsetof(_PyInterpreterFrame, f_code)`, copied
/// from the layout when the in-place read is turned on, so that the hook reads them with
/// plain loads (no once-check).
//
// These three are read only by `pub(crate)` functions: a static that a `pub` inline
// function reads must stay preemptible in the rlib half of this crate, and `cargo build`
// applies no LTO to an rlib + cdylib crate, so it would be loaded through the GOT.
static CO_EXTRA_OFFSET: AtomicUsize = AtomicUsize::new(0);
static FRAME_CODE_OFFSET: AtomicUsize = AtomicUsize::new(0);

/// `co_extra` points at `_PyCodeObjectExtra` (`Objects/codeobject.c`, in no installed
/// header; the same in 3.11, 3.12 and 3.13): `{ Py_ssize_t ce_size; void *ce_extras[1]; }`,
/// grown to the number of users when a slot is first set; slots below `ce_size` are NULL or set.
const SIZE_WORDS: usize = 1;

/// Requests our `co_extra` slot, once per process, and turns the in-place read on if the
/// probe confirms the layout.
pub fn init(py: Python<'_>) -> PyResult<()> {
    if INDEX.get().is_some() {
        return Ok(());
    }
    // SAFETY: called with the GIL held; `free_code_state` matches CPython's `freefunc`.
    let index = unsafe { _PyEval_RequestCodeExtraIndex(free_code_state) };
    if index < 0 {
        return Err(PyRuntimeError::new_err("no co_extra index left (at most 255 per interpreter)"));
    }
    let _ = INDEX.set(index);
    if verify_direct_read(py)? {
        CO_EXTRA_OFFSET.store(layout().code_extra, Ordering::Relaxed);
        FRAME_CODE_OFFSET.store(layout().frame_code, Ordering::Relaxed);
        DIRECT_INDEX.store(index, Ordering::Relaxed);
    }
    Ok(())
}

fn index() -> Py_ssize_t {
    *INDEX.get().expect("co_extra index requested at module init")
}

/// Whether the hook reads `co_extra` in place (tests, and `_code_extra_read_in_place`,
/// which checks on each supported interpreter that the probe passed).
pub fn direct_read_enabled() -> bool {
    DIRECT_INDEX.load(Ordering::Relaxed) >= 0
}

/// Tests: turn the in-place read off (every read through `_PyCode_GetExtra`) or back on.
/// Both read the same slot, so switching is safe at any time.
#[cfg(test)]
pub(crate) fn set_direct_read(py: Python<'_>, on: bool) {
    let enable = on && verify_direct_read(py).unwrap_or(false);
    DIRECT_INDEX.store(if enable { index() } else { -1 }, Ordering::Relaxed);
}

/// The raw `co_extra` field of a code object.
fn co_extra_field(code: *mut PyObject, offset: usize) -> *const Py_ssize_t {
    // SAFETY: callers pass a live PyCodeObject and the shim's `offsetof(PyCodeObject,
    // co_extra)`, a pointer-sized field.
    unsafe { code.byte_add(offset).cast::<*const Py_ssize_t>().read() }
}

/// Checks the in-place read against `_PyCode_GetExtra` on a fresh code object: no
/// extras before a state is attached; after, `ce_size` covers our index and every slot up
/// to ours holds what `_PyCode_GetExtra` returns (ours: the state, others: NULL).
fn verify_direct_read(py: Python<'_>) -> PyResult<bool> {
    let index = index();
    let offset = layout().code_extra;
    // SAFETY: PyCode_NewEmpty returns a new reference to a fresh code object, or NULL
    // with an exception set (turned into Err by from_owned_ptr_or_err).
    let code = unsafe {
        Bound::from_owned_ptr_or_err(py, ffi::PyCode_NewEmpty(c"<fastdynamo-probe>".as_ptr(), c"probe".as_ptr(), 0).cast())?
    };
    if !co_extra_field(code.as_ptr(), offset).is_null() || state(code.as_borrowed()).is_some() {
        return Ok(false);
    }
    let attached = std::ptr::from_ref(state_or_attach(code.as_borrowed())?).cast::<c_void>();
    let extra = co_extra_field(code.as_ptr(), offset);
    if extra.is_null() {
        return Ok(false);
    }
    // SAFETY: `extra` is the block CPython allocated when our slot was set. Its first word
    // is read only after the field was seen NULL before and set now (it is CPython's
    // extra block); slots are read only below a size that covers our index and is at
    // most CPython's limit of 255 users, so they lie inside the block if the layout holds.
    let agrees = unsafe {
        let size = extra.read();
        size > index
            && size <= 255
            && (0..=index).all(|i| {
                let mut expected: *mut c_void = std::ptr::null_mut();
                let got = _PyCode_GetExtra(code.as_ptr(), i, &raw mut expected);
                let direct = extra.add(SIZE_WORDS).cast::<*mut c_void>().add(i.unsigned_abs()).read();
                got == 0 && direct == expected && (i != index || direct == attached.cast_mut())
            })
    };
    Ok(agrees)
}

/// What the in-place read of a frame's slot found.
#[derive(Clone, Copy)]
pub(crate) enum InPlace<'a> {
    /// The slot was read: the code's state, or `None` when it has none.
    Read(Option<&'a CodeState>),
    /// The in-place read is off: use [`state`].
    Off,
}

/// The state of the code of a frame being evaluated, read in place: the hook's first read
/// of every frame (three loads after the frame's `f_code`, no call).
#[inline]
pub(crate) fn frame_state_in_place(frame: FrameRef<'_>) -> InPlace<'_> {
    let index = DIRECT_INDEX.load(Ordering::Relaxed);
    if index < 0 {
        return InPlace::Off;
    }
    // SAFETY: the frame is live (FrameRef's contract) and `f_code` is at the shim's offset;
    // a frame's f_code is a live code object, never NULL. A non-NULL co_extra is CPython's
    // extra block, whose layout `verify_direct_read` checked: slots below `ce_size` are
    // initialised, and ours is NULL or the leaked `Box<CodeState>` that `state_or_attach`
    // set, which lives until the code object dies (after the frame).
    unsafe {
        let code = frame.raw().byte_add(FRAME_CODE_OFFSET.load(Ordering::Relaxed)).cast::<*mut PyObject>().read();
        let extra = co_extra_field(code, CO_EXTRA_OFFSET.load(Ordering::Relaxed));
        if extra.is_null() || extra.read() <= index {
            return InPlace::Read(None);
        }
        InPlace::Read(extra.add(SIZE_WORDS).cast::<*const CodeState>().add(index.unsigned_abs()).read().as_ref())
    }
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

//! The PEP 523 evaluator: installation (chained to the previous evaluator) and the
//! trampoline CPython calls for every frame while it is installed.

use super::frame::FrameRef;
use super::code_extra::{self, InPlace};
use crate::cache::CodeState;
use crate::eval_frame::{decide, quick_decision, skips_at_once, Decision};
use pyo3::ffi::{PyObject, PyThreadState};
use pyo3::prelude::*;
use std::os::raw::{c_int, c_void};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

type EvalFn = unsafe extern "C" fn(*mut PyThreadState, *mut c_void, c_int) -> *mut PyObject;

extern "C" {
    fn fd_get_eval_frame() -> EvalFn;
    fn fd_set_eval_frame(eval: EvalFn);
    fn _PyEval_EvalFrameDefault(tstate: *mut PyThreadState, frame: *mut c_void, throwflag: c_int) -> *mut PyObject;
}

/// The evaluator that was installed before ours (`_PyEval_EvalFrameDefault` until the first
/// install). Read on every frame we hand back, so it is an atomic rather than a lock.
static PREVIOUS: AtomicPtr<c_void> = AtomicPtr::new(_PyEval_EvalFrameDefault as *mut c_void);

#[inline]
fn previous_evaluator() -> EvalFn {
    // SAFETY: PREVIOUS only ever holds EvalFn pointers (its initialiser and `install`).
    unsafe { std::mem::transmute::<*mut c_void, EvalFn>(PREVIOUS.load(Ordering::Relaxed)) }
}

#[inline]
fn default_evaluator() -> EvalFn {
    // Without LTO across the C shim, taking the address directly avoids a call per frame.
    _PyEval_EvalFrameDefault
}

/// Which evaluator a frame is handed to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Installed {
    Default,
    Ours,
    Passthrough,
    Other,
}

/// The evaluator currently installed on this interpreter.
pub fn installed(_py: Python<'_>) -> Installed {
    // SAFETY: reading the interpreter's evaluator with the GIL held.
    let current = unsafe { fd_get_eval_frame() } as usize;
    if current == default_evaluator() as usize {
        Installed::Default
    } else if current == fastdynamo_eval_frame as EvalFn as usize {
        Installed::Ours
    } else if current == passthrough_eval_frame as EvalFn as usize {
        Installed::Passthrough
    } else {
        Installed::Other
    }
}

/// Installs our evaluator, remembering the current one to chain to and restore.
pub fn install(py: Python<'_>) {
    if installed(py) == Installed::Ours {
        return;
    }
    // SAFETY: GIL held; swapping the interpreter's evaluator pointer.
    unsafe {
        PREVIOUS.store(fd_get_eval_frame() as *mut c_void, Ordering::Relaxed);
        fd_set_eval_frame(fastdynamo_eval_frame);
    }
}

/// Restores the evaluator that was there before `install`. If someone installed another
/// evaluator on top of ours meanwhile, theirs stays (it chains to us, and we pass through).
pub fn uninstall(py: Python<'_>) {
    if installed(py) != Installed::Ours {
        return;
    }
    // SAFETY: GIL held; restoring a pointer that was valid when saved.
    unsafe { fd_set_eval_frame(previous_evaluator()) };
}

/// Bench/test helper: installs (true) or removes (false) an evaluator that does nothing
/// but call the default one — the floor of any PEP 523 hook.
pub fn set_passthrough(py: Python<'_>, enabled: bool) {
    // SAFETY: GIL held; swapping evaluator pointers.
    unsafe {
        if enabled {
            fd_set_eval_frame(passthrough_eval_frame);
        } else if installed(py) == Installed::Passthrough {
            fd_set_eval_frame(default_evaluator());
        }
    }
}

/// Frames the pass-through evaluator has seen (lets tests observe chaining).
static PASSTHROUGH_FRAMES: AtomicUsize = AtomicUsize::new(0);

pub fn passthrough_frames() -> usize {
    PASSTHROUGH_FRAMES.load(Ordering::Relaxed)
}

unsafe extern "C" fn passthrough_eval_frame(
    tstate: *mut PyThreadState,
    frame: *mut c_void,
    throwflag: c_int,
) -> *mut PyObject {
    PASSTHROUGH_FRAMES.store(PASSTHROUGH_FRAMES.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    // SAFETY: forwarding CPython's own arguments to its default evaluator.
    unsafe { _PyEval_EvalFrameDefault(tstate, frame, throwflag) }
}

/// The evaluator, called for every frame. A frame whose code is marked SKIP (the common case
/// for Python running between graphs) costs an in-place `co_extra` read and a tail jump
/// to the previous evaluator; everything else continues out of line ([`evaluate`]), so
/// that this function needs no stack frame.
unsafe extern "C" fn fastdynamo_eval_frame(
    tstate: *mut PyThreadState,
    frame: *mut c_void,
    throwflag: c_int,
) -> *mut PyObject {
    // SAFETY: CPython calls the evaluator on a thread that holds the GIL, with a live frame
    // that stays valid until we return.
    let view = unsafe { FrameRef::new(Python::assume_attached(), frame) };
    let InPlace::Read(state) = code_extra::frame_state_in_place(view) else {
        // SAFETY: the evaluator's own arguments.
        return unsafe { evaluate_reading_state(tstate, frame, throwflag) };
    };
    if skips_at_once(view, state) {
        // SAFETY: forwarding CPython's own arguments to the evaluator we chained to.
        return unsafe { previous_evaluator()(tstate, frame, throwflag) };
    }
    // SAFETY: the evaluator's own arguments, and `state` was read from this frame's code.
    unsafe { evaluate(tstate, frame, throwflag, state) }
}

/// The trampoline when the in-place `co_extra` read is off: reads the state through
/// `_PyCode_GetExtra`, then decides the same way.
///
/// # Safety
/// The evaluator's own arguments, on the thread that holds the GIL.
#[cold]
#[inline(never)]
unsafe extern "C" fn evaluate_reading_state(tstate: *mut PyThreadState, frame: *mut c_void, throwflag: c_int) -> *mut PyObject {
    // SAFETY: as the caller's contract.
    let view = unsafe { FrameRef::new(Python::assume_attached(), frame) };
    let state = code_extra::state(view.code());
    if skips_at_once(view, state) {
        // SAFETY: forwarding CPython's own arguments to the evaluator we chained to.
        return unsafe { previous_evaluator()(tstate, frame, throwflag) };
    }
    // SAFETY: the evaluator's own arguments, and `state` was read from this frame's code.
    unsafe { evaluate(tstate, frame, throwflag, state) }
}

/// The rest of the hook for a frame `skips_at_once` did not settle.
///
/// # Safety
/// The evaluator's own arguments, on the thread that holds the GIL; `state` is the state
/// of the frame's code (it lives as long as the code, which outlives this call).
#[inline(never)]
unsafe extern "C" fn evaluate(
    tstate: *mut PyThreadState,
    frame: *mut c_void,
    throwflag: c_int,
    state: Option<&CodeState>,
) -> *mut PyObject {
    // SAFETY: as the caller's contract.
    let (py, view) = unsafe {
        let py = Python::assume_attached();
        (py, FrameRef::new(py, frame))
    };
    let decision = match quick_decision(view, throwflag != 0, state) {
        // SAFETY: forwarding CPython's own arguments to the evaluator we chained to.
        Ok(Decision::Default) => return unsafe { previous_evaluator()(tstate, frame, throwflag) },
        Ok(decision) => decision,
        // A panic must never unwind into CPython: report it and evaluate the frame normally.
        // (The code state is not read again after a panic, so asserting unwind safety holds.)
        Err(pending) => std::panic::catch_unwind(AssertUnwindSafe(|| decide(view, pending))).unwrap_or_else(|_| {
            crate::errors::report_internal_error(py, "panic in the frame evaluator");
            Decision::Default
        }),
    };
    match decision {
        // SAFETY: forwarding CPython's own arguments to the evaluator we chained to.
        Decision::Default => unsafe { previous_evaluator()(tstate, frame, throwflag) },
        Decision::DefaultUnobserved => {
            let _suspended = crate::callback::suspend();
            // SAFETY: as above.
            unsafe { previous_evaluator()(tstate, frame, throwflag) }
        }
        Decision::Done(result) => {
            let answer = match result {
                Ok(value) => value.into_ptr(),
                Err(err) => {
                    err.restore(py);
                    std::ptr::null_mut()
                }
            };
            // SAFETY: the evaluator's own arguments; `decide` answers only fresh
            // thread-owned frames without a frame object, and the frame is not used again.
            unsafe { super::frame::release_answered(tstate, view) };
            answer
        }
    }
}

//! The PEP 523 evaluator: installation (chained to the previous evaluator) and the
//! trampoline CPython calls for every frame while it is installed.

use super::c_recursion;
use super::frame::FrameRef;
use super::code_extra::{self, InPlace};
use crate::cache::CodeState;
use crate::eval_frame::{decide, quick_decision, skips_at_once, Decision};
use pyo3::ffi::{PyObject, PyThreadState};
use pyo3::prelude::*;
use std::cell::Cell;
use std::os::raw::{c_int, c_void};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

type EvalFn = unsafe extern "C" fn(*mut PyThreadState, *mut c_void, c_int) -> *mut PyObject;

extern "C" {
    fn fd_get_eval_frame() -> EvalFn;
    fn fd_set_eval_frame(eval: EvalFn);
    fn _PyEval_EvalFrameDefault(tstate: *mut PyThreadState, frame: *mut c_void, throwflag: c_int) -> *mut PyObject;
    fn fd_thread_is_tracing(tstate: *mut PyThreadState) -> c_int;
}

/// The evaluator that was installed before ours (`_PyEval_EvalFrameDefault` until the first
/// install). Read on every frame we hand back, so it is an atomic rather than a lock.
static PREVIOUS: AtomicPtr<c_void> = AtomicPtr::new(_PyEval_EvalFrameDefault as *mut c_void);

/// The evaluator found chaining to ours by the last probe (see [`install`]), so that a
/// region entry under the same arrangement does not probe again.
static KNOWN_ABOVE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

thread_local! {
    /// The frame this thread handed to a previous evaluator other than CPython's and has
    /// not got back a result for. The same frame arriving again means the chain loops.
    static HANDED_ON: Cell<*mut c_void> = const { Cell::new(std::ptr::null_mut()) };
    /// `reaches_us`'s probe: 0 idle, 1 probing, 2 probing and a frame arrived.
    static PROBE: Cell<u8> = const { Cell::new(0) };
}

const PROBE_IDLE: u8 = 0;
const PROBE_WAITING: u8 = 1;
const PROBE_SEEN: u8 = 2;

/// Hands a frame we do not run ourselves to the evaluator we chained to. When that is
/// the interpreter's own (the common case) this is a tail jump, unless the thread is deep:
/// then 3.12 gives back the C recursion the hook's presence costs, and a stack about to
/// overflow gets CPython's RecursionError instead (`c_recursion`).
#[inline]
unsafe fn hand_on(tstate: *mut PyThreadState, frame: *mut c_void, throwflag: c_int) -> *mut PyObject {
    let previous = PREVIOUS.load(Ordering::Relaxed);
    if previous == default_evaluator() as *mut c_void {
        // SAFETY: forwarding CPython's own arguments to its default evaluator, on the
        // thread whose state `tstate` is.
        if unsafe { c_recursion::thread_is_deep(tstate) } {
            // SAFETY: as above.
            return unsafe { c_recursion::evaluate_deep(default_evaluator(), tstate, frame, throwflag) };
        }
        // SAFETY: as above.
        return unsafe { default_evaluator()(tstate, frame, throwflag) };
    }
    // SAFETY: as the caller's contract.
    unsafe { hand_on_chained(previous, tstate, frame, throwflag) }
}

/// Hands a frame to another PEP 523 evaluator. If that evaluator (or one below it) hands
/// the same frame back to us, the chain loops (it was installed over us and we over it):
/// the frame is then evaluated by the default evaluator instead of going round again.
#[cold]
#[inline(never)]
unsafe fn hand_on_chained(previous: *mut c_void, tstate: *mut PyThreadState, frame: *mut c_void, throwflag: c_int) -> *mut PyObject {
    if HANDED_ON.with(Cell::get) == frame {
        // SAFETY: forwarding CPython's own arguments to its default evaluator.
        return unsafe { default_evaluator()(tstate, frame, throwflag) };
    }
    let saved = HANDED_ON.with(|h| h.replace(frame));
    // SAFETY: PREVIOUS only ever holds EvalFn pointers (its initialiser and `install`).
    let previous = unsafe { std::mem::transmute::<*mut c_void, EvalFn>(previous) };
    // SAFETY: forwarding CPython's own arguments to the evaluator we chained to.
    let result = unsafe { previous(tstate, frame, throwflag) };
    HANDED_ON.with(|h| h.set(saved));
    result
}

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

/// Whether this thread runs a trace or profile function, or has a trace function set:
/// then its frames run as Python (see the trampoline), and a dispatcher must not serve
/// the call without one.
pub fn thread_is_tracing(_py: Python<'_>) -> bool {
    // SAFETY: the GIL is held (the token), so this thread has a current thread state.
    unsafe { fd_thread_is_tracing(pyo3::ffi::PyThreadState_Get()) != 0 }
}

/// Whether the chain holds no evaluator but the interpreter's and ours: then no other PEP 523
/// compiler (torch.compile) can be intercepting frames on any thread. A cheap test that
/// lets a caller skip asking that compiler for its per-thread state.
pub fn no_other_evaluator(py: Python<'_>) -> bool {
    match installed(py) {
        Installed::Default => true,
        Installed::Ours => PREVIOUS.load(Ordering::Relaxed) == default_evaluator() as *mut c_void,
        Installed::Passthrough | Installed::Other => false,
    }
}

/// Makes sure frames reach our evaluator: called whenever a thread turns a callback on.
///
/// - Ours on top: nothing to do.
/// - CPython's default: install ours, chained to it.
/// - Another evaluator X: if X already hands frames on to us (it was installed over ours
///   and chains to it), installing ours over X would make a loop (ours -> X -> ours ...):
///   stay below X. Whether it does is not guessed from history (X may have removed ours and
///   re-installed itself meanwhile) but probed: a fresh frame is evaluated and we see
///   whether it arrives. Otherwise install ours over X, chained to it.
pub fn install(py: Python<'_>) {
    // SAFETY: reading the interpreter's evaluator with the GIL held.
    let current = unsafe { fd_get_eval_frame() } as *mut c_void;
    match installed(py) {
        Installed::Ours => {}
        Installed::Default => set_ours_over(current),
        Installed::Passthrough | Installed::Other => {
            if KNOWN_ABOVE.load(Ordering::Relaxed) == current || reaches_us(py) {
                KNOWN_ABOVE.store(current, Ordering::Relaxed);
                if PREVIOUS.load(Ordering::Relaxed) == current {
                    // X chains to us and we to X: we hand frames to CPython's evaluator.
                    PREVIOUS.store(default_evaluator() as *mut c_void, Ordering::Relaxed);
                }
            } else {
                set_ours_over(current);
            }
        }
    }
}

fn set_ours_over(current: *mut c_void) {
    KNOWN_ABOVE.store(std::ptr::null_mut(), Ordering::Relaxed);
    PREVIOUS.store(current, Ordering::Relaxed);
    // SAFETY: GIL held (callers are `#[pyfunction]`s or the hook); installing our evaluator.
    unsafe { fd_set_eval_frame(fastdynamo_eval_frame) };
}

/// Whether a frame evaluated now reaches our evaluator (the installed one chains to us).
/// While probing, frames that reach us go straight to CPython's evaluator.
fn reaches_us(py: Python<'_>) -> bool {
    let saved_previous = PREVIOUS.swap(default_evaluator() as *mut c_void, Ordering::Relaxed);
    PROBE.with(|p| p.set(PROBE_WAITING));
    let globals = pyo3::types::PyDict::new(py);
    let ran = py.run(c"None", Some(&globals), None);
    let seen = PROBE.with(|p| p.replace(PROBE_IDLE)) == PROBE_SEEN;
    PREVIOUS.store(saved_previous, Ordering::Relaxed);
    if let Err(err) = ran {
        err.write_unraisable(py, None);
    }
    seen
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
        return unsafe { hand_on(tstate, frame, throwflag) };
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
        return unsafe { hand_on(tstate, frame, throwflag) };
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
    if PROBE.with(Cell::get) != PROBE_IDLE {
        PROBE.with(|p| p.set(PROBE_SEEN));
        // SAFETY: forwarding CPython's own arguments to its default evaluator.
        return unsafe { default_evaluator()(tstate, frame, throwflag) };
    }
    let decision = match quick_decision(view, throwflag != 0, state) {
        Ok(Decision::Default) => {
            crate::callback::uninstall_if_idle(py);
            // SAFETY: forwarding CPython's own arguments to the evaluator we chained to.
            return unsafe { hand_on(tstate, frame, throwflag) };
        }
        Ok(decision) => decision,
        // Frames run by `sys.settrace`/`sys.setprofile` functions (and whatever those call)
        // are never ours: they run with the thread's `tracing` count raised. While a trace
        // function is set (a debugger, coverage), frames run as Python too: line events
        // and breakpoints need the original bytecode. (Profile functions see compiled code.)
        // SAFETY: `tstate` is the thread state CPython passed with this frame.
        Err(_) if unsafe { fd_thread_is_tracing(tstate) } != 0 => {
            // SAFETY: forwarding CPython's own arguments to the evaluator we chained to.
            return unsafe { hand_on(tstate, frame, throwflag) };
        }
        // A panic must never unwind into CPython: report it and evaluate the frame normally.
        // (The code state is not read again after a panic, so asserting unwind safety holds.)
        Err(pending) => std::panic::catch_unwind(AssertUnwindSafe(|| decide(view, pending))).unwrap_or_else(|_| {
            crate::errors::report_internal_error(py, "panic in the frame evaluator");
            Decision::Default
        }),
    };
    match decision {
        // SAFETY: forwarding CPython's own arguments to the evaluator we chained to.
        Decision::Default => unsafe { hand_on(tstate, frame, throwflag) },
        Decision::DefaultUnobserved => {
            let _suspended = crate::callback::suspend();
            // SAFETY: as above.
            unsafe { hand_on(tstate, frame, throwflag) }
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

//! 3.12's C recursion budget, and the unit the hook gives back while CPython's evaluator
//! runs a frame the hook handed on.
//!
//! Without an evaluator hook, 3.12 runs a Python-to-Python call inside the caller's
//! evaluator: no C recursion, only the Python recursion limit (1000) counts. With any
//! PEP 523 evaluator installed it cannot: every call enters `_PyEval_EvalFrameDefault`
//! from C, which charges two units of the thread's C budget (`c_recursion_remaining`,
//! 1500). Recursion under the hook, compiled or not, then stopped at about 750 levels
//! where the same program without the hook reaches 1000. Once the thread is deep, giving
//! one unit back makes an entry cost one: the Python limit stops ordinary recursion first,
//! as without a hook, and runaway recursion through C still stops at the budget (1250
//! entries; 3.13 allows 5000 on the same stacks). 3.11 has no separate C budget and 3.13's (10000) is large enough:
//! there this module does nothing.

use pyo3::ffi::PyThreadState;
#[cfg(all(Py_3_12, not(Py_3_13)))]
use std::os::raw::c_int;
#[cfg(all(Py_3_12, not(Py_3_13)))]
use std::sync::atomic::{AtomicIsize, Ordering};

#[cfg(all(Py_3_12, not(Py_3_13)))]
extern "C" {
    fn fd_c_recursion_offset() -> isize;
}

/// `offsetof(PyThreadState, c_recursion_remaining)`, or -1 before [`init`].
#[cfg(all(Py_3_12, not(Py_3_13)))]
static OFFSET: AtomicIsize = AtomicIsize::new(-1);

/// Reads the budget's offset from the shim; called once at module init, before the hook
/// can be installed.
pub fn init() {
    #[cfg(all(Py_3_12, not(Py_3_13)))]
    // SAFETY: the shim returns a constant offsetof; no arguments, no state.
    OFFSET.store(unsafe { fd_c_recursion_offset() }, Ordering::Relaxed);
}

/// Runs `evaluate` (CPython's evaluator on a frame the hook hands on), on 3.12 with one
/// unit of this thread's C budget given back for its duration once the thread is deep
/// (fewer than [`GIVE_BACK_BELOW`] units left); otherwise just runs it (a tail jump).
///
/// # Safety
/// `tstate` is the live thread state CPython passed to the evaluator on this thread.
#[inline(always)]
pub(crate) unsafe fn with_unit_back<R>(tstate: *mut PyThreadState, evaluate: impl FnOnce() -> R) -> R {
    #[cfg(all(Py_3_12, not(Py_3_13)))]
    {
        let offset = OFFSET.load(Ordering::Relaxed);
        if offset >= 0 {
            // SAFETY: `tstate` is live (contract) and `offset` is the shim's offsetof of
            // its `int c_recursion_remaining`; only this thread touches its own budget.
            let remaining = unsafe { tstate.byte_offset(offset).cast::<c_int>() };
            // SAFETY: as above.
            if unsafe { *remaining } < GIVE_BACK_BELOW {
                // SAFETY: as above.
                return unsafe { deep(remaining, evaluate) };
            }
        }
    }
    let _ = tstate;
    evaluate()
}

/// Below this many units left (of 1500) each entry gets a unit back: the first 250
/// nested entries cost two units as without the hook, the next thousand one each, so the
/// budget allows 1250 entries, more than the Python limit's 1000. Giving back only when
/// deep keeps the common shallow frame a tail jump.
#[cfg(all(Py_3_12, not(Py_3_13)))]
const GIVE_BACK_BELOW: c_int = 1000;

/// # Safety
/// `remaining` is this thread's live `c_recursion_remaining`.
#[cfg(all(Py_3_12, not(Py_3_13)))]
#[cold]
#[inline(never)]
unsafe fn deep<R>(remaining: *mut c_int, evaluate: impl FnOnce() -> R) -> R {
    // SAFETY: per the contract; CPython's evaluator leaves the budget as it found it.
    unsafe { *remaining += 1 };
    let result = evaluate();
    // SAFETY: as above.
    unsafe { *remaining -= 1 };
    result
}

//! The recursion budget `CPython`'s evaluator checks on entry, and what the hook does with it
//! once a thread is deep: gives back on 3.12 the C recursion the hook's presence costs, and
//! on every version turns a C stack about to overflow into a `RecursionError`.
//!
//! Without an evaluator hook, 3.11-3.13 run a Python-to-Python call inside the caller's
//! evaluator: no C stack, only the Python recursion limit counts. With any PEP 523
//! evaluator installed they cannot: every call enters `_PyEval_EvalFrameDefault` from C,
//! about 1.9 KB of C stack per level of a compiled recursion.
//!
//! - 3.12 charges two units of the thread's C budget (`c_recursion_remaining`, 1500) per
//!   entry from C, so recursion under the hook stopped at about 750 levels where the same
//!   program without the hook reaches 1000. Once the thread is deep, giving one unit back
//!   makes an entry cost one: the Python limit stops ordinary recursion first, as without a
//!   hook, and runaway recursion through C still stops at the budget (1250 entries).
//! - 3.13's C budget (10000, 5000 entries) needs more than 8 MB of stack at that cost, and
//!   3.11 has no C budget: with `sys.setrecursionlimit` raised far enough a runaway
//!   recursion under the hook ran off the end of the C stack (a segfault at about 4500
//!   levels on 3.13) where the program without fastdynamo raises `RecursionError`.
//!
//! So when a deep thread's remaining stack falls under a margin ([`super::stack`]), the
//! hook hands the frame on with the budget shown as spent: `CPython`'s evaluator raises its
//! own `RecursionError` on entry and unwinds the frame as at its own limit; the budget is
//! restored when it returns. Only deep frames pay for the stack check; a shallow frame
//! reads one counter (3.11: two, its limit and its budget) and stays a tail jump.

use super::stack;
use pyo3::ffi::{PyObject, PyThreadState};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicIsize, Ordering};

extern "C" {
    fn fd_entry_budget_offset() -> isize;
    fn fd_entry_limit_offset() -> isize;
}

/// `offsetof(PyThreadState, <the entry budget>)`, or -1 before [`init`].
static BUDGET_OFFSET: AtomicIsize = AtomicIsize::new(-1);

/// 3.11: `offsetof(PyThreadState, recursion_limit)`, or -1 (before [`init`], and on 3.12+).
static LIMIT_OFFSET: AtomicIsize = AtomicIsize::new(-1);

/// Reads the offsets from the shim; called once at module init, before the hook can be
/// installed.
pub fn init() {
    // SAFETY: the shim returns constant offsetofs; no arguments, no state.
    let (budget, limit) = unsafe { (fd_entry_budget_offset(), fd_entry_limit_offset()) };
    LIMIT_OFFSET.store(limit, Ordering::Relaxed);
    BUDGET_OFFSET.store(budget, Ordering::Relaxed);
}

/// Whether the thread is deep enough for [`evaluate_deep`]; otherwise the hook hands the
/// frame on with a tail jump. A predicate, not a wrapper taking the evaluator call as a
/// closure: a closure made the common path spill its arguments and call instead of jump
/// (3.11's skipped frame went from 1.0x to 2.5x the pass-through floor).
///
/// # Safety
/// `tstate` is the live thread state `CPython` passed to the evaluator on this thread.
#[allow(clippy::inline_always)] // the hook's common path must stay a tail jump
#[inline(always)]
pub(crate) unsafe fn thread_is_deep(tstate: *mut PyThreadState) -> bool {
    let offset = BUDGET_OFFSET.load(Ordering::Relaxed);
    // SAFETY: `tstate` is live (contract) and `offset` is the shim's offsetof of its `int`
    // entry budget; only this thread touches its own budget.
    offset >= 0 && unsafe { is_deep(tstate, tstate.byte_offset(offset).cast::<c_int>()) }
}

/// Runs `evaluator` (`CPython`'s default) on a frame the hook hands on in a deep thread
/// ([`thread_is_deep`]): see [`deep`].
///
/// # Safety
/// The evaluator's own arguments, on the thread whose state `tstate` is, after
/// [`thread_is_deep`] returned true (so the budget offset is known).
#[cold]
#[inline(never)]
pub(crate) unsafe fn evaluate_deep(
    evaluator: EvalFn,
    tstate: *mut PyThreadState,
    frame: *mut c_void,
    throwflag: c_int,
) -> *mut PyObject {
    let offset = BUDGET_OFFSET.load(Ordering::Relaxed);
    // SAFETY: as in `thread_is_deep`; the evaluator call forwards CPython's own arguments.
    unsafe {
        let budget = tstate.byte_offset(offset).cast::<c_int>();
        deep(budget, || evaluator(tstate, frame, throwflag))
    }
}

type EvalFn = unsafe extern "C" fn(*mut PyThreadState, *mut c_void, c_int) -> *mut PyObject;

/// Deeper than about 250 evaluator entries (3.12, 3.13) or Python frames (3.11).
///
/// # Safety
/// `budget` is this thread's live entry budget in `tstate`.
#[allow(clippy::inline_always)] // as above
#[inline(always)]
unsafe fn is_deep(tstate: *mut PyThreadState, budget: *mut c_int) -> bool {
    // SAFETY: per the contract.
    let left = unsafe { *budget };
    #[cfg(Py_3_12)]
    {
        let _ = tstate;
        left < DEEP_BELOW
    }
    #[cfg(not(Py_3_12))]
    {
        let offset = LIMIT_OFFSET.load(Ordering::Relaxed);
        // SAFETY: `offset` is the shim's offsetof of the live thread state's `int
        // recursion_limit` (set with the budget's, before any frame reaches the hook).
        let limit = unsafe { *tstate.byte_offset(offset).cast::<c_int>() };
        limit.wrapping_sub(left) > DEEP_FRAMES
    }
}

/// 3.12: below this many units left (of 1500) each entry gets a unit back: the first 250
/// nested entries cost two units as without the hook, the next thousand one each, so the
/// budget allows 1250 entries, more than the Python limit's 1000.
#[cfg(all(Py_3_12, not(Py_3_13)))]
const DEEP_BELOW: c_int = 1000;

/// 3.13: 250 entries into the budget of 10000.
#[cfg(Py_3_13)]
const DEEP_BELOW: c_int = 9500;

/// 3.11: Python frames on the thread before the stack is checked.
#[cfg(not(Py_3_12))]
const DEEP_FRAMES: c_int = 250;

/// # Safety
/// `budget` is this thread's live entry budget, and `evaluate` enters `CPython`'s default
/// evaluator on this thread.
#[cold]
#[inline(never)]
unsafe fn deep<R>(budget: *mut c_int, evaluate: impl FnOnce() -> R) -> R {
    // SAFETY: per the contract; CPython's evaluator leaves the budget as it found it
    // (and on the refusing path it is restored to the value read here whatever it left).
    unsafe {
        if stack::is_short() {
            // Spent, but never raised from an overdraft: while CPython is raising a
            // RecursionError (`recursion_headroom`) it lets entries run down to -50 and
            // then stops the process, and resetting to 0 would let them run unbounded.
            let saved = *budget;
            *budget = saved.min(0);
            let result = evaluate();
            *budget = saved;
            return result;
        }
        #[cfg(all(Py_3_12, not(Py_3_13)))]
        {
            *budget += 1;
            let result = evaluate();
            *budget -= 1;
            result
        }
        #[cfg(not(all(Py_3_12, not(Py_3_13))))]
        evaluate()
    }
}

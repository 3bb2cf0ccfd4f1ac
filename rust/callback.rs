//! The per-thread callback (`None` off, `False` run-only, a callable compiles on miss)
//! and the install count that keeps the evaluator installed while any thread needs it.

use crate::errors::Error;
use crate::ffi::hook;
use pyo3::prelude::*;
use pyo3::types::PyBool;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize, Ordering};

/// What the hook does with frames on this thread.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// Not intercepting (no callback, or inside the runtime's own work).
    Off,
    /// Use cached entries, never compile.
    RunOnly,
    /// Use cached entries, call the callback on a miss.
    Compile,
}

enum Callback {
    Off,
    RunOnly,
    Compile(Py<PyAny>),
}

/// This thread's callback. A thread that exits with one set still counts in
/// `ACTIVE_THREADS` until this is destroyed: then it stops counting, and the evaluator is
/// uninstalled at the next chance (`uninstall_if_idle`), since a thread being torn down
/// has no Python thread state left to do it with.
struct ThreadCallback(RefCell<Callback>);

impl Drop for ThreadCallback {
    fn drop(&mut self) {
        if !matches!(*self.0.borrow(), Callback::Off) {
            ACTIVE_THREADS.fetch_sub(1, Ordering::Relaxed);
        }
        // A callable left here is released by PyO3's pool once the GIL is next held.
    }
}

thread_local! {
    static CALLBACK: ThreadCallback = const { ThreadCallback(RefCell::new(Callback::Off)) };
    /// What the hook reads on every frame, in one const-initialised cell (no lazy
    /// initialisation or destructor check): the mode in the low two bits, and above them
    /// how deep the runtime is in its own Python (callback, guards, recursive skips).
    static FAST_STATE: Cell<u32> = const { Cell::new(0) };
}

const MODE_BITS: u32 = 0b11;
const SUSPEND_STEP: u32 = 0b100;

fn mode_bits(callback: &Callback) -> u32 {
    match callback {
        Callback::Off => 0,
        Callback::RunOnly => 1,
        Callback::Compile(_) => 2,
    }
}

/// Threads whose callback is not `None`; the evaluator is installed while this is >0.
static ACTIVE_THREADS: AtomicUsize = AtomicUsize::new(0);

/// This thread's mode, as the hook sees it.
#[inline]
pub fn mode() -> Mode {
    match FAST_STATE.with(Cell::get) {
        1 => Mode::RunOnly,
        2 => Mode::Compile,
        _ => Mode::Off, // off, or suspended (any bit above MODE_BITS)
    }
}

/// The compile callback, if this thread has one.
pub fn compile_callback(py: Python<'_>) -> Option<Py<PyAny>> {
    CALLBACK.with(|cb| match &*cb.0.borrow() {
        Callback::Compile(f) => Some(f.clone_ref(py)),
        _ => None,
    })
}

/// While alive, frames on this thread are not intercepted.
pub struct Suspended(());

impl Drop for Suspended {
    fn drop(&mut self) {
        FAST_STATE.with(|s| s.set(s.get() - SUSPEND_STEP));
    }
}

pub fn suspend() -> Suspended {
    FAST_STATE.with(|s| s.set(s.get() + SUSPEND_STEP));
    Suspended(())
}

/// Suspends this thread unless the runtime is already inside its own Python here (then
/// None): the test and the entry in one thread-local access.
#[inline]
pub fn suspend_unless_suspended() -> Option<Suspended> {
    FAST_STATE.with(|s| {
        let state = s.get();
        (state < SUSPEND_STEP).then(|| {
            s.set(state + SUSPEND_STEP);
            Suspended(())
        })
    })
}

fn parse(callback: &Bound<'_, PyAny>) -> Result<Callback, Error> {
    if callback.is_none() {
        Ok(Callback::Off)
    } else if callback.is_instance_of::<PyBool>() && !callback.is_truthy().unwrap_or(true) {
        Ok(Callback::RunOnly)
    } else if callback.is_callable() {
        Ok(Callback::Compile(callback.clone().unbind()))
    } else {
        let name = callback.get_type().name().map_or_else(|_| "?".to_owned(), |n| n.to_string());
        Err(Error::NotCallable(format!(
            "callback must be None, False or a callable, not {name}"
        )))
    }
}

fn to_python(py: Python<'_>, callback: Callback) -> Py<PyAny> {
    match callback {
        Callback::Off => py.None(),
        Callback::RunOnly => PyBool::new(py, false).to_owned().into_any().unbind(),
        Callback::Compile(f) => f,
    }
}

/// Sets this thread's callback and returns the previous one.
///
/// `None` turns interception off for this thread, `False` runs cached entries only, a
/// callable is called as `callback(frame)` on a cache miss. The evaluator is installed
/// while any thread has a callback, and the previous evaluator is restored after.
#[pyfunction]
pub fn set_callback(py: Python<'_>, callback: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let new = parse(callback)?;
    let turning_on = !matches!(new, Callback::Off);
    let bits = mode_bits(&new);
    FAST_STATE.with(|s| s.set((s.get() & !MODE_BITS) | bits));
    let previous = CALLBACK.with(|cb| std::mem::replace(&mut *cb.0.borrow_mut(), new));
    let was_on = !matches!(previous, Callback::Off);
    if turning_on && !was_on {
        ACTIVE_THREADS.fetch_add(1, Ordering::Relaxed);
    } else if !turning_on && was_on {
        ACTIVE_THREADS.fetch_sub(1, Ordering::Relaxed);
    }
    if turning_on {
        // Also when the count did not change: another evaluator may have removed ours, or
        // been installed over it, since this thread last looked.
        hook::install(py);
    } else {
        uninstall_if_idle(py);
    }
    Ok(to_python(py, previous))
}

/// Uninstalls the evaluator when no thread has a callback (also after a thread exited
/// with one set, or after another evaluator put ours back on top).
pub fn uninstall_if_idle(py: Python<'_>) {
    if ACTIVE_THREADS.load(Ordering::Relaxed) == 0 {
        hook::uninstall(py);
    }
}

/// This thread's callback: `None`, `False` or the callable.
#[pyfunction]
pub fn get_callback(py: Python<'_>) -> Py<PyAny> {
    CALLBACK.with(|cb| match &*cb.0.borrow() {
        Callback::Off => py.None(),
        Callback::RunOnly => PyBool::new(py, false).to_owned().into_any().unbind(),
        Callback::Compile(f) => f.clone_ref(py),
    })
}

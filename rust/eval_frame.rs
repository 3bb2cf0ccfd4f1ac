//! What the hook does with one frame. Everything here is safe code: the raw frame is
//! reached through [`FrameRef`], and the trampoline in `ffi::hook` acts on the decision.

use crate::cache::{self, Action, CacheEntry, CodeState};
use crate::callback::{self, Mode};
use crate::ffi::code_extra;
use crate::ffi::frame::FrameRef;
use crate::frame_info::{Frame, GuardInput};
use pyo3::prelude::*;

pub enum Decision<'py> {
    /// Evaluate the frame with the previous evaluator.
    Default,
    /// Evaluate it with interception suspended for everything it calls.
    DefaultUnobserved,
    /// We ran the frame's work ourselves: its result or exception.
    Done(PyResult<Bound<'py, PyAny>>),
}

/// What `quick_decision` read, for `decide` to go on from without reading it again.
pub struct Pending<'py> {
    mode: Mode,
    state: Option<&'py CodeState>,
}

/// The first look at a frame, made by the trampoline before anything else: a code marked
/// SKIP goes to the previous evaluator in every mode and also when thrown into, so this
/// reads no thread state. Branch-minimal and inlined into the trampoline.
#[inline]
pub(crate) fn skips_at_once(frame: FrameRef<'_>, state: Option<&CodeState>) -> bool {
    state.is_some_and(|state| state.action(frame.py()) == Action::Skip)
}

/// The cheap second look, for frames `skips_at_once` did not settle: the thread's mode
/// (a TLS read) and `SKIP_RECURSIVE`. Returns the decision when that settles it, or what
/// was read when guards or the callback must run. Cannot panic.
#[inline]
pub fn quick_decision<'py>(
    frame: FrameRef<'py>,
    throw: bool,
    state: Option<&'py CodeState>,
) -> Result<Decision<'py>, Pending<'py>> {
    let mode = callback::mode();
    if mode == Mode::Off || throw {
        return Ok(Decision::Default);
    }
    if let Some(state) = state {
        match state.action(frame.py()) {
            Action::Skip => return Ok(Decision::Default),
            Action::SkipRecursive => return Ok(Decision::DefaultUnobserved),
            Action::Default | Action::RunOnly | Action::RegionWrapper => {}
        }
    }
    Err(Pending { mode, state })
}

/// Decides about a frame that `quick_decision` left open: cache lookup (guards in Rust),
/// then the callback on a miss.
pub fn decide<'py>(frame: FrameRef<'py>, pending: Pending<'py>) -> Decision<'py> {
    let Pending { mode, state } = pending;
    // Only a fresh thread-owned frame with no frame object may be answered here: that
    // is what `ffi::frame::release_answered` knows how to release (3.12+).
    if frame.is_generator_like() || !frame.owned_by_thread() || frame.has_started() || frame.has_frame_object() {
        return Decision::Default;
    }
    if state.is_some_and(|s| s.action(frame.py()) == Action::RegionWrapper) {
        return call_through_wrapper(frame).unwrap_or(Decision::Default);
    }
    let input = GuardInput::from_frame(frame);
    if let Some(state) = state {
        if let Some(entry) = lookup(state, &input) {
            return Decision::Done(CacheEntry::run(&entry, &input));
        }
        if mode == Mode::RunOnly || state.action(frame.py()) == Action::RunOnly {
            return Decision::Default;
        }
    } else if mode == Mode::RunOnly {
        return Decision::Default;
    }
    on_miss(frame, &input)
}

/// Finds the first entry whose guards pass, in MRU order, and moves it to the front.
///
/// Guards may run Python (attribute reads, `__eq__`), which may switch threads; another
/// thread may then push, promote or reset entries. The scan goes by index while the
/// entries are unchanged, and over a copy from the start once they have changed.
pub(crate) fn lookup<'py>(state: &CodeState, input: &GuardInput<'_, 'py>) -> Option<Bound<'py, CacheEntry>> {
    let suspended = callback::suspend();
    lookup_suspended(state, input, &suspended)
}

/// [`lookup`] on a thread the caller has already suspended (guards run the runtime's own
/// Python, which must not be intercepted).
#[inline]
pub(crate) fn lookup_suspended<'py>(
    state: &CodeState,
    input: &GuardInput<'_, 'py>,
    _suspended: &callback::Suspended,
) -> Option<Bound<'py, CacheEntry>> {
    let py = input.py();
    let generation = state.generation();
    let mut index = 0;
    while let Some(entry) = state.entry(py, index) {
        let entry = entry.into_bound(py);
        let passed = entry.get().guard_set(py).get().check(input);
        if state.generation() != generation {
            return if passed { Some(promote(state, entry)) } else { lookup_in_copy(state, input) };
        }
        if passed {
            entry.get().count_hit();
            state.touch(py, index);
            return Some(entry);
        }
        entry.get().count_miss();
        index += 1;
    }
    None
}

#[cold]
fn lookup_in_copy<'py>(state: &CodeState, input: &GuardInput<'_, 'py>) -> Option<Bound<'py, CacheEntry>> {
    let py = input.py();
    for entry in state.entries(py) {
        let entry = entry.into_bound(py);
        if entry.get().guard_set(py).get().check(input) {
            return Some(promote(state, entry));
        }
        entry.get().count_miss();
    }
    None
}

fn promote<'py>(state: &CodeState, entry: Bound<'py, CacheEntry>) -> Bound<'py, CacheEntry> {
    entry.get().count_hit();
    state.touch_entry(entry.py(), &entry);
    entry
}

/// A `fastdynamo.compile` wrapper entered inside its own region: calls the wrapped
/// function with the wrapper's `*args`/`**kwargs` (the wrapper would only set the callback
/// that is already set). None when the wrapper must run (another region, or no callback).
fn call_through_wrapper<'py>(frame: FrameRef<'py>) -> Option<Decision<'py>> {
    let py = frame.py();
    let current = callback::compile_callback(py)?;
    let wrapper = frame.function();
    let region = wrapper.getattr(pyo3::intern!(py, "_fastdynamo_region")).ok()?;
    let region_callback = region.getattr(pyo3::intern!(py, "callback")).ok()?;
    if region_callback.as_ptr() != current.as_ptr() {
        return None;
    }
    let original = wrapper.getattr(pyo3::intern!(py, "_fastdynamo_original")).ok()?;
    let args = frame.local(0)?.cast::<pyo3::types::PyTuple>().ok()?.to_owned();
    let kwargs = frame.local(1)?.cast::<pyo3::types::PyDict>().ok()?.to_owned();
    let kwargs = (!kwargs.is_empty()).then_some(kwargs);
    Some(Decision::Done(original.call(args, kwargs.as_ref())))
}

#[cold]
fn on_miss<'py>(frame: FrameRef<'py>, input: &GuardInput<'_, 'py>) -> Decision<'py> {
    let py = frame.py();
    let state = match code_extra::state_or_attach(frame.code()) {
        Ok(state) => state,
        Err(err) => return Decision::Done(Err(err)),
    };
    if state.entry_count(py) >= cache::recompile_limit() {
        state.set_action(py, Action::RunOnly);
        if state.take_limit_warning(py) {
            if let Err(err) = warn_limit(frame, state, input) {
                return Decision::Done(Err(err));
            }
        }
        return Decision::Default;
    }
    let Some(callable) = callback::compile_callback(py) else { return Decision::Default };
    let result = {
        let _suspended = callback::suspend();
        Frame::snapshot(frame).and_then(|snapshot| callable.bind(py).call1((snapshot,)))
    };
    match result {
        Err(err) => Decision::Done(Err(err)),
        Ok(result) => apply(state, input, &result),
    }
}

/// Acts on what the callback returned.
fn apply<'py>(state: &CodeState, input: &GuardInput<'_, 'py>, result: &Bound<'py, PyAny>) -> Decision<'py> {
    let py = input.py();
    if result.is_none() {
        return Decision::Default;
    }
    if let Ok(entry) = result.cast::<CacheEntry>() {
        // The callback may have published the entry already (under its compile lock), and
        // another thread may have compiled this code meanwhile (the callback ran Python):
        // an entry already in the list is promoted, and the limit holds for new ones.
        if state.position(py, entry).is_some() {
            state.touch_entry(py, entry);
        } else if !state.publish(py, entry) {
            state.set_action(py, Action::RunOnly);
        }
        return Decision::Done(CacheEntry::run(entry, input));
    }
    let as_action = if result.is_instance_of::<pyo3::types::PyBool>() { None } else { result.extract::<i64>().ok() };
    match as_action.and_then(Action::from_int) {
        Some(action @ (Action::Skip | Action::SkipRecursive)) => {
            state.set_action(py, action);
            if action == Action::Skip { Decision::Default } else { Decision::DefaultUnobserved }
        }
        _ => Decision::Done(Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "the fastdynamo callback must return None, SKIP, SKIP_RECURSIVE or a CacheEntry, not {}",
            result.get_type().name().map_or_else(|_| "?".to_owned(), |n| n.to_string())
        )))),
    }
}

/// One warning per code object when it reaches the recompile limit, naming the function
/// and the guard that failed last.
#[cold]
fn warn_limit(frame: FrameRef<'_>, state: &CodeState, input: &GuardInput<'_, '_>) -> PyResult<()> {
    let py = frame.py();
    let code = frame.code();
    let name = code.getattr("co_qualname").map_or_else(|_| "?".to_owned(), |n| n.to_string());
    let file = code.getattr("co_filename").map_or_else(|_| "?".to_owned(), |n| n.to_string());
    let line = code.getattr("co_firstlineno").map_or_else(|_| "?".to_owned(), |n| n.to_string());
    let reason = {
        let _suspended = callback::suspend();
        state
            .entry(py, 0)
            .and_then(|entry| entry.bind(py).get().guard_set(py).get().failure_reason(input))
            .unwrap_or_else(|| "unknown".to_owned())
    };
    let message = format!(
        "fastdynamo: {name} ({file}:{line}) reached the recompile limit ({}); it now runs \
         eagerly when no cached entry matches. Last failing guard: {reason}",
        cache::recompile_limit()
    );
    let category = py.get_type::<crate::RecompileLimitWarning>();
    let _suspended = callback::suspend(); // `warnings` runs Python: not ours to intercept
    PyErr::warn(py, &category, &std::ffi::CString::new(message).unwrap_or_default(), 1)
}

//! A compiled call made while torch.compile intercepts this thread's frames (a
//! `fastdynamo.compile`d function called from a `torch.compile`d one) turns torch.compile's
//! per-thread callback off for its duration and back on after, as the Python region does
//! (`api._CompiledRegion`): each compiler owns the frames of its own region, and torch.compile
//! must not capture our guards' Python, our transformed code or our graph.

use crate::ffi::hook;
use pyo3::prelude::*;
use std::sync::OnceLock;

/// `torch._C._dynamo.eval_frame`'s callback getter and setter, when this torch has them.
struct Hooks {
    get: Py<PyAny>,
    set: Py<PyAny>,
}

static HOOKS: OnceLock<Option<Hooks>> = OnceLock::new();

fn load(py: Python<'_>) -> Option<Hooks> {
    let eval_frame = py.import("torch._C._dynamo.eval_frame").ok()?;
    let get = eval_frame.getattr("get_eval_frame_callback").ok()?.unbind();
    let set = eval_frame.getattr("set_eval_frame").ok()?.unbind();
    Some(Hooks { get, set })
}

/// While alive, torch.compile's callback on this thread is off; dropping it puts the
/// callback that was there back.
pub struct TorchCompilePaused<'py> {
    py: Python<'py>,
    prior: Option<Bound<'py, PyAny>>,
}

impl<'py> TorchCompilePaused<'py> {
    /// Turns torch.compile's callback off when it is on here. Without another evaluator
    /// installed it cannot be (torch's is installed while any thread has a callback), so
    /// the common case costs no call into torch.
    pub fn enter(py: Python<'py>) -> PyResult<Self> {
        let mut paused = Self { py, prior: None };
        if hook::no_other_evaluator(py) {
            return Ok(paused);
        }
        let Some(hooks) = HOOKS.get_or_init(|| load(py)) else { return Ok(paused) };
        let current = hooks.get.bind(py).call0()?;
        if !current.is_none() {
            paused.prior = Some(hooks.set.bind(py).call1((py.None(),))?);
        }
        Ok(paused)
    }
}

impl Drop for TorchCompilePaused<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(prior) = self.prior.take() {
            restore(self.py, prior);
        }
    }
}

#[cold]
fn restore(py: Python<'_>, prior: Bound<'_, PyAny>) {
    let Some(Some(hooks)) = HOOKS.get() else { return };
    // The callback was torch's own a moment ago, so setting it back does not fail; if it
    // did, there is no caller to tell but the unraisable hook.
    if let Err(err) = hooks.set.bind(py).call1((prior,)) {
        err.write_unraisable(py, None);
    }
}

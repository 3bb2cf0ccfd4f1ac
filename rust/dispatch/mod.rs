//! The object `fastdynamo.compile` returns: a vectorcall callable that checks the
//! function's cache entries against the call's arguments before any frame exists.
//!
//! On a call it binds the arguments to the code's argument slots ([`binding`]), looks the
//! entries up in MRU order with the guards reading those slots, and on a hit calls the
//! entry's compiled graph directly ([`direct`]) when the entry has a direct call, or runs
//! its transformed code with the thread's callback set. Everything else (no entry, a
//! miss, a call it cannot bind, a code marked SKIP, a suspended thread) is the normal
//! path: the thread's callback is set, the function is called, and the frame hook does
//! what it always does (compile on a miss, run as Python...).

mod binding;
mod direct;
mod module;
mod torch_compile;

pub use direct::DirectCall;

use crate::cache::{Action, CacheEntry};
use crate::callback;
use crate::ffi::code_extra;
use crate::ffi::hook;
use crate::ffi::function::FunctionRef;
use crate::ffi::object::{vectorcall_arguments, ArgumentBuffer, Arguments};
use crate::ffi::vectorcall::{self, VectorcallSlot, VectorcallTarget};
use crate::ffi::GilCell;
use crate::frame_info::GuardInput;
use binding::{bind, Binding, Parameters};
use direct::Outcome;
use module::ModuleCall;
use torch_compile::TorchCompilePaused;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFunction, PyTuple};
use pyo3::{intern, Borrowed, PyTraverseError, PyVisit};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What a dispatcher calls.
enum Target {
    Function(Py<PyFunction>),
    /// An `nn.Module`: its class's `forward` with the module first, when calling the module
    /// is just that ([`ModuleCall::plain_forward`]).
    Module { module: Py<PyAny>, call: ModuleCall },
}

/// What binding needs of the code last seen: kept while the function and its code stay.
struct CodeCache {
    function: Py<PyAny>,
    code: Py<PyAny>,
    /// The function's `__builtins__` (the frame's `f_builtins`).
    builtins: Py<PyAny>,
    parameters: Parameters,
}

impl CodeCache {
    fn is_for(&self, function: &Bound<'_, PyFunction>, code: Borrowed<'_, '_, PyAny>) -> bool {
        self.function.as_ptr() == function.as_ptr() && self.code.as_ptr() == code.as_ptr()
    }
}

/// A compiled function or module.
#[pyclass(frozen, dict, weakref, module = "fastdynamo._native")]
pub struct Dispatcher {
    vectorcall: VectorcallSlot,
    target: Target,
    callback: Py<PyAny>,
    code: GilCell<Option<Arc<CodeCache>>>,
    direct_calls: AtomicU64,
    code_calls: AtomicU64,
    frame_calls: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

#[pymethods]
impl Dispatcher {
    /// A dispatcher over a Python function, compiling with `callback` (the frame callback).
    #[staticmethod]
    fn over_function<'py>(function: &Bound<'py, PyAny>, callback: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Dispatcher>> {
        let function = function.cast::<PyFunction>()?.clone().unbind();
        Self::create(Target::Function(function), callback)
    }

    /// A dispatcher over an `nn.Module`: calls it, or its class's `forward` directly when
    /// the module has no hooks.
    #[staticmethod]
    fn over_module<'py>(module: &Bound<'py, PyAny>, callback: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Dispatcher>> {
        let call = ModuleCall::load(module.py())?;
        Self::create(Target::Module { module: module.clone().unbind(), call }, callback)
    }

    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(slf: &Bound<'py, Self>, args: &Bound<'py, PyTuple>, kwargs: Option<&Bound<'py, PyDict>>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let mut values: Vec<Bound<'py, PyAny>> = args.iter().collect();
        let mut names = Vec::new();
        for (name, value) in kwargs.into_iter().flat_map(PyDictMethods::iter) {
            names.push(name);
            values.push(value);
        }
        let mut buffer = ArgumentBuffer::with_capacity(values.len());
        for value in &values {
            buffer.push(value.as_borrowed());
        }
        let kwnames = (!names.is_empty()).then(|| PyTuple::new(py, names)).transpose()?;
        slf.get().dispatch(py, buffer.arguments(), args.len(), kwnames.as_ref().map(Bound::as_borrowed))
    }

    /// Bound to an instance like a function: `obj.method(...)` passes `obj` first.
    fn __get__<'py>(slf: Bound<'py, Self>, instance: Option<Bound<'py, PyAny>>, owner: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        let _ = owner;
        match instance {
            Some(instance) if !instance.is_none() => {
                slf.py().import(intern!(slf.py(), "types"))?.getattr(intern!(slf.py(), "MethodType"))?.call1((slf, instance))
            }
            _ => Ok(slf.into_any()),
        }
    }

    /// Calls that called an entry's compiled graph directly.
    #[getter]
    fn direct_calls(&self) -> u64 {
        self.direct_calls.load(Ordering::Relaxed)
    }

    /// Calls that ran an entry's transformed code (no direct call, or it could not serve).
    #[getter]
    fn code_calls(&self) -> u64 {
        self.code_calls.load(Ordering::Relaxed)
    }

    /// Calls that went the normal way: the function (or module) called with the hook on.
    #[getter]
    fn frame_calls(&self) -> u64 {
        self.frame_calls.load(Ordering::Relaxed)
    }

    /// The function or module called.
    #[getter]
    fn target(&self, py: Python<'_>) -> Py<PyAny> {
        match &self.target {
            Target::Function(function) => function.clone_ref(py).into_any(),
            Target::Module { module, .. } => module.clone_ref(py),
        }
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        match &self.target {
            Target::Function(function) => visit.call(function)?,
            Target::Module { module, .. } => visit.call(module)?,
        }
        visit.call(&self.callback)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let target = self.target(py);
        let name = target.bind(py).getattr("__qualname__").or_else(|_| target.bind(py).get_type().getattr("__qualname__"));
        format!("<fastdynamo compiled {}>", name.map_or_else(|_| "?".to_owned(), |n| n.to_string()))
    }
}

impl VectorcallTarget for Dispatcher {
    fn vectorcall<'py>(
        callable: Borrowed<'_, 'py, PyAny>,
        args: Arguments<'_>,
        positional: usize,
        kwnames: Option<Borrowed<'_, 'py, PyTuple>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let dispatcher = callable.cast::<Dispatcher>()?;
        dispatcher.get().dispatch(callable.py(), args, positional, kwnames)
    }
}

impl Dispatcher {
    fn create<'py>(target: Target, callback: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Dispatcher>> {
        let py = callback.py();
        if !callback.is_callable() {
            return Err(pyo3::exceptions::PyTypeError::new_err("a dispatcher's callback must be callable"));
        }
        let dispatcher = Bound::new(
            py,
            Dispatcher {
                vectorcall: VectorcallSlot::new::<Dispatcher>(),
                target,
                callback: callback.clone().unbind(),
                code: GilCell::new(None),
                direct_calls: AtomicU64::new(0),
                code_calls: AtomicU64::new(0),
                frame_calls: AtomicU64::new(0),
            },
        )?;
        vectorcall::enable(
            dispatcher.as_any(),
            &dispatcher.get().vectorcall,
            vectorcall::Binding::LikeFunction,
        )?;
        Ok(dispatcher)
    }

    #[inline]
    fn dispatch<'py>(
        &self,
        py: Python<'py>,
        args: Arguments<'_>,
        positional: usize,
        kwnames: Option<Borrowed<'_, 'py, PyTuple>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // Before anything runs Python (guards, the graph, the frame), and restored last.
        let _torch_compile = TorchCompilePaused::enter(py)?;
        match &self.target {
            Target::Function(function) => {
                let function = function.bind(py);
                if let Some(result) = self.call_compiled(function, args, positional, kwnames) {
                    return result;
                }
                self.call_frame(function.as_any(), args, positional, kwnames)
            }
            Target::Module { module, call } => {
                let module = module.bind(py);
                if let Some(forward) = call.plain_forward(module) {
                    let mut with_self = ArgumentBuffer::with_capacity(args.len() + 1);
                    with_self.push(module.as_borrowed());
                    with_self.extend(args);
                    if let Some(result) = self.call_compiled(&forward, with_self.arguments(), positional + 1, kwnames) {
                        return result;
                    }
                }
                self.call_frame(module, args, positional, kwnames)
            }
        }
    }

    /// The normal path: `target(*args, **kwargs)` with this dispatcher's callback set on
    /// the thread, so that the frame hook compiles or runs the frame.
    fn call_frame<'py>(
        &self,
        target: &Bound<'py, PyAny>,
        args: Arguments<'_>,
        positional: usize,
        kwnames: Option<Borrowed<'_, 'py, PyTuple>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        bump(&self.frame_calls);
        let kwnames = kwnames.map(Borrowed::to_owned);
        debug_assert_eq!(args.len(), positional + kwnames.as_ref().map_or(0, PyTupleMethods::len));
        self.with_callback(target.py(), || vectorcall_arguments(target, args, kwnames.as_ref()))
    }

    /// A cache hit served without the function's frame, or None for the normal path.
    #[inline]
    fn call_compiled<'py>(
        &self,
        function: &Bound<'py, PyFunction>,
        args: Arguments<'_>,
        positional: usize,
        kwnames: Option<Borrowed<'_, 'py, PyTuple>>,
    ) -> Option<PyResult<Bound<'py, PyAny>>> {
        let py = function.py();
        // Inside the runtime's own Python the frame runs as Python; otherwise the thread
        // stays suspended until the guards have run (they may run the runtime's Python).
        let suspended = callback::suspend_unless_suspended()?;
        if hook::thread_is_tracing(py) {
            return None; // a debugger or coverage: the hook runs the frame as Python
        }
        let function_ref = FunctionRef::new(function.as_borrowed());
        let code = function_ref.code()?;
        let state = code_extra::state(code)?;
        if !matches!(state.action(py), Action::Default | Action::RunOnly) || state.entry_count(py) == 0 {
            return None;
        }
        // The cache of the last (function, code) pair, borrowed for the call (no reference
        // count touched); a call made meanwhile with another pair builds its own.
        let borrowed = self.code.try_borrow(py).filter(|c| c.as_deref().is_some_and(|c| c.is_for(function, code)));
        let fresh;
        let cache: &CodeCache = match borrowed.as_deref().and_then(Option::as_deref) {
            Some(cache) => cache,
            None => {
                fresh = self.code_cache(function, &code.to_owned()).ok()?;
                &fresh
            }
        };
        let binding = bind(&cache.parameters, function_ref, args, positional, kwnames)?;
        let gathered;
        let slots = match &binding {
            Binding::InPlace(arguments) => *arguments,
            Binding::Gathered(values) => {
                let mut buffer = ArgumentBuffer::with_capacity(values.len());
                for value in values {
                    buffer.push(value.as_borrowed());
                }
                gathered = buffer;
                gathered.arguments()
            }
        };
        let globals = function_ref.globals()?;
        let input = GuardInput::from_arguments(function.as_any().as_borrowed(), slots, globals, cache.builtins.bind_borrowed(py), function_ref.closure());
        let entry = crate::eval_frame::lookup_suspended(state, &input, &suspended)?;
        drop(suspended); // the graph or the transformed code runs as the frame would
        Some(self.run_entry(&entry, &input))
    }

    /// Runs a hit: the graph directly when the entry allows, else its transformed code.
    /// The direct call's success is inlined into the dispatch; everything else is not.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn run_entry<'py>(&self, entry: &Bound<'py, CacheEntry>, input: &GuardInput<'_, 'py>) -> PyResult<Bound<'py, PyAny>> {
        let py = input.py();
        let outcome = match entry.get().direct_call(py) {
            Some(direct) => match direct.get().call(input) {
                Outcome::Done(result) => {
                    bump(&self.direct_calls);
                    return result;
                }
                outcome => Some((direct.get(), outcome)),
            },
            None => None,
        };
        self.run_transformed(entry, input, outcome)
    }

    /// A hit the direct call did not serve (none, an unreadable input, or the graph
    /// raised): the transformed code runs, unless the error is the frame's.
    #[inline(never)]
    fn run_transformed<'py>(
        &self,
        entry: &Bound<'py, CacheEntry>,
        input: &GuardInput<'_, 'py>,
        outcome: Option<(&DirectCall, Outcome<'py>)>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = input.py();
        match outcome {
            // The transformed code has no handler for it: the error is the frame's.
            Some((direct, Outcome::GraphFailed(err))) if !direct.has_fallback() => return Err(err),
            // Its handler restores the grad mode and reruns the frame as Python; the
            // transformed code gets there by calling the graph again (it cannot write
            // to its inputs or draw random numbers, or it would have no fallback).
            Some((direct, Outcome::GraphFailed(_))) => set_grad_enabled(py, direct.grad_mode())?,
            Some((_, Outcome::Unreadable | Outcome::Done(_))) | None => {}
        }
        bump(&self.code_calls);
        self.with_callback(py, || CacheEntry::run(entry, input))
    }

    /// Runs `work` with this dispatcher's callback set on the thread, restoring the prior one.
    fn with_callback<R>(&self, py: Python<'_>, work: impl FnOnce() -> PyResult<R>) -> PyResult<R> {
        let prior = callback::set_callback(py, self.callback.bind(py))?;
        let _restore = RestoreCallback { py, prior: Some(prior) };
        work()
    }

    /// Parameters and builtins for `function` running `code`, read once per pair.
    fn code_cache(&self, function: &Bound<'_, PyFunction>, code: &Bound<'_, PyAny>) -> PyResult<Arc<CodeCache>> {
        let py = function.py();
        if let Some(cached) = self.code.try_borrow(py).and_then(|c| c.clone()) {
            if cached.is_for(function, code.as_borrowed()) {
                return Ok(cached);
            }
        }
        let fresh = Arc::new(CodeCache {
            function: function.clone().into_any().unbind(),
            code: code.clone().unbind(),
            builtins: function.getattr(intern!(py, "__builtins__"))?.unbind(),
            parameters: Parameters::of(code)?,
        });
        if let Some(mut slot) = self.code.try_borrow_mut(py) {
            *slot = Some(Arc::clone(&fresh));
        }
        Ok(fresh)
    }
}

/// Puts the thread's prior callback back, also when the call unwinds.
struct RestoreCallback<'py> {
    py: Python<'py>,
    prior: Option<Py<PyAny>>,
}

impl Drop for RestoreCallback<'_> {
    fn drop(&mut self) {
        if let Some(prior) = self.prior.take() {
            // The prior value was accepted before, so setting it back cannot fail.
            let _ = callback::set_callback(self.py, prior.bind(self.py));
        }
    }
}

#[cold]
fn set_grad_enabled(py: Python<'_>, mode: bool) -> PyResult<()> {
    py.import(intern!(py, "torch"))?.getattr(intern!(py, "_C"))?.getattr(intern!(py, "_set_grad_enabled"))?.call1((mode,))?;
    Ok(())
}

/// Registers the dispatcher classes on the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Dispatcher>()?;
    module.add_class::<DirectCall>()?;
    Ok(())
}

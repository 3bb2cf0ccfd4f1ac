//! Per-code state (action, MRU cache entries, limit bookkeeping) and the entries
//! themselves: a guard set, a transformed code object and counters.

use crate::dispatch::DirectCall;
use crate::ffi::code_extra;
use crate::ffi::object::{vectorcall, vectorcall_arguments};
use crate::ffi::GilCell;
use crate::frame_info::{CodeParameters, GuardInput};
use crate::guards::GuardSet;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use pyo3::{intern, Borrowed};
use std::cell::Cell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// What the hook does with frames of one code object.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Action {
    /// Look up the cache; compile on a miss if the thread's callback allows.
    Default = 0,
    /// Never intercept this code.
    Skip = 1,
    /// Never intercept this code nor anything it calls.
    SkipRecursive = 2,
    /// Look up the cache, never compile (set when the recompile limit is reached).
    RunOnly = 3,
    /// The code of `fastdynamo.compile`'s wrapper: entered while its region is already
    /// this thread's (a compiled function calling itself or another of the same
    /// `compile`), the function it wraps is called directly, so that a compiled call costs
    /// the recursion depth (and C stack) of an eager one, not three frames.
    RegionWrapper = 4,
}

impl Action {
    pub fn from_int(value: i64) -> Option<Action> {
        match value {
            0 => Some(Action::Default),
            1 => Some(Action::Skip),
            2 => Some(Action::SkipRecursive),
            3 => Some(Action::RunOnly),
            4 => Some(Action::RegionWrapper),
            _ => None,
        }
    }
}

pub const DEFAULT_RECOMPILE_LIMIT: usize = 8;
static RECOMPILE_LIMIT: AtomicUsize = AtomicUsize::new(DEFAULT_RECOMPILE_LIMIT);

pub fn recompile_limit() -> usize {
    RECOMPILE_LIMIT.load(Ordering::Relaxed)
}

pub fn set_recompile_limit(limit: usize) {
    RECOMPILE_LIMIT.store(limit, Ordering::Relaxed);
}

/// Addresses of the code objects that carry state, for `reset()`. Kept exact by
/// `code_extra::free_code_state`.
static REGISTRY: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

pub fn register(code_address: usize) {
    REGISTRY.lock().unwrap().get_or_insert_with(HashSet::new).insert(code_address);
}

pub fn unregister(code_address: usize) {
    if let Some(set) = REGISTRY.lock().unwrap().as_mut() {
        set.remove(&code_address);
    }
}

/// State attached to one code object through `co_extra`.
pub struct CodeState {
    code_address: usize,
    /// Plain cells: CodeState is only reached through `co_extra` with the GIL held.
    action: Cell<Action>,
    /// Most recently used first.
    entries: GilCell<Vec<Py<CacheEntry>>>,
    /// Whether this code is some entry's transformed code (stays skipped across reset).
    transformed: Cell<bool>,
    limit_warned: Cell<bool>,
    /// Bumped by every change to `entries`, so that a lookup whose guards ran Python (and
    /// may have let another thread push, promote or reset entries) knows its index is stale.
    generation: Cell<u64>,
}

impl CodeState {
    pub fn new(code_address: usize) -> Self {
        Self {
            code_address,
            action: Cell::new(Action::Default),
            entries: GilCell::new(Vec::new()),
            transformed: Cell::new(false),
            limit_warned: Cell::new(false),
            generation: Cell::new(0),
        }
    }

    pub fn code_address(&self) -> usize {
        self.code_address
    }

    #[inline]
    pub fn action(&self, _py: Python<'_>) -> Action {
        self.action.get()
    }

    pub fn set_action(&self, _py: Python<'_>, action: Action) {
        self.action.set(action);
    }

    pub fn mark_transformed(&self, py: Python<'_>) {
        self.transformed.set(true);
        self.set_action(py, Action::Skip);
    }

    pub fn entry_count(&self, py: Python<'_>) -> usize {
        self.entries.try_borrow(py).map_or(0, |e| e.len())
    }

    /// The entry at `index` in MRU order. Borrows only for the copy, so that guard
    /// evaluation (which may run Python and switch threads) never holds the list.
    pub fn entry(&self, py: Python<'_>, index: usize) -> Option<Py<CacheEntry>> {
        self.entries.try_borrow(py)?.get(index).map(|e| e.clone_ref(py))
    }

    pub fn entries(&self, py: Python<'_>) -> Vec<Py<CacheEntry>> {
        self.entries
            .try_borrow(py)
            .map(|e| e.iter().map(|x| x.clone_ref(py)).collect())
            .unwrap_or_default()
    }

    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.get()
    }

    fn changed(&self) {
        self.generation.set(self.generation.get().wrapping_add(1));
    }

    /// Moves the entry at `index` to the front (most recently used). Only valid while the
    /// generation is the one `index` was read under.
    pub fn touch(&self, py: Python<'_>, index: usize) {
        if index == 0 {
            return;
        }
        if let Some(mut entries) = self.entries.try_borrow_mut(py) {
            if index < entries.len() {
                let entry = entries.remove(index);
                entries.insert(0, entry);
                self.changed();
            }
        }
    }

    /// Moves `entry` to the front if it is still in the list (found by identity).
    pub fn touch_entry(&self, py: Python<'_>, entry: &Bound<'_, CacheEntry>) {
        let position = self.position(py, entry);
        if let Some(index) = position {
            self.touch(py, index);
        }
    }

    pub fn position(&self, py: Python<'_>, entry: &Bound<'_, CacheEntry>) -> Option<usize> {
        self.entries.try_borrow(py)?.iter().position(|e| e.as_ptr() == entry.as_ptr())
    }

    pub fn push_front(&self, py: Python<'_>, entry: Py<CacheEntry>) {
        if let Some(mut entries) = self.entries.try_borrow_mut(py) {
            entries.insert(0, entry);
            self.changed();
        }
    }

    /// Adds `entry` at the front unless it is already in the list or the list is at the
    /// recompile limit; returns whether the entry is in the list now. The compile callback
    /// publishes its entry this way before releasing its lock, so that a thread that
    /// missed meanwhile and waits for that lock finds the entry instead of compiling again.
    pub fn publish(&self, py: Python<'_>, entry: &Bound<'_, CacheEntry>) -> bool {
        if self.position(py, entry).is_some() {
            return true;
        }
        if self.entry_count(py) >= recompile_limit() {
            return false;
        }
        self.push_front(py, entry.clone().unbind());
        true
    }

    /// Returns true the first time it is called after a reset.
    pub fn take_limit_warning(&self, _py: Python<'_>) -> bool {
        !self.limit_warned.replace(true)
    }

    fn take_entries(&self, py: Python<'_>) -> Vec<Py<CacheEntry>> {
        self.changed();
        self.entries.try_borrow_mut(py).map(|mut e| std::mem::take(&mut *e)).unwrap_or_default()
    }

    /// Releases the entries now (the code object is being freed).
    pub fn release(self, py: Python<'_>) {
        for entry in self.take_entries(py) {
            entry.drop_ref(py);
        }
    }

    /// Empties the state; the removed entries are returned so the caller can drop them
    /// once no other state is being walked (dropping may free other code objects).
    fn clear(&self, py: Python<'_>) -> Vec<Py<CacheEntry>> {
        self.set_action(py, if self.transformed.get() { Action::Skip } else { Action::Default });
        self.limit_warned.set(false);
        self.take_entries(py)
    }
}

/// Drops every cache entry and skip mark (`fastdynamo.reset()`).
pub fn reset_all(py: Python<'_>) {
    let codes: Vec<usize> = REGISTRY.lock().unwrap().iter().flatten().copied().collect();
    let mut dropped = Vec::new();
    for address in codes {
        if let Some(state) = code_extra::state_at(py, address) {
            dropped.extend(state.clear(py));
        }
    }
    drop(dropped);
}

/// How to pass a frame's arguments to a function with the same signature.
struct Signature {
    parameters: CodeParameters,
    /// Names of the keyword-only parameters, as vectorcall's `kwnames`.
    keyword_names: Py<PyTuple>,
}

/// The function built from an entry's code for the last user function seen (its globals
/// and closure). The user's function is held weakly: when it dies, a weakref callback
/// drops the built function, so the entry never keeps a closure's cells (large tensors),
/// or the globals, alive (entries live in `co_extra`, which the GC cannot see).
struct FunctionCache {
    /// Address of the user's function; valid while `owner_ref` is, since the callback
    /// clears this cache before that memory can be reused.
    owner: usize,
    /// A weakref to the user's function whose callback is a [`ForgetFunction`].
    _owner_ref: Py<PyAny>,
    function: Py<PyAny>,
}

/// The weakref callback that empties an entry's function cache when the user's function
/// it was built for dies.
#[pyclass(frozen, module = "fastdynamo._native")]
struct ForgetFunction {
    /// A weakref to the entry (the entry holds this callback through its cache).
    entry: Py<PyAny>,
}

#[pymethods]
impl ForgetFunction {
    fn __call__(&self, py: Python<'_>, _dead: &Bound<'_, PyAny>) {
        use pyo3::types::PyWeakrefMethods;
        let Ok(reference) = self.entry.bind(py).cast::<pyo3::types::PyWeakrefReference>() else { return };
        if let Some(entry) = reference.upgrade() {
            if let Ok(entry) = entry.cast::<CacheEntry>() {
                let stale = entry.get().function.try_borrow_mut(py).and_then(|mut cache| cache.take());
                drop(stale); // may run Python (the closure's contents): after the borrow ends
            }
        }
    }
}

/// One compiled version of a code object: run `code` when `guards` pass.
#[pyclass(frozen, weakref, module = "fastdynamo._native")]
pub struct CacheEntry {
    guards: Py<GuardSet>,
    code: Py<PyAny>,
    signature: Signature,
    function: GilCell<Option<FunctionCache>>,
    /// The compiled graph called without the transformed code (`rust/dispatch`), when the
    /// frame's result is the graph's output.
    direct: Option<Py<DirectCall>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[pymethods]
impl CacheEntry {
    /// `CacheEntry(guards, code, direct=None)`: `code` is run, as a function with the
    /// frame's globals and closure, with the frame's arguments, whenever `guards` pass;
    /// a dispatcher calls `direct` instead when given.
    #[new]
    #[pyo3(signature = (guards, code, direct=None))]
    fn py_new(py: Python<'_>, guards: Py<GuardSet>, code: Bound<'_, PyAny>, direct: Option<Py<DirectCall>>) -> PyResult<Self> {
        if !code.is_instance(&py.import("types")?.getattr("CodeType")?)? {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "CacheEntry code must be a code object, not {}",
                code.get_type().name()?
            )));
        }
        let parameters = CodeParameters::of(&code)?;
        let (start, end) = (parameters.positional, parameters.positional + parameters.keyword_only);
        let keyword_names = code
            .getattr("co_varnames")?
            .get_item(pyo3::types::PySlice::new(py, start as isize, end as isize, 1))?
            .cast_into::<PyTuple>()?
            .unbind();
        code_extra::state_or_attach(code.as_borrowed())?.mark_transformed(py);
        Ok(Self {
            guards,
            code: code.unbind(),
            signature: Signature { parameters, keyword_names },
            function: GilCell::new(None),
            direct,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        })
    }

    #[getter]
    fn guards(&self, py: Python<'_>) -> Py<GuardSet> {
        self.guards.clone_ref(py)
    }

    #[getter]
    fn code(&self, py: Python<'_>) -> Py<PyAny> {
        self.code.clone_ref(py)
    }

    /// The direct call of the compiled graph, or None.
    #[getter]
    fn direct(&self, py: Python<'_>) -> Option<Py<DirectCall>> {
        self.direct.as_ref().map(|d| d.clone_ref(py))
    }

    /// Calls that ran this entry.
    #[getter]
    fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Lookups in which this entry's guards failed.
    #[getter]
    fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let name = self.code.bind(py).getattr("co_name").map_or_else(|_| "?".into(), |n| n.to_string());
        format!("<CacheEntry {name} hits={} misses={}>", self.hits(), self.misses())
    }
}

impl CacheEntry {
    pub fn guard_set<'py>(&self, py: Python<'py>) -> &Bound<'py, GuardSet> {
        self.guards.bind(py)
    }

    pub fn direct_call<'py>(&self, py: Python<'py>) -> Option<&Bound<'py, DirectCall>> {
        self.direct.as_ref().map(|d| d.bind(py))
    }

    /// Relaxed load-then-store: counters are only touched with the GIL held.
    pub fn count_hit(&self) {
        self.hits.store(self.hits.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    pub fn count_miss(&self) {
        self.misses.store(self.misses.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Runs the transformed code with the frame's arguments.
    pub fn run<'py>(entry: &Bound<'py, CacheEntry>, input: &GuardInput<'_, 'py>) -> PyResult<Bound<'py, PyAny>> {
        let py = input.py();
        let this = entry.get();
        let function = this.function_for(entry, input)?;
        let sig = &this.signature.parameters;
        let keyword_names = this.signature.keyword_names.bind(py);
        let fixed = sig.positional + sig.keyword_only;
        let names = (sig.keyword_only > 0).then_some(keyword_names);
        if !sig.varargs && !sig.varkw {
            if let Some(arguments) = input.frame_arguments(fixed) {
                // The frame's own argument slots, passed without copying.
                return vectorcall_arguments(&function, arguments, names);
            }
        }
        let mut args: Vec<Bound<'py, PyAny>> = Vec::with_capacity(fixed + 4);
        let mut args_after: Vec<Bound<'py, PyAny>> = Vec::new();
        for index in 0..fixed {
            let arg = input.local(index).ok_or_else(|| unset_argument(index))?.to_owned();
            if index < sig.positional { args.push(arg) } else { args_after.push(arg) }
        }
        let mut keyword_names: Vec<Bound<'py, PyAny>> = keyword_names.iter().collect();
        if sig.varargs {
            let extra = input.local(fixed).ok_or_else(|| unset_argument(fixed))?;
            args.extend(extra.cast::<PyTuple>()?.iter());
        }
        if sig.varkw {
            let slot = fixed + usize::from(sig.varargs);
            let kwargs = input.local(slot).ok_or_else(|| unset_argument(slot))?;
            for (key, value) in kwargs.cast::<PyDict>()?.iter() {
                keyword_names.push(key);
                args_after.push(value);
            }
        }
        args.extend(args_after);
        let names = (!keyword_names.is_empty()).then(|| PyTuple::new(py, keyword_names)).transpose()?;
        let borrowed: Vec<Borrowed<'_, 'py, PyAny>> = args.iter().map(Bound::as_borrowed).collect();
        vectorcall(&function, &borrowed, names.as_ref())
    }

    /// The function object for this entry's code with the frame's globals and closure,
    /// cached for the last user function seen (one per entry in the common case).
    fn function_for<'py>(&self, entry: &Bound<'py, CacheEntry>, input: &GuardInput<'_, 'py>) -> PyResult<Bound<'py, PyAny>> {
        let py = input.py();
        let owner = input.function();
        if let (Some(owner), Some(cache)) = (owner, self.function.try_borrow(py)) {
            if let Some(cached) = cache.as_ref() {
                if cached.owner == owner.as_ptr() as usize {
                    return Ok(cached.function.bind(py).clone());
                }
            }
        }
        let code = self.code.bind(py);
        let name = code.getattr(intern!(py, "co_name"))?;
        let closure = input.closure();
        let closure_arg = closure.as_ref().map_or_else(|| py.None().into_bound(py), |c| (*c).to_owned().into_any());
        let function = py
            .import(intern!(py, "types"))?
            .getattr(intern!(py, "FunctionType"))?
            .call1((code, input.globals().to_owned(), name, py.None(), closure_arg))?;
        if let Some(owner) = owner {
            self.remember_function(entry, &owner.to_owned(), &function)?;
        }
        Ok(function)
    }

    fn remember_function(&self, entry: &Bound<'_, CacheEntry>, owner: &Bound<'_, PyAny>, function: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = entry.py();
        let entry_ref = pyo3::types::PyWeakrefReference::new(entry)?;
        let forget = Bound::new(py, ForgetFunction { entry: entry_ref.into_any().unbind() })?;
        let Ok(owner_ref) = pyo3::types::PyWeakrefReference::new_with(owner, forget) else {
            return Ok(()); // an owner without weakref support: not cached
        };
        let replaced = self.function.try_borrow_mut(py).map(|mut cache| {
            cache.replace(FunctionCache {
                owner: owner.as_ptr() as usize,
                _owner_ref: owner_ref.into_any().unbind(),
                function: function.clone().unbind(),
            })
        });
        drop(replaced); // outside the borrow: dropping may run Python
        Ok(())
    }
}

#[cold]
fn unset_argument(index: usize) -> PyErr {
    pyo3::exceptions::PySystemError::new_err(format!("frame argument {index} is unset"))
}

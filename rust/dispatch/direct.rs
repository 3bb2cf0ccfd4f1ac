//! The direct call of a cache entry: for a frame captured whole into one graph whose
//! result is the graph's output (no side effects to replay), the dispatcher calls the
//! compiled graph itself with the graph inputs read from the bound arguments, instead of
//! running the transformed code.

use crate::ffi::object::{vectorcall_arguments, ArgumentBuffer, Arguments};
use crate::frame_info::GuardInput;
use crate::guards::source::{parse_source, Accessor};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::intern;
use std::sync::atomic::{AtomicU64, Ordering};

/// How one graph input is read: an argument slot, or a path of reads from a root, as the
/// transformed code's loads do (`LOAD_FAST`, `LOAD_ATTR`, `BINARY_SUBSCR`, ...).
enum Input {
    Argument(usize),
    Path(Vec<Accessor>),
}

/// What the transformed code returns from the graph's result.
enum Output {
    /// The callable's result itself (a graph function made to return the frame's result).
    Whole,
    /// `result[i]`.
    Item(usize),
    /// `(result[i], result[j], ...)`, a new tuple.
    Tuple(Vec<usize>),
}

/// What a direct call came to.
pub enum Outcome<'py> {
    /// The frame's result, or an error the transformed code raises the same way.
    Done(PyResult<Bound<'py, PyAny>>),
    /// A graph input could not be read: the transformed code must run (it reads them
    /// again and fails, or succeeds, as Python would).
    Unreadable,
    /// The graph raised: the transformed code's handler decides (its fallback runs the
    /// frame as Python), or, for a graph without a fallback, the error propagates.
    GraphFailed(PyErr),
}

/// A compiled graph and how to call it from a call's arguments.
#[pyclass(frozen, module = "fastdynamo._native")]
pub struct DirectCall {
    graph: Py<PyAny>,
    /// What is called: the graph, or the function of a graph that is a bound method.
    callee: Py<PyAny>,
    /// The bound method's `__self__`, passed first (no method object in between).
    bound_self: Option<Py<PyAny>>,
    inputs: Vec<Input>,
    /// Every input is an argument slot.
    only_arguments: bool,
    /// `n` when the inputs are the first `n` argument slots in order and nothing goes
    /// before them: the call's slots are passed as they are, no buffer filled.
    leading_slots: Option<usize>,
    output: Output,
    fallback: bool,
    grad_mode: bool,
    hits: AtomicU64,
}

#[pymethods]
impl DirectCall {
    /// `DirectCall(graph, inputs, output, fallback, grad_mode)`: `inputs` are source specs
    /// (as guards take them), `output` an index into the graph's result or a tuple of
    /// indices; `fallback` says whether the transformed code reruns the frame as Python
    /// when the graph raises, in `grad_mode` (the frame's guarded grad mode). `output`
    /// None: the graph's result is the frame's result.
    #[new]
    fn py_new(graph: Bound<'_, PyAny>, inputs: &Bound<'_, PyAny>, output: &Bound<'_, PyAny>, fallback: bool, grad_mode: bool) -> PyResult<Self> {
        let mut parsed = Vec::new();
        for spec in inputs.try_iter()? {
            let path = parse_source(&spec?)?;
            let mut steps: Vec<Accessor> = path.steps.into_iter().map(|(accessor, _)| accessor).collect();
            if !steps.first().is_some_and(Accessor::is_root) {
                return Err(crate::errors::Error::BadGuardSpec("a graph input must start at the frame".to_owned()).into());
            }
            parsed.push(match steps.as_slice() {
                [Accessor::Local(index)] => Input::Argument(*index),
                _ => Input::Path(std::mem::take(&mut steps)),
            });
        }
        let output = if output.is_none() {
            Output::Whole
        } else if let Ok(index) = output.extract::<usize>() {
            Output::Item(index)
        } else {
            Output::Tuple(output.extract::<Vec<usize>>()?)
        };
        let (callee, bound_self) = unbind_method(&graph)?;
        let only_arguments = parsed.iter().all(|input| matches!(input, Input::Argument(_)));
        let in_order = parsed.iter().enumerate().all(|(position, input)| matches!(input, Input::Argument(index) if *index == position));
        let leading_slots = (in_order && bound_self.is_none()).then_some(parsed.len());
        Ok(Self {
            graph: graph.unbind(),
            callee,
            bound_self,
            inputs: parsed,
            only_arguments,
            leading_slots,
            output,
            fallback,
            grad_mode,
            hits: AtomicU64::new(0),
        })
    }

    /// The compiled graph.
    #[getter]
    fn graph(&self, py: Python<'_>) -> Py<PyAny> {
        self.graph.clone_ref(py)
    }

    /// Calls served by calling the graph directly.
    #[getter]
    fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Whether the transformed code reruns the frame as Python when the graph raises.
    #[getter]
    fn fallback(&self) -> bool {
        self.fallback
    }

    fn __repr__(&self) -> String {
        format!("<DirectCall inputs={} hits={}>", self.inputs.len(), self.hits())
    }
}

impl DirectCall {
    /// Whether the transformed code catches the graph's errors (and reruns the frame).
    pub fn has_fallback(&self) -> bool {
        self.fallback
    }

    /// The grad mode the transformed code restores before its fallback.
    pub fn grad_mode(&self) -> bool {
        self.grad_mode
    }

    /// Reads the graph inputs, calls the graph and picks the frame's result. The common
    /// case (the inputs are the call's leading slots) is inlined into the dispatch.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    pub fn call<'py>(&self, input: &GuardInput<'_, 'py>) -> Outcome<'py> {
        if let (Some(count), Some(slots)) = (self.leading_slots, input.bound_arguments()) {
            if count <= slots.len() {
                return self.call_with(input.py(), slots.prefix(count));
            }
        }
        self.call_gathered(input)
    }

    /// The other cases: the inputs gathered into a buffer, read through paths if need be.
    #[inline(never)]
    fn call_gathered<'py>(&self, input: &GuardInput<'_, 'py>) -> Outcome<'py> {
        let py = input.py();
        if let (true, Some(slots)) = (self.only_arguments, input.bound_arguments()) {
            // The common case: every input is an argument slot, nothing to read first.
            let mut arguments = ArgumentBuffer::with_capacity(self.inputs.len() + 1);
            if let Some(bound_self) = &self.bound_self {
                arguments.push(bound_self.bind_borrowed(py));
            }
            for graph_input in &self.inputs {
                match graph_input {
                    Input::Argument(index) => match slots.get(py, *index) {
                        Some(value) => arguments.push(value),
                        None => return Outcome::Unreadable,
                    },
                    Input::Path(_) => return Outcome::Unreadable, // (never: only_arguments)
                }
            }
            return self.call_with(py, arguments.arguments());
        }
        // Values read through a path are owned here; arguments are borrowed from the call.
        let mut read_values: Vec<Bound<'py, PyAny>> = Vec::new();
        for graph_input in &self.inputs {
            if let Input::Path(steps) = graph_input {
                match read_path(steps, input) {
                    Some(value) => read_values.push(value),
                    None => return Outcome::Unreadable,
                }
            }
        }
        let mut arguments = ArgumentBuffer::with_capacity(self.inputs.len() + 1);
        if let Some(bound_self) = &self.bound_self {
            arguments.push(bound_self.bind_borrowed(py));
        }
        let mut read_values = read_values.iter();
        let slots = input.bound_arguments();
        for graph_input in &self.inputs {
            let value = match graph_input {
                Input::Argument(index) => match slots {
                    Some(slots) => slots.get(py, *index),
                    None => input.local(*index),
                },
                Input::Path(_) => read_values.next().map(Bound::as_borrowed),
            };
            match value {
                Some(value) => arguments.push(value),
                None => return Outcome::Unreadable,
            }
        }
        self.call_with(py, arguments.arguments())
    }

    /// Calls the graph with its inputs (after `__self__` for a bound method).
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn call_with<'py>(&self, py: Python<'py>, arguments: Arguments<'_>) -> Outcome<'py> {
        let result = match vectorcall_arguments(self.callee.bind(py), arguments, None) {
            Ok(result) => result,
            Err(err) => return Outcome::GraphFailed(err),
        };
        self.hits.store(self.hits() + 1, Ordering::Relaxed);
        match self.output {
            Output::Whole => Outcome::Done(Ok(result)),
            _ => Outcome::Done(self.pick(&result)),
        }
    }

    fn pick<'py>(&self, result: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        match &self.output {
            Output::Whole => Ok(result.clone()),
            Output::Item(index) => item(result, *index),
            Output::Tuple(indices) => {
                let items = indices.iter().map(|&i| item(result, i)).collect::<PyResult<Vec<_>>>()?;
                Ok(PyTuple::new(result.py(), items)?.into_any())
            }
        }
    }
}

/// `result[index]`, as `BINARY_SUBSCR` does it (the exact-tuple case without a call).
fn item<'py>(result: &Bound<'py, PyAny>, index: usize) -> PyResult<Bound<'py, PyAny>> {
    match result.cast_exact::<PyTuple>() {
        Ok(tuple) if index < tuple.len() => tuple.get_item(index),
        _ => result.get_item(index),
    }
}

/// `(method.__func__, Some(method.__self__))` for an exact bound method, else `(graph,
/// None)`: calling the function with `__self__` first is what calling the method does.
fn unbind_method(graph: &Bound<'_, PyAny>) -> PyResult<(Py<PyAny>, Option<Py<PyAny>>)> {
    let py = graph.py();
    let method_type = py.import(intern!(py, "types"))?.getattr(intern!(py, "MethodType"))?;
    if !graph.get_type().is(&method_type) {
        return Ok((graph.clone().unbind(), None));
    }
    Ok((graph.getattr(intern!(py, "__func__"))?.unbind(), Some(graph.getattr(intern!(py, "__self__"))?.unbind())))
}

fn read_path<'py>(steps: &[Accessor], input: &GuardInput<'_, 'py>) -> Option<Bound<'py, PyAny>> {
    let (root, rest) = steps.split_first()?;
    let mut value = root.read_root(input)?;
    for step in rest {
        value = step.read_child(&value)?;
    }
    Some(value)
}

//! Guard sets: a tree compiled once from a Python spec, checked on every call.
//!
//! The spec is a list of `(source, check)` tuples (see `python/fastdynamo/guards`).
//! Guards on the same source share one tree node, so each value is read once per check;
//! a node's checks run before its children are read (a type check guards the attribute
//! reads below it). The fast path stops at the first failure and allocates nothing; the
//! verbose path returns the first failure as text. Relations between values (two
//! sources are, or are not, one object: `relation.rs`) run after the tree.

mod check;
mod relation;
mod shape;
mod shape_expr;
pub(crate) mod source;
mod tensor;
pub(crate) mod tensor_layout;
mod torch_tls;
mod versioned;

use crate::errors::Error;
use crate::frame_info::{Frame, GuardInput};
use check::{Check, ExpectedModes, StateCheck, TorchState};
use std::sync::Arc;
use tensor::TensorCheck;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use relation::{Relation, RELATION_SOURCE};
use source::{parse_source, Accessor};
use versioned::VersionedRoots;

struct Node {
    accessor: Accessor,
    key: String,
    /// The source as Python text, for failure reasons.
    name: String,
    checks: Vec<Check>,
    children: Vec<Node>,
}

impl Node {
    fn child_for<'a>(children: &'a mut Vec<Node>, accessor: Accessor, name: String, py: Python<'_>) -> &'a mut Node {
        let key = accessor.key(py);
        if let Some(position) = children.iter().position(|c| c.key == key) {
            return &mut children[position];
        }
        children.push(Node { accessor, key, name, checks: Vec::new(), children: Vec::new() });
        children.last_mut().expect("just pushed")
    }

    fn run(&self, value: &Bound<'_, PyAny>, reason: &mut Option<&mut String>) -> bool {
        for check in &self.checks {
            if !check.run(value, &self.name, reason.as_deref_mut()) {
                return false;
            }
        }
        self.children.iter().all(|child| match child.accessor.read_child(value) {
            Some(child_value) => child.run(&child_value, reason),
            None => unreadable(&child.name, reason),
        })
    }
}

#[cold]
fn unreadable(name: &str, reason: &mut Option<&mut String>) -> bool {
    if let Some(reason) = reason.as_deref_mut() {
        reason.push_str(&format!("{name} could not be read"));
    }
    false
}

/// A compiled set of guards.
#[pyclass(frozen, module = "fastdynamo._native")]
pub struct GuardSet {
    roots: Vec<Node>,
    state_checks: Vec<StateCheck>,
    relations: Vec<Relation>,
    torch: Option<TorchState>,
    /// Relations between symbolic sizes (dynamic entries), checked after the tree.
    shapes: Option<shape::ShapeGuards>,
    count: usize,
    /// The fast path's order: `(slot, check)` for the checks of roots that are an argument
    /// slot with only tensor checks (checked from the slot in place, nothing else to read),
    /// then the other roots, in spec order: those the globals' or builtins' version tag
    /// answers (`versioned.rs`), then the rest.
    argument_tensors: Vec<(usize, Arc<TensorCheck>)>,
    /// The grad, inference and autocast mode checks as one comparison of their bits, with
    /// the default dtype's C++ code (fast path; None when a mode is checked against both
    /// values), and the indices of the other state checks.
    modes_expected: Option<ExpectedModes>,
    other_state_checks: Vec<usize>,
    versioned_globals: VersionedRoots,
    versioned_builtins: VersionedRoots,
    other_roots: Vec<usize>,
}

impl GuardSet {
    fn compile(py: Python<'_>, specs: &Bound<'_, PyAny>) -> PyResult<GuardSet> {
        let mut roots: Vec<Node> = Vec::new();
        let mut state_checks = Vec::new();
        let mut relations = Vec::new();
        let mut shapes = None;
        let mut count = 0;
        for spec in specs.try_iter()? {
            let spec = spec?;
            let pair = spec.cast::<PyTuple>().ok().filter(|t| t.len() == 2).ok_or_else(|| {
                Error::BadGuardSpec(format!("a guard is a (source, check) pair, got {}", check::short_repr(&spec)))
            })?;
            let (source, check) = (pair.get_item(0)?, pair.get_item(1)?);
            count += 1;
            match source.extract::<(String,)>() {
                Ok((kind,)) if kind == "torch_state" => {
                    state_checks.push(StateCheck::parse(&check)?);
                    continue;
                }
                Ok((kind,)) if kind == RELATION_SOURCE => {
                    relations.push(Relation::parse(&check)?);
                    continue;
                }
                _ => {}
            }
            if shape::is_shape_source(&source) {
                if shapes.is_some() {
                    return Err(Error::BadGuardSpec("more than one shape_env guard".into()).into());
                }
                shapes = Some(shape::ShapeGuards::parse(&check)?);
                continue;
            }
            let check = Check::parse(&check)?;
            let path = parse_source(&source)?;
            let mut steps = path.steps.into_iter();
            let (root_accessor, root_name) = steps.next().expect("a source has a root");
            if !root_accessor.is_root() {
                return Err(Error::BadGuardSpec(format!("source {root_name} does not start at the frame")).into());
            }
            let mut node = Node::child_for(&mut roots, root_accessor, root_name, py);
            for (accessor, name) in steps {
                node = Node::child_for(&mut node.children, accessor, name, py);
            }
            node.checks.push(check);
        }
        let torch = if state_checks.is_empty() { None } else { Some(TorchState::load(py)?) };
        let (modes_expected, other_state_checks) = ExpectedModes::split(&state_checks);
        let (argument_tensors, other_roots) = split_argument_tensors(&roots);
        let (versioned_globals, versioned_builtins, other_roots) = VersionedRoots::split(&roots, &other_roots);
        Ok(GuardSet {
            roots,
            state_checks,
            relations,
            torch,
            shapes,
            count,
            argument_tensors,
            modes_expected,
            other_state_checks,
            versioned_globals,
            versioned_builtins,
            other_roots,
        })
    }

    /// Fast path: true when every guard passes. Stops at the first failure, allocates
    /// nothing, and orders the work by cost (see the fields): the grad, inference and
    /// autocast modes as one comparison, the tensor checks of argument slots in place,
    /// roots a dict's version tag answers, then the rest. Every guard of the set is
    /// still checked; only the order differs from the verbose path's.
    pub fn check(&self, input: &GuardInput<'_, '_>) -> bool {
        if let Some(torch) = &self.torch {
            if !self.state_passes(torch, input.py()) {
                return false;
            }
        }
        let run = |i: usize| {
            let root = &self.roots[i];
            root.accessor.read_root(input).is_some_and(|value| root.run(&value, &mut None))
        };
        self.argument_tensors_pass(input)
            && self.versioned_globals.pass(input.globals(), None, run)
            && self.versioned_builtins.pass(input.builtins(), Some(input.globals()), run)
            && self.other_roots.iter().all(|&i| run(i))
            && self.relations.iter().all(|relation| relation.run(input, None))
            && self.shapes.as_ref().is_none_or(|shapes| shapes.run(input, None))
    }

    /// Verbose path: the first failing guard as text, or None when all pass.
    pub fn failure_reason(&self, input: &GuardInput<'_, '_>) -> Option<String> {
        let mut reason = String::new();
        if self.evaluate_verbose(input, &mut reason) {
            None
        } else {
            Some(reason)
        }
    }

    /// The torch state checks of the fast path: the three modes from one thread-local
    /// read compared at once with the default dtype's code, then the other state checks.
    #[inline]
    fn state_passes(&self, torch: &TorchState, py: Python<'_>) -> bool {
        let modes = torch.modes(); // one thread-local read for all of them
        match (modes, self.modes_expected) {
            (Some(read), Some(expected)) => {
                expected.pass(read, torch) && self.other_state_checks.iter().all(|&i| self.state_checks[i].run(torch, modes, py, None))
            }
            _ => self.state_checks.iter().all(|check| check.run(torch, modes, py, None)),
        }
    }

    /// Every guard in spec order, so the reason is the first failure's.
    fn evaluate_verbose(&self, input: &GuardInput<'_, '_>, reason: &mut String) -> bool {
        let py = input.py();
        let mut reason = Some(reason);
        if let Some(torch) = &self.torch {
            let modes = torch.modes();
            if !self.state_checks.iter().all(|c| c.run(torch, modes, py, reason.as_deref_mut())) {
                return false;
            }
        }
        let tree = self.roots.iter().all(|root| match root.accessor.read_root(input) {
            Some(value) => root.run(&value, &mut reason),
            None => unreadable(&root.name, &mut reason),
        });
        tree && self.relations.iter().all(|relation| relation.run(input, reason.as_deref_mut()))
            && self.shapes.as_ref().is_none_or(|shapes| shapes.run(input, reason))
    }
}

impl GuardSet {
    /// The tensor checks of argument slots, on the values in place (fast path only).
    #[inline]
    fn argument_tensors_pass(&self, input: &GuardInput<'_, '_>) -> bool {
        let py = input.py();
        match input.bound_arguments() {
            Some(slots) => self.argument_tensors.iter().all(|(slot, check)| slots.get(py, *slot).is_some_and(|value| check.passes(&value))),
            None => self.argument_tensors.iter().all(|(slot, check)| input.local(*slot).is_some_and(|value| check.passes(&value))),
        }
    }
}

/// `(slot, check)` for each check of the roots that read an argument slot and only check
/// it as a tensor, and the indices of the other roots.
fn split_argument_tensors(roots: &[Node]) -> (Vec<(usize, Arc<TensorCheck>)>, Vec<usize>) {
    let mut argument_tensors = Vec::new();
    let mut others = Vec::new();
    for (index, root) in roots.iter().enumerate() {
        let only_tensors = root.children.is_empty() && root.checks.iter().all(|c| matches!(c, Check::Tensor(_)));
        match root.accessor {
            Accessor::Local(slot) if only_tensors => {
                for check in &root.checks {
                    if let Check::Tensor(tensor) = check {
                        argument_tensors.push((slot, Arc::clone(tensor)));
                    }
                }
            }
            _ => others.push(index),
        }
    }
    (argument_tensors, others)
}

#[pymethods]
impl GuardSet {
    /// `GuardSet([(source_spec, check_spec), ...])`; raises ValueError naming a bad spec.
    #[new]
    fn py_new(py: Python<'_>, specs: &Bound<'_, PyAny>) -> PyResult<Self> {
        GuardSet::compile(py, specs)
    }

    /// True when every guard passes for `frame` (a `Frame`).
    #[pyo3(name = "check")]
    fn py_check(&self, frame: &Bound<'_, Frame>) -> bool {
        self.check(&GuardInput::from_frame_object(frame))
    }

    /// The first failing guard as text (e.g. `x.size()[0] == 4, got 8`), or None.
    #[pyo3(name = "failure_reason")]
    fn py_failure_reason(&self, frame: &Bound<'_, Frame>) -> Option<String> {
        self.failure_reason(&GuardInput::from_frame_object(frame))
    }

    /// Checks `count` times and returns the total nanoseconds (benches: no per-call
    /// Python overhead in the measurement).
    fn time_check(&self, frame: &Bound<'_, Frame>, count: u64) -> u128 {
        let input = GuardInput::from_frame_object(frame);
        let start = std::time::Instant::now();
        for _ in 0..count {
            std::hint::black_box(self.check(std::hint::black_box(&input)));
        }
        start.elapsed().as_nanos()
    }

    fn __len__(&self) -> usize {
        self.count
    }

    fn __repr__(&self) -> String {
        format!("<GuardSet of {} guards>", self.count)
    }
}

/// Where the tensor fast path reads metadata, or None when it is off (the layout of this
/// torch could not be verified).
#[pyfunction]
#[pyo3(name = "tensor_layout")]
fn tensor_layout_info(py: Python<'_>) -> Option<std::collections::HashMap<&'static str, usize>> {
    tensor_layout::tensor_layout(py).map(|l| {
        std::collections::HashMap::from([
            ("impl_offset", l.impl_offset),
            ("autograd_offset", l.autograd_offset),
            ("ndim_offset", l.ndim_offset),
            ("dtype_offset", l.dtype_offset),
            ("device_offset", l.device_offset),
            ("keyset_offset", l.keyset_offset),
            ("out_of_line", usize::from(l.out_of_line)),
        ])
    })
}

/// Registers the guard classes on the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<GuardSet>()?;
    module.add_function(wrap_pyfunction!(tensor_layout_info, module)?)?;
    Ok(())
}

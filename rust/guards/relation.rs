//! Checks that relate two or more frame values by identity: what a trace relied on when it
//! mutated one object and read another of the same kind ("they are different objects"), or
//! reached one object through two paths ("they are one object").
//!
//! A relation names its sources; each is read from the frame on its own path (the tree
//! reads its values for the per-value checks first, so a relation runs after them).
//! Spec: `(("objects",), ("distinct", (source, source, ...)))` or
//! `(("objects",), ("same", (source, source, ...)))`.

use super::check::short_repr;
use super::source::{bad, parse_source, Accessor, SourcePath};
use crate::errors::Error;
use crate::frame_info::GuardInput;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::fmt::Write;

/// The pseudo-source that marks a relation in a guard spec.
pub const RELATION_SOURCE: &str = "objects";

/// Relations over up to this many sources keep their values on the stack.
const INLINE_VALUES: usize = 8;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RelationKind {
    /// No two of the values are the same object.
    Distinct,
    /// All the values are one object.
    Same,
}

pub struct Relation {
    kind: RelationKind,
    paths: Vec<Path>,
}

/// One source as its accessors, and its readable name for failure reasons.
struct Path {
    steps: Vec<Accessor>,
    name: String,
}

impl Path {
    fn from_source(path: SourcePath) -> Result<Path, String> {
        let name = path.name().to_owned();
        let steps: Vec<Accessor> = path.steps.into_iter().map(|(accessor, _)| accessor).collect();
        if !steps.first().is_some_and(Accessor::is_root) {
            return Err(format!("source {name} does not start at the frame"));
        }
        Ok(Path { steps, name })
    }

    /// The value at the end of the path, or None when a step cannot be read.
    fn read<'py>(&self, input: &GuardInput<'_, 'py>) -> Option<Bound<'py, PyAny>> {
        let (root, rest) = self.steps.split_first()?;
        let mut value = root.read_root(input)?;
        for step in rest {
            value = step.read_child(&value)?;
        }
        Some(value)
    }
}

impl Relation {
    /// Parses the check half of a relation spec: `(kind, (source, ...))` with at least
    /// two sources.
    pub fn parse(check: &Bound<'_, PyAny>) -> Result<Relation, Error> {
        let tuple = check.cast::<PyTuple>().ok().filter(|t| t.len() == 2).ok_or_else(|| bad(check, "a relation is (kind, sources)"))?;
        let kind = match tuple.get_item(0).ok().and_then(|k| k.extract::<String>().ok()).as_deref() {
            Some("distinct") => RelationKind::Distinct,
            Some("same") => RelationKind::Same,
            _ => return Err(bad(check, "unknown relation kind")),
        };
        let sources = tuple.get_item(1).ok().and_then(|s| s.cast_into::<PyTuple>().ok()).ok_or_else(|| bad(check, "a relation needs a tuple of sources"))?;
        if sources.len() < 2 {
            return Err(bad(check, "a relation needs at least two sources"));
        }
        let paths = sources
            .iter()
            .map(|source| Path::from_source(parse_source(&source)?).map_err(|why| bad(check, &why)))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Relation { kind, paths })
    }

    /// Reads every source and checks the relation; on failure, writes why into `reason`.
    /// The values are held (so no address is reused while comparing) in a stack array for
    /// the usual few sources: the fast path allocates nothing of its own.
    pub fn run(&self, input: &GuardInput<'_, '_>, reason: Option<&mut String>) -> bool {
        if self.paths.len() <= INLINE_VALUES {
            let mut values: [Option<Bound<'_, PyAny>>; INLINE_VALUES] = [const { None }; INLINE_VALUES];
            self.check_values(&mut values[..self.paths.len()], input, reason)
        } else {
            let mut values = vec![None; self.paths.len()];
            self.check_values(&mut values, input, reason)
        }
    }

    fn check_values<'py>(&self, values: &mut [Option<Bound<'py, PyAny>>], input: &GuardInput<'_, 'py>, reason: Option<&mut String>) -> bool {
        for (slot, path) in values.iter_mut().zip(&self.paths) {
            *slot = path.read(input);
            if slot.is_none() {
                if let Some(reason) = reason {
                    let _ = write!(reason, "{} could not be read", path.name);
                }
                return false;
            }
        }
        let address = |i: usize| values[i].as_ref().map_or(0, |v| v.as_ptr() as usize);
        match first_violation(self.kind, values.len(), address) {
            None => true,
            Some((i, j)) => {
                if let (Some(reason), Some(value)) = (reason, values[i].as_ref()) {
                    self.describe_failure(i, j, value, reason);
                }
                false
            }
        }
    }

    #[cold]
    fn describe_failure(&self, i: usize, j: usize, value: &Bound<'_, PyAny>, out: &mut String) {
        let (a, b) = (&self.paths[i].name, &self.paths[j].name);
        let _ = match self.kind {
            RelationKind::Distinct => write!(out, "{a} is not {b}, got the same object ({})", short_repr(value)),
            RelationKind::Same => write!(out, "{a} is {b}, got different objects"),
        };
    }
}

/// The first pair of positions (of `count`) that breaks the relation over the objects'
/// addresses: two equal ones for `Distinct`, one unlike the first for `Same`.
pub fn first_violation(kind: RelationKind, count: usize, address: impl Fn(usize) -> usize) -> Option<(usize, usize)> {
    match kind {
        RelationKind::Same => (1..count).find(|&j| address(j) != address(0)).map(|j| (0, j)),
        // few sources per relation: the pairwise walk beats sorting a copy
        RelationKind::Distinct => (0..count).find_map(|i| ((i + 1)..count).find(|&j| address(i) == address(j)).map(|j| (i, j))),
    }
}

#[cfg(test)]
mod tests {
    use super::{first_violation, RelationKind};

    fn violation(kind: RelationKind, addresses: &[usize]) -> Option<(usize, usize)> {
        first_violation(kind, addresses.len(), |i| addresses[i])
    }

    #[test]
    fn distinct_finds_the_first_repeated_object() {
        assert_eq!(violation(RelationKind::Distinct, &[1, 2, 3]), None);
        assert_eq!(violation(RelationKind::Distinct, &[1, 2, 1]), Some((0, 2)));
        assert_eq!(violation(RelationKind::Distinct, &[1, 2, 3, 2]), Some((1, 3)));
        assert_eq!(violation(RelationKind::Distinct, &[4, 4]), Some((0, 1)));
    }

    #[test]
    fn same_finds_the_first_other_object() {
        assert_eq!(violation(RelationKind::Same, &[7, 7, 7]), None);
        assert_eq!(violation(RelationKind::Same, &[7, 7, 8]), Some((0, 2)));
        assert_eq!(violation(RelationKind::Same, &[7, 9]), Some((0, 1)));
    }
}

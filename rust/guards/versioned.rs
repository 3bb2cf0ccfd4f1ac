//! Guards on globals and builtins answered by the dict's version tag.
//!
//! A root read from the frame's globals (or builtins) dict whose checks depend only on
//! which object the name is bound to (`id_is`, `equals` on an immutable constant,
//! `is_none`, `not_none`), with nothing read below it, passes for as long as that dict is
//! unchanged. After such roots pass, the set remembers the dict and its version tag
//! (`ffi::dict::version`, read before the roots); a later check on the same dict at the
//! same tag skips them: no dict lookup, no weak reference upgrade. Any change to the dict
//! (rebinding `torch`, deleting a name, adding one) gives it a new tag, and the roots run
//! again. The verbose path never uses this (its reason must name the failing guard).

use super::check::Check;
use super::source::Accessor;
use super::Node;
use crate::ffi::dict;
use pyo3::prelude::*;
use pyo3::Borrowed;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The roots of one dict (globals or builtins) and the dict state they last passed on.
/// A builtin is read as `LOAD_GLOBAL` reads it, globals first: its roots also remember the
/// globals dict they passed with (a global defined later shadows the builtin).
#[derive(Default)]
pub struct VersionedRoots {
    roots: Vec<usize>,
    /// Address of the dict they passed on (0: never), and its version tag then. Both are
    /// written and read with the GIL held, so they never disagree.
    dict: AtomicUsize,
    version: AtomicU64,
    /// The same for the dict that can shadow it (the globals, for builtin roots).
    shadow: AtomicUsize,
    shadow_version: AtomicU64,
}

impl VersionedRoots {
    /// Splits `roots` by where they read: `(globals, builtins, others)`, the first two
    /// holding the roots a version tag answers.
    pub fn split(roots: &[Node], candidates: &[usize]) -> (VersionedRoots, VersionedRoots, Vec<usize>) {
        let (mut globals, mut builtins, mut others) = (VersionedRoots::default(), VersionedRoots::default(), Vec::new());
        for &index in candidates {
            let root = &roots[index];
            let identity_only = root.children.is_empty() && root.checks.iter().all(depends_only_on_identity);
            match root.accessor {
                Accessor::Global(_) if identity_only => globals.roots.push(index),
                Accessor::Builtin(_) if identity_only => builtins.roots.push(index),
                _ => others.push(index),
            }
        }
        (globals, builtins, others)
    }

    /// Whether every root passes on `dict` (`run` checks one root): at once when the dict
    /// is the one they last passed on, at the same version.
    /// `shadow` is the dict read before `dict` (the globals, for builtins); both must be
    /// unchanged for the shortcut. The shortcut is inlined into the guard check; running
    /// the roots is not.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    pub fn pass(
        &self,
        dict: Borrowed<'_, '_, PyAny>,
        shadow: Option<Borrowed<'_, '_, PyAny>>,
        run: impl Fn(usize) -> bool,
    ) -> bool {
        self.roots.is_empty() || Self::tags(dict, shadow).is_some_and(|tags| self.passed_at(tags)) || self.run_roots(dict, shadow, run)
    }

    /// `(dict, its tag, shadow, its tag)`, or None when either is not a dict (no shortcut).
    #[inline]
    fn tags(dict: Borrowed<'_, '_, PyAny>, shadow: Option<Borrowed<'_, '_, PyAny>>) -> Option<(usize, u64, usize, u64)> {
        let (shadow_address, shadow_version) = match shadow {
            Some(shadow) => (shadow.as_ptr() as usize, dict::version(shadow)?),
            None => (0, 0),
        };
        Some((dict.as_ptr() as usize, dict::version(dict)?, shadow_address, shadow_version))
    }

    /// Whether the roots last passed on exactly these dicts at these tags.
    #[inline]
    fn passed_at(&self, (address, version, shadow_address, shadow_version): (usize, u64, usize, u64)) -> bool {
        self.dict.load(Ordering::Relaxed) == address
            && self.version.load(Ordering::Relaxed) == version
            && self.shadow.load(Ordering::Relaxed) == shadow_address
            && self.shadow_version.load(Ordering::Relaxed) == shadow_version
    }

    /// Runs the roots; when they pass, remembers the tags read before they ran (a change
    /// made meanwhile has a newer one).
    #[inline(never)]
    fn run_roots(&self, dict: Borrowed<'_, '_, PyAny>, shadow: Option<Borrowed<'_, '_, PyAny>>, run: impl Fn(usize) -> bool) -> bool {
        let tags = Self::tags(dict, shadow);
        if !self.roots.iter().all(|&index| run(index)) {
            return false;
        }
        if let Some((address, version, shadow_address, shadow_version)) = tags {
            self.dict.store(address, Ordering::Relaxed);
            self.version.store(version, Ordering::Relaxed);
            self.shadow.store(shadow_address, Ordering::Relaxed);
            self.shadow_version.store(shadow_version, Ordering::Relaxed);
        }
        true
    }
}

/// Checks whose outcome is fixed by the identity of the value: the object a dict entry
/// holds cannot change while the dict does not (`equals` takes immutable constants only).
fn depends_only_on_identity(check: &Check) -> bool {
    matches!(check, Check::IdIs(_) | Check::Equals(_) | Check::IsNone | Check::NotNone)
}

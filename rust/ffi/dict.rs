//! A dict's version tag (PEP 509's `ma_version_tag`): Python 3.11-3.13 give it a new,
//! process-wide unique value on every change of the dict's contents (3.12+ keep watcher
//! bits in its low bits, which change it too, never the other way round), so an equal
//! tag on the same dict means unchanged contents.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::Borrowed;

/// The version tag of `dict` (a dict or a dict subclass), or None for any other object.
#[inline]
pub fn version(dict: Borrowed<'_, '_, PyAny>) -> Option<u64> {
    let object = dict.as_ptr();
    // SAFETY: `object` is a live object (borrowed, GIL held through the token in `dict`);
    // PyDict_Check reads only its type's flags, and every dict (subclasses too) is laid out
    // as a PyDictObject, whose tag is a plain field that CPython writes with the GIL held.
    unsafe {
        if ffi::PyDict_Check(object) == 0 {
            return None;
        }
        #[allow(deprecated)] // deprecated for users in 3.12, still maintained through 3.13
        Some((*object.cast::<ffi::PyDictObject>()).ma_version_tag)
    }
}

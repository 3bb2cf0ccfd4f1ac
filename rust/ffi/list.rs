//! Borrowing the items of a list without taking references.

use pyo3::prelude::*;
use pyo3::types::PyList;

/// The item at `index` of `list`, borrowed from the list rather than owned. For guard
/// inputs: the list is not mutated while the borrow lives.
pub fn borrowed_item<'a, 'py>(
    list: Borrowed<'a, 'py, PyList>,
    index: usize,
) -> Option<Borrowed<'a, 'py, PyAny>> {
    let item = list.get_item(index).ok()?;
    let ptr = item.as_ptr();
    drop(item);
    // SAFETY: the list holds a strong reference to the item and is not mutated while
    // the borrow lives (guards only read their input).
    Some(unsafe { Borrowed::from_ptr(list.py(), ptr) })
}

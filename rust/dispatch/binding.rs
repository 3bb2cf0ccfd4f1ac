//! Binds a call's arguments to a code object's argument slots the way CPython does:
//! positionals, then keywords by name, then `__defaults__` and `__kwdefaults__`; extra
//! positionals into a new `*args` tuple and unknown keywords into a new `**kwargs` dict
//! when the code has them. Whatever it cannot bind (an error CPython must raise) is left
//! to CPython: the caller takes the normal path and the frame binds it.

use crate::ffi::function::FunctionRef;
use crate::ffi::object::Arguments;
use crate::frame_info::CodeParameters;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PySlice, PyString, PyTuple};
use pyo3::{intern, Borrowed};

/// The parameters of one code object, read once.
pub struct Parameters {
    positional: usize,
    positional_only: usize,
    keyword_only: usize,
    /// `co_varnames[:positional + keyword_only]`.
    names: Py<PyTuple>,
    /// A `*args` parameter (its slot follows the keyword-only ones).
    varargs: bool,
    /// A `**kwargs` parameter (its slot is the last argument slot).
    varkw: bool,
}

impl Parameters {
    pub fn of(code: &Bound<'_, PyAny>) -> PyResult<Parameters> {
        let py = code.py();
        let kinds = CodeParameters::of(code)?;
        let count = kinds.positional + kinds.keyword_only;
        let names = code
            .getattr(intern!(py, "co_varnames"))?
            .get_item(PySlice::new(py, 0, isize::try_from(count).unwrap_or(isize::MAX), 1))?
            .cast_into::<PyTuple>()?
            .unbind();
        Ok(Parameters {
            positional: kinds.positional,
            positional_only: code.getattr(intern!(py, "co_posonlyargcount"))?.extract()?,
            keyword_only: kinds.keyword_only,
            names,
            varargs: kinds.varargs,
            varkw: kinds.varkw,
        })
    }

    fn slot_count(&self) -> usize {
        self.positional + self.keyword_only
    }
}

/// A call's arguments as the frame's argument slots.
pub enum Binding<'a, 'py> {
    /// The caller's argument array is already the slots (every parameter passed, in order).
    InPlace(Arguments<'a>),
    /// Slots gathered from the arguments and the defaults.
    Gathered(Vec<Bound<'py, PyAny>>),
}

/// The argument slots for `args` (the first `positional` passed by position, the rest
/// named by `kwnames`), or None when CPython must bind the call.
pub fn bind<'a, 'py>(
    parameters: &Parameters,
    function: FunctionRef<'_, 'py>,
    args: Arguments<'a>,
    positional: usize,
    kwnames: Option<Borrowed<'_, 'py, PyTuple>>,
) -> Option<Binding<'a, 'py>> {
    let plain = !parameters.varargs && !parameters.varkw;
    if positional > parameters.positional && !parameters.varargs {
        return None; // "takes n positional arguments": CPython raises it
    }
    let py = function.py();
    let names = parameters.names.bind(py);
    let keywords = kwnames.map_or(0, |k| k.len());
    if plain && positional == parameters.positional && keywords == parameters.keyword_only && in_order(names, positional, kwnames) {
        return Some(Binding::InPlace(args));
    }
    let mut slots: Vec<Option<Bound<'py, PyAny>>> = vec![None; parameters.slot_count()];
    let bound_by_position = positional.min(parameters.positional);
    for (index, slot) in slots.iter_mut().enumerate().take(bound_by_position) {
        *slot = Some(args.get(py, index)?.to_owned());
    }
    // CPython makes a new tuple and a new dict for every call, also when they are empty.
    let extra = if parameters.varargs { Some(extra_positionals(py, args, bound_by_position, positional)?) } else { None };
    let unknown_keywords = parameters.varkw.then(|| PyDict::new(py));
    if let Some(kwnames) = kwnames {
        for (offset, name) in kwnames.iter().enumerate() {
            if !name.is_instance_of::<PyString>() {
                return None; // "keywords must be strings": CPython raises it
            }
            let value = args.get(py, positional + offset)?.to_owned();
            match (slot_named(parameters, names, &name), &unknown_keywords) {
                (Some(index), _) if slots[index].is_some() => return None, // "got multiple values"
                (Some(index), _) => slots[index] = Some(value),
                // Also a positional-only parameter's name: CPython puts it in **kwargs.
                (None, Some(dict)) => dict.set_item(name, value).ok()?,
                (None, None) => return None, // "unexpected keyword argument"
            }
        }
    }
    fill_defaults(parameters, function, names, &mut slots)?;
    let mut slots = slots.into_iter().collect::<Option<Vec<_>>>()?;
    slots.extend(extra.map(Bound::into_any));
    slots.extend(unknown_keywords.map(Bound::into_any));
    Some(Binding::Gathered(slots))
}

/// `args[start:end]` as a new tuple: the `*args` of the call.
fn extra_positionals<'py>(py: Python<'py>, args: Arguments<'_>, start: usize, end: usize) -> Option<Bound<'py, PyTuple>> {
    let items = (start..end).map(|index| args.get(py, index)).collect::<Option<Vec<_>>>()?;
    PyTuple::new(py, items).ok()
}

/// Whether the keyword names are exactly the keyword-only parameters, in order.
fn in_order(names: &Bound<'_, PyTuple>, positional: usize, kwnames: Option<Borrowed<'_, '_, PyTuple>>) -> bool {
    let Some(kwnames) = kwnames else { return true };
    kwnames.iter().enumerate().all(|(offset, name)| {
        names.get_item(positional + offset).is_ok_and(|expected| expected.is(&name))
    })
}

/// The slot of the parameter `name` may bind to by keyword (not a positional-only one).
fn slot_named(parameters: &Parameters, names: &Bound<'_, PyTuple>, name: &Bound<'_, PyAny>) -> Option<usize> {
    let candidates = parameters.positional_only..parameters.slot_count();
    if let Some(index) = candidates.clone().find(|&i| names.get_item(i).is_ok_and(|n| n.is(name))) {
        return Some(index);
    }
    // Not interned: compare by value, as CPython does after the identity pass.
    candidates.into_iter().find(|&i| names.get_item(i).is_ok_and(|n| n.eq(name).unwrap_or(false)))
}

/// Fills unset slots from `__defaults__` (the last positionals) and `__kwdefaults__`;
/// None when a required parameter is missing.
fn fill_defaults<'py>(
    parameters: &Parameters,
    function: FunctionRef<'_, 'py>,
    names: &Bound<'py, PyTuple>,
    slots: &mut [Option<Bound<'py, PyAny>>],
) -> Option<()> {
    let defaults = function.defaults();
    let default_count = defaults.map_or(0, |d| d.len());
    let first_default = parameters.positional.checked_sub(default_count)?;
    for (index, slot) in slots.iter_mut().enumerate() {
        if slot.is_some() {
            continue;
        }
        *slot = Some(if index < parameters.positional {
            let position = index.checked_sub(first_default)?;
            defaults?.get_item(position).ok()?.clone()
        } else {
            let name = names.get_item(index).ok()?;
            function.keyword_defaults()?.get_item(name).ok()??
        });
    }
    Some(())
}

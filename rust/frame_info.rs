//! What guards and the callback see of a frame: [`GuardInput`] (a live frame or a
//! Python-made stand-in) and the [`Frame`] object handed to the callback.

use crate::ffi::frame::FrameRef;
use crate::ffi::object::Arguments;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::{intern, Borrowed};

const CO_VARARGS: usize = 0x04;
const CO_VARKEYWORDS: usize = 0x08;

enum Locals<'a, 'py> {
    Frame(FrameRef<'py>),
    List(Borrowed<'a, 'py, PyList>),
    /// Argument slots bound by a dispatcher, before any frame exists.
    Arguments(Arguments<'a>),
}

/// The values guards read: locals by index, globals, builtins, the closure.
pub struct GuardInput<'a, 'py> {
    py: Python<'py>,
    locals: Locals<'a, 'py>,
    globals: Borrowed<'a, 'py, PyAny>,
    builtins: Borrowed<'a, 'py, PyAny>,
    closure: Option<Borrowed<'a, 'py, PyTuple>>,
    /// The function being called (live frames and dispatched calls).
    function: Option<Borrowed<'a, 'py, PyAny>>,
}

impl<'a, 'py> GuardInput<'a, 'py> {
    pub fn from_frame(frame: FrameRef<'py>) -> GuardInput<'py, 'py> {
        GuardInput {
            py: frame.py(),
            locals: Locals::Frame(frame),
            globals: frame.globals(),
            builtins: frame.builtins(),
            closure: frame.closure(),
            function: Some(frame.function()),
        }
    }

    pub fn from_frame_object(frame: &'a Bound<'py, Frame>) -> GuardInput<'a, 'py> {
        let f = frame.get();
        let py = frame.py();
        GuardInput {
            py,
            locals: Locals::List(f.localsplus.bind_borrowed(py)),
            globals: f.f_globals.bind_borrowed(py),
            builtins: f.f_builtins.bind_borrowed(py),
            closure: f.closure.bind_borrowed(py).cast::<PyTuple>().ok(),
            function: None,
        }
    }

    /// A call's arguments bound to the code's argument slots (`rust/dispatch`), with the
    /// function called and its globals, builtins and closure: what the frame would hold
    /// at its start.
    pub fn from_arguments(
        function: Borrowed<'a, 'py, PyAny>,
        slots: Arguments<'a>,
        globals: Borrowed<'a, 'py, PyAny>,
        builtins: Borrowed<'a, 'py, PyAny>,
        closure: Option<Borrowed<'a, 'py, PyTuple>>,
    ) -> GuardInput<'a, 'py> {
        GuardInput { py: function.py(), locals: Locals::Arguments(slots), globals, builtins, closure, function: Some(function) }
    }

    pub fn py(&self) -> Python<'py> {
        self.py
    }

    #[inline]
    pub fn local(&self, index: usize) -> Option<Borrowed<'_, 'py, PyAny>> {
        match &self.locals {
            Locals::Frame(frame) => frame.local(index),
            Locals::List(list) => crate::ffi::list::borrowed_item(*list, index),
            Locals::Arguments(slots) => slots.get(self.py, index),
        }
    }

    /// The argument slots a dispatcher bound (None for a frame or a snapshot).
    #[inline]
    pub fn bound_arguments(&self) -> Option<Arguments<'_>> {
        match &self.locals {
            Locals::Arguments(slots) => Some(*slots),
            _ => None,
        }
    }

    /// The frame's argument slots in place (live frames and bound arguments).
    pub fn frame_arguments(&self, count: usize) -> Option<Arguments<'_>> {
        match &self.locals {
            Locals::Frame(frame) => frame.arguments(count),
            Locals::List(_) => None,
            Locals::Arguments(slots) => (count <= slots.len()).then(|| slots.prefix(count)),
        }
    }

    pub fn globals(&self) -> Borrowed<'_, 'py, PyAny> {
        self.globals
    }

    pub fn builtins(&self) -> Borrowed<'_, 'py, PyAny> {
        self.builtins
    }

    pub fn closure(&self) -> Option<Borrowed<'_, 'py, PyTuple>> {
        self.closure
    }

    #[must_use]
    pub fn function(&self) -> Option<Borrowed<'_, 'py, PyAny>> {
        self.function
    }
}

/// A snapshot of an intercepted frame, handed to the callback on a cache miss. Also
/// constructible from Python, to check guards in tests: `Frame(code, [args...], globals)`.
#[pyclass(frozen, get_all, module = "fastdynamo._native")]
pub struct Frame {
    /// The code object being called.
    pub f_code: Py<PyAny>,
    /// The function object (None when made from Python without one).
    pub f_func: Py<PyAny>,
    pub f_globals: Py<PyAny>,
    pub f_builtins: Py<PyAny>,
    /// The function's `__closure__` (a tuple of cells) or None.
    pub closure: Py<PyAny>,
    /// The argument values in `localsplus` order (`co_varnames[:n_args]`).
    pub localsplus: Py<PyList>,
    /// Argument name -> value.
    pub f_locals: Py<PyDict>,
}

/// The parameter kinds of a code object, read from its Python attributes.
pub struct CodeParameters {
    pub positional: usize,
    pub keyword_only: usize,
    pub varargs: bool,
    pub varkw: bool,
}

impl CodeParameters {
    pub fn of(code: &Bound<'_, PyAny>) -> PyResult<CodeParameters> {
        let py = code.py();
        let flags: usize = code.getattr(intern!(py, "co_flags"))?.extract()?;
        Ok(CodeParameters {
            positional: code.getattr(intern!(py, "co_argcount"))?.extract()?,
            keyword_only: code.getattr(intern!(py, "co_kwonlyargcount"))?.extract()?,
            varargs: flags & CO_VARARGS != 0,
            varkw: flags & CO_VARKEYWORDS != 0,
        })
    }

    /// Argument slots in `localsplus`: positional, keyword-only, `*args`, `**kwargs`.
    pub fn slot_count(&self) -> usize {
        self.positional + self.keyword_only + usize::from(self.varargs) + usize::from(self.varkw)
    }
}

fn locals_dict<'py>(code: &Bound<'py, PyAny>, localsplus: &Bound<'py, PyList>) -> PyResult<Bound<'py, PyDict>> {
    let names = code.getattr(intern!(code.py(), "co_varnames"))?;
    let dict = PyDict::new(code.py());
    for (name, value) in names.try_iter()?.zip(localsplus.iter()) {
        dict.set_item(name?, value)?;
    }
    Ok(dict)
}

impl Frame {
    pub fn snapshot<'py>(frame: FrameRef<'py>) -> PyResult<Bound<'py, Frame>> {
        let py = frame.py();
        let code = frame.code().to_owned();
        let count = CodeParameters::of(&code)?.slot_count();
        let localsplus = PyList::empty(py);
        for index in 0..count {
            match frame.local(index) {
                Some(value) => localsplus.append(value)?,
                None => localsplus.append(py.None())?,
            }
        }
        let f_locals = locals_dict(&code, &localsplus)?;
        Bound::new(
            py,
            Frame {
                f_code: code.unbind(),
                f_func: frame.function().to_owned().unbind(),
                f_globals: frame.globals().to_owned().unbind(),
                f_builtins: frame.builtins().to_owned().unbind(),
                closure: frame.closure().map_or_else(|| py.None(), |c| c.to_owned().into_any().unbind()),
                localsplus: localsplus.unbind(),
                f_locals: f_locals.unbind(),
            },
        )
    }
}

#[pymethods]
impl Frame {
    #[new]
    #[pyo3(signature = (code, localsplus, f_globals, f_builtins=None, closure=None, f_func=None))]
    fn py_new(
        py: Python<'_>,
        code: Bound<'_, PyAny>,
        localsplus: Bound<'_, PyList>,
        f_globals: Bound<'_, PyDict>,
        f_builtins: Option<Bound<'_, PyDict>>,
        closure: Option<Bound<'_, PyTuple>>,
        f_func: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let builtins = match f_builtins {
            Some(b) => b.into_any(),
            None => py.import("builtins")?.getattr("__dict__")?,
        };
        let f_locals = locals_dict(&code, &localsplus)?;
        Ok(Frame {
            f_code: code.unbind(),
            f_func: f_func.map_or_else(|| py.None(), Bound::unbind),
            f_globals: f_globals.into_any().unbind(),
            f_builtins: builtins.unbind(),
            closure: closure.map_or_else(|| py.None(), |c| c.into_any().unbind()),
            localsplus: localsplus.unbind(),
            f_locals: f_locals.unbind(),
        })
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let name = self.f_code.bind(py).getattr("co_qualname").map_or_else(|_| "?".into(), |n| n.to_string());
        format!("<Frame of {name}>")
    }
}

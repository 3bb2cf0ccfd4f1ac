//! How a guarded value is reached from the frame: a path of accessors from a root.

use crate::errors::Error;
use crate::frame_info::GuardInput;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

/// One step from a parent value (or, for roots, from the frame) to a child value.
pub enum Accessor {
    Local(usize),
    Global(Py<PyString>),
    Builtin(Py<PyString>),
    Closure(usize),
    Attr(Py<PyString>),
    /// `object.__getattribute__(parent, name)`: the generic lookup, which never runs a
    /// class's own `__getattribute__` (Hugging Face configs customise theirs).
    GenericAttr(Py<PyString>),
    Item(Py<PyAny>),
    Type,
    /// `function(parent)`, a pure function of the runtime's own (`dict_items_of`).
    Call(Py<PyAny>),
    /// `ref()` for an exact `weakref.ref`: its referent, or None once it died. Any other
    /// value (a subclass of `weakref.ref` may override `__call__`) is unreadable: calling
    /// arbitrary objects from a guard could run user code.
    WeakRefCall,
}

impl Accessor {
    /// Identity used to merge equal paths into one tree node.
    pub fn key(&self, py: Python<'_>) -> String {
        match self {
            Accessor::Local(i) => format!("local:{i}"),
            Accessor::Global(n) => format!("global:{n}"),
            Accessor::Builtin(n) => format!("builtin:{n}"),
            Accessor::Closure(i) => format!("closure:{i}"),
            Accessor::Attr(n) => format!("attr:{n}"),
            Accessor::GenericAttr(n) => format!("generic_attr:{n}"),
            Accessor::Item(k) => item_key(k.bind(py)),
            Accessor::Type => "type".to_owned(),
            Accessor::Call(f) => format!("call:{:p}", f.as_ptr()),
            Accessor::WeakRefCall => "weakref_call".to_owned(),
        }
    }

    /// Reads a root value from the frame.
    pub fn read_root<'py>(&self, input: &GuardInput<'_, 'py>) -> Option<Bound<'py, PyAny>> {
        let py = input.py();
        match self {
            Accessor::Local(index) => input.local(*index).map(|v| v.to_owned()),
            Accessor::Global(name) => dict_lookup(&input.globals(), name.bind(py)),
            // what LOAD_GLOBAL finds: a global of that name shadows the builtin, so a
            // global defined after the trace fails the builtin's guard
            Accessor::Builtin(name) => dict_lookup(&input.globals(), name.bind(py))
                .or_else(|| dict_lookup(&input.builtins(), name.bind(py))),
            Accessor::Closure(index) => {
                let cell = input.closure()?.get_item(*index).ok()?;
                crate::ffi::object::cell_contents(&cell)
            }
            _ => None,
        }
    }

    /// Reads a child of `parent`; errors (a missing attribute, a raising `__getitem__`)
    /// mean the guard fails, and are cleared.
    pub fn read_child<'py>(&self, parent: &Bound<'py, PyAny>) -> Option<Bound<'py, PyAny>> {
        let py = parent.py();
        match self {
            Accessor::Attr(name) => parent.getattr(name.bind(py)).ok(),
            Accessor::GenericAttr(name) => generic_getattr(py).ok()?.call1((parent, name.bind(py))).ok(),
            Accessor::Item(key) => {
                if let Ok(dict) = parent.cast_exact::<PyDict>() {
                    dict.get_item(key.bind(py)).ok().flatten()
                } else {
                    parent.get_item(key.bind(py)).ok()
                }
            }
            Accessor::Type => Some(parent.get_type().into_any()),
            Accessor::Call(function) => function.bind(py).call1((parent,)).ok(),
            Accessor::WeakRefCall => weakref_referent(parent),
            _ => None,
        }
    }

    pub fn is_root(&self) -> bool {
        matches!(self, Accessor::Local(_) | Accessor::Global(_) | Accessor::Builtin(_) | Accessor::Closure(_))
    }
}

/// `object.__getattribute__`, looked up once per process.
fn generic_getattr(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static GENERIC_GETATTR: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
    GENERIC_GETATTR
        .get_or_try_init(py, || {
            Ok(py.import(pyo3::intern!(py, "builtins"))?.getattr(pyo3::intern!(py, "object"))?
                .getattr(pyo3::intern!(py, "__getattribute__"))?
                .unbind())
        })
        .map(|f| f.bind(py))
}

/// What calling `parent` returns when it is exactly a `weakref.ref` (None for a dead one).
fn weakref_referent<'py>(parent: &Bound<'py, PyAny>) -> Option<Bound<'py, PyAny>> {
    use pyo3::types::{PyWeakrefMethods, PyWeakrefReference};
    let reference = parent.cast_exact::<PyWeakrefReference>().ok()?;
    Some(reference.upgrade().unwrap_or_else(|| parent.py().None().into_bound(parent.py())))
}

/// Two item steps share a tree node only when their keys are the same: ints, strings,
/// bytes, bools and None by exact type and repr (which is exact for them), floats by bit
/// pattern (NaN aside), anything else by identity (the accessor keeps the key alive).
fn item_key(key: &Bound<'_, PyAny>) -> String {
    let exact_repr = key.is_none()
        || key.is_exact_instance_of::<pyo3::types::PyInt>()
        || key.is_exact_instance_of::<PyString>()
        || key.is_exact_instance_of::<pyo3::types::PyBytes>()
        || key.is_exact_instance_of::<pyo3::types::PyBool>();
    if exact_repr {
        let type_name = key.get_type().name().map_or_else(|_| "?".into(), |n| n.to_string());
        return format!("item:{type_name}:{}", key.repr().map_or_else(|_| "?".into(), |r| r.to_string()));
    }
    if let Ok(float) = key.cast_exact::<pyo3::types::PyFloat>() {
        if !float.value().is_nan() {
            // (a NaN key is found by identity in a dict, so it falls through to the id)
            return format!("item:float:{:016x}", float.value().to_bits());
        }
    }
    format!("item:id:{:x}", key.as_ptr() as usize)
}

fn dict_lookup<'py>(dict: &pyo3::Borrowed<'_, 'py, PyAny>, key: &Bound<'py, PyString>) -> Option<Bound<'py, PyAny>> {
    dict.cast::<PyDict>().ok()?.get_item(key).ok().flatten()
}

/// A parsed source: the accessors from a root, and its readable name.
pub struct SourcePath {
    pub steps: Vec<(Accessor, String)>,
}

/// Parses a source spec (see `python/fastdynamo/sources.py`): nested tuples such as
/// `("attr", ("local", 0, "self"), "weight")`.
pub fn parse_source(spec: &Bound<'_, PyAny>) -> Result<SourcePath, Error> {
    let py = spec.py();
    let tuple = spec.cast::<PyTuple>().map_err(|_| bad(spec, "a source must be a tuple"))?;
    let kind: String = item(&tuple, 0)?.extract().map_err(|_| bad(spec, "source kind must be a string"))?;
    let int_at = |i: usize| -> Result<usize, Error> {
        item(&tuple, i)?.extract().map_err(|_| bad(spec, "expected a non-negative int"))
    };
    let str_at = |i: usize| -> Result<Bound<'_, PyString>, Error> {
        item(&tuple, i)?.cast_into::<PyString>().map_err(|_| bad(spec, "expected a str"))
    };
    let root = |accessor: Accessor, name: String| Ok(SourcePath { steps: vec![(accessor, name)] });
    match (kind.as_str(), tuple.len()) {
        ("local", 3) => root(Accessor::Local(int_at(1)?), str_at(2)?.to_string()),
        ("closure", 3) => root(Accessor::Closure(int_at(1)?), str_at(2)?.to_string()),
        ("global", 2) => {
            let name = str_at(1)?;
            root(Accessor::Global(name.clone().unbind()), name.to_string())
        }
        ("builtin", 2) => {
            let name = str_at(1)?;
            root(Accessor::Builtin(name.clone().unbind()), format!("__builtins__.{name}"))
        }
        ("attr", 3) => {
            let mut path = parse_source(&item(&tuple, 1)?)?;
            let name = str_at(2)?;
            let text = format!("{}.{name}", path.name());
            path.steps.push((Accessor::Attr(name.unbind()), text));
            Ok(path)
        }
        ("generic_attr", 3) => {
            let mut path = parse_source(&item(&tuple, 1)?)?;
            let name = str_at(2)?;
            let attr = name.to_string();
            let text = format!("object.__getattribute__({}, {attr:?})", path.name());
            path.steps.push((Accessor::GenericAttr(name.unbind()), text));
            Ok(path)
        }
        ("item", 3) => {
            let mut path = parse_source(&item(&tuple, 1)?)?;
            let key = item(&tuple, 2)?;
            let key_repr = key.repr().map_or_else(|_| "?".into(), |r| r.to_string());
            let text = format!("{}[{key_repr}]", path.name());
            path.steps.push((Accessor::Item(key.unbind()), text));
            Ok(path)
        }
        ("call", 3) => {
            let mut path = parse_source(&item(tuple, 1)?)?;
            let function = item(tuple, 2)?;
            let function_name = function.getattr("__name__").map_or_else(|_| "?".into(), |n| n.to_string());
            let text = format!("{function_name}({})", path.name());
            path.steps.push((Accessor::Call(function.unbind()), text));
            Ok(path)
        }
        ("type", 2) => {
            let mut path = parse_source(&item(&tuple, 1)?)?;
            let text = format!("type({})", path.name());
            path.steps.push((Accessor::Type, text));
            Ok(path)
        }
        ("weakref_call", 2) => {
            let mut path = parse_source(&item(tuple, 1)?)?;
            let text = format!("{}()", path.name());
            path.steps.push((Accessor::WeakRefCall, text));
            Ok(path)
        }
        _ => {
            let _ = py;
            Err(bad(spec, "unknown source kind or wrong arity"))
        }
    }
}

impl SourcePath {
    pub fn name(&self) -> &str {
        self.steps.last().map_or("", |(_, name)| name.as_str())
    }
}

fn item<'py>(tuple: &Bound<'py, PyTuple>, index: usize) -> Result<Bound<'py, PyAny>, Error> {
    tuple.get_item(index).map_err(|_| bad(tuple.as_any(), "tuple too short"))
}

#[cold]
pub fn bad(spec: &Bound<'_, PyAny>, why: &str) -> Error {
    let repr = spec.repr().map_or_else(|_| "?".into(), |r| r.to_string());
    Error::BadGuardSpec(format!("{why}: {repr}"))
}

#[cfg(test)]
mod tests {
    use super::{parse_source, Accessor};
    use pyo3::prelude::*;
    use pyo3::types::PyDict;

    /// Evaluates `code` and returns `name` from its globals.
    fn eval_in<'py>(py: Python<'py>, code: &std::ffi::CStr, name: &str) -> Bound<'py, PyAny> {
        let globals = PyDict::new(py);
        py.run(code, Some(&globals), None).expect("snippet runs");
        globals.get_item(name).expect("lookup").expect("set")
    }

    #[test]
    fn weakref_call_reads_the_referent_then_none_once_dead() {
        Python::attach(|py| {
            let code = c"import weakref\nclass Box: pass\nbox = Box()\nref = weakref.ref(box)\n";
            let globals = PyDict::new(py);
            py.run(code, Some(&globals), None).expect("snippet runs");
            let reference = globals.get_item("ref").unwrap().unwrap();
            let referent = Accessor::WeakRefCall.read_child(&reference).expect("readable");
            assert!(referent.is(globals.get_item("box").unwrap().unwrap()));
            drop(referent);
            globals.del_item("box").unwrap();
            let dead = Accessor::WeakRefCall.read_child(&reference).expect("readable");
            assert!(dead.is_none());
        });
    }

    #[test]
    fn weakref_call_reads_only_exact_weakrefs() {
        Python::attach(|py| {
            let code = c"import weakref\nclass Box: pass\nbox = Box()\nclass Ref(weakref.ref):\n    def __call__(self):\n        raise AssertionError('a guard ran user code')\nsub = Ref(box)\n";
            let sub = eval_in(py, code, "sub");
            assert!(Accessor::WeakRefCall.read_child(&sub).is_none());
            let not_a_ref = eval_in(py, c"f = lambda: 1\n", "f");
            assert!(Accessor::WeakRefCall.read_child(&not_a_ref).is_none());
            assert!(!PyErr::occurred(py));
        });
    }

    #[test]
    fn weakref_call_source_parses_with_its_name_and_key() {
        Python::attach(|py| {
            let spec = eval_in(py, c"spec = ('weakref_call', ('item', ('attr', ('local', 0, 'self'), 'refs'), 0))\n", "spec");
            let path = parse_source(&spec).expect("parses");
            assert_eq!(path.name(), "self.refs[0]()");
            let (last, _) = path.steps.last().expect("steps");
            assert!(matches!(last, Accessor::WeakRefCall));
            assert_eq!(last.key(py), "weakref_call");
            let bad = eval_in(py, c"spec = ('weakref_call', ('local', 0, 'r'), 'extra')\n", "spec");
            assert!(parse_source(&bad).is_err());
        });
    }
}

//! The checks a guard node runs on its value, with a readable failure reason.

use super::source::bad;
use super::tensor::TensorCheck;
use super::torch_tls::Modes;
use crate::errors::Error;
use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyFrozenSet, PyString, PyTuple, PyType};
use std::fmt::Write;

pub enum Check {
    TypeIs(Py<PyType>),
    IdIs(Identity),
    /// A Python function whose `__code__` is this code object (read in place).
    CodeIs(Py<PyAny>),
    /// A type some (`true`) or none (`false`) of whose MRO classes defines this name.
    TypeDefines(Py<PyString>, bool),
    Equals(Py<PyAny>),
    LenIs(usize),
    IsNone,
    NotNone,
    /// `key in value` is `present` (a mapping key that must stay absent, or present).
    Contains(Py<PyAny>, bool),
    /// `tuple(value) == keys`, item by item with exact types: a dict's key order.
    KeysAre(Py<PyTuple>),
    /// Shared with the guard set's list of argument tensors (`GuardSet::argument_tensors`).
    Tensor(std::sync::Arc<TensorCheck>),
}

/// The object an `id_is` check expects. Held weakly when it supports weak references (a
/// module, a function, an `nn.Module`): a guard must not keep a model alive after the user
/// dropped it (entries live in `co_extra`, invisible to the GC). A dead object fails.
pub enum Identity {
    Strong(Py<PyAny>),
    Weak(Py<PyAny>),
}

impl Identity {
    fn new(object: &Bound<'_, PyAny>) -> Identity {
        match pyo3::types::PyWeakrefReference::new(object) {
            Ok(reference) => Identity::Weak(reference.into_any().unbind()),
            Err(_) => Identity::Strong(object.clone().unbind()),
        }
    }

    #[inline]
    fn is(&self, value: &Bound<'_, PyAny>) -> bool {
        match self {
            Identity::Strong(expected) => value.as_ptr() == expected.as_ptr(),
            Identity::Weak(reference) => Self::target(reference, value.py()).is_some_and(|t| t.as_ptr() == value.as_ptr()),
        }
    }

    fn target<'py>(reference: &Py<PyAny>, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        use pyo3::types::PyWeakrefMethods;
        reference.bind(py).cast::<pyo3::types::PyWeakrefReference>().ok()?.upgrade()
    }

    fn describe(&self, py: Python<'_>) -> String {
        match self {
            Identity::Strong(expected) => short_repr(expected.bind(py)),
            Identity::Weak(reference) => Self::target(reference, py).map_or_else(|| "<an object since freed>".to_owned(), |t| short_repr(&t)),
        }
    }
}

/// Checks on torch's global state, not on a frame value.
pub enum StateCheck {
    GradMode(bool),
    /// `torch.get_default_dtype() is expected`: factories and Python scalars take it.
    /// `code` is its `c10::ScalarType`, read in C++ when torch's Python reader and that
    /// code agreed on it as the guard was built; None: the Python reader is called.
    DefaultDtype { expected: Py<PyAny>, code: Option<i8> },
    /// `torch._C._is_any_autocast_enabled()`: autocast changes the dtypes ops produce.
    Autocast(bool),
    /// `torch.is_inference_mode_enabled()`: results are inference tensors.
    InferenceMode(bool),
    /// Global tables (torch's module-hook dicts) that must stay empty.
    TablesEmpty(Vec<Py<PyAny>>),
    /// `query(*args)` (a torch state query, such as `get_fastpath_enabled`) still answers
    /// this constant.
    QueryIs { query: Py<PyAny>, args: Py<PyTuple>, answer: Py<PyAny> },
}

impl Check {
    pub fn parse(spec: &Bound<'_, PyAny>) -> Result<Check, Error> {
        let tuple = spec.cast::<PyTuple>().map_err(|_| bad(spec, "a check must be a tuple"))?;
        let kind: String = tuple
            .get_item(0)
            .and_then(|k| k.extract())
            .map_err(|_| bad(spec, "check kind must be a string"))?;
        let arg = |i: usize| tuple.get_item(i).map_err(|_| bad(spec, "check is missing an argument"));
        match kind.as_str() {
            "type_is" => Ok(Check::TypeIs(
                arg(1)?.cast_into::<PyType>().map_err(|_| bad(spec, "type_is needs a type"))?.unbind(),
            )),
            "id_is" => Ok(Check::IdIs(Identity::new(&arg(1)?))),
            "code_is" => Ok(Check::CodeIs(arg(1)?.unbind())),
            "type_defines" => Ok(Check::TypeDefines(
                arg(1)?.cast_into::<PyString>().map_err(|_| bad(spec, "type_defines needs a str"))?.unbind(),
                arg(2)?.extract().map_err(|_| bad(spec, "type_defines needs a bool"))?,
            )),
            "equals" => {
                let value = arg(1)?;
                if !is_plain_constant(&value) {
                    return Err(bad(spec, "equals needs an int, float, bool, str, bytes, None or a tuple/frozenset of those"));
                }
                Ok(Check::Equals(value.unbind()))
            }
            "len_is" => Ok(Check::LenIs(arg(1)?.extract().map_err(|_| bad(spec, "len_is needs an int >= 0"))?)),
            "is_none" => Ok(Check::IsNone),
            "not_none" => Ok(Check::NotNone),
            "contains" => {
                let key = arg(1)?;
                if !is_plain_constant(&key) {
                    return Err(bad(spec, "contains needs a plain constant key"));
                }
                let present = arg(2)?.extract().map_err(|_| bad(spec, "contains needs a bool"))?;
                Ok(Check::Contains(key.unbind(), present))
            }
            "keys_are" => {
                let keys = arg(1)?.cast_into::<PyTuple>().map_err(|_| bad(spec, "keys_are needs a tuple"))?;
                if !keys.iter().all(|key| is_plain_constant(&key)) {
                    return Err(bad(spec, "keys_are needs a tuple of plain constants"));
                }
                Ok(Check::KeysAre(keys.unbind()))
            }
            "tensor" => Ok(Check::Tensor(std::sync::Arc::new(TensorCheck::parse(&tuple)?))),
            _ => Err(bad(spec, "unknown check kind")),
        }
    }

    /// Runs the check; on failure, writes why into `reason` when one is asked for.
    #[inline]
    pub fn run(&self, value: &Bound<'_, PyAny>, name: &str, reason: Option<&mut String>) -> bool {
        let py = value.py();
        let ok = match self {
            Check::TypeIs(expected) => value.get_type().as_ptr() == expected.as_ptr(),
            Check::IdIs(expected) => expected.is(value),
            Check::CodeIs(expected) => function_code_is(value, expected.bind(py)),
            Check::TypeDefines(name, present) => {
                value.cast::<PyType>().is_ok_and(|cls| crate::ffi::object::type_defines(cls, name.bind(py)) == *present)
            }
            Check::Equals(expected) => same_constant(value, expected.bind(py)),
            Check::LenIs(expected) => value.len().is_ok_and(|n| n == *expected),
            Check::IsNone => value.is_none(),
            Check::NotNone => !value.is_none(),
            Check::Contains(key, present) => value.contains(key.bind(py)).is_ok_and(|found| found == *present),
            Check::KeysAre(keys) => keys_are(value, keys.bind(py)),
            Check::Tensor(check) => return check.run(value, name, reason),
        };
        if !ok {
            if let Some(reason) = reason {
                self.describe_failure(value, name, reason);
            }
        }
        ok
    }

    #[cold]
    fn describe_failure(&self, value: &Bound<'_, PyAny>, name: &str, out: &mut String) {
        let py = value.py();
        let got_type = type_name(&value.get_type());
        let _ = match self {
            Check::TypeIs(t) => write!(out, "type({name}) is {}, got {got_type}", type_name(t.bind(py))),
            Check::IdIs(o) => write!(out, "{name} is {}, got another {got_type}", o.describe(py)),
            Check::CodeIs(code) => write!(out, "{name}.__code__ is {}, got another", short_repr(code.bind(py))),
            Check::TypeDefines(attr, present) => {
                write!(out, "{} class of {name}.__mro__ defines {attr}", if *present { "some" } else { "no" })
            }
            Check::Equals(c) => write!(out, "{name} == {}, got {}", short_repr(c.bind(py)), short_repr(value)),
            Check::LenIs(n) => {
                let got = value.len().map_or_else(|_| "no len()".to_owned(), |l| l.to_string());
                write!(out, "len({name}) == {n}, got {got}")
            }
            Check::IsNone => write!(out, "{name} is None, got {got_type}"),
            Check::NotNone => write!(out, "{name} is not None, got None"),
            Check::Contains(key, present) => {
                let verb = if *present { "in" } else { "not in" };
                write!(out, "{} {verb} {name}", short_repr(key.bind(py)))
            }
            Check::KeysAre(keys) => {
                write!(out, "tuple({name}) == {}, got another order or keys", short_repr(keys.bind(py).as_any()))
            }
            Check::Tensor(_) => Ok(()),
        };
    }
}

/// Whether `value` is a Python function running `code`.
fn function_code_is(value: &Bound<'_, PyAny>, code: &Bound<'_, PyAny>) -> bool {
    let Ok(function) = value.cast::<pyo3::types::PyFunction>() else { return false };
    crate::ffi::function::FunctionRef::new(function.as_borrowed()).code().is_some_and(|c| c.as_ptr() == code.as_ptr())
}

/// Whether iterating `value` yields exactly `keys`, in order and with the same types.
fn keys_are(value: &Bound<'_, PyAny>, keys: &Bound<'_, PyTuple>) -> bool {
    if value.len().ok() != Some(keys.len()) {
        return false;
    }
    let Ok(iterator) = value.try_iter() else { return false };
    let mut expected = keys.iter();
    for item in iterator {
        let (Ok(item), Some(key)) = (item, expected.next()) else { return false };
        if item.get_type().as_ptr() != key.get_type().as_ptr() || !item.eq(&key).unwrap_or(false) {
            return false;
        }
    }
    expected.next().is_none()
}

impl StateCheck {
    pub fn parse(spec: &Bound<'_, PyAny>) -> Result<StateCheck, Error> {
        let tuple = spec.cast::<PyTuple>().map_err(|_| bad(spec, "a check must be a tuple"))?;
        let kind: String = tuple.get_item(0).and_then(|k| k.extract()).map_err(|_| bad(spec, "bad kind"))?;
        let arg = tuple.get_item(1).map_err(|_| bad(spec, "missing argument"))?;
        match kind.as_str() {
            "grad_mode" => Ok(StateCheck::GradMode(arg.extract().map_err(|_| bad(spec, "grad_mode needs a bool"))?)),
            "default_dtype" => Ok(StateCheck::DefaultDtype { code: default_dtype_code(&arg), expected: arg.unbind() }),
            "autocast" => Ok(StateCheck::Autocast(arg.extract().map_err(|_| bad(spec, "autocast needs a bool"))?)),
            "inference_mode" => Ok(StateCheck::InferenceMode(
                arg.extract().map_err(|_| bad(spec, "inference_mode needs a bool"))?,
            )),
            "tables_empty" => Ok(StateCheck::TablesEmpty(
                arg.cast::<PyTuple>().map_err(|_| bad(spec, "tables_empty needs a tuple"))?.iter().map(Bound::unbind).collect(),
            )),
            "query_is" => {
                let item = |i: usize| tuple.get_item(i).map_err(|_| bad(spec, "query_is needs query, args, answer"));
                Ok(StateCheck::QueryIs {
                    query: item(1)?.unbind(),
                    args: item(2)?.cast_into::<PyTuple>().map_err(|_| bad(spec, "query_is needs a tuple of args"))?.unbind(),
                    answer: item(3)?.unbind(),
                })
            }
            _ => Err(bad(spec, "unknown torch state check")),
        }
    }

    /// Runs the check; `modes` are the three modes read at once, when the fast readers can.
    pub fn run(&self, torch: &TorchState, modes: Option<Modes>, py: Python<'_>, reason: Option<&mut String>) -> bool {
        let (ok, describe): (bool, &dyn Fn() -> String) = match self {
            StateCheck::GradMode(expected) => {
                let got = modes.map_or_else(|| torch.grad_enabled(py), |m| Some(m.grad));
                (got == Some(*expected), &move || format!("torch.is_grad_enabled() == {}, got {}", py_bool(*expected), got.map_or("error", py_bool)))
            }
            StateCheck::Autocast(expected) => {
                let got = modes.map_or_else(|| torch.autocast_enabled(py), |m| Some(m.autocast));
                (got == Some(*expected), &move || format!("torch._C._is_any_autocast_enabled() == {}, got {}", py_bool(*expected), got.map_or("error", py_bool)))
            }
            StateCheck::InferenceMode(expected) => {
                let got = modes.map_or_else(|| torch.inference_mode(py), |m| Some(m.inference));
                (got == Some(*expected), &move || format!("torch.is_inference_mode_enabled() == {}, got {}", py_bool(*expected), got.map_or("error", py_bool)))
            }
            StateCheck::QueryIs { query, args, answer } => {
                let got = query.bind(py).call1(args.bind(py)).ok();
                let ok = got.as_ref().is_some_and(|g| same_constant(g, answer.bind(py)));
                if got.is_none() {
                    PyErr::take(py); // a raising query fails the guard
                }
                (ok, &move || format!("{}{} == {}", short_repr(query.bind(py)), short_repr(args.bind(py).as_any()), short_repr(answer.bind(py))))
            }
            StateCheck::TablesEmpty(tables) => {
                let ok = tables.iter().all(|table| {
                    let table = table.bind(py);
                    // torch's tables are OrderedDicts: a dict's own size, without a call
                    table.cast::<pyo3::types::PyDict>().map_or_else(|_| table.len().is_ok_and(|n| n == 0), |d| d.is_empty())
                });
                (ok, &|| "torch's global module hooks are empty, got a hook".to_owned())
            }
            StateCheck::DefaultDtype { expected, code } => {
                if code.is_some() && torch.default_scalar_type() == *code {
                    return true;
                }
                let got = torch.default_dtype(py);
                let ok = got.as_ref().is_some_and(|d| d.as_ptr() == expected.as_ptr());
                (ok, &move || format!("torch.get_default_dtype() == {}, got {}", short_repr(expected.bind(py)), got.as_ref().map_or_else(|| "error".to_owned(), short_repr)))
            }
        };
        if !ok {
            if let Some(reason) = reason {
                reason.push_str(&describe());
            }
        }
        ok
    }
}

/// The `c10::ScalarType` codes of the dtypes a default dtype can be (torch allows only
/// floating ones), fixed in c10's `ScalarType` enum.
const DEFAULT_DTYPE_CODES: [(&str, i8); 4] = [("float16", 5), ("float32", 6), ("float64", 7), ("bfloat16", 15)];

/// The C++ code of `dtype` for a `DefaultDtype` check: only when `dtype` is the default
/// dtype now and the C++ reader returns its known code (so that reader reads the state
/// `torch.get_default_dtype()` does); None otherwise.
fn default_dtype_code(dtype: &Bound<'_, PyAny>) -> Option<i8> {
    let py = dtype.py();
    let fast = super::torch_tls::fast_state(py)?;
    let torch = py.import("torch").ok()?;
    let now = torch.getattr("get_default_dtype").ok()?.call0().ok()?;
    if now.as_ptr() != dtype.as_ptr() {
        return None;
    }
    let code = DEFAULT_DTYPE_CODES
        .iter()
        .find(|(name, _)| torch.getattr(*name).is_ok_and(|d| d.as_ptr() == dtype.as_ptr()))
        .map(|&(_, code)| code)?;
    (fast.default_scalar_type() == Some(code)).then_some(code)
}

/// The grad, inference and autocast mode checks of a guard set as bits: which modes are
/// checked (`mask`) and the values they must have (`expected`), so the fast path compares
/// them at once (bits: grad 1, inference 2, autocast 4), with the default dtype's code.
#[derive(Clone, Copy)]
pub struct ExpectedModes {
    mask: u8,
    expected: u8,
    /// The default dtype's `c10::ScalarType` code, when a `DefaultDtype` check has one.
    default_dtype: Option<i8>,
}

impl ExpectedModes {
    /// The mode checks as bits (None when a mode is checked against both values: then the
    /// checks run one by one and fail as they would), and the indices of the other checks.
    pub fn split(checks: &[StateCheck]) -> (Option<ExpectedModes>, Vec<usize>) {
        let mut modes = Some(ExpectedModes { mask: 0, expected: 0, default_dtype: None });
        let mut others = Vec::new();
        for (index, check) in checks.iter().enumerate() {
            let (bit, value) = match check {
                StateCheck::GradMode(value) => (1, *value),
                StateCheck::InferenceMode(value) => (2, *value),
                StateCheck::Autocast(value) => (4, *value),
                StateCheck::DefaultDtype { code: Some(code), .. }
                    if modes.is_some_and(|m| m.default_dtype.is_none_or(|c| c == *code)) =>
                {
                    modes = modes.map(|m| ExpectedModes { default_dtype: Some(*code), ..m });
                    continue;
                }
                _ => {
                    others.push(index);
                    continue;
                }
            };
            let want = if value { bit } else { 0 };
            modes = modes.filter(|m| m.mask & bit == 0 || m.expected & bit == want).map(|m| ExpectedModes {
                mask: m.mask | bit,
                expected: m.expected | want,
                ..m
            });
        }
        (modes, others)
    }

    /// Whether `modes` have the expected values, and the default dtype too.
    #[inline]
    pub fn pass(self, modes: Modes, torch: &TorchState) -> bool {
        let bits = u8::from(modes.grad) | u8::from(modes.inference) << 1 | u8::from(modes.autocast) << 2;
        bits & self.mask == self.expected
            && self.default_dtype.is_none_or(|code| torch.default_scalar_type() == Some(code))
    }
}

/// torch's global-state readers, looked up once per guard set.
pub struct TorchState {
    is_grad_enabled: Py<PyAny>,
    get_default_dtype: Py<PyAny>,
    is_any_autocast_enabled: Py<PyAny>,
    is_inference_mode_enabled: Py<PyAny>,
    /// The same modes read in C++, when they agreed with these readers at calibration.
    fast: Option<&'static super::torch_tls::FastTorchState>,
}

impl TorchState {
    pub fn load(py: Python<'_>) -> PyResult<TorchState> {
        let torch = py.import("torch")?;
        Ok(TorchState {
            is_grad_enabled: torch.getattr("is_grad_enabled")?.unbind(),
            get_default_dtype: torch.getattr("get_default_dtype")?.unbind(),
            is_any_autocast_enabled: torch.getattr("_C")?.getattr("_is_any_autocast_enabled")?.unbind(),
            is_inference_mode_enabled: torch.getattr("is_inference_mode_enabled")?.unbind(),
            fast: super::torch_tls::fast_state(py),
        })
    }

    /// Grad, inference and autocast mode read together, when the fast readers can.
    #[inline]
    pub fn modes(&self) -> Option<Modes> {
        self.fast.and_then(super::torch_tls::FastTorchState::modes)
    }

    fn grad_enabled(&self, py: Python<'_>) -> Option<bool> {
        match self.fast {
            Some(fast) => Some(fast.grad_enabled()),
            None => Self::flag(&self.is_grad_enabled, py),
        }
    }

    fn autocast_enabled(&self, py: Python<'_>) -> Option<bool> {
        match self.fast {
            Some(fast) => Some(fast.autocast_enabled()),
            None => Self::flag(&self.is_any_autocast_enabled, py),
        }
    }

    fn inference_mode(&self, py: Python<'_>) -> Option<bool> {
        match self.fast {
            Some(fast) => Some(fast.inference_mode()),
            None => Self::flag(&self.is_inference_mode_enabled, py),
        }
    }

    /// Calls a torch reader that returns a bool (None if it raised).
    fn flag(reader: &Py<PyAny>, py: Python<'_>) -> Option<bool> {
        let result = reader.bind(py).call0().ok()?;
        Some(result.as_ptr() == pyo3::types::PyBool::new(py, true).as_ptr())
    }

    /// The default dtype's `c10::ScalarType` code read in C++, when the fast readers can.
    #[inline]
    fn default_scalar_type(&self) -> Option<i8> {
        self.fast.and_then(super::torch_tls::FastTorchState::default_scalar_type)
    }

    fn default_dtype<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        self.get_default_dtype.bind(py).call0().ok()
    }
}

fn py_bool(value: bool) -> &'static str {
    if value { "True" } else { "False" }
}

/// The `equals` check: the same exact type and the same value, where floats compare by bit
/// pattern (`-0.0` is not `0.0`, and a NaN constant matches the same NaN), also inside
/// tuples and frozensets.
fn same_constant(value: &Bound<'_, PyAny>, expected: &Bound<'_, PyAny>) -> bool {
    if value.as_ptr() == expected.as_ptr() {
        return true;
    }
    if value.get_type().as_ptr() != expected.get_type().as_ptr() {
        return false;
    }
    if let (Ok(a), Ok(b)) = (value.cast::<PyFloat>(), expected.cast::<PyFloat>()) {
        return a.value().to_bits() == b.value().to_bits();
    }
    if let (Ok(a), Ok(b)) = (value.cast::<PyTuple>(), expected.cast::<PyTuple>()) {
        return a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| same_constant(&x, &y));
    }
    if let (Ok(a), Ok(b)) = (value.cast::<PyFrozenSet>(), expected.cast::<PyFrozenSet>()) {
        // `==` on sets hashes floats by value (0.0 and -0.0 collide): match item by item.
        return a.len() == b.len() && a.iter().all(|x| b.iter().any(|y| same_constant(&x, &y)));
    }
    value.eq(expected).unwrap_or(false)
}

fn is_plain_constant(value: &Bound<'_, PyAny>) -> bool {
    let py = value.py();
    if value.is_none() {
        return true;
    }
    let exact = |t: &Bound<'_, PyType>| value.get_type().is(t);
    let builtins = [
        py.get_type::<pyo3::types::PyInt>(),
        py.get_type::<pyo3::types::PyFloat>(),
        py.get_type::<pyo3::types::PyBool>(),
        py.get_type::<pyo3::types::PyString>(),
        py.get_type::<pyo3::types::PyBytes>(),
    ];
    if builtins.iter().any(exact) {
        return true;
    }
    if exact(&py.get_type::<PyTuple>()) || exact(&py.get_type::<PyFrozenSet>()) {
        return value.try_iter().is_ok_and(|mut items| items.all(|i| i.is_ok_and(|i| is_plain_constant(&i))));
    }
    false
}

pub fn type_name(t: &Bound<'_, PyType>) -> String {
    let name = t.qualname().map_or_else(|_| "?".into(), |n| n.to_string());
    match t.module() {
        Ok(module) if module.to_string() != "builtins" => format!("{module}.{name}"),
        _ => name,
    }
}

pub fn short_repr(value: &Bound<'_, PyAny>) -> String {
    let text = value.repr().map_or_else(|_| "?".into(), |r| r.to_string());
    if text.chars().count() > 60 {
        let cut: String = text.chars().take(57).collect();
        format!("{cut}...")
    } else {
        text
    }
}

//! Shape guards of a dynamic entry: relations between the sizes and strides of its
//! tensors (`s0 * s1 == s2`, `s0 >= 2`, `s0 % 8 == 0`...), evaluated in Rust.
//!
//! Spec: source `("shape_env",)`, check `("shape_exprs", loads, exprs, texts)` where each
//! load is `(source_spec, kind, dim, type)` (variable `i` is load `i`): kind `"size"` or
//! `"stride"` reads dim `dim` of a tensor of exact type `type`, `"value"` an int (a
//! symbolic int argument; its type is guarded by the tree); each
//! expr a tuple tree (`shape_expr`) and each text the guard as Python prints it, for
//! failure reasons. The loads are evaluated after the rest of the tree, which has
//! already checked each tensor's type, dtype, device and ndim.

use super::check::short_repr;
use super::shape_expr::{CmpOp, Expr, Test};
use super::source::{bad, parse_source, Accessor};
use super::tensor_layout::tensor_layout;
use crate::errors::Error;
use crate::ffi::tensor::ImplRef;
use crate::frame_info::GuardInput;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};
use std::fmt::Write;

#[derive(Clone, Copy, PartialEq, Eq)]
enum LoadKind {
    Size,
    Stride,
    Value,
}

struct Load {
    steps: Vec<Accessor>,
    name: String,
    kind: LoadKind,
    dim: usize,
    tensor_type: Py<PyType>,
}

pub struct ShapeGuards {
    loads: Vec<Load>,
    tests: Vec<Test>,
    texts: Vec<String>,
}

/// Whether a spec entry's source is the shape pseudo-source.
pub fn is_shape_source(source: &Bound<'_, PyAny>) -> bool {
    source
        .extract::<(String,)>()
        .is_ok_and(|(kind,)| kind == "shape_env")
}

impl ShapeGuards {
    pub fn parse(check: &Bound<'_, PyAny>) -> Result<ShapeGuards, Error> {
        let shape = "shape check is (\"shape_exprs\", loads, exprs, texts)";
        let tuple = check.cast::<PyTuple>().map_err(|_| bad(check, shape))?;
        let kind: Option<String> = tuple.get_item(0).ok().and_then(|k| k.extract().ok());
        if tuple.len() != 4 || kind.as_deref() != Some("shape_exprs") {
            return Err(bad(check, shape));
        }
        let part = |i: usize| tuple.get_item(i).map_err(|_| bad(check, shape));
        let loads = part(1)?
            .try_iter()
            .map_err(|_| bad(check, shape))?
            .map(|load| {
                load.map_err(|_| bad(check, shape))
                    .and_then(|l| parse_load(&l))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let exprs = part(2)?
            .try_iter()
            .map_err(|_| bad(check, shape))?
            .map(|e| {
                e.map_err(|_| bad(check, shape))
                    .and_then(|e| parse_expr(&e, loads.len()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let texts: Vec<String> = part(3)?
            .extract()
            .map_err(|_| bad(check, "shape texts must be strings"))?;
        if texts.len() != exprs.len() {
            return Err(bad(check, "one text per shape expression"));
        }
        Ok(ShapeGuards {
            loads,
            tests: exprs.into_iter().map(Test::new).collect(),
            texts,
        })
    }

    /// True when every expression holds for the sizes read from `input`.
    pub fn run(&self, input: &GuardInput<'_, '_>, reason: Option<&mut String>) -> bool {
        // Entries have a handful of symbolic dims: a small stack buffer, no allocation.
        let mut stack = [0i64; 16];
        let mut heap;
        let values: &mut [i64] = if self.loads.len() <= stack.len() {
            &mut stack[..self.loads.len()]
        } else {
            heap = vec![0i64; self.loads.len()];
            &mut heap
        };
        for (slot, load) in values.iter_mut().zip(&self.loads) {
            let Some(v) = load.read(input) else {
                if let Some(reason) = reason {
                    let _ = write!(reason, "{}: size or stride unreadable", load.name);
                }
                return false;
            };
            *slot = v;
        }
        match self.tests.iter().position(|t| !t.holds(values)) {
            None => true,
            Some(failed) => {
                if let Some(reason) = reason {
                    self.describe(failed, values, reason);
                }
                false
            }
        }
    }

    #[cold]
    fn describe(&self, failed: usize, values: &[i64], out: &mut String) {
        let seen: Vec<String> = self
            .loads
            .iter()
            .zip(values)
            .map(|(l, v)| format!("{} = {v}", l.text()))
            .collect();
        let _ = write!(
            out,
            "shape guard {} failed ({})",
            self.texts[failed],
            seen.join(", ")
        );
    }
}

impl Load {
    fn text(&self) -> String {
        match self.kind {
            LoadKind::Size => format!("{}.size()[{}]", self.name, self.dim),
            LoadKind::Stride => format!("{}.stride()[{}]", self.name, self.dim),
            LoadKind::Value => self.name.clone(),
        }
    }

    fn read(&self, input: &GuardInput<'_, '_>) -> Option<i64> {
        if let [Accessor::Local(index)] = self.steps.as_slice() {
            // a frame argument (most loads): borrowed in place, no reference taken
            let value = input.local(*index)?;
            return self.read_from(&value);
        }
        let (root, rest) = self.steps.split_first()?;
        let mut value = root.read_root(input)?;
        for step in rest {
            value = step.read_child(&value)?;
        }
        self.read_from(&value)
    }

    fn read_from(&self, value: &Bound<'_, PyAny>) -> Option<i64> {
        if self.kind == LoadKind::Value {
            return value
                .cast_exact::<pyo3::types::PyInt>()
                .ok()?
                .extract()
                .ok();
        }
        self.fast_read(value).or_else(|| self.slow_read(value))
    }

    /// In place, for the exact type the tree's tensor check accepted (so the impl layout
    /// calibrated for it applies), inline dims only.
    fn fast_read(&self, value: &Bound<'_, PyAny>) -> Option<i64> {
        let py = value.py();
        if value.get_type_ptr() != self.tensor_type.as_ptr().cast() {
            return None;
        }
        let layout = tensor_layout(py)?;
        let imp = ImplRef::of(value, layout.impl_offset)?;
        let ndim = usize::try_from(imp.i64_at(layout.ndim_offset)?).ok()?;
        if self.dim >= ndim || ndim > layout.inline_dims() {
            return None;
        }
        let base = if self.kind == LoadKind::Size {
            layout.sizes_offset()
        } else {
            layout.strides_offset()
        };
        imp.i64_at(base + 8 * self.dim)
    }

    fn slow_read(&self, value: &Bound<'_, PyAny>) -> Option<i64> {
        let py = value.py();
        let dims = if self.kind == LoadKind::Size {
            value.getattr(intern!(py, "shape")).ok()?
        } else {
            value.call_method0(intern!(py, "stride")).ok()?
        };
        dims.get_item(self.dim).ok()?.extract().ok()
    }
}

fn parse_load(load: &Bound<'_, PyAny>) -> Result<Load, Error> {
    let why = "a shape load is (source, \"size\"|\"stride\"|\"value\", dim, type)";
    let tuple = load
        .cast::<PyTuple>()
        .ok()
        .filter(|t| t.len() == 4)
        .ok_or_else(|| bad(load, why))?;
    let get = |i: usize| tuple.get_item(i).map_err(|_| bad(load, why));
    let path = parse_source(&get(0)?)?;
    let name = path.name().to_owned();
    if !path.steps.first().is_some_and(|(a, _)| a.is_root()) {
        return Err(bad(load, "a shape load's source must start at the frame"));
    }
    let kind = match get(1)?
        .extract::<String>()
        .map_err(|_| bad(load, why))?
        .as_str()
    {
        "size" => LoadKind::Size,
        "stride" => LoadKind::Stride,
        "value" => LoadKind::Value,
        _ => return Err(bad(load, why)),
    };
    let dim: usize = get(2)?.extract().map_err(|_| bad(load, why))?;
    let tensor_type = get(3)?
        .cast_into::<PyType>()
        .map_err(|_| bad(load, why))?
        .unbind();
    Ok(Load {
        steps: path.steps.into_iter().map(|(a, _)| a).collect(),
        name,
        kind,
        dim,
        tensor_type,
    })
}

fn parse_expr(spec: &Bound<'_, PyAny>, n_vars: usize) -> Result<Expr, Error> {
    let tuple = spec
        .cast::<PyTuple>()
        .map_err(|_| bad(spec, "a shape expression is a tuple"))?;
    let op: String = tuple
        .get_item(0)
        .ok()
        .and_then(|o| o.extract().ok())
        .ok_or_else(|| bad(spec, "a shape expression starts with its operator name"))?;
    let args: Vec<Bound<'_, PyAny>> = tuple.iter().skip(1).collect();
    let sub = |i: usize| -> Result<Box<Expr>, Error> {
        Ok(Box::new(parse_expr(
            args.get(i).ok_or_else(|| bad(spec, "missing operand"))?,
            n_vars,
        )?))
    };
    let all = || {
        args.iter()
            .map(|a| parse_expr(a, n_vars))
            .collect::<Result<Vec<_>, _>>()
    };
    let int = |i: usize| -> Result<i64, Error> {
        args.get(i)
            .and_then(|a| a.extract().ok())
            .ok_or_else(|| bad(spec, "expected a 64-bit int"))
    };
    let arity = |n: usize| {
        if args.len() == n {
            Ok(())
        } else {
            Err(bad(spec, "wrong number of operands"))
        }
    };
    let some = || {
        if args.is_empty() {
            Err(bad(spec, "needs operands"))
        } else {
            Ok(())
        }
    };
    Ok(match op.as_str() {
        "const" => {
            arity(1)?;
            Expr::Const(int(0)?)
        }
        "var" => {
            arity(1)?;
            let i = usize::try_from(int(0)?)
                .ok()
                .filter(|i| *i < n_vars)
                .ok_or_else(|| bad(spec, "no such load"))?;
            Expr::Var(i)
        }
        "add" => {
            some()?;
            Expr::Add(all()?)
        }
        "mul" => {
            some()?;
            Expr::Mul(all()?)
        }
        "max" => {
            some()?;
            Expr::Max(all()?)
        }
        "min" => {
            some()?;
            Expr::Min(all()?)
        }
        "and" => {
            some()?;
            Expr::And(all()?)
        }
        "or" => {
            some()?;
            Expr::Or(all()?)
        }
        "not" => {
            arity(1)?;
            Expr::Not(sub(0)?)
        }
        "floordiv" => {
            arity(2)?;
            Expr::FloorDiv(sub(0)?, sub(1)?)
        }
        "mod" => {
            arity(2)?;
            Expr::Mod(sub(0)?, sub(1)?)
        }
        "pow" => {
            arity(2)?;
            let exp = u32::try_from(int(1)?)
                .map_err(|_| bad(spec, "exponent must be a small non-negative int"))?;
            Expr::Pow(sub(0)?, exp)
        }
        name => match CmpOp::from_name(name) {
            Some(cmp) => {
                arity(2)?;
                Expr::Cmp(cmp, sub(0)?, sub(1)?)
            }
            None => {
                return Err(bad(
                    spec,
                    &format!(
                        "unknown shape operator {}",
                        short_repr(&tuple.get_item(0).map_err(|_| bad(spec, "?"))?)
                    ),
                ))
            }
        },
    })
}

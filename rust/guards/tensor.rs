//! The tensor check: exact type, dtype, device, requires_grad, ndim, sizes, strides.
//!
//! The fast path reads the tensor's C++ metadata in place (see `tensor_layout`), and
//! allocates nothing. Where that layout is unknown, and to describe a failure, reads go
//! through torch's Python-level attributes (`dtype`, `device`, `requires_grad`, `shape`,
//! `stride()`), which are C getters: no Python frames run.

use super::check::{short_repr, type_name};
use super::source::bad;
use super::tensor_layout::{tensor_layout, TensorLayout};
use crate::ffi::tensor::ImplRef;
use crate::errors::Error;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};
use std::fmt::Write;

pub struct TensorCheck {
    tensor_type: Py<PyType>,
    dtype: Py<PyAny>,
    device: Py<PyAny>,
    requires_grad: bool,
    /// None: that dimension is not checked.
    sizes: Vec<Option<i64>>,
    strides: Vec<Option<i64>>,
    /// Raw metadata read from the example, when the fast path is on.
    raw: Option<RawExpectation>,
}

/// dtype, device and dispatch keys as torch stores them, read from the example tensor.
struct RawExpectation {
    layout: &'static TensorLayout,
    dtype: u16,
    device: u32,
    keyset: u64,
}

impl RawExpectation {
    fn read(example: &Bound<'_, PyAny>) -> Option<RawExpectation> {
        let layout = tensor_layout(example.py())?;
        let imp = ImplRef::of(example, layout.impl_offset)?;
        Some(RawExpectation {
            layout,
            dtype: imp.u16_at(layout.dtype_offset)?,
            device: imp.bytes3_at(layout.device_offset)?,
            keyset: imp.u64_at(layout.keyset_offset)?,
        })
    }
}

fn dims(value: &Bound<'_, PyAny>, spec: &Bound<'_, PyAny>) -> Result<Vec<Option<i64>>, Error> {
    value
        .extract::<Vec<Option<i64>>>()
        .map_err(|_| bad(spec, "tensor sizes/strides must be a tuple of int or None"))
}

impl TensorCheck {
    /// Parses `("tensor", example, sizes, strides)`. The example tensor gives the type,
    /// dtype, device and requires_grad; it is not kept.
    pub fn parse(spec: &Bound<'_, PyTuple>) -> Result<TensorCheck, Error> {
        let py = spec.py();
        let any = spec.as_any();
        if spec.len() != 4 {
            return Err(bad(any, "tensor check is (\"tensor\", example, sizes, strides)"));
        }
        let get = |i: usize| spec.get_item(i).map_err(|_| bad(any, "tensor check too short"));
        let example = get(1)?;
        let attr = |name: &str| example.getattr(name).map_err(|_| bad(any, "tensor example lacks tensor attributes"));
        let check = TensorCheck {
            tensor_type: example.get_type().unbind(),
            dtype: attr("dtype")?.unbind(),
            device: attr("device")?.unbind(),
            requires_grad: attr("requires_grad")?.is_truthy().map_err(|_| bad(any, "requires_grad"))?,
            sizes: dims(&get(2)?, any)?,
            strides: dims(&get(3)?, any)?,
            raw: RawExpectation::read(&example),
        };
        if check.sizes.len() != check.strides.len() {
            return Err(bad(any, "sizes and strides differ in length"));
        }
        let _ = py;
        Ok(check)
    }

    pub fn run(&self, value: &Bound<'_, PyAny>, name: &str, reason: Option<&mut String>) -> bool {
        let fast = self.fast_match(value);
        if fast == Some(true) || (fast == Some(false) && reason.is_none()) {
            return fast == Some(true);
        }
        match (self.first_mismatch(value), reason) {
            (None, _) if fast.is_none() => true,
            (None, reason) => {
                // Only the dispatch keys differ (an inference tensor, a layout change).
                if let Some(reason) = reason {
                    reason.push_str(&format!("{name}: dispatch keys differ from the traced tensor's"));
                }
                false
            }
            (Some(mismatch), reason) => {
                if let Some(reason) = reason {
                    self.describe(mismatch, value, name, reason);
                }
                false
            }
        }
    }

    /// Compares the metadata in place. None when it cannot decide (no verified layout,
    /// or more dims than the verified layout covers): the caller then uses the slow path.
    #[inline]
    fn fast_match(&self, value: &Bound<'_, PyAny>) -> Option<bool> {
        let raw = self.raw.as_ref()?;
        if value.get_type().as_ptr() != self.tensor_type.as_ptr() {
            return Some(false);
        }
        let layout = raw.layout;
        let imp = ImplRef::of(value, layout.impl_offset)?;
        let ndim = usize::try_from(imp.i64_at(layout.ndim_offset)?).ok()?;
        if ndim != self.sizes.len() {
            return Some(false);
        }
        if imp.u16_at(layout.dtype_offset)? != raw.dtype
            || imp.bytes3_at(layout.device_offset)? != raw.device
            || imp.u64_at(layout.keyset_offset)? != raw.keyset
        {
            return Some(false);
        }
        let inline = ndim <= layout.inline_dims();
        if !inline && !layout.out_of_line {
            return None;
        }
        for dim in 0..ndim {
            let (size, stride) = if inline {
                (imp.i64_at(layout.sizes_offset() + 8 * dim)?, imp.i64_at(layout.strides_offset() + 8 * dim)?)
            } else {
                (imp.out_of_line(layout.sizes_offset(), ndim, dim)?, imp.out_of_line(layout.sizes_offset(), ndim, ndim + dim)?)
            };
            if self.sizes[dim].is_some_and(|s| s != size) || self.strides[dim].is_some_and(|s| s != stride) {
                return Some(false);
            }
        }
        // No autograd metadata means requires_grad is False; otherwise ask torch.
        let requires_grad = imp.u64_at(layout.autograd_offset)? != 0
            && value.getattr(pyo3::intern!(value.py(), "requires_grad")).ok()?.is_truthy().ok()?;
        Some(requires_grad == self.requires_grad)
    }

    /// None if `value` matches; otherwise what differs first. Allocates nothing.
    fn first_mismatch<'py>(&self, value: &Bound<'py, PyAny>) -> Option<Mismatch> {
        let py = value.py();
        if value.get_type().as_ptr() != self.tensor_type.as_ptr() {
            return Some(Mismatch::Type);
        }
        let attr = |n: &Bound<'py, pyo3::types::PyString>| value.getattr(n).ok();
        if attr(intern!(py, "dtype")).is_none_or(|d| d.as_ptr() != self.dtype.as_ptr()) {
            return Some(Mismatch::Dtype);
        }
        if !attr(intern!(py, "device")).is_some_and(|d| d.eq(self.device.bind(py)).unwrap_or(false)) {
            return Some(Mismatch::Device);
        }
        let requires_grad = attr(intern!(py, "requires_grad")).and_then(|r| r.is_truthy().ok());
        if requires_grad != Some(self.requires_grad) {
            return Some(Mismatch::RequiresGrad);
        }
        let shape = attr(intern!(py, "shape")).and_then(|s| s.cast_into::<PyTuple>().ok());
        let strides = value.call_method0(intern!(py, "stride")).ok().and_then(|s| s.cast_into::<PyTuple>().ok());
        let (Some(shape), Some(strides)) = (shape, strides) else { return Some(Mismatch::Unreadable) };
        if shape.len() != self.sizes.len() {
            return Some(Mismatch::Ndim(shape.len()));
        }
        for (is_size, expected, actual) in [(true, &self.sizes, &shape), (false, &self.strides, &strides)] {
            for (dim, want) in expected.iter().enumerate() {
                let Some(want) = *want else { continue };
                let got: Option<i64> = actual.get_item(dim).ok().and_then(|v| v.extract().ok());
                if got != Some(want) {
                    return Some(Mismatch::Dim { is_size, dim, want, got });
                }
            }
        }
        None
    }

    #[cold]
    fn describe(&self, mismatch: Mismatch, value: &Bound<'_, PyAny>, name: &str, out: &mut String) {
        let py = value.py();
        let field = |field: &str, expected: &Bound<'_, PyAny>| {
            let got = value.getattr(field).map_or_else(|_| "?".to_owned(), |g| short_repr(&g));
            format!("{name}.{field} == {}, got {got}", short_repr(expected))
        };
        let text = match mismatch {
            Mismatch::Type => format!(
                "type({name}) is {}, got {}",
                type_name(self.tensor_type.bind(py)),
                type_name(&value.get_type())
            ),
            Mismatch::Dtype => field("dtype", self.dtype.bind(py)),
            Mismatch::Device => field("device", self.device.bind(py)),
            Mismatch::RequiresGrad => {
                let (want, got) = if self.requires_grad { ("True", "False") } else { ("False", "True") };
                format!("{name}.requires_grad == {want}, got {got}")
            }
            Mismatch::Unreadable => format!("{name}: size or stride unreadable"),
            Mismatch::Ndim(got) => format!("{name}.ndim == {}, got {got}", self.sizes.len()),
            Mismatch::Dim { is_size, dim, want, got } => {
                let what = if is_size { "size" } else { "stride" };
                let got = got.map_or_else(|| "?".to_owned(), |g| g.to_string());
                format!("{name}.{what}()[{dim}] == {want}, got {got}")
            }
        };
        let _ = write!(out, "{text}");
    }
}

/// The first difference a tensor check found.
#[derive(Clone, Copy)]
enum Mismatch {
    Type,
    Dtype,
    Device,
    RequiresGrad,
    Unreadable,
    Ndim(usize),
    Dim { is_size: bool, dim: usize, want: i64, got: Option<i64> },
}

//! The tensor check: exact type, dtype, device, requires_grad, ndim, sizes, strides.
//!
//! The fast path reads the tensor's C++ metadata in place (see `tensor_layout`), and
//! allocates nothing. Where that layout is unknown, and to describe a failure, reads go
//! through torch's Python-level attributes (`dtype`, `device`, `requires_grad`, `shape`,
//! `stride()`), which are C getters: no Python frames run.

use super::check::{short_repr, type_name};
use super::source::bad;
use super::tensor_layout::{tensor_layout, TensorLayout};
use crate::ffi::tensor::{ImplReader, ImplRef, WordOffset};
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

/// dtype, device and dispatch keys as torch stores them, read from the example tensor,
/// and where each checked size and stride lives: what the fast path compares in place.
struct RawExpectation {
    layout: &'static TensorLayout,
    /// Reads the impl of values of exactly the traced tensor's type.
    reader: ImplReader,
    ndim_at: WordOffset,
    ndim: u64,
    /// The word holding dtype and device, the mask of their bytes, and their value.
    meta: (WordOffset, u64, u64),
    keyset_at: WordOffset,
    keyset: u64,
    autograd_at: WordOffset,
    /// Every checked size and stride, when they are stored inline (else None).
    inline_dims: Option<Vec<(WordOffset, i64)>>,
}

impl RawExpectation {
    /// None (the slow path) also when dtype and device do not share one aligned word.
    fn read(example: &Bound<'_, PyAny>, sizes: &[Option<i64>], strides: &[Option<i64>]) -> Option<RawExpectation> {
        let layout = tensor_layout(example.py())?;
        let imp = ImplRef::of(example, layout.impl_offset)?;
        let reader = ImplReader::new(&example.get_type(), layout.impl_offset)?;
        if layout.device_offset != layout.dtype_offset + 2 {
            return None;
        }
        let meta_at = WordOffset::new(layout.dtype_offset)?;
        let mask = 0x00ff_ffff_ffff_u64; // 2 bytes of dtype, 3 of device (little-endian)
        let inline_dims = if sizes.len() <= layout.inline_dims() {
            let mut dims = Vec::new();
            for (dim, (size, stride)) in sizes.iter().zip(strides).enumerate() {
                if let Some(size) = size {
                    dims.push((WordOffset::new(layout.sizes_offset() + 8 * dim)?, *size));
                }
                if let Some(stride) = stride {
                    dims.push((WordOffset::new(layout.strides_offset() + 8 * dim)?, *stride));
                }
            }
            Some(dims)
        } else {
            None
        };
        let keyset_at = WordOffset::new(layout.keyset_offset)?;
        Some(RawExpectation {
            layout,
            reader,
            ndim_at: WordOffset::new(layout.ndim_offset)?,
            ndim: sizes.len() as u64,
            meta: (meta_at, mask, imp.word(meta_at) & mask),
            keyset_at,
            keyset: imp.word(keyset_at),
            autograd_at: WordOffset::new(layout.autograd_offset)?,
            inline_dims,
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
        let sizes = dims(&get(2)?, any)?;
        let strides = dims(&get(3)?, any)?;
        let check = TensorCheck {
            tensor_type: example.get_type().unbind(),
            dtype: attr("dtype")?.unbind(),
            device: attr("device")?.unbind(),
            requires_grad: attr("requires_grad")?.is_truthy().map_err(|_| bad(any, "requires_grad"))?,
            raw: RawExpectation::read(&example, &sizes, &strides),
            sizes,
            strides,
        };
        if check.sizes.len() != check.strides.len() {
            return Err(bad(any, "sizes and strides differ in length"));
        }
        let _ = py;
        Ok(check)
    }

    /// Whether `value` passes (the fast path's question: no reason to write).
    #[inline]
    pub fn passes(&self, value: &Bound<'_, PyAny>) -> bool {
        match self.fast_match(value) {
            Some(passed) => passed,
            None => self.first_mismatch(value).is_none(),
        }
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
    /// Always inlined into the guard set's loop over argument tensors: a call per tensor
    /// costs register saves and an `Option` return, more than some of the compares.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn fast_match(&self, value: &Bound<'_, PyAny>) -> Option<bool> {
        let raw = self.raw.as_ref()?;
        let Ok(imp) = raw.reader.impl_of(value) else { return Some(false) }; // another type
        let imp = imp?;
        let (meta_at, mask, meta) = raw.meta;
        if imp.word(raw.ndim_at) != raw.ndim || imp.word(meta_at) & mask != meta || imp.word(raw.keyset_at) != raw.keyset {
            return Some(false);
        }
        let dims_match = match &raw.inline_dims {
            Some(dims) => dims.iter().all(|&(at, expected)| i64::from_ne_bytes(imp.word(at).to_ne_bytes()) == expected),
            None => self.out_of_line_match(imp, self.sizes.len())?,
        };
        if !dims_match {
            return Some(false);
        }
        // No autograd metadata means requires_grad is False; otherwise ask torch (out of
        // line: the common case stays a few loads and compares, with a small stack frame).
        if imp.word(raw.autograd_at) != 0 {
            return self.requires_grad_matches(value);
        }
        Some(!self.requires_grad)
    }

    /// `value.requires_grad == self.requires_grad`, asked of torch (None if it raised).
    #[cold]
    #[inline(never)]
    fn requires_grad_matches(&self, value: &Bound<'_, PyAny>) -> Option<bool> {
        let requires_grad = value.getattr(pyo3::intern!(value.py(), "requires_grad")).ok()?.is_truthy().ok()?;
        Some(requires_grad == self.requires_grad)
    }

    /// Sizes and strides of a tensor with more dims than fit inline (None: not verified).
    #[cold]
    #[inline(never)]
    fn out_of_line_match(&self, imp: ImplRef<'_>, ndim: usize) -> Option<bool> {
        let layout = self.raw.as_ref()?.layout;
        if !layout.out_of_line {
            return None;
        }
        for dim in 0..ndim {
            let size = imp.out_of_line(layout.sizes_offset(), ndim, dim)?;
            let stride = imp.out_of_line(layout.sizes_offset(), ndim, ndim + dim)?;
            if self.sizes[dim].is_some_and(|s| s != size) || self.strides[dim].is_some_and(|s| s != stride) {
                return Some(false);
            }
        }
        Some(true)
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

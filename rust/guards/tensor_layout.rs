//! Finds and verifies where torch keeps tensor metadata, for the guard fast path.
//!
//! Probes are tensors of known sizes, strides, dtypes and devices. Every offset must be
//! the single candidate consistent with all of them, or the fast path stays off.

use crate::ffi::tensor::{object_word, ImplRef, IMPL_WINDOW};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::OnceLock;

/// Inline capacity of torch's SizesAndStrides (sizes then strides, 5 each).
const INLINE_DIMS: usize = 5;

#[derive(Debug, Clone, Copy)]
pub struct TensorLayout {
    /// Byte offset, in the Python object, of the TensorImpl pointer.
    pub impl_offset: usize,
    /// Byte offset of the autograd metadata pointer (NULL means requires_grad is False).
    pub autograd_offset: usize,
    /// Byte offset of ndim; the inline sizes follow, then the inline strides.
    pub ndim_offset: usize,
    pub dtype_offset: usize,
    pub device_offset: usize,
    pub keyset_offset: usize,
    /// Whether tensors with more than 5 dims were verified (else they use the slow path).
    pub out_of_line: bool,
}

impl TensorLayout {
    pub fn sizes_offset(&self) -> usize {
        self.ndim_offset + 8
    }

    pub fn strides_offset(&self) -> usize {
        self.ndim_offset + 8 + 8 * INLINE_DIMS
    }

    pub fn inline_dims(&self) -> usize {
        INLINE_DIMS
    }
}

static LAYOUT: OnceLock<Option<TensorLayout>> = OnceLock::new();

/// The verified layout, or None (fast path off). Calibrates on first call.
pub fn tensor_layout(py: Python<'_>) -> Option<&'static TensorLayout> {
    LAYOUT.get_or_init(|| calibrate(py).ok().flatten()).as_ref()
}

const PROBES: &str = r#"
import torch
shapes = [((2, 3, 5), None), ((7, 11), (1, 0)), ((13,), None), ((), None), ((3, 1, 4, 1, 6), None)]
dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8, torch.bool]
probes = []
for dtype in dtypes:
    for shape, perm in shapes:
        t = torch.zeros(shape, dtype=dtype)
        if perm is not None:
            t = torch.zeros(tuple(reversed(shape)), dtype=dtype).permute(*perm)
        probes.append((t, "cpu", str(dtype)))
for dtype in dtypes[:2]:
    probes.append((torch.zeros(2, 3, 5, dtype=dtype, device="meta"), "meta", str(dtype)))
six_d = torch.zeros(2, 1, 3, 1, 2, 2)
grad = torch.zeros(3, 2, requires_grad=True)
"#;

struct Probe<'py> {
    tensor: Bound<'py, PyAny>,
    impl_address: usize,
    sizes: Vec<i64>,
    strides: Vec<i64>,
    device: String,
    dtype: String,
    /// Views carry autograd metadata even without requires_grad.
    is_view: bool,
}

fn probe<'py>(tensor: Bound<'py, PyAny>, device: String, dtype: String) -> PyResult<Probe<'py>> {
    Ok(Probe {
        impl_address: tensor.getattr("_cdata")?.extract()?,
        sizes: tensor.getattr("shape")?.extract()?,
        strides: tensor.call_method0("stride")?.extract()?,
        is_view: tensor.call_method0("_is_view")?.extract()?,
        tensor,
        device,
        dtype,
    })
}

/// Runs a calibration script in `namespace`, with torch in its default state whatever the
/// caller's: no dispatch mode (a fake or functional mode would make the probes fake),
/// inference mode off, CPU as the default device. A calibration runs once per process,
/// at the first use, which may come inside any of them.
pub(crate) fn run_probes(
    py: Python<'_>,
    script: &str,
    namespace: &Bound<'_, PyDict>,
) -> PyResult<()> {
    const NEUTRAL: &str = "
import torch
from torch.utils._python_dispatch import _disable_current_modes
with _disable_current_modes(), torch.inference_mode(False), torch.device('cpu'):
    exec(script, namespace)
";
    let outer = PyDict::new(py);
    outer.set_item("script", script)?;
    outer.set_item("namespace", namespace)?;
    py.run(&CString::new(NEUTRAL).expect("no NUL"), Some(&outer), None)
}

fn calibrate(py: Python<'_>) -> PyResult<Option<TensorLayout>> {
    let namespace = PyDict::new(py);
    run_probes(py, PROBES, &namespace)?;
    let mut probes = Vec::new();
    for item in namespace.get_item("probes")?.expect("probes").try_iter()? {
        let (tensor, device, dtype): (Bound<'_, PyAny>, String, String) = item?.extract()?;
        probes.push(probe(tensor, device, dtype)?);
    }
    let six_d = probe(namespace.get_item("six_d")?.expect("six_d"), "cpu".into(), "torch.float32".into())?;
    let grad = namespace.get_item("grad")?.expect("grad");
    Ok(find_layout(&probes, &six_d, &grad))
}

fn impls<'a>(probes: &'a [Probe<'_>]) -> Option<Vec<ImplRef<'a>>> {
    probes.iter().map(|p| ImplRef::at_address(&p.tensor, p.impl_address)).collect()
}

fn unique<T: Copy>(candidates: impl Iterator<Item = T>) -> Option<T> {
    let found: Vec<T> = candidates.collect();
    (found.len() == 1).then(|| found[0])
}

fn find_layout(probes: &[Probe<'_>], six_d: &Probe<'_>, grad: &Bound<'_, PyAny>) -> Option<TensorLayout> {
    let impls = impls(probes)?;
    let impl_offset = unique((16..64).step_by(8).filter(|&offset| {
        probes.iter().all(|p| object_word(&p.tensor, offset) == Some(p.impl_address))
    }))?;
    let words = IMPL_WINDOW / 8;
    let ndim_offset = unique((0..words).map(|w| w * 8).filter(|&offset| {
        probes.iter().zip(&impls).all(|(p, imp)| matches_inline(*imp, offset, &p.sizes, &p.strides))
    }))?;
    let dtype_offset = unique((ndim_offset + 8 + 80..IMPL_WINDOW - 8).step_by(2).filter(|&offset| {
        separates(probes, &impls, |imp| imp.u16_at(offset).map(u64::from), |p| p.dtype.clone())
    }))?;
    let device_offset = dtype_offset + 2;
    let device_ok = separates(probes, &impls, |imp| imp.bytes3_at(device_offset).map(u64::from), |p| p.device.clone())
        && impls.iter().all(|imp| imp.bytes3_at(device_offset).is_some_and(|v| v >> 16 == 1));
    let keyset_offset = (device_offset + 3).next_multiple_of(8);
    let keyset_ok = separates(probes, &impls, |imp| imp.u64_at(keyset_offset), |p| p.device.clone());
    let autograd_offset = unique((8..ndim_offset).step_by(8).filter(|&offset| {
        probes.iter().zip(&impls).filter(|(p, _)| !p.is_view).all(|(_, imp)| imp.u64_at(offset) == Some(0))
            && ImplRef::of(grad, impl_offset).and_then(|imp| imp.u64_at(offset)).is_some_and(|v| v != 0)
    }))?;
    if !device_ok || !keyset_ok {
        return None;
    }
    let layout = TensorLayout {
        impl_offset,
        autograd_offset,
        ndim_offset,
        dtype_offset,
        device_offset,
        keyset_offset,
        out_of_line: false,
    };
    let out_of_line = ImplRef::of(&six_d.tensor, impl_offset).is_some_and(|imp| {
        let n = six_d.sizes.len();
        imp.i64_at(ndim_offset) == Some(n as i64)
            && (0..n).all(|d| imp.out_of_line(layout.sizes_offset(), n, d) == Some(six_d.sizes[d]))
            && (0..n).all(|d| imp.out_of_line(layout.sizes_offset(), n, n + d) == Some(six_d.strides[d]))
    });
    Some(TensorLayout { out_of_line, ..layout })
}

fn matches_inline(imp: ImplRef<'_>, ndim_offset: usize, sizes: &[i64], strides: &[i64]) -> bool {
    let base = ndim_offset + 8;
    imp.i64_at(ndim_offset) == Some(sizes.len() as i64)
        && sizes.iter().enumerate().all(|(d, &s)| imp.i64_at(base + 8 * d) == Some(s))
        && strides.iter().enumerate().all(|(d, &s)| imp.i64_at(base + 8 * (INLINE_DIMS + d)) == Some(s))
}

/// True when `read` gives one value per `group` and different groups differ.
fn separates(
    probes: &[Probe<'_>],
    impls: &[ImplRef<'_>],
    read: impl Fn(ImplRef<'_>) -> Option<u64>,
    group: impl Fn(&Probe<'_>) -> String,
) -> bool {
    let mut by_group: HashMap<String, u64> = HashMap::new();
    for (p, imp) in probes.iter().zip(impls) {
        let Some(value) = read(*imp) else { return false };
        if *by_group.entry(group(p)).or_insert(value) != value {
            return false;
        }
    }
    let mut values: Vec<u64> = by_group.values().copied().collect();
    values.sort_unstable();
    values.dedup();
    by_group.len() > 1 && values.len() == by_group.len()
}

//! Finds and verifies where torch keeps what a tensor's data pointer is made of, for the
//! CPU kernel launcher: the impl's storage pointer, its storage offset and element count,
//! the storage's data pointer and the flag byte that says the storage must not be
//! written through its raw pointer (copy-on-write, throw or warn on mutable access).
//!
//! It extends the guards' calibration (`guards::tensor_layout`: where the impl pointer,
//! dtype, device and dispatch keys are) with probes of known storage offsets, element
//! counts, data pointers and flags: every offset must be the single candidate consistent
//! with all of them, and the address computed the launcher's way must equal
//! `t.data_ptr()` for every probe, or the in-place read is off and the launcher asks
//! torch in Python instead.

use super::tensor_argument::InPlaceReader;
use crate::ffi::tensor::{
    object_word, ImplReader, ImplRef, StorageByte, StorageRef, StorageWord, WordOffset,
    IMPL_WINDOW, STORAGE_WINDOW,
};
use crate::guards::tensor_layout::{run_probes, tensor_layout, TensorLayout};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};
use std::collections::HashMap;

/// The verified layout: the reader the launcher copies into each kernel, and the tensor
/// types it reads (kept alive here: a reader identifies a type by its address).
pub struct DataLayout {
    pub reader: InPlaceReader,
    /// Byte offsets, for tests and for `_cpu_kernel_data_layout()`.
    pub offsets: HashMap<&'static str, usize>,
    _types: Vec<Py<PyType>>,
}

static LAYOUT: PyOnceLock<Option<DataLayout>> = PyOnceLock::new();

/// The verified layout, or None (in-place reads off). Calibrates on first call.
pub fn data_layout(py: Python<'_>) -> Option<&'static DataLayout> {
    LAYOUT
        .get_or_init(py, || calibrate(py).ok().flatten())
        .as_ref()
}

/// Probes: `plain` tensors (several dtypes, storage offsets, views, empty ones,
/// Parameters, storages from `frombuffer` whose context differs from their data,
/// inference tensors), with what torch says of each; `flagged` tensors whose storage
/// forbids or watches raw writes. Nothing here reads a flagged tensor's data pointer (that
/// would materialise the copy-on-write probes).
const PROBES: &str = r"
import torch
dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
          torch.int32, torch.uint8, torch.bool]
tensors = []
for i, dtype in enumerate(dtypes):
    base = torch.zeros(64 + 8 * i, dtype=dtype)
    tensors += [base, base[3 + i:], base.as_strided((4, 5), (1, 4), 9 + 2 * i),
                base[5 + i:5 + i], torch.zeros(0, dtype=dtype),
                torch.nn.Parameter(base[1 + i:], requires_grad=False),
                torch.frombuffer(bytearray(96), dtype=dtype)[2 + i:]]
tensors += [torch.nn.Parameter(torch.zeros(30)[4:].view(2, 13)), torch.zeros(17, requires_grad=True)]
with torch.inference_mode():
    inference = torch.zeros(1)
    tensors += [torch.zeros(40)[6:], torch.zeros(3, 7, dtype=torch.int64).t(), inference]
plain = [(t, t._cdata, t.untyped_storage()._cdata, t.untyped_storage().data_ptr(),
          t.storage_offset(), t.numel(), t.element_size(), t.data_ptr()) for t in tensors]
keysets = [torch.zeros(1), inference]
cow_source = torch.zeros(12)
cow = torch._lazy_clone(cow_source)
throws = torch.zeros(12)
torch._C._set_throw_on_mutable_data_ptr(throws)
warns = torch.zeros(12)
torch._C._set_warn_deprecated_on_mutable_data_ptr(warns)
assert torch._C._is_cow_tensor(cow_source) and torch._C._is_cow_tensor(cow)
flagged = [(t, t._cdata, t.untyped_storage()._cdata) for t in (cow_source, cow, throws, warns)]
types = [torch.Tensor, torch.nn.Parameter]
";

/// A tensor and the addresses and numbers torch reported for it.
struct Probe<'py> {
    tensor: Bound<'py, PyAny>,
    impl_address: usize,
    storage_address: usize,
    /// The fields below are only read for plain probes.
    storage_data: usize,
    storage_offset: u64,
    numel: u64,
    itemsize: usize,
    data_ptr: usize,
}

fn calibrate(py: Python<'_>) -> PyResult<Option<DataLayout>> {
    let Some(tensor) = tensor_layout(py) else {
        return Ok(None);
    };
    let namespace = PyDict::new(py);
    run_probes(py, PROBES, &namespace)?;
    let item = |name: &str| namespace.get_item(name)?.ok_or_else(|| missing(name));
    let mut plain = Vec::new();
    for probe in item("plain")?.try_iter()? {
        let (
            tensor,
            impl_address,
            storage_address,
            storage_data,
            storage_offset,
            numel,
            itemsize,
            data_ptr,
        ) = probe?.extract()?;
        plain.push(Probe {
            tensor,
            impl_address,
            storage_address,
            storage_data,
            storage_offset,
            numel,
            itemsize,
            data_ptr,
        });
    }
    let mut flagged = Vec::new();
    for probe in item("flagged")?.try_iter()? {
        let (tensor, impl_address, storage_address) = probe?.extract()?;
        flagged.push(Probe {
            tensor,
            impl_address,
            storage_address,
            storage_data: 0,
            storage_offset: 0,
            numel: 0,
            itemsize: 0,
            data_ptr: 0,
        });
    }
    let keysets: Vec<Bound<'_, PyAny>> = item("keysets")?.extract()?;
    let types: Vec<Bound<'_, PyType>> = item("types")?.extract()?;
    Ok(find_layout(tensor, &plain, &flagged, &keysets, &types))
}

/// An empty CPU tensor of `dtype`, made with torch in its default state (see
/// `run_probes`): what a kernel compares its tensor arguments' dtype and device with.
/// None for a dtype torch makes no such tensor of (quantized ones).
pub fn cpu_example<'py>(dtype: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    const EXAMPLE: &str = "
import torch
try:
    example = torch.empty(0, dtype=dtype, device='cpu')
except RuntimeError:
    example = None
";
    let py = dtype.py();
    let namespace = PyDict::new(py);
    namespace.set_item("dtype", dtype)?;
    run_probes(py, EXAMPLE, &namespace)?;
    let example = namespace
        .get_item("example")?
        .ok_or_else(|| missing("example"))?;
    Ok((!example.is_none()).then_some(example))
}

#[cold]
fn missing(name: &str) -> PyErr {
    pyo3::exceptions::PyRuntimeError::new_err(format!("calibration probes lack {name}"))
}

fn unique<T: Copy>(candidates: impl Iterator<Item = T>) -> Option<T> {
    let found: Vec<T> = candidates.collect();
    (found.len() == 1).then(|| found[0])
}

fn impl_of<'a>(probe: &'a Probe<'_>) -> Option<ImplRef<'a>> {
    ImplRef::at_address(&probe.tensor, probe.impl_address)
}

fn storage_of<'a>(probe: &'a Probe<'_>) -> Option<StorageRef<'a>> {
    StorageRef::at_address(&probe.tensor, probe.storage_address)
}

/// The impl word offset whose value is `expected(probe)` for every probe, if one only.
fn impl_word(probes: &[&Probe<'_>], expected: impl Fn(&Probe<'_>) -> u64) -> Option<WordOffset> {
    let offset = unique((0..IMPL_WINDOW).step_by(8).filter(|&offset| {
        let at = WordOffset::new(offset).expect("inside the window");
        probes
            .iter()
            .all(|p| impl_of(p).is_some_and(|imp| imp.word(at) == expected(p)))
    }))?;
    WordOffset::new(offset)
}

fn find_layout(
    tensor: &TensorLayout,
    plain: &[Probe<'_>],
    flagged: &[Probe<'_>],
    keysets: &[Bound<'_, PyAny>],
    types: &[Bound<'_, PyType>],
) -> Option<DataLayout> {
    let all: Vec<&Probe<'_>> = plain.iter().chain(flagged).collect();
    let plain_only: Vec<&Probe<'_>> = plain.iter().collect();
    let impl_found =
        |p: &&Probe<'_>| object_word(&p.tensor, tensor.impl_offset) == Some(p.impl_address);
    if !all.iter().all(impl_found) || tensor.device_offset != tensor.dtype_offset + 2 {
        return None;
    }
    let storage_at = impl_word(&all, |p| p.storage_address as u64)?;
    let storage_offset_at = impl_word(&plain_only, |p| p.storage_offset)?;
    let numel_at = impl_word(&plain_only, |p| p.numel)?;
    let data_offset = unique((0..STORAGE_WINDOW).step_by(8).filter(|&offset| {
        let at = StorageWord::new(offset).expect("inside the window");
        plain
            .iter()
            .all(|p| storage_of(p).is_some_and(|s| s.word(at) == p.storage_data as u64))
    }))?;
    let check_offset = unique((0..STORAGE_WINDOW).filter(|&offset| {
        let at = StorageByte::new(offset).expect("inside the window");
        plain
            .iter()
            .all(|p| storage_of(p).is_some_and(|s| s.byte(at) == 0))
            && flagged
                .iter()
                .all(|p| storage_of(p).is_some_and(|s| s.byte(at) == 1))
    }))?;
    let keyset_at = WordOffset::new(tensor.keyset_offset)?;
    let keyset_of =
        |t: &Bound<'_, PyAny>| ImplRef::of(t, tensor.impl_offset).map(|imp| imp.word(keyset_at));
    let [with_autograd, inference] = [keyset_of(keysets.first()?)?, keyset_of(keysets.get(1)?)?];
    let readers = types
        .iter()
        .map(|t| ImplReader::new(t, tensor.impl_offset))
        .collect::<Option<Vec<_>>>()?;
    let reader = InPlaceReader {
        readers: readers.try_into().ok()?,
        meta_at: WordOffset::new(tensor.dtype_offset)?,
        keyset_at,
        plain_keysets: [with_autograd, inference],
        storage_at,
        storage_offset_at,
        numel_at,
        data_at: StorageWord::new(data_offset)?,
        check_at: StorageByte::new(check_offset)?,
    };
    let verified = with_autograd != inference
        && plain
            .iter()
            .all(|p| reader.reads(&p.tensor, p.itemsize) == Some(p.data_ptr))
        && flagged.iter().all(|p| reader.reads(&p.tensor, 4).is_none())
        && types
            .iter()
            .all(|t| plain.iter().any(|p| p.tensor.get_type().is(t)));
    verified.then(|| DataLayout {
        reader,
        offsets: HashMap::from([
            ("storage_pointer_offset", storage_at.offset()),
            ("storage_offset_offset", storage_offset_at.offset()),
            ("numel_offset", numel_at.offset()),
            ("storage_data_offset", data_offset),
            ("storage_check_offset", check_offset),
        ]),
        _types: types.iter().map(|t| t.clone().unbind()).collect(),
    })
}

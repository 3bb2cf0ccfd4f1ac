//! A kernel's tensor arguments: each one's data address, as `t.data_ptr()` gives it.
//!
//! The address is read in place (no Python call) when the tensor is of a type, a dispatch
//! key set and a storage state the calibration (`data_layout`) covers and has the
//! declared dtype on the CPU; anything else is asked of torch in Python, which is also
//! where an argument that is not a CPU tensor of the declared dtype is described.

use super::data_layout::cpu_example;
use crate::errors::Error;
use crate::ffi::tensor::{ImplReader, ImplRef, StorageByte, StorageWord, WordOffset};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use pyo3::{intern, Borrowed};

/// The bytes of the impl word at the dtype: 2 of dtype, 3 of device (little-endian).
const META_MASK: u64 = 0x00ff_ffff_ffff;

/// Where a tensor's data address is made of, as the calibration verified it.
#[derive(Clone, Copy)]
pub struct InPlaceReader {
    /// Impl readers of the exact types read in place: `torch.Tensor`, `nn.Parameter`.
    pub readers: [ImplReader; 2],
    /// The word holding dtype and device.
    pub meta_at: WordOffset,
    pub keyset_at: WordOffset,
    /// The dispatch keys of dense CPU tensors, with and without autograd keys (inference
    /// tensors). Others (sparse, a conjugate or negative view, functionalised, a Python
    /// subclass's keys) are left to torch.
    pub plain_keysets: [u64; 2],
    pub storage_at: WordOffset,
    pub storage_offset_at: WordOffset,
    pub numel_at: WordOffset,
    /// In the `StorageImpl`: the data pointer, and the byte that is non-zero when raw
    /// mutable access must go through torch (copy-on-write, throw or warn on it).
    pub data_at: StorageWord,
    pub check_at: StorageByte,
}

impl InPlaceReader {
    fn impl_of<'a>(&self, value: &'a Bound<'_, PyAny>) -> Option<ImplRef<'a>> {
        self.readers
            .iter()
            .find_map(|reader| reader.impl_of(value).ok())
            .flatten()
    }

    /// The data address of `value`, or None when torch must be asked: another type,
    /// dtype or device than `meta` says, unusual dispatch keys, no storage, a storage
    /// that checks mutable access, unallocated data. An empty tensor's is 0, as torch's.
    #[allow(clippy::inline_always)] // in the launch loop: a call would cost more than the reads
    #[inline(always)]
    pub fn data_pointer(
        &self,
        value: &Bound<'_, PyAny>,
        meta: u64,
        itemsize: usize,
    ) -> Option<usize> {
        let imp = self.impl_of(value)?;
        let keys = imp.word(self.keyset_at);
        if imp.word(self.meta_at) & META_MASK != meta
            || (keys != self.plain_keysets[0] && keys != self.plain_keysets[1])
        {
            return None;
        }
        let storage = imp.storage(self.storage_at)?;
        if storage.byte(self.check_at) != 0 {
            return None;
        }
        if imp.word(self.numel_at) == 0 {
            return Some(0);
        }
        let data = usize::try_from(storage.word(self.data_at))
            .ok()
            .filter(|&d| d != 0)?;
        let offset = usize::try_from(imp.word(self.storage_offset_at)).ok()?;
        data.checked_add(offset.checked_mul(itemsize)?)
    }

    /// The dtype and device bytes of `example`, as `data_pointer` compares them.
    pub fn meta_of(&self, example: &Bound<'_, PyAny>) -> Option<u64> {
        Some(self.impl_of(example)?.word(self.meta_at) & META_MASK)
    }

    /// Calibration: what `data_pointer` reads for `tensor`, expecting its own dtype.
    pub fn reads(&self, tensor: &Bound<'_, PyAny>, itemsize: usize) -> Option<usize> {
        self.data_pointer(tensor, self.meta_of(tensor)?, itemsize)
    }
}

/// What one tensor argument must be.
pub struct TensorSlot {
    pub dtype: Py<PyAny>,
    pub itemsize: usize,
    /// The dtype and device bytes of a CPU tensor of `dtype` (None: always ask torch).
    pub meta: Option<u64>,
}

impl TensorSlot {
    pub fn new(dtype: &Bound<'_, PyAny>, reader: Option<&InPlaceReader>) -> PyResult<TensorSlot> {
        let py = dtype.py();
        let torch = torch(py)?;
        if !dtype.is_instance(torch.dtype.bind(py))? {
            let got = type_name(dtype);
            return Err(
                Error::WrongType(format!("dtypes must be torch.dtype objects, got {got}")).into(),
            );
        }
        let itemsize: usize = dtype.getattr(intern!(py, "itemsize"))?.extract()?;
        let meta = match reader {
            Some(reader) => cpu_example(dtype)?.and_then(|example| reader.meta_of(&example)),
            None => None,
        };
        Ok(TensorSlot {
            dtype: dtype.clone().unbind(),
            itemsize,
            meta,
        })
    }
}

/// What the Python path compares with.
struct Torch {
    tensor: Py<PyType>,
    dtype: Py<PyType>,
    strided: Py<PyAny>,
}

static TORCH: PyOnceLock<Torch> = PyOnceLock::new();

fn torch(py: Python<'_>) -> PyResult<&'static Torch> {
    TORCH.get_or_try_init(py, || {
        let torch = py.import(intern!(py, "torch"))?;
        Ok(Torch {
            tensor: torch
                .getattr(intern!(py, "Tensor"))?
                .cast_into::<PyType>()?
                .unbind(),
            dtype: torch
                .getattr(intern!(py, "dtype"))?
                .cast_into::<PyType>()?
                .unbind(),
            strided: torch.getattr(intern!(py, "strided"))?.unbind(),
        })
    })
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .qualname()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// `t.data_ptr()` asked of torch, after checking that `value` is a strided CPU tensor
/// of the slot's dtype without a lazy conjugate or negative bit (a `TypeError` naming
/// the kernel and the position otherwise). Errors of `data_ptr()` itself propagate.
#[cold]
#[inline(never)]
pub fn python_data_pointer(
    kernel: &str,
    position: usize,
    slot: &TensorSlot,
    value: Borrowed<'_, '_, PyAny>,
) -> PyResult<usize> {
    let py = value.py();
    let torch = torch(py)?;
    let wrong = |what: String| -> PyErr {
        Error::WrongType(format!(
            "{kernel}(): the tensor at position {position} (buffers[{position}]) {what}"
        ))
        .into()
    };
    if !value.is_instance(torch.tensor.bind(py))? {
        return Err(wrong(format!(
            "must be a torch.Tensor, got {}",
            type_name(&value)
        )));
    }
    if !value.getattr(intern!(py, "is_cpu"))?.is_truthy()? {
        return Err(wrong(format!(
            "must be on the CPU, got a tensor on {}",
            value.getattr(intern!(py, "device"))?
        )));
    }
    let dtype = value.getattr(intern!(py, "dtype"))?;
    if !dtype.is(slot.dtype.bind(py)) {
        return Err(wrong(format!(
            "must have dtype {}, got {dtype}",
            slot.dtype.bind(py)
        )));
    }
    let layout = value.getattr(intern!(py, "layout"))?;
    if !layout.is(torch.strided.bind(py)) {
        return Err(wrong(format!(
            "must be a strided (dense) tensor, got layout {layout}"
        )));
    }
    for (bit, resolve) in [("is_conj", "resolve_conj"), ("is_neg", "resolve_neg")] {
        if value.call_method0(bit)?.is_truthy()? {
            return Err(wrong(format!(
                "is a lazy view ({bit}() is True): pass t.{resolve}()"
            )));
        }
    }
    value.call_method0(intern!(py, "data_ptr"))?.extract()
}

//! Raw reads of torch tensors for the guard fast path.
//!
//! torch's Python tensor object (`THPVariable`) holds a pointer to its C++ `TensorImpl`,
//! whose fields (sizes, strides, dtype, device, dispatch keys) we read directly. The
//! offsets are not hard-coded: `guards::tensor_layout` finds them at first use by probing
//! tensors of known metadata, and verifies them; if anything does not match, the fast
//! path is off and guards use torch's Python attributes. Reads here are bounded: within
//! the Python object's `tp_basicsize`, within [`IMPL_WINDOW`] bytes of the impl, and
//! within [`STORAGE_WINDOW`] bytes of its `StorageImpl` (the CPU kernel launcher's data
//! pointers, calibrated by `cpu_kernel::data_layout`).

use pyo3::prelude::*;
use pyo3::types::PyType;

/// Bytes of `TensorImpl` we may read: up to and including the dispatch key set in the
/// layouts seen so far (torch 2.x: key set at 168). Never read beyond.
pub const IMPL_WINDOW: usize = 176;

/// A tensor's `TensorImpl`, valid while the tensor is alive.
#[derive(Clone, Copy)]
pub struct ImplRef<'a> {
    base: *const u8,
    _tensor: std::marker::PhantomData<&'a ()>,
}

fn basicsize(tensor_type: &Bound<'_, PyType>) -> usize {
    // SAFETY: reading tp_basicsize of a live type object.
    let size = unsafe { (*tensor_type.as_type_ptr()).tp_basicsize };
    usize::try_from(size).unwrap_or(0)
}

/// The word at byte `offset` of the Python object (offset < tp_basicsize, 8-aligned).
pub fn object_word(tensor: &Bound<'_, PyAny>, offset: usize) -> Option<usize> {
    if offset % 8 != 0 || offset + 8 > basicsize(&tensor.get_type()) {
        return None;
    }
    // SAFETY: the object is alive and at least tp_basicsize bytes long; offset is in range
    // and aligned.
    Some(unsafe { tensor.as_ptr().cast::<u8>().add(offset).cast::<usize>().read() })
}

/// Reads the impl pointer of tensors whose Python type is exactly one type, with the
/// bounds check against that type's size done once, when the reader is made.
#[derive(Clone, Copy)]
pub struct ImplReader {
    type_address: usize,
    impl_offset: usize,
}

impl ImplReader {
    /// A reader for instances of exactly `tensor_type`, or None when the offset does not
    /// lie inside its instances. The caller keeps `tensor_type` alive as long as the
    /// reader (its address is what identifies it).
    pub fn new(tensor_type: &Bound<'_, PyType>, impl_offset: usize) -> Option<ImplReader> {
        (impl_offset % 8 == 0 && impl_offset + 8 <= basicsize(tensor_type))
            .then(|| ImplReader { type_address: tensor_type.as_type_ptr() as usize, impl_offset })
    }

    /// `Err(())` when `value` is not exactly of this reader's type; `Ok(None)` for a NULL
    /// impl pointer; otherwise its impl.
    #[inline]
    #[allow(clippy::result_unit_err, clippy::cast_ptr_alignment)] // the offset is 8-aligned (checked in `new`)
    pub fn impl_of<'a>(&self, value: &'a Bound<'_, PyAny>) -> Result<Option<ImplRef<'a>>, ()> {
        if value.get_type_ptr() as usize != self.type_address {
            return Err(());
        }
        // SAFETY: `value` is alive and exactly of the type whose tp_basicsize was checked
        // to cover `impl_offset + 8` when this reader was made (a type's basic size never
        // changes, and the type is kept alive by the reader's owner, so no other type can
        // take its address); the read is 8-aligned.
        let address = unsafe { value.as_ptr().cast::<u8>().add(self.impl_offset).cast::<usize>().read() };
        Ok(ImplRef::at_address(value, address))
    }
}

/// A byte offset of an aligned 8-byte word inside [`IMPL_WINDOW`], checked when made, so
/// that the reads of the guards' fast path need no check of their own.
#[derive(Clone, Copy, Debug)]
pub struct WordOffset(usize);

impl WordOffset {
    pub fn new(offset: usize) -> Option<WordOffset> {
        (offset % 8 == 0 && offset + 8 <= IMPL_WINDOW).then_some(WordOffset(offset))
    }

    pub fn offset(self) -> usize {
        self.0
    }
}

impl<'a> ImplRef<'a> {
    /// The impl's `StorageImpl`: the pointer word at `at` (None when NULL: no storage).
    /// Calibration verified `at` is the impl's `storage_` field, which every `TensorImpl`,
    /// subclasses included, has at the same place (it belongs to the base class).
    #[inline]
    pub fn storage(self, at: WordOffset) -> Option<StorageRef<'a>> {
        let address = usize::try_from(self.word(at)).ok()?;
        let storage = StorageRef {
            base: address as *const u8,
            _tensor: std::marker::PhantomData,
        };
        (address != 0 && address % 8 == 0).then_some(storage)
    }

    /// The 8-byte word at `offset`.
    #[inline]
    #[allow(clippy::cast_ptr_alignment)] // the impl and `WordOffset` are 8-aligned
    pub fn word(self, offset: WordOffset) -> u64 {
        // SAFETY: as in `read`: a live impl at least IMPL_WINDOW bytes long; `WordOffset`
        // guarantees an aligned word inside that window.
        unsafe { self.base.add(offset.0).cast::<u64>().read() }
    }

    /// The impl whose address is the object's word at `impl_offset`. The caller
    /// guarantees the object is a tensor of the calibrated type (checked by exact type).
    pub fn of(tensor: &'a Bound<'_, PyAny>, impl_offset: usize) -> Option<ImplRef<'a>> {
        Self::at_address(tensor, object_word(tensor, impl_offset)?)
    }

    /// From an address taken from `tensor._cdata` (calibration only).
    pub fn at_address(_tensor: &'a Bound<'_, PyAny>, address: usize) -> Option<ImplRef<'a>> {
        (address != 0 && address % 8 == 0)
            .then(|| ImplRef { base: address as *const u8, _tensor: std::marker::PhantomData })
    }

    fn read<T: Copy>(self, offset: usize) -> Option<T> {
        if offset % std::mem::align_of::<T>() != 0 || offset + std::mem::size_of::<T>() > IMPL_WINDOW {
            return None;
        }
        // SAFETY: `base` points at a live TensorImpl (the tensor outlives 'a) that is at
        // least IMPL_WINDOW bytes long in the layouts calibration accepts; the read is
        // aligned and inside that window.
        Some(unsafe { self.base.add(offset).cast::<T>().read() })
    }

    pub fn u64_at(self, offset: usize) -> Option<u64> {
        self.read(offset)
    }

    pub fn i64_at(self, offset: usize) -> Option<i64> {
        self.read(offset)
    }

    pub fn u16_at(self, offset: usize) -> Option<u16> {
        self.read(offset)
    }

    /// Three bytes (device type, index, has-value) packed into a u32.
    pub fn bytes3_at(self, offset: usize) -> Option<u32> {
        let bytes: [u8; 3] = [self.read(offset)?, self.read(offset + 1)?, self.read(offset + 2)?];
        Some(u32::from(bytes[0]) | u32::from(bytes[1]) << 8 | u32::from(bytes[2]) << 16)
    }

    /// Sizes and strides stored out of line (ndim above the inline capacity): `count`
    /// sizes then `count` strides at the pointer found at `pointer_offset`.
    pub fn out_of_line(self, pointer_offset: usize, count: usize, index: usize) -> Option<i64> {
        let pointer = self.u64_at(pointer_offset)? as usize;
        if pointer == 0 || pointer % 8 != 0 || index >= 2 * count {
            return None;
        }
        // SAFETY: calibration verified that, for tensors with more dims than fit inline,
        // this word points at a heap array of 2 * ndim int64 (sizes then strides) owned by
        // the live impl; `index` is inside it.
        Some(unsafe { (pointer as *const i64).add(index).read() })
    }
}

/// Bytes of `StorageImpl` we may read: its data pointer and its flag bytes (torch 2.x:
/// data at 16, flags at 56..63; the struct is over 100 bytes: the `DataPtr`, the byte
/// size, the flags, the materializer, the allocator, the Python object slot and the
/// extra metadata). Never read beyond.
pub const STORAGE_WINDOW: usize = 64;

/// A tensor's `StorageImpl`, valid while the tensor is alive (its impl holds a strong
/// reference to it).
#[derive(Clone, Copy)]
pub struct StorageRef<'a> {
    base: *const u8,
    _tensor: std::marker::PhantomData<&'a ()>,
}

/// A byte offset of an aligned 8-byte word inside [`STORAGE_WINDOW`], checked when made.
#[derive(Clone, Copy, Debug)]
pub struct StorageWord(usize);

impl StorageWord {
    pub fn new(offset: usize) -> Option<StorageWord> {
        (offset % 8 == 0 && offset + 8 <= STORAGE_WINDOW).then_some(StorageWord(offset))
    }
}

/// A byte offset inside [`STORAGE_WINDOW`], checked when made.
#[derive(Clone, Copy, Debug)]
pub struct StorageByte(usize);

impl StorageByte {
    pub fn new(offset: usize) -> Option<StorageByte> {
        (offset < STORAGE_WINDOW).then_some(StorageByte(offset))
    }
}

impl<'a> StorageRef<'a> {
    /// From an address taken from `tensor.untyped_storage()._cdata` (calibration only).
    pub fn at_address(_tensor: &'a Bound<'_, PyAny>, address: usize) -> Option<StorageRef<'a>> {
        let storage = StorageRef {
            base: address as *const u8,
            _tensor: std::marker::PhantomData,
        };
        (address != 0 && address % 8 == 0).then_some(storage)
    }

    /// The 8-byte word at `offset`.
    #[inline]
    #[allow(clippy::cast_ptr_alignment)] // the storage and `StorageWord` are 8-aligned
    pub fn word(self, offset: StorageWord) -> u64 {
        // SAFETY: `base` points at a live StorageImpl (held by the live tensor's impl for
        // 'a), at least STORAGE_WINDOW bytes long; `StorageWord` is an aligned word inside
        // that window.
        unsafe { self.base.add(offset.0).cast::<u64>().read() }
    }

    /// The byte at `offset`.
    #[inline]
    pub fn byte(self, offset: StorageByte) -> u8 {
        // SAFETY: as in `word`; `StorageByte` lies inside the window.
        unsafe { self.base.add(offset.0).read() }
    }
}

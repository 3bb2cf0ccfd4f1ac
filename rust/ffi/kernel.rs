//! Calls of generated CPU kernels, which all have one C ABI:
//! `extern "C" void kernel(void* const* buffers, const int64_t* sizes)`.
//!
//! The kernel's address comes from Python (ctypes finds it in the library the C++
//! generator compiled), and, as with ctypes, the Python code that hands it over vouches
//! that it is a function of this ABI, that the library stays mapped (`CpuKernel` keeps
//! its `owner` alive for that), and that it reads only as many buffers and sizes, and
//! only as many bytes of each buffer, as its caller passes.

use std::ffi::c_void;
use std::num::NonZeroUsize;

/// The one signature of generated CPU kernels.
type KernelEntry = unsafe extern "C" fn(*const *mut c_void, *const i64);

// Buffers are passed as an array of addresses (`usize`), read by C as `void*` values.
const _: () = assert!(std::mem::size_of::<usize>() == std::mem::size_of::<*mut c_void>());
const _: () = assert!(std::mem::align_of::<usize>() == std::mem::align_of::<*mut c_void>());

/// A generated kernel's entry point.
#[derive(Clone, Copy)]
pub struct KernelFunction(KernelEntry);

extern "C" fn noop(_buffers: *const *mut c_void, _sizes: *const i64) {}

impl KernelFunction {
    /// The function at `address` (see the module's contract).
    pub fn at_address(address: NonZeroUsize) -> KernelFunction {
        // SAFETY: a function pointer is a non-NULL address, so any non-zero address is a
        // valid value of the type; whether calling it is sound is the contract the Python
        // caller took on when it handed the address over (module docs, `CpuKernel`).
        KernelFunction(unsafe { std::mem::transmute::<usize, KernelEntry>(address.get()) })
    }

    /// A kernel that does nothing (to make the vectorcall type's first instance).
    pub fn noop() -> KernelFunction {
        KernelFunction(noop)
    }

    /// Calls the kernel with the data addresses of its tensors and its int arguments.
    #[inline]
    pub fn call(self, buffers: &[usize], sizes: &[i64]) {
        // SAFETY: per the module's contract, the function has this ABI and reads at most
        // `buffers.len()` addresses and `sizes.len()` ints, which both slices hold for the
        // whole call; `usize` has the size and alignment of `void*` (asserted above). The
        // buffers' memory is kept alive by the caller's references to the tensors.
        unsafe { (self.0)(buffers.as_ptr().cast::<*mut c_void>(), sizes.as_ptr()) }
    }
}

//! torch's thread-local modes read in C++ without a Python call: grad mode, inference
//! mode and the dispatch keys excluded on this thread (autocast is on for a device when its
//! `Autocast*` key is not excluded). The functions are looked up by their (Itanium C++ ABI)
//! names in torch's already-loaded `libc10`; `guards/torch_tls.rs` checks every reader
//! against torch's Python readers before any guard uses it.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CString};

type ReadFlag = unsafe extern "C" fn() -> bool;
type KeyExcluded = unsafe extern "C" fn(u16) -> bool;

const RTLD_NOW: c_int = 2;
const RTLD_NOLOAD: c_int = 4;

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// `bool c10::GradMode::is_enabled()`.
const GRAD_MODE: &str = "_ZN3c108GradMode10is_enabledEv";
/// `bool c10::InferenceMode::is_enabled()`.
const INFERENCE_MODE: &str = "_ZN3c1013InferenceMode10is_enabledEv";
/// `bool c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey)` (a `uint16_t` enum).
const KEY_EXCLUDED: &str = "_ZN3c104impl28tls_is_dispatch_key_excludedENS_11DispatchKeyE";

/// `c10::impl::raw_local_dispatch_key_set`, a thread-local `PODLocalDispatchKeySet`: two
/// 64-bit words (the included and excluded key sets, each stored XOR its default).
const RAW_KEY_SETS: &str = "_ZN3c104impl26raw_local_dispatch_key_setE";

thread_local! {
    /// This thread's address of `RAW_KEY_SETS` (dlsym answers per thread for TLS symbols).
    static RAW_KEY_SETS_HERE: Cell<*const u64> = const { Cell::new(std::ptr::null()) };
}

/// The readers, found in a loaded `libc10`.
pub struct TorchTls {
    /// The library's handle, for the per-thread lookup of `RAW_KEY_SETS`.
    handle: usize,
    grad_mode: ReadFlag,
    inference_mode: ReadFlag,
    key_excluded: KeyExcluded,
}

impl TorchTls {
    /// Finds the readers in `library` (a path), only if it is already loaded.
    pub fn open(library: &str) -> Option<TorchTls> {
        let path = CString::new(library).ok()?;
        // SAFETY: RTLD_NOLOAD never loads a library (no initialisers run); it returns a
        // handle to one already loaded, or NULL. The handle is kept for the process.
        let handle = unsafe { dlopen(path.as_ptr(), RTLD_NOW | RTLD_NOLOAD) };
        if handle.is_null() {
            return None;
        }
        let find = |name: &str| -> Option<*mut c_void> {
            let symbol = CString::new(name).ok()?;
            // SAFETY: a live handle and a NUL-terminated name.
            let address = unsafe { dlsym(handle, symbol.as_ptr()) };
            (!address.is_null()).then_some(address)
        };
        let (grad, inference, excluded) = (find(GRAD_MODE)?, find(INFERENCE_MODE)?, find(KEY_EXCLUDED)?);
        // SAFETY: each address is the function named above; for these signatures (no
        // arguments or one 16-bit integer, a bool result) the C++ ABI is the C ABI, and
        // they do not throw (they read thread-local state).
        unsafe {
            Some(TorchTls {
                handle: handle as usize,
                grad_mode: std::mem::transmute::<*mut c_void, ReadFlag>(grad),
                inference_mode: std::mem::transmute::<*mut c_void, ReadFlag>(inference),
                key_excluded: std::mem::transmute::<*mut c_void, KeyExcluded>(excluded),
            })
        }
    }

    pub fn grad_mode(&self) -> bool {
        // SAFETY: see `open`; reads this thread's state.
        unsafe { (self.grad_mode)() }
    }

    pub fn inference_mode(&self) -> bool {
        // SAFETY: see `open`; reads this thread's state.
        unsafe { (self.inference_mode)() }
    }

    /// This thread's two raw dispatch key set words, or None if the symbol is missing.
    pub fn raw_key_sets(&self) -> Option<[u64; 2]> {
        let mut address = RAW_KEY_SETS_HERE.with(Cell::get);
        if address.is_null() {
            let symbol = CString::new(RAW_KEY_SETS).ok()?;
            // SAFETY: a live handle and a NUL-terminated name; for a thread-local symbol
            // glibc returns this thread's instance.
            address = unsafe { dlsym(self.handle as *mut c_void, symbol.as_ptr()) }.cast::<u64>().cast_const();
            if address.is_null() {
                return None;
            }
            RAW_KEY_SETS_HERE.with(|here| here.set(address));
        }
        // SAFETY: this thread's live `PODLocalDispatchKeySet` (two aligned u64 words),
        // which lives as long as the thread; plain loads of state only this thread writes.
        Some(unsafe { [address.read(), address.add(1).read()] })
    }

    /// Whether dispatch key `key` is excluded on this thread (a bit test for any value).
    pub fn key_excluded(&self, key: u16) -> bool {
        // SAFETY: see `open`; callers pass values between two `DispatchKey` members of this
        // torch (`guards/torch_tls.rs`), all keys of its enum.
        unsafe { (self.key_excluded)(key) }
    }
}

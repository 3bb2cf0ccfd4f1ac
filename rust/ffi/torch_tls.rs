//! torch's thread-local modes read in C++ without a Python call: grad mode, inference
//! mode and the dispatch keys excluded on this thread (autocast is on for a device when its
//! `Autocast*` key is not excluded). The functions are looked up by their (Itanium C++ ABI)
//! names in torch's already-loaded `libc10`; `guards/torch_tls.rs` checks every reader
//! against torch's Python readers before any guard uses it.
//!
//! [`ThreadState`] is the cheaper way in: where this thread's `c10::AutogradState` (grad
//! and inference mode bits) and raw dispatch key sets lie in libc10's thread-local block,
//! found once per thread, so that one thread-local read of ours reaches all three modes.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CString};

type ReadFlag = unsafe extern "C" fn() -> bool;
type KeyExcluded = unsafe extern "C" fn(u16) -> bool;
type StateAddress = unsafe extern "C" fn() -> *const u8;
type ReadScalarType = unsafe extern "C" fn() -> i8;

const RTLD_NOW: c_int = 2;
const RTLD_NOLOAD: c_int = 4;
/// glibc's `dlinfo` request for this thread's thread-local block of a library.
const RTLD_DI_TLS_DATA: c_int = 10;

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlinfo(handle: *mut c_void, request: c_int, info: *mut c_void) -> c_int;
}

/// `bool c10::GradMode::is_enabled()`.
const GRAD_MODE: &str = "_ZN3c108GradMode10is_enabledEv";
/// `bool c10::InferenceMode::is_enabled()`.
const INFERENCE_MODE: &str = "_ZN3c1013InferenceMode10is_enabledEv";
/// `bool c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey)` (a `uint16_t` enum).
const KEY_EXCLUDED: &str = "_ZN3c104impl28tls_is_dispatch_key_excludedENS_11DispatchKeyE";
/// `c10::AutogradState& c10::AutogradState::get_tls_state()`: this thread's grad mode,
/// inference mode (bit fields) and more, in libc10's thread-local block.
const AUTOGRAD_STATE: &str = "_ZN3c1013AutogradState13get_tls_stateEv";

/// `c10::ScalarType c10::get_default_dtype_as_scalartype()`: the process's default dtype
/// (`torch.get_default_dtype()`), an `int8_t` enum.
const DEFAULT_DTYPE: &str = "_ZN3c1031get_default_dtype_as_scalartypeEv";

/// `c10::impl::raw_local_dispatch_key_set`, a thread-local `PODLocalDispatchKeySet`: two
/// 64-bit words (the included and excluded key sets, each stored XOR its default).
const RAW_KEY_SETS: &str = "_ZN3c104impl26raw_local_dispatch_key_setE";

thread_local! {
    /// This thread's [`ThreadState`], once looked for.
    static HERE: Cell<Lookup> = const { Cell::new(Lookup::NotYet) };
}

#[derive(Clone, Copy)]
enum Lookup {
    NotYet,
    Missing,
    Found(ThreadState),
}

/// Where this thread's torch modes lie: its `AutogradState` and its two raw dispatch key
/// set words, both in libc10's thread-local block for this thread, the state below the
/// words (so every byte from the state up to the words is inside that block).
#[derive(Clone, Copy)]
pub struct ThreadState {
    autograd: *const u8,
    key_sets: *const u64,
}

impl ThreadState {
    /// Bytes of the thread-local block readable from the `AutogradState` on.
    pub fn autograd_span(self) -> usize {
        self.key_sets as usize - self.autograd as usize
    }

    /// The `AutogradState`'s byte at `offset`, if it lies before the key set words.
    #[inline]
    pub fn autograd_byte(self, offset: usize) -> Option<u8> {
        if offset >= self.autograd_span() {
            return None;
        }
        // SAFETY: `autograd + offset` is below `key_sets`, and both lie in this thread's
        // libc10 thread-local block (checked in `TorchTls::find_thread_state`), which lives
        // as long as the thread; a plain byte load of state only this thread writes.
        Some(unsafe { self.autograd.add(offset).read() })
    }

    /// The two raw key set words.
    #[inline]
    pub fn key_sets(self) -> [u64; 2] {
        // SAFETY: this thread's live `PODLocalDispatchKeySet` (two aligned u64 words, the
        // symbol's size), which lives as long as the thread; plain loads of state only this
        // thread writes.
        unsafe { [self.key_sets.read(), self.key_sets.add(1).read()] }
    }
}

/// The readers, found in a loaded `libc10`.
pub struct TorchTls {
    /// The library's handle, for the per-thread lookup of `RAW_KEY_SETS`.
    handle: usize,
    grad_mode: ReadFlag,
    inference_mode: ReadFlag,
    key_excluded: KeyExcluded,
    autograd_state: Option<StateAddress>,
    default_dtype: Option<ReadScalarType>,
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
        let (autograd_state, default_dtype) = (find(AUTOGRAD_STATE), find(DEFAULT_DTYPE));
        // SAFETY: each address is the function named above; for these signatures (no
        // arguments or one 16-bit integer, a bool or `int8_t` enum result) the C++ ABI is
        // the C ABI, and they do not throw (they read thread-local or global state).
        unsafe {
            Some(TorchTls {
                handle: handle as usize,
                grad_mode: std::mem::transmute::<*mut c_void, ReadFlag>(grad),
                inference_mode: std::mem::transmute::<*mut c_void, ReadFlag>(inference),
                key_excluded: std::mem::transmute::<*mut c_void, KeyExcluded>(excluded),
                // (a reference is returned as a pointer; the function only reads TLS)
                autograd_state: autograd_state.map(|f| std::mem::transmute::<*mut c_void, StateAddress>(f)),
                default_dtype: default_dtype.map(|f| std::mem::transmute::<*mut c_void, ReadScalarType>(f)),
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

    /// The default dtype's `c10::ScalarType` code, or None if the symbol is missing.
    #[inline]
    pub fn default_scalar_type(&self) -> Option<i8> {
        // SAFETY: see `open`; reads one global word (a `TypeMeta` index) and maps it.
        self.default_dtype.map(|read| unsafe { read() })
    }

    /// This thread's two raw dispatch key set words, or None if the symbol is missing.
    pub fn raw_key_sets(&self) -> Option<[u64; 2]> {
        self.thread_state().map(ThreadState::key_sets)
    }

    /// This thread's [`ThreadState`] (one thread-local read once found), or None.
    #[inline]
    pub fn thread_state(&self) -> Option<ThreadState> {
        match HERE.with(Cell::get) {
            Lookup::Found(state) => Some(state),
            Lookup::Missing => None,
            Lookup::NotYet => {
                let found = self.find_thread_state();
                HERE.with(|here| here.set(found.map_or(Lookup::Missing, Lookup::Found)));
                found
            }
        }
    }

    #[cold]
    fn find_thread_state(&self) -> Option<ThreadState> {
        let symbol = CString::new(RAW_KEY_SETS).ok()?;
        let handle = self.handle as *mut c_void;
        // SAFETY: a live handle and a NUL-terminated name; for a thread-local symbol glibc
        // returns this thread's instance (allocating the block if needed).
        let key_sets = unsafe { dlsym(handle, symbol.as_ptr()) }.cast::<u64>().cast_const();
        let mut block: *mut c_void = std::ptr::null_mut();
        // SAFETY: RTLD_DI_TLS_DATA writes one pointer (this thread's block of the library,
        // or NULL); the handle is live.
        let status = unsafe { dlinfo(handle, RTLD_DI_TLS_DATA, std::ptr::addr_of_mut!(block).cast()) };
        // SAFETY: see `open`: returns a reference to this thread's state, reading TLS only.
        let autograd = self.autograd_state.map_or(std::ptr::null(), |get| unsafe { get() });
        let in_block = status == 0 && !block.is_null() && !key_sets.is_null() && !autograd.is_null();
        // The state must lie in the block, below the key set words (which are in it).
        let ordered = (block as usize) <= (autograd as usize) && (autograd as usize) < (key_sets as usize);
        (in_block && ordered).then_some(ThreadState { autograd, key_sets })
    }

    /// Whether dispatch key `key` is excluded on this thread (a bit test for any value).
    pub fn key_excluded(&self, key: u16) -> bool {
        // SAFETY: see `open`; callers pass values between two `DispatchKey` members of this
        // torch (`guards/torch_tls.rs`), all keys of its enum.
        unsafe { (self.key_excluded)(key) }
    }
}

//! The only `unsafe` code in fastdynamo.
//!
//! Everything CPython-version-specific on the Rust side lives here: the layout of
//! `_PyInterpreterFrame` and `PyCodeObject` (reported by the C shim), the evaluator hook,
//! code extras, raw calls, the tensor layout reads of the guard fast path and of the CPU
//! kernel launcher, and the call of a generated kernel. The rest of the crate sees small
//! safe types: [`frame::FrameRef`], [`GilCell`], and functions that take a `Python<'py>`
//! token as proof that the GIL is held.

pub mod c_recursion;
pub mod code_extra;
pub mod dict;
pub mod frame;
pub mod function;
pub mod hook;
pub mod kernel;
pub mod layout;
pub mod list;
pub mod object;
pub mod stack;
pub mod tensor;
pub mod torch_tls;
pub mod vectorcall;

use pyo3::Python;
use std::cell::RefCell;

/// A `RefCell` that may live in a `static` or a frozen pyclass: every access takes a
/// `Python<'py>` token, so accesses are serialised by the GIL.
pub struct GilCell<T>(RefCell<T>);

// SAFETY: the inner RefCell is reached only through `borrow`/`borrow_mut`, which demand a
// `Python` token; holding one means this thread holds the GIL, so no two threads touch it
// at once. T is only ever dropped with the GIL held too (pyclass drops and statics that are
// never dropped).
unsafe impl<T: Send> Sync for GilCell<T> {}

impl<T> GilCell<T> {
    pub const fn new(value: T) -> Self {
        Self(RefCell::new(value))
    }

    /// Shared access; `None` if a mutable borrow is live (re-entrancy), never a panic.
    pub fn try_borrow<'a>(&'a self, _py: Python<'_>) -> Option<std::cell::Ref<'a, T>> {
        self.0.try_borrow().ok()
    }

    /// Exclusive access; `None` if any borrow is live (re-entrancy), never a panic.
    pub fn try_borrow_mut<'a>(&'a self, _py: Python<'_>) -> Option<std::cell::RefMut<'a, T>> {
        self.0.try_borrow_mut().ok()
    }
}

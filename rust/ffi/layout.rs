//! Offsets of the CPython internals we read, as the C shim's compiler sees them in the
//! headers of the interpreter this crate is built for (3.11, 3.12 or 3.13).

use std::sync::OnceLock;

/// Byte offsets into `_PyInterpreterFrame`, `PyCodeObject` and `PyFunctionObject`. Mirrors `fd_layout_t` in `shim.c`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct Layout {
    pub frame_func: usize,
    pub frame_globals: usize,
    pub frame_builtins: usize,
    pub frame_code: usize,
    /// `prev_instr` (3.11, 3.12) or `instr_ptr` (3.13).
    pub frame_instr: usize,
    pub frame_frame_obj: usize,
    pub frame_owner: usize,
    pub frame_localsplus: usize,
    pub code_flags: usize,
    pub code_adaptive: usize,
    pub code_nlocalsplus: usize,
    /// `co_extra`: where the per-code slots hang (see `code_extra::verify_direct_read`).
    pub code_extra: usize,
    pub func_closure: usize,
    /// Where a fresh frame's instruction pointer points, in bytes from the first code
    /// unit (`-2` before 3.13, `0` from 3.13).
    pub fresh_instr_delta: isize,
}

extern "C" {
    fn fd_layout(out: *mut Layout);
}

static LAYOUT: OnceLock<Layout> = OnceLock::new();

/// The layout, read from the shim on first use.
#[inline]
pub fn layout() -> &'static Layout {
    LAYOUT.get_or_init(|| {
        let mut out = Layout::default();
        // SAFETY: `fd_layout` only writes the fields of the struct it is given, whose C
        // declaration `fd_layout_t` has the same field order and types (size_t, then one
        // ptrdiff_t: usize and isize on the targets we build for).
        unsafe { fd_layout(&raw mut out) };
        out
    })
}

//! Offsets of the CPython 3.11 internals we read, as the C shim's compiler sees them.

use std::sync::OnceLock;

/// Byte offsets into `_PyInterpreterFrame`, `PyCodeObject` and `PyFunctionObject`. Mirrors `fd_layout_t` in `shim.c`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct Layout {
    pub frame_func: usize,
    pub frame_globals: usize,
    pub frame_builtins: usize,
    pub frame_code: usize,
    pub frame_prev_instr: usize,
    pub frame_owner: usize,
    pub frame_localsplus: usize,
    pub code_flags: usize,
    pub code_adaptive: usize,
    pub code_nlocalsplus: usize,
    /// `co_extra`: where the per-code slots hang (see `code_extra::verify_direct_read`).
    pub code_extra: usize,
    pub func_closure: usize,
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
        // declaration `fd_layout_t` has the same field order and types (all size_t).
        unsafe { fd_layout(&raw mut out) };
        out
    })
}

"""The runtime's fast paths are on for the CPython running the tests (3.11, 3.12, 3.13).

Both are verified at import and silently turned off when the check fails, after which
everything still works, only slower: the other native tests would pass either way, so
these assert that the checks passed on this interpreter and this torch.
"""
from __future__ import annotations

import sys

import torch

from native_helpers import entry_for, only


def test_code_extra_is_read_in_place(native):
    # The probe compared the in-place read with `_PyCode_GetExtra`
    # (`PyUnstable_Code_GetExtra` from 3.12) on a fresh code object.
    assert native._code_extra_read_in_place(), f"co_extra layout not verified on {sys.version}"


def test_tensor_guard_fast_path_is_on(native):
    layout = native.tensor_layout()
    assert layout is not None, f"TensorImpl layout not verified for torch {torch.__version__}"
    assert layout["impl_offset"] % 8 == 0


def fresh(x):
    return x + 1


def fresh_transformed(x):
    return x + 100


def test_fresh_frames_are_answered(native):
    """The hook reads the instruction pointer where this version keeps it (3.11/3.12's
    `prev_instr`, one code unit before the first; 3.13's `instr_ptr`, at the first): a
    fresh frame must be seen as fresh, or it would never be compiled nor answered."""
    native.set_callback(only(fresh, lambda f: entry_for(native, fresh_transformed, [])))
    assert [fresh(1), fresh(2)] == [101, 102]
    native.set_callback(None)
    assert [entry.hits for entry in native.cache_entries(fresh.__code__)] == [1]

"""``_native.CpuKernel``: calling generated C++ CPU kernels through their one C ABI.

A small C++ library is compiled with g++ for these tests. Its kernels record what they
were given (the ``buffers`` and ``sizes`` arrays) and count their calls, so each test
states what the kernel saw: the data addresses torch's ``data_ptr()`` gives, the ints,
and for every rejected call that the kernel was not called at all. ``python_reads``
says whether an address was read in place or asked of torch in Python.
"""
from __future__ import annotations

import ctypes
import gc
import subprocess
import sys
import threading
import time
import weakref

import psutil
import pytest
import torch

from fastdynamo import _native
from fastdynamo._native import CpuKernel

SOURCE = r"""
#include <stdint.h>
#include <time.h>
extern "C" {
int64_t calls = 0;
void* seen_buffers[64];
int64_t seen_sizes[64];

// out[i] = x[i] + y[i] for i < sizes[0] (float32)
void add_f32(void* const* buffers, const int64_t* sizes) {
    calls++;
    const float* x = (const float*)buffers[0];
    const float* y = (const float*)buffers[1];
    float* out = (float*)buffers[2];
    for (int64_t i = 0; i < sizes[0]; i++) out[i] = x[i] + y[i];
}

// records sizes[0] buffers and sizes[1] sizes (both counts included)
void record(void* const* buffers, const int64_t* sizes) {
    calls++;
    for (int64_t i = 0; i < sizes[0]; i++) seen_buffers[i] = buffers[i];
    for (int64_t i = 0; i < sizes[1]; i++) seen_sizes[i] = sizes[i];
}

// *(int64_t*)buffers[0] = sizes[0]
void write_size(void* const* buffers, const int64_t* sizes) {
    calls++;
    *(int64_t*)buffers[0] = sizes[0];
}

// started[0] = 1, then waits until flag[0] != 0 (result[0] = 1) or sizes[0] microseconds
// passed (result[0] = 0). Buffers: flag, result, started (int64).
void wait_for_flag(void* const* buffers, const int64_t* sizes) {
    calls++;
    volatile int64_t* flag = (volatile int64_t*)buffers[0];
    int64_t* result = (int64_t*)buffers[1];
    *(volatile int64_t*)buffers[2] = 1;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        if (*flag) { result[0] = 1; return; }
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t elapsed = (now.tv_sec - start.tv_sec) * 1000000 + (now.tv_nsec - start.tv_nsec) / 1000;
        if (elapsed >= sizes[0]) { result[0] = 0; return; }
    }
}
}
"""

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
          torch.uint8, torch.bool]


@pytest.fixture(scope="module")
def library_path(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cpu_kernel")
    source, library = directory / "kernels.cpp", directory / "kernels.so"
    source.write_text(SOURCE)
    subprocess.run(["g++", "-O2", "-shared", "-fPIC", str(source), "-o", str(library)], check=True)
    return str(library)


@pytest.fixture(scope="module")
def lib(library_path):
    return ctypes.CDLL(library_path)


@pytest.fixture(autouse=True)
def in_place_reads():
    """Every test starts with in-place reads on and leaves them so."""
    previous = _native._cpu_kernel_force_python(False)
    yield
    _native._cpu_kernel_force_python(previous)


def address(lib, name):
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


def kernel(lib, name, dtypes, int_count, **options):
    return CpuKernel(address(lib, name), name, dtypes, int_count, lib, **options)


def calls(lib):
    return ctypes.c_int64.in_dll(lib, "calls").value


def seen_buffers(lib, count):
    return [b or 0 for b in (ctypes.c_void_p * 64).in_dll(lib, "seen_buffers")[:count]]


def seen_sizes(lib, count):
    return list((ctypes.c_int64 * 64).in_dll(lib, "seen_sizes")[:count])


def recorded(lib, tensors, extra=(), dtypes=None):
    """What ``record`` saw when called with ``tensors`` and the ints ``extra``."""
    ints = [len(tensors), 2 + len(extra), *extra]
    record = kernel(lib, "record", dtypes or [t.dtype for t in tensors], len(ints))
    record(*tensors, *ints)
    return record, seen_buffers(lib, len(tensors)), seen_sizes(lib, len(ints))


def kinds(dtype):
    """Tensors of ``dtype`` whose addresses differ in how torch makes them."""
    base = torch.zeros(48, dtype=dtype)
    with torch.inference_mode():
        inference = torch.zeros(12, dtype=dtype)[2:]
    kinds = {
        "contiguous": base,
        "offset": base[3:],
        "transposed": base[6:].view(6, 7).t(),
        "strided": base[1::5],
        "empty": torch.zeros(0, dtype=dtype),
        "empty with offset": base[5:5],
        "0-d": base[7],
        "parameter": torch.nn.Parameter(base[9:], requires_grad=False),
        "inference": inference,
        "frombuffer": torch.frombuffer(bytearray(64), dtype=dtype)[1:],
    }
    if dtype.is_floating_point:
        kinds["parameter with grad"] = torch.nn.Parameter(torch.zeros(20, dtype=dtype)[4:])
        kinds["requires grad"] = torch.zeros(5, dtype=dtype, requires_grad=True)
    return kinds


def test_the_data_layout_is_verified_on_this_torch():
    layout = _native._cpu_kernel_data_layout()
    assert layout is not None, "in-place reads are off: every call would ask torch in Python"
    assert set(layout) == {"storage_pointer_offset", "storage_offset_offset", "numel_offset",
                           "storage_data_offset", "storage_check_offset"}


CALIBRATED_INSIDE_MODES = """
import ctypes, sys, torch
from torch._subclasses.fake_tensor import FakeTensorMode
from fastdynamo import _native
lib = ctypes.CDLL(sys.argv[1])
address = ctypes.cast(lib.write_size, ctypes.c_void_p).value
torch.set_default_device("meta")
with torch.inference_mode(), FakeTensorMode():
    write = _native.CpuKernel(address, "write_size", [torch.int64], 1, lib)
    calibrated = _native._cpu_kernel_data_layout() is not None, _native.tensor_layout() is not None
torch.set_default_device("cpu")
buffer = torch.zeros(3, dtype=torch.int64)
write(buffer[1:], 7)
print(calibrated, buffer.tolist(), write.python_reads)
"""


def test_calibration_and_kernels_made_inside_torch_modes_read_in_place(library_path, subprocess_env):
    # Both calibrations run once, at first use, which may come inside a fake mode,
    # inference mode or another default device: their probes are made outside them.
    result = subprocess.run([sys.executable, "-c", CALIBRATED_INSIDE_MODES, library_path],
                            env=subprocess_env(interpreter=False), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "(True, True) [0, 7, 0] 0"


def test_add_computes_and_reads_in_place(lib):
    add = kernel(lib, "add_f32", [torch.float32] * 3, 1)
    x, y, out = torch.arange(10.0), torch.full((10,), 0.5), torch.zeros(10)
    before = calls(lib)
    assert add(x, y, out, 10) is None
    assert calls(lib) == before + 1
    assert torch.equal(out, x + y)
    assert add.python_reads == 0


def test_a_write_lands_at_the_views_offset(lib):
    write = kernel(lib, "write_size", [torch.int64], 1)
    buffer = torch.zeros(8, dtype=torch.int64)
    write(buffer[3:], 42)
    write(buffer.view(2, 4).t()[1], -7)  # buffer[1]
    assert buffer.tolist() == [0, -7, 0, 42, 0, 0, 0, 0]
    assert write.python_reads == 0


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_buffers_are_data_ptr_of_each_tensor(lib, dtype):
    tensors = list(kinds(dtype).values())
    record, buffers, _ = recorded(lib, tensors)
    assert buffers == [t.data_ptr() for t in tensors]
    assert record.python_reads == 0
    assert buffers[list(kinds(dtype)).index("empty")] == 0


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_python_path_gives_the_same_buffers(lib, dtype):
    tensors = list(kinds(dtype).values())
    _native._cpu_kernel_force_python(True)
    record, buffers, _ = recorded(lib, tensors)
    assert buffers == [t.data_ptr() for t in tensors]
    assert record.python_reads == len(tensors)


def test_ints_are_passed_as_int64(lib):
    extremes = [0, -1, 7, 2**63 - 1, -(2**63), 10**12]
    _, _, sizes = recorded(lib, [torch.zeros(2)], extremes)
    assert sizes == [1, 2 + len(extremes), *extremes]


def test_an_int_subclass_is_an_int(lib):
    class Size(int):
        pass

    _, _, sizes = recorded(lib, [], [Size(5)])
    assert sizes == [0, 3, 5]


def test_many_arguments(lib):
    # more than the 16 kept on the stack, for both arrays
    tensors = [torch.zeros(3, dtype=DTYPES[i % len(DTYPES)])[i % 3:] for i in range(20)]
    extra = list(range(-9, 9))
    record, buffers, sizes = recorded(lib, tensors, extra)
    assert buffers == [t.data_ptr() for t in tensors]
    assert sizes == [20, 20, *extra]
    assert record.python_reads == 0


class SubTensor(torch.Tensor):
    pass


def test_tensors_read_through_python(lib):
    subclass = torch.arange(6.0).as_subclass(SubTensor)[2:]
    record, buffers, _ = recorded(lib, [subclass, torch.zeros(3)])
    assert buffers == [subclass.data_ptr(), buffers[1]]
    assert record.python_reads == 1  # the subclass; the plain tensor was read in place


def test_a_copy_on_write_tensor_is_materialised_before_a_write(lib):
    source = torch.zeros(4, dtype=torch.int64)
    clone = torch._lazy_clone(source)
    assert torch._C._is_cow_tensor(clone)
    write = kernel(lib, "write_size", [torch.int64], 1)
    write(clone, 9)
    assert write.python_reads == 1
    assert not torch._C._is_cow_tensor(clone)
    assert clone.tolist() == [9, 0, 0, 0]
    assert source.tolist() == [0, 0, 0, 0]


def test_an_error_of_data_ptr_propagates_without_a_call(lib):
    guarded = torch.zeros(4, dtype=torch.int64)
    torch._C._set_throw_on_mutable_data_ptr(guarded)
    write = kernel(lib, "write_size", [torch.int64], 1)
    before = calls(lib)
    with pytest.raises(RuntimeError):
        write(guarded, 1)
    assert calls(lib) == before


def sparse():
    return torch.zeros(3, 3).to_sparse()


WRONG_TENSORS = [
    ("a list", lambda: [1.0, 2.0], "must be a torch.Tensor, got list"),
    ("None", lambda: None, "must be a torch.Tensor, got NoneType"),
    ("meta", lambda: torch.zeros(4, device="meta"), "must be on the CPU, got a tensor on meta"),
    ("float64", lambda: torch.zeros(4, dtype=torch.float64),
     "must have dtype torch.float32, got torch.float64"),
    ("int32", lambda: torch.zeros(4, dtype=torch.int32), "must have dtype torch.float32, got torch.int32"),
    ("sparse", sparse, "must be a strided \\(dense\\) tensor, got layout torch.sparse_coo"),
    ("negative bit", lambda: torch._neg_view(torch.ones(4)), "is a lazy view \\(is_neg\\(\\) is True\\)"),
]


@pytest.mark.parametrize("force_python", [False, True], ids=["in place", "python"])
@pytest.mark.parametrize(("case", "make", "message"), WRONG_TENSORS, ids=[c[0] for c in WRONG_TENSORS])
def test_a_wrong_tensor_raises_and_nothing_is_called(lib, force_python, case, make, message):
    _native._cpu_kernel_force_python(force_python)
    add = kernel(lib, "add_f32", [torch.float32] * 3, 1)
    good = torch.zeros(4)
    before = calls(lib)
    with pytest.raises(TypeError, match=f"^add_f32\\(\\): the tensor at position 1 \\(buffers\\[1\\]\\) {message}"):
        add(good, make(), good, 4)
    assert calls(lib) == before


def test_a_conjugate_view_raises(lib):
    record = kernel(lib, "record", [torch.complex64], 2)
    before = calls(lib)
    with pytest.raises(TypeError, match="is a lazy view \\(is_conj\\(\\) is True\\): pass t.resolve_conj\\(\\)"):
        record(torch.ones(2, dtype=torch.complex64).conj(), 1, 2)
    assert calls(lib) == before


WRONG_INTS = [
    ("float", 4.0, TypeError, "must be an int, got float"),
    ("bool", True, TypeError, "must be an int, got bool"),
    ("str", "4", TypeError, "must be an int, got str"),
    ("tensor", torch.tensor(4), TypeError, "must be an int, got Tensor"),
    ("too big", 2**63, OverflowError, "does not fit in int64: 9223372036854775808"),
    ("too small", -(2**63) - 1, OverflowError, "does not fit in int64"),
]


@pytest.mark.parametrize(("case", "value", "error", "message"), WRONG_INTS, ids=[c[0] for c in WRONG_INTS])
def test_a_wrong_int_raises_and_nothing_is_called(lib, case, value, error, message):
    add = kernel(lib, "add_f32", [torch.float32] * 3, 1)
    good = torch.zeros(4)
    before = calls(lib)
    with pytest.raises(error, match=f"^add_f32\\(\\): the int at position 3 \\(sizes\\[0\\]\\) {message}"):
        add(good, good, good, value)
    assert calls(lib) == before


def test_a_wrong_argument_count_raises_and_nothing_is_called(lib):
    add = kernel(lib, "add_f32", [torch.float32] * 3, 1)
    x = torch.zeros(4)
    before = calls(lib)
    expected = r"^add_f32\(\) takes 4 positional arguments \(3 tensors, then 1 int\) but {} were given$"
    for arguments in [(), (x, x, x), (x, x, x, 4, 4)]:
        with pytest.raises(TypeError, match=expected.format(len(arguments))):
            add(*arguments)
    with pytest.raises(TypeError, match=r"^add_f32\(\) takes no keyword arguments$"):
        add(x, x, x, n=4)
    with pytest.raises(TypeError, match=r"^add_f32\(\) takes no keyword arguments$"):
        add(x, x, x, 4, n=4)
    assert calls(lib) == before


def test_the_type_call_slot_checks_the_same(lib):
    # `CpuKernel.__call__` is PyO3's tp_call, for callers that do not use vectorcall
    add = kernel(lib, "add_f32", [torch.float32] * 3, 1)
    x, out = torch.ones(3), torch.zeros(3)
    CpuKernel.__call__(add, x, x, out, 3)
    assert out.tolist() == [2.0, 2.0, 2.0]
    before = calls(lib)
    with pytest.raises(TypeError, match="takes no keyword arguments"):
        CpuKernel.__call__(add, x, x, out, n=3)
    with pytest.raises(TypeError, match="must have dtype torch.float32"):
        CpuKernel.__call__(add, x, x.double(), out, 3)
    assert calls(lib) == before
    assert callable(add)


def test_a_kernel_on_a_class_does_not_bind(lib):
    class Holder:
        write = kernel(lib, "write_size", [torch.int64], 1)

    buffer = torch.zeros(1, dtype=torch.int64)
    Holder().write(buffer, 5)  # no `self` passed first
    assert buffer.item() == 5


BAD_CONSTRUCTIONS = [
    ("address 0", dict(address=0), ValueError, "address must be a positive int, got 0"),
    ("negative address", dict(address=-8), ValueError, "address must be a positive int, got -8"),
    ("address None", dict(address=None), TypeError, "address must be an int, got NoneType"),
    ("address str", dict(address="0x10"), TypeError, "address must be an int, got str"),
    ("negative count", dict(int_count=-1), ValueError, "int_count must be between 0 and 2\\*\\*20, got -1"),
    ("count str", dict(int_count="1"), TypeError, "int_count must be an int, got str"),
    ("dtype str", dict(dtypes=["float32"]), TypeError, "dtypes must be torch.dtype objects, got str"),
    ("dtype type", dict(dtypes=[float]), TypeError, "dtypes must be torch.dtype objects, got type"),
    ("dtypes not iterable", dict(dtypes=3), TypeError, "not iterable"),
    ("empty name", dict(name=""), ValueError, "a kernel's name must not be empty"),
]


@pytest.mark.parametrize(("case", "change", "error", "message"), BAD_CONSTRUCTIONS,
                         ids=[c[0] for c in BAD_CONSTRUCTIONS])
def test_bad_constructions_raise(lib, case, change, error, message):
    arguments = dict(address=address(lib, "record"), name="record", dtypes=[torch.float32],
                     int_count=2, owner=lib)
    arguments.update(change)
    with pytest.raises(error, match=message):
        CpuKernel(**arguments)


def test_attributes(lib):
    record = kernel(lib, "record", (torch.float32, torch.int64), 2, release_gil=True)
    assert record.name == "record"
    assert record.address == address(lib, "record")
    assert record.dtypes == (torch.float32, torch.int64)
    assert record.int_count == 2
    assert record.release_gil is True
    assert repr(record) == "<CpuKernel record(torch.float32, torch.int64; int_count=2)>"
    assert kernel(lib, "record", [], 2).release_gil is False


def test_the_owner_is_kept_alive(library_path):
    owner = ctypes.CDLL(library_path)
    alive = weakref.ref(owner)
    write = CpuKernel(address(owner, "write_size"), "write_size", [torch.int64], 1, owner)
    del owner
    gc.collect()
    assert alive() is not None
    buffer = torch.zeros(1, dtype=torch.int64)
    write(buffer, 3)
    assert buffer.item() == 3
    del write
    gc.collect()
    assert alive() is None


def _refcounts(*objects):
    gc.collect()
    return [sys.getrefcount(o) for o in objects]


@pytest.mark.parametrize("force_python", [False, True], ids=["in place", "python"])
def test_calls_leak_nothing(lib, force_python):
    _native._cpu_kernel_force_python(force_python)
    add = kernel(lib, "add_f32", [torch.float32] * 3, 1)
    x, y, out, wrong = torch.ones(4), torch.ones(4)[1:], torch.zeros(4), torch.zeros(4, dtype=torch.int64)
    count = 10**6 + 1  # not a cached small int
    for _ in range(1000):  # warm up allocator pools
        add(x, y, out, 3)
    before, rss_before = _refcounts(add, x, y, out, wrong, count, torch.float32), psutil.Process().memory_info().rss
    for _ in range(100_000 if not force_python else 20_000):
        add(x, y, out, 3)
    for _ in range(2000):
        try:
            add(x, wrong, out, count)
        except TypeError:
            pass
        try:
            add(x, y, out, 2.5)
        except TypeError:
            pass
    after = _refcounts(add, x, y, out, wrong, count, torch.float32)  # not inside assert (rewriting)
    assert after == before
    assert psutil.Process().memory_info().rss - rss_before < 4 * 1024 * 1024


@pytest.mark.parametrize("release_gil", [False, True])
def test_release_gil_lets_another_thread_run_during_the_call(lib, release_gil):
    """The kernel waits for a flag that only a second Python thread sets, once it sees the
    kernel started: it can only do so while the kernel runs if the GIL is released."""
    wait = kernel(lib, "wait_for_flag", [torch.int64] * 3, 1, release_gil=release_gil)
    flag, result, started = (torch.zeros(1, dtype=torch.int64) for _ in range(3))

    def set_flag_once_started():
        deadline = time.monotonic() + 10
        while started.item() == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        flag.fill_(1)

    thread = threading.Thread(target=set_flag_once_started)
    thread.start()
    try:
        # The GIL-holding case spins for its whole timeout; the released one returns early.
        wait(flag, result, started, 5_000_000 if release_gil else 200_000)
    finally:
        thread.join(timeout=15)
    assert started.item() == 1
    assert result.item() == (1 if release_gil else 0)

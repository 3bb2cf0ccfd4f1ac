/* The only C in fastdynamo: CPython 3.11-3.13 internals that are not exported.
 *
 * It decides nothing. It reports the offsets of the internal struct fields the Rust side
 * reads (computed here by the compiler from this interpreter's own headers, read by Rust
 * on first use), wraps the evaluator getter/setter so Rust needs no per-version
 * `_PyFrameEvalFunction`, and, on 3.12+, clears and pops a frame the hook answered
 * itself (CPython leaves that to the evaluator from 3.12 on). */
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#include <internal/pycore_code.h>
#if PY_VERSION_HEX >= 0x030D0000
#include <internal/pycore_ceval.h>
#endif
#undef Py_BUILD_CORE

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "fastdynamo's shim is written for CPython 3.11, 3.12 and 3.13"
#endif
#ifdef Py_GIL_DISABLED
#error "fastdynamo does not support free-threaded CPython builds"
#endif

/* The names of the fields that were renamed: the code (3.13: `f_executable`, always a code
 * object in the frames the hook sees), the function (3.12: `f_funcobj`) and the
 * instruction pointer (3.13: `instr_ptr`, the next instruction rather than the last). */
#if PY_VERSION_HEX >= 0x030D0000
#define FD_FRAME_CODE f_executable
#define FD_FRAME_INSTR instr_ptr
#define FD_FRESH_INSTR_UNITS 0
#else
#define FD_FRAME_CODE f_code
#define FD_FRAME_INSTR prev_instr
#define FD_FRESH_INSTR_UNITS (-1)
#endif
#if PY_VERSION_HEX >= 0x030C0000
#define FD_FRAME_FUNC f_funcobj
#else
#define FD_FRAME_FUNC f_func
#endif

/* Field offsets the Rust side relies on, in bytes. Field order must match
 * `Layout` in rust/ffi/layout.rs. */
typedef struct {
    size_t frame_func;
    size_t frame_globals;
    size_t frame_builtins;
    size_t frame_code;
    size_t frame_instr;
    size_t frame_frame_obj;
    size_t frame_owner;
    size_t frame_localsplus;
    size_t code_flags;
    size_t code_adaptive;
    size_t code_nlocalsplus;
    size_t code_extra;
    size_t func_closure;
    /* Where a fresh frame's instruction pointer points, in bytes from the first code
     * unit: -2 on 3.11/3.12 (`prev_instr`, one unit before), 0 on 3.13 (`instr_ptr`). */
    ptrdiff_t fresh_instr_delta;
} fd_layout_t;

void fd_layout(fd_layout_t *out) {
    out->frame_func = offsetof(_PyInterpreterFrame, FD_FRAME_FUNC);
    out->frame_globals = offsetof(_PyInterpreterFrame, f_globals);
    out->frame_builtins = offsetof(_PyInterpreterFrame, f_builtins);
    out->frame_code = offsetof(_PyInterpreterFrame, FD_FRAME_CODE);
    out->frame_instr = offsetof(_PyInterpreterFrame, FD_FRAME_INSTR);
    out->frame_frame_obj = offsetof(_PyInterpreterFrame, frame_obj);
    out->frame_owner = offsetof(_PyInterpreterFrame, owner);
    out->frame_localsplus = offsetof(_PyInterpreterFrame, localsplus);
    out->code_flags = offsetof(PyCodeObject, co_flags);
    out->code_adaptive = offsetof(PyCodeObject, co_code_adaptive);
    out->code_nlocalsplus = offsetof(PyCodeObject, co_nlocalsplus);
    out->code_extra = offsetof(PyCodeObject, co_extra);
    out->func_closure = offsetof(PyFunctionObject, func_closure);
    out->fresh_instr_delta = FD_FRESH_INSTR_UNITS * (ptrdiff_t)sizeof(_Py_CODEUNIT);
}

/* The evaluator hook API, re-exported so Rust needs no per-version declarations of
 * `_PyFrameEvalFunction`. (`_PyEval_EvalFrameDefault` itself is exported.) */
typedef PyObject *(*fd_eval_fn)(PyThreadState *, _PyInterpreterFrame *, int);

fd_eval_fn fd_get_eval_frame(void) {
    return (fd_eval_fn)_PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
}

void fd_set_eval_frame(fd_eval_fn fn) {
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), (_PyFrameEvalFunction)fn);
}

#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030D0000
/* 3.12's `_PyThreadState_PopFrame` (Python/pystate.c), which is not exported: the frame
 * is the top of the thread's data stack; a chunk it began is given back. */
static void fd_pop_frame_312(PyThreadState *tstate, _PyInterpreterFrame *frame) {
    PyObject **base = (PyObject **)frame;
    _PyStackChunk *chunk = tstate->datastack_chunk;
    if (base == &chunk->data[0]) {
        _PyStackChunk *previous = chunk->previous;
        PyObjectArenaAllocator arena;
        tstate->datastack_top = &previous->data[previous->top];
        tstate->datastack_chunk = previous;
        tstate->datastack_limit = (PyObject **)(((char *)previous) + previous->size);
        PyObject_GetArenaAllocator(&arena);
        arena.free(arena.ctx, chunk, chunk->size);
    } else {
        tstate->datastack_top = base;
    }
}
#endif

/* Releases a thread-owned frame that the hook answered without evaluating it and that
 * has no frame object (the Rust side checks both first): what CPython 3.12+'s own
 * evaluator does when such a frame returns (`_PyEvalFrameClearAndPop`). On 3.11 the
 * caller (`_PyEval_Vector`) does it, so this does nothing there. */
void fd_frame_clear_and_pop(PyThreadState *tstate, _PyInterpreterFrame *frame) {
#if PY_VERSION_HEX >= 0x030D0000
    _PyEval_FrameClearAndPop(tstate, frame);
#elif PY_VERSION_HEX >= 0x030C0000
    /* 3.12's `clear_thread_frame` + `_PyFrame_ClearExceptCode` for a frame without a
     * frame object: the locals and stack the frame owns, its locals mapping, function
     * and code; then the frame leaves the data stack. */
    for (int i = 0; i < frame->stacktop; i++) {
        Py_XDECREF(frame->localsplus[i]);
    }
    Py_XDECREF(frame->f_locals);
    Py_DECREF(frame->f_funcobj);
    Py_DECREF(frame->f_code);
    fd_pop_frame_312(tstate, frame);
#else
    (void)tstate;
    (void)frame;
#endif
}

/* The recursion counter CPython's evaluator charges and checks when it is entered, in
 * bytes into PyThreadState: 3.11's Python depth budget (`recursion_remaining`, which
 * counts every frame), 3.12's and 3.13's C budget (`c_recursion_remaining`, two units per
 * entry from C). The evaluator raises RecursionError on entry when it finds it spent. */
Py_ssize_t fd_entry_budget_offset(void) {
#if PY_VERSION_HEX >= 0x030C0000
    return (Py_ssize_t)offsetof(PyThreadState, c_recursion_remaining);
#else
    return (Py_ssize_t)offsetof(PyThreadState, recursion_remaining);
#endif
}

/* 3.11: where the thread keeps the Python recursion limit its budget counts down from
 * (the depth is the limit less the budget); -1 on 3.12+, whose C budget has a fixed start. */
Py_ssize_t fd_entry_limit_offset(void) {
#if PY_VERSION_HEX >= 0x030C0000
    return -1;
#else
    return (Py_ssize_t)offsetof(PyThreadState, recursion_limit);
#endif
}

/* The calling thread's stack: its lowest address and its size in bytes (glibc reads the
 * main thread's from its mapping and RLIMIT_STACK). 0 on success. */
int fd_current_thread_stack(uintptr_t *low, size_t *size) {
    pthread_attr_t attr;
    void *address = NULL;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) {
        return -1;
    }
    int failed = pthread_attr_getstack(&attr, &address, size);
    pthread_attr_destroy(&attr);
    *low = (uintptr_t)address;
    return failed;
}

/* Non-zero while the thread runs a `sys.settrace`/`sys.setprofile` function (CPython
 * raises `tracing` around the call), or has a trace function (a debugger, coverage):
 * then frames run as Python. */
int fd_thread_is_tracing(PyThreadState *tstate) {
    return tstate->tracing > 0 || tstate->c_tracefunc != NULL;
}

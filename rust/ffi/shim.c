/* The only C in fastdynamo: CPython 3.11 internals that are not exported.
 *
 * It decides nothing. It reports the offsets of the internal struct fields the Rust side
 * reads (computed here by the compiler, read by Rust on first use), and wraps the
 * evaluator getter/setter so Rust needs no per-version `_PyFrameEvalFunction`. */
#include <Python.h>
#include <stddef.h>
#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#include <internal/pycore_code.h>
#undef Py_BUILD_CORE

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "fastdynamo's shim is written for CPython 3.11"
#endif

/* Field offsets the Rust side relies on, in bytes. Field order must match
 * `Layout` in rust/ffi/layout.rs. */
typedef struct {
    size_t frame_func;
    size_t frame_globals;
    size_t frame_builtins;
    size_t frame_code;
    size_t frame_prev_instr;
    size_t frame_owner;
    size_t frame_localsplus;
    size_t code_flags;
    size_t code_adaptive;
    size_t code_nlocalsplus;
    size_t code_extra;
    size_t func_closure;
} fd_layout_t;

void fd_layout(fd_layout_t *out) {
    out->frame_func = offsetof(_PyInterpreterFrame, f_func);
    out->frame_globals = offsetof(_PyInterpreterFrame, f_globals);
    out->frame_builtins = offsetof(_PyInterpreterFrame, f_builtins);
    out->frame_code = offsetof(_PyInterpreterFrame, f_code);
    out->frame_prev_instr = offsetof(_PyInterpreterFrame, prev_instr);
    out->frame_owner = offsetof(_PyInterpreterFrame, owner);
    out->frame_localsplus = offsetof(_PyInterpreterFrame, localsplus);
    out->code_flags = offsetof(PyCodeObject, co_flags);
    out->code_adaptive = offsetof(PyCodeObject, co_code_adaptive);
    out->code_nlocalsplus = offsetof(PyCodeObject, co_nlocalsplus);
    out->code_extra = offsetof(PyCodeObject, co_extra);
    out->func_closure = offsetof(PyFunctionObject, func_closure);
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

/* Non-zero while the thread runs a `sys.settrace`/`sys.setprofile` function (CPython
 * raises `tracing` around the call), or has a trace function (a debugger, coverage):
 * then frames run as Python. */
int fd_thread_is_tracing(PyThreadState *tstate) {
    return tstate->tracing > 0 || tstate->c_tracefunc != NULL;
}

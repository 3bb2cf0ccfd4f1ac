"""The per-code slot next to other `co_extra` users.

The hook reads `co_extra` in place (no `_PyCode_GetExtra` call). A code object's extra
block is sized for the users that existed when its first slot was set, so a block made
before fastdynamo took its index is too short to hold our slot, and must read as "no
state". Runs in a subprocess: the other users must take their indices before
`fastdynamo._native` is imported.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

OTHER_USERS = textwrap.dedent(
    """
    import ctypes
    import sys
    # 3.12 renamed the API (the old names are static inline wrappers with no symbol).
    if sys.version_info >= (3, 12):
        request_index = ctypes.pythonapi.PyUnstable_Eval_RequestCodeExtraIndex
        set_extra = ctypes.pythonapi.PyUnstable_Code_SetExtra
        get_extra = ctypes.pythonapi.PyUnstable_Code_GetExtra
    else:
        request_index = ctypes.pythonapi._PyEval_RequestCodeExtraIndex
        set_extra = ctypes.pythonapi._PyCode_SetExtra
        get_extra = ctypes.pythonapi._PyCode_GetExtra
    request_index.restype = ctypes.c_ssize_t
    request_index.argtypes = [ctypes.c_void_p]
    set_extra.argtypes = [ctypes.py_object, ctypes.c_ssize_t, ctypes.c_void_p]
    get_extra.argtypes = [ctypes.py_object, ctypes.c_ssize_t, ctypes.POINTER(ctypes.c_void_p)]

    def their_value(code, index):
        out = ctypes.c_void_p()
        assert get_extra(code, index, ctypes.byref(out)) == 0
        return out.value

    def early(x):
        return x + 1

    def late(x):
        return x + 2

    before = request_index(None)  # a user older than fastdynamo
    assert set_extra(early.__code__, before, 0x1230) == 0  # block of size before+1

    from fastdynamo._runtime import native
    N = native()
    after = request_index(None)  # a user younger than fastdynamo
    assert set_extra(late.__code__, after, 0x4560) == 0  # block covers our slot, NULL

    assert N.get_code_action(early.__code__) == N.DEFAULT
    assert N.get_code_action(late.__code__) == N.DEFAULT
    seen = []
    def callback(frame):
        seen.append(frame.f_code.co_name)
        return N.SKIP if frame.f_code in (early.__code__, late.__code__) else None
    N.set_callback(callback)
    values = [early(1), late(1), early(2), late(2)]
    N.set_callback(None)
    assert values == [2, 3, 3, 4], values
    assert [name for name in seen if name in ("early", "late")] == ["early", "late"], seen
    assert N.get_code_action(early.__code__) == N.SKIP  # our state grew early's block
    assert their_value(early.__code__, before) == 0x1230
    assert their_value(late.__code__, after) == 0x4560
    # The callback frees nothing of theirs: clear their slots before the code objects die.
    set_extra(early.__code__, before, None)
    set_extra(late.__code__, after, None)
    print("ok")
    """
)


def test_slots_of_older_and_younger_users(subprocess_env):
    result = subprocess.run([sys.executable, "-c", OTHER_USERS], env=subprocess_env(), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_skip_holds_in_every_mode(native):
    """SKIP is decided before the thread's mode is read: it must mean 'run normally' with a
    compile callback, in run-only mode, and for a thread whose callback is None while
    another thread keeps the evaluator installed."""
    import threading

    def skipped(x):
        return x * 3

    calls = []
    native.set_code_action(skipped.__code__, native.SKIP)
    native.set_callback(lambda frame: calls.append(frame.f_code.co_name))
    assert skipped(2) == 6
    native.set_callback(False)
    assert skipped(3) == 9
    native.set_callback(None)
    results = []
    ready, done = threading.Event(), threading.Event()

    def other_thread():
        native.set_callback(False)  # keeps the evaluator installed
        ready.set()
        done.wait(10)
        native.set_callback(None)

    thread = threading.Thread(target=other_thread)
    thread.start()
    ready.wait(10)
    assert native.installed_evaluator() == "fastdynamo"
    results.append(skipped(4))
    done.set()
    thread.join()
    assert results == [12]
    assert "skipped" not in calls
    assert native.get_code_action(skipped.__code__) == native.SKIP

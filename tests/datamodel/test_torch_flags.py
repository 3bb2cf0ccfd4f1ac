"""torch's global flags read inside a compiled frame: ``torch.backends.mkldnn.enabled``
and ``torch.backends.cudnn.deterministic`` are computed by their module's class on each
read, ``torch._C._get_cublas_allow_tf32()`` asks C++, ``torch.backends.cuda.matmul`` is an
object whose ``__getattr__`` asks it. A trace that branched on one must not run after the
flag changed: each is guarded (re-read on every call), or the frame runs as Python."""
from __future__ import annotations

import contextlib

import torch

from .helpers import compiled_with_recorder, same


@contextlib.contextmanager
def flag(owner, name, value):
    before = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, before)


def mkldnn_branch(x):
    return x + (1 if torch.backends.mkldnn.enabled else 2)


def cudnn_branch(x):
    return x * (3 if torch.backends.cudnn.deterministic else 4)


def cublas_query(x):
    return x - (5 if torch._C._get_cublas_allow_tf32() else 6)


def matmul_object(x):
    return x - (7 if torch.backends.cuda.matmul.allow_tf32 else 8)


def check_both_settings(fn, owner, name, graphs):
    compiled, recorder = compiled_with_recorder(fn)
    x = torch.ones(2)
    before = getattr(owner, name)
    for value in (before, not before, before, not before):
        with flag(owner, name, value):
            got, expected = compiled(x), fn(x)
            assert same(got, expected), (name, value, got, expected)
    assert len(recorder.captures) == graphs, [str(b) for b in recorder.breaks]
    return recorder


def test_a_flag_computed_by_its_module_class_is_guarded():
    check_both_settings(mkldnn_branch, torch.backends.mkldnn, "enabled", graphs=2)
    check_both_settings(cudnn_branch, torch.backends.cudnn, "deterministic", graphs=2)


def test_a_private_torch_reader_is_guarded_as_a_state_query():
    check_both_settings(cublas_query, torch.backends.cuda.matmul, "allow_tf32", graphs=2)


def test_a_torch_object_with_its_own_getattr_is_not_folded():
    # no source to guard it from: the read breaks the graph and runs as Python; the rest
    # of the frame is a resume function taking the flag's value (one graph per value)
    recorder = check_both_settings(matmul_object, torch.backends.cuda.matmul, "allow_tf32", graphs=2)
    assert any("cuBLASModule" in str(b) for b in recorder.breaks), [str(b) for b in recorder.breaks]


def scaled_by_learning_rate(opt, x):
    return x * opt.param_groups[0]["lr"], opt.defaults["lr"]


def test_data_of_a_torch_object_argument_is_guarded():
    # an optimizer is modelled as a torch object (its methods are recorded calls); its
    # data was read as constants without a guard: a new learning rate was not seen
    opt = torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.5)
    compiled, recorder = compiled_with_recorder(scaled_by_learning_rate)
    x = torch.ones(2)
    for lr in (0.5, 0.1, 0.5):
        opt.param_groups[0]["lr"] = lr
        opt.defaults["lr"] = lr * 2
        assert same(compiled(opt, x), scaled_by_learning_rate(opt, x)), lr
    assert len(recorder.captures) == 2 and not recorder.breaks  # 0.5 again reuses the first

"""FASTDYNAMO_LOGS=dynamic, recompile reasons naming the size guard, explain's symbolic
sizes, guard text."""
from __future__ import annotations

import torch

import fastdynamo
from fastdynamo import logs

from .helpers import compiled


def scaled(x):
    if x.shape[0] > 6:
        return x * 2
    return x * x.shape[0]


def test_dynamic_log_names_dim_and_reason(capsys):
    logs.set_logs("dynamic,recompiles")
    try:
        fn, rec = compiled(scaled)
        fn(torch.randn(3, 2))
        fn(torch.randn(4, 2))
        fn(torch.randn(1, 2))
        fn(torch.randn(9, 2))
    finally:
        logs.set_logs("")
    err = capsys.readouterr().err
    assert "x dim 0 becomes symbolic: size changed 3 -> 4 since the last compilation (automatic dynamic)" in err
    assert "recompiling scaled" in err and "x.size()[0] == 3, got 4" in err
    # the symbolic entry's guard that failed for 9 (the trace took x.shape[0] <= 6)
    assert "shape guard x.size()[0] <= 6 failed (x.size()[0] = 9)" in err, err
    assert len(rec.captures) == 4  # 3, symbolic <= 6, 1, symbolic > 6


def test_log_says_sizes_zero_one_are_specialised(capsys):
    logs.set_logs("dynamic")
    try:
        fn, _ = compiled(scaled, dynamic=True)
        fn(torch.randn(1, 2))
    finally:
        logs.set_logs("")
    assert "x dim 0 has size 1: specialised" in capsys.readouterr().err


def test_explain_shows_symbolic_sizes_and_shape_guards():
    report = fastdynamo.explain(scaled, backend="eager", dynamic=True)(torch.randn(4, 5))
    assert report.graph_count == 1
    assert report.symbolic_sizes[0] and report.symbolic_sizes[0][0].startswith("x: (s")
    text = str(report)
    assert "Symbolic sizes:" in text
    assert "size=(?, ?)" in text
    assert "x.size()[0] <= 6" in text and "x.size()[1] >= 2" in text
    assert "torch.ops.aten.sym_size.int(x, 0)" in text


def test_shape_guard_spec_errors_are_clear():
    native = fastdynamo._runtime.native()
    bad = [(("shape_env",), ("shape_exprs", ((("local", 0, "x"), "size", 0, torch.Tensor),),
                                         (("frob", ("var", 0)),), ("?",)))]
    try:
        native.GuardSet(bad)
    except ValueError as err:
        assert "unknown shape operator" in str(err)
    else:
        raise AssertionError("an unknown operator must be refused")
    out_of_range = [(("shape_env",), ("shape_exprs", ((("local", 0, "x"), "size", 0, torch.Tensor),),
                                                  (("eq", ("var", 3), ("const", 1)),), ("?",)))]
    try:
        native.GuardSet(out_of_range)
    except ValueError as err:
        assert "no such load" in str(err)
    else:
        raise AssertionError("a variable without a load must be refused")

"""Sliced, concatenated and compared ``torch.Size``s keep their symbolic sizes under
automatic dynamic: GPT2's ``Conv1D`` (``x.view(x.size()[:-1] + (nf,))``), attention's
``tuple(s[:-1]) + (heads, -1)``, and ``nn.LSTM``'s ``hx.size() != expected`` check
compiled every new length before (a whole graph per size); now a frame compiles for
the first size and once more symbolically, and every later size hits."""
from __future__ import annotations

import pytest
import torch

import fastdynamo

from .helpers import assert_same, compiled, graph_code


def conv1d_like(x, w, b):
    size_out = x.size()[:-1] + (w.shape[1],)
    flat = torch.addmm(b, x.view(-1, x.size(-1)), w)
    return flat.view(size_out)


def tuple_of_slice(x):
    s = x.size()
    return x.view(tuple(s[:-1]) + (2, 2)) * 2


def starred_slice(x):
    return x.reshape((*x.shape[:-1], -1, 2)).sum(-1)


def reversed_concat(x):
    return x.expand((2,) + x.shape[:1] + x.shape[1:]) + 1  # a static Size slice, then a symbolic one


def folded_then_symbolic(x):
    # ``(1,) + x.shape[1:]`` holds no symbol: folded to a constant Size, then concatenated
    return torch.ones((1,) + x.shape[1:] + x.shape[:1]) * x.sum()


def nested_slices(x):
    s = x.shape
    return x.view(s[:2][:1] + s[1:][:0] + (2, 2))


def size_equality(x):
    h = torch.zeros(2, x.size(0), 4)
    if h.size() != (2, x.size(0), 4):  # nn.LSTM's check_hidden_size
        raise RuntimeError("bad hidden size")
    ordered = h.size() < (2, x.size(0) + 1)
    return h + x.sum(), ordered


@pytest.mark.parametrize("fn", [tuple_of_slice, starred_slice, reversed_concat, folded_then_symbolic,
                                nested_slices, size_equality])
def test_size_tuples_compile_twice_over_lengths(fn):
    compiled_fn, rec = compiled(fn)
    for n in range(3, 12):
        x = torch.randn(n, 4)
        assert_same(compiled_fn(x), fn(x))
    assert not rec.breaks
    assert len(rec.captures) == 2  # the first size, then one symbolic graph for all
    assert "sym_size" in graph_code(rec)


def test_gpt2_conv1d_view_compiles_twice():
    compiled_fn, rec = compiled(conv1d_like)
    w, b = torch.randn(8, 6), torch.randn(6)
    for n in range(4, 13):
        x = torch.randn(2, n, 8)
        assert_same(compiled_fn(x, w, b), conv1d_like(x, w, b))
    assert (len(rec.captures), len(rec.breaks)) == (2, 0)
    # the view's target size is computed from the input in the graph, not a constant
    assert "sym_size" in graph_code(rec) and ", 6)" in graph_code(rec)


def test_fifty_lengths_nothing_compiled_after_the_second():
    compiled_fn, rec = compiled(conv1d_like)
    w, b = torch.randn(8, 6), torch.randn(6)
    counts = []
    for n in range(2, 52):
        x = torch.randn(3, n, 8)
        assert_same(compiled_fn(x, w, b), conv1d_like(x, w, b))
        counts.append(len(rec.captures))
    assert counts[0] == 1 and set(counts[1:]) == {2}


def test_size_specialised_where_used_as_a_constant():
    def branch_on_slice(x):
        if x.size()[:1] == (4,):  # compares a symbol with 4: guarded, not specialised
            return x + 1
        return x - 1

    compiled_fn, rec = compiled(branch_on_slice)
    for n in (3, 5, 4, 6, 4, 7):
        x = torch.randn(n, 2)
        assert_same(compiled_fn(x), branch_on_slice(x))
    # 3 static, then symbolic with the guard "!= 4"; 4 fails that guard and compiles
    # its own entry; every other size hits the symbolic one
    assert len(rec.captures) == 3


def test_lstm_over_batch_sizes_compiles_twice():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(6, 5, batch_first=True).eval()
    recorder = fastdynamo.convert_frame.Recorder()
    compiled_lstm = fastdynamo.OptimizedModule(lstm, backend="eager", recorder=recorder)
    with torch.no_grad():
        for batch in range(1, 9):
            x = torch.randn(batch, 3, 6)
            assert_same(compiled_lstm(x), lstm(x))
    assert (len(recorder.captures), len(recorder.breaks)) == (2, 0)


def list_plus_size(x):
    y = x * 2
    return y, [1] + x.shape


def list_plus_tuple(x):
    y = x * 2
    return y, [x.shape[0]] + (2,)


@pytest.mark.parametrize("fn", [list_plus_size, list_plus_tuple])
def test_list_plus_tuple_raises_type_error(fn):
    # concatenation needs two lists or two tuples (a Size is a tuple): eager raises
    # TypeError; the trace built a list before
    compiled_fn, rec = compiled(fn)
    with pytest.raises(TypeError):
        fn(torch.randn(3))
    with pytest.raises(TypeError):
        compiled_fn(torch.randn(3))
    assert len(rec.captures) == 1 and "a list and a tuple" in rec.breaks[0].reason


def test_list_extended_by_sizes_in_place():
    def extend(x):
        dims = [x.shape[0]]
        dims += (2,)
        dims += x.shape
        return x.new_zeros(dims), dims

    compiled_fn, rec = compiled(extend)
    for n in (3, 4, 5, 6):
        x = torch.randn(n)
        assert_same(compiled_fn(x), extend(x))
    assert (len(rec.captures), len(rec.breaks)) == (2, 0)

"""End to end on the translator: each function is captured, its transformed code run
the way the native runtime runs it, and the result compared with eager."""
from __future__ import annotations

import functools
import math
import operator

import pytest
import torch
import torch.nn.functional as F

from fastdynamo.capture import Broken
from .helpers import capture, check_capture

SCALE = 3.0
CONFIG = {"act": "relu", "depth": 2}


def arith(x, y):
    return (x + y) * 2 - y / 3 + x ** 2 - (-x) % 2.5 + abs(y) // 1


def views(x):
    a = x.view(4, 6).t().contiguous()
    b = x.reshape(-1)[::2]
    c = x.permute(2, 0, 1).flatten(1)
    return a, b, c.unsqueeze(0).squeeze(0), x.transpose(0, 1).mT


def indexing(x):
    return x[0], x[:, 1:3], x[..., -1], x[None, 1, ::2], x[x.shape[0] - 1, :, 0]


def reductions(x):
    return x.sum(), x.mean(dim=1), x.amax(-1), torch.max(x, dim=0).values, x.std(dim=0, keepdim=True)


def max_unpack(x):
    values, indices = x.max(dim=1)
    return values * 2, indices


def shapes_and_python(x):
    n, m = x.shape
    total = 0
    for i in range(n):
        total += i
    sizes = [d * 2 for d in x.size()]
    return x.reshape(m, n) + total, sizes, x.dim(), x.ndim, x.dtype, len(x)


def globals_and_math(x):
    return x * SCALE + math.sqrt(16.0) + math.pi, operator.mul(x, 2)


def config_dict(x):
    for _ in range(CONFIG["depth"]):
        x = F.relu(x) if CONFIG["act"] == "relu" else torch.tanh(x)
    return x


def closures(x):
    k = 3

    def inner(y):
        return y * k

    add = lambda a, b=1: a + b  # noqa: E731
    return add(inner(x)), add(x, b=x)


def star_args(x, *rest, scale=2, **kw):
    out = x * scale
    for r in rest:
        out = out + r
    for key in sorted(kw):
        out = out - kw[key]
    return out


def star_call(x, y):
    args = (x, y)
    kwargs = {"alpha": 2}
    return torch.add(*args, **kwargs)


def comprehensions(x):
    parts = [x[i] * i for i in range(x.shape[0])]
    total = sum(p.sum() for p in parts)
    mapping = {f"k{i}": p for i, p in enumerate(parts)}
    return total, mapping, torch.stack(parts), [t.shape for t in parts]


def builtins_mix(x, y):
    pairs = list(zip([x, y], [1, 2]))
    scaled = [t * s for t, s in pairs]
    doubled = list(map(lambda t: t * 2, scaled))
    m = max(3, len(doubled), min(1, 2))
    return (isinstance(x, torch.Tensor), hasattr(x, "shape"), getattr(x, "ndim"), m,
            torch.cat(doubled), abs(-x))


def partial_use(x):
    f = functools.partial(torch.clamp, min=0.0)
    g = functools.partial(F.softmax, dim=-1)
    return g(f(x))


def grad_blocks(x, w):
    with torch.no_grad():
        a = x @ w
    with torch.enable_grad():
        b = x @ w
    return a, b


def branches(x, flag, n):
    if flag:
        x = x + 1
    else:
        x = x - 1
    if n > 3 and not flag:
        x = x * n
    y = None
    if y is None:
        x = x.sin()
    return x if x.dim() == 2 else x.unsqueeze(0)


def unpack_ex(x):
    first, *middle, last = x.unbind(0)
    return first + last, len(middle), [*middle]


def constants_out(x):
    return {"a": 1, "b": [x + 1, "s"], "c": (None, 2.5)}


def dtype_conv(x):
    return x.to(torch.float64).sum(), x.float().half().dtype, torch.zeros(3, dtype=x.dtype), x.new_ones(2)


def string_ops(x):
    name = "layer" + str(3)
    label = f"{name}-{x.shape[0]}"
    return x + len(label), label.upper()


def inplace_intermediate(x):
    y = x.clone()
    y.add_(1)
    y *= 2
    y[0] = 0.0
    return y


CORPUS = [
    (arith, lambda: (torch.randn(3, 4), torch.randn(3, 4))),
    (views, lambda: (torch.randn(2, 3, 4),)),
    (indexing, lambda: (torch.randn(3, 4, 5),)),
    (reductions, lambda: (torch.randn(4, 5),)),
    (max_unpack, lambda: (torch.randn(4, 5),)),
    (shapes_and_python, lambda: (torch.randn(3, 4),)),
    (globals_and_math, lambda: (torch.randn(5),)),
    (config_dict, lambda: (torch.randn(5),)),
    (closures, lambda: (torch.randn(5),)),
    (star_args, lambda: (torch.randn(3), torch.ones(3), torch.ones(3))),
    (star_call, lambda: (torch.randn(3), torch.randn(3))),
    (comprehensions, lambda: (torch.randn(3, 2),)),
    (builtins_mix, lambda: (torch.randn(2), torch.randn(2))),
    (partial_use, lambda: (torch.randn(2, 5),)),
    (grad_blocks, lambda: (torch.randn(2, 3), torch.randn(3, 2, requires_grad=True))),
    (branches, lambda: (torch.randn(2, 3), False, 5)),
    (unpack_ex, lambda: (torch.randn(4, 2),)),
    (constants_out, lambda: (torch.randn(2),)),
    (dtype_conv, lambda: (torch.randn(3),)),
    (string_ops, lambda: (torch.randn(2),)),
    (inplace_intermediate, lambda: (torch.randn(3),)),
]


@pytest.mark.parametrize("fn,make_args", CORPUS, ids=[fn.__name__ for fn, _ in CORPUS])
def test_corpus_matches_eager(fn, make_args):
    check_capture(fn, *make_args())


def test_star_args_with_keywords():
    check_capture(star_args, torch.randn(3), torch.ones(3), scale=3, a=torch.ones(3), b=2)


def test_grad_mode_restored_and_guarded():
    result = check_capture(grad_blocks, torch.randn(2, 3), torch.randn(3, 2, requires_grad=True))
    assert torch.is_grad_enabled()
    assert any(g.check == ("grad_mode", True) for g in result.guards)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)])
        self.act = "gelu"

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = F.gelu(x) if self.act == "gelu" else F.relu(x)
        return x


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
        self.head = torch.nn.Linear(4, 10)

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x)


class Block(torch.nn.Module):
    """A pre-norm transformer block written with plain ops."""

    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(),
                                       torch.nn.Linear(4 * dim, dim), torch.nn.Dropout(0.1))

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = [z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


@pytest.mark.parametrize("model,make_input", [
    (MLP, lambda: torch.randn(5, 8)),
    (ConvNet, lambda: torch.randn(2, 3, 8, 8)),
    (Block, lambda: torch.randn(2, 6, 16)),
], ids=["mlp", "convnet", "transformer_block"])
def test_models_eval_mode(model, make_input):
    torch.manual_seed(0)
    module = model().eval()
    x = make_input()
    result = check_capture(type(module).forward, module, x)
    # parameters are graph inputs read through their source
    assert any("weight" in src.name() for src in result.graph_inputs)


def test_mlp_train_mode_gradients_flow():
    torch.manual_seed(0)
    module = MLP().train()
    x = torch.randn(5, 8)
    result, run = capture(type(module).forward, module, x)
    assert not isinstance(result, Broken), result
    out = run(module, x)
    out.sum().backward()
    grads = [p.grad.clone() for p in module.parameters()]
    module.zero_grad()
    MLP.forward(module, x).sum().backward()
    for g, p in zip(grads, module.parameters()):
        torch.testing.assert_close(g, p.grad)

"""The real models of issue #12, each built from a tiny config with random weights (no
downloads): what the model tests (tests/models/) and ``benches/models.py`` compile.
Dropout is configured off so that a training step is deterministic (mobilenet's
``nn.Dropout`` modules are set to ``p=0`` by the training test).

Each :class:`ModelCase` builds a fresh model and inputs from a fixed seed, so that two
builds (one eager, one compiled) start from equal weights.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch


@dataclass(frozen=True)
class ModelCase:
    """One model: ``build()`` gives ``(model, args)``; ``loss(output)`` a scalar for a
    training step."""

    name: str
    build: Callable[[], tuple[torch.nn.Module, tuple[Any, ...]]]
    loss: Callable[[Any], torch.Tensor]


def _seeded(make: Callable[[], tuple[torch.nn.Module, tuple[Any, ...]]]):
    def build() -> tuple[torch.nn.Module, tuple[Any, ...]]:
        torch.manual_seed(0)
        return make()
    return build


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config(vocab_size=96, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(config).eval()
    return model, (torch.randint(0, 96, (2, 8)),)


def _bert():
    from transformers import BertConfig, BertModel
    config = BertConfig(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertModel(config).eval()
    return model, (torch.randint(0, 96, (2, 8)),)


def _t5():
    from transformers import T5Config, T5ForConditionalGeneration
    config = T5Config(vocab_size=96, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=2,
                      decoder_start_token_id=0, dropout_rate=0.0)
    model = T5ForConditionalGeneration(config).eval()
    return model, (torch.randint(0, 96, (2, 8)), None, torch.randint(0, 96, (2, 6)))


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
    model = LlamaForCausalLM(config).eval()
    return model, (torch.randint(0, 96, (2, 8)),)


def _mobilenet():
    from torchvision.models import mobilenet_v3_small
    model = mobilenet_v3_small(num_classes=10).eval()
    return model, (torch.randn(2, 3, 32, 32),)


def _transformer_encoder():
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=2, dim_feedforward=64, dropout=0.0,
                                             batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    return model, (torch.randn(2, 8, 32),)


class LSTMClassifier(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(16, 32, batch_first=True)
        self.head = torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def _lstm():
    return LSTMClassifier().eval(), (torch.randn(2, 8, 16),)


def _logits_loss(output: Any) -> torch.Tensor:
    return output.logits.float().pow(2).mean()


def _hidden_loss(output: Any) -> torch.Tensor:
    return output.last_hidden_state.pow(2).mean()


def _tensor_loss(output: torch.Tensor) -> torch.Tensor:
    return output.float().pow(2).mean()


CASES: tuple[ModelCase, ...] = (
    ModelCase("gpt2", _seeded(_gpt2), _logits_loss),
    ModelCase("bert", _seeded(_bert), _hidden_loss),
    ModelCase("t5", _seeded(_t5), _logits_loss),
    ModelCase("llama", _seeded(_llama), _logits_loss),
    ModelCase("mobilenet_v3_small", _seeded(_mobilenet), _tensor_loss),
    ModelCase("transformer_encoder", _seeded(_transformer_encoder), _tensor_loss),
    ModelCase("lstm", _seeded(_lstm), _tensor_loss),
)

BY_NAME = {case.name: case for case in CASES}

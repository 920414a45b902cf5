"""Small torch models used by the bundled example manifest (factories for ``source: {factory: ...}``)."""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    """``x[b, 16] -> logits[b, 4]``: the smallest dynamic-batch model."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Two linear layers with a ReLU."""
        return self.net(x)


class TinyText(nn.Module):
    """``input_ids[b, seq] (int64), attention_mask[b, seq] (int64) -> (logits[b, 2], pooled[b, 8])``."""

    def __init__(self, vocab: int = 100) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Masked mean of token embeddings, then a linear head."""
        mask = attention_mask.unsqueeze(-1).to(torch.float32)
        pooled = (self.embed(input_ids) * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return self.head(pooled), pooled


def make_mlp() -> nn.Module:
    """Factory for the manifest: deterministic weights so reference outputs are reproducible."""
    torch.manual_seed(0)
    return MLP().eval()


def make_text() -> nn.Module:
    """Factory for the manifest: deterministic weights so reference outputs are reproducible."""
    torch.manual_seed(1)
    return TinyText().eval()

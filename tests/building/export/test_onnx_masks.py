"""generator.building.export.onnx_masks: which value of a mask input keeps a position, read from exported graphs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx
import pytest
import torch
from torch import nn

from generator.building.export.onnx_masks import mask_domains


def _export(module: nn.Module, example: tuple[torch.Tensor, ...], names: list[str], path: Path, dynamo: bool) -> Any:
    kwargs: dict[str, Any] = {"dynamo": dynamo, "input_names": names}
    if dynamo:
        kwargs["external_data"] = False
    torch.onnx.export(module.eval(), example, str(path), **kwargs)
    return onnx.load(str(path))


class KeyPadding(nn.Module):
    """nn.TransformerEncoderLayer with a PyTorch key-padding mask: True marks padding (Where(mask, -inf, x))."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        return self.layer(x, src_key_padding_mask=padding_mask)


class Additive(nn.Module):
    """A Hugging Face-style integer mask: (1 - mask) * finfo.min added to the scores; 1 keeps a position."""

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        scores = x @ x.transpose(1, 2)
        bias = (1.0 - attention_mask[:, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        return torch.softmax(scores + bias, dim=-1) @ x


class Inverted(nn.Module):
    """A bool mask where True keeps a position: masked_fill(~keep, -inf)."""

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        scores = (x @ x.transpose(1, 2)).masked_fill(~keep[:, None, :], float("-inf"))
        return torch.softmax(scores, dim=-1) @ x


class NotAMask(nn.Module):
    """A bool flag that picks a sign, and a mask used both ways: neither says which value keeps a position."""

    def forward(self, x: torch.Tensor, flag: torch.Tensor, both: torch.Tensor) -> torch.Tensor:
        signed = torch.where(flag[:, :, None], x, -x)
        scores = (signed @ signed.transpose(1, 2)).masked_fill(both[:, None, :], float("-inf"))
        return torch.softmax(scores.masked_fill(~both[:, :, None], float("-inf")), dim=-1) @ x


def _x() -> torch.Tensor:
    return torch.randn(2, 5, 8)


@pytest.mark.parametrize("dynamo", [True, False], ids=["dynamo", "torchscript"])
def test_a_pytorch_key_padding_mask_keeps_positions_where_false(tmp_path, dynamo):
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[1, 3:] = True
    model = _export(KeyPadding(), (_x(), mask), ["x", "padding_mask"], tmp_path / "m.onnx", dynamo)
    (domain,) = mask_domains(model, [("x", "float32"), ("padding_mask", "bool")]).values()
    assert domain.mask_keep is False and (domain.low, domain.high) == (0, 1)
    assert domain.source == "a mask: true drops a position (Where(padding_mask, -inf, x) in the graph)"


def test_an_additive_integer_mask_keeps_positions_where_one(tmp_path):
    model = _export(Additive(), (_x(), torch.ones(2, 5, dtype=torch.int64)), ["x", "attention_mask"],
                    tmp_path / "m.onnx", True)
    domain = mask_domains(model, [("attention_mask", "int64")])["attention_mask"]
    assert domain.mask_keep == 1 and domain.source.startswith("a mask: 0 drops a position (Mul(1 - attention_mask, ")


def test_a_negated_bool_mask_keeps_positions_where_true(tmp_path):
    model = _export(Inverted(), (_x(), torch.ones(2, 5, dtype=torch.bool)), ["x", "keep"], tmp_path / "m.onnx", True)
    domain = mask_domains(model, [("keep", "bool")])["keep"]
    # The evidence quotes what the Where reads: the negated mask, not the input (true keeps, so true cannot drop).
    assert domain.mask_keep is True
    assert domain.source == "a mask: false drops a position (Where(Not(keep), -inf, x) in the graph)"


def test_inputs_the_graph_does_not_show_as_masks_are_left_out(tmp_path):
    flags = torch.ones(2, 5, dtype=torch.bool)
    both = torch.zeros(2, 5, dtype=torch.bool)
    model = _export(NotAMask(), (_x(), flags, both), ["x", "flag", "both"], tmp_path / "m.onnx", True)
    assert mask_domains(model, [("x", "float32"), ("flag", "bool"), ("both", "bool")]) == {}

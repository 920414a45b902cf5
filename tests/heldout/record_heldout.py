"""Cases for aitune-record (``../shared/tools/aitune-record/record.py``): the held-out GraphSpecs, by aitune's own code.

Regenerate (the aitune-record venv of its README, plus transformers 5.24.0 and diffusers 0.42.1)::

    python ../shared/tools/aitune-record/record.py tests/heldout/record_heldout.py tests/heldout/specs

Every call is ``(global_batch_size, args, kwargs)``; sequence lengths are never a fixed multiple of the batch size
(aitune would read them as batch axes).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import heldout_models as held
from record import Case  # type: ignore[import-not-found]


def _tokens(batch: int, seq: int, generator: torch.Generator) -> dict:
    """Token ids and a right-padded attention mask (the last row padded from the middle)."""
    ids = torch.randint(3, held.VOCAB, (batch, seq), generator=generator)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[-1, max(1, seq // 2):] = 0
    return {"input_ids": ids, "attention_mask": mask}


def _bart_calls() -> list:
    """Source and target lengths vary independently of each other and of the batch."""
    generator = torch.Generator().manual_seed(40)
    calls = []
    for batch, source, target in ((1, 9, 4), (3, 13, 7), (2, 18, 5), (4, 11, 10)):
        kwargs = _tokens(batch, source, generator)
        kwargs["decoder_input_ids"] = torch.randint(3, held.VOCAB, (batch, target), generator=generator)
        kwargs["use_cache"] = False
        calls.append((batch, (), kwargs))
    return calls


def _whisper_calls() -> list:
    generator = torch.Generator().manual_seed(41)
    return [(b, (torch.randn(b, held.MELS, held.MEL_FRAMES, generator=generator),), {}) for b in (1, 3, 2)]


def _hubert_calls() -> list:
    """Raw audio of 1600..3200 samples."""
    generator = torch.Generator().manual_seed(42)
    return [(b, (torch.randn(b, n, generator=generator),), {}) for b, n in ((1, 1600), (3, 3200), (2, 2500))]


def _hubert_ranges() -> dict:
    """What the audio pipeline really sends: 800..6400 samples, wider than the recording."""
    from aitune.torch.dynamic_shapes import BatchDim, DynamicDim

    return {"input_values": (BatchDim("batch", min=1, opt=2, max=4),
                             DynamicDim("samples", min=800, opt=2400, max=6400))}


def _qwen2_calls() -> list:
    generator = torch.Generator().manual_seed(43)
    return [(len(lengths), *held._zoo.left_padded_call(lengths, generator))
            for lengths in ([7], [10, 13, 5], [19, 12], [9, 4, 8, 6])]


def _qwen2_ranges() -> dict:
    from aitune.torch.dynamic_shapes import BatchDim, DynamicDim

    shape = (BatchDim("batch", min=1, opt=2, max=4), DynamicDim("seq", min=2, opt=16, max=40))
    return {"input_ids": shape, "attention_mask": shape}


def _distilbert_calls() -> list:
    generator = torch.Generator().manual_seed(44)
    return [(b, (), _tokens(b, s, generator)) for b, s in ((1, 7), (3, 15), (2, 22), (4, 9))]


def _vae_calls() -> list:
    """Latents of 8x8..12x16 (images of 16x16..24x32)."""
    generator = torch.Generator().manual_seed(45)
    return [(b, (torch.randn(b, 4, h, w, generator=generator),), {}) for b, h, w in ((1, 8, 8), (2, 12, 16),
                                                                                      (3, 10, 12))]


def _siglip_calls() -> list:
    """A batch of texts against a batch of images of another size (AITune's global batch is the texts')."""
    generator = torch.Generator().manual_seed(46)
    calls = []
    for texts, images, seq in ((1, 2, 5), (3, 1, 9), (2, 4, 14)):
        kwargs = {"input_ids": torch.randint(3, held.VOCAB, (texts, seq), generator=generator),
                  "pixel_values": torch.randn(images, 3, held.IMAGE, held.IMAGE, generator=generator)}
        calls.append((texts, (), kwargs))
    return calls


def _gru_calls() -> list:
    """Sequence-first tokens [seq, batch], without then with an initial state h0 [1, batch, hidden]."""
    generator = torch.Generator().manual_seed(47)
    calls = []
    for batch, seq in ((1, 5), (3, 13), (2, 19), (4, 8)):
        calls.append((batch, (torch.randint(0, held.VOCAB, (seq, batch), generator=generator),), {}))
    for batch, seq in ((1, 6), (3, 11), (2, 17), (4, 9)):
        tokens = torch.randint(0, held.VOCAB, (seq, batch), generator=generator)
        calls.append((batch, (tokens, torch.randn(1, batch, held.GRU_HIDDEN, generator=generator)), {}))
    return calls


def _keep_mask_calls() -> list:
    generator = torch.Generator().manual_seed(48)
    return [(b, held.kept_tokens(b, s, generator), {}) for b, s in ((1, 6), (3, 10), (2, 17), (4, 7))]


def _distilbert_fp16_calls() -> list:
    generator = torch.Generator().manual_seed(49)
    return [(b, (), _tokens(b, s, generator)) for b, s in ((1, 8), (3, 14), (2, 21))]


def _filter_calls() -> list:
    generator = torch.Generator().manual_seed(50)
    return [(b, (torch.rand(b, n, 4, generator=generator), torch.randn(b, n, generator=generator)), {})
            for b, n in ((1, 10), (3, 25), (2, 17))]


def _mamba_calls() -> list:
    generator = torch.Generator().manual_seed(51)
    return [(b, (), {"input_ids": torch.randint(3, held.VOCAB, (b, s), generator=generator), "use_cache": False})
            for b, s in ((1, 7), (3, 13), (2, 19), (4, 10))]


def _mamba_ranges() -> dict:
    from aitune.torch.dynamic_shapes import BatchDim, DynamicDim

    return {"input_ids": (BatchDim("batch", min=1, opt=2, max=4), DynamicDim("seq", min=2, opt=16, max=40))}


CASES = {
    "bart": Case(held.make_bart, _bart_calls()),
    "whisper_encoder": Case(held.make_whisper_encoder, _whisper_calls()),
    "hubert": Case(held.make_hubert, _hubert_calls(), dynamic_shapes=_hubert_ranges),
    "qwen2": Case(held.make_qwen2, _qwen2_calls(), dynamic_shapes=_qwen2_ranges),
    "distilbert_tagger": Case(held.make_distilbert_tagger, _distilbert_calls()),
    "vae_decoder": Case(held.make_vae_decoder, _vae_calls()),
    "siglip": Case(held.make_siglip, _siglip_calls()),
    "gru_tagger": Case(held.make_gru_tagger, _gru_calls()),
    "keep_mask_encoder": Case(held.make_keep_mask_encoder, _keep_mask_calls()),
    "distilbert_tagger_fp16": Case(held.make_distilbert_tagger_fp16, _distilbert_fp16_calls()),
    "score_filter": Case(held.make_score_filter, _filter_calls()),
    "mamba": Case(held.make_mamba, _mamba_calls(), dynamic_shapes=_mamba_ranges),
}

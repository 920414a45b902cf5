"""Cases for aitune-record (``../shared/tools/aitune-record/record.py``): the zoo's GraphSpecs, by aitune's own code.

Regenerate (Python 3.11 venv with torch 2.13.0, aitune 0.6.0 --no-deps, transformers 5.24.0, diffusers 0.42.1)::

    python ../shared/tools/aitune-record/record.py tests/zoo/record_zoo.py tests/zoo/specs

Every call is ``(global_batch_size, args, kwargs)``; sequence lengths are never a fixed multiple of the batch size
(aitune would read them as batch axes).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import zoo_models as zoo
from record import Case  # type: ignore[import-not-found]

TOKEN_SHAPES = [(1, 6), (3, 12), (2, 20), (4, 10)]


def _token_calls(segments: bool) -> list:
    generator = torch.Generator().manual_seed(0)
    calls = []
    for batch, seq in TOKEN_SHAPES:
        kwargs = zoo.token_call(batch, seq, generator, segments=segments)
        if not segments:
            kwargs["use_cache"] = False  # GPT-2: logits only, no key/value cache object in the output
        calls.append((batch, (), kwargs))
    return calls


def _bert_partial_ranges() -> dict:
    """Explicit ranges for input_ids and attention_mask only; token_type_ids keeps its recorded 1..4 x 6..20."""
    from aitune.torch.dynamic_shapes import BatchDim, DynamicDim

    shape = (BatchDim("batch", min=1, opt=2, max=8), DynamicDim("seq", min=4, opt=16, max=32))
    return {"input_ids": shape, "attention_mask": shape}


def _images(sizes: list[tuple[int, int, int]]) -> list:
    generator = torch.Generator().manual_seed(1)
    return [(b, (), {"pixel_values": torch.randn(b, 3, h, w, generator=generator)}) for b, h, w in sizes]


def _unet_plain_calls() -> list:
    generator = torch.Generator().manual_seed(2)
    calls = []
    for batch in (1, 2, 4):
        sample = torch.randn(batch, 4, zoo.LATENT, zoo.LATENT, generator=generator)
        timestep = torch.randint(0, 1000, (batch,), generator=generator).to(torch.float32)
        text = torch.randn(batch, zoo.TEXT_SEQ, zoo.HIDDEN, generator=generator)
        calls.append((batch, (sample, timestep, text), {}))
    return calls


def _unet_guided_calls() -> list:
    generator = torch.Generator().manual_seed(3)
    return [(b, *zoo.unet_guided_call(b, generator, t)) for b, t in ((1, 999.0), (2, 500.0), (4, 1.0))]


def _pooled_calls() -> list:
    """What BERT's pooler hands the head: [b, hidden], batch 1..4 like the BERT recording."""
    generator = torch.Generator().manual_seed(4)
    return [(b, (torch.randn(b, zoo.HIDDEN, generator=generator),), {}) for b in (1, 3, 2, 4)]


def _audio_calls() -> list:
    """Raw audio of 2000..4000 samples (frames 199..399); the declared range below is wider."""
    generator = torch.Generator().manual_seed(5)
    return [(b, (torch.randn(b, n, generator=generator),), {}) for b, n in ((1, 2000), (2, 4000), (3, 3000))]


def _audio_ranges() -> dict:
    """What the audio pipeline really sends: 400..8000 samples (0.025..0.5 s at 16 kHz), wider than recorded."""
    from aitune.torch.dynamic_shapes import BatchDim, DynamicDim

    return {"input_values": (BatchDim("batch", min=1, opt=2, max=4), DynamicDim("samples", min=400, opt=2000,
                                                                                  max=8000))}


def _llama_calls() -> list:
    """Left-padded prompt batches, as a generation pipeline batches prompts for a decoder."""
    generator = torch.Generator().manual_seed(6)
    return [(len(lengths), *zoo.left_padded_call(lengths, generator))
            for lengths in ([6], [9, 12, 4], [20, 13], [10, 3, 7, 5])]


def _llama_ranges() -> dict:
    """Prompts of 2..48 tokens (recorded 6..20): the logits' sequence range must follow."""
    from aitune.torch.dynamic_shapes import BatchDim, DynamicDim

    shape = (BatchDim("batch", min=1, opt=2, max=4), DynamicDim("seq", min=2, opt=16, max=48))
    return {"input_ids": shape, "attention_mask": shape}


def _roberta_calls() -> list:
    generator = torch.Generator().manual_seed(7)
    calls = []
    for batch, seq in TOKEN_SHAPES:
        kwargs = zoo.token_call(batch, seq, generator, segments=False)
        kwargs["input_ids"] = kwargs["input_ids"].clamp(min=2)  # ids 0 and 1 are RoBERTa's bos and padding
        calls.append((batch, (), kwargs))
    return calls


CASES = {
    "bert": Case(zoo.make_bert, _token_calls(segments=True)),
    "bert_partial_ranges": Case(zoo.make_bert, _token_calls(segments=True), dynamic_shapes=_bert_partial_ranges),
    "gpt2": Case(zoo.make_gpt2, _token_calls(segments=False)),
    "vit": Case(zoo.make_vit, _images([(1, 32, 32), (2, 32, 32), (4, 32, 32)])),
    "resnet": Case(zoo.make_resnet, _images([(1, 32, 32), (2, 48, 40), (4, 40, 48)])),
    "unet": Case(zoo.make_unet, _unet_plain_calls()),
    "unet_guided": Case(zoo.make_unet, _unet_guided_calls()),
    "head": Case(zoo.make_head, _pooled_calls()),
    "wav2vec2": Case(zoo.make_wav2vec2, _audio_calls(), dynamic_shapes=_audio_ranges),
    "llama": Case(zoo.make_llama, _llama_calls(), dynamic_shapes=_llama_ranges),
    # Not served by the zoo manifest: tests/building/test_artifacts.py declares a sequence beyond its position
    # embeddings.
    "roberta": Case(zoo.make_roberta, _roberta_calls()),
}


# Unseen architectures (issue 22) -------------------------------------------------------------------------------------
def _seq2seq_calls() -> list:
    """Encoder and decoder lengths vary independently of each other and of the batch."""
    generator = torch.Generator().manual_seed(5)
    calls = []
    for batch, source, target in ((1, 7, 3), (3, 12, 5), (2, 16, 9), (4, 10, 6)):
        kwargs = zoo.token_call(batch, source, generator, segments=False)
        kwargs["decoder_input_ids"] = torch.randint(1, zoo.VOCAB, (batch, target), generator=generator)
        kwargs["use_cache"] = False  # logits and the encoder's states only, no cache object in the output
        calls.append((batch, (), kwargs))
    return calls


def _two_tower_calls() -> list:
    """A batch of texts against a batch of images of another size: AITune's global batch size is the texts'."""
    generator = torch.Generator().manual_seed(6)
    calls = []
    for texts, images, seq in ((1, 3, 7), (3, 1, 12), (2, 5, 16), (4, 2, 10)):
        kwargs = zoo.token_call(texts, seq, generator, segments=False)
        kwargs["pixel_values"] = torch.randn(images, 3, zoo.IMAGE, zoo.IMAGE, generator=generator)
        calls.append((texts, (), kwargs))
    return calls


def _rnn_calls() -> list:
    """Tagging without an initial state, then with one (h0, c0): AITune keys two graphs."""
    generator = torch.Generator().manual_seed(7)
    calls = []
    for batch, seq in ((1, 5), (3, 14), (2, 21), (4, 9)):
        calls.append((batch, (torch.randint(0, zoo.VOCAB, (batch, seq), generator=generator),), {}))
    for batch, seq in ((1, 6), (3, 13), (2, 22), (4, 10)):
        ids = torch.randint(0, zoo.VOCAB, (batch, seq), generator=generator)
        state = tuple(torch.randn(zoo.RNN_STATES, batch, zoo.RNN_HIDDEN, generator=generator) for _ in range(2))
        calls.append((batch, (ids, state), {}))
    return calls


def _padding_mask_calls() -> list:
    generator = torch.Generator().manual_seed(8)
    return [(b, zoo.padded_tokens(b, s, generator), {}) for b, s in ((1, 5), (3, 11), (2, 18), (4, 9))]


def _bf16_images() -> list:
    return [(b, (), {"pixel_values": x.to(torch.bfloat16)}) for b, _, x in
            [(b, a, k["pixel_values"]) for b, a, k in _images([(1, 32, 32), (2, 32, 32), (4, 32, 32)])]]


CASES.update({
    "t5": Case(zoo.make_t5, _seq2seq_calls()),
    "clip": Case(zoo.make_clip, _two_tower_calls()),
    "rnn_tagger": Case(zoo.make_rnn_tagger, _rnn_calls()),
    "padding_mask_encoder": Case(zoo.make_padding_mask_encoder, _padding_mask_calls()),
    "vit_bf16": Case(zoo.make_vit_bf16, _bf16_images()),
})

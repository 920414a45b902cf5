"""Real architectures from tiny configs with random weights: the model zoo gen-repo is tested on.

transformers and diffusers build each model from a small config (no downloads); ``torch.manual_seed`` makes the
weights the same in every process. The GraphSpecs in ``specs/`` were recorded from these factories with aitune
0.6.0's own code (``record_zoo.py``). ``*_calls`` functions return sample calls ``[(args, kwargs), ...]`` as AITune
records them, for the manifest's ``samples: {factory: ...}``.
"""

from __future__ import annotations

from typing import Any

import torch

#: Tiny sizes shared by the recordings and the sample calls.
VOCAB = 99
HIDDEN = 32
IMAGE = 32
LATENT = 8
TEXT_SEQ = 6  # encoder_hidden_states length for the UNet
AUDIO_VOCAB = 12  # CTC labels of the audio model


def _seeded(seed: int) -> None:
    torch.manual_seed(seed)


def make_bert() -> torch.nn.Module:
    """A BERT encoder with token_type_ids (2 segment rows: ids >= 2 are out of range)."""
    from transformers import BertConfig, BertModel

    _seeded(0)
    config = BertConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        max_position_embeddings=64, type_vocab_size=2, attn_implementation="eager",
    )
    return BertModel(config, add_pooling_layer=True).eval()


def make_gpt2() -> torch.nn.Module:
    """A GPT-2 decoder with its language-model head."""
    from transformers import GPT2Config, GPT2LMHeadModel

    _seeded(1)
    config = GPT2Config(
        vocab_size=VOCAB, n_embd=HIDDEN, n_layer=2, n_head=2, n_positions=64, bos_token_id=VOCAB - 1,
        eos_token_id=VOCAB - 1, attn_implementation="eager",
    )
    return GPT2LMHeadModel(config).eval()


def make_vit() -> torch.nn.Module:
    """A ViT encoder on 32x32 images, 8x8 patches."""
    from transformers import ViTConfig, ViTModel

    _seeded(2)
    config = ViTConfig(
        image_size=IMAGE, patch_size=8, num_channels=3, hidden_size=HIDDEN, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=37, attn_implementation="eager",
    )
    return ViTModel(config, add_pooling_layer=True).eval()


def make_resnet() -> torch.nn.Module:
    """A ResNet classifier (basic blocks); any image size from 32 up."""
    from transformers import ResNetConfig, ResNetForImageClassification

    _seeded(3)
    config = ResNetConfig(
        num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic", num_labels=5,
    )
    return ResNetForImageClassification(config).eval()


def make_unet() -> torch.nn.Module:
    """A diffusers UNet2DConditionModel (cross-attention on a text embedding of width 32)."""
    from diffusers import UNet2DConditionModel

    _seeded(4)
    return UNet2DConditionModel(
        sample_size=LATENT, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(32, 64),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=HIDDEN, attention_head_dim=8, norm_num_groups=32,
    ).eval()


def make_roberta() -> torch.nn.Module:
    """A RoBERTa encoder: 64 position embeddings whose ids start after the padding index (1), so at most 62 tokens."""
    from transformers import RobertaConfig, RobertaModel

    _seeded(7)
    config = RobertaConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
        max_position_embeddings=64, type_vocab_size=1, pad_token_id=1, attn_implementation="eager",
    )
    return RobertaModel(config, add_pooling_layer=False).eval()


def make_wav2vec2() -> torch.nn.Module:
    """A Wav2Vec2 CTC model on raw audio: a 2-layer conv feature extractor (10x downsampling) and a 2-layer encoder.

    Its frame count follows the sample count (``((n - 10) // 5 + 1 - 3) // 2 + 1``): an output range that the
    recording alone does not show when the declared input range is wider.
    """
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    _seeded(5)
    config = Wav2Vec2Config(
        vocab_size=AUDIO_VOCAB, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2, feat_extract_norm="group", do_stable_layer_norm=False,
        apply_spec_augment=False, attn_implementation="eager",
    )
    return Wav2Vec2ForCTC(config).eval()


def make_llama() -> torch.nn.Module:
    """A Llama decoder (RoPE, RMSNorm, grouped-query attention, SDPA) with its language-model head."""
    from transformers import LlamaConfig, LlamaForCausalLM

    _seeded(6)
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=37, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
        attn_implementation="sdpa",  # transformers' default: torch and onnxruntime disagree where a row is all padding
    )
    return LlamaForCausalLM(config).eval()


class ClassifierHead(torch.nn.Module):
    """A sequence-classification head on BERT's pooled output: dropout-free dense + tanh + projection to labels."""

    def __init__(self, labels: int = 3) -> None:
        super().__init__()
        self.dense = torch.nn.Linear(HIDDEN, HIDDEN)
        self.out = torch.nn.Linear(HIDDEN, labels)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.dense(pooled)))


def make_head() -> torch.nn.Module:
    """The classification head, the second step of the ``bert_classifier`` ensemble."""
    _seeded(1)
    return ClassifierHead().eval()


class BertClassifier(torch.nn.Module):
    """The whole pipeline the ensemble serves: BERT's pooled output into the head (the torch reference)."""

    def __init__(self) -> None:
        super().__init__()
        self.bert = make_bert()
        self.head = make_head()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor) -> torch.Tensor:
        pooled = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids).pooler_output
        return self.head(pooled)


def make_bert_classifier() -> torch.nn.Module:
    """The ensemble's torch reference: the same weights as ``make_bert`` and ``make_head``."""
    return BertClassifier().eval()


# --------------------------------------------------------------------------------------------------------------------
# Sample calls (args, kwargs), as a pipeline makes them
# --------------------------------------------------------------------------------------------------------------------
def token_call(batch: int, seq: int, generator: torch.Generator, *, segments: bool) -> dict[str, Any]:
    """Token ids, a right-padded attention mask and (for BERT) two segments."""
    ids = torch.randint(1, VOCAB, (batch, seq), generator=generator)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[-1, max(1, seq // 2):] = 0
    kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
    if segments:
        types = torch.zeros(batch, seq, dtype=torch.int64)
        types[:, seq // 2:] = 1
        kwargs["token_type_ids"] = types
    return kwargs


def unet_guided_call(batch: int, generator: torch.Generator, step: float) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """One guidance step: latents and text embeddings stacked [uncond; cond] (2 x batch), one 0-d timestep."""
    latents = torch.randn(batch, 4, LATENT, LATENT, generator=generator)
    text = torch.randn(2 * batch, TEXT_SEQ, HIDDEN, generator=generator)
    return (torch.cat([latents, latents]), torch.tensor(step), text), {}


def unet_guided_calls() -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Real guidance calls (timesteps of a 1000-step schedule) for ``samples: {factory: ...}``."""
    generator = torch.Generator().manual_seed(10)
    return [unet_guided_call(b, generator, t) for b, t in ((1, 981.0), (2, 501.0), (4, 21.0))]


def left_padded_call(lengths: list[int], generator: torch.Generator) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A batch of prompts of ``lengths`` tokens, left-padded (pad id 0) to the longest, as a generation pipeline
    batches them for a decoder; ``use_cache=False`` as in the recording (logits only)."""
    seq = max(lengths)
    ids = torch.zeros(len(lengths), seq, dtype=torch.int64)
    mask = torch.zeros(len(lengths), seq, dtype=torch.int64)
    for row, length in enumerate(lengths):
        ids[row, seq - length:] = torch.randint(3, VOCAB, (length,), generator=generator)
        mask[row, seq - length:] = 1
    return (), {"input_ids": ids, "attention_mask": mask, "use_cache": False}


#: Prompt lengths per batch of the decoder's sample calls (every batch has a shorter, left-padded prompt).
LLAMA_SAMPLE_BATCHES = ((7, 3), (12, 5, 9), (16, 16, 4, 11))


def llama_left_padded_calls() -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Real left-padded prompt batches for ``samples: {factory: ...}``: padded positions have undefined logits."""
    generator = torch.Generator().manual_seed(11)
    return [left_padded_call(list(lengths), generator) for lengths in LLAMA_SAMPLE_BATCHES]

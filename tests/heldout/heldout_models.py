"""Held-out architectures: real models of the zoo's kinds that gen-repo was never tuned on (none is in tests/zoo).

Each is built from a tiny config with random weights (no downloads), ``torch.manual_seed`` making the weights the
same in every process. The GraphSpecs in ``specs/`` were recorded from these factories with aitune 0.6.0's own code
(``record_heldout.py``); ``bench/heldout_zoo.py`` builds, serves and smoke-tests all of them with one manifest
(``gen-repo.yaml``; Mamba, whose export fails, is left out of it). ``*_calls`` functions return sample calls
``[(args, kwargs), ...]`` for the manifest's ``samples: {factory: ...}``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

# The zoo's sample-call helpers (left-padded prompts, padded tokens) serve here too; its token ids (< 99) fit the
# held-out vocabularies. Imported from its folder, which is not a package, without leaving that folder on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "zoo"))
try:
    import zoo_models as _zoo
finally:
    sys.path.pop(0)

#: Tiny sizes shared by the recordings and the sample calls.
VOCAB = 101
HIDDEN = 32
IMAGE = 32
LATENT = 8
MELS = 16  # Whisper's mel bins
MEL_FRAMES = 64  # Whisper's fixed input length: 2 x max_source_positions
GRU_EMBED, GRU_HIDDEN, GRU_TAGS = 16, 10, 7


# Encoder-decoder ------------------------------------------------------------------------------------------------------
def make_bart() -> torch.nn.Module:
    """A BART encoder-decoder with its language-model head (learned positions, offset 2)."""
    from transformers import BartConfig, BartForConditionalGeneration

    torch.manual_seed(20)
    config = BartConfig(
        vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=37, decoder_ffn_dim=37, max_position_embeddings=64,
        pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, use_cache=False,
        attn_implementation="eager",
    )
    return BartForConditionalGeneration(config).eval()


# Audio ---------------------------------------------------------------------------------------------------------------
def make_whisper_encoder() -> torch.nn.Module:
    """Whisper's encoder on log-mel features of a fixed length (it refuses any other)."""
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    torch.manual_seed(21)
    config = WhisperConfig(
        vocab_size=VOCAB, num_mel_bins=MELS, d_model=HIDDEN, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=37, decoder_ffn_dim=37,
        max_source_positions=MEL_FRAMES // 2, max_target_positions=32, pad_token_id=1, bos_token_id=0,
        eos_token_id=2, decoder_start_token_id=0, attn_implementation="eager",
    )
    return WhisperEncoder(config).eval()


def make_hubert() -> torch.nn.Module:
    """A HuBERT audio classifier on raw audio: conv features, mean-pooled frames, one label vector per clip."""
    from transformers import HubertConfig, HubertForSequenceClassification

    torch.manual_seed(22)
    config = HubertConfig(
        vocab_size=12, hidden_size=HIDDEN, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
        conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2, feat_extract_norm="group", do_stable_layer_norm=False,
        apply_spec_augment=False, num_labels=4, classifier_proj_size=16, attn_implementation="eager",
    )
    return HubertForSequenceClassification(config).eval()


# Decoder LLM ---------------------------------------------------------------------------------------------------------
def make_qwen2() -> torch.nn.Module:
    """A Qwen2 decoder (RoPE, grouped-query attention with biases, SDPA) with its language-model head."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(23)
    config = Qwen2Config(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
        use_cache=False, attn_implementation="sdpa",
    )
    return Qwen2ForCausalLM(config).eval()


def qwen2_left_padded_calls() -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Real left-padded prompt batches for the manifest's ``samples``: logits at padded positions are undefined."""
    generator = torch.Generator().manual_seed(30)
    return [_zoo.left_padded_call(list(lengths), generator) for lengths in ((5, 9), (14, 3, 8), (11, 11, 2, 6))]


# Token classification ------------------------------------------------------------------------------------------------
def make_distilbert_tagger() -> torch.nn.Module:
    """DistilBERT with a token-classification head (no token_type_ids, sinusoidal-free learned positions)."""
    from transformers import DistilBertConfig, DistilBertForTokenClassification

    torch.manual_seed(24)
    config = DistilBertConfig(
        vocab_size=VOCAB, dim=HIDDEN, n_layers=2, n_heads=2, hidden_dim=37, max_position_embeddings=64,
        num_labels=5, attn_implementation="eager",
    )
    return DistilBertForTokenClassification(config).eval()


# VAE decoder ---------------------------------------------------------------------------------------------------------
class VaeDecoder(torch.nn.Module):
    """A diffusers AutoencoderKL's decode path as a pipeline calls it: scaled latents in, an image out."""

    def __init__(self) -> None:
        super().__init__()
        from diffusers import AutoencoderKL

        self.vae = AutoencoderKL(
            in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(16, 32),
            down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
            up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"), layers_per_block=1, norm_num_groups=8,
            sample_size=2 * LATENT,
        )

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        return self.vae.decode(latents / self.vae.config.scaling_factor).sample


def make_vae_decoder() -> torch.nn.Module:
    """The VAE decoder (latents [b, 4, h, w] -> images [b, 3, 2h, 2w])."""
    torch.manual_seed(25)
    return VaeDecoder().eval()


# Two towers ----------------------------------------------------------------------------------------------------------
def make_siglip() -> torch.nn.Module:
    """A SigLIP text tower and vision tower in one forward (sigmoid logits); texts and images batch on their own."""
    from transformers import SiglipConfig, SiglipModel

    torch.manual_seed(26)
    config = SiglipConfig(
        text_config={"vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": 37, "num_hidden_layers": 1,
                     "num_attention_heads": 2, "max_position_embeddings": 16, "pad_token_id": 1, "bos_token_id": 0,
                     "eos_token_id": 2},
        vision_config={"image_size": IMAGE, "patch_size": 8, "hidden_size": HIDDEN, "intermediate_size": 37,
                       "num_hidden_layers": 1, "num_attention_heads": 2},
        attn_implementation="eager",
    )
    return SiglipModel(config).eval()


# RNN -----------------------------------------------------------------------------------------------------------------
class GruTagger(torch.nn.Module):
    """A tagger on a one-layer unidirectional GRU, sequence-first (``[seq, batch]``); the initial state is optional."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, GRU_EMBED)
        self.gru = torch.nn.GRU(GRU_EMBED, GRU_HIDDEN)
        self.tags = torch.nn.Linear(GRU_HIDDEN, GRU_TAGS)

    def forward(self, tokens: torch.Tensor, h0: torch.Tensor | None = None) -> torch.Tensor:
        hidden, _ = self.gru(self.embed(tokens), h0)
        return self.tags(hidden)


def make_gru_tagger() -> torch.nn.Module:
    """The GRU tagger (two graphs in AITune: without and with ``h0``)."""
    torch.manual_seed(27)
    return GruTagger().eval()


# Bool mask, keep polarity --------------------------------------------------------------------------------------------
class KeepMaskEncoder(torch.nn.Module):
    """Self-attention pooling with a bool mask where ``True`` keeps a position (the opposite of PyTorch's
    key-padding mask): scores of dropped positions are filled with -inf, so an all-false row has no valid position."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.attention = torch.nn.MultiheadAttention(HIDDEN, 2, batch_first=True)
        self.score = torch.nn.Linear(HIDDEN, 1)

    def forward(self, input_ids: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        x = self.embed(input_ids)
        x, _ = self.attention(x, x, x, key_padding_mask=~keep, need_weights=False)
        weights = self.score(x).squeeze(-1).masked_fill(~keep, float("-inf")).softmax(-1)
        return (weights.unsqueeze(-1) * x).sum(1)


def make_keep_mask_encoder() -> torch.nn.Module:
    """The keep-mask encoder (one pooled vector per sequence)."""
    torch.manual_seed(28)
    return KeepMaskEncoder().eval()


def kept_tokens(batch: int, seq: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids and a keep mask (``True`` = a real token): the zoo's padded tokens with the mask inverted."""
    ids, padding = _zoo.padded_tokens(batch, seq, generator)
    return ids, ~padding


# Half precision ------------------------------------------------------------------------------------------------------
def make_distilbert_tagger_fp16() -> torch.nn.Module:
    """The DistilBERT tagger in float16 (token ids in, float16 logits out)."""
    return make_distilbert_tagger().half()


# A data-dependent output ---------------------------------------------------------------------------------------------
class ScoreFilter(torch.nn.Module):
    """Keeps the boxes whose score passes a threshold, as detection post-processing does: how many rows come out
    depends on the values, not on the shapes."""

    def forward(self, boxes: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return boxes[scores.sigmoid() > 0.5]


def make_score_filter() -> torch.nn.Module:
    """The score filter (boxes [b, n, 4] and scores [b, n] in, the kept boxes [k, 4] out)."""
    return ScoreFilter().eval()


# State-space language model -------------------------------------------------------------------------------------------
def make_mamba() -> torch.nn.Module:
    """A one-layer Mamba with its LM head: without the mamba_ssm kernels (none on CPU), transformers runs the selective
    scan as a Python loop over the sequence, which an exporter traces at the example's length."""
    from transformers import MambaConfig, MambaForCausalLM

    torch.manual_seed(50)
    config = MambaConfig(vocab_size=VOCAB, hidden_size=16, state_size=4, num_hidden_layers=1, expand=2, conv_kernel=4,
                         use_cache=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return MambaForCausalLM(config).eval()

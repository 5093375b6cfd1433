"""Tiny random models of every supported family, built from configs (offline), and how to run them.

``CASES[name]`` gives a config factory, an input factory and what the attention check must neutralise:
rotary models run with all positions equal (the rotation is then the identity), relative position biases
are zeroed (Swin's too; its shifted windows' mask remains, and the check leaves masked entries out), QK-norm is
applied to the extracted projections (its gains drawn at random, so that a gain applied to
the wrong head fails).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
import transformers as T

D, H, LAYERS, VOCAB = 32, 4, 2, 64
TOKENS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
COMMON = dict(hidden_size=D, num_attention_heads=H, num_hidden_layers=LAYERS, intermediate_size=64, vocab_size=VOCAB)
VISION = dict(
    hidden_size=D, num_attention_heads=H, num_hidden_layers=LAYERS, intermediate_size=64, image_size=16, patch_size=4
)
AUDIO = dict(
    COMMON,
    conv_dim=(8, 8),
    conv_stride=(2, 2),
    conv_kernel=(3, 3),
    num_conv_pos_embeddings=4,
    num_conv_pos_embedding_groups=2,
    **TOKENS,
)
SEQ2SEQ = dict(
    d_model=D,
    encoder_attention_heads=H,
    decoder_attention_heads=H,
    encoder_layers=LAYERS,
    decoder_layers=LAYERS,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    vocab_size=VOCAB,
    **TOKENS,
)
# Ettin's layout (jhu-clsp/ettin-encoder-* and -decoder-*): a global layer every third, sliding-window layers
# between. local_attention=4 makes the windows mask part of a 6-token input (the encoder's local layers see 2 tokens
# either side, the decoder's a token and the one before); biases are off in Ettin, on here to test their split.
ETTIN = dict(
    COMMON, **TOKENS, num_hidden_layers=4, global_attn_every_n_layers=3, local_attention=4, attention_bias=True
)
QK_NORM = ("q_norm", "k_norm")
SEQ = 6
CLIP_TEXT = dict(COMMON, **TOKENS)
# Swin: 8 x 8 patches in windows of 4 x 4 (stage 0: four windows, its second block shifted), then 4 x 4 patches in
# one window; d_model 16 with 2 heads, then 32 with 4.
SWIN = dict(image_size=32, patch_size=4, embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=4, mlp_ratio=2.0)


def text(batch=2, seq=SEQ):
    return {"input_ids": torch.randint(3, VOCAB, (batch, seq))}


def seq2seq(batch=2, seq=SEQ):
    return {
        "input_ids": torch.randint(3, VOCAB, (batch, seq)),
        "decoder_input_ids": torch.randint(3, VOCAB, (batch, 5)),
    }


@dataclass
class Case:
    config: Callable[[], T.PretrainedConfig]
    inputs: Callable[[], dict] = text
    rotary: bool = False  # pass position_ids of zeros
    zero: tuple[str, ...] = ()  # parameter name fragments to zero (relative position biases)
    gains: tuple[str, ...] = ()  # parameter name fragments to draw at random (QK-norm gains, constant at init)
    qk_norm: bool = False
    kwargs: dict = field(default_factory=dict)
    probs_from_modules: bool = (
        False  # each block's probabilities from its attention module (Swin's outputs keep one per stage)
    )


CASES = {
    "bert": Case(lambda: T.BertConfig(**COMMON)),
    "roberta": Case(lambda: T.RobertaConfig(**COMMON, **TOKENS)),
    "xlm-roberta": Case(lambda: T.XLMRobertaConfig(**COMMON, **TOKENS)),
    "electra": Case(lambda: T.ElectraConfig(embedding_size=16, **COMMON)),
    "distilbert": Case(lambda: T.DistilBertConfig(dim=D, n_heads=H, n_layers=LAYERS, hidden_dim=64, vocab_size=VOCAB)),
    "albert": Case(lambda: T.AlbertConfig(embedding_size=16, **COMMON, **TOKENS)),
    "mpnet": Case(lambda: T.MPNetConfig(**COMMON, **TOKENS), zero=("relative_attention_bias",)),
    "deberta-v2": Case(lambda: T.DebertaV2Config(**COMMON, relative_attention=False, pos_att_type=[])),
    "modernbert": Case(lambda: T.ModernBertConfig(**ETTIN, cls_token_id=1, sep_token_id=2), rotary=True),
    "modernbert-decoder": Case(lambda: T.ModernBertDecoderConfig(**ETTIN, cls_token_id=1, sep_token_id=2), rotary=True),
    "gpt2": Case(lambda: T.GPT2Config(n_embd=D, n_head=H, n_layer=LAYERS, vocab_size=VOCAB, **TOKENS)),
    "gpt_neo": Case(
        lambda: T.GPTNeoConfig(
            hidden_size=D,
            num_heads=H,
            num_layers=LAYERS,
            attention_types=[[["global", "local"], 1]],
            vocab_size=VOCAB,
            **TOKENS,
        )
    ),
    "gptj": Case(
        lambda: T.GPTJConfig(n_embd=D, n_head=H, n_layer=LAYERS, rotary_dim=4, vocab_size=VOCAB, **TOKENS), rotary=True
    ),
    "gpt_neox": Case(lambda: T.GPTNeoXConfig(**COMMON, **TOKENS, rotary_pct=0.25), rotary=True),
    "opt": Case(
        lambda: T.OPTConfig(
            hidden_size=D,
            num_attention_heads=H,
            num_hidden_layers=LAYERS,
            ffn_dim=64,
            word_embed_proj_dim=D,
            vocab_size=VOCAB,
            **TOKENS,
        )
    ),
    "llama": Case(lambda: T.LlamaConfig(num_key_value_heads=2, **COMMON, **TOKENS), rotary=True),
    "mistral": Case(lambda: T.MistralConfig(num_key_value_heads=2, **COMMON, **TOKENS), rotary=True),
    "qwen2": Case(lambda: T.Qwen2Config(num_key_value_heads=2, **COMMON, **TOKENS), rotary=True),
    "olmo": Case(lambda: T.OlmoConfig(num_key_value_heads=2, **COMMON, **TOKENS), rotary=True),
    "olmo2": Case(
        lambda: T.Olmo2Config(num_key_value_heads=2, **COMMON, **TOKENS), rotary=True, qk_norm=True, gains=QK_NORM
    ),
    "gemma3_text": Case(
        lambda: T.Gemma3TextConfig(num_key_value_heads=1, head_dim=16, **COMMON, **TOKENS),
        rotary=True,
        qk_norm=True,
        gains=QK_NORM,
    ),
    "phi": Case(lambda: T.PhiConfig(**COMMON, **TOKENS), rotary=True),
    "phi3": Case(lambda: T.Phi3Config(num_key_value_heads=2, **COMMON, **TOKENS), rotary=True),
    "t5": Case(
        lambda: T.T5Config(
            d_model=D,
            d_kv=8,
            num_heads=H,
            num_layers=LAYERS,
            d_ff=64,
            vocab_size=VOCAB,
            decoder_start_token_id=0,
            **TOKENS,
        ),
        inputs=seq2seq,
        zero=("relative_attention_bias",),
    ),
    "bart": Case(
        lambda: T.BartConfig(**SEQ2SEQ),
        inputs=seq2seq,
    ),
    "whisper": Case(
        lambda: T.WhisperConfig(
            **SEQ2SEQ,
            num_mel_bins=8,
            max_source_positions=8,
            max_target_positions=16,
            decoder_start_token_id=1,
        ),
        inputs=lambda: {"input_features": torch.randn(2, 8, 16), "decoder_input_ids": torch.randint(3, VOCAB, (2, 5))},
    ),
    "vit": Case(lambda: T.ViTConfig(**VISION), inputs=lambda: {"pixel_values": torch.randn(2, 3, 16, 16)}),
    "deit": Case(lambda: T.DeiTConfig(**VISION), inputs=lambda: {"pixel_values": torch.randn(2, 3, 16, 16)}),
    "beit": Case(lambda: T.BeitConfig(**VISION), inputs=lambda: {"pixel_values": torch.randn(2, 3, 16, 16)}),
    "dinov2": Case(lambda: T.Dinov2Config(**VISION), inputs=lambda: {"pixel_values": torch.randn(2, 3, 16, 16)}),
    "clip_vision_model": Case(
        lambda: T.CLIPVisionConfig(**VISION), inputs=lambda: {"pixel_values": torch.randn(2, 3, 16, 16)}
    ),
    "clip": Case(
        lambda: T.CLIPConfig(vision_config=VISION, text_config=CLIP_TEXT, projection_dim=16),
        inputs=lambda: {"pixel_values": torch.randn(2, 3, 16, 16), **text()},
    ),
    "swin": Case(
        lambda: T.SwinConfig(**SWIN),
        inputs=lambda: {"pixel_values": torch.randn(2, 3, 32, 32)},
        zero=("relative_position_bias_table",),
        probs_from_modules=True,
    ),
    "hubert": Case(lambda: T.HubertConfig(**AUDIO), inputs=lambda: {"input_values": torch.randn(2, 64)}),
    "wav2vec2": Case(lambda: T.Wav2Vec2Config(**AUDIO), inputs=lambda: {"input_values": torch.randn(2, 64)}),
}


def build(name: str, seed: int = 0):
    """The tiny model for ``name`` in eval mode with eager attention, with biases randomised."""
    torch.manual_seed(seed)
    case = CASES[name]
    model = T.AutoModel.from_config(case.config()).eval()
    model.set_attn_implementation("eager")
    with torch.no_grad():
        for pname, param in model.named_parameters():
            if any(z in pname for z in case.zero):
                param.zero_()
            elif any(g in pname for g in case.gains):
                param.normal_(1, 0.3)
            elif pname.endswith("bias") and param.ndim == 1:
                param.normal_(0, 0.3)  # trained checkpoints have non-zero biases; test the bias terms too
    return model

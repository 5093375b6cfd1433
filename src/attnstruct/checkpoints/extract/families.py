"""Where each Transformer family keeps its query/key weights, as tensor-name patterns.

One :class:`StackSpec` per attention stack of a family. Patterns are regular expressions searched in the
tensor names of a checkpoint or a model's ``state_dict`` (so any prefix such as ``bert.`` or ``model.`` is
allowed); the group ``layer`` is the layer index. Several alternatives cover the naming schemes of
transformers 4.x (what checkpoints on disk keep) and 5.x (modules in memory), e.g. ViT's
``encoder.layer.N.attention.attention.query`` on disk and ``layers.N.attention.q_proj`` in memory.
Biases are the same names ending in ``bias``.

Fused layouts (``fused``):

* ``gpt2_conv1d``: GPT-2's ``c_attn`` Conv1D weight ``[d_model, 3 d_model]`` (input x output), ``[q | k | v]``
  along the output axis;
* ``neox_per_head``: GPT-NeoX/Pythia ``query_key_value`` ``[3 d_model, d_model]``, interleaved per head as
  ``[q_h, k_h, v_h]`` for each head ``h`` (``view(H, 3, d_head, d_model)``);
* ``qkv_contiguous``: ``[q | k | v]`` stacked along the output axis, ``H d_head`` rows of queries then
  ``n_kv d_head`` rows of keys (ModernBERT ``Wqkv``, Phi-3 ``qkv_proj``).

QK-norm (``qk_norm`` patterns; blocks of a layer with a query-norm tensor carry the ``qk_norm`` extra): Gemma-3 and
Qwen-3 normalise each head's ``[d_head]`` query and key, OLMo-2 the whole ``[H d_head]`` query and ``[n_kv d_head]``
key projection, Phi each head with a LayerNorm. The score of ``W_qk`` leaves out this per-token normalisation (RMS,
or mean and variance for LayerNorm) and its gains: the bilinear form is that of the projections before normalisation.

ModernBERT's encoder fuses ``Wqkv``; its decoder form (``modernbert-decoder``, Ettin's decoders) keeps separate
``attn.q_proj`` and ``attn.k_proj`` ``[H d_head, d_model]``, in memory and on disk alike.

CLIP's vision tower (``clip_vision_model``, and the vision half of a whole ``clip`` model, whose head count is in its
``vision_config``; the text tower is not read) keeps ``encoder.layers.N.self_attn.{q,k}_proj``, with a
``vision_model.`` prefix in checkpoints written by transformers 4.x.

Swin numbers its attention blocks by stage and block: ``encoder.layers.S.blocks.B.attention.self.{query,key}`` on disk
(transformers 4.x) and ``...attention.{q,k}_proj`` in memory (5.x). A pattern with the groups ``stage`` and ``block``
instead of ``layer`` gives the blocks as layers ``0..n-1`` in (stage, block) order, each with its stage's width and its
stage's entry of the head-count list ``num_heads``. Its logits add a learned relative position bias and are taken
inside (every other block, shifted) local windows: the extras ``relative_position`` and ``windows``, what the score of
``W_qk`` leaves out.

The project's own Transformer (:class:`attnstruct.training.model.LanguageModel`, model types ``attnstruct-encoder``
and ``attnstruct-decoder``, exported as ``config.json`` and ``pytorch_model.bin``) keeps ``nn.Linear`` weights
``encoder.blocks.{L}.attention.{query,key}.weight`` ``[d_model, d_model]`` with biases; the model type sets whether
the stack is the bidirectional encoder or the causal decoder.
"""

from __future__ import annotations

from dataclasses import dataclass

L = r"(?P<layer>\d+)"
STAGE_BLOCK = r"(?P<stage>\d+)\.blocks\.(?P<block>\d+)"  # Swin: ``layers.{stage}.blocks.{block}``
P = r"(?:^|\.)"  # start of a name or of a dotted component


@dataclass(frozen=True)
class StackSpec:
    stack: str
    causal: bool
    q: tuple[str, ...]
    k: tuple[str, ...] = ()
    fused: str | None = None
    heads: tuple[str, ...] = ("num_attention_heads",)
    kv_heads: tuple[str, ...] = ("num_key_value_heads",)
    extras: tuple[str, ...] = ()
    qk_norm: tuple[str, ...] = ()
    # ``heads`` (and ``kv_heads``) name config keys; a dotted key reads a nested config (``vision_config.num_...``),
    # and a key holding a list gives one head count per stage (patterns with the group ``stage``)


@dataclass(frozen=True)
class Family:
    name: str
    model_types: tuple[str, ...]
    stacks: tuple[StackSpec, ...]
    shared_layers: bool = False
    vision: bool = False  # a vision transformer: its encoder is a "vision encoder" (tables.role_of)


def _linear(stack, causal, prefix, q, k, **kw):
    """A stack with separate query/key ``nn.Linear`` weights named ``{prefix}.{q|k}.weight``."""
    prefixes = (prefix,) if isinstance(prefix, str) else prefix
    return StackSpec(
        stack,
        causal,
        q=tuple(rf"{P}{p}\.{q}\.weight$" for p in prefixes),
        k=tuple(rf"{P}{p}\.{k}\.weight$" for p in prefixes),
        **kw,
    )


_BERT = _linear("encoder", False, rf"encoder\.layer\.{L}\.attention\.self", "query", "key")
_ATTNSTRUCT = rf"blocks\.{L}\.attention"  # LanguageModel: encoder.blocks.{L}; a bare Encoder: blocks.{L}
_ROTARY = ("rotary",)
_DECODER_ONLY = rf"layers\.{L}\.self_attn"


def _rotary_decoder(q_norm: str = "q_norm") -> StackSpec:
    """LLaMA-style causal stack: separate ``q_proj``/``k_proj``, rotary, optional QK-norm named ``q_norm``."""
    return _linear(
        "decoder",
        True,
        _DECODER_ONLY,
        "q_proj",
        "k_proj",
        extras=_ROTARY,
        qk_norm=(rf"{P}{_DECODER_ONLY}\.{q_norm}\.weight$",),
    )


FAMILIES = (
    Family("BERT", ("bert", "roberta", "xlm-roberta", "electra", "camembert", "xlm-roberta-xl"), (_BERT,)),
    Family(
        "DistilBERT",
        ("distilbert",),
        (_linear("encoder", False, rf"transformer\.layer\.{L}\.attention", "q_lin", "k_lin", heads=("n_heads",)),),
    ),
    Family(
        "ALBERT",
        ("albert",),
        (
            _linear(
                "encoder", False, rf"encoder\.albert_layer_groups\.{L}\.albert_layers\.0\.attention", "query", "key"
            ),
        ),
        shared_layers=True,
    ),
    Family(
        "MPNet",
        ("mpnet",),
        (_linear("encoder", False, rf"encoder\.layer\.{L}\.attention\.attn", "q", "k", extras=("relative_position",)),),
    ),
    Family(
        "DeBERTa-v2",
        ("deberta-v2",),
        (
            _linear(
                "encoder",
                False,
                rf"encoder\.layer\.{L}\.attention\.self",
                "query_proj",
                "key_proj",
                extras=("relative_position",),
            ),
        ),
    ),
    Family(
        "ModernBERT",
        ("modernbert",),
        (
            StackSpec(
                "encoder", False, q=(rf"{P}layers\.{L}\.attn\.Wqkv\.weight$",), fused="qkv_contiguous", extras=_ROTARY
            ),
        ),
    ),
    Family(
        "ModernBERT decoder",
        ("modernbert-decoder",),
        (_linear("decoder", True, rf"layers\.{L}\.attn", "q_proj", "k_proj", extras=_ROTARY),),
    ),
    Family(
        "GPT-2",
        ("gpt2",),
        (
            StackSpec(
                "decoder", True, q=(rf"{P}h\.{L}\.attn\.c_attn\.weight$",), fused="gpt2_conv1d", heads=("n_head",)
            ),
        ),
    ),
    Family(
        "GPT-Neo",
        ("gpt_neo",),
        (_linear("decoder", True, rf"h\.{L}\.attn\.attention", "q_proj", "k_proj", heads=("num_heads",)),),
    ),
    Family(
        "GPT-J",
        ("gptj",),
        (_linear("decoder", True, rf"h\.{L}\.attn", "q_proj", "k_proj", heads=("n_head",), extras=_ROTARY),),
    ),
    Family(
        "GPT-NeoX",
        ("gpt_neox",),
        (
            StackSpec(
                "decoder",
                True,
                q=(rf"{P}layers\.{L}\.attention\.query_key_value\.weight$",),
                fused="neox_per_head",
                extras=_ROTARY,
            ),
        ),
    ),
    Family("OPT", ("opt",), (_linear("decoder", True, rf"decoder\.layers\.{L}\.self_attn", "q_proj", "k_proj"),)),
    Family(
        "LLaMA",
        ("llama", "mistral", "mixtral", "qwen2", "qwen3", "olmo", "olmo2", "granite", "smollm3"),
        (_rotary_decoder(),),
    ),
    Family(
        "Gemma",
        ("gemma", "gemma2", "gemma3_text"),
        (_rotary_decoder(),),
    ),
    Family(
        "Phi",
        ("phi",),
        (_rotary_decoder("q_layernorm"),),
    ),
    Family(
        "Phi-3",
        ("phi3",),
        (
            StackSpec(
                "decoder", True, q=(rf"{P}{_DECODER_ONLY}\.qkv_proj\.weight$",), fused="qkv_contiguous", extras=_ROTARY
            ),
        ),
    ),
    Family(
        "T5",
        ("t5", "mt5", "umt5"),
        (
            _linear(
                "encoder",
                False,
                rf"encoder\.block\.{L}\.layer\.0\.SelfAttention",
                "q",
                "k",
                heads=("num_heads",),
                extras=("relative_position",),
            ),
            _linear(
                "decoder",
                True,
                rf"decoder\.block\.{L}\.layer\.0\.SelfAttention",
                "q",
                "k",
                heads=("num_heads",),
                extras=("relative_position",),
            ),
            _linear("cross", False, rf"decoder\.block\.{L}\.layer\.1\.EncDecAttention", "q", "k", heads=("num_heads",)),
        ),
    ),
    Family(
        "BART",
        ("bart", "mbart", "marian", "pegasus", "whisper"),
        (
            _linear(
                "encoder",
                False,
                rf"encoder\.layers\.{L}\.self_attn",
                "q_proj",
                "k_proj",
                heads=("encoder_attention_heads",),
            ),
            _linear(
                "decoder",
                True,
                rf"decoder\.layers\.{L}\.self_attn",
                "q_proj",
                "k_proj",
                heads=("decoder_attention_heads",),
            ),
            _linear(
                "cross",
                False,
                rf"decoder\.layers\.{L}\.encoder_attn",
                "q_proj",
                "k_proj",
                heads=("decoder_attention_heads",),
            ),
        ),
    ),
    Family(
        "ViT",
        ("vit", "deit", "beit", "dinov2", "vit_mae", "vit_msn", "dinov2_with_registers"),
        (
            _linear(
                "encoder",
                False,
                (
                    rf"encoder\.layer\.{L}\.attention\.attention",  # transformers 4.x names (checkpoints on disk)
                    rf"layers\.{L}\.attention",  # 5.x modules in memory (ViT, DeiT, BEiT)
                    rf"encoder\.layer\.{L}\.attention",  # 5.x modules in memory (DINOv2)
                ),
                "(?:query|q_proj)",
                "(?:key|k_proj)",
            ),
        ),
        vision=True,
    ),
    Family(
        "CLIP vision",
        ("clip_vision_model",),
        (_linear("encoder", False, rf"encoder\.layers\.{L}\.self_attn", "q_proj", "k_proj"),),
        vision=True,
    ),
    Family(
        "CLIP vision",
        ("clip",),
        (
            _linear(
                "encoder",
                False,
                rf"vision_model\.encoder\.layers\.{L}\.self_attn",
                "q_proj",
                "k_proj",
                heads=("vision_config.num_attention_heads",),
            ),
        ),
        vision=True,
    ),
    Family(
        "Swin",
        ("swin",),
        (
            _linear(
                "encoder",
                False,
                (
                    rf"layers\.{STAGE_BLOCK}\.attention\.self",  # transformers 4.x names (checkpoints on disk)
                    rf"layers\.{STAGE_BLOCK}\.attention",  # 5.x modules in memory
                ),
                "(?:query|q_proj)",
                "(?:key|k_proj)",
                heads=("num_heads",),
                extras=("relative_position", "windows"),
            ),
        ),
        vision=True,
    ),
    Family(
        "Wav2Vec2",
        ("wav2vec2", "hubert", "wavlm", "data2vec-audio", "unispeech", "unispeech-sat"),
        (_linear("encoder", False, rf"encoder\.layers\.{L}\.attention", "q_proj", "k_proj"),),
    ),
    Family("attnstruct", ("attnstruct-encoder",), (_linear("encoder", False, _ATTNSTRUCT, "query", "key"),)),
    Family("attnstruct", ("attnstruct-decoder",), (_linear("decoder", True, _ATTNSTRUCT, "query", "key"),)),
)

FAMILY_BY_MODEL_TYPE = {t: f for f in FAMILIES for t in f.model_types}
SUPPORTED_MODEL_TYPES = tuple(sorted(FAMILY_BY_MODEL_TYPE))

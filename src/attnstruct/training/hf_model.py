"""The project's Transformer as a ``transformers`` custom model, so that a snapshot folder opens with
``AutoModelForMaskedLM`` (an encoder snapshot) or ``AutoModelForCausalLM`` (a decoder snapshot) and
``trust_remote_code=True``.

transformers' documented mechanism for models it does not ship: ``config.json`` maps each auto class to
``module.Class`` in its ``auto_map``, and the module files lie beside it (:mod:`attnstruct.training.hf_export`
writes both). Those files only import the classes below, and the classes take their layers from
:class:`~attnstruct.training.model.LanguageModel`: there is one definition of the network, the one that was
trained. The parameters keep the training model's names (``token.weight``, ``encoder.blocks.L...``, ``head_bias``),
so the weights load with nothing missing or unexpected.

The forward pass is :class:`LanguageModel`'s ``hidden`` and ``head``: logits ``[batch, length, vocab]`` from
``input_ids``, with bidirectional attention for the encoder and causal attention for the decoder. The model was
trained without padding, so an ``attention_mask`` or ``token_type_ids`` other than all ones or all zeros is
refused, not ignored. No loss, no generation cache: ``generate`` is not offered.
"""

from __future__ import annotations

import torch
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput, MaskedLMOutput

from .model import LanguageModel, init_bert_
from .model_config import TransformerConfig


class _AttnstructConfig(PretrainedConfig):
    """A snapshot's ``config.json``; the network's shape is its ``attnstruct.transformer`` entry."""

    def __init__(self, attnstruct: dict | None = None, **kwargs):
        self.attnstruct = dict(attnstruct or {})
        super().__init__(**kwargs)

    def transformer_config(self) -> TransformerConfig:
        """The :class:`TransformerConfig` the snapshot was trained with; ValueError (one line) when not recorded."""
        shape = self.attnstruct.get("transformer")
        if not isinstance(shape, dict):
            raise ValueError(f"{self.model_type} config has no attnstruct.transformer shape to build the model from")
        return TransformerConfig(**shape)


class AttnstructEncoderConfig(_AttnstructConfig):
    model_type = "attnstruct-encoder"


class AttnstructDecoderConfig(_AttnstructConfig):
    model_type = "attnstruct-decoder"


def _trivial(name: str, values: torch.Tensor | None, fill: int) -> None:
    if values is not None and not bool((values == fill).all()):
        raise ValueError(f"{name} must be all {fill}s: this model was trained without padding or segments")


class _AttnstructLanguageModel(PreTrainedModel):
    """:class:`LanguageModel`'s parts under transformers' model class, its own ``forward`` run on them."""

    causal: bool
    output: type
    hidden = LanguageModel.hidden  # the trained network's own computation, on the same parts
    head = LanguageModel.head

    def __init__(self, config: _AttnstructConfig):
        super().__init__(config)
        network = LanguageModel(config.transformer_config())
        for name, part in network.named_children():
            self.add_module(name, part)
        self.head_bias = network.head_bias
        self.post_init()

    def _init_weights(self, module: torch.nn.Module) -> None:
        init_bert_(module, self.config.transformer_config().init_std)
        if module is self:
            torch.nn.init.zeros_(self.head_bias)

    def get_input_embeddings(self) -> torch.nn.Embedding:
        return self.token

    def set_input_embeddings(self, value: torch.nn.Embedding) -> None:
        self.token = value

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ):
        _trivial("attention_mask", attention_mask, 1)
        _trivial("token_type_ids", token_type_ids, 0)
        return self.output(logits=self.head(self.hidden(input_ids, self.causal)))


class AttnstructForMaskedLM(_AttnstructLanguageModel):
    """An encoder snapshot (bidirectional attention, masked-LM head)."""

    config_class = AttnstructEncoderConfig
    causal = False
    output = MaskedLMOutput


class AttnstructForCausalLM(_AttnstructLanguageModel):
    """A decoder snapshot (causal attention, next-token head)."""

    config_class = AttnstructDecoderConfig
    causal = True
    output = CausalLMOutput

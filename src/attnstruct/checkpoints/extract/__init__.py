"""Query/key extraction from Transformer checkpoints of many families and formats.

Every reader yields :class:`~attnstruct.checkpoints.extract.blocks.AttentionBlock` objects (per-head ``W_q``, ``W_k`` in
the ``nn.Linear`` layout, key heads paired with query heads). :func:`count_parameters` counts a model's
parameters from any of these sources, as ``num_parameters()`` of the model counts them.
"""

from .blocks import (
    EXTRA_TERMS,
    FAILURE_KINDS,
    STACKS,
    AttentionBlock,
    ExtractionError,
    bias_extras,
    check_finite,
    expand_kv_heads,
)
from .parameters import count_parameters
from .sources import iter_blocks

__all__ = [
    "EXTRA_TERMS",
    "FAILURE_KINDS",
    "STACKS",
    "AttentionBlock",
    "ExtractionError",
    "bias_extras",
    "check_finite",
    "count_parameters",
    "expand_kv_heads",
    "iter_blocks",
]

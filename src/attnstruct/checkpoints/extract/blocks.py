"""The unit every reader yields: one attention block's per-head query and key weights.

Whatever the source (a model in memory, a Hugging Face folder, GGUF, ONNX, CTranslate2), extraction ends in
:class:`AttentionBlock` objects with weights in one layout, the ``nn.Linear`` one: ``q_h = W_q[h] x + b_q[h]``.
Under grouped-query attention the key heads are already paired with the query heads: query head ``h``
uses key head ``h // (n_heads / n_kv_heads)`` (the pairing of Hugging Face's ``repeat_kv``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from ...hub_client.failures import HubError

STACKS = ("encoder", "decoder", "cross")


FAILURE_KINDS = (
    "not found",
    "gated",
    "unsupported architecture",
    "no weights",
    "truncated",
    "offline",
    "rate limited",
    "invalid token",
    "error",
)


class ExtractionError(ValueError):
    """A checkpoint that cannot be had or read, with its ``kind`` (one of :data:`FAILURE_KINDS`).

    ``kind``: ``not found`` (no such file, repository, revision or packaged checkpoint), ``gated`` (a licence and a
    token needed), ``unsupported architecture`` (a family, format or layout attnstruct does not read), ``no weights``
    (a revision that holds no weight file at all, as some checkpoint branches on the hub do: EleutherAI/pythia#202),
    ``truncated`` (a file or transfer that ends early), ``offline`` (not in the cache, and the hub may not be asked),
    ``rate limited`` (the hub answered 429), ``invalid token`` (the hub refuses the token itself, on every request:
    a command stops at once), ``error`` (anything else: a malformed file, a bad tensor). ``detail`` names the
    problem in one line; the message is ``"{kind}: {detail}"`` (just the detail for ``error``), the line that
    ``attnstruct score`` prints before it exits 2 and that ``attnstruct sweep`` lists beside the kind.
    """

    def __init__(self, detail: str, kind: str = "error"):
        if kind not in FAILURE_KINDS:
            raise ValueError(f"unknown failure kind {kind!r}; choose one of {', '.join(FAILURE_KINDS)}")
        self.detail, self.kind = " ".join(str(detail).split()), kind
        super().__init__(self.detail if kind == "error" else f"{kind}: {self.detail}")

    def __reduce__(self):
        return type(self), (self.detail, self.kind)


@contextmanager
def hub_failures_as_extraction_errors() -> Iterator[None]:
    """Where a checkpoint is read from the hub: a :class:`~attnstruct.hub_client.failures.HubError` raised inside
    leaves as the :class:`ExtractionError` of the same kind and line (every hub kind is a failure kind)."""
    try:
        yield
    except HubError as err:
        raise ExtractionError(err.detail, err.kind) from None


def check_finite(tensor: torch.Tensor, name: str) -> torch.Tensor:
    """Return ``tensor`` or raise :class:`ExtractionError` if it holds NaN or inf."""
    # The sum is finite when every entry is (a NaN or inf entry makes it non-finite), and costs a tenth of the
    # elementwise test; only a non-finite sum (or an overflow) needs the exact check.
    if not bool(torch.isfinite(tensor.sum())) and not bool(torch.isfinite(tensor).all()):
        raise ExtractionError(f"tensor {name} contains NaN or inf")
    return tensor


def check_view(shape, stride, storage_offset, storage_elements: int, what: str) -> None:
    """Refuse (:class:`ExtractionError` naming ``what``) a strided view that is not a view of its storage.

    A view ``(storage_offset, shape, stride)``, in elements, of a storage of ``storage_elements`` must have
    non-negative integer sizes, strides and offset, as many strides as sizes, all below ``2^63`` and sizes whose
    product (leaving out zeros) is too (torch counts in 64 bits); at most ``storage_elements`` elements (a stride-0
    view would claim a file's few bytes many times over: a tensor of gigabytes from a file of kilobytes); and, when
    it has any element, its last one ``storage_offset + sum_k (shape_k - 1) stride_k`` inside the storage. So
    rebuilding a view costs no more than its storage, which is bytes of the file."""
    values = (*shape, *stride, storage_offset)
    if len(shape) != len(stride) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ExtractionError(
            f"{what}: sizes {list(shape)}, strides {list(stride)} and offset {storage_offset} are not "
            "a view's non-negative integers"
        )
    if max(values) >= 2**63 or math.prod(max(n, 1) for n in shape) >= 2**63:
        raise ExtractionError(f"{what}: sizes {list(shape)} and strides {list(stride)} overflow 64-bit integers")
    elements = math.prod(shape)
    if elements > storage_elements:
        raise ExtractionError(f"{what}: a view of {elements} elements, more than its storage's {storage_elements}")
    if elements and storage_offset + sum((n - 1) * s for n, s in zip(shape, stride)) >= storage_elements:
        raise ExtractionError(f"{what}: a view that reaches past the end of its storage of {storage_elements} elements")


# Terms of the attention logit that the bilinear form W_q^h W_k^h^T leaves out, as recorded in ``extras``.
EXTRA_TERMS = {
    "q_bias": "query bias: adds b_q^T W_k^h x_j (key side, changes attention) and a constant",
    "k_bias": "key bias: adds x_i^T W_q[h]^T b_k, constant along j, so softmax ignores it",
    "rotary": "rotary position embedding: the logit is x_i^T W_q^T R_(j-i) W_k x_j; scores use R = I",
    "qk_norm": "RMS/LayerNorm on queries and keys after the projection: a nonlinear rescaling per token",
    "relative_position": "learned relative position bias or disentangled position terms added to the logits",
    "alibi": "ALiBi linear distance penalty added to the logits",
    "windows": "local windows (Swin's, shifted every other block): a token attends only inside its window; the score "
    "is that of the bilinear form over every pair",
}


@dataclass(frozen=True)
class AttentionBlock:
    """Query/key weights of one attention block.

    Attributes:
        stack: ``"encoder"`` (bidirectional self-attention), ``"decoder"`` (self-attention of a decoder) or
            ``"cross"`` (decoder queries on encoder keys).
        layer: 0-based layer index within the stack.
        w_q: ``[n_heads, d_head, d_model]``.
        w_k: ``[n_heads, d_head, d_model]``, key heads expanded to pair with query heads.
        causal: whether the block attends only to earlier positions.
        n_kv_heads: distinct key heads before expansion (``n_heads`` without grouped-query attention).
        b_q, b_k: ``[n_heads, d_head]`` biases, or None.
        extras: keys of :data:`EXTRA_TERMS` that apply to this block.
        source_name: the tensor name the query weight was read from (for messages and tests).
    """

    stack: str
    layer: int
    w_q: torch.Tensor
    w_k: torch.Tensor
    causal: bool
    n_kv_heads: int
    b_q: torch.Tensor | None = None
    b_k: torch.Tensor | None = None
    extras: tuple[str, ...] = field(default=())
    source_name: str = ""

    def __post_init__(self):
        """Refuse (:class:`ExtractionError`, naming the block) what a reader must never yield: weights that are not
        both ``[heads, d_head, d_model]`` of one shape with no empty axis, a key head count that does not divide the
        query heads, biases not ``[heads, d_head]``."""
        if self.stack not in STACKS:
            raise ValueError(f"stack must be one of {STACKS}, got {self.stack!r}")
        what = self.source_name or f"{self.stack} layer {self.layer}"
        shape = tuple(self.w_q.shape)
        if len(shape) != 3 or shape != tuple(self.w_k.shape) or 0 in shape:
            raise ExtractionError(
                f"{what}: w_q and w_k must both be [heads, d_head, d_model] with no empty axis, got {shape} and "
                f"{tuple(self.w_k.shape)}"
            )
        n_kv = self.n_kv_heads
        if isinstance(n_kv, bool) or not isinstance(n_kv, numbers.Integral) or n_kv < 1:
            raise ExtractionError(f"{what}: {n_kv!r} key heads")
        if shape[0] % n_kv:
            raise ExtractionError(f"{what}: {shape[0]} query heads cannot share {n_kv} key heads evenly")
        for name, bias in (("b_q", self.b_q), ("b_k", self.b_k)):
            if bias is not None and tuple(bias.shape) != shape[:2]:
                raise ExtractionError(f"{what}: {name} has shape {tuple(bias.shape)}, not [heads, d_head] {shape[:2]}")
        unknown = set(self.extras) - set(EXTRA_TERMS)
        if unknown:
            raise ValueError(f"unknown extra terms {sorted(unknown)}")

    @property
    def n_heads(self) -> int:
        return self.w_q.shape[0]


def bias_extras(b_q: torch.Tensor | None, b_k: torch.Tensor | None) -> tuple[str, ...]:
    """``("q_bias", "k_bias")`` for the biases that are present and not all zero."""
    return tuple(term for term, b in (("q_bias", b_q), ("k_bias", b_k)) if b is not None and bool(b.any()))


def expand_kv_heads(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """``[n_kv, ...] -> [n_heads, ...]`` so that query head ``h`` gets key head ``h // (n_heads / n_kv)``."""
    n_kv = w.shape[0]
    if n_kv < 1 or n_heads % n_kv:
        raise ValueError(f"{n_heads} query heads cannot share {n_kv} key heads evenly")
    return w.repeat_interleave(n_heads // n_kv, dim=0)

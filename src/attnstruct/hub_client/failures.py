"""What a hub request that fails raises: one :class:`HubError`, its kind said first, in one line.

The hub client (:mod:`attnstruct.hub_client.client`) knows nothing of checkpoints or corpora: who reads a checkpoint
turns a :class:`HubError` into the checkpoint's error of the same kind and line
(:func:`attnstruct.checkpoints.extract.blocks.hub_failures_as_extraction_errors`), who prepares a corpus into the
corpus's error (:func:`attnstruct.tasks.hub_datasets.from_hub`).
"""

from __future__ import annotations

HUB_FAILURE_KINDS = ("not found", "gated", "truncated", "offline", "rate limited", "invalid token", "error")


class HubError(ValueError):
    """A hub request that failed, with its ``kind`` (one of :data:`HUB_FAILURE_KINDS`).

    ``kind``: ``not found`` (no such repository, revision or file, or a private one), ``gated`` (a licence and a
    token needed), ``truncated`` (a transfer that broke off or ended early), ``offline`` (the hub could not be
    reached), ``rate limited`` (HTTP 429 past the retry bounds), ``invalid token`` (the hub refuses the token itself,
    on every request), ``error`` (anything else: a status, a malformed answer, a bound passed). ``detail`` names the
    problem in one line; the message is ``"{kind}: {detail}"`` (just the detail for ``error``).
    """

    def __init__(self, detail: str, kind: str = "error"):
        if kind not in HUB_FAILURE_KINDS:
            raise ValueError(f"unknown hub failure kind {kind!r}; choose one of {', '.join(HUB_FAILURE_KINDS)}")
        self.detail, self.kind = " ".join(str(detail).split()), kind
        super().__init__(self.detail if kind == "error" else f"{kind}: {self.detail}")

    def __reduce__(self):
        return type(self), (self.detail, self.kind)

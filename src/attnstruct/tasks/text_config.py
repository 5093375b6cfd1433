"""The configuration of a text run (:class:`TextConfig`), its objectives and initialisations, without torch.

The task's code (batches, losses, the model it builds) is :mod:`attnstruct.tasks.text`, named by
``TextConfig.TASK_MODULE``, so that a run's reuse key covers it (:func:`attnstruct.training.run_folder.code_modules`);
``attnstruct train --help`` reads the fields here without loading it.

Which corpora are read as text with the BPE trained here and which are prepared corpora (:func:`takes_text_path`,
:attr:`TextConfig.prepared`) is decided here too, from the corpus's name alone.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ..training.config import non_negative_integer, one_of, positive_integers
from ..training.model_config import TransformerConfig
from ..training.run_config import RunConfig
from .preprocessing import PREPROCESSING

CORPUS_OPTIONS = ("tokenizer", "corpus_config", "corpus_split", "corpus_field", "max_tokens", "preprocessing")
MIN_BPE_VOCAB, MAX_BPE_VOCAB = 300, 2**20  # 256 bytes + merges; past 2**24 the tokenizers library aborts the process
DOCUMENT_SUFFIXES = (".parquet", ".jsonl", ".json")  # files of rows, read by attnstruct.tasks.source_documents
OBJECTIVES = ("mlm", "next-token", "next-token-mlm-collator")
INITS = ("bert", "symmetric", "symmetric-matched", "default-scale")
CAUSAL = {"mlm": False, "next-token": True, "next-token-mlm-collator": True}


@dataclass(frozen=True)
class TextConfig(RunConfig):
    """Everything that determines a text run: the shared fields of :class:`attnstruct.training.run_config.RunConfig`
    (whose defaults are notebook 05's quick profile) and the text's own below."""

    KIND: ClassVar[str] = "training"
    TASK_MODULE: ClassVar[str] = "attnstruct.tasks.text"  # its batches and loss: in the run's reuse key
    CAUSAL: ClassVar[dict[str, bool]] = CAUSAL
    RUN_KEYS: ClassVar[tuple[str, ...]] = ("objective", "init", "seed")
    FIXED: ClassVar[dict[str, tuple[str, ...]]] = {
        **RunConfig.FIXED,
        "objective": OBJECTIVES,
        "init": INITS,
        "preprocessing": tuple(PREPROCESSING),
    }
    # the attention, a placebo's weights, a continued run's start
    PER_RUN: ClassVar[tuple[str, ...]] = (*RunConfig.PER_RUN, "init_seed", "init_from")
    OMITTED_AT_DEFAULT: ClassVar[tuple[str, ...]] = (*RunConfig.OMITTED_AT_DEFAULT, *CORPUS_OPTIONS)
    LIMITS: ClassVar[dict[str, int]] = {
        **RunConfig.LIMITS,
        "seq_len": 2**20,
        "eval_batches": 10**5,
        "vocab_size": MAX_BPE_VOCAB,
    }

    objective: str = "mlm"
    init: str = "bert"
    seq_len: int = 64
    eval_batches: int = 4
    corpus: str = "shakespeare"
    vocab_size: int = 500
    val_fraction: float = 0.05
    init_seed: int | None = None  # the seed of the initial weights; None: ``seed``
    init_from: str | None = None  # a snapshot folder whose weights the run starts from; None: a new model
    tokenizer: str = "bpe"  # "bpe" (trained here, vocab_size), a hub id or a tokenizer.json path
    corpus_config: str | None = None  # a hub dataset's configuration (subset)
    corpus_split: str | None = None  # a hub dataset's split; None: the prepared corpus's default
    corpus_field: str | None = None  # the text column; None: the prepared corpus's default
    max_tokens: int | None = None  # tokenise at most this many tokens of the source; None: all
    preprocessing: str = "none"  # a transform of each document before tokenising (tasks.preprocessing)

    @property
    def weights_seed(self) -> int:
        """The seed the initial weights are drawn from: ``init_seed``, else ``seed``."""
        return self.seed if self.init_seed is None else self.init_seed

    def run_name(self) -> str:
        name = super().run_name()
        name = name if self.init_seed is None else f"{name}-weights{self.init_seed}"
        return name if self.init_from is None else f"{name}-continued"

    def validate_task(self) -> None:
        one_of(self.init, self.FIXED["init"], "init")
        non_negative_integer(self, "init_seed", optional=True)
        if self.init_from is not None and not isinstance(self.init_from, str):
            raise ValueError(f"init_from must be a snapshot folder (a string) or None, got {self.init_from!r}")
        if self.init_from is not None and self.init != "bert":
            raise ValueError(f"init_from continues a trained model: init must be 'bert', got {self.init!r}")
        positive_integers(self, ("seq_len", "eval_batches"))
        if not isinstance(self.vocab_size, int) or self.vocab_size < MIN_BPE_VOCAB:
            raise ValueError(f"vocab_size must be an integer >= 300 (256 bytes + merges), got {self.vocab_size!r}")
        if not 0.0 < self.val_fraction < 0.5:
            raise ValueError(f"val_fraction must be in (0, 0.5), got {self.val_fraction!r}")
        if not isinstance(self.corpus, (str, os.PathLike)):
            raise ValueError(f"corpus must be a packaged corpus name or a path, got {self.corpus!r}")
        if not isinstance(self.tokenizer, str) or not self.tokenizer:
            raise ValueError(f"tokenizer must be 'bpe', a hub id or a tokenizer.json path, got {self.tokenizer!r}")
        for name in ("corpus_config", "corpus_split", "corpus_field"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a string or None, got {getattr(self, name)!r}")
        if self.max_tokens is not None:
            positive_integers(self, ("max_tokens",))
        one_of(self.preprocessing, self.FIXED["preprocessing"], "preprocessing")

    @property
    def prepared(self) -> bool:
        """Whether the corpus is a prepared corpus (module docstring), not the plays or a text file with the BPE."""
        defaults = all(getattr(self, name) == getattr(TextConfig, name) for name in CORPUS_OPTIONS)
        return not (defaults and takes_text_path(self.corpus))

    def model_config(self, vocab_size: int) -> TransformerConfig:
        return self.transformer_config(vocab_size=vocab_size, max_len=self.seq_len)


@functools.cache
def _packaged_corpora() -> frozenset[str]:
    from ..checkpoints import zoo

    return frozenset(zoo.load_corpora())


def takes_text_path(source: str | os.PathLike) -> bool:
    """Whether ``source`` is read as today's text: a packaged corpus name, one text file (not parquet, jsonl or
    json), or a path that does not exist (:func:`attnstruct.tasks.plays_and_text_files.read_documents` names it). A
    ``hf://`` spec, a folder and a bare name that is not packaged (a named corpus) are prepared corpora."""
    packaged = _packaged_corpora()
    if isinstance(source, str) and (source in packaged or source.startswith("hf://")):
        return source in packaged
    path = Path(source)
    if path.is_dir():
        return False
    if path.is_file():
        return not path.name.lower().endswith(DOCUMENT_SUFFIXES)
    return len(path.parts) > 1 or bool(path.suffix)

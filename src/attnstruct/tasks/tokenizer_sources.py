"""The tokenizer of a prepared corpus, by name, and the encoding of documents with it (in worker processes too).

``--tokenizer`` names one of:

* a hub tokenizer, ``ORG/NAME[@REVISION]`` (``google-bert/bert-base-uncased``): the model's info (``GET
  /api/models/ORG/NAME/revision/REV?blobs=true``, checked by :func:`attnstruct.checkpoints.hub_manifest.listing`:
  a commit id, relative file names, sizes) gives the commit and the size of its ``tokenizer.json`` (at most
  :data:`~attnstruct.hub_client.client.MAX_ANSWER_BYTES`), which comes whole, by
  :func:`attnstruct.hub_client.client.get_file`, into attnstruct's cache of the model's files,
  ``<cache>/hub/ORG--NAME/files/<commit>/tokenizer.json``. A branch is pinned to the commit it had at its first use
  (the ``models`` entries of the pins file of :mod:`attnstruct.tasks.hub_sources`), so a later use reads the cached
  file without a request, offline too (or the file of that commit in the hub cache, where ``huggingface-cli
  download`` or an older attnstruct left it, if it lies inside the hub cache);
* a local ``tokenizer.json`` (or a folder holding one);
* ``bpe`` or ``bpe:N``: a byte-level BPE of vocabulary ``N`` (default :data:`DEFAULT_BPE_VOCAB`) trained here by
  :func:`attnstruct.tasks.plays_and_text_files.train_tokenizer` on the source's first training documents, at most
  :data:`BPE_SAMPLE_CHARS` characters of them (ten per token under ``--max-tokens``: a bounded, deterministic
  sample), kept in ``<cache>/corpora/tokenizers/`` under the source's digest and the settings, so a second use
  reads no text.

The digest of a tokenizer is the sha256 of its JSON: the file's text as read (as trained: ``Tokenizer.to_str()``).
Documents are encoded with ``encode_batch(..., add_special_tokens=True)`` (BERT's ``[CLS] ... [SEP]`` around each
document; nothing for a tokenizer without a post-processor), truncation and padding switched off. ``mask_id`` is
the id of ``[MASK]`` or ``<mask>``, else of a special token whose text holds ``mask`` (None if none); ``pad_id``
likewise with ``pad``; ``special_ids`` are the ids of the added tokens marked special.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DEFAULT_BPE_VOCAB = 8192
BPE_SAMPLE_CHARS = 20_000_000
BATCH = 256  # documents per encode_batch call
_BPE = re.compile(r"^bpe(?::(?P<n>\d+))?$")


def dtype_for(vocab_size: int) -> np.dtype:
    """``uint16`` when the vocabulary fits (``vocab_size < 65536``), else ``uint32``."""
    return np.dtype(np.uint16 if vocab_size < 1 << 16 else np.uint32)


@dataclass(frozen=True)
class TokenizerSource:
    """A resolved tokenizer: its JSON, digest and ids of note, and what to pin once a preparation begins."""

    spec: str
    text: str
    vocab_size: int
    mask_id: int | None
    pad_id: int | None
    special_ids: tuple[int, ...]
    origin: dict = field(default_factory=dict)
    pin: tuple[str, str] | None = None  # ("ORG/NAME@REV", commit)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def meta(self) -> dict:
        """The ``tokenizer`` entry of ``meta.json``: spec, digest, vocab_size, and where it came from."""
        return {"spec": self.spec, "digest": self.digest, "vocab_size": self.vocab_size, **self.origin}

    def remember(self, cache=None) -> None:
        if self.pin is not None:
            from .hub_sources import record_pin

            record_pin("models", *self.pin, cache=cache)


def load(text: str):
    """A ``tokenizers.Tokenizer`` from its JSON, truncation and padding off."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(text)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def _special(tokenizer, names: tuple[str, ...], word: str) -> int | None:
    for name in names:
        found = tokenizer.token_to_id(name)
        if found is not None:
            return int(found)
    hits = sorted(i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special and word in t.content.lower())
    return int(hits[0]) if hits else None


def from_json(spec: str, text: str, what: str, origin: dict, pin=None) -> TokenizerSource:
    """A :class:`TokenizerSource` of a tokenizer's JSON; CorpusError naming ``what`` when it cannot be read."""
    from .source_documents import CorpusError

    try:
        tokenizer = load(text)
    except Exception as err:
        raise CorpusError(f"cannot read the tokenizer {what} ({' '.join(str(err).split())[:200]})") from None
    added = tokenizer.get_added_tokens_decoder()
    return TokenizerSource(
        spec=spec,
        text=text,
        vocab_size=tokenizer.get_vocab_size(with_added_tokens=True),
        mask_id=_special(tokenizer, ("[MASK]", "<mask>"), "mask"),
        pad_id=_special(tokenizer, ("[PAD]", "<pad>"), "pad"),
        special_ids=tuple(sorted(int(i) for i, t in added.items() if t.special)),
        origin=origin,
        pin=pin,
    )


def _local(spec: str) -> TokenizerSource:
    from .source_documents import CorpusError

    path = Path(spec).expanduser().resolve()
    if path.is_dir():
        path = path / "tokenizer.json"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise CorpusError(f"cannot read the tokenizer {str(path)!r} ({err.__class__.__name__})") from None
    return from_json(spec, text, repr(str(path)), {"path": str(path)})


def _hub(spec: str, settings, cache) -> TokenizerSource:
    from ..checkpoints.hub import parse_hub_id
    from ..untrusted import COMMIT
    from .hub_sources import hub_settings, pinned
    from .source_documents import CorpusError

    repo, revision = parse_hub_id(spec)
    settings = hub_settings(settings)
    key = f"{repo}@{revision}"
    commit = revision if COMMIT.fullmatch(revision) else pinned("models", key, cache)
    path = _cached_tokenizer(settings, repo, commit, cache) if commit else None
    if path is None:
        if settings.offline:
            raise CorpusError(f"offline: {repo}/tokenizer.json is not in the cache and HF_HUB_OFFLINE is set")
        commit, path = _download_tokenizer(spec, settings, repo, commit or revision, cache)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise CorpusError(f"cannot read the tokenizer {spec} ({err.__class__.__name__}: {path})") from None
    pin = None if COMMIT.fullmatch(revision) else (key, commit)
    return from_json(spec, text, spec, {"repo": repo, "commit": commit}, pin)


def _hub_files(settings, cache):
    """``settings`` with the cache of a commit's whole files under ``cache`` when one is given."""
    from dataclasses import replace

    from ..cache_folder import cache_dir

    return settings if cache is None else replace(settings, range_cache=cache_dir(cache) / "hub")


def _tokenizer_path(settings, repo: str, commit: str, cache) -> Path:
    """``<cache>/hub/ORG--NAME/files/<commit>/tokenizer.json``: where the model path keeps a commit's whole files
    (:func:`attnstruct.checkpoints.hub.cached_file`)."""
    from ..checkpoints.hub import cached_file
    from .hub_datasets import checked

    return checked(cached_file, _hub_files(settings, cache), repo, commit, "tokenizer.json")


def _cached_tokenizer(settings, repo: str, commit: str, cache) -> Path | None:
    """The ``tokenizer.json`` of ``repo`` at ``commit`` in attnstruct's cache, else in the hub cache's snapshot of
    that commit (as ``huggingface_hub`` lays it out), if it lies inside the hub cache; None when neither holds it."""
    from ..checkpoints.hub import repo_folder
    from ..untrusted import inside
    from .hub_datasets import checked

    ours = _tokenizer_path(settings, repo, commit, cache)
    if ours.is_file():
        return ours
    theirs = checked(inside, settings.hub_cache, f"models--{repo_folder(repo)}", "snapshots", commit, "tokenizer.json")
    return theirs if theirs.is_file() else None


def _download_tokenizer(spec: str, settings, repo: str, revision: str, cache) -> tuple[str, Path]:
    """``(commit, path)``: the model's info at ``revision`` (checked), then its ``tokenizer.json`` into the cache,
    as the model path reads them (:func:`attnstruct.checkpoints.hub.model_listing`,
    :func:`~attnstruct.checkpoints.hub.download`)."""
    from ..checkpoints.hub import download, model_listing
    from ..hub_client.client import MAX_ANSWER_BYTES
    from ..untrusted import COMMIT
    from .hub_datasets import from_hub
    from .source_documents import CorpusError

    commit, files, sizes = from_hub(model_listing, settings, repo, revision)
    if COMMIT.fullmatch(revision) and commit != revision:
        raise CorpusError(f"the hub answered {repo}@{revision} with another commit, {commit}")
    if "tokenizer.json" not in files:
        raise CorpusError(f"cannot read the tokenizer {spec}: the repository has no tokenizer.json")
    size = sizes.get("tokenizer.json")
    if size is not None and size > MAX_ANSWER_BYTES:
        raise CorpusError(f"{repo}/tokenizer.json is {size:,} bytes, more than the {MAX_ANSWER_BYTES:,} read of one")
    _tokenizer_path(settings, repo, commit, cache)  # a cache path that would leave the cache: refused first
    return commit, from_hub(download, _hub_files(settings, cache), repo, commit, "tokenizer.json", sizes)


def _bpe(spec: str, vocab: int, sample, sample_chars: int, sample_key: str, cache) -> TokenizerSource:
    from ..cache_folder import cache_dir
    from ..results import write_atomically
    from .plays_and_text_files import train_tokenizer
    from .source_documents import CorpusError
    from .text_config import MAX_BPE_VOCAB, MIN_BPE_VOCAB

    if vocab < MIN_BPE_VOCAB:
        raise CorpusError(f"{spec}: a byte-level BPE needs a vocabulary of at least 300 (256 bytes + merges)")
    if vocab > MAX_BPE_VOCAB:
        raise CorpusError(f"{spec}: a byte-level BPE trained here has a vocabulary of at most {MAX_BPE_VOCAB:,}")
    path = cache_dir(cache) / "corpora" / "tokenizers" / f"bpe-{vocab}-{sample_key}.json"
    origin = {"trained_on": f"the source's first training documents, {sample_chars:,} characters at most"}
    if path.is_file():
        return from_json(spec, path.read_text(encoding="utf-8"), str(path), origin)
    documents = sample(sample_chars)
    if not documents:
        raise CorpusError(f"{spec}: the source holds no text to train a tokenizer on")
    text = train_tokenizer(documents, vocab, cache).to_str()
    write_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return from_json(spec, text, str(path), origin)


def resolve_tokenizer(
    spec: str, *, sample, sample_chars: int = BPE_SAMPLE_CHARS, sample_key: str = "", settings=None, cache=None
) -> TokenizerSource:
    """The tokenizer ``spec`` names (module docstring). ``sample(n_chars)`` gives the first training documents, at
    most ``sample_chars`` characters, a ``bpe`` tokenizer learns from, ``sample_key`` what identifies them (the
    source and the settings). CorpusError, one line, when it cannot be had."""
    from .source_documents import CorpusError

    if match := _BPE.match(spec):
        return _bpe(spec, int(match["n"] or DEFAULT_BPE_VOCAB), sample, sample_chars, sample_key, cache)
    if Path(spec).expanduser().exists() or spec.endswith(".json"):
        return _local(spec)
    from ..checkpoints.hub import looks_like_hub_id

    if looks_like_hub_id(spec):
        return _hub(spec, settings, cache)
    raise CorpusError(f"cannot read the tokenizer {spec!r}: not bpe[:N], a tokenizer.json nor a hub id ORG/NAME")


class Encoder:
    """Documents to token ids: the tokenizer loaded once, each text preprocessed (by its name in
    ``attnstruct.tasks.preprocessing.PREPROCESSING``) then encoded in batches of :data:`BATCH`."""

    def __init__(self, text: str, preprocessing: str, dtype: str):
        self.tokenizer, self.dtype = load(text), np.dtype(dtype)
        self.transform = preprocessing_function(preprocessing)

    def __call__(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(tokens, lengths)``: the ids of every document, concatenated (``dtype [sum(lengths)]``), and each
        document's count (``int64 [len(texts)]``)."""
        parts = []
        for i in range(0, len(texts), BATCH):
            batch = [self.transform(text) for text in texts[i : i + BATCH]]
            parts += [np.asarray(e.ids, dtype=self.dtype) for e in self.tokenizer.encode_batch(batch)]
        lengths = np.array([len(p) for p in parts], dtype=np.int64)
        return (np.concatenate(parts) if parts else np.zeros(0, self.dtype)), lengths


def preprocessing_function(name: str):
    """The transform named ``name`` (:data:`attnstruct.tasks.preprocessing.PREPROCESSING`); CorpusError naming the
    known ones otherwise."""
    from .preprocessing import preprocessing
    from .source_documents import CorpusError

    try:
        return preprocessing(name)
    except ValueError as err:
        raise CorpusError(str(err)) from None


_WORKER: dict = {}


def start_worker(text: str, preprocessing: str, dtype: str) -> None:
    """Initialise a worker process: one tokenizer thread (the processes are the parallelism), one Encoder; Ctrl-C
    is left to the parent, which stops between two shards (:mod:`attnstruct.interrupts`) and ends the pool."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _WORKER["encode"] = Encoder(text, preprocessing, dtype)


def encode_in_worker(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    return _WORKER["encode"](texts)

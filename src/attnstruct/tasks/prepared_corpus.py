"""A corpus tokenised once into flat token files, read as random windows by memory map (nanoGPT's way).

A prepared corpus is the folder ``<attnstruct cache>/corpora/prepared/<key>/`` (format :data:`FORMAT`):

* ``train.bin``, ``val.bin``: token ids, flat, little-endian, ``uint16`` when ``vocab_size < 65536`` else
  ``uint32``, document after document in source order;
* ``train.offsets.npy``, ``val.offsets.npy``: ``int64 [documents + 1]``, each document's first position in its
  ``.bin``, the last entry the total;
* ``train.counts.npy``: ``int64 [vocab_size]``, how often each id occurs in ``train.bin``;
* ``tokenizer.json``: the tokenizer the ids come from (:meth:`PreparedCorpus.tokenizer`);
* ``meta.json``: format, dtype, vocab_size, mask_id, pad_id, special_ids, tokens and documents per split, the
  source (spec, dataset, config, split, field, revision, resolved commit, files), the tokenizer (spec, sha256 digest,
  vocab_size, where from), preprocessing, val_fraction, max_tokens, created, attnstruct_version, key.

Rules. A document goes to ``val`` when the first 8 bytes of the BLAKE2b hash of its identity (its place in its
file, :mod:`attnstruct.tasks.source_documents`), read as a fraction of ``2**64``, fall below ``val_fraction``; when
none does and there are two documents or more, the one of smallest hash does. So the split depends on neither
``workers`` nor interruptions. ``max_tokens`` keeps the first documents of the source, in order, until that many
tokens (train and val together), the last one cut. ``preprocessing`` (a name of
``attnstruct.tasks.preprocessing.PREPROCESSING``) is applied to each document's text before tokenising; a row
whose text is empty or whitespace is skipped.

The key is ``{name}-{16 hex digits}``, the digits a sha256 of everything that fixes the tokens: the format, the
source spec, dataset, config, split, field, revision and commit, files and sizes (and a local file's modification
time), the tokenizer's digest, max_tokens, val_fraction and the preprocessing (its name and source code). When
the folder exists, :func:`prepare` returns it at once, without a request. Otherwise each unit of the source is
tokenised (in ``workers`` spawned processes when more than one) into a shard
``.<key>.partial/shards/FFFFF-PPPPPP.npz`` (tokens, lengths, hashes; :mod:`attnstruct.tasks.token_shards`), written
atomically; a killed preparation resumes from its finished shards. The shards are then joined in a fresh folder
inside ``.<key>.partial/``, ``meta.json`` written last, and that folder renamed
into place: a reader finds a whole corpus or none.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from . import token_shards
from .source_documents import CorpusError, Source

FORMAT = "attnstruct-tokens/1"
SPLITS = ("train", "val")


@dataclass(frozen=True)
class PreparedCorpus:
    """A prepared corpus opened for reading: its folder, ``meta.json``, the token ids of both splits as read-only
    memory maps (a zero-length read-only array for an empty split), the document offsets and the train counts."""

    folder: Path
    meta: dict
    train: np.ndarray
    val: np.ndarray
    train_offsets: np.ndarray
    val_offsets: np.ndarray
    counts: np.ndarray

    @property
    def vocab_size(self) -> int:
        return int(self.meta["vocab_size"])

    @property
    def mask_id(self) -> int | None:
        return self.meta["mask_id"]

    @property
    def tokens(self) -> int:
        """Tokens of both splits together."""
        return len(self.train) + len(self.val)

    def tokenizer(self):
        """The ``tokenizers.Tokenizer`` the corpus was tokenised with (``tokenizer.json`` of the folder)."""
        from .tokenizer_sources import load

        return load((self.folder / "tokenizer.json").read_text(encoding="utf-8"))

    def describe(self) -> str:
        """``prepared: 12,345 tokens (12,000 train, 345 val) in 67 documents -> FOLDER``."""
        documents = sum(self.meta["documents"].values())
        return (
            f"prepared: {self.tokens:,} tokens ({len(self.train):,} train, {len(self.val):,} val) "
            f"in {documents:,} documents -> {self.folder}"
        )


def _tokens(path: Path, dtype: np.dtype) -> np.ndarray:
    if path.stat().st_size == 0:
        empty = np.zeros(0, dtype)
        empty.flags.writeable = False
        return empty
    return np.memmap(path, dtype=dtype, mode="r")


def is_prepared(source) -> bool:
    """Whether ``source`` is a prepared corpus folder: its ``meta.json`` names the format :data:`FORMAT`."""
    if not isinstance(source, (str, os.PathLike)) or not (meta := Path(source) / "meta.json").is_file():
        return False
    try:
        return json.loads(meta.read_text()).get("format") == FORMAT
    except (ValueError, AttributeError):
        return False


def open_prepared(folder: str | os.PathLike) -> PreparedCorpus:
    """The prepared corpus in ``folder``; CorpusError when it is not one (no ``meta.json``, another format, files
    that disagree with it)."""
    folder = Path(folder)
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        raise CorpusError(f"{folder} is not a prepared corpus (no readable meta.json)") from None
    if not isinstance(meta, dict):
        raise CorpusError(f"{folder}/meta.json holds a JSON {type(meta).__name__}, not an object")
    if meta.get("format") != FORMAT:
        raise CorpusError(f"{folder} holds format {meta.get('format')!r}, not {FORMAT}")
    try:  # a folder copied from elsewhere may hold anything: np.load refuses pickled arrays by default
        dtype = np.dtype(meta["dtype"]).newbyteorder("<")
        if dtype not in (np.dtype("<u2"), np.dtype("<u4")):
            raise ValueError(f"dtype {meta['dtype']!r} is not uint16 or uint32")
        arrays = {split: _tokens(folder / f"{split}.bin", dtype) for split in SPLITS}
        offsets = {split: np.load(folder / f"{split}.offsets.npy") for split in SPLITS}
        counts = np.load(folder / "train.counts.npy")
        disagree = [
            split
            for split in SPLITS
            if offsets[split].ndim != 1
            or not len(offsets[split])
            or offsets[split][-1] != len(arrays[split])
            or len(arrays[split]) != meta["tokens"][split]
        ]
    except (KeyError, TypeError, ValueError, IndexError, OSError) as err:
        raise CorpusError(f"{folder} is not a readable prepared corpus ({' '.join(str(err).split())})") from None
    if disagree:
        raise CorpusError(f"{folder}: {disagree[0]}.bin and its offsets or meta.json disagree")
    return PreparedCorpus(folder, meta, arrays["train"], arrays["val"], offsets["train"], offsets["val"], counts)


def open_source(source: str, config=None, split=None, field=None, settings=None, cache=None) -> Source:
    """A hub dataset (``hf://datasets/...``), a named corpus or a local folder or file, as a Source."""
    from .hub_sources import CORPORA, hub_source

    source = os.fspath(source)
    if source.startswith("hf://") or source in CORPORA:
        return hub_source(source, config, split, field, settings, cache)
    from .source_documents import local_source

    return local_source(source, config, split, field)


def _sampler(src: Source, val_fraction: float, preprocessing: str):
    from .tokenizer_sources import preprocessing_function

    def sample(limit: int) -> list[str]:
        transform, documents, size = preprocessing_function(preprocessing), [], 0
        for unit in src.units():
            for text in token_shards.rows(src, unit, val_fraction)[0]:
                documents.append(transform(text))
                size += len(documents[-1])
                if size >= limit:
                    return documents
        return documents

    return sample


def _preprocessing_digest(name: str) -> str | None:
    if name == "none":
        return None
    from .tokenizer_sources import preprocessing_function

    try:
        code = inspect.getsource(preprocessing_function(name))
    except (OSError, TypeError):
        return None
    return hashlib.sha256(code.encode()).hexdigest()[:16]


def corpus_key(src: Source, tokenizer_digest: str, max_tokens, val_fraction: float, preprocessing: str) -> str:
    """``{name}-{16 hex digits}`` (module docstring)."""
    fields = {
        "format": FORMAT,
        "source": src.digest(),
        "tokenizer": tokenizer_digest,
        "max_tokens": max_tokens,
        "val_fraction": val_fraction,
        "preprocessing": [preprocessing, _preprocessing_digest(preprocessing)],
    }
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
    name = src.dataset.rstrip("/").rsplit("/", 1)[-1] + (f"-{src.config}" if src.config else "")
    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in name)[:48].strip("-.") or "corpus"
    return f"{name}-{digest}"


def prepared_dir(cache=None) -> Path:
    from ..cache_folder import cache_dir

    return cache_dir(cache) / "corpora" / "prepared"


def _inside(folder: Path, name: str) -> Path:
    """``folder / name``, refused unless it stays in ``folder`` (the key holds a dataset's and a config's names)."""
    from ..untrusted import UnsafeName, inside

    try:
        return inside(folder, name)
    except UnsafeName as err:
        raise CorpusError(str(err)) from None


def _check(max_tokens, val_fraction, workers) -> None:
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 1 <= max_tokens <= 2**62
    ):
        raise CorpusError(f"max_tokens must be an integer from 1 to 2**62 or None, got {max_tokens!r}")
    if not 0.0 <= val_fraction < 0.5:
        raise CorpusError(f"val_fraction must be in [0, 0.5), got {val_fraction!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise CorpusError(f"workers must be a positive integer, got {workers!r}")
    most = 4 * (os.cpu_count() or 1)
    if workers > most:
        raise CorpusError(f"workers must be at most {most} (four per CPU of this machine), got {workers}")


def prepare(
    source,
    tokenizer: str,
    *,
    config: str | None = None,
    split: str | None = None,
    field: str | None = None,
    max_tokens: int | None = None,
    val_fraction: float = 0.005,
    workers: int = 1,
    preprocessing: str = "none",
    cache=None,
    settings=None,
    progress: bool = True,
    log=print,
) -> PreparedCorpus:
    """Tokenise ``source`` with ``tokenizer`` into a prepared corpus, or return the one prepared before (module
    docstring). ``source``: ``hf://datasets/ORG/NAME[@REV][/PATH]``, a named corpus
    (:data:`attnstruct.tasks.hub_sources.CORPORA`) or a local folder or file; ``tokenizer``: a hub id, a
    ``tokenizer.json`` or ``bpe[:N]`` (:mod:`attnstruct.tasks.tokenizer_sources`); ``settings``: a
    :class:`attnstruct.checkpoints.hub.HubSettings` (default: from the environment); ``log`` receives progress
    lines. Bad input raises CorpusError with one line, before anything is written."""
    from .tokenizer_sources import BPE_SAMPLE_CHARS, preprocessing_function, resolve_tokenizer

    _check(max_tokens, val_fraction, workers)
    preprocessing_function(preprocessing)
    src = open_source(source, config, split, field, settings, cache)
    sample_chars = BPE_SAMPLE_CHARS if max_tokens is None else min(BPE_SAMPLE_CHARS, 10 * max_tokens)
    sample_key = hashlib.sha256(f"{src.digest()}|{preprocessing}|{val_fraction}|{sample_chars}".encode()).hexdigest()
    tok = resolve_tokenizer(
        tokenizer,
        sample=_sampler(src, val_fraction, preprocessing),
        sample_chars=sample_chars,
        sample_key=sample_key[:16],
        settings=settings,
        cache=cache,
    )
    key = corpus_key(src, tok.digest, max_tokens, val_fraction, preprocessing)
    folder, partial = (_inside(prepared_dir(cache), name) for name in (key, f".{key}.partial"))
    if (folder / "meta.json").is_file():
        return open_prepared(folder)
    src.check_field()
    what = f"{src.spec}" + "".join(f", {k} {v}" for k, v in (("config", src.config), ("split", src.split)) if v)
    log(f"preparing {what}, field {src.field}, with {tok.spec} ({tok.vocab_size:,} tokens) -> {folder}")

    def begin() -> None:
        src.remember()
        tok.remember(cache)

    from .tokenizer_sources import dtype_for

    dtype = dtype_for(tok.vocab_size)
    shards = token_shards.tokenise(
        src, tok.text, dtype, partial / "shards", max_tokens, workers, preprocessing, progress, begin
    )
    if not shards:
        raise CorpusError(f"{what} holds no data")
    out = Path(tempfile.mkdtemp(prefix="out-", dir=partial))
    stats = token_shards.assemble(shards, out, dtype, tok.vocab_size, max_tokens, val_fraction)
    if stats["tokens"]["train"] == 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise CorpusError(f"{what}: no text to train on (every row's {src.field!r} is empty, or all went to val)")
    from .._version import __version__

    meta = {
        "format": FORMAT,
        "dtype": dtype.name,
        "vocab_size": tok.vocab_size,
        "mask_id": tok.mask_id,
        "pad_id": tok.pad_id,
        "special_ids": list(tok.special_ids),
        **stats,
        "source": src.identity(),
        "tokenizer": tok.meta(),
        "preprocessing": preprocessing,
        "val_fraction": val_fraction,
        "max_tokens": max_tokens,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "attnstruct_version": __version__,
        "key": key,
    }
    (out / "tokenizer.json").write_text(tok.text, encoding="utf-8")
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    try:
        os.rename(out, folder)
    except OSError:  # another preparation of the same key finished first
        if not (folder / "meta.json").is_file():
            raise
    shutil.rmtree(partial, ignore_errors=True)
    fetched = getattr(src.reader, "bytes_read", 0)
    if fetched and src.commit:
        log(f"read {fetched / 1e6:,.1f} MB of {src.dataset}")
    return open_prepared(folder)

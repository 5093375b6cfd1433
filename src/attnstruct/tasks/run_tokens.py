"""The tokens and the tokenizer a text run trains with, chosen by its configuration.

Two paths, told apart by :attr:`attnstruct.tasks.text_config.TextConfig.prepared`:

* the packaged plays or one UTF-8 text file, with the byte-level BPE of ``vocab_size`` trained here on it
  (:mod:`attnstruct.tasks.plays_and_text_files`): the token ids in memory,
  :class:`~attnstruct.tasks.plays_and_text_files.TokenData`;
* anything else, a *prepared corpus* (:mod:`attnstruct.tasks.prepared_corpus`): a hub dataset
  ``hf://datasets/ORG/NAME[@REV]`` with ``corpus_config``, ``corpus_split`` and ``corpus_field``, a named corpus,
  parquet, jsonl or text files or a folder of them, any tokenizer (``tokenizer``: a hub id, a ``tokenizer.json``,
  or ``bpe`` of ``vocab_size``), ``max_tokens``, ``preprocessing``; or a prepared folder itself. It is tokenised once
  on first use into the attnstruct cache and read by memory map,
  :class:`~attnstruct.tasks.plays_and_text_files.MappedTokens`.

Both are loaded once per process for the runs that share them. A bad corpus, option or tokenizer, and a masked
objective with a tokenizer that has no mask token, raise ValueError with one line.
"""

from __future__ import annotations

import functools

from . import plays_and_text_files
from .text_config import CORPUS_OPTIONS

MASKED = ("mlm", "next-token-mlm-collator")  # the objectives whose inputs carry a mask token


def corpus_data(config, cache=None) -> plays_and_text_files.TokenData | plays_and_text_files.MappedTokens:
    """The tokens a run of ``config`` (a :class:`~attnstruct.tasks.text_config.TextConfig`) trains on (module
    docstring)."""
    if not config.prepared:
        return _tokens(config.corpus, config.vocab_size, config.val_fraction, cache)
    options = tuple((name, getattr(config, name), getattr(type(config), name)) for name in CORPUS_OPTIONS)
    data = _mapped(str(config.corpus), options, config.vocab_size, config.val_fraction, cache)
    if config.objective in MASKED and data.mask_id is None:
        raise ValueError(f"objective {config.objective!r} needs a mask token; tokenizer {data.tokenizer!r} has none")
    return data


def corpus_tokenizer(config, cache=None):
    """The ``tokenizers.Tokenizer`` of ``config``'s tokens: the BPE trained on the text, or the one a prepared
    corpus keeps beside its tokens."""
    data = corpus_data(config, cache)
    if isinstance(data, plays_and_text_files.MappedTokens):
        from .prepared_corpus import open_prepared

        return open_prepared(data.folder).tokenizer()
    return plays_and_text_files.train_tokenizer(
        plays_and_text_files.read_documents(config.corpus, cache), config.vocab_size, cache
    )


@functools.lru_cache(maxsize=4)
def _tokens(source, vocab_size: int, val_fraction: float, cache) -> plays_and_text_files.TokenData:
    """:func:`attnstruct.tasks.plays_and_text_files.load_tokens`, once per process."""
    return plays_and_text_files.load_tokens(source, vocab_size, val_fraction, cache)


@functools.lru_cache(maxsize=4)
def _mapped(
    source: str, options: tuple, vocab_size: int, val_fraction: float, cache
) -> plays_and_text_files.MappedTokens:
    """The prepared corpus of ``options`` (triples of an option of :data:`CORPUS_OPTIONS`, its value and its default):
    ``source`` opened when it is a prepared folder, else prepared (or found in the cache) by
    :func:`attnstruct.tasks.prepared_corpus.prepare`, tokenizer ``bpe`` as ``bpe:<vocab_size>``."""
    from . import prepared_corpus

    values = {name: value for name, value, _ in options}
    tokenizer = values.pop("tokenizer")
    if prepared_corpus.is_prepared(source):
        given = [name for name, value, default in options if name != "tokenizer" and value != default]
        if given:
            raise ValueError(f"corpus {source!r} is a prepared folder: {', '.join(given)} do not apply")
        data = plays_and_text_files.MappedTokens.of(prepared_corpus.open_prepared(source))
        if tokenizer not in ("bpe", data.tokenizer):
            raise ValueError(f"corpus {source!r} was prepared with tokenizer {data.tokenizer!r}, not {tokenizer!r}")
        return data
    if source in plays_and_text_files.CORPORA:
        raise ValueError(f"the packaged corpus {source!r} takes the BPE trained here, without corpus options")
    tokenizer = f"bpe:{vocab_size}" if tokenizer == "bpe" else tokenizer
    keywords = {name.removeprefix("corpus_"): value for name, value in values.items()}
    prepared = prepared_corpus.prepare(source, tokenizer, **keywords, val_fraction=val_fraction, cache=cache)
    return plays_and_text_files.MappedTokens.of(prepared)

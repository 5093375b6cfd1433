"""A source tokenised unit by unit into shards, and the shards joined into a prepared corpus's files.

Each unit of a :class:`~attnstruct.tasks.source_documents.Source` (a parquet row group, a JSON-lines chunk, a text
file) is encoded (in ``workers`` spawned processes when more than one) into one shard ``FFFFF-PPPPPP.npz``
(``tokens``: the ids of its documents one after another, ``lengths``: int64 per document, ``hashes``: uint64 per
document), written atomically, so a killed preparation resumes from the shards it finished; Ctrl-C
(:mod:`attnstruct.interrupts`) stops it between two shards. :func:`assemble` then
joins the shards into ``train.bin``, ``val.bin``, their offsets and the training counts, by the rules of
:mod:`attnstruct.tasks.prepared_corpus` (the split by each document's hash, ``max_tokens`` over the first documents).
"""

from __future__ import annotations

import hashlib
import sys
from collections import deque
from pathlib import Path

import numpy as np

from .. import interrupts
from .source_documents import Source

SPLITS = ("train", "val")


def hash_of(identity: str) -> int:
    """The document hash the split is decided by: BLAKE2b's first 8 bytes of ``identity``, big-endian."""
    return int.from_bytes(hashlib.blake2b(identity.encode(), digest_size=8).digest(), "big")


def hash_threshold(val_fraction: float) -> np.uint64:
    """The hashes below ``val_fraction * 2**64`` go to validation."""
    return np.uint64(int(val_fraction * (1 << 64)))


def rows(src: Source, unit, val_fraction: float | None = None) -> tuple[list[str], np.ndarray]:
    """The unit's documents with text and their hashes (``uint64``); only training ones when ``val_fraction``."""
    texts, identities = src.read(unit)
    keep = [(t, hash_of(i)) for t, i in zip(texts, identities) if t is not None and t.strip()]
    if val_fraction is not None:
        threshold = int(hash_threshold(val_fraction))
        keep = [(t, h) for t, h in keep if h >= threshold]
    return [t for t, _ in keep], np.array([h for _, h in keep], dtype=np.uint64)


def write_shard(path: Path, tokens: np.ndarray, lengths: np.ndarray, hashes: np.ndarray) -> None:
    from ..results import write_atomically

    def write(tmp):
        with open(tmp, "wb") as handle:
            np.savez(handle, tokens=tokens, lengths=lengths, hashes=hashes)

    write_atomically(path, write)


def tokenise(src, text, dtype, shards: Path, max_tokens, workers, preprocessing, progress, begin) -> list[Path]:
    """Each unit's shard, in order, until ``max_tokens`` (units with a shard already are not read again)."""
    from tqdm.auto import tqdm

    from ..report.progress import bar_disabled
    from .tokenizer_sources import Encoder, encode_in_worker, start_worker

    if shards.is_dir():
        begin()
        begin = None
    encode = Encoder(text, preprocessing, dtype.name) if workers == 1 else None
    pool = None
    if workers > 1:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        pool = context.Pool(workers, initializer=start_worker, initargs=(text, preprocessing, dtype.name))
    bar = tqdm(total=max_tokens, unit="tok", unit_scale=True, disable=bar_disabled(progress and sys.stderr.isatty()))
    done, total, pending, units = [], 0, deque(), src.units()
    ahead = 2 * workers if pool is not None else 1  # units read before their turn: none without worker processes
    try:
        while True:
            while len(pending) < ahead and (unit := next(units, None)) is not None:
                path = shards / f"{unit.name}.npz"
                if path.is_file():
                    pending.append((path, None, None))
                    continue
                texts, hashes = rows(src, unit)
                job = pool.apply_async(encode_in_worker, (texts,)) if pool else encode(texts)
                pending.append((path, job, hashes))
            if not pending:
                break
            path, job, hashes = pending.popleft()
            if job is None:
                with np.load(path) as shard:
                    count = int(shard["lengths"].sum())
            else:
                tokens, lengths = job.get() if pool else job
                if begin is not None:
                    begin()
                    begin = None
                write_shard(path, tokens, lengths, hashes)
                count = len(tokens)
            done.append(path)
            total += count
            bar.update(count)
            if max_tokens is not None and total >= max_tokens:
                break
            interrupts.check(lambda: f"after {len(done)} shards ({total:,} tokens)")  # noqa: B023 (called here)
    finally:
        bar.close()
        if pool is not None:
            pool.terminate()
            pool.join()
    return done


def plan(shards: list[Path], max_tokens, val_fraction: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(lengths, in_val)`` of each shard's documents kept: those before ``max_tokens`` (the last one cut) and their
    split (module docstring)."""
    plans, total, threshold = [], 0, hash_threshold(val_fraction)
    for path in shards:
        with np.load(path) as shard:
            lengths, hashes = shard["lengths"].copy(), shard["hashes"]
        if max_tokens is not None:
            room = max_tokens - total
            ends = np.cumsum(lengths)
            keep = int(np.searchsorted(ends - lengths, room, side="left"))
            lengths, hashes = lengths[:keep], hashes[:keep]
            if keep and ends[keep - 1] > room:
                lengths[-1] -= ends[keep - 1] - room
        total += int(lengths.sum())
        plans.append((lengths, hashes < threshold, hashes))
    if val_fraction > 0 and sum(len(p[0]) for p in plans) >= 2 and not any(p[1].any() for p in plans):
        best = min((int(h.min()), i) for i, (_, _, h) in enumerate(plans) if len(h))
        shard, doc = best[1], int(np.argmin(plans[best[1]][2]))
        plans[shard][1][doc] = True
    return [(lengths, in_val) for lengths, in_val, _ in plans]


def assemble(shards: list[Path], out: Path, dtype, vocab_size: int, max_tokens, val_fraction: float) -> dict:
    """Join the shards into ``out``'s token, offset and count files; return the ``tokens`` and ``documents`` of
    ``meta.json``."""
    counts = np.zeros(vocab_size, dtype=np.int64)
    lengths_of = {split: [np.zeros(1, np.int64)] for split in SPLITS}
    with open(out / "train.bin", "wb") as train, open(out / "val.bin", "wb") as val:
        for path, (lengths, in_val) in zip(shards, plan(shards, max_tokens, val_fraction)):
            with np.load(path) as shard:
                tokens = shard["tokens"][: int(lengths.sum())].astype(dtype.newbyteorder("<"), copy=False)
            mask = np.repeat(in_val, lengths)
            tokens[~mask].tofile(train)
            tokens[mask].tofile(val)
            counts += np.bincount(tokens[~mask], minlength=vocab_size)[:vocab_size]
            lengths_of["train"].append(lengths[~in_val])
            lengths_of["val"].append(lengths[in_val])
    stats = {"tokens": {}, "documents": {}}
    for split in SPLITS:
        offsets = np.cumsum(np.concatenate(lengths_of[split]), dtype=np.int64)
        np.save(out / f"{split}.offsets.npy", offsets)
        stats["tokens"][split] = int(offsets[-1])
        stats["documents"][split] = len(offsets) - 1
    np.save(out / "train.counts.npy", counts)
    return stats

"""Benchmark: reading a GGUF checkpoint's attention blocks with attnstruct's header reader against ``gguf.GGUFReader``.

    .venv/bin/python benchmarks/gguf_open.py [PATH] [--repeats 3]

One run is what scoring a GGUF file does: ``gguf_info(path)``, then iterating every block of ``gguf_blocks(path)``
(each opens the file). It is timed with the current open
(:func:`attnstruct.checkpoints.extract.gguf_header.read_gguf_header`:
only the metadata values the scores use are decoded, the vocabulary is skipped) and with the former one (``gguf``'s
``GGUFReader``, which builds Python objects for every key/value, reimplemented below and swapped in for
``gguf_reader._open``); everything after the open is the same code. Runs alternate between the two; the median of
each is printed with the ratio, split into ``gguf_info`` (open + metadata) and the blocks (a second open +
dequantizing every layer's query/key weights). The two paths' blocks are checked equal.

Default file: the zoo's qwen2.5-coder-0.5b GGUF (151k-token vocabulary) when fetched, else smollm2-135m (49k).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import numpy as np
import torch
from gguf import GGUFReader
from gguf.quants import dequantize

from attnstruct.checkpoints import zoo
from attnstruct.checkpoints.extract import gguf_reader
from attnstruct.checkpoints.extract.gguf_reader import gguf_blocks, gguf_info


class GGUFReaderHeader:
    """The former open: ``GGUFReader`` parses the whole header; shows what ``gguf_reader`` reads of a header."""

    def __init__(self, path):
        reader = GGUFReader(path)
        self.metadata = {key: f.contents() for key, f in reader.fields.items() if gguf_reader._wanted_key(key)}
        self._tensors = {t.name: t for t in reader.tensors}
        self.tensors = {t.name: SimpleNamespace(ggml_type=t.tensor_type) for t in reader.tensors}

    def dequantize(self, name: str) -> np.ndarray:
        return dequantize(self._tensors[name].data, self._tensors[name].tensor_type)


def default_file() -> Path:
    for name in ("qwen2.5-coder-0.5b", "smollm2-135m"):
        if zoo.is_fetched(name):
            return zoo.path(name)
    raise SystemExit("no zoo GGUF file is fetched: run `attnstruct fetch-models smollm2-135m` or pass a path")


def one_run(path: Path) -> tuple[float, float, list]:
    """Seconds for ``gguf_info`` and for iterating the blocks; the blocks."""
    start = time.perf_counter()
    gguf_info(path)
    middle = time.perf_counter()
    blocks = list(gguf_blocks(path))
    return middle - start, time.perf_counter() - middle, blocks


def same_blocks(a: list, b: list) -> bool:
    tensors = [(x.w_q, y.w_q) for x, y in zip(a, b)] + [(x.w_k, y.w_k) for x, y in zip(a, b)]
    tensors += [(x.b_q, y.b_q) for x, y in zip(a, b)] + [(x.b_k, y.b_k) for x, y in zip(a, b)]
    same_meta = [(x.layer, x.extras, x.n_kv_heads) for x in a] == [(y.layer, y.extras, y.n_kv_heads) for y in b]
    return len(a) == len(b) and same_meta and all(x is y is None or torch.equal(x, y) for x, y in tensors)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", nargs="?", type=Path, help="a GGUF file (default: a zoo file, see above)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    path = args.path or default_file()
    print(f"{path} ({path.stat().st_size / 1e6:.0f} MB), {args.repeats} runs each")
    times = {"old": [], "new": []}
    blocks = {}
    for _ in range(args.repeats):
        with mock.patch.object(gguf_reader, "_open", GGUFReaderHeader):
            *seconds, blocks["old"] = one_run(path)
            times["old"].append(seconds)
        *seconds, blocks["new"] = one_run(path)
        times["new"].append(seconds)
    assert same_blocks(blocks["old"], blocks["new"]), "the two opens give different blocks"
    total = {}
    for label, name in (("old", "gguf.GGUFReader"), ("new", "gguf_header")):
        info, rest = (statistics.median(column) for column in zip(*times[label]))
        total[label] = statistics.median(a + b for a, b in times[label])
        print(
            f"{label} ({name}): {total[label]:.3f} s median (gguf_info {info:.3f} s, {len(blocks[label])} blocks "
            f"{rest:.3f} s); runs: {', '.join(f'{a + b:.3f}' for a, b in times[label])}"
        )
    print(f"old / new: {total['old'] / total['new']:.1f}x")


if __name__ == "__main__":
    main()

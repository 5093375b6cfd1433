"""Hostile checkpoint files and folders, of every format ``attnstruct score`` reads (docs/security.md).

A catalogue: each entry builds one malicious or malformed input in a fresh folder, the kind of thing a downloaded
checkpoint could be. Whatever it is, ``attnstruct score INPUT --out FILE`` ends in one line naming the problem and the
input, exit status 2, nothing written (tests/hostile.py); a pickle that runs code under a general unpickler never
runs. Inputs that could hang or exhaust the interpreter (pipes, devices, views claiming gigabytes) run in a
subprocess with a time limit and a memory limit. The files are written here byte by byte after each format's
published layout (safetensors' header, torch.save's ZIP members and pickle, GGUF v3, ONNX protobuf, CTranslate2 v6),
so no model library builds them.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from safetensors.torch import save_file

from attnstruct import cli

from hostile import (
    MEMORY_LIMIT,
    TreeWatch,
    assert_process_refused,
    assert_refused,
    canary,
    code_running_pickle,
    run_attnstruct,
)

pytestmark = pytest.mark.hostile

D, H = 8, 2  # d_model and heads of every tiny model here
BERT = {"model_type": "bert", "num_attention_heads": H, "hidden_size": D}
Q, K = "encoder.layer.{}.attention.self.query.{}", "encoder.layer.{}.attention.self.key.{}"


@dataclass(frozen=True)
class Hostile:
    """An input to score, the names its refusal must contain besides its own, and extra arguments."""

    path: Path
    names: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()


def randn(*shape, seed=0) -> torch.Tensor:
    """Seeded normal weights of ``shape``."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# -- Hugging Face folders: config.json, safetensors, shard indexes ---------------------------------------------------


def bert_tensors(layers=(0, 1), **replaced) -> dict[str, torch.Tensor]:
    """Query/key weights (``q0``, ``k1``, ...) and query biases (``bq0``) of a 2-head, d_model 8 BERT."""
    tensors = {}
    for layer in layers:
        tensors[Q.format(layer, "weight")] = replaced.get(f"q{layer}", randn(D, D, seed=2 * layer))
        tensors[K.format(layer, "weight")] = replaced.get(f"k{layer}", randn(D, D, seed=2 * layer + 1))
        if f"bq{layer}" in replaced:
            tensors[Q.format(layer, "bias")] = replaced[f"bq{layer}"]
    return {name: tensor.clone() for name, tensor in tensors.items() if tensor is not None}


def folder(root: Path, tensors=None, config: object = BERT, fmt: str = "safetensors") -> Path:
    """``root`` holding ``config.json`` (an object as JSON, a str as is, None for none) and the tensors as
    ``model.safetensors`` or ``pytorch_model.bin`` (None: no weights file)."""
    root.mkdir(parents=True, exist_ok=True)
    if isinstance(config, bytes):
        (root / "config.json").write_bytes(config)
    elif config is not None:
        (root / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    if tensors is not None and fmt == "safetensors":
        save_file(tensors, root / "model.safetensors")
    elif tensors is not None:
        torch.save(tensors, root / "pytorch_model.bin")
    return root


def with_config(config) -> Callable[[Path], Path]:
    return lambda root: folder(root, bert_tensors(), config)


def with_tensors(**replaced) -> Callable[[Path], Path]:
    return lambda root: folder(root, bert_tensors(**replaced))


def safetensors_bytes(header: object, data: bytes = b"") -> bytes:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def with_safetensors(raw: bytes) -> Callable[[Path], Path]:
    def make(root: Path) -> Path:
        folder(root)
        (root / "model.safetensors").write_bytes(raw)
        return root

    return make


def indexed(weight_map: object, fmt: str = "safetensors", shard: str | None = None) -> Callable[[Path], Hostile]:
    """A folder with a valid model next to it (``../other``) and a shard index holding ``weight_map`` (as JSON,
    or text as is; ``OTHER`` stands for the other model's weights file, ``SIBLING`` for its path from here);
    ``shard`` names a link to put in the folder, to that file."""

    def make(root: Path) -> Hostile:
        other = folder(root.parent / "other", bert_tensors(), fmt=fmt)
        weights = next(p for p in other.iterdir() if p.name != "config.json")
        folder(root)
        if fmt == "safetensors":  # a sharded repository's first shard, so that the folder reads as safetensors
            save_file(bert_tensors(), root / "model-00001-of-00002.safetensors")
        index = "model.safetensors.index.json" if fmt == "safetensors" else "pytorch_model.bin.index.json"
        text = weight_map if isinstance(weight_map, str) else json.dumps(weight_map)
        (root / index).write_text(text.replace("OTHER", str(weights)).replace("SIBLING", f"../other/{weights.name}"))
        if shard:
            (root / shard).symlink_to(weights)
        return Hostile(root, (index,))

    return make


def shard_is(kind: str) -> Callable[[Path], Hostile]:
    """A bin index naming ``shard.bin``, which is a folder, a link to itself or a link to nothing."""

    def make(root: Path) -> Hostile:
        folder(root)
        (root / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": {"w": "shard.bin"}}))
        shard = root / "shard.bin"
        if kind == "folder":
            shard.mkdir()
        else:
            shard.symlink_to(shard if kind == "loop" else root / "gone")
        return Hostile(root, ("shard.bin",))

    return make


def weights_file_is(kind: str) -> Callable[[Path], Path]:
    def make(root: Path) -> Path:
        folder(root)
        weights = root / "model.safetensors"
        if kind == "folder":
            weights.mkdir()
        else:
            weights.symlink_to(weights if kind == "loop" else root / "gone")
        return root

    return make


def both_safetensors_and_a_broken_index(root: Path) -> Hostile:
    folder(root, bert_tensors())
    (root / "model.safetensors.index.json").write_text('{"weight_map": ')
    return Hostile(root, ("model.safetensors.index.json",))


def fused(model_type: str, name: str, shape: tuple[int, ...]) -> Callable[[Path], Path]:
    config = {"model_type": model_type, "num_attention_heads": H, "n_head": H}
    return lambda root: folder(root, {name: randn(*shape)}, config)


ENTRY = Q.format(0, "weight")
CONFIGS = {
    "config/missing": with_config(None),
    "config/a-folder": lambda root: (folder(root, bert_tensors(), None) / "config.json").mkdir() or root,
    "config/not-json": with_config("{model_type: bert"),
    "config/a-list": with_config("[1, 2]"),
    "config/a-string": with_config('"bert"'),
    "config/nested-past-the-parser": with_config("[" * 100_000 + "]" * 100_000),
    "config/not-utf-8": with_config(b'{"model_type": "bert\xff"}'),
    "config/model-type-a-list": with_config({**BERT, "model_type": ["bert"]}),
    "config/model-type-unknown": with_config({**BERT, "model_type": "xlnet"}),
    "config/model-type-missing": with_config({"num_attention_heads": H}),
    **{
        f"config/heads-{label}": with_config({**BERT, "num_attention_heads": heads})
        for label, heads in [("0", 0), ("negative", -2), ("a-string", "2"), ("true", True), ("a-float", 2.0)]
    },
    "config/heads-not-dividing-d-model": with_config({**BERT, "num_attention_heads": 3}),
    "config/heads-more-than-rows": with_config({**BERT, "num_attention_heads": 16}),
    "config/heads-10^30": with_config({**BERT, "num_attention_heads": 10**30}),
}
INDEXES = {
    **{
        f"index-{fmt}/{label}": indexed(weight_map, fmt)
        for fmt in ("safetensors", "bin")
        for label, weight_map in [
            ("not-json", '{"weight_map": {'),
            ("a-list", "[]"),
            ("no-weight-map", {"metadata": {}}),
            ("weight-map-a-list", {"weight_map": ["model.safetensors"]}),
            ("a-number-as-file", {"weight_map": {ENTRY: 7}}),
            ("a-list-as-file", {"weight_map": {ENTRY: ["model.safetensors"]}}),
            ("an-empty-name", {"weight_map": {ENTRY: ""}}),
            ("an-absolute-path", {"weight_map": {ENTRY: "OTHER"}}),
            ("etc-passwd", {"weight_map": {ENTRY: "/etc/passwd"}}),
            ("parent-folder", {"weight_map": {ENTRY: "SIBLING"}}),
            ("backslashes", {"weight_map": {ENTRY: "..\\other\\model.safetensors"}}),
            ("a-missing-shard", {"weight_map": {ENTRY: "model-00002-of-00002.safetensors"}}),
        ]
    },
    "index-safetensors/a-link-out-of-the-folder": indexed({"weight_map": {ENTRY: "shard"}}, shard="shard"),
    "index-bin/a-link-out-of-the-folder": indexed({"weight_map": {ENTRY: "shard"}}, "bin", shard="shard"),
    "index-bin/a-shard-that-is-a-folder": shard_is("folder"),
    "index-bin/a-shard-linked-to-itself": shard_is("loop"),
    "index-bin/a-shard-linked-to-nothing": shard_is("dangling"),
    "index-safetensors/next-to-a-good-model-safetensors": both_safetensors_and_a_broken_index,
}
SAFETENSORS = {
    "safetensors/empty": with_safetensors(b""),
    "safetensors/header-length-2^63": with_safetensors(struct.pack("<Q", 2**63) + b"{}"),
    "safetensors/header-past-the-end": with_safetensors(struct.pack("<Q", 4096) + b"{}"),
    "safetensors/header-not-json": with_safetensors(safetensors_bytes(b"{nope")),
    "safetensors/header-a-list": with_safetensors(safetensors_bytes([1, 2])),
    "safetensors/data-past-the-end": with_safetensors(
        safetensors_bytes({ENTRY: {"dtype": "F32", "shape": [8, 8], "data_offsets": [0, 2**40]}})
    ),
    "safetensors/a-negative-size": with_safetensors(
        safetensors_bytes({ENTRY: {"dtype": "F32", "shape": [-1, 8], "data_offsets": [0, 0]}})
    ),
    "safetensors/an-unknown-dtype": with_safetensors(
        safetensors_bytes({ENTRY: {"dtype": "Q4_0", "shape": [8, 8], "data_offsets": [0, 256]}}, bytes(256))
    ),
    "safetensors/a-folder": weights_file_is("folder"),
    "safetensors/a-folder-given-as-the-file": lambda root: weights_file_is("folder")(root) / "model.safetensors",
    "safetensors/linked-to-itself": weights_file_is("loop"),
    "safetensors/linked-to-nothing": weights_file_is("dangling"),
    "safetensors/truncated": lambda root: _cut(folder(root, bert_tensors()) / "model.safetensors", -40),
}
WEIGHTS = {
    "weights/query-a-vector": with_tensors(q0=randn(D), k0=randn(D)),
    "weights/query-3-d": with_tensors(q0=randn(2, 4, D), k0=randn(2, 4, D)),
    "weights/query-without-rows": with_tensors(q0=torch.zeros(0, D), k0=torch.zeros(0, D)),
    "weights/query-without-columns": with_tensors(q0=torch.zeros(D, 0), k0=torch.zeros(D, 0)),
    "weights/key-narrower-than-query": with_tensors(k0=randn(D, 4)),
    "weights/key-heads-not-dividing-query-heads": with_tensors(k0=randn(12, D)),
    "weights/bias-too-short": with_tensors(bq0=randn(3)),
    "weights/bias-a-matrix": with_tensors(bq0=randn(D, D)),
    "weights/query-all-zero": with_tensors(q0=torch.zeros(D, D)),
    "weights/query-nan": with_tensors(q0=torch.full((D, D), float("nan"))),
    "weights/key-inf": with_tensors(k1=torch.full((D, D), float("inf"))),
    "weights/key-missing": with_tensors(k1=None),
    "weights/layer-2^31": lambda root: folder(root, bert_tensors(layers=(2**31,))),
    "weights/no-attention-tensor": lambda root: folder(root, {"embeddings.word_embeddings.weight": randn(4, D)}),
    "weights/gpt2-fused-not-d-by-3d": fused("gpt2", "h.0.attn.c_attn.weight", (3 * D, D)),
    "weights/neox-fused-not-3-per-head": fused(
        "gpt_neox", "gpt_neox.layers.0.attention.query_key_value.weight", (7, D)
    ),
    "weights/phi3-fused-a-vector": fused("phi3", "model.layers.0.self_attn.qkv_proj.weight", (3 * D,)),
    "weights/phi3-fused-rows-not-q-k-v": fused("phi3", "model.layers.0.self_attn.qkv_proj.weight", (7, D)),
}


def _cut(path: Path, keep: int) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[:keep])
    return path.parent


# -- pytorch_model.bin: torch.save ZIP archives and the legacy format ------------------------------------------------


def _op(value) -> bytes:
    """The pickle opcodes of one value (protocol 2), without the PROTO header and STOP."""
    return pickle.dumps(value, protocol=2)[2:-1]


def _tuple(*items: bytes) -> bytes:
    return b"(" + b"".join(items) + b"t"


def state_pickle(views: dict, storage_type: str = "FloatStorage") -> bytes:
    """A ``data.pkl`` as torch.save writes it: ``{name: _rebuild_tensor_v2(storage, offset, size, stride, ...)}``
    for ``views`` ``{name: (storage key, storage elements, offset, size, stride)}``, any values allowed."""
    out = b"\x80\x02}("
    for name, (key, numel, offset, size, stride) in views.items():
        storage = _tuple(_op("storage"), f"ctorch\n{storage_type}\n".encode(), _op(key), _op("cpu"), _op(numel))
        args = _tuple(storage + b"Q", _op(offset), _op(size), _op(stride), _op(False), b"ccollections\nOrderedDict\n)R")
        out += _op(name) + b"ctorch._utils\n_rebuild_tensor_v2\n" + args + b"R"
    return out + b"u."


def zip_archive(members: dict[str, bytes], *, duplicate=None, deflate=False, second_prefix=False) -> bytes:
    """A ZIP archive of ``members`` under ``archive/`` (and ``second/`` too, with ``second_prefix``); ``duplicate``
    is written a second time, as zeros."""
    out, members = io.BytesIO(), {**members, "version": b"3\n"}  # torch.load looks for the version first
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as archive:
        for prefix in ("archive", "second")[: 1 + second_prefix]:
            for name, data in members.items():
                archive.writestr(f"{prefix}/{name}", data)
        if duplicate:
            with pytest.warns(UserWarning, match="Duplicate name"):
                archive.writestr(f"archive/{duplicate}", bytes(len(members[duplicate])))
    return out.getvalue()


def storages(*seeds: int) -> dict[str, bytes]:
    return {f"data/{i}": randn(D * D, seed=seed).numpy().tobytes() for i, seed in enumerate(seeds)}


def two_views(q=(0, (D, D), (D, 1)), numel=D * D) -> dict:
    """The query view (offset, size, stride) over storage 0 of ``numel`` elements, the key a plain one."""
    return {ENTRY: ("0", numel, *q), K.format(0, "weight"): ("1", D * D, 0, (D, D), (D, 1))}


def with_bin(raw: Callable[[], bytes]) -> Callable[[Path], Path]:
    """A BERT folder whose ``pytorch_model.bin`` holds ``raw()``."""

    def make(root: Path) -> Path:
        folder(root)
        (root / "pytorch_model.bin").write_bytes(raw())
        return root

    return make


def zip_of(views: dict, *, storage_type="FloatStorage", byteorder=b"little", **kw) -> Callable[[Path], Path]:
    members = {"data.pkl": state_pickle(views, storage_type), "byteorder": byteorder, **storages(0, 1)}
    return with_bin(lambda: zip_archive(members, **kw))


def zip_members(**members: bytes) -> Callable[[Path], Path]:
    return with_bin(lambda: zip_archive({"byteorder": b"little", **storages(0, 1), **members}))


def torch_saved(state, legacy: bool = False) -> bytes:
    out = io.BytesIO()
    torch.save(state, out, _use_new_zipfile_serialization=not legacy)
    return out.getvalue()


def tagged_pickle(pid: tuple) -> bytes:
    """A state dict whose one value is the persistent id ``pid`` (what torch.save writes for a storage)."""

    class Tagging(pickle.Pickler):
        def persistent_id(self, obj):
            return pid if obj == "tagged" else None

    out = io.BytesIO()
    Tagging(out, protocol=2).dump({ENTRY: "tagged"})
    return out.getvalue()


def good_zip() -> bytes:
    return zip_archive({"data.pkl": state_pickle(two_views()), "byteorder": b"little", **storages(0, 1)})


TORCH_BIN = {
    "zip/a-view-past-its-storage": zip_of(two_views(q=(D, (D, D), (D, 1)))),
    "zip/a-negative-offset": zip_of(two_views(q=(-D, (D, D), (D, 1)))),
    "zip/a-negative-stride": zip_of(two_views(q=(D * D - 1, (D, D), (-D, -1)))),
    "zip/a-negative-size": zip_of(two_views(q=(0, (-D, D), (D, 1)))),
    "zip/sizes-past-64-bits": zip_of(two_views(q=(0, (2**62, 2**62, 0), (1, 1, 1)))),
    "zip/strides-past-64-bits": zip_of(two_views(q=(0, (1, D), (2**64, 1)))),
    "zip/a-stride-0-view-of-one-element": zip_of(two_views(q=(0, (2**12, 2**12), (0, 0)))),
    "zip/a-scalar-query": zip_of(two_views(q=(0, (), ()))),
    "zip/a-storage-longer-than-its-member": zip_of(two_views(numel=2**40)),
    "zip/a-storage-the-archive-lacks": zip_of({ENTRY: ("7", D * D, 0, (D, D), (D, 1))}),
    "zip/a-storage-of-an-unknown-type": zip_of(two_views(), storage_type="ComplexFloatStorage"),
    "zip/a-member-named-twice": zip_of(two_views(), duplicate="data/0"),
    "zip/deflated-members": zip_of(two_views(), deflate=True),
    "zip/no-data-pkl": zip_members(),
    "zip/two-data-pkl": zip_of(two_views(), second_prefix=True),
    "zip/big-endian": zip_of(two_views(), byteorder=b"big"),
    "zip/data-pkl-a-list": zip_members(**{"data.pkl": pickle.dumps([1, 2], protocol=2)}),
    "zip/data-pkl-garbage": zip_members(**{"data.pkl": b"\x80\x02garbage"}),
    "zip/a-persistent-id-that-is-no-storage": zip_members(**{"data.pkl": tagged_pickle(("module", "os"))}),
    "zip/a-storage-id-without-its-length": zip_members(**{"data.pkl": tagged_pickle(("storage", "0"))}),
    "zip/truncated-to-half": with_bin(lambda: good_zip()[: len(good_zip()) // 2]),
    "zip/without-its-last-bytes": with_bin(lambda: good_zip()[:-30]),
    "legacy/empty": with_bin(lambda: b""),
    "legacy/garbage": with_bin(lambda: b"not a torch.save file" * 4),
    "legacy/a-list": with_bin(lambda: torch_saved([randn(D, D)], legacy=True)),
    "legacy/truncated": with_bin(lambda: torch_saved(bert_tensors(), legacy=True)[:-100]),
    "legacy/a-stride-0-view-of-one-element": with_bin(
        lambda: torch_saved({**bert_tensors(), ENTRY: randn(1, 1).expand(2**12, 2**12)}, legacy=True)
    ),
}


# -- GGUF (llama.cpp's docs/gguf.md, version 3) -------------------------------------------------------------------

UINT32, INT32, STRING, UINT64 = 4, 5, 8, 10
GGUF_META = {
    "general.architecture": (STRING, "llama"),
    "llama.block_count": (UINT32, 2),
    "llama.embedding_length": (UINT32, D),
    "llama.attention.head_count": (UINT32, H),
}


def _gguf_string(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def _gguf_value(vtype: int, value) -> bytes:
    if vtype == STRING:
        return _gguf_string(value)
    return struct.pack({UINT32: "<I", INT32: "<i", UINT64: "<Q"}.get(vtype, "<I"), value)


def gguf_bytes(meta=None, tensors=None, *, version=3, counts=None, ggml_type=0, dims=None, align=32) -> bytes:
    """A GGUF file: ``meta`` ``{key: (value type, value)}`` (or a list of such pairs, keys may repeat) and F32
    ``tensors`` ``{name: array}`` (or pairs) with their data aligned; ``counts`` overrides the tensor and key/value
    counts, ``dims`` every tensor's dimensions, ``ggml_type`` every tensor's type."""
    meta = list((GGUF_META if meta is None else meta).items() if isinstance(meta, dict) or meta is None else meta)
    if tensors is None:
        tensors = {f"blk.{i}.attn_{p}.weight": randn(D, D, seed=i).numpy() for i in range(2) for p in "qk"}
    tensors = list(tensors.items() if isinstance(tensors, dict) else tensors)
    infos, data = b"", b""
    for name, array in tensors:
        shape = array.shape[::-1] if dims is None else dims
        infos += _gguf_string(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", n) for n in shape)
        infos += struct.pack("<IQ", ggml_type, len(data))
        data += array.astype("<f4").tobytes() + bytes(-array.nbytes % align)
    n_tensors, n_kv = counts or (len(tensors), len(meta))
    head = b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)
    head += b"".join(_gguf_string(key) + struct.pack("<I", vtype) + _gguf_value(vtype, v) for key, (vtype, v) in meta)
    head += infos
    return head + bytes(-len(head) % align) + data


def gguf_file(raw: Callable[[], bytes]) -> Callable[[Path], Path]:
    def make(root: Path) -> Path:
        root.mkdir(parents=True)
        (root / "model.gguf").write_bytes(raw())
        return root / "model.gguf"

    return make


def gguf_meta(**changed) -> Callable[[Path], Path]:
    """GGUF_META with keys (``llama.`` left out, dots as ``__``) changed; None removes one."""
    meta = dict(GGUF_META)
    for short, value in changed.items():
        key = short.replace("__", ".")
        key = key if key.startswith("general") else f"llama.{key}"
        if value is None:
            meta.pop(key)
        else:
            meta[key] = value
    return gguf_file(lambda: gguf_bytes(meta))


def gguf_tensors(**replaced) -> Callable[[Path], Path]:
    """The default tensors with ``blk_0_attn_q`` (names with dots as ``_``) replaced (None removes one)."""

    def raw() -> bytes:
        tensors = {f"blk.{i}.attn_{p}.weight": randn(D, D, seed=i).numpy() for i in range(2) for p in "qk"}
        for short, value in replaced.items():
            name = short.replace("_attn", ".attn").replace("blk_", "blk.") + ".weight"
            tensors.pop(name) if value is None else tensors.__setitem__(name, value)
        return gguf_bytes(tensors=tensors)

    return gguf_file(raw)


def _gguf_edit(edit: Callable[[bytearray], None]) -> Callable[[], bytes]:
    def raw() -> bytes:
        data = bytearray(gguf_bytes())
        edit(data)
        return bytes(data)

    return raw


def _long_key_length(data: bytearray) -> None:
    at = data.index(b"general.architecture") - 8
    data[at : at + 8] = struct.pack("<Q", 2**62)


def _not_utf8_key(data: bytearray) -> None:
    data[data.index(b"general.architecture")] = 0xFF


GGUF = {
    "gguf/empty": gguf_file(lambda: b""),
    "gguf/bad-magic": gguf_file(lambda: b"GGUX" + gguf_bytes()[4:]),
    "gguf/version-9": gguf_file(lambda: gguf_bytes(version=9)),
    "gguf/the-other-byte-order": gguf_file(lambda: gguf_bytes(version=3 << 24)),
    "gguf/truncated-in-the-header": gguf_file(lambda: gguf_bytes()[:100]),
    "gguf/truncated-in-the-data": gguf_file(lambda: gguf_bytes()[:-40]),
    "gguf/counts-2^63": gguf_file(lambda: gguf_bytes(counts=(2**63, 2**63))),
    "gguf/a-key-2^62-bytes-long": gguf_file(_gguf_edit(_long_key_length)),
    "gguf/a-key-not-utf-8": gguf_file(_gguf_edit(_not_utf8_key)),
    "gguf/a-repeated-key": gguf_file(lambda: gguf_bytes([*GGUF_META.items(), ("llama.block_count", (UINT32, 2))])),
    "gguf/an-unknown-value-type": gguf_file(lambda: gguf_bytes({**GGUF_META, "x": (99, 0)})),
    "gguf/a-repeated-tensor": gguf_file(lambda: gguf_bytes(tensors=[("t", np.ones((2, 2)))] * 2)),
    "gguf/five-dimensions": gguf_file(lambda: gguf_bytes(dims=(1, 1, 1, 1, 1))),
    "gguf/dims-past-the-file": gguf_file(lambda: gguf_bytes(dims=(2**32, 2**32))),
    "gguf/an-unknown-ggml-type": gguf_file(lambda: gguf_bytes(ggml_type=999)),
    "gguf/alignment-3": gguf_file(lambda: gguf_bytes({**GGUF_META, "general.alignment": (UINT32, 3)})),
    "gguf/architecture-unknown": gguf_meta(general__architecture=(STRING, "mamba")),
    "gguf/architecture-a-number": gguf_meta(general__architecture=(UINT32, 5)),
    "gguf/block-count-missing": gguf_meta(block_count=None),
    "gguf/block-count-0": gguf_meta(block_count=(UINT32, 0)),
    "gguf/block-count-2^64-1": gguf_meta(block_count=(UINT64, 2**64 - 1)),
    "gguf/heads-0": gguf_meta(attention__head_count=(UINT32, 0)),
    "gguf/heads-negative": gguf_meta(attention__head_count=(INT32, -2)),
    "gguf/heads-a-string": gguf_meta(attention__head_count=(STRING, "two")),
    "gguf/heads-not-dividing-d-model": gguf_meta(attention__head_count=(UINT32, 3)),
    "gguf/heads-more-than-d-model": gguf_meta(attention__head_count=(UINT32, 16)),
    "gguf/key-heads-not-dividing": gguf_meta(attention__head_count_kv=(UINT32, 3)),
    "gguf/embedding-length-wrong": gguf_meta(embedding_length=(UINT32, 4)),
    "gguf/query-missing": gguf_tensors(blk_1_attn_q=None),
    "gguf/query-without-rows": gguf_tensors(blk_0_attn_q=np.zeros((0, D), np.float32)),
    "gguf/key-narrower": gguf_tensors(blk_0_attn_k=np.ones((D, 4), np.float32)),
    "gguf/query-all-zero": gguf_tensors(blk_0_attn_q=np.zeros((D, D), np.float32)),
    "gguf/query-nan": gguf_tensors(blk_0_attn_q=np.full((D, D), np.nan, np.float32)),
    "gguf/a-folder-named-gguf": lambda root: (root / "model.gguf").mkdir(parents=True) or root / "model.gguf",
}


# -- ONNX (a BERT-style export's query/key MatMuls) ---------------------------------------------------------------


def onnx_model(weight=None, *, layers=(0, 1), heads=(0, 0, H, -1), module="/encoder/layer.{}/attention/self"):
    """Query and key ``MatMul(hidden, W^T) -> Reshape(heads)`` per layer, weights ``weight(layer, proj)``, nodes
    named after ``module`` (the TorchScript exporter's names for BERT)."""
    nodes, initializers, outputs = [], [], []
    for layer in layers:
        for proj in ("query", "key"):
            base = f"{module.format(layer)}/{proj}"
            w = randn(D, D, seed=layer).numpy().T.copy() if weight is None else weight(layer, proj)
            initializers += [
                numpy_helper.from_array(w, f"{base}/w"),
                numpy_helper.from_array(np.array(heads), f"{base}/s"),
            ]
            nodes += [
                helper.make_node("MatMul", ["hidden", f"{base}/w"], [f"{base}/y"], name=f"{base}/MatMul"),
                helper.make_node("Reshape", [f"{base}/y", f"{base}/s"], [f"{base}/r"], name=f"{base}/Reshape"),
            ]
            outputs.append(helper.make_tensor_value_info(f"{base}/r", TensorProto.FLOAT, None))
    hidden = helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "seq", D])
    graph = helper.make_graph(nodes, "qk", [hidden], outputs, initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def onnx_file(model: Callable[[], onnx.ModelProto | bytes], *argv: str) -> Callable[[Path], Hostile]:
    def make(root: Path) -> Hostile:
        root.mkdir(parents=True)
        built = model()
        raw = built if isinstance(built, bytes) else built.SerializeToString()
        (root / "model.onnx").write_bytes(raw)
        return Hostile(root / "model.onnx", argv=argv)

    return make


def external(location: str, dims=None) -> Callable[[], onnx.ModelProto]:
    """The first weight stored as external data at ``location`` (with ``dims`` claimed)."""

    def model() -> onnx.ModelProto:
        built = onnx_model()
        tensor = built.graph.initializer[0]
        tensor.ClearField("raw_data")
        tensor.data_location = TensorProto.EXTERNAL
        entry = tensor.external_data.add()
        entry.key, entry.value = "location", location
        if dims:
            tensor.dims[:] = dims
        return built

    return model


def _lying_dims() -> onnx.ModelProto:
    built = onnx_model()
    built.graph.initializer[0].dims[:] = [2**20, 2**20]
    return built


ONNX = {
    "onnx/empty": onnx_file(lambda: b""),
    "onnx/garbage": onnx_file(lambda: b"\xff" * 64),
    "onnx/truncated": onnx_file(lambda: onnx_model().SerializeToString()[:-50]),
    "onnx/an-empty-graph": onnx_file(lambda: onnx_model(layers=())),
    "onnx/no-attention-matmul": onnx_file(lambda: onnx_model(module="/pooler/dense.{}")),
    "onnx/layers-not-from-0": onnx_file(lambda: onnx_model(layers=(50_000_000,))),
    "onnx/weights-without-elements": onnx_file(lambda: onnx_model(lambda layer, proj: np.zeros((0, D), np.float32))),
    "onnx/integer-weights": onnx_file(lambda: onnx_model(lambda layer, proj: np.ones((D, D), np.int64))),
    "onnx/key-narrower": onnx_file(lambda: onnx_model(lambda layer, proj: np.ones((D, D if proj == "query" else 4)))),
    "onnx/weights-all-zero": onnx_file(lambda: onnx_model(lambda layer, proj: np.zeros((D, D), np.float32))),
    "onnx/weights-nan": onnx_file(lambda: onnx_model(lambda layer, proj: np.full((D, D), np.nan, np.float32))),
    "onnx/no-head-split-and-no-heads-given": onnx_file(lambda: onnx_model(heads=(0, 0, -1, -1))),
    "onnx/heads-given-not-dividing": onnx_file(lambda: onnx_model(heads=(0, 0, -1, -1)), "--heads", "3"),
    "onnx/heads-given-against-the-graph": onnx_file(onnx_model, "--heads", "4"),
    "onnx/external-data-in-a-parent-folder": onnx_file(external("../../../etc/passwd")),
    "onnx/external-data-at-an-absolute-path": onnx_file(external("/etc/passwd")),
    "onnx/external-data-shorter-than-its-dims": lambda root: _with_data(root, external("w.bin", [2**20, 2**20])),
    "onnx/dims-longer-than-the-data": onnx_file(_lying_dims),
}


def _with_data(root: Path, model) -> Hostile:
    hostile = onnx_file(model)(root)
    (root / "w.bin").write_bytes(bytes(64))
    return hostile


# -- CTranslate2 model.bin (binary version 6, ctranslate2.specs.ModelSpec._serialize) -------------------------------

CT2_TYPES = {np.dtype(np.float32): 0, np.dtype(np.int8): 1, np.dtype(np.int16): 2, np.dtype(np.int32): 3}


def _ct2_string(text: str) -> bytes:
    raw = text.encode() + b"\0"
    return struct.pack("<H", len(raw)) + raw


def ct2_variable(name: str, value, *, rank=None, dtype=None, nbytes=None) -> bytes:
    array = np.asarray(value)
    dims = b"".join(struct.pack("<I", n) for n in array.shape)
    data = array.tobytes()
    head = _ct2_string(name) + struct.pack("<B", len(array.shape) if rank is None else rank) + dims
    return (
        head
        + struct.pack(
            "<BI", CT2_TYPES[array.dtype] if dtype is None else dtype, len(data) if nbytes is None else nbytes
        )
        + data
    )


def whisper_variables(**changed) -> dict:
    """One layer of Whisper as CTranslate2's converter lays it out, variables ``changed`` (None removes one)."""
    variables = {"encoder/num_heads": np.int16(H), "decoder/num_heads": np.int16(H)}
    for stack in ("encoder", "decoder"):
        variables[f"{stack}/layer_0/self_attention/linear_0/weight"] = randn(3 * D, D, seed=1).numpy()
    variables["decoder/layer_0/attention/linear_0/weight"] = randn(D, D, seed=2).numpy()
    variables["decoder/layer_0/attention/linear_1/weight"] = randn(2 * D, D, seed=3).numpy()
    for name, value in changed.items():
        variables.pop(name) if value is None else variables.__setitem__(name, value)
    return variables


def ct2_bytes(variables=None, *, aliases=None, version=6, spec="WhisperSpec", raw_variables=b"", n_vars=None) -> bytes:
    variables = whisper_variables() if variables is None else variables
    body = b"".join(ct2_variable(name, value) for name, value in sorted(variables.items())) + raw_variables
    count = len(variables) + bool(raw_variables) if n_vars is None else n_vars
    parts = [struct.pack("<I", version), _ct2_string(spec), struct.pack("<II", 3, count), body]
    parts.append(struct.pack("<I", len(aliases or {})))
    parts += [_ct2_string(a) + _ct2_string(t) for a, t in (aliases or {}).items()]
    return b"".join(parts)


def ct2_folder(raw: Callable[[], bytes], config: str | None = None) -> Callable[[Path], Path]:
    def make(root: Path) -> Path:
        root.mkdir(parents=True)
        (root / "model.bin").write_bytes(raw())
        if config is not None:
            (root / "config.json").write_text(config)
        return root

    return make


def ct2_with(**changed) -> Callable[[Path], Path]:
    return ct2_folder(lambda: ct2_bytes(whisper_variables(**{n.replace("__", "/"): v for n, v in changed.items()})))


SELF = "encoder__layer_0__self_attention__linear_0__weight"
ENCODER_QKV = SELF.replace("__", "/")
CTRANSLATE2 = {
    "ct2/empty": ct2_folder(lambda: b""),
    "ct2/version-5": ct2_folder(lambda: ct2_bytes(version=5)),
    "ct2/another-spec": ct2_folder(lambda: ct2_bytes(spec="TransformerSpec")),
    "ct2/truncated": ct2_folder(lambda: ct2_bytes()[:60]),
    "ct2/a-name-of-length-0": ct2_folder(lambda: struct.pack("<IH", 6, 0)),
    "ct2/variables-2^32-1": ct2_folder(lambda: ct2_bytes(n_vars=2**32 - 1)),
    "ct2/rank-9": ct2_folder(lambda: ct2_bytes(raw_variables=ct2_variable("x", np.float32(1), rank=9))),
    "ct2/an-unknown-dtype": ct2_folder(lambda: ct2_bytes(raw_variables=ct2_variable("x", np.float32(1), dtype=9))),
    "ct2/bytes-not-matching-the-shape": ct2_folder(
        lambda: ct2_bytes(raw_variables=ct2_variable("x", np.ones(4, np.float32), nbytes=8))
    ),
    "ct2/dims-wrapping-to-0-bytes": ct2_folder(
        lambda: ct2_bytes(raw_variables=_ct2_string("x") + struct.pack("<B4IBI", 4, *(2**16,) * 4, 0, 0))
    ),
    "ct2/no-heads-and-a-config-that-is-a-list": ct2_folder(
        lambda: ct2_bytes(whisper_variables(**{"encoder/num_heads": None})), config="[8]"
    ),
    "ct2/heads-0": ct2_with(encoder__num_heads=np.int16(0)),
    "ct2/heads-negative": ct2_with(encoder__num_heads=np.int16(-2)),
    "ct2/heads-a-float": ct2_with(encoder__num_heads=np.float32(2.5)),
    "ct2/heads-not-dividing": ct2_with(encoder__num_heads=np.int16(3)),
    "ct2/an-alias-cycle": ct2_folder(
        lambda: ct2_bytes(whisper_variables(**{ENCODER_QKV: None}), aliases={ENCODER_QKV: "x", "x": ENCODER_QKV})
    ),
    "ct2/an-alias-to-nothing": ct2_folder(
        lambda: ct2_bytes(whisper_variables(**{ENCODER_QKV: None}), aliases={ENCODER_QKV: "gone"})
    ),
    "ct2/a-layer-numbered-3000000": ct2_with(
        **{SELF: None, SELF.replace("layer_0", "layer_3000000"): randn(3 * D, D).numpy()}
    ),
    "ct2/int32-weights": ct2_with(**{SELF: np.ones((3 * D, D), np.int32)}),
    "ct2/int8-weights-with-scales-for-no-row": ct2_with(
        **{SELF: np.ones((3 * D, D), np.int8), SELF + "_scale": np.ones(5, np.float32)}
    ),
    "ct2/int8-weights-with-zero-scales": ct2_with(
        **{SELF: np.ones((3 * D, D), np.int8), SELF + "_scale": np.zeros(3 * D, np.float32)}
    ),
    "ct2/weights-a-vector": ct2_with(**{SELF: np.ones(3 * D, np.float32)}),
    "ct2/weights-without-rows": ct2_with(**{SELF: np.ones((0, D), np.float32)}),
    "ct2/weights-all-zero": ct2_with(**{SELF: np.zeros((3 * D, D), np.float32)}),
    "ct2/a-bias-of-the-wrong-length": ct2_with(**{SELF.replace("weight", "bias"): np.ones(5, np.float32)}),
}


# -- the catalogue, run in this process ----------------------------------------------------------------------------

CATALOGUE = {**CONFIGS, **INDEXES, **SAFETENSORS, **WEIGHTS, **TORCH_BIN, **GGUF, **ONNX, **CTRANSLATE2}


def built(make, root: Path) -> Hostile:
    made = make(root)
    return made if isinstance(made, Hostile) else Hostile(made)


def score(hostile: Hostile, out: Path) -> list[str]:
    return ["score", str(hostile.path), *hostile.argv, "--out", str(out)]


@pytest.mark.parametrize("case", CATALOGUE)
def test_a_hostile_checkpoint_is_refused_in_one_line_naming_it_and_nothing_is_written(tmp_path, capsys, case):
    hostile = built(CATALOGUE[case], tmp_path / "input")
    capsys.readouterr()
    with TreeWatch(tmp_path) as watch:
        status = cli.main(score(hostile, tmp_path / "scores.nc"))
    assert_refused(status, capsys.readouterr().err, hostile.path.name, *hostile.names)
    assert watch.changed() == set()


# -- pickles that run code under a general unpickler ----------------------------------------------------------------


class _Runs:
    """Unpickled by a general unpickler, creates ``path`` (as tests/hostile.py's canary payload does)."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def _bin_folder(root: Path, raw: bytes) -> tuple[Hostile, Path]:
    with_bin(lambda: raw)(root)
    return Hostile(root), root / "pytorch_model.bin"


def _pid_runs(alarm: Path) -> bytes:
    class Storing(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", _Runs(alarm), "0", "cpu", D * D) if obj == "tensor" else None

    out = io.BytesIO()
    Storing(out, protocol=2).dump({ENTRY: "tensor"})
    return out.getvalue()


def _second_shard_runs(root: Path, alarm: Path) -> tuple[Hostile, Path]:
    folder(root)
    torch.save(bert_tensors(layers=(0,)), root / "pytorch_model-00001-of-00002.bin")
    torch.save({K.format(1, "weight"): _Runs(alarm)}, root / "pytorch_model-00002-of-00002.bin")
    weight_map = {Q.format(0, "weight"): "pytorch_model-00001-of-00002.bin"}
    weight_map[K.format(1, "weight")] = "pytorch_model-00002-of-00002.bin"
    (root / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return Hostile(root, ("pytorch_model-00002-of-00002.bin",)), root / "pytorch_model-00002-of-00002.bin"


PICKLES = {
    "zip/data-pkl-runs-code": lambda root, alarm: _bin_folder(
        root, zip_archive({"data.pkl": code_running_pickle(alarm), "byteorder": b"little"})
    ),
    "zip/data-pkl-runs-code-protocol-4": lambda root, alarm: _bin_folder(
        root, zip_archive({"data.pkl": code_running_pickle(alarm, protocol=4), "byteorder": b"little"})
    ),
    "zip/torch-save-of-an-object-that-runs-code": lambda root, alarm: _bin_folder(
        root, torch_saved({**bert_tensors(), "extra": _Runs(alarm)})
    ),
    "zip/code-in-a-storage-persistent-id": lambda root, alarm: _bin_folder(
        root, zip_archive({"data.pkl": _pid_runs(alarm), "byteorder": b"little", **storages(0)})
    ),
    "zip/code-in-the-second-shard": _second_shard_runs,
    "legacy/torch-save-of-an-object-that-runs-code": lambda root, alarm: _bin_folder(
        root, torch_saved({**bert_tensors(), "extra": _Runs(alarm)}, legacy=True)
    ),
    "legacy/a-bare-pickle-that-runs-code": lambda root, alarm: _bin_folder(root, code_running_pickle(alarm)),
}


@pytest.mark.parametrize("case", PICKLES)
def test_each_pickle_runs_code_when_torch_loads_it_without_weights_only(tmp_path, case):
    """The payloads are live: the check below would see code run, if any did."""
    alarm = canary(tmp_path)
    _, payload = PICKLES[case](tmp_path / "input", alarm)
    try:
        torch.load(payload, weights_only=False)
    except Exception:  # noqa: BLE001 - the payload has run by the time torch finds the rest wrong
        pass
    assert alarm.exists()


@pytest.mark.parametrize("case", PICKLES)
def test_a_pickle_that_runs_code_is_refused_and_never_runs(tmp_path, capsys, case):
    alarm = canary(tmp_path)
    hostile, _ = PICKLES[case](tmp_path / "input", alarm)
    capsys.readouterr()
    with TreeWatch(tmp_path) as watch:
        status = cli.main(score(hostile, tmp_path / "scores.csv"))
    assert_refused(status, capsys.readouterr().err, hostile.path.name, *hostile.names)
    assert not alarm.exists() and watch.changed() == set()


@pytest.mark.parametrize("case", [case for case in PICKLES if case.startswith("legacy/")])
def test_a_legacy_pickle_that_runs_code_is_one_line_on_the_terminal(tmp_path, case):
    """In a process of its own, as a user runs it: ``torch.load(weights_only=True)`` warns on stderr about a pickle
    protocol above 2, which would add lines to the one of the refusal."""
    alarm = canary(tmp_path)
    hostile, _ = PICKLES[case](tmp_path / "input", alarm)
    done = run_attnstruct(*score(hostile, tmp_path / "scores.csv"))
    assert_process_refused(done, hostile.path.name, *hostile.names)
    assert not alarm.exists()


# -- inputs that could hang or exhaust the interpreter: in a subprocess, with a time limit -------------------------


def _pipe_in(root: Path, name: str, *, model: bool = True) -> Hostile:
    folder(root, bert_tensors() if model else None)
    (root / name).unlink(missing_ok=True)
    os.mkfifo(root / name)
    return Hostile(root)


def _pipe_listed(root: Path) -> Hostile:
    folder(root)
    os.mkfifo(root / "shard.bin")
    (root / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": {ENTRY: "shard.bin"}}))
    return Hostile(root, ("shard.bin",))


def _pipe_as_source(root: Path) -> Hostile:
    root.mkdir(parents=True)
    os.mkfifo(root / "model.safetensors")
    return Hostile(root / "model.safetensors")


def _device_as_gguf(root: Path) -> Hostile:
    root.mkdir(parents=True)
    (root / "model.gguf").symlink_to("/dev/zero")
    return Hostile(root / "model.gguf")


def _four_gib_of_one_value(root: Path) -> Hostile:
    """A kilobyte file whose query weight claims 2^15 x 2^15 float32 of one stored value."""
    return Hostile(folder(root, {**bert_tensors(), ENTRY: randn(1, 1).expand(2**15, 2**15)}, fmt="bin"))


IN_A_SUBPROCESS = {
    "device/dev-null": lambda root: Hostile(Path("/dev/null")),
    "device/dev-zero-linked-as-a-gguf": _device_as_gguf,
    "pipe/the-source-itself": _pipe_as_source,
    "pipe/model-safetensors": lambda root: _pipe_in(root, "model.safetensors", model=False),
    "pipe/pytorch-model-bin": lambda root: _pipe_in(root, "pytorch_model.bin", model=False),
    "pipe/config-json": lambda root: _pipe_in(root, "config.json"),
    "pipe/a-shard-the-index-lists": _pipe_listed,
    "pipe/a-gguf-alone-in-its-folder": lambda root: _pipe_in(root, "model.gguf", model=False),
    "memory/a-stride-0-view-claiming-4-gib": _four_gib_of_one_value,
}


@pytest.mark.parametrize("case", IN_A_SUBPROCESS)
def test_an_input_that_could_hang_or_exhaust_the_interpreter_is_refused(tmp_path, case):
    hostile = built(IN_A_SUBPROCESS[case], tmp_path / "input")
    with TreeWatch(tmp_path) as watch:
        done = run_attnstruct(*score(hostile, tmp_path / "scores.nc"), timeout=60, memory=MEMORY_LIMIT)
    assert_process_refused(done, hostile.path.name, *hostile.names)
    assert watch.changed() == set()


def test_a_checkpoint_whose_only_layer_is_numbered_50000000_writes_a_file_of_that_one_layer(tmp_path):
    """Its dataset was laid out over fifty million layers (3.2 GB from a 1.2 KB file); now over the one present."""
    source = folder(tmp_path / "input", bert_tensors(layers=(50_000_000,)))
    done = run_attnstruct("score", str(source), "--out", str(tmp_path / "scores.nc"), memory=MEMORY_LIMIT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "scores.nc").stat().st_size < 100_000

"""GGUF header reader: metadata, tensor infos and tensors equal ``gguf.GGUFReader``'s; damaged files give one line."""

import struct
from types import SimpleNamespace

import gguf
import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT
from gguf.quants import dequantize

from attnstruct.checkpoints import zoo
from attnstruct.checkpoints.extract import ExtractionError, count_parameters, gguf_reader
from attnstruct.checkpoints.extract.gguf_header import read_gguf_header
from attnstruct.checkpoints.extract.gguf_reader import gguf_blocks, gguf_info

TOKENS = ["", "a", "\u2581the", "é✓", "x" * 300] + [f"tok{i}" for i in range(3000)]
NESTED = {"x.nested_ints": [[1, 2], [3], [-4, 5, 6]], "x.nested_strings": [["a"], ["bc", ""], ["d\u00e9"]]}
SCALARS = {
    "x.u8": (200, VT.UINT8),
    "x.i8": (-5, VT.INT8),
    "x.u16": (60000, VT.UINT16),
    "x.i16": (-30000, VT.INT16),
    "x.u32": (4_000_000_000, VT.UINT32),
    "x.i32": (-2_000_000_000, VT.INT32),
    "x.f32": (0.1, VT.FLOAT32),
    "x.bool": (True, VT.BOOL),
    "x.u64": (2**63 + 5, VT.UINT64),
    "x.i64": (-(2**40), VT.INT64),
    "x.f64": (0.1, VT.FLOAT64),
    "x.string": ("h\u00e9llo \u2713", VT.STRING),
}


def rich_weights() -> dict[str, tuple[np.ndarray, QT]]:
    """Tensors of several GGML types and ranks, in numpy order (``[rows, ne0]``); quantized ones already packed."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=(12, 64)).astype(np.float32)
    return {
        "blk.0.attn_q.weight": (gguf.quants.quantize(w, QT.Q8_0), QT.Q8_0),
        "blk.0.attn_k.weight": (gguf.quants.quantize(w[:4], QT.Q4_0), QT.Q4_0),
        "blk.0.attn_v.weight": (w[:8].astype(np.float16), QT.F16),
        "blk.0.attn_q.bias": (w[0], QT.F32),
        "blk.0.ffn.weight": (w.reshape(2, 6, 64), QT.F32),
        "token_embd.weight": (w, QT.F32),
    }


def write_rich(path, alignment: int | None = 64):
    """A GGUF file with scalar, string, long string-array and nested-array metadata and mixed tensor types."""
    writer = gguf.GGUFWriter(path, "llama")
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    writer.add_name("rich")
    writer.add_block_count(1)
    for key, (value, vtype) in SCALARS.items():
        writer.add_key_value(key, value, vtype)
    writer.add_array("x.ints", [1, -2, 3])
    writer.add_array("x.floats", [0.5, 1.25, -3.0])
    writer.add_array("x.bools", [True, False, True])
    writer.add_key_value("x.u64s", [1, 2**63], VT.ARRAY, sub_type=VT.UINT64)
    writer.add_array("tokenizer.ggml.tokens", TOKENS)
    for key, value in NESTED.items():
        writer.add_array(key, value)
    for name, (array, qtype) in rich_weights().items():
        writer.add_tensor(name, array, raw_dtype=qtype if qtype not in (QT.F32, QT.F16) else None)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def flatten(value):
    """``gguf.GGUFReader`` flattens arrays of arrays; this reader keeps them nested."""
    return [leaf for item in value for leaf in flatten(item)] if isinstance(value, list) else [value]


@pytest.fixture(scope="module")
def rich(tmp_path_factory):
    return write_rich(tmp_path_factory.mktemp("gguf") / "rich.gguf")


def assert_one_line_error(excinfo, *fragments):
    message = str(excinfo.value)
    assert message and "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.parametrize("alignment", [None, 8, 64])
def test_metadata_equals_gguf_reader(tmp_path, alignment):
    path = write_rich(tmp_path / "rich.gguf", alignment)
    reader = gguf.GGUFReader(path)
    header = read_gguf_header(path, keep=lambda key: True)
    fields = {key: field.contents() for key, field in reader.fields.items() if not key.startswith("GGUF.")}
    assert header.metadata.keys() == fields.keys()
    for key, value in fields.items():
        assert (flatten(header.metadata[key]) if key in NESTED else header.metadata[key]) == value, key
    assert {key: header.metadata[key] for key in NESTED} == NESTED
    assert header.metadata["tokenizer.ggml.tokens"] == TOKENS
    assert header.metadata["x.f32"] == struct.unpack("<f", struct.pack("<f", 0.1))[0]
    assert (header.version, header.alignment, header.data_offset) == (3, reader.alignment, reader.data_offset)
    assert header.data_offset % (alignment or 32) == 0


def test_only_the_asked_keys_are_kept(rich):
    assert read_gguf_header(rich).metadata == {}
    kept = read_gguf_header(rich, keep={"general.name", "x.u8", "x.nested_strings", "absent"}).metadata
    assert kept == {"general.name": "rich", "x.u8": 200, "x.nested_strings": NESTED["x.nested_strings"]}
    by_predicate = read_gguf_header(rich, keep=lambda key: key.startswith("general.")).metadata
    assert by_predicate == {"general.architecture": "llama", "general.name": "rich", "general.alignment": 64}


def test_tensors_equal_gguf_reader(rich):
    header = read_gguf_header(rich)
    reader = gguf.GGUFReader(rich)
    assert list(header.tensors) == [t.name for t in reader.tensors] == list(rich_weights())
    for tensor in reader.tensors:
        info, raw = header.tensors[tensor.name], header.raw(tensor.name)
        assert (info.ggml_type, info.offset, info.n_bytes) == (tensor.tensor_type, tensor.data_offset, tensor.n_bytes)
        assert info.n_elements == tensor.n_elements and info.shape == tuple(reversed(tensor.shape.tolist()))
        assert raw.dtype == tensor.data.dtype and raw.shape == tensor.data.shape and not raw.flags.writeable
        np.testing.assert_array_equal(raw, tensor.data)
        values = header.dequantize(tensor.name)
        assert values.dtype == np.float32 and values.shape == info.shape
        np.testing.assert_array_equal(values, dequantize(tensor.data, tensor.tensor_type))
    assert header.raw("blk.0.attn_q.weight").shape == (12, 64 // 32 * 34)
    assert header.dequantize("blk.0.attn_q.weight").shape == (12, 64)
    np.testing.assert_array_equal(header.dequantize("token_embd.weight"), rich_weights()["token_embd.weight"][0])


def test_parameter_count_equals_gguf_reader(rich):
    counted = sum(int(t.n_elements) for t in gguf.GGUFReader(rich).tensors)
    assert count_parameters(rich) == counted == 12 * 64 + 4 * 64 + 8 * 64 + 64 + 12 * 64 + 12 * 64


def cut_points(path) -> dict[str, tuple[int, str]]:
    """Byte counts to keep that cut the file inside the vocabulary, the tensor infos and the last tensor's data."""
    reader = gguf.GGUFReader(path)
    return {
        "metadata": (reader.fields["tokenizer.ggml.tokens"].offset + 500, "metadata key 'tokenizer.ggml.tokens'"),
        "tensor infos": (reader.tensors[2].field.offset + 30, "tensor info of 'blk.0.attn_v.weight'"),
        "data": (reader.tensors[-1].data_offset + 10, "tensor 'token_embd.weight' ends at byte"),
    }


@pytest.mark.parametrize("part", ["metadata", "tensor infos", "data"])
def test_truncated_file(tmp_path, rich, part):
    keep, fragment = cut_points(rich)[part]
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(rich.read_bytes()[:keep])
    for read in (read_gguf_header, gguf_info, lambda p: list(gguf_blocks(p))):
        with pytest.raises(ExtractionError) as excinfo:
            read(cut)
        assert_one_line_error(excinfo, "truncated: ", "cut.gguf is not a readable GGUF file", fragment)
        assert excinfo.value.kind == "truncated"


def patched(tmp_path, rich, offset: int, value: bytes):
    data = bytearray(rich.read_bytes())
    data[offset : offset + len(value)] = value
    (tmp_path / "bad.gguf").write_bytes(data)
    return tmp_path / "bad.gguf"


def field_type_offset(path, key: str) -> int:
    """Where the value type (uint32) of metadata ``key`` is: after the key's length and bytes."""
    return gguf.GGUFReader(path).fields[key].offset + 8 + len(key.encode())


def tensor_type_offset(path, name: str) -> int:
    """Where the GGML type (uint32) of tensor ``name`` is: after its name, n_dims and dims."""
    tensor = next(t for t in gguf.GGUFReader(path).tensors if t.name == name)
    return tensor.field.offset + 8 + len(name.encode()) + 4 + 8 * len(tensor.shape)


@pytest.mark.parametrize(
    "where, value, fragments",
    [
        (lambda p: 0, b"GGUG", ["not a readable GGUF file: bad magic b'GGUG'"]),
        (lambda p: 4, struct.pack("<I", 1), ["not a readable GGUF file: GGUF version 1 is not supported"]),
        (lambda p: 4, struct.pack(">I", 3), ["is a GGUF file of the other byte order, which is not supported"]),
        (lambda p: field_type_offset(p, "x.u16"), struct.pack("<I", 99), ["unknown value type 99", "'x.u16'"]),
        (lambda p: field_type_offset(p, "x.nested_ints") + 4, struct.pack("<I", 13), ["unknown value type 13"]),
        (lambda p: tensor_type_offset(p, "blk.0.attn_k.weight"), struct.pack("<I", 999), ["unknown GGML type 999"]),
    ],
    ids=["magic", "version-1", "big-endian", "value-type", "nested-value-type", "ggml-type"],
)
def test_damaged_file(tmp_path, rich, where, value, fragments):
    bad = patched(tmp_path, rich, where(rich), value)
    for read in (read_gguf_header, gguf_info, lambda p: list(gguf_blocks(p))):
        with pytest.raises(ExtractionError) as excinfo:
            read(bad)
        assert_one_line_error(excinfo, "bad.gguf", *fragments)


def test_bad_utf8_is_an_error_only_in_a_kept_value(tmp_path, rich):
    bad = patched(tmp_path, rich, field_type_offset(rich, "x.string") + 4 + 8, b"\xff")
    assert read_gguf_header(bad, keep={"x.u8"}).metadata == {"x.u8": 200}
    with pytest.raises(ExtractionError) as excinfo:
        read_gguf_header(bad, keep={"x.string"})
    assert_one_line_error(excinfo, "bad.gguf", "'utf-8' codec can't decode", "metadata key 'x.string'")


def test_bad_alignment_and_missing_file(tmp_path, rich):
    bad = patched(tmp_path, rich, field_type_offset(rich, "general.alignment") + 4, struct.pack("<I", 48))
    with pytest.raises(ExtractionError) as excinfo:
        read_gguf_header(bad)
    assert_one_line_error(excinfo, "alignment must be a uint32 power of two, got 48")
    with pytest.raises(ExtractionError) as excinfo:
        read_gguf_header(tmp_path / "absent.gguf")
    assert_one_line_error(excinfo, "cannot read GGUF file", "absent.gguf")


class GGUFReaderHeader:
    """What :mod:`gguf_reader` reads of a header, from ``gguf.GGUFReader`` (which it opened before this reader)."""

    def __init__(self, reader: gguf.GGUFReader):
        self.metadata = {key: f.contents() for key, f in reader.fields.items() if gguf_reader._wanted_key(key)}
        self._tensors = {t.name: t for t in reader.tensors}
        self.tensors = {t.name: SimpleNamespace(ggml_type=t.tensor_type) for t in reader.tensors}

    def dequantize(self, name: str) -> np.ndarray:
        return dequantize(self._tensors[name].data, self._tensors[name].tensor_type)


def assert_same_blocks(got: list, want: list):
    def described(block):
        return block.stack, block.layer, block.causal, block.n_kv_heads, block.extras, block.source_name

    assert [described(a) for a in got] == [described(b) for b in want] and got
    for a, b in zip(got, want, strict=True):
        for x, y in ((a.w_q, b.w_q), (a.w_k, b.w_k), (a.b_q, b.b_q), (a.b_k, b.b_k)):
            assert (x is None and y is None) or torch.equal(x, y)


@pytest.mark.checkpoint
def test_real_gguf_file_reads_as_with_gguf_reader(monkeypatch):
    """smollm2-135m (Q4_1, llama: RoPE-permuted) is in the core set that `make test` fetches."""
    assert zoo.is_fetched("smollm2-135m"), "smollm2-135m is not fetched: run `make fetch`"
    path = zoo.path("smollm2-135m")
    header = read_gguf_header(path)
    reader = gguf.GGUFReader(path)
    for tensor in reader.tensors:
        np.testing.assert_array_equal(header.raw(tensor.name), tensor.data)
    assert count_parameters(path) == sum(int(t.n_elements) for t in reader.tensors)
    info, blocks = gguf_info(path), list(gguf_blocks(path))
    monkeypatch.setattr(gguf_reader, "_open", lambda _: GGUFReaderHeader(reader))
    assert info == gguf_info(path)
    assert_same_blocks(blocks, list(gguf_blocks(path)))

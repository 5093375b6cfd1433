"""attnstruct.checkpoints.extract.count_parameters: one count, as num_parameters() of the model counts them, for
models in
memory, checkpoint files and folders of every format, and hub headers."""

import json
import struct

import gguf
import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import save_file

from attnstruct.checkpoints.extract import count_parameters
from attnstruct.checkpoints.extract.hf import JsonConfig
from attnstruct.checkpoints.extract.parameters import read_safetensors_header

from conftest import tiny

# A checkpoint with what num_parameters() leaves out: an integer buffer, float buffers, and a tied head.
STORED = {
    "wte.weight": np.zeros((10, 4), np.float32),
    "lm_head.weight": np.zeros((10, 4), np.float32),
    "h.0.mlp.weight": np.zeros((4, 4), np.float16),
    "h.0.attn.bias": np.zeros((1, 1, 8, 8), np.float32),
    "h.0.attn.masked_bias": np.zeros((), np.float32),
    "h.0.rotary.inv_freq": np.zeros(2, np.float32),
    "embeddings.position_ids": np.zeros((1, 8), np.int64),
    "final_logits_bias": np.zeros((1, 10), np.float32),
}


def write_checkpoint(folder, tensors=STORED, config=None, name="model.safetensors"):
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / name))
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_a_module_counts_shared_parameters_once():
    shared = torch.nn.Linear(3, 5)
    model = torch.nn.Sequential(shared, torch.nn.ReLU(), torch.nn.Linear(5, 5), shared.__class__(3, 5))
    model[3].weight = shared.weight  # tied: one parameter under two names
    assert count_parameters(model) == 15 + 5 + 30 + 5
    frozen = torch.nn.Linear(2, 2).requires_grad_(False)
    assert count_parameters(frozen) == 6  # num_parameters() counts frozen parameters too


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "bart"])
def test_saved_models_count_as_num_parameters(tmp_path, name):
    model = tiny(name)
    expected = model.num_parameters()
    model.save_pretrained(tmp_path / "st")
    assert count_parameters(model) == count_parameters(tmp_path / "st") == expected
    assert count_parameters(tmp_path / "st" / "model.safetensors") == expected
    headers = [read_safetensors_header(tmp_path / "st" / "model.safetensors")]
    config = JsonConfig(**json.loads((tmp_path / "st" / "config.json").read_text()))
    assert count_parameters(headers, config=config) == count_parameters(headers[0], config=config) == expected
    (tmp_path / "bin").mkdir()
    torch.save(model.state_dict(), tmp_path / "bin" / "pytorch_model.bin")  # tied tensors under both names
    (tmp_path / "bin" / "config.json").write_text((tmp_path / "st" / "config.json").read_text())
    assert count_parameters(tmp_path / "bin") == expected


def test_buffers_are_left_out_and_a_tied_head_counted_once(tmp_path):
    folder = write_checkpoint(tmp_path / "tied")
    assert count_parameters(folder) == 40 + 16  # wte and the MLP; lm_head is the embedding
    untied = write_checkpoint(tmp_path / "untied", config={"tie_word_embeddings": False})
    assert count_parameters(untied) == 40 + 40 + 16
    assert count_parameters(folder, config={"tie_word_embeddings": False}) == 96  # an explicit config wins
    other_shape = {**STORED, "lm_head.weight": np.zeros((12, 4), np.float32)}
    assert count_parameters(write_checkpoint(tmp_path / "own-head", other_shape)) == 40 + 48 + 16


def test_sharded_safetensors_add_up(tmp_path):
    names = sorted(STORED)
    write_checkpoint(tmp_path, {n: STORED[n] for n in names[:4]}, name="model-00001-of-00002.safetensors")
    write_checkpoint(tmp_path, {n: STORED[n] for n in names[4:]}, name="model-00002-of-00002.safetensors")
    assert count_parameters(tmp_path) == 56


def test_gguf_counts_every_tensor_but_rope_freqs(tmp_path):
    path = tmp_path / "m.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    for name, shape in {"token_embd.weight": (10, 4), "output.weight": (10, 4), "rope_freqs.weight": (2,)}.items():
        writer.add_tensor(name, np.ones(shape, np.float32))
    q8 = gguf.GGMLQuantizationType.Q8_0
    writer.add_tensor("blk.0.attn_q.weight", gguf.quants.quantize(np.ones((4, 32), np.float32), q8), raw_dtype=q8)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert count_parameters(path) == count_parameters(tmp_path) == 40 + 40 + 4 * 32  # a stored output.weight counts


def test_onnx_counts_float_initializers(tmp_path):
    inits = [
        numpy_helper.from_array(np.zeros((3, 4), np.float32), "w"),
        numpy_helper.from_array(np.zeros(5, np.float16), "b"),
        numpy_helper.from_array(np.zeros(7, np.int64), "shape"),
    ]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        initializer=inits,
    )
    onnx.save(helper.make_model(graph), str(tmp_path / "m.onnx"))
    assert count_parameters(tmp_path / "m.onnx") == count_parameters(tmp_path) == 17


def _ct2_variable(name: str, array: np.ndarray) -> bytes:
    type_id = {np.dtype(np.float32): 0, np.dtype(np.int16): 2, np.dtype(np.float16): 4}[array.dtype]
    raw = name.encode() + b"\0"
    header = struct.pack("<H", len(raw)) + raw + struct.pack("<B", array.ndim)
    header += b"".join(struct.pack("<I", d) for d in array.shape)
    return header + struct.pack("<BI", type_id, array.nbytes) + array.tobytes()


def test_ctranslate2_counts_float_variables_without_aliases(tmp_path):
    variables = {
        "decoder/embeddings/weight": np.zeros((3, 4), np.float32),
        "decoder/layer_0/self_attention/linear_0/bias": np.zeros(5, np.float16),
        "decoder/num_heads": np.array(2, np.int16),
    }
    spec = b"WhisperSpec\0"
    parts = [struct.pack("<I", 6), struct.pack("<H", len(spec)), spec, struct.pack("<II", 3, len(variables))]
    parts += [_ct2_variable(name, variables[name]) for name in sorted(variables)]
    alias, target = b"decoder/projection/weight\0", b"decoder/embeddings/weight\0"
    parts += [struct.pack("<I", 1), struct.pack("<H", len(alias)), alias, struct.pack("<H", len(target)), target]
    (tmp_path / "model.bin").write_bytes(b"".join(parts))
    assert count_parameters(tmp_path / "model.bin") == count_parameters(tmp_path) == 17


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p / "missing", "no such file or folder"),
        (lambda p: (p / "notes.txt").write_text("x") and p / "notes.txt", "cannot count the parameters of notes.txt"),
        (lambda p: p, "no checkpoint file"),
        (lambda p: [(p / n).write_bytes(b"") for n in ("a.gguf", "b.gguf")] and p, "2 .gguf/.onnx files"),
        (lambda p: (p / "m.safetensors").write_bytes(b"\4" + bytes(7) + b"[1,2") and p / "m.safetensors", "not a safe"),
        (lambda p: [1, 2], "cannot count the parameters of a list"),
        (lambda p: 3.5, "cannot count the parameters of a float"),
        (lambda p: {"w": {"shape": [2]}}, "lacks dtype or shape"),
        (lambda p: (p / "m.safetensors").write_bytes(struct.pack("<Q", 2**62) + b"{}") and p, "header length"),
        (lambda p: torch.save([torch.ones(2)], p / "pytorch_model.bin") or p, "holds a list, not a state dict"),
        (lambda p: torch.save([1], p / "pytorch_model.bin", _use_new_zipfile_serialization=False) or p, "holds a list"),
        (lambda p: (p / "m.onnx").write_bytes(b"\xff" * 10) and p / "m.onnx", "m.onnx is not an ONNX model"),
    ],
    ids=[
        "missing",
        "unknown-file",
        "empty-folder",
        "two-singles",
        "not-safetensors",
        "a-list",
        "a-float",
        "header-entry",
        "header-length",
        "zip-list",
        "legacy-list",
        "onnx-garbage",
    ],
)
def test_bad_input_is_one_line(tmp_path, make, message):
    source = make(tmp_path)
    with pytest.raises(ValueError, match=message) as err:
        count_parameters(source)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("pipe", ["config.json", "model.safetensors", "model.onnx"])
def test_a_pipe_in_the_checkpoint_is_not_read(tmp_path, pipe):
    """Opening a pipe to read it waits for a writer that never comes: only regular files are opened."""
    import os
    import threading

    save_file({"w": np.zeros((2, 2), np.float32)}, tmp_path / "model.safetensors")
    (tmp_path / pipe).unlink(missing_ok=True)
    os.mkfifo(tmp_path / pipe)
    outcome = []
    counting = threading.Thread(target=lambda: outcome.append(_counted(tmp_path / pipe)), daemon=True)
    counting.start()
    counting.join(10)
    if counting.is_alive():  # release the reader, so the test ends
        os.close(os.open(tmp_path / pipe, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"count_parameters waited on the pipe {pipe}")
    if pipe == "config.json":
        assert outcome == [4]  # counted as without a config.json
    else:
        assert outcome == [f"{tmp_path / pipe} is neither a regular file nor a folder"]


def _counted(path):
    try:
        return count_parameters(path if path.name != "config.json" else path.parent)
    except ValueError as err:
        return str(err)

"""How many parameters a model has: one count for a model in memory, a checkpoint on disk, or hub headers.

The meaning is always the same: **parameters as ``num_parameters()`` of the model counts them**, the model being
the one the checkpoint defines. That is, every parameter tensor once, whatever its dtype (quantized GGUF tensors
count their logical elements), and nothing else:

* buffers are not parameters: integer tensors (``position_ids``, ``token_type_ids``) and the float buffers some
  checkpoints store (GPT-2's causal mask ``attn.bias``/``attn.masked_bias``, rotary ``inv_freq``, BART's
  ``final_logits_bias``; GGUF's ``rope_freqs``) are left out;
* a tied output head is counted once: a stored ``lm_head.weight`` with the shape of a stored input embedding is
  left out unless ``config.json`` says ``"tie_word_embeddings": false``. A GGUF file that stores a separate
  ``output.weight`` defines an untied head, and it is counted (without one, the embedding is the head).

Per source (:func:`count_parameters`):

* an ``nn.Module``: the elements of ``model.parameters()`` (shared parameters once), as transformers counts;
* ``.safetensors`` (a file, or the top-level shards of a folder, with the folder's ``config.json``) and
  ``pytorch_model*.bin`` (tensors sharing one storage counted once): the tensor names and shapes, by the rules
  above;
* ``.gguf``: every tensor of the header except ``rope_freqs``;
* ``.onnx``: the floating-point initializers of the graph (the exported model's weights; an export that dropped a
  module, such as BERT's pooler, has fewer parameters than the transformers model); in a quantised graph also its
  8-bit integer weights, each the parameter it replaces, and not its quantisation parameters: zero points (inputs 2
  and 3 of ``MatMulInteger``/``ConvInteger``, 2 of ``DequantizeLinear``/``QuantizeLinear``) and scales (input 1 of
  those two, or a ``Mul`` by the activation scale of a ``DynamicQuantizeLinear``, as onnxruntime's
  ``quantize_dynamic`` writes them);
* CTranslate2 ``model.bin`` (or its folder): the floating-point variables, aliases not counted. CTranslate2 stores
  fused query/key/value projections with one bias, so Whisper's key projections carry zero biases there that the
  transformers model does not have (512 per attention block in ``whisper-base``: 9,216 more parameters);
* safetensors headers (``{name: {"dtype", "shape", "data_offsets"}}``, one dict per shard, as a hub serves them)
  with the repository's config: the safetensors rules, from the headers alone.

Bad input (a missing path, an unknown file type, a folder without a countable checkpoint, a file that is not a
regular file or not what its name says, headers that are not dicts) raises ValueError with one line naming it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch

from ...untrusted import load_weights_only

SAFETENSORS_FLOATS = ("F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2")
BUFFER_SUFFIXES = (".attn.bias", ".attn.masked_bias", ".inv_freq", ".position_ids", "final_logits_bias")
TIED_HEADS = ("lm_head.weight",)
EMBEDDINGS = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight", "shared.weight", "embed_in.weight")
GGUF_BUFFERS = ("rope_freqs.weight",)
MAX_SAFETENSORS_HEADER = 100_000_000  # bytes; the safetensors library refuses longer headers
CTRANSLATE2_FLOATS = ("float32", "float16", "bfloat16")
COUNTABLE = (
    "an nn.Module, a .safetensors, pytorch_model.bin, .gguf or .onnx file, a CTranslate2 model.bin, a folder "
    "holding one of them, or safetensors headers"
)


def count_parameters(source, *, config=None) -> int:
    """Parameters of ``source`` as ``num_parameters()`` of the model counts them (see the module docstring).

    Args:
        source: an ``nn.Module``; a checkpoint file or folder (``str`` or path); or safetensors headers, one dict
            or an iterable of dicts (one per shard).
        config: for headers and safetensors/``pytorch_model.bin`` checkpoints, the model's config (a dict or an
            object with attributes, e.g. :class:`attnstruct.checkpoints.extract.hf.JsonConfig`); only
            ``tie_word_embeddings`` is read, and an absent key means tied, the transformers default. For a
            folder or file, None reads the ``config.json`` next to it.
    """
    if isinstance(source, torch.nn.Module):
        return sum(parameter.numel() for parameter in source.parameters())
    if isinstance(source, (str, os.PathLike)):
        return _count_path(Path(source), config)
    headers = [source] if isinstance(source, Mapping) else list(source) if isinstance(source, Iterable) else None
    if headers is None or not all(isinstance(header, Mapping) for header in headers):
        raise ValueError(f"cannot count the parameters of a {type(source).__name__}; give {COUNTABLE}")
    return count_named(_header_tensors(headers), config)


def count_named(tensors: Iterable[tuple[str, tuple[int, ...]]], config=None) -> int:
    """The rule for named floating-point tensors ``(name, shape)`` of a transformers checkpoint: buffers left out,
    a tied ``lm_head.weight`` counted once (module docstring). Integer tensors must already be left out."""
    shapes = {name: tuple(int(dim) for dim in shape) for name, shape in tensors}
    embeddings = {shape for name, shape in shapes.items() if name.endswith(EMBEDDINGS)}
    tied = _tie_word_embeddings(config) is not False
    return sum(
        math.prod(shape)
        for name, shape in shapes.items()
        if not name.endswith(BUFFER_SUFFIXES) and not (tied and name.endswith(TIED_HEADS) and shape in embeddings)
    )


def _tie_word_embeddings(config):
    if config is None:
        return None
    if isinstance(config, Mapping):
        return config.get("tie_word_embeddings")
    return getattr(config, "tie_word_embeddings", None)


def _header_tensors(headers: Iterable[Mapping]) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of the floating-point tensors of safetensors headers (``__metadata__`` skipped)."""
    try:
        return [
            (name, tuple(info["shape"]))
            for header in headers
            for name, info in header.items()
            if name != "__metadata__" and info["dtype"] in SAFETENSORS_FLOATS
        ]
    except (KeyError, TypeError) as err:
        raise ValueError(f"a safetensors header entry lacks dtype or shape ({err!r})") from None


def read_safetensors_header(file: Path) -> dict:
    """The JSON header of one ``.safetensors`` file (``[8-byte length n][n bytes of JSON]``, ``n`` at most the
    100 MB the safetensors library allows, and inside the file)."""
    with open(_regular(file), "rb") as handle:
        size = int.from_bytes(handle.read(8), "little")
        if not 2 <= size <= min(MAX_SAFETENSORS_HEADER, file.stat().st_size - 8):
            raise ValueError(f"{file} is not a safetensors file (header length {size})")
        try:
            header = json.loads(handle.read(size))
        except (ValueError, RecursionError) as err:
            raise ValueError(f"{file} is not a safetensors file ({' '.join(str(err).split())})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{file} is not a safetensors file (its header is not a JSON object)")
    return header


def _torch_bin_tensors(files: list[Path]) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of the floating-point tensors of ``pytorch_model*.bin`` files (memory-mapped, not read).

    ``torch.save`` keeps tied tensors as one storage under several names (BART's ``shared``, ``embed_tokens`` and
    ``lm_head``); only the first name of each is kept."""
    tensors, seen, states = [], set(), []  # the states stay alive, so that no storage address is reused
    for file in files:
        try:
            state = load_weights_only(_regular(file), map_location="cpu", mmap=True)
        except RuntimeError:  # the legacy (pre-zip) format cannot be memory-mapped
            state = _load_legacy(file)
        except Exception as err:  # torch.load's refusals and failures are of many types
            raise ValueError(f"cannot read {file}: {' '.join(str(err).split()) or type(err).__name__}") from None
        if not isinstance(state, dict):
            raise ValueError(f"{file} holds a {type(state).__name__}, not a state dict")
        states.append(state)
        for name, t in ((name, t) for name, t in state.items() if isinstance(t, torch.Tensor)):
            key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride())
            if t.is_floating_point() and key not in seen:
                seen.add(key)
                tensors.append((name, tuple(t.shape)))
    return tensors


def _load_legacy(file: Path):
    try:
        return load_weights_only(file, map_location="cpu")
    except Exception as err:
        raise ValueError(f"cannot read {file}: {' '.join(str(err).split()) or type(err).__name__}") from None


def _regular(file: Path) -> Path:
    """``file``, if it is a regular file: a pipe or a device would be read forever."""
    if not file.is_file():
        raise ValueError(f"{file} is not a regular file")
    return file


def _folder_config(folder: Path) -> dict | None:
    if not (folder / "config.json").is_file():
        return None
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return config if isinstance(config, dict) else None


def _count_gguf(file: Path) -> int:
    from .gguf_header import read_gguf_header

    tensors = read_gguf_header(file).tensors
    return sum(tensor.n_elements for name, tensor in tensors.items() if name not in GGUF_BUFFERS)


def _count_onnx(file: Path) -> int:
    import onnx

    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE}
    integers = {onnx.TensorProto.INT8, onnx.TensorProto.UINT8}
    try:
        model = onnx.load(str(_regular(file)), load_external_data=False)
    except Exception as err:  # protobuf's DecodeError and others
        raise ValueError(f"{file} is not an ONNX model ({' '.join(str(err).split()) or type(err).__name__})") from None
    quantisation = _onnx_quantisation_parameters(model.graph)
    return sum(
        math.prod(init.dims)
        for init in model.graph.initializer
        if init.data_type in floats | integers and init.name not in quantisation
    )


_ZERO_POINTS_AND_SCALES = {
    "MatMulInteger": (2, 3),
    "ConvInteger": (2, 3),
    "DequantizeLinear": (1, 2),
    "QuantizeLinear": (1, 2),
}


def _onnx_quantisation_parameters(graph) -> set[str]:
    """Names of the values used only as zero points or scales (:data:`_ZERO_POINTS_AND_SCALES`, or a ``Mul`` with the
    activation scale, output 1, of a ``DynamicQuantizeLinear``)."""
    activation_scales = {node.output[1] for node in graph.node if node.op_type == "DynamicQuantizeLinear"}
    uses: dict[str, list[bool]] = {}
    for node in graph.node:
        for position, name in enumerate(node.input):
            quantising = position in _ZERO_POINTS_AND_SCALES.get(node.op_type, ()) or (
                node.op_type == "Mul" and any(other in activation_scales for other in node.input if other != name)
            )
            uses.setdefault(name, []).append(quantising)
    return {name for name, flags in uses.items() if all(flags)}


def _count_ctranslate2(file: Path) -> int:
    from .ctranslate2_reader import read_header

    variables = read_header(file).variables.values()
    return sum(math.prod(v.shape) for v in variables if v.dtype_name in CTRANSLATE2_FLOATS)


def _count_path(path: Path, config) -> int:
    if not path.exists():
        raise ValueError(f"no such file or folder: {path}")
    if not path.is_file() and not path.is_dir():
        raise ValueError(f"{path} is neither a regular file nor a folder")
    if path.is_file():
        folder, files = path.parent, [path]
    else:
        folder, files = path, _checkpoint_files(path)
    first = files[0]
    if first.suffix == ".safetensors":
        headers = [read_safetensors_header(file) for file in files]
        return count_named(_header_tensors(headers), config if config is not None else _folder_config(folder))
    if first.name.startswith("pytorch_model") and first.suffix == ".bin":
        return count_named(_torch_bin_tensors(files), config if config is not None else _folder_config(folder))
    if first.suffix == ".bin":
        return _count_ctranslate2(first)
    if first.suffix == ".gguf":
        return _count_gguf(first)
    if first.suffix == ".onnx":
        return _count_onnx(first)
    raise ValueError(f"cannot count the parameters of {path.name}; give {COUNTABLE}")


def _checkpoint_files(folder: Path) -> list[Path]:
    """The files of the checkpoint in ``folder``, in the order :func:`attnstruct.checkpoints.extract.iter_blocks`
    looks."""
    shards = sorted(p for p in folder.glob("*.safetensors") if p.is_file())
    if shards:
        return shards
    torch_bins = sorted(p for p in folder.glob("pytorch_model*.bin") if p.is_file())
    if torch_bins:
        return torch_bins
    if (folder / "model.bin").is_file():
        return [folder / "model.bin"]
    singles = sorted(p for p in folder.iterdir() if p.suffix in (".gguf", ".onnx") and p.is_file())
    if len(singles) == 1:
        return singles
    found = f"{len(singles)} .gguf/.onnx files" if singles else "no checkpoint file"
    raise ValueError(f"cannot count the parameters in {folder}: {found}; give {COUNTABLE}")

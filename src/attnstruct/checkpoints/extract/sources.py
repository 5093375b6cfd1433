"""One entry point for every source: a model in memory, a folder, or a checkpoint file.

:func:`iter_blocks` recognises the format (Hugging Face folder with safetensors or ``.bin``, a single
``.safetensors`` file next to its ``config.json``, ``.gguf``, ``.onnx``, a CTranslate2 folder or
``model.bin``) and yields :class:`~attnstruct.checkpoints.extract.blocks.AttentionBlock` objects layer by layer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import torch

from .blocks import AttentionBlock, ExtractionError
from .hf import ModuleSource, SafetensorsSource, TorchBinSource, hf_blocks

FORMATS = (
    "a transformers model in memory",
    "a Hugging Face folder (config.json with model.safetensors, sharded safetensors or pytorch_model.bin)",
    "a .safetensors file next to its config.json",
    "a .gguf file",
    "an .onnx file",
    "a CTranslate2 folder or model.bin",
)


def _ctranslate2(path: Path) -> bool:
    folder = path if path.is_dir() else path.parent
    if path.is_file() and path.name != "model.bin":
        return False
    has_hf_weights = any(folder.glob("*.safetensors")) or (folder / "pytorch_model.bin").is_file()
    return (folder / "model.bin").is_file() and not has_hf_weights


def hf_folder_source(folder: Path, model_type: str | None = None) -> SafetensorsSource | TorchBinSource | None:
    """The tensor source of a Hugging Face folder: its safetensors files, else its ``pytorch_model.bin`` (or shards);
    None when it holds neither."""
    if any(folder.glob("*.safetensors")):
        return SafetensorsSource(folder, model_type)
    if (folder / "pytorch_model.bin").is_file() or (folder / "pytorch_model.bin.index.json").is_file():
        return TorchBinSource(folder, model_type)
    return None


def iter_blocks(source, *, n_heads: int | None = None, model_type: str | None = None) -> Iterator[AttentionBlock]:
    """Yield the attention blocks of ``source`` (see the module docstring for what it may be).

    ``n_heads`` is only used by formats that may not record the head count (ONNX, CTranslate2). ``model_type``
    is the family a Hugging Face folder or file is read as when its ``config.json`` names none (a packaged
    checkpoint's registry entry gives it); a ``model_type`` the config names wins.
    Raises :class:`ExtractionError` with one line naming the problem.
    """
    if isinstance(source, torch.nn.Module):
        return hf_blocks(ModuleSource(source))
    path = Path(source)
    if not path.exists():
        raise ExtractionError(f"no such file or folder: {path}", "not found")
    if not path.is_file() and not path.is_dir():
        raise ExtractionError(f"{path} is neither a regular file nor a folder (a device, a pipe or a socket)")
    if _ctranslate2(path):
        from .ctranslate2_reader import ctranslate2_blocks

        return ctranslate2_blocks(path, n_heads=n_heads)
    if path.is_file():
        if path.suffix == ".gguf":
            from .gguf_reader import gguf_blocks

            return gguf_blocks(path)
        if path.suffix == ".onnx":
            from .onnx_reader import onnx_blocks

            return onnx_blocks(path, n_heads=n_heads)
        if path.suffix == ".safetensors":
            return hf_blocks(SafetensorsSource(path, model_type))
        if path.suffix == ".bin":
            return hf_blocks(TorchBinSource(path.parent, model_type))
        raise ExtractionError(f"unrecognised checkpoint file {path.name}; readable: {'; '.join(FORMATS)}")
    source = hf_folder_source(path, model_type)
    if source is not None:
        return hf_blocks(source)
    singles = [p for p in path.iterdir() if p.suffix in (".gguf", ".onnx")]
    if len(singles) == 1:
        return iter_blocks(singles[0], n_heads=n_heads, model_type=model_type)
    raise ExtractionError(f"no checkpoint recognised in {path}; readable: {'; '.join(FORMATS)}")


def count_blocks(source) -> int | None:
    """How many blocks ``source`` holds, when it can be told without loading weights (for progress bars)."""
    from .hf import stack_layers

    try:
        if isinstance(source, torch.nn.Module):
            return sum(len(layers) for _, layers in stack_layers(ModuleSource(source)))
        path = Path(source)
        if path.is_dir() and any(path.glob("*.safetensors")):
            return sum(len(layers) for _, layers in stack_layers(SafetensorsSource(path)))
    except ExtractionError:
        return None
    return None

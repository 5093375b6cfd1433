"""One way to open whatever a user names: a model in memory, a local checkpoint, a packaged one, or a hub id.

:func:`open_checkpoint` resolves ``source`` in this order, and the first that applies wins:

1. a ``torch.nn.Module`` (a transformers model in memory);
2. an existing file or folder (:func:`attnstruct.checkpoints.extract.iter_blocks` recognises the format);
3. the name of a packaged checkpoint of the model zoo (``minilm-l6``), which must have been fetched;
4. a hub id ``ORG/NAME[@REVISION]`` (:mod:`attnstruct.checkpoints.hub`: only the query/key bytes of safetensors
and ``pytorch_model.bin`` repositories).

Local mistakes stay local (:func:`local_mistake`): a name that reads as a path (``./``, ``../``, ``/``, ``~``, or a
checkpoint file's suffix), one whose parent folder exists, or one close to a packaged name is reported as ``not
found`` in one line, with the packaged name it is close to, and the hub is not asked.

The :class:`Checkpoint` it yields gives the blocks, how many there are when that is known without reading
weights (for progress bars), and what the sweep records: the model type, the parameter count, the revision, the
digest of a hub model's weight files as the hub states it, and the bytes that came over the network.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .extract import AttentionBlock, ExtractionError, count_parameters, iter_blocks
from .extract.hf import ModuleSource, TorchBinSource, hf_blocks, query_key_reads, stack_layers
from .extract.sources import count_blocks

PATH_PREFIXES = ("./", "../", "/", "~", ".\\", "..\\")
CHECKPOINT_SUFFIXES = (
    ".safetensors", ".gguf", ".onnx", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".json", ".nc", ".csv",
)  # fmt: skip
NEAR_MISS = 0.8  # difflib's similarity from which a name is taken for a mistyped packaged name


@dataclass
class Checkpoint:
    """An opened source. ``blocks()`` reads the attention blocks layer by layer; ``n_blocks`` may be None."""

    name: str
    kind: str  # module, local, zoo, snapshot, ranges, download
    blocks: Callable[[], Iterator[AttentionBlock]]
    n_blocks: int | None = None
    model_type: str = ""
    n_params: int | None = None
    revision: str = ""
    location: str = ""
    bytes_fetched: Callable[[], int] = field(default=lambda: 0)
    weights_sha256: str = ""  # a hub model's weight files' digest (attnstruct.checkpoints.hub_manifest.weights_digest)
    hub_calls: Callable[[], dict[str, int]] | None = None  # a hub model's requests by quota bucket, so far


def _model_type(path: Path) -> str:
    """The architecture a local checkpoint declares: ``config.json``'s model_type, or GGUF's architecture."""
    import json

    folder = path if path.is_dir() else path.parent
    if path.suffix == ".gguf":
        from .extract.gguf_reader import gguf_info

        return str(gguf_info(path)["architecture"])
    config = folder / "config.json"
    if config.is_file():
        with contextlib.suppress(ValueError, OSError, RecursionError):
            data = json.loads(config.read_text(encoding="utf-8"))
            model_type = data.get("model_type") if isinstance(data, dict) else None
            return model_type if isinstance(model_type, str) else ""
    return ""


def _torch_bin_folder(path: Path) -> bool:
    """A Hugging Face folder whose weights are ``pytorch_model.bin`` (single or sharded), no safetensors."""
    if not path.is_dir() or any(path.glob("*.safetensors")):
        return False
    return (path / "pytorch_model.bin").is_file() or (path / "pytorch_model.bin.index.json").is_file()


def _local(
    name: str, path: Path, kind: str, n_heads: int | None, n_params: int | None, model_type: str | None = None
) -> Checkpoint:
    """A checkpoint on disk; ``model_type`` stands in where its ``config.json`` names none (``iter_blocks``)."""
    if _torch_bin_folder(path) and kind == "local":
        return _local_torch_bin(name, path, model_type)
    if n_params is None:
        with contextlib.suppress(Exception):
            n_params = count_parameters(path)
    return Checkpoint(
        name=name,
        kind=kind,
        blocks=lambda: iter_blocks(path, n_heads=n_heads, model_type=model_type),
        n_blocks=count_blocks(path),
        model_type=_model_type(path) or model_type or "",
        n_params=n_params,
        location=str(path),
    )


def _local_torch_bin(name: str, path: Path, model_type: str | None = None) -> Checkpoint:
    """A local ``pytorch_model.bin`` folder read by byte ranges from disk, as a hub repository is read: the blocks,
    the parameter count from the pickled index, and the bytes read (``bytes_fetched``), counted as they would be
    over the network."""
    source = TorchBinSource(path, model_type)
    n_params = source.n_params()
    if n_params is None:  # a legacy file: counted as any local checkpoint is, a failure leaving it unknown
        with contextlib.suppress(Exception):
            n_params = count_parameters(path)
    return Checkpoint(
        name=name,
        kind="local",
        blocks=lambda: hf_blocks(source),
        n_blocks=sum(len(layers) for _, layers in stack_layers(source)),
        model_type=_model_type(path) or model_type or "",
        n_params=n_params,
        location=str(path),
        bytes_fetched=lambda: source.reader.bytes_fetched,
    )


def _zoo(name: str, n_heads: int | None) -> Checkpoint | None:
    from . import zoo

    registry = zoo.load_registry()
    if name not in registry or registry[name].format not in zoo.FORMATS:
        return None
    if not zoo.is_fetched(name):
        raise ExtractionError(
            f"packaged checkpoint {name} {zoo.why_not_fetched(name)}; run: attnstruct fetch-models {name}", "not found"
        )
    entry = registry[name]
    return _local(name, zoo.path(name), "zoo", n_heads, entry.n_params, entry.model_type)


def _module(model: torch.nn.Module) -> Checkpoint:
    source = ModuleSource(model)
    n_params = model.num_parameters() if hasattr(model, "num_parameters") else None
    return Checkpoint(
        name=type(model).__name__,
        kind="module",
        blocks=lambda: hf_blocks(source),
        n_blocks=sum(len(layers) for _, layers in stack_layers(source)),
        model_type=str(getattr(model.config, "model_type", "") or ""),
        n_params=n_params,
    )


def _snapshot_parameters(model) -> int | None:
    """``num_parameters()``-style count of a hub snapshot's safetensors, as for range-read models; else None."""
    from .extract.hf import _load_config

    folder = Path(model.source)
    if model.kind != "snapshot" or not any(folder.glob("*.safetensors")):
        return None
    return count_parameters(folder, config=_load_config(folder))


def _packaged_names() -> list[str]:
    from . import zoo

    registry = zoo.load_registry()
    return sorted(name for name, entry in registry.items() if entry.format in zoo.FORMATS)


def local_mistake(text: str) -> str | None:
    """Why ``text``, which names no existing file or folder and no packaged checkpoint, is a local name that is
    missing rather than a hub id: it reads as a path (:data:`PATH_PREFIXES`, :data:`CHECKPOINT_SUFFIXES`), its
    parent folder exists, or it is close to a packaged name (the one-line reason, with that name); None otherwise."""
    path = Path(text).expanduser()
    if text.startswith(PATH_PREFIXES) or text.lower().endswith(CHECKPOINT_SUFFIXES):
        return f"no such file or folder: {text}"
    if path.parent != Path(".") and path.parent.is_dir():
        return f"no such file or folder: {text} (the folder {path.parent} holds no {path.name})"
    if "/" not in text:
        close = difflib.get_close_matches(text.lower(), _packaged_names(), n=1, cutoff=NEAR_MISS)
        if close:
            return f"no packaged checkpoint {text}; did you mean {close[0]}?"
    return None


def names_hub_model(source) -> bool:
    """Whether :func:`open_checkpoint` reads ``source`` as a hub id: a text that names no existing file or folder
    and no packaged checkpoint, is no local mistake (:func:`local_mistake`), and reads as
    ``ORG/NAME[@REVISION]``."""
    from .hub import looks_like_hub_id

    text = str(source)
    if isinstance(source, torch.nn.Module) or Path(text).expanduser().exists() or not looks_like_hub_id(text):
        return False
    return text not in _packaged_names() and local_mistake(text) is None


@contextlib.contextmanager
def open_checkpoint(
    source, *, n_heads: int | None = None, model_type: str | None = None, settings=None, workers: int = 4
) -> Iterator[Checkpoint]:
    """Open ``source`` (module docstring); network threads of a hub model are closed on exit. ``model_type``
    stands in for the one a local folder's ``config.json`` does not name (a packaged checkpoint's comes from its
    registry entry).

    Raises :class:`~attnstruct.checkpoints.extract.ExtractionError` (one line) for a missing file, an unfetched packaged
    checkpoint, a hub model that cannot be had, or an unsupported architecture.
    """
    if isinstance(source, torch.nn.Module):
        yield _module(source)
        return
    if isinstance(source, Mapping):
        raise ExtractionError(
            "a state_dict needs config= (its transformers config or config.json as a dict) or family= and n_heads=: "
            "score it with attnstruct.score(state_dict, config=...)",
            "unsupported architecture",
        )
    text = str(source)
    path = Path(text).expanduser()
    if path.exists():
        yield _local(text, path, "local", n_heads, None, model_type)
        return
    packaged = _zoo(text, n_heads)
    if packaged is not None:
        yield packaged
        return
    from .hub import looks_like_hub_id, open_hub_model

    mistake = local_mistake(text)
    if mistake is not None:
        raise ExtractionError(mistake, "not found")
    if not looks_like_hub_id(text):
        raise ExtractionError(f"no such file or folder, packaged checkpoint or hub id: {text}", "not found")
    model = open_hub_model(text, settings=settings, workers=workers)
    try:
        if model.kind == "ranges":
            remote = model.source
            remote.prefetch(query_key_reads(remote))
            checkpoint = Checkpoint(
                name=text,
                kind="ranges",
                blocks=lambda: hf_blocks(remote),
                n_blocks=sum(len(layers) for _, layers in stack_layers(remote)),
                model_type=str(remote.config.model_type or ""),
                n_params=model.n_params,
            )
        else:
            checkpoint = _local(text, Path(model.source), model.kind, n_heads, _snapshot_parameters(model))
        checkpoint.revision = model.commit
        checkpoint.location = f"{model.repo}@{model.commit}"
        checkpoint.bytes_fetched = lambda: model.bytes_fetched
        checkpoint.weights_sha256 = model.weights_sha256 or ""
        checkpoint.hub_calls = lambda: model.calls.calls
        yield checkpoint
    finally:
        model.close()

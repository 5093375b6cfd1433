"""Hugging Face models and checkpoints: in memory, or a local folder read tensor by tensor.

Sources give tensor names, single tensors and the model config. :func:`hf_blocks` finds each family's
query/key tensors by name (:mod:`attnstruct.checkpoints.extract.families`), loads one layer at a time, splits fused
layouts and heads, and pairs key heads with query heads. A source that also has ``shape(name)`` and
``get_rows(name, rows)`` (the range-read ones) is asked only for the query and key rows of a fused QKV weight
(``qkv_contiguous``, ``neox_per_head``), so its value rows are never read.
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Protocol

import torch

from ...untrusted import load_weights_only, one_line
from .blocks import AttentionBlock, ExtractionError, bias_extras, check_finite, check_view, expand_kv_heads
from .families import FAMILY_BY_MODEL_TYPE, SUPPORTED_MODEL_TYPES, Family, StackSpec
from .local_files import file_inside, listed_files, read_json_object

# Layer numbers index the dataset's layer coordinate, which holds only the numbers present; this bound keeps them
# integers of any file format and refuses a name that could not come from a real model.
MAX_LAYER = 2**31 - 1


class TensorSource(Protocol):
    config: object  # a transformers PretrainedConfig (in memory) or a JsonConfig (read from config.json)
    description: str

    def names(self) -> list[str]: ...

    def get(self, name: str) -> torch.Tensor: ...


class ModuleSource:
    """A transformers model in memory; tensors are its parameters (no copy)."""

    def __init__(self, model: torch.nn.Module):
        if not hasattr(model, "config"):
            raise ExtractionError(f"{type(model).__name__} has no .config: pass a transformers model")
        self.config = model.config
        self.description = type(model).__name__
        self._state = model.state_dict(keep_vars=False)

    def names(self) -> list[str]:
        return list(self._state)

    def get(self, name: str) -> torch.Tensor:
        return self._state[name].detach()


class JsonConfig(SimpleNamespace):
    """A checkpoint's ``config.json`` as attributes; absent keys read as None (no transformers import needed)."""

    def __getattr__(self, name):
        return None


def _load_config(folder: Path, model_type: str | None = None) -> JsonConfig:
    """``folder/config.json`` as a :class:`JsonConfig`; ``model_type`` stands in for the one it does not name (a
    packaged checkpoint's registry entry gives it), and one it names is kept."""
    path = folder / "config.json"
    if not path.is_file():
        raise ExtractionError(
            f"no config.json in {folder}: the model type and head counts are unknown", "unsupported architecture"
        )
    config = JsonConfig(**{str(key): value for key, value in read_json_object(path).items()})
    if model_type and config.model_type is None:
        config.model_type = model_type
    return config


class SafetensorsSource:
    """A folder with ``model.safetensors`` (or shards with ``model.safetensors.index.json``), or one file.

    Tensors are read one at a time; nothing else is loaded. ``model_type``: as for :func:`_load_config`.
    """

    def __init__(self, path: str | Path, model_type: str | None = None):
        from safetensors import safe_open

        path = Path(path)
        folder = path if path.is_dir() else path.parent
        self.config = _load_config(folder, model_type)
        self.description = str(path)
        if path.is_file():
            files = [path]
        elif (folder / "model.safetensors.index.json").is_file():
            files = [folder / name for name in listed_files(folder, "model.safetensors.index.json")]
        else:
            files = [file_inside(folder, p.name, "the folder holds") for p in sorted(folder.glob("*.safetensors"))]
        if not files:
            raise ExtractionError(f"no .safetensors files in {folder}")
        self._where: dict[str, Path] = {}
        for file in files:
            if not file.is_file():
                raise ExtractionError(f"checkpoint shard {file}", "not found")
            try:
                with safe_open(str(file), framework="pt") as handle:
                    names = list(handle.keys())
            except Exception as err:  # safetensors raises its own error types for bad or truncated files
                raise ExtractionError(f"cannot read {file.name}: {' '.join(str(err).split())} (truncated?)") from None
            for name in names:
                if name in self._where:  # which copy a loader takes is its own choice: refuse to guess
                    raise ExtractionError(
                        f"{folder}: tensor {name} is in both {self._where[name].name} and {file.name}"
                    )
                self._where[name] = file

    def names(self) -> list[str]:
        return list(self._where)

    def get(self, name: str) -> torch.Tensor:
        """Read one tensor; the file is mapped only for this read, so resident memory stays at one layer."""
        from safetensors import safe_open

        try:
            with safe_open(str(self._where[name]), framework="pt") as handle:
                return handle.get_tensor(name)
        except Exception as err:
            raise ExtractionError(f"cannot read tensor {name}: {' '.join(str(err).split())}") from None


class TorchBinSource:
    """A folder with ``pytorch_model.bin`` (or shards with ``pytorch_model.bin.index.json``).

    A ``torch.save`` ZIP archive is read by byte ranges from disk, only the tensors asked for
    (:class:`~attnstruct.checkpoints.remote_torch_bin.RemoteTorchBin` over a
    :class:`~attnstruct.checkpoints.local_reader.LocalFileReader`, ``reader``); its pickle is never run. A file
    in the legacy format (torch before 1.6) is loaded whole with ``torch.load(weights_only=True)``.
    ``model_type``: as for :func:`_load_config`.
    """

    def __init__(self, folder: str | Path, model_type: str | None = None):
        from ..local_reader import LocalFileReader
        from ..remote_torch_bin import RemoteTorchBin
        from ..torch_zip import NotAZipArchive

        folder = Path(folder)
        self.config = _load_config(folder, model_type)
        self.description = str(folder)
        if (folder / "pytorch_model.bin.index.json").is_file():
            files = listed_files(folder, "pytorch_model.bin.index.json")
        else:
            files = [file_inside(folder, "pytorch_model.bin", "the folder holds").name]
        self.reader = LocalFileReader(folder)
        self._state: dict[str, torch.Tensor] = {}
        try:
            sizes = {file: self.reader.size(file) for file in files}
            self._ranges = RemoteTorchBin(self.reader, files, self.config, sizes=sizes, description=str(folder))
        except NotAZipArchive:
            self._ranges = None
            for file in files:
                self._state.update(_load_whole(folder / file))

    def names(self) -> list[str]:
        return self._ranges.names() if self._ranges is not None else list(self._state)

    def shape(self, name: str) -> tuple[int, ...]:
        return self._ranges.shape(name) if self._ranges is not None else tuple(self._state[name].shape)

    def get(self, name: str) -> torch.Tensor:
        return self._ranges.get(name) if self._ranges is not None else self._state[name]

    def get_rows(self, name: str, rows: list[tuple[int, int]]) -> torch.Tensor:
        """Tensor ``name`` with only the rows ``[start, end)`` of dim 0 in ``rows`` read, the others zero."""
        if self._ranges is not None:
            return self._ranges.get_rows(name, rows)
        tensor = self._state[name]
        kept = torch.zeros_like(tensor)
        for start, end in rows:
            kept[start:end] = tensor[start:end]
        return kept

    def n_params(self) -> int | None:
        """``num_parameters()``-style count from the index, or None for a legacy file."""
        return self._ranges.n_params() if self._ranges is not None else None


def _load_whole(file: Path) -> dict[str, torch.Tensor]:
    """A legacy (pre-ZIP) ``torch.save`` file, tensors only: a state dict whose views each lie inside their storage
    and claim no more elements than it holds (:func:`~attnstruct.checkpoints.extract.blocks.check_view`)."""
    try:
        state = load_weights_only(file, map_location="cpu")
    except FileNotFoundError:
        raise ExtractionError(f"checkpoint file {file}", "not found") from None
    except pickle.UnpicklingError as err:  # torch's message goes on to advise weights_only=False: not for this file
        reason = one_line(err).partition("WeightsUnpickler error:")[2].partition(" Check the documentation")[0]
        raise ExtractionError(f"{file}: torch.load(weights_only=True) refuses its pickle ({reason.strip()})") from None
    except Exception as err:
        raise ExtractionError(f"cannot read {file} as a torch.save file: {one_line(err)}") from None
    if not isinstance(state, dict):
        raise ExtractionError(f"{file} holds a {type(state).__name__}, not a state dict")
    tensors = {str(name): t for name, t in state.items() if isinstance(t, torch.Tensor)}
    for name, t in tensors.items():
        elements = t.untyped_storage().nbytes() // t.element_size()
        check_view(tuple(t.shape), t.stride(), t.storage_offset(), elements, f"{file}: tensor {name}")
    return tensors


def family_of(config) -> Family:
    model_type = getattr(config, "model_type", None)
    if not isinstance(model_type, str) or model_type not in FAMILY_BY_MODEL_TYPE:
        raise ExtractionError(
            f"{model_type!r}; supported model types: {', '.join(SUPPORTED_MODEL_TYPES)}", "unsupported architecture"
        )
    return FAMILY_BY_MODEL_TYPE[model_type]


def _config_value(config, key: str):
    """``config.key``, following a dotted key into nested configs (objects or, from ``config.json``, dicts); a
    config made with the dotted key itself as a name (a state_dict's ``family=``/``n_heads=``) answers it directly."""
    direct = getattr(config, key, None)
    if direct is not None:
        return direct
    value = config
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
        if value is None:
            return None
    return value


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _config_int(config, keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = _config_value(config, key)
        if _positive_int(value):
            return value
    return None


def _stage_heads(config, spec: StackSpec, name: str) -> int | None:
    """The head count of the block whose query tensor is ``name``: :func:`_config_int` of ``spec.heads``, or, where a
    key holds a list (Swin's ``num_heads``), its entry for the stage that the name's pattern gives."""
    heads = _config_int(config, spec.heads)
    if heads is not None:
        return heads
    for key in spec.heads:
        value = _config_value(config, key)
        if not isinstance(value, list | tuple):
            continue
        for pattern in spec.q:
            match = re.search(pattern, name)
            if match and "stage" in match.groupdict():
                stage = int(match["stage"])
                entry = value[stage] if stage < len(value) else None
                if not _positive_int(entry):
                    raise ExtractionError(f"{key} of the config gives no positive head count for stage {stage}: {name}")
                return entry
    return None


def _match_layers(names: list[str], patterns: tuple[str, ...]) -> dict[int, str]:
    """``{layer: tensor name}`` for the first pattern that matches anything; refuse ambiguous matches. A pattern with
    the groups ``stage`` and ``block`` (Swin) numbers its matches ``0..n-1`` in (stage, block) order."""
    for pattern in patterns:
        found: dict[tuple[int, ...], str] = {}
        regex = re.compile(pattern)
        for name in names:
            m = regex.search(name)
            if m:
                key = (int(m["stage"]), int(m["block"])) if "stage" in regex.groupindex else (int(m["layer"]),)
                if max(key) > MAX_LAYER:
                    raise ExtractionError(f"tensor {name} names layer {max(key)}, past any model's depth ({MAX_LAYER})")
                if key in found:
                    what = key[0] if len(key) == 1 else f"{key[1]} of stage {key[0]}"
                    raise ExtractionError(f"ambiguous tensors for layer {what}: {found[key]} and {name}")
                found[key] = name
        if found:
            if "stage" in regex.groupindex:
                return {layer: found[key] for layer, key in enumerate(sorted(found))}
            return {key[0]: name for key, name in found.items()}
    return {}


def _bias(source: TensorSource, names: set[str], weight_name: str, rows=None) -> torch.Tensor | None:
    """The bias of ``weight_name``, if the checkpoint has one; with ``rows`` (a fused weight read by rows), only
    those entries are read, the value ones left zero."""
    name = weight_name[: -len("weight")] + "bias"
    if name not in names:
        return None
    return check_finite((source.get_rows(name, rows) if rows else source.get(name)).float(), name)


def _split_fused(spec: StackSpec, w: torch.Tensor, b: torch.Tensor | None, n_heads: int, config):
    """Fused weight (and bias) -> ``(w_q, w_k, b_q, b_k)`` as ``[rows, d_model]`` / ``[rows]``."""
    outputs = w.shape[-1] if spec.fused == "gpt2_conv1d" else w.shape[0]
    if w.ndim != 2 or (b is not None and tuple(b.shape) != (outputs,)):
        bias = f" and bias {list(b.shape)}" if b is not None else ""
        raise ExtractionError(f"fused weight {list(w.shape)}{bias}: not a [rows, columns] matrix and its bias")
    if spec.fused == "gpt2_conv1d":
        d = w.shape[0]
        if w.shape[1] != 3 * d:
            raise ExtractionError(f"GPT-2 fused weight {list(w.shape)} is not [d_model, 3 d_model]")
        w = w.T
        return w[:d], w[d : 2 * d], *((b[:d], b[d : 2 * d]) if b is not None else (None, None))
    if spec.fused == "neox_per_head":
        d_model = w.shape[1]
        if w.shape[0] % (3 * n_heads):
            raise ExtractionError(f"fused weight has {w.shape[0]} rows, not 3 x d_head for each of {n_heads} heads")
        heads = w.view(n_heads, 3, -1, d_model)
        q, k = heads[:, 0].reshape(-1, d_model), heads[:, 1].reshape(-1, d_model)
        if b is None:
            return q, k, None, None
        bh = b.view(n_heads, 3, -1)
        return q, k, bh[:, 0].reshape(-1), bh[:, 1].reshape(-1)
    if spec.fused == "qkv_contiguous":
        d_model = w.shape[1]
        n_kv = _config_int(config, spec.kv_heads) or n_heads
        d_head = _config_int(config, ("head_dim",)) or d_model // n_heads
        nq, nk = n_heads * d_head, n_kv * d_head
        if w.shape[0] != nq + 2 * nk:
            raise ExtractionError(f"fused qkv has {w.shape[0]} rows, expected {nq + 2 * nk}")
        return w[:nq], w[nq : nq + nk], *((b[:nq], b[nq : nq + nk]) if b is not None else (None, None))
    raise ExtractionError(f"unknown fused layout {spec.fused!r}")


def fused_query_key_rows(spec: StackSpec, shape: tuple[int, ...], n_heads: int, config) -> list[tuple[int, int]] | None:
    """Rows ``[start, end)`` of a fused weight ``[rows, d_model]`` that hold its queries and keys, values left out:
    ``qkv_contiguous`` ``[(0, H d_head + n_kv d_head)]``; ``neox_per_head`` ``[(3 h d_head, 3 h d_head + 2 d_head)]``
    for each head ``h``. None for other layouts (GPT-2's is split by columns) or a shape they do not fit."""
    if spec.fused == "qkv_contiguous" and len(shape) == 2:
        n_kv = _config_int(config, spec.kv_heads) or n_heads
        d_head = _config_int(config, ("head_dim",)) or shape[1] // n_heads
        nq, nk = n_heads * d_head, n_kv * d_head
        return [(0, nq + nk)] if shape[0] == nq + 2 * nk else None
    if spec.fused == "neox_per_head" and len(shape) == 2 and shape[0] % (3 * n_heads) == 0:
        d_head = shape[0] // (3 * n_heads)
        return [(3 * h * d_head, (3 * h + 2) * d_head) for h in range(n_heads)]
    return None


def _weight_read(source: TensorSource, spec: StackSpec, name: str) -> tuple[str, list[tuple[int, int]] | None]:
    """``(name, rows)``: the query/key rows of a fused weight when the source reads rows, else ``(name, None)``."""
    n_heads = _config_int(source.config, spec.heads)
    if not spec.fused or n_heads is None or not hasattr(source, "get_rows"):
        return name, None
    return name, fused_query_key_rows(spec, tuple(source.shape(name)), n_heads, source.config)


def _per_head(w_q, w_k, b_q, b_k, n_heads: int, what: str):
    """``[H d_head, d]`` and ``[n_kv d_head, d]`` -> ``[H, d_head, d]`` each, key heads expanded."""
    if w_q.ndim != 2 or w_k.ndim != 2 or w_q.shape[1] != w_k.shape[1] or 0 in (*w_q.shape, *w_k.shape):
        raise ExtractionError(
            f"{what}: query {list(w_q.shape)} and key {list(w_k.shape)} are not [rows, d_model] weights of one width"
        )
    for bias, weight, name in ((b_q, w_q, "query"), (b_k, w_k, "key")):
        if bias is not None and tuple(bias.shape) != (weight.shape[0],):
            raise ExtractionError(f"{what}: the {name} bias {list(bias.shape)} does not match {weight.shape[0]} rows")
    if w_q.shape[0] % n_heads:
        raise ExtractionError(f"{what}: {w_q.shape[0]} query rows do not split into {n_heads} heads")
    d_head = w_q.shape[0] // n_heads
    if w_k.shape[0] % d_head or n_heads % (w_k.shape[0] // d_head):
        raise ExtractionError(f"{what}: {w_k.shape[0]} key rows do not form key heads of size {d_head}")
    n_kv = w_k.shape[0] // d_head
    q = w_q.reshape(n_heads, d_head, -1)
    k = expand_kv_heads(w_k.reshape(n_kv, d_head, -1), n_heads)
    bq = b_q.reshape(n_heads, d_head) if b_q is not None else None
    bk = expand_kv_heads(b_k.reshape(n_kv, d_head), n_heads) if b_k is not None else None
    return q, k, bq, bk, n_kv


def stack_layers(source: TensorSource) -> list[tuple[StackSpec, dict[int, str]]]:
    """For every stack of the source's family, the query tensor name of each layer (nothing is loaded)."""
    family = family_of(source.config)
    names = source.names()
    found = [(spec, _match_layers(names, spec.q)) for spec in family.stacks]
    if not any(layers for _, layers in found):
        raise ExtractionError(
            f"no {family.name} query weights found in {source.description} (looked for {family.stacks[0].q[0]})"
        )
    return found


def query_key_reads(source: TensorSource) -> list[tuple[str, list[tuple[int, int]] | None]]:
    """What :func:`hf_blocks` reads, in its order: ``(name, None)`` for a whole tensor (query/key weights and
    biases), ``(name, rows)`` for the query/key rows of a fused weight and its bias (:func:`fused_query_key_rows`)
    from a source with ``get_rows``. A prefetch of these is what :func:`hf_blocks` then asks for."""
    names = source.names()
    present = set(names)
    ordered = []
    for spec, layers in stack_layers(source):
        k_layers = _match_layers(names, spec.k) if spec.k else {}
        for layer in sorted(layers):
            for weight in (layers[layer], k_layers.get(layer)):
                if weight is not None:
                    bias = weight[: -len("weight")] + "bias"
                    read = _weight_read(source, spec, weight)
                    ordered += [read, (bias, read[1])] if bias in present else [read]
    return ordered


def query_key_names(source: TensorSource) -> list[str]:
    """The tensors :func:`hf_blocks` reads (query/key weights and their biases), in the order it reads them."""
    return [name for name, _ in query_key_reads(source)]


def hf_blocks(source: TensorSource) -> Iterator[AttentionBlock]:
    """Yield the attention blocks of a Hugging Face source, one layer's tensors in memory at a time."""
    names = set(source.names())
    for spec, layers in stack_layers(source):
        k_layers = _match_layers(list(names), spec.k) if spec.k else {}
        norm_layers = _match_layers(list(names), spec.qk_norm) if spec.qk_norm else {}
        for layer in sorted(layers):
            q_name = layers[layer]
            n_heads = _stage_heads(source.config, spec, q_name)
            if n_heads is None:
                raise ExtractionError(
                    f"the config of {source.description} gives none of {', '.join(spec.heads)} as a positive integer: "
                    f"cannot split {spec.stack} heads"
                )
            _, rows = _weight_read(source, spec, q_name)
            w = check_finite((source.get_rows(q_name, rows) if rows else source.get(q_name)).float(), q_name)
            b = _bias(source, names, q_name, rows)
            if spec.fused:
                w_q, w_k, b_q, b_k = _split_fused(spec, w, b, n_heads, source.config)
            else:
                if layer not in k_layers:
                    raise ExtractionError(f"no key weight for {spec.stack} layer {layer} (query {q_name})")
                k_name = k_layers[layer]
                w_q, b_q = w, b
                w_k, b_k = check_finite(source.get(k_name).float(), k_name), _bias(source, names, k_name)
            q, k, bq, bk, n_kv = _per_head(w_q, w_k, b_q, b_k, n_heads, q_name)
            extras = [*spec.extras, *bias_extras(bq, bk)]
            if layer in norm_layers:
                extras.append("qk_norm")
            yield AttentionBlock(
                stack=spec.stack,
                layer=layer,
                w_q=q,
                w_k=k,
                causal=spec.causal,
                n_kv_heads=n_kv,
                b_q=bq,
                b_k=bk,
                extras=tuple(extras),
                source_name=q_name,
            )

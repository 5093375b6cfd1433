"""Snapshots of a run's weights during training, kept as Hugging Face-style checkpoint folders: a local series.

Public training series (Pythia's 154 branches, Ettin's tagged checkpoints, MultiBERTs' intermediate repositories)
are folders of ``config.json`` and ``pytorch_model.bin``, one per training step. A run of the project's own
Transformer (:mod:`attnstruct.training.model`) can leave the same thing behind, so that the code that reads the
public series reads it too::

    run_dir/snapshots/step000000/{config.json, pytorch_model.bin}
    run_dir/snapshots/step000100/...
    run_dir/final/{config.json, pytorch_model.bin}      (the last step's weights, when asked for)

* ``pytorch_model.bin`` is ``torch.save(model.state_dict())``: a torch ZIP checkpoint of float32 weights, the
  format of Ettin's and Pythia's intermediate checkpoints. ``attnstruct train`` writes ``model.safetensors``
  instead (``weights=SAFETENSORS``): the same tensors, opened by any safetensors reader without unpickling.
* ``config.json`` names the family ``attnstruct-encoder`` (bidirectional attention) or ``attnstruct-decoder``
  (causal), whose query/key tensors are ``encoder.blocks.{L}.attention.{query,key}.weight``, with the shape keys
  a reader needs (``num_attention_heads``, ``hidden_size``, ``num_hidden_layers``, ``vocab_size``) and, under
  ``attnstruct``, the run's name, objective, seed, step and tokens per step.
* A text model's folder also opens in ``transformers``: ``config.json`` has an ``auto_map`` and the folder holds
  ``configuration_attnstruct.py`` and ``modeling_attnstruct.py``, one import each from the installed package
  (:mod:`attnstruct.training.hf_export`); ``AutoModelForMaskedLM`` (encoder) or ``AutoModelForCausalLM`` (decoder)
  with ``trust_remote_code=True`` loads it. The vision task's folders do not open there (the module says why).

Snapshots are taken at step 0, at every ``every``-th step (a multiple of the run's ``log_every``, so each snapshot
has its record in ``run.nc``) and at the last step. They are an output of training, not a parameter of it: the
same run with or without snapshots trains to the same weights. Each file is written atomically, ``config.json``
last, so a folder with a ``config.json`` is complete; a ``snapshots`` folder or step folder that is a link out of
the run folder is refused (:func:`attnstruct.untrusted.inside`), so that a copied run folder cannot have a run
write elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from .. import results
from .._version import __version__
from ..untrusted import inside, load_weights_only
from . import hf_export
from .model import LanguageModel

FOLDER = "snapshots"
FINAL = "final"
WEIGHTS = "pytorch_model.bin"
SAFETENSORS = "model.safetensors"
WEIGHT_FILES = (SAFETENSORS, WEIGHTS)
CONFIG = "config.json"
MODEL_TYPES = {False: "attnstruct-encoder", True: "attnstruct-decoder"}


def check_every(every: int | None, log_every: int) -> None:
    """Raise ValueError unless ``every`` is None/0 (no snapshots) or a positive multiple of ``log_every``."""
    if every in (None, 0):
        return
    if not isinstance(every, int) or isinstance(every, bool) or every < 0 or every % log_every:
        raise ValueError(f"snapshot_every must be 0 or a multiple of log_every ({log_every}), got {every!r}")


def snapshot_steps(steps: int, every: int | None) -> list[int]:
    """The steps a run of ``steps`` steps keeps a snapshot of: 0, the multiples of ``every`` and ``steps``."""
    if not every:
        return []
    return sorted({0, *range(every, steps + 1, every), steps})


def folder(run_dir: str | Path, step: int) -> Path:
    """``run_dir/snapshots/stepNNNNNN``; ValueError (one line) when a link there leads out of the run folder."""
    return inside(run_dir, FOLDER, f"step{step:06d}")


def final_folder(run_dir: str | Path) -> Path:
    """``run_dir/final``; ValueError (one line) when a link there leads out of the run folder."""
    return inside(run_dir, FINAL)


def model_config(config, model: torch.nn.Module, step: int, tokens_per_step: int | None) -> dict:
    """``config.json`` of a snapshot of ``model`` (a :class:`~attnstruct.training.model.LanguageModel` or a model
    with its ``.config`` shape, or one whose ``.encoder`` has it, as the vision task's) at ``step`` of the run
    ``config``."""
    shape = model.config if hasattr(model, "config") else model.encoder.config
    text = isinstance(model, LanguageModel)
    opened = {"auto_map": hf_export.auto_map(config.causal)} if text else {}
    return {
        "model_type": MODEL_TYPES[bool(config.causal)],
        "architectures": [hf_export.architecture(config.causal) if text else type(model).__name__],
        **opened,
        "num_attention_heads": shape.n_heads,
        "hidden_size": shape.d_model,
        "num_hidden_layers": shape.n_layers,
        "vocab_size": getattr(shape, "vocab_size", None),
        "tie_word_embeddings": True,
        "attnstruct": {
            "run": config.run_name(),
            "objective": config.objective,
            "seed": config.seed,
            "step": step,
            "tokens_per_step": tokens_per_step,
            "transformer": shape.to_dict() if hasattr(shape, "to_dict") else None,
            "attnstruct_version": __version__,
        },
    }


def save(
    run_dir: str | Path,
    config,
    model: torch.nn.Module,
    step: int,
    tokens_per_step: int | None = None,
    *,
    weights: str = WEIGHTS,
    final: bool = False,
) -> Path:
    """Write the snapshot of ``model`` at ``step`` under ``run_dir`` (module docstring), its weights in the file
    ``weights`` (:data:`WEIGHTS` or :data:`SAFETENSORS`), in ``run_dir/final`` when ``final``; returns its folder."""
    if weights not in WEIGHT_FILES:
        raise ValueError(f"snapshot weights must be one of {', '.join(WEIGHT_FILES)}, got {weights!r}")
    target = final_folder(run_dir) if final else folder(run_dir, step)
    state = {name: tensor.detach().to("cpu").contiguous() for name, tensor in model.state_dict().items()}
    if weights == SAFETENSORS:
        from safetensors.torch import save_file

        results.write_atomically(target / weights, lambda temporary: save_file(state, str(temporary)))
    else:
        results.write_atomically(target / weights, lambda temporary: torch.save(state, temporary))
    if isinstance(model, LanguageModel):
        hf_export.write_modules(target, _write_text)
    text = json.dumps(model_config(config, model, step, tokens_per_step), indent=1, sort_keys=True)
    _write_text(target / CONFIG, text)
    return target


def _write_text(path: Path, text: str) -> None:
    results.write_atomically(path, lambda temporary: Path(temporary).write_text(text))


def weights_file(folder: str | Path) -> Path | None:
    """The weights of the snapshot in ``folder`` (``model.safetensors`` or ``pytorch_model.bin``), None if neither
    is there."""
    return next((Path(folder) / name for name in WEIGHT_FILES if (Path(folder) / name).is_file()), None)


def _whole(path: Path) -> bool:
    return (path / CONFIG).is_file() and weights_file(path) is not None


def complete_snapshots(run_dir: str | Path) -> dict[int, Path]:
    """``{step: folder}`` of the complete snapshots under ``run_dir`` (those with a ``config.json``)."""
    root = inside(run_dir, FOLDER)
    found = {}
    for path in sorted(root.glob("step*")) if root.is_dir() else ():
        if _whole(path) and path.name[4:].isdigit():
            found[int(path.name[4:])] = path
    return found


def has_every_snapshot(run_dir: str | Path | None, steps: int, every: int | None, final: bool = False) -> bool:
    """Whether ``run_dir`` holds every snapshot a run of ``steps`` steps takes every ``every`` steps, and its
    final weights when ``final``."""
    wanted = snapshot_steps(steps, every)
    if final and (run_dir is None or not _whole(final_folder(run_dir))):
        return False
    return not wanted or (run_dir is not None and set(wanted) <= set(complete_snapshots(run_dir)))


def read_weights(folder: str | Path) -> dict:
    """The state dict of the snapshot in ``folder`` (``model.safetensors``, else ``pytorch_model.bin`` read with
    ``weights_only=True``); ValueError (one line) for a folder without either, a file that is not a checkpoint or
    asks for anything but tensors (a pickle that could run code), or anything but a mapping of names to tensors."""
    import pickle

    path = weights_file(folder)
    if path is None:
        raise ValueError(f"init_from: {Path(folder) / SAFETENSORS} (or {WEIGHTS}) does not exist")
    try:
        if path.name == SAFETENSORS:
            from safetensors.torch import load_file

            state = load_file(path, device="cpu")
        else:
            state = load_weights_only(path, map_location="cpu")
    except pickle.UnpicklingError:
        raise ValueError(f"init_from: {path} holds objects other than tensors, and is not read") from None
    except Exception as err:  # noqa: BLE001  (a damaged file fails in many ways; each is one line)
        raise ValueError(f"init_from: {path} cannot be read ({' '.join(str(err).split())[:200]})") from None
    if not isinstance(state, dict) or not all(isinstance(t, torch.Tensor) for t in state.values()):
        raise ValueError(f"init_from: {path} is not a mapping of names to tensors")
    return state

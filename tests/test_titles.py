"""The figures' message titles: every number in them is computed from the data they are given."""

import numpy as np
import pandas as pd
import pytest

from attnstruct.analyses import figure_titles
from attnstruct.scores import Scores


@pytest.mark.parametrize(
    "a, b, words",
    [(0.5, 0.1, "more symmetric than"), (0.1, 0.5, "less symmetric than"), (0.301, 0.299, "as symmetric as")],
)
def test_more_symmetric_compares_at_the_printed_precision(a, b, words):
    assert figure_titles.more_symmetric(a, b) == words


def test_decomposition_gives_each_parts_share_of_the_energy():
    text = figure_titles.decomposition({"M": 4.0, "M_s": 3.0, "M_n": 1.0})
    assert "symmetric part carries 75%" in text and "skew part 25%" in text


def test_examples_names_the_scores_of_the_structured_examples():
    scores = {
        kind: Scores(np.float64(s), np.float64(d))
        for kind, s, d in [
            ("gaussian", 0, 0),
            ("symmetric", 1, 0),
            ("skew", -1, 0),
            ("columns", 0, -0.8),
            ("rows", 0, 0.7),
        ]
    }
    text = figure_titles.examples(scores)
    assert "+1.00 symmetric, -1.00 skew" in text and "columns (-0.80)" in text and "rows (+0.70)" in text


def test_dominant_columns_states_the_excesses():
    norms = {"columns_over": 3, "rows_over": 1, "C": 12.0, "R": 0.5}
    assert figure_titles.dominant_columns(norms, -0.92) == (
        "3 columns and 1 row pass their threshold: C = 12 against R = 0.5, so directionality is -0.92"
    )


def test_roles_compares_the_median_stacks_and_the_authors():
    summary = pd.DataFrame(
        {
            "stack": ["encoder", "encoder", "decoder"],
            "symmetry_median": [0.4, 0.6, 0.1],
            "directionality_median": [0.0, 0.0, -0.2],
        }
    )
    reference = pd.DataFrame(
        {
            "role": ["encoder", "decoder"],
            "family": ["language", "language"],
            "symmetry_median": [0.7, 0.0],
            "directionality_median": [0.0, -0.3],
        }
    )
    text = figure_titles.roles(summary, reference)
    assert text.startswith("Encoder stacks are more symmetric than decoder stacks: median symmetry +0.50 against +0.10")
    assert "(3 stacks), +0.70 against +0.00 as reported by the paper" in text


def test_agreement_gives_the_median_absolute_differences():
    table = pd.DataFrame({"diff_symmetry": [0.1, -0.3, 0.2], "diff_directionality": [0.0, 0.5, -0.4]})
    assert figure_titles.agreement(table) == (
        "3 stacks also scored by the paper: median |ours - theirs| 0.20 in symmetry, 0.40 in directionality"
    )

"""Notebook 03's verdicts under its plan: the authors' language models counted by family, and the stacks scored here."""

import numpy as np
import pandas as pd
import pytest
from test_paper_comparison import stacks

from attnstruct import reference, stats
from attnstruct.analyses import paper_comparison, pretrained_ordering

AUTHORS = reference.reference_table()


def test_the_family_rows_are_the_language_rows_without_a_caveat_with_their_family():
    rows = pretrained_ordering.family_rows(AUTHORS)
    language = AUTHORS[AUTHORS.family == "language"]
    assert len(rows) == language.caveats.isna().sum() and rows.caveats.isna().all()
    assert list(rows.model_family) == [stats.model_family(m) for m in rows.model]


def test_the_family_effects_are_family_effects_decided_under_the_plan():
    decided = pretrained_ordering.family_effects(AUTHORS)
    rows = pretrained_ordering.family_rows(AUTHORS)
    for effect, score in zip(decided, ("symmetry", "directionality")):
        raw = stats.family_effect(
            rows, f"{score}_median", treated="encoder", control="decoder", claim=effect.claim, family="model_family"
        )
        assert (effect.estimate, effect.p_value, effect.n) == (raw.estimate, raw.p_value, raw.n)
        assert effect.unit == "family" and pretrained_ordering.PLAN.claim(effect.claim)
    assert [e.family for e in decided] == ["primary, Holm over 1 claim", "secondary, uncorrected"]


def test_the_family_test_fails_when_the_roles_are_swapped():
    swapped = AUTHORS.assign(role=AUTHORS.role.map({"encoder": "decoder", "decoder": "encoder"}))
    assert {e.verdict for e in pretrained_ordering.family_effects(swapped)} == {stats.DOES_NOT_HOLD}


def test_no_difference_between_roles_cannot_be_told():
    rng = np.random.default_rng(0)
    same = AUTHORS.assign(symmetry_median=rng.normal(0.3, 0.1, len(AUTHORS)))
    assert pretrained_ordering.family_effects(same)[0].verdict == stats.CANNOT_TELL


def test_every_verdict_of_the_notebook_is_a_claim_of_its_plan():
    summary = stacks([0.5, 0.45], [0.1, 0.05])
    decided = pretrained_ordering.effects(summary, AUTHORS)
    assert [e.claim for e in decided] == [c.name for c in pretrained_ordering.PLAN.claims]
    stack = pretrained_ordering.stack_effect(summary)
    assert stack.family == "secondary, uncorrected" and stack.p_value == paper_comparison.role_effect(summary).p_value
    assert pretrained_ordering.stack_effect(stacks([0.5], [])) is None


def test_the_families_are_named_and_counted_in_words():
    decided = pretrained_ordering.family_effects(AUTHORS)
    text = pretrained_ordering.describe_families(AUTHORS, decided)
    n_left_out = int(((AUTHORS.family == "language") & AUTHORS.caveats.notna()).sum())
    assert f"{n_left_out} rows with a caveat left out" in text and "bert" in text and "gpt2" in text
    assert all(e.sentence() in text for e in decided)
    table = pretrained_ordering.PLAN.table(pretrained_ordering.smallest(AUTHORS))
    assert bool(table.iloc[0]["reachable"]) and np.isnan(table.iloc[2]["smallest p"])
    assert isinstance(table, pd.DataFrame) and pytest.approx(table.iloc[0]["smallest p"]) == table.iloc[1]["smallest p"]


def test_the_sweep_counts_families_by_model_type_and_decides_under_its_plan():
    rows = [
        ("bert-a", "encoder", 0.50),
        ("bert-b", "encoder", 0.55),
        ("roberta", "encoder", 0.45),
        ("gpt2", "decoder", 0.05),
        ("llama-a", "decoder", 0.10),
        ("llama-b", "decoder", 0.12),
        ("t5", "encoder", 0.40),
        ("t5", "decoder", 0.08),
        ("t5", "cross", 0.90),
    ]
    summary = pd.DataFrame(rows, columns=["model", "stack", "symmetry_median"]).assign(directionality_median=0.0)
    types = {"bert-a": "bert", "bert-b": "bert", "roberta": "roberta", "gpt2": "gpt2", "t5": "t5"}
    table = pretrained_ordering.sweep_rows(summary, types)
    assert "cross" not in set(table["stack"]) and list(table.model_family) == [
        "bert",
        "bert",
        "roberta",
        "gpt2",
        "llama",
        "llama",
        "t5",
        "t5",
    ]
    decided = pretrained_ordering.sweep_effects(summary, types)
    assert [e.claim for e in decided] == [c.name for c in pretrained_ordering.SWEEP_PLAN.claims]
    assert decided[0].unit == "family" and decided[0].n == 3 and decided[2].unit == "stack" and decided[2].n == 4
    reach = pretrained_ordering.sweep_smallest(summary, types)
    assert reach[decided[0].claim] == stats.smallest_two_sample_p(3, 3) == decided[0].smallest
    assert reach[pretrained_ordering.STACK_CLAIM] == stats.smallest_two_sample_p(4, 4)
    assert pretrained_ordering.sweep_effects(summary[summary["stack"] == "encoder"], types) == []

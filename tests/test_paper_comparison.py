"""Ours against the authors' (notebooks 03 and 08): pairing, ranking, explanations, the share of pairs in the paper's
order (a description), and the ordering as a test through the one rule, with what few stacks can reach."""

import itertools

import numpy as np
import pandas as pd
import pytest

from attnstruct import stats
from attnstruct.analyses import paper_comparison as pc
from attnstruct.reference import reference_table
from attnstruct.report import prose


def summary_rows(rows):
    """A summary table like pretrained_scores.stack_summary's from (model, stack, symmetry, directionality) tuples."""
    out = []
    for model, stack, sym, direc in rows:
        out.append(
            {
                "model": model,
                "stack": stack,
                "role": stack,
                "n_params": 1e8,
                "n_layers": 4,
                "symmetry_median": sym,
                "symmetry_q25": sym - 0.1,
                "symmetry_q75": sym + 0.1,
                "directionality_median": direc,
                "directionality_q25": direc - 0.1,
                "directionality_q75": direc + 0.1,
            }
        )
    return pd.DataFrame(out)


REFERENCE = pd.DataFrame(
    {
        "family": ["language", "language", "audio", "audio", "language"],
        "model": ["enc/a", "dec/b", "mus/c", "mus/c", "gqa/d"],
        "role": ["encoder", "decoder", "encoder", "decoder", "decoder"],
        "symmetry_median": [0.5, 0.1, 0.3, 0.0, 0.0],
        "directionality_median": [-0.1, -0.5, -0.05, -0.55, -0.6],
        "caveats": [np.nan, np.nan, np.nan, "cross_attention_not_self", "gqa_head_pairing_suspect"],
    }
)


def test_agreement_pairs_model_and_stack_and_takes_differences():
    ours = summary_rows([("enc/a", "encoder", 0.45, -0.2), ("dec/b", "decoder", 0.1, -0.5), ("new/x", "encoder", 0, 0)])
    table = pc.agreement(ours, REFERENCE)
    assert list(table["model"]) == ["dec/b", "enc/a"]
    row = table.set_index("model").loc["enc/a"]
    assert row["diff_symmetry"] == pytest.approx(-0.05) and row["diff_directionality"] == pytest.approx(-0.1)
    assert row["domain"] == "language" and row["caveats"] == ""


def test_cross_attention_reported_as_decoder_is_paired_with_our_cross_stack():
    ours = summary_rows(
        [("mus/c", "encoder", 0.3, 0.0), ("mus/c", "decoder", 0.2, -0.1), ("mus/c", "cross", 0.01, -0.5)]
    )
    table = pc.agreement(ours, REFERENCE)
    assert sorted(table["stack"]) == ["cross", "encoder"]
    cross = table[table["stack"] == "cross"].iloc[0]
    assert cross["paper_symmetry"] == 0.0 and "cross-attention" in pc.explain(cross["caveats"])


def test_largest_disagreements_rank_by_either_score_and_explain():
    ours = summary_rows(
        [("enc/a", "encoder", 0.5, -0.1), ("dec/b", "decoder", 0.1, 0.2), ("gqa/d", "decoder", 0.3, -0.6)]
    )
    worst = pc.largest_disagreements(pc.agreement(ours, REFERENCE), n=2)
    assert list(worst["model"]) == ["dec/b", "gqa/d"]  # 0.7 in directionality, then 0.3 in symmetry
    assert worst.loc[0, "explanation"] == "none known"
    assert "h mod n_kv" in worst.loc[1, "explanation"]


def test_ordering_probability_against_brute_force():
    rng = np.random.default_rng(0)
    enc, dec = rng.uniform(size=5).round(1), rng.uniform(size=4).round(1)
    rows = [(f"e{i}", "encoder", s, 0.0) for i, s in enumerate(enc)] + [
        (f"d{i}", "decoder", s, 0.0) for i, s in enumerate(dec)
    ]
    pairs = list(itertools.product(enc, dec))
    expected = sum(1.0 if e > d else 0.5 if e == d else 0.0 for e, d in pairs) / len(pairs)
    assert pc.ordering_probability(summary_rows(rows)) == pytest.approx(expected)
    assert np.isnan(pc.ordering_probability(summary_rows(rows[:5])))


def test_every_caveat_of_the_reference_table_has_an_explanation():
    caveats = {c for cell in reference_table()["caveats"].dropna() for c in cell.split(";")}
    assert caveats <= set(pc.CAVEAT_EXPLANATIONS)


def test_reported_vision_groups():
    reported = pc.reported_vision(reference_table())
    assert reported.caveats.isna().all() and (reported.family == "vision").all()
    igpt = reported[reported.group == "autoregressive (iGPT)"]
    assert len(igpt) == 3 and (igpt.role == "decoder").all() and (igpt.objective == "next-patch").all()
    assert (reported[reported.objective.isin(["classify", "masked"])].role == "encoder").all()
    assert "other" not in set(reported.group)


def test_reported_group_medians_are_the_authors_language_rows():
    table = reference_table()
    groups = pc.reported_group_medians(table).set_index("stack")
    assert list(groups.index) == ["encoder", "decoder"]
    # docs/paper-notes.md, section 3.1 (authors' result files): all language rows, then without caveats
    assert groups.loc["encoder", "n"] == 38 and round(groups.loc["encoder", "symmetry_median"], 2) == 0.46
    assert groups.loc["decoder", "n"] == 52 and round(groups.loc["decoder", "symmetry_median"], 2) == 0.07
    assert round(groups.loc["encoder", "directionality_median"], 2) == -0.06
    assert round(groups.loc["decoder", "directionality_median"], 2) == -0.23
    clean = pc.reported_group_medians(table, clean=True).set_index("stack")
    assert clean.loc["encoder", "n"] == 30 and round(clean.loc["encoder", "symmetry_median"], 2) == 0.49
    assert clean.loc["decoder", "n"] == 35 and round(clean.loc["decoder", "symmetry_median"], 2) == 0.11
    language = table[table.family == "language"]
    by_hand = language[language.role == "decoder"].symmetry_median
    assert groups.loc["decoder", "symmetry_min"] == by_hand.min()
    assert groups.loc["decoder", "symmetry_max"] == by_hand.max()


def stacks(encoders, decoders, cross=()):
    """A summary of encoder, decoder and cross stacks with the given median symmetries (directionality 0)."""
    rows = [(f"e{i}", "encoder", s, 0.0) for i, s in enumerate(encoders)]
    rows += [(f"d{i}", "decoder", s, 0.0) for i, s in enumerate(decoders)]
    rows += [(f"c{i}", "cross", s, 0.0) for i, s in enumerate(cross)]
    return summary_rows(rows)


def test_role_effect_is_the_two_sample_effect_of_the_self_attention_stacks():
    summary = stacks([0.5, 0.45], [0.1, 0.05], cross=[0.9])
    effect = pc.role_effect(summary)
    expected = stats.two_sample_effect(
        [0.5, 0.45], [0.1, 0.05], claim="encoder minus decoder stacks, median symmetry over layers", unit="stack"
    )
    assert effect == expected


def test_role_effect_of_two_stacks_per_role_cannot_tell():
    effect = pc.role_effect(stacks([0.5, 0.45], [0.1, 0.05]))
    assert effect.verdict == stats.CANNOT_TELL and "smallest attainable p" in effect.reason


def test_role_effect_of_many_stacks_holds_when_encoders_are_more_symmetric():
    rng = np.random.default_rng(0)
    effect = pc.role_effect(stacks(0.5 + 0.02 * rng.standard_normal(6), 0.1 + 0.02 * rng.standard_normal(6)))
    assert effect.verdict == stats.HOLDS


def test_role_effect_of_many_stacks_does_not_hold_the_other_way_round():
    rng = np.random.default_rng(0)
    effect = pc.role_effect(stacks(0.1 + 0.02 * rng.standard_normal(6), 0.5 + 0.02 * rng.standard_normal(6)))
    assert effect.verdict == stats.DOES_NOT_HOLD


def test_role_effect_needs_a_stack_of_each_role():
    assert pc.role_effect(stacks([0.5, 0.4], [], cross=[0.1])) is None


def test_stack_reach_is_the_balanced_reach_of_the_encoder_against_the_decoder_stacks():
    few = pc.stack_reach(stacks([0.5, 0.4], [0.1, 0.0]))
    assert few == stats.design_reach(2, control=2, balanced=True, unit="encoder stack", control_unit="decoder stack")
    assert (few.reachable, few.needed) == (False, "4 of each")
    many = pc.stack_reach(stacks([0.5] * 4, [0.1] * 5))
    assert (many.smallest, many.reachable) == ("0.00794", True)
    with pytest.raises(ValueError, match="an encoder and a decoder stack, got 1 and 0"):
        pc.stack_reach(stacks([0.5], []))


def test_the_roles_beside_the_paper_compare_the_median_stacks_and_the_authors():
    summary = pd.DataFrame(
        {
            "stack": ["encoder", "encoder", "decoder"],
            "symmetry_median": [0.4, 0.6, 0.1],
            "directionality_median": [0.0, 0.0, -0.2],
        }
    )
    reference_rows = pd.DataFrame(
        {
            "role": ["encoder", "decoder"],
            "family": ["language", "language"],
            "symmetry_median": [0.7, 0.0],
            "directionality_median": [0.0, -0.3],
        }
    )
    facts = pc.roles_beside_paper(summary, reference_rows)
    assert (facts.both_roles, facts.compared) == (True, prose.compared(1.0, 0.0))
    assert (facts.encoders, facts.decoders, facts.stacks) == ("+0.50", "+0.10", "3 stacks")
    assert (facts.paper_encoders, facts.paper_decoders) == ("+0.70", "+0.00")


@pytest.mark.parametrize(
    "encoder, decoder, compared",
    [(0.1, 0.4, "less symmetric than"), (0.301, 0.299, "as symmetric as")],
)
def test_the_roles_are_compared_at_the_two_decimals_shown(encoder, decoder, compared):
    summary = pd.DataFrame(
        {"stack": ["encoder", "decoder"], "symmetry_median": [encoder, decoder], "directionality_median": [0.0, 0.0]}
    )
    assert pc.roles_beside_paper(summary, REFERENCE).compared == compared


def test_with_one_role_the_roles_beside_the_paper_give_its_stacks_median():
    summary = pd.DataFrame({"stack": ["decoder"], "symmetry_median": [0.2], "directionality_median": [0.0]})
    facts = pc.roles_beside_paper(summary, REFERENCE)
    assert (facts.both_roles, facts.present, facts.present_median) == (False, "1 decoder stack", "+0.20")


def test_vision_encoder_stacks_are_a_group_of_their_own_not_encoders():
    summary = summary_rows([("e", "encoder", 0.5, 0.0), ("d", "decoder", 0.1, -0.5), ("v", "encoder", 0.2, 0.0)])
    summary.loc[2, "role"] = "vision encoder"
    groups = pc.group_medians(summary).set_index("stack")
    assert list(groups.index) == ["encoder", "decoder"] and groups.loc["encoder", "n"] == 1
    assert groups.loc["encoder", "symmetry_median"] == 0.5
    assert [len(v) for v in pc.role_values(summary)] == [1, 1] and pc.ordering_probability(summary) == 1.0
    every = pc.group_medians(summary, groups=pc.GROUPS).set_index("stack")
    assert list(every.index) == ["encoder", "decoder", "vision encoder"]
    assert every.loc["vision encoder", "n"] == 1 and every.loc["vision encoder", "symmetry_median"] == 0.2

"""Notebook 08's analysis (analyses.nb08_model_sweep): the list of models, its plan and verdicts counted by model
family, the facts its sentences and titles state, the caveat groups and the dataset."""

import json

import pandas as pd
import pytest
import xarray as xr

from attnstruct import stats
from attnstruct.analyses import nb08_model_sweep as sweep_study
from attnstruct.analyses import paper_comparison, pretrained_ordering, pretrained_scores
from attnstruct.checkpoints import sweep
from attnstruct.checkpoints.sweep import SweepResult
from attnstruct.report import prose


def test_a_list_of_models_is_taken_as_given():
    assert sweep_study.model_names(["org/a", "/some/path"]) == ["org/a", "/some/path"]


def test_paper_is_the_authors_list():
    assert sweep_study.model_names("paper") == sweep.read_model_list("paper")


def test_a_zoo_selection_must_have_been_fetched(tmp_path):
    with pytest.raises(RuntimeError, match="run: attnstruct fetch-models minilm-l6 smollm2-135m whisper-base$"):
        sweep_study.model_names("core", cache_dir=tmp_path)


def test_the_run_outcome_counts_what_was_scored_skipped_and_failed():
    run = SweepResult(scored=["a"], skipped=["b", "c"], failures=[{"model": "d", "kind": "gated", "reason": "x"}])
    assert sweep_study.run_outcome(run, ["a", "b", "c", "d"], "cpu") == sweep_study.RunFacts(
        "4 models", "cpu", "1", "2", "1"
    )
    assert sweep_study.failures(run).values.tolist() == [["d", "gated", "x"]]
    assert list(sweep_study.failures(SweepResult()).columns) == ["model", "kind", "reason"]


def test_no_scored_model_points_to_the_failures(tmp_path):
    with pytest.raises(RuntimeError, match="no model could be scored; see .*failures.csv"):
        sweep_study.load_scores(SweepResult(), tmp_path)


@pytest.mark.parametrize(
    "caveats, group",
    [
        ("", "no known caveat"),
        ("gqa_head_pairing_suspect", "gqa_head_pairing_suspect"),
        ("fused_qkv_branch_suspect", "fused_qkv_branch_suspect"),
        ("looks_random_init", "other caveat"),
        ("gqa_head_pairing_suspect;looks_random_init", "other caveat"),
    ],
)
def test_caveat_groups(caveats, group):
    assert sweep_study.caveat_group(caveats) == group


def test_with_caveat_groups_adds_a_column_with_a_colour_for_each():
    from attnstruct.report import plotting

    table = sweep_study.with_caveat_groups(pd.DataFrame({"caveats": ["", "scored_random_init"]}))
    assert table["caveat_group"].tolist() == ["no known caveat", "other caveat"]
    assert set(table["caveat_group"]) <= set(plotting.CAVEAT_COLORS)


def test_the_results_dataset_keeps_the_scores_and_records_the_run():
    scores = xr.Dataset({"symmetry": ("model", [0.5])}, coords={"model": ["m"]}, attrs={"scored_matrix": "W_qk"})
    ds = sweep_study.results_dataset(scores, parameters={"models": "core"}, failures=2)
    xr.testing.assert_identical(ds.drop_attrs(), scores.drop_attrs())
    assert json.loads(ds.attrs["parameters"]) == {"models": "core"}
    assert (
        ds.attrs["scored_matrix"] == "W_qk" and ds.attrs["failures"] == 2 and scores.attrs == {"scored_matrix": "W_qk"}
    )


def test_the_sweep_counts_families_of_encoder_only_and_decoder_only_models_and_decides_under_its_plan():
    rows = [
        ("bert-a", "encoder", "encoder", 0.50),
        ("bert-b", "encoder", "encoder", 0.55),
        ("roberta", "encoder", "encoder", 0.45),
        ("gpt2", "decoder", "decoder", 0.05),
        ("llama-a", "decoder", "decoder", 0.10),
        ("llama-b", "decoder", "decoder", 0.12),
        ("t5", "encoder", "encoder-decoder", 0.40),
        ("t5", "decoder", "encoder-decoder", 0.08),
        ("t5", "cross", "encoder-decoder", 0.90),
        ("vit", "encoder", "vision encoder", 0.30),
    ]
    summary = pd.DataFrame(rows, columns=["model", "stack", "role", "symmetry_median"]).assign(
        directionality_median=0.0
    )
    types = {"bert-a": "bert", "bert-b": "bert", "roberta": "roberta", "gpt2": "gpt2", "t5": "t5", "vit": "vit"}
    table = sweep_study.rows_by_family(summary, types)
    assert list(table.model_family) == ["bert", "bert", "roberta", "gpt2", "llama", "llama"]
    decided = sweep_study.effects(summary, types)
    assert [e.claim for e in decided] == [c.name for c in sweep_study.PLAN.claims]
    assert decided[0].unit == "family" and decided[0].n == 2 and decided[2].unit == "stack" and decided[2].n == 4
    reach = sweep_study.smallest_p_by_claim(summary, types)
    assert reach[decided[0].claim] == stats.smallest_two_sample_p(2, 2) == decided[0].smallest
    assert reach[pretrained_ordering.STACK_CLAIM] == stats.smallest_two_sample_p(4, 4)
    assert sweep_study.effects(summary[summary["stack"] == "encoder"], types) == []


def test_the_family_design_names_the_families_and_what_their_test_can_reach():
    rows = [("b", "bert"), ("m", "mpnet"), ("a", "albert"), ("l", "llama"), ("q", "qwen2"), ("g", "gemma3")]
    roles = ["encoder"] * 3 + ["decoder"] * 3
    summary = pd.DataFrame({"model": [m for m, _ in rows], "stack": roles, "role": roles, "symmetry_median": 0.0})
    design = sweep_study.family_design(summary, dict(rows))
    listed = [prose.listing(n, fmt=lambda v, _: v) for n in (["albert", "bert", "mpnet"], ["gemma3", "llama", "qwen2"])]
    assert design.tested and [design.encoders, design.decoders] == listed
    assert design.smallest == "0.05" and not design.reachable and design.test == "permutation"
    more = pd.concat([summary, summary.iloc[[3]].assign(model="i")])
    assert sweep_study.family_design(more, dict(rows) | {"i": "gpt2"}).reachable
    assert not sweep_study.family_design(summary.iloc[:3], dict(rows)).tested


def test_the_non_commercial_checkpoints_are_added_only_when_fetched(monkeypatch):
    from attnstruct.checkpoints import zoo

    monkeypatch.setattr(zoo, "is_fetched", lambda name, cache=None: name != "iglm-s")
    permissive = [e.name for e in zoo.entries("permissive")]
    names = sweep_study.model_names("permissive", also_if_fetched="non-commercial")
    assert names == [*permissive, "swin-b-sdxl-detector", "iglm"]
    assert sweep_study.model_names("core", also_if_fetched=None) == [e.name for e in zoo.entries("core")]


def test_the_licence_use_names_the_non_commercial_checkpoints_of_a_sweep():
    used = pretrained_scores.licence_use(["minilm-l6", "iglm", "org/model", "swin-b-sdxl-detector"])
    assert used.non_commercial and used.models == prose.listing(["iglm", "swin-b-sdxl-detector"], fmt=lambda v, _: v)
    assert not pretrained_scores.licence_use(["minilm-l6", "org/model"]).non_commercial
    summary = pd.DataFrame({"model": ["iglm", "minilm-l6", "org/model"]})
    assert pretrained_scores.with_licences(summary)["non_commercial"].tolist() == [True, False, False]


def summary_of(encoders, decoders, directionality=0.0):
    """A stack summary of encoder and decoder stacks with the given median symmetries, min = max = median."""
    rows = [(f"e{i}", "encoder", v) for i, v in enumerate(encoders)] + [
        (f"d{i}", "decoder", v) for i, v in enumerate(decoders)
    ]
    return pd.DataFrame(rows, columns=["model", "stack", "symmetry_median"]).assign(
        directionality_median=directionality
    )


def test_the_role_groups_give_each_roles_median_and_range_over_its_stacks():
    encoders, decoders = sweep_study.role_groups(summary_of([0.4, 0.6, 0.5], [0.1]))
    assert (encoders.stacks, encoders.symmetry) == ("3 encoder stacks", "+0.50")
    assert (encoders.symmetry_low, encoders.symmetry_high) == ("+0.40", "+0.60")
    assert (decoders.stacks, decoders.symmetry, decoders.directionality) == ("1 decoder stack", "+0.10", "+0.00")
    assert (decoders.symmetry_low, decoders.symmetry_high) == ("+0.10", "+0.10")


def test_a_role_without_stacks_gets_no_facts():
    assert [g.stacks for g in sweep_study.role_groups(summary_of([0.4, 0.6], []))] == ["2 encoder stacks"]


def test_the_pair_order_is_the_share_of_pairs_in_the_papers_order():
    order = sweep_study.pair_order(summary_of([0.4, 0.6], [0.5, 0.1]))
    assert (order.has_pairs, order.more_symmetric, order.less_column_dominant) == (True, "75%", "50%")
    assert not sweep_study.pair_order(summary_of([0.4], [])).has_pairs


def agreement_table(caveats, diff_symmetry, diff_directionality):
    return pd.DataFrame(
        {"caveats": caveats, "diff_symmetry": diff_symmetry, "diff_directionality": diff_directionality}
    )


def test_the_paper_gaps_split_the_stacks_with_and_without_a_caveat():
    table = agreement_table(["", "", "gqa_head_pairing_suspect"], [0.1, -0.3, 0.9], [0.0, 0.2, -0.4])
    clean, caveat = sweep_study.paper_gaps(table)
    assert clean == sweep_study.PaperGapFacts("without a known caveat", "2 stacks", "0.200", "0.100")
    assert caveat == sweep_study.PaperGapFacts("with a caveat", "1 stack", "0.900", "0.400")
    assert sweep_study.paper_gaps(agreement_table([], [], [])) == []


def test_the_agreement_gaps_are_the_median_absolute_differences_over_every_stack():
    table = agreement_table(["", "x", ""], [0.1, -0.3, 0.2], [0.0, 0.5, -0.4])
    assert sweep_study.agreement_gaps(table) == sweep_study.AgreementFacts("3 stacks", "0.20", "0.40")


def test_the_stack_test_is_the_effects_line():
    summary = summary_of([0.5, 0.45], [0.1, 0.05])
    facts = sweep_study.stack_test(summary, effect=None)
    assert facts.tested and facts.test == prose.effect_line(paper_comparison.role_effect(summary))
    alone = sweep_study.stack_test(summary_of([0.5], []), effect=None)
    assert (alone.tested, alone.test) == (False, "")

"""Notebook 07's analysis: the predictions and their verdicts, the learning criterion, the facts its sentences and
titles state, and the tables behind the figures and the dataset, on made-up runs with known answers."""

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import xarray as xr

from attnstruct import notebooks, reference, stats
from attnstruct.analyses import nb07_vision as vision_study
from attnstruct.analyses import paper_comparison
from attnstruct.checkpoints import tables
from attnstruct.checkpoints.extract import AttentionBlock
from attnstruct.report import plotting
from attnstruct.stats import nulls
from attnstruct.tasks import images, vision, vision_config

SMALL_NULL = dict(d_model=16, n_heads=2, n_layers=2, n_draws=100)
UP = {  # every prediction on its predicted side, five seeds
    "classify": [0.0] * 5,
    "classify-mean": [0.6] * 5,
    "masked": [0.6, 0.5, 0.7, 0.6, 0.55],
    "next-patch": [0.0, 0.02, -0.01, 0.01, 0.0],
}
COLUMN = {"classify": [0.0] * 5, "classify-mean": [0.0] * 5, "masked": [0.9] * 5, "next-patch": [-0.9] * 5}


def summary_of(values, directionality=None, val_loss=None):
    """A final_summary-like table: ``values`` objective -> per-seed symmetry (median and last layer alike)."""
    rows = []
    for o, per_seed in values.items():
        for s, v in enumerate(per_seed):
            d = directionality[o][s] if directionality else 0.0
            rows.append(
                {
                    "objective": o,
                    "seed": s,
                    "causal": vision_config.CAUSAL[o],
                    "symmetry_median": v,
                    "symmetry_q25": v - 0.1,
                    "symmetry_q75": v + 0.1,
                    "symmetry_last": v,
                    "directionality_median": d,
                    "directionality_q25": d - 0.1,
                    "directionality_q75": d + 0.1,
                    "directionality_last": d,
                    "val_loss": val_loss[o][s] if val_loss else 0.5,
                    "val_accuracy": 0.9 if o in vision.CLASSIFIERS else math.nan,
                }
            )
    return pd.DataFrame(rows)


def learning_of(val_loss, context_free=1.0, margin=0.1):
    """The learning table of runs with these final validation losses (objective -> per seed)."""
    summary = summary_of({o: [0.0] * len(v) for o, v in val_loss.items()}, val_loss=val_loss)
    return vision_study.learning_table(summary, {o: context_free for o in val_loss}, margin)


# ---------------------------------------------------------------------------------------------- the predictions


def test_compare_objectives_follows_the_predictions_and_the_seeds():
    result = vision_study.compare_objectives(summary_of(UP, COLUMN), **SMALL_NULL)
    assert [e.claim for e in result.effects] == [p.claim for p in vision_study.PREDICTIONS]
    assert all(e.verdict == stats.HOLDS for e in result.effects) and result.overall == stats.HOLDS
    assert all(e.null is not None and e.null.outside for e in result.effects)
    # the same values the other way round: a clear effect against the prediction
    down = {o: [-v for v in vs] for o, vs in UP.items()}
    flipped = {o: [-v for v in vs] for o, vs in COLUMN.items()}
    result = vision_study.compare_objectives(summary_of(down, flipped), **SMALL_NULL)
    assert result.overall == stats.DOES_NOT_HOLD and {e.verdict for e in result.effects} == {stats.DOES_NOT_HOLD}


def test_three_seeds_cannot_reach_a_verdict():
    three = {o: vs[:3] for o, vs in UP.items()}
    result = vision_study.compare_objectives(summary_of(three, {o: vs[:3] for o, vs in COLUMN.items()}), **SMALL_NULL)
    assert result.overall == stats.CANNOT_TELL and result.n_seeds == 3
    assert all("smallest attainable p is 0.125" in e.reason for e in result.effects)


def test_missing_objectives_or_seeds_leave_predictions_untested():
    result = vision_study.compare_objectives(summary_of({o: UP[o] for o in ("masked", "next-patch")}), **SMALL_NULL)
    predictions = vision_study.PREDICTIONS
    assert [e.claim for e in result.effects] == [predictions[0].claim, predictions[3].claim]
    assert len(result.untested) == 2 and "classify-mean" in result.untested[0]
    result = vision_study.compare_objectives(summary_of({o: vs[:1] for o, vs in UP.items()}), **SMALL_NULL)
    assert not result.effects and result.overall == stats.CANNOT_TELL and len(result.untested) == 4
    assert result.table().empty


def test_the_overall_verdict_is_the_primary_claims_whatever_a_secondary_says():
    # three predictions on their side and one secondary clearly against it: the summary follows the primary
    against = {**COLUMN, "masked": [-0.9] * 5, "next-patch": [0.9] * 5}
    result = vision_study.compare_objectives(summary_of(UP, against), **SMALL_NULL)
    assert [e.verdict for e in result.effects] == [stats.HOLDS] * 3 + [stats.DOES_NOT_HOLD]
    assert result.overall == stats.primary_verdict(result.effects) == stats.HOLDS


def test_predictions_resting_on_runs_that_did_not_learn_get_no_verdict():
    learned = {"classify": False, "classify-mean": True, "masked": True, "next-patch": True}
    result = vision_study.compare_objectives(summary_of(UP, COLUMN), learned=learned, **SMALL_NULL)
    verdicts = {e.claim: (e.verdict, e.reason) for e in result.effects}
    assert verdicts["classify-mean minus classify, symmetry (last layer)"] == (stats.CANNOT_TELL, stats.NOT_LEARNED)
    assert [v for v, _ in verdicts.values()].count(stats.HOLDS) == 3
    assert result.overall == stats.HOLDS and result.learned == learned  # the primary rests on learned runs


def test_learned_must_say_so_for_every_objective():
    with pytest.raises(ValueError, match="missing \\['next-patch'\\]"):
        vision_study.compare_objectives(
            summary_of(UP, COLUMN), learned={"classify": True, "classify-mean": True, "masked": True}, **SMALL_NULL
        )


def test_the_predictions_treat_classify_by_its_last_layer_only():
    claims = {(p.treated, p.baseline, p.place) for p in vision_study.PREDICTIONS if p.score == "symmetry"}
    assert ("classify-mean", "classify", "last") in claims
    assert not any("classify" in (t, b) and place == "median" for t, b, place in claims)
    medians = [p for p in vision_study.PREDICTIONS if p.score == "symmetry" and p.place == "median"]
    assert all(vision_config.CAUSAL[p.baseline] for p in medians)


def test_resting_on_lists_the_predictions_that_compare_an_objective():
    claims = [p.claim for p in vision_study.predictions_resting_on(["classify"])]
    assert claims == ["classify-mean minus classify, symmetry (last layer)"]
    assert len(vision_study.predictions_resting_on(["next-patch"])) == 3


def test_null_table_places_each_seed_in_the_null():
    pools = vision_study.null_pools(16, 2, 2, n_draws=100)
    assert set(pools) == {(s, p) for s in vision_study.SCORES for p in vision_study.PLACES}
    np.testing.assert_array_equal(
        pools["symmetry", "median"], nulls.null_median_over_layers("symmetry", 16, 2, 2, n_draws=100)
    )
    table = vision_study.null_table(summary_of({"masked": [0.9, 0.8], "next-patch": [-0.9, 0.0]}), pools)
    row = table[(table.objective == "masked") & (table.score == "symmetry") & (table.place == "median")].iloc[0]
    assert row.percentile_low == 100 and row.n_outside == 2 and row.n_above == 2 and row.n == 2
    row = table[(table.objective == "next-patch") & (table.score == "symmetry") & (table.place == "last")].iloc[0]
    assert row.n_outside == 1 and row.n_above == 0 and row.percentile_low == 0


# ---------------------------------------------------------------------------------------------- did the runs learn


def made_up_images(labels, pixels):
    """An ImageData whose training labels and 8x8 images are given (the validation set is a copy)."""
    images_ = torch.as_tensor(pixels, dtype=torch.float32)
    labels_ = torch.as_tensor(labels)
    return images.ImageData(images_, labels_, images_, labels_, "made up")


def test_context_free_loss_of_the_classifiers_is_the_entropy_of_the_labels():
    data = made_up_images([0, 0, 1, 1], torch.zeros(4, 8, 8))
    assert vision_study.context_free_loss(data, "classify", 4) == pytest.approx(math.log(2))
    data = made_up_images([3, 3, 3, 3], torch.zeros(4, 8, 8))
    assert vision_study.context_free_loss(data, "classify-mean", 4) == 0


def test_context_free_loss_of_the_pixel_objectives_is_the_entropy_of_the_grey_levels():
    pixels = torch.zeros(2, 8, 8)
    pixels[:, :, :2] = 1.0  # a quarter of the pixels at the top level, the rest at 0
    data = made_up_images([0, 1], pixels)
    expected = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    for objective in ("masked", "next-patch"):
        assert vision_study.context_free_loss(data, objective, 4) == pytest.approx(expected)


def test_uniform_loss_is_the_log_of_the_number_of_choices():
    assert vision_study.uniform_loss("classify", 4) == pytest.approx(math.log(10))
    assert vision_study.uniform_loss("next-patch", 4) == pytest.approx(math.log(4))


def test_a_run_learned_when_its_loss_lies_the_margin_below_the_context_free_loss():
    learning = learning_of({"masked": [0.5, 0.89, 0.91, 1.2, math.nan]})
    assert learning.learned.tolist() == [True, True, False, False, False]
    assert learning.threshold.tolist() == pytest.approx([0.9] * 5)
    assert learning.gain.iloc[0] == pytest.approx(0.5)


def test_an_objective_learned_when_every_seed_learned():
    learning = learning_of({"masked": [0.5, 0.5], "next-patch": [0.5, 0.95]})
    assert vision_study.learned_objectives(learning) == {"masked": True, "next-patch": False}


def test_thresholds_per_objective():
    learning = vision_study.learning_table(
        summary_of({"classify": [0, 0], "masked": [0, 0]}), {"classify": 2.0, "masked": 1.0}, margin=0.25
    )
    table = vision_study.learning_thresholds(learning)
    assert table.threshold.to_dict() == {"classify": 1.5, "masked": 0.75}


def test_learning_table_needs_a_context_free_loss_for_every_objective():
    with pytest.raises(ValueError, match="no context-free loss for next-patch"):
        vision_study.learning_table(summary_of({"masked": [0], "next-patch": [0]}), {"masked": 1.0})


# ---------------------------------------------------------------------------------------------- facts


def test_learning_by_objective_gives_the_criterion_and_the_classifiers_accuracy():
    (classify,) = vision_study.learning_by_objective(learning_of({"classify": [0.5, 0.95]}), levels=4)
    assert (classify.context_free, classify.threshold, classify.margin) == ("1.00", "0.90", "10%")
    assert (classify.met, classify.seeds, classify.classifier) == ("1", "2 seeds", True)
    assert (classify.accuracy, classify.chance, classify.uniform) == ("90%", "10%", "2.30")


def test_seed_losses_say_per_seed_whether_the_criterion_is_met():
    runs = vision_study.seed_losses(learning_of({"classify": [0.5, 0.95]}), "classify")
    assert [(r.loss, r.seed, r.met) for r in runs] == [("0.50", "0", "met"), ("0.95", "1", "not met")]


def test_learning_gate_names_the_predictions_left_without_a_verdict():
    gate = vision_study.learning_gate({"classify": False, "classify-mean": True})
    assert not gate.all_learned and gate.failed == "`classify`" and gate.them == "it"
    assert gate.claims == "classify-mean minus classify, symmetry (last layer)" and gate.any_claims
    assert (gate.verdict, gate.reason) == (stats.CANNOT_TELL, stats.NOT_LEARNED)
    assert vision_study.learning_gate({"masked": True, "next-patch": True}).all_learned


def test_overall_verdict_counts_the_verdicts_and_the_runs_that_did_not_learn():
    learned = {"classify": False, "classify-mean": True, "masked": True, "next-patch": True}
    result = vision_study.compare_objectives(summary_of(UP, COLUMN), learned=learned, **SMALL_NULL)
    facts = vision_study.overall_verdict(result)
    assert facts.verdict == stats.HOLDS and facts.primary == vision_study.PRIMARY
    assert (facts.tested, facts.held, facts.failed, facts.undecided, facts.unlearned) == ("4", "3", "0", "1", "1")
    assert facts.any_unlearned


def test_unpredicted_is_a_description_without_a_verdict():
    (facts,) = vision_study.unpredicted(summary_of({"classify": [0.1, 0.3], "masked": [0.2, 0.2]}))
    assert (facts.other, facts.below, facts.seeds, facts.difference) == ("masked", "1", "2 seeds", "+0.00")
    assert not any(verdict in str(facts) for verdict in stats.VERDICTS)
    assert vision_study.unpredicted(summary_of({"masked": [0.2]})) == []


def test_predictions_declared_give_each_prediction_its_sign():
    facts = vision_study.predictions_declared()
    assert [f.claim for f in facts] == [p.claim for p in vision_study.PREDICTIONS]
    assert [f.sign for f in facts] == ["positive", "positive", "positive", "negative"]


def test_the_paper_numbers_come_from_the_reference_table():
    facts = vision_study.reported_facts(paper_comparison.reported_vision(reference.reference_table()))
    # docs/paper-notes.md, section 3.2
    assert (facts.encoders, facts.supervised, facts.masked) == ("+0.15 to +0.52", "+0.15 to +0.52", "+0.19 to +0.40")
    assert (facts.igpt, facts.igpt_directionality) == ("+0.11 to +0.18", "-0.14 to -0.08")


def test_local_facts_without_checkpoints():
    assert not vision_study.local_facts(pd.DataFrame()).any


def test_against_null_places_each_objectives_seeds_in_the_null():
    pools = vision_study.null_pools(16, 2, 2, n_draws=100)
    table = vision_study.null_table(summary_of({"masked": [0.9, 0.8], "next-patch": [-0.9, 0.0]}), pools)
    masked, _ = vision_study.against_null(table)
    assert (masked.objective, masked.outside, masked.n, masked.above) == ("masked", "2", "2", "2")
    assert (masked.values, masked.seeds, masked.percentiles) == ("+0.80 to +0.90", "2 seeds", "100")


def test_examples_shown_count_the_patches_and_the_masked_ones():
    masked = np.zeros((4, 4))
    masked[:2, :2] = np.nan  # one 2x2 patch
    example = SimpleNamespace(images=np.zeros((8, 4, 4)), panels={"masked input": masked}, order=np.zeros((2, 2)))
    facts = vision_study.examples_shown(example, 2, 4)
    assert (facts.images, facts.patches, facts.patch_size, facts.masked, facts.levels) == (
        "8 training digits",
        "4 patches",
        "2x2",
        "1",
        "4",
    )


def toy_summary(seeds=5):
    """A final summary: masked above next-patch in every seed but the first, and a classifier."""
    rows = []
    for seed in range(seeds):
        for objective, value in (("masked", 0.3), ("next-patch", 0.1), ("classify", 0.0), ("classify-mean", 0.2)):
            value = 0.5 if (objective, seed) == ("next-patch", 0) else value
            rows.append({"objective": objective, "seed": seed, "symmetry_median": value, "symmetry_last": value})
    return pd.DataFrame(rows)


def test_primary_ordering_counts_the_seeds_on_the_predicted_side():
    facts = vision_study.primary_ordering(toy_summary())
    assert facts.can_tell and (facts.treated, facts.direction, facts.baseline) == ("masked", "above", "next-patch")
    assert (facts.agreeing, facts.seeds, facts.place) == ("4", "5 seeds", "median over layers")
    # means over seeds, whose difference is the paired verdict's estimate (next-patch's seed 0 ends at +0.50)
    assert "masked +0.30, next-patch +0.18" in facts.ends


def test_last_layer_ordering_reads_classify_mean_against_classify():
    facts = vision_study.last_layer_ordering(toy_summary())
    assert (facts.treated, facts.baseline, facts.place, facts.agreeing) == (
        "classify-mean",
        "classify",
        "last layer",
        "5",
    )


def test_an_ordering_of_too_few_seeds_or_unlearned_runs_says_why_it_cannot_tell():
    few = vision_study.primary_ordering(toy_summary(seeds=2))
    assert not few.can_tell and few.reason == "2 seeds, too few to compare"
    assert vision_study.primary_ordering(toy_summary(), learned=False).reason == stats.NOT_LEARNED


def test_beside_paper_gives_the_span_of_ours_and_theirs():
    facts = vision_study.beside_paper(toy_summary(), pd.DataFrame({"symmetry_median": [0.1, 0.4]}))
    assert (facts.runs, facts.models, facts.ours, facts.theirs) == (
        "20 runs",
        "2 vision models",
        "+0.00 to +0.50",
        "+0.10 to +0.40",
    )
    assert not facts.any_local


def test_learning_facts_count_the_runs_and_their_gain():
    learning = pd.DataFrame(
        {"learned": [True, False], "gain": [0.5, 0.1], "margin": [0.2, 0.2], "val_accuracy": [0.9, np.nan]}
    )
    facts = vision_study.learning_facts(learning)
    assert (facts.learned, facts.runs, facts.all_learned) == ("1", "2 runs", False)
    assert (facts.gain, facts.margin, facts.accuracy, facts.any_accuracy) == ("10% to 50%", "20%", "90%", True)


# ---------------------------------------------------------------------------------------------- figures and dataset


def test_plan_runs_orders_the_objectives_and_numbers_the_seeds():
    parameters = {  # what notebook 07 records: its run settings and its own parameters
        **notebooks.run_settings("vision-training"),
        "objectives": ["masked", "classify"],
        "n_seeds": 2,
        "seed": 3,
    }
    objectives, configs = vision_study.plan_runs(parameters)
    assert objectives == ["classify", "masked"]
    assert [(c.objective, c.seed) for c in configs] == [("classify", 3), ("classify", 4), ("masked", 3), ("masked", 4)]
    with pytest.raises(ValueError, match="n_seeds must be a positive integer"):
        vision_study.plan_runs({**parameters, "n_seeds": 0})
    with pytest.raises(ValueError, match="objectives must be distinct names"):
        vision_study.plan_runs({**parameters, "objectives": ["masked", "masked"]})


def test_example_panels_mask_and_quantise_the_first_image():
    pixels = torch.linspace(0, 1, 64).reshape(1, 8, 8).repeat(3, 1, 1)
    example = vision_study.example_panels(made_up_images([0, 1, 2], pixels), 2, 4, 0.4, seed=0, n=2)
    assert example.images.shape == (2, 8, 8) and example.labels.tolist() == [0, 1]
    masked = example.panels["masked input"]
    assert np.isnan(masked).any() and np.array_equal(masked[~np.isnan(masked)], pixels[0].numpy()[~np.isnan(masked)])
    assert sorted(np.unique(example.panels["4-level targets"] * 3).round().tolist()) == [0, 1, 2, 3]
    assert example.edges.tolist() == [1.5, 3.5, 5.5] and example.order.shape == (4, 4)
    assert list(example.panels) == ["image", "4x4 patches", "masked input", "4-level targets"]


def test_bar_points_shift_each_curve_and_span_low_to_high():
    steps = np.arange(0, 110, 10)
    x, y, bars = vision_study.bar_points(steps, steps - 1.0, steps * 1.0, steps + 2.0, k=0, n=2, n_bars=3)
    np.testing.assert_allclose(x, [0 - 0.6, 50 - 0.6, 100 - 0.6])  # half of 1.2% of 100 to the left
    np.testing.assert_array_equal(y, [0, 50, 100])
    np.testing.assert_array_equal(bars, [[1, 1, 1], [2, 2, 2]])


def test_comparison_groups_keep_the_trained_objectives_and_add_local_checkpoints():
    groups = vision_study.comparison_groups(["masked"], with_local=True)
    assert [kind for _, kind, _ in groups].count("ours") == 1 and groups[-1][1] == "local"
    assert len(groups) == 1 + 4 + 1  # masked, the four groups of the paper, the local checkpoints


def test_each_reported_group_stands_right_after_the_objective_that_imitates_it():
    ours = {key: i for i, (_, kind, key) in enumerate(vision_study.GROUPS) if kind == "ours"}
    for name, objective, _ in paper_comparison.REPORTED_GROUPS:
        at = [key for _, _, key in vision_study.GROUPS].index(name)
        assert (ours[objective] + 1 if objective else len(vision_study.GROUPS) - 1) == at, name
    # ViT and DeiT read the class from [CLS]: beside classify, not classify-mean
    labels = [label for label, *_ in vision_study.comparison_groups(["classify", "classify-mean"])]
    assert labels.index("ViT, DeiT\n(paper)") == labels.index("classify\n(ours)") + 1
    reported = paper_comparison.reported_vision(reference.reference_table())
    assert (reported[reported.group == "supervised (ViT, DeiT)"].objective == "classify").all()


def test_comparison_points_place_each_run_and_each_reported_model():
    reported = paper_comparison.reported_vision(reference.reference_table())
    groups = vision_study.comparison_groups(["masked", "next-patch"])
    points = vision_study.comparison_points(
        groups, summary_of({"masked": [0.2, 0.4], "next-patch": [0.1, 0.3]}), reported
    )
    ours = points[(points.kind == "ours") & (points.score == "symmetry")]
    assert ours.x.tolist() == pytest.approx([0.85, 1.15, 2.85, 3.15])  # groups 1 and 3, spread by 0.15
    assert ours["median"].tolist() == [0.2, 0.4, 0.1, 0.3] and ours.q25.tolist() == pytest.approx([0.1, 0.3, 0.0, 0.2])
    assert set(ours.color) == {vision_study.COLORS["masked"], vision_study.COLORS["next-patch"]}
    paper = points[(points.kind == "paper") & (points.score == "directionality")]
    assert len(paper) == len(reported) and paper.q25.isna().all()
    igpt = paper[paper.group == [key for _, _, key in groups].index("autoregressive (iGPT)")]
    assert set(igpt.color) == {plotting.DECODER_COLOR}


def test_reported_ranges_give_each_group_its_smallest_median_and_largest_value():
    reported = paper_comparison.reported_vision(reference.reference_table())
    table = vision_study.reported_ranges(reported)
    assert table.loc["autoregressive (iGPT)", ("symmetry_median", "min")] == pytest.approx(0.111, abs=1e-3)
    assert table.loc["autoregressive (iGPT)", ("symmetry_median", "max")] == pytest.approx(0.182, abs=1e-3)


def made_up_runs(values):
    """Runs over (objective, seed, step, layer) whose final symmetry of every layer is ``values[o][seed]``."""
    objectives, n_seeds = list(values), len(next(iter(values.values())))
    final = np.array([values[o] for o in objectives], dtype=float)[:, :, None, None] * np.ones((1, 1, 2, 2))
    dims = ("objective", "seed", "step", "layer")
    coords = {"objective": objectives, "seed": range(n_seeds), "step": [0, 10], "layer": [0, 1]}
    runs = xr.Dataset({"symmetry": (dims, final), "directionality": (dims, -final)}, coords=coords)
    return runs.assign_coords(causal=("objective", [vision_config.CAUSAL[o] for o in objectives]))


def made_up_checkpoint(name):
    generator = torch.Generator().manual_seed(0)
    blocks = [
        AttentionBlock("encoder", layer, torch.randn(2, 4, 8, generator=generator), torch.randn(2, 4, 8), False, 2)
        for layer in range(3)
    ]
    return tables.score_checkpoint(name, name=name, role="encoder", n_params=100, blocks=blocks)


def test_results_dataset_holds_the_summaries_the_criterion_and_the_verdicts():
    values = {"masked": [0.2, 0.4], "next-patch": [0.1, 0.3]}
    runs, summary = made_up_runs(values), summary_of(values, val_loss={"masked": [0.5, 0.5], "next-patch": [0.5, 2]})
    learning = vision_study.learning_table(summary, {"masked": 1.0, "next-patch": 1.2})
    comparison = vision_study.compare_objectives(
        summary, learned=vision_study.learned_objectives(learning), **SMALL_NULL
    )
    ds = vision_study.results_dataset(
        runs, summary, learning, comparison, parameters={"n_seeds": 2}, source="made up", statement="- a verdict"
    )
    assert ds.final_symmetry_median.sel(objective="masked").values.tolist() == [0.2, 0.4]
    assert ds.learned.values.tolist() == [[True, True], [True, False]]
    assert ds.context_free_loss.values.tolist() == [1.0, 1.2]
    assert ds.attrs["verdict"] == comparison.overall == stats.CANNOT_TELL
    assert ds.attrs["learning_margin"] == vision_study.LEARNING_MARGIN
    assert ds.attrs["statement"] == "- a verdict" and "checkpoint_symmetry" not in ds


def test_results_dataset_adds_local_checkpoints_by_layer():
    values = {"masked": [0.2, 0.4]}
    summary = summary_of(values)
    learning = vision_study.learning_table(summary, {"masked": 1.0})
    comparison = vision_study.compare_objectives(summary, **SMALL_NULL)
    scored = tables.combine([made_up_checkpoint("a"), made_up_checkpoint("b")])
    ds = vision_study.results_dataset(
        made_up_runs(values), summary, learning, comparison, parameters={}, source="made up", scored=scored
    )
    assert ds.checkpoint_symmetry.dims == ("checkpoint", "checkpoint_layer")
    assert ds.checkpoint.values.tolist() == ["a", "b"] and ds.checkpoint_layer.size == 3
    np.testing.assert_array_equal(
        ds.checkpoint_symmetry.sel(checkpoint="a"), scored.symmetry.sel(model="a", stack="encoder")
    )
    local = vision_study.local_summary(scored)
    assert local.model.tolist() == ["a", "b"]
    facts = vision_study.local_facts(local)
    assert (facts.any, facts.checkpoints, facts.names) == (True, "2 checkpoints", "`a` and `b`")


def test_learned_in_reads_the_saved_criterion_back():
    values = {"masked": [0.2, 0.4], "next-patch": [0.1, 0.3]}
    summary = summary_of(values, val_loss={"masked": [0.5, 0.5], "next-patch": [0.5, 2]})
    learning = vision_study.learning_table(summary, {"masked": 1.0, "next-patch": 1.0})
    comparison = vision_study.compare_objectives(summary, **SMALL_NULL)
    ds = vision_study.results_dataset(made_up_runs(values), summary, learning, comparison, parameters={}, source="")
    assert vision_study.learned_in_dataset(ds) == vision_study.learned_objectives(learning)
    with pytest.raises(ValueError, match="no 'learned' variable"):
        vision_study.learned_in_dataset(ds.drop_vars("learned"))


def test_the_margin_is_recorded_with_each_run():
    learning = vision_study.learning_table(summary_of({"masked": [0]}), {"masked": 1.0})
    assert learning.margin.tolist() == [vision_study.LEARNING_MARGIN]
    assert learning.threshold.tolist() == pytest.approx([1 - vision_study.LEARNING_MARGIN])

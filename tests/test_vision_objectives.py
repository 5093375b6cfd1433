"""Notebook 07's analysis: the predictions and their verdicts, the learning criterion, the sentences, and the tables
behind the figures and the dataset, on made-up runs with known answers."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
import xarray as xr

from attnstruct import reference, stats
from attnstruct.analyses import paper_comparison, vision_objectives, vision_results, vision_sentences
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
    return vision_objectives.learning_table(summary, {o: context_free for o in val_loss}, margin)


# ---------------------------------------------------------------------------------------------- the predictions


def test_compare_objectives_follows_the_predictions_and_the_seeds():
    result = vision_objectives.compare_objectives(summary_of(UP, COLUMN), **SMALL_NULL)
    assert [e.claim for e in result.effects] == [p.claim for p in vision_objectives.PREDICTIONS]
    assert all(e.verdict == stats.HOLDS for e in result.effects) and result.overall == stats.HOLDS
    assert all(e.null is not None and e.null.outside for e in result.effects)
    # the same values the other way round: a clear effect against the prediction
    down = {o: [-v for v in vs] for o, vs in UP.items()}
    flipped = {o: [-v for v in vs] for o, vs in COLUMN.items()}
    result = vision_objectives.compare_objectives(summary_of(down, flipped), **SMALL_NULL)
    assert result.overall == stats.DOES_NOT_HOLD and {e.verdict for e in result.effects} == {stats.DOES_NOT_HOLD}


def test_three_seeds_cannot_reach_a_verdict():
    three = {o: vs[:3] for o, vs in UP.items()}
    result = vision_objectives.compare_objectives(
        summary_of(three, {o: vs[:3] for o, vs in COLUMN.items()}), **SMALL_NULL
    )
    assert result.overall == stats.CANNOT_TELL and result.n_seeds == 3
    assert all("smallest attainable p is 0.125" in e.reason for e in result.effects)


def test_missing_objectives_or_seeds_leave_predictions_untested():
    result = vision_objectives.compare_objectives(
        summary_of({o: UP[o] for o in ("masked", "next-patch")}), **SMALL_NULL
    )
    predictions = vision_objectives.PREDICTIONS
    assert [e.claim for e in result.effects] == [predictions[0].claim, predictions[3].claim]
    assert len(result.untested) == 2 and "classify-mean" in result.untested[0]
    result = vision_objectives.compare_objectives(summary_of({o: vs[:1] for o, vs in UP.items()}), **SMALL_NULL)
    assert not result.effects and result.overall == stats.CANNOT_TELL and len(result.untested) == 4
    assert result.table().empty


def test_the_overall_verdict_is_the_one_rule_for_several_effects():
    # three predictions on their side and one clearly against it: the one rule says "does not hold"
    against = {**COLUMN, "masked": [-0.9] * 5, "next-patch": [0.9] * 5}
    result = vision_objectives.compare_objectives(summary_of(UP, against), **SMALL_NULL)
    assert [e.verdict for e in result.effects] == [stats.HOLDS] * 3 + [stats.DOES_NOT_HOLD]
    assert result.overall == stats.overall(result.effects) == stats.DOES_NOT_HOLD


def test_predictions_resting_on_runs_that_did_not_learn_get_no_verdict():
    learned = {"classify": False, "classify-mean": True, "masked": True, "next-patch": True}
    result = vision_objectives.compare_objectives(summary_of(UP, COLUMN), learned=learned, **SMALL_NULL)
    verdicts = {e.claim: (e.verdict, e.reason) for e in result.effects}
    assert verdicts["classify-mean minus classify, symmetry (last layer)"] == (stats.CANNOT_TELL, stats.NOT_LEARNED)
    assert [v for v, _ in verdicts.values()].count(stats.HOLDS) == 3
    assert result.overall == stats.CANNOT_TELL and result.learned == learned


def test_learned_must_say_so_for_every_objective():
    with pytest.raises(ValueError, match="missing \\['next-patch'\\]"):
        vision_objectives.compare_objectives(
            summary_of(UP, COLUMN), learned={"classify": True, "classify-mean": True, "masked": True}, **SMALL_NULL
        )


def test_the_predictions_treat_classify_by_its_last_layer_only():
    claims = {(p.treated, p.baseline, p.place) for p in vision_objectives.PREDICTIONS if p.score == "symmetry"}
    assert ("classify-mean", "classify", "last") in claims
    assert not any("classify" in (t, b) and place == "median" for t, b, place in claims)
    medians = [p for p in vision_objectives.PREDICTIONS if p.score == "symmetry" and p.place == "median"]
    assert all(vision_config.CAUSAL[p.baseline] for p in medians)


def test_resting_on_lists_the_predictions_that_compare_an_objective():
    claims = [p.claim for p in vision_objectives.resting_on(["classify"])]
    assert claims == ["classify-mean minus classify, symmetry (last layer)"]
    assert len(vision_objectives.resting_on(["next-patch"])) == 3


def test_null_table_places_each_seed_in_the_null():
    pools = vision_objectives.null_pools(16, 2, 2, n_draws=100)
    assert set(pools) == {(s, p) for s in vision_objectives.SCORES for p in vision_objectives.PLACES}
    np.testing.assert_array_equal(
        pools["symmetry", "median"], nulls.null_median_over_layers("symmetry", 16, 2, 2, n_draws=100)
    )
    table = vision_objectives.null_table(summary_of({"masked": [0.9, 0.8], "next-patch": [-0.9, 0.0]}), pools)
    row = table[(table.objective == "masked") & (table.score == "symmetry") & (table.place == "median")].iloc[0]
    assert row.percentile_low == 100 and row.n_outside == 2 and row.n_above == 2 and row.n == 2
    row = table[(table.objective == "next-patch") & (table.score == "symmetry") & (table.place == "last")].iloc[0]
    assert row.n_outside == 1 and row.n_above == 0 and row.percentile_low == 0
    assert "2 of 2 outside the null's 95% range" in vision_sentences.describe_nulls(table)[0]


# ---------------------------------------------------------------------------------------------- did the runs learn


def made_up_images(labels, pixels):
    """An ImageData whose training labels and 8x8 images are given (the validation set is a copy)."""
    images_ = torch.as_tensor(pixels, dtype=torch.float32)
    labels_ = torch.as_tensor(labels)
    return images.ImageData(images_, labels_, images_, labels_, "made up")


def test_context_free_loss_of_the_classifiers_is_the_entropy_of_the_labels():
    data = made_up_images([0, 0, 1, 1], torch.zeros(4, 8, 8))
    assert vision_objectives.context_free_loss(data, "classify", 4) == pytest.approx(math.log(2))
    data = made_up_images([3, 3, 3, 3], torch.zeros(4, 8, 8))
    assert vision_objectives.context_free_loss(data, "classify-mean", 4) == 0


def test_context_free_loss_of_the_pixel_objectives_is_the_entropy_of_the_grey_levels():
    pixels = torch.zeros(2, 8, 8)
    pixels[:, :, :2] = 1.0  # a quarter of the pixels at the top level, the rest at 0
    data = made_up_images([0, 1], pixels)
    expected = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    for objective in ("masked", "next-patch"):
        assert vision_objectives.context_free_loss(data, objective, 4) == pytest.approx(expected)


def test_uniform_loss_is_the_log_of_the_number_of_choices():
    assert vision_objectives.uniform_loss("classify", 4) == pytest.approx(math.log(10))
    assert vision_objectives.uniform_loss("next-patch", 4) == pytest.approx(math.log(4))


def test_a_run_learned_when_its_loss_lies_the_margin_below_the_context_free_loss():
    learning = learning_of({"masked": [0.5, 0.89, 0.91, 1.2, math.nan]})
    assert learning.learned.tolist() == [True, True, False, False, False]
    assert learning.threshold.tolist() == pytest.approx([0.9] * 5)
    assert learning.gain.iloc[0] == pytest.approx(0.5)


def test_an_objective_learned_when_every_seed_learned():
    learning = learning_of({"masked": [0.5, 0.5], "next-patch": [0.5, 0.95]})
    assert vision_objectives.learned_objectives(learning) == {"masked": True, "next-patch": False}


def test_thresholds_per_objective():
    learning = vision_objectives.learning_table(
        summary_of({"classify": [0, 0], "masked": [0, 0]}), {"classify": 2.0, "masked": 1.0}, margin=0.25
    )
    table = vision_objectives.thresholds(learning)
    assert table.threshold.to_dict() == {"classify": 1.5, "masked": 0.75}


def test_learning_table_needs_a_context_free_loss_for_every_objective():
    with pytest.raises(ValueError, match="no context-free loss for next-patch"):
        vision_objectives.learning_table(summary_of({"masked": [0], "next-patch": [0]}), {"masked": 1.0})


# ---------------------------------------------------------------------------------------------- sentences


def test_describe_learning_says_per_seed_whether_the_criterion_is_met():
    text = vision_sentences.describe_learning(learning_of({"classify": [0.5, 0.95]}), levels=4)
    assert "context-free loss 1.00 nats" in text and "below 0.90, 10% below it" in text
    assert "0.50 (seed 0, met), 0.95 (seed 1, not met): 1 of 2 seeds met it" in text
    assert "final validation accuracy 90% (chance 10%)" in text


def test_describe_gate_names_the_predictions_left_without_a_verdict():
    text = vision_sentences.describe_gate({"classify": False, "classify-mean": True})
    assert "`classify`" in text and "classify-mean minus classify, symmetry (last layer)" in text
    assert f"*{stats.CANNOT_TELL}: {stats.NOT_LEARNED}*" in text
    assert vision_sentences.describe_gate({"masked": True, "next-patch": True}).startswith("Every run")


def test_describe_effects_counts_the_verdicts_and_the_runs_that_did_not_learn():
    learned = {"classify": False, "classify-mean": True, "masked": True, "next-patch": True}
    result = vision_objectives.compare_objectives(summary_of(UP, COLUMN), learned=learned, **SMALL_NULL)
    last = vision_sentences.describe_effects(result)[-1]
    assert last.strip() == (
        f"**Overall: {stats.CANNOT_TELL}** (3 of 4 tested predictions hold, 0 do not, 1 cannot be told at this "
        "scale, 1 of them because the runs did not learn)."
    )


def test_describe_unpredicted_is_a_description_without_a_verdict():
    text = vision_sentences.describe_unpredicted(summary_of({"classify": [0.1, 0.3], "masked": [0.2, 0.2]}))
    assert "`classify` ends below `masked` in 1 of 2 seeds" in text and "mean difference +0.00" in text
    assert not any(verdict in text for verdict in stats.VERDICTS)
    assert vision_sentences.describe_unpredicted(summary_of({"masked": [0.2]})) == ""


def test_describe_predictions_lists_each_prediction_with_its_sign():
    text = vision_sentences.describe_predictions()
    assert "- masked minus next-patch, symmetry (median over layers): positive;" in text
    assert "- next-patch minus masked, directionality (median over layers): negative;" in text
    assert text.count("\n- ") == len(vision_objectives.PREDICTIONS) + len(vision_objectives.NOT_PREDICTED)


def test_the_paper_numbers_come_from_the_reference_table():
    text = vision_sentences.describe_reported(paper_comparison.reported_vision(reference.reference_table()))
    # docs/paper-notes.md, section 3.2
    for expected in (
        "+0.15 to +0.52",
        "ViT and DeiT +0.15 to +0.52",
        "+0.19 to +0.40",
        "iGPT, scores +0.11 to +0.18",
        "directionality -0.14 to -0.08",
    ):
        assert expected in text, expected


def test_describe_local_without_checkpoints():
    assert "No local checkpoints given" in vision_sentences.describe_local(pd.DataFrame())


# ---------------------------------------------------------------------------------------------- figures and dataset


def test_plan_runs_orders_the_objectives_and_numbers_the_seeds():
    parameters = {
        **vision_config.VisionConfig().to_dict(),
        "objectives": ["masked", "classify"],
        "n_seeds": 2,
        "seed": 3,
    }
    objectives, configs = vision_results.plan_runs(parameters)
    assert objectives == ["classify", "masked"]
    assert [(c.objective, c.seed) for c in configs] == [("classify", 3), ("classify", 4), ("masked", 3), ("masked", 4)]
    with pytest.raises(ValueError, match="n_seeds must be a positive integer"):
        vision_results.plan_runs({**parameters, "n_seeds": 0})
    with pytest.raises(ValueError, match="objectives must be distinct names"):
        vision_results.plan_runs({**parameters, "objectives": ["masked", "masked"]})


def test_example_panels_mask_and_quantise_the_first_image():
    pixels = torch.linspace(0, 1, 64).reshape(1, 8, 8).repeat(3, 1, 1)
    example = vision_results.example_panels(made_up_images([0, 1, 2], pixels), 2, 4, 0.4, seed=0, n=2)
    assert example.images.shape == (2, 8, 8) and example.labels.tolist() == [0, 1]
    masked = example.panels["masked input"]
    assert np.isnan(masked).any() and np.array_equal(masked[~np.isnan(masked)], pixels[0].numpy()[~np.isnan(masked)])
    assert sorted(np.unique(example.panels["4-level targets"] * 3).round().tolist()) == [0, 1, 2, 3]
    assert example.edges.tolist() == [1.5, 3.5, 5.5] and example.order.shape == (4, 4)
    assert list(example.panels) == ["image", "4x4 patches", "masked input", "4-level targets"]


def test_bar_points_shift_each_curve_and_span_low_to_high():
    steps = np.arange(0, 110, 10)
    x, y, bars = vision_results.bar_points(steps, steps - 1.0, steps * 1.0, steps + 2.0, k=0, n=2, n_bars=3)
    np.testing.assert_allclose(x, [0 - 0.6, 50 - 0.6, 100 - 0.6])  # half of 1.2% of 100 to the left
    np.testing.assert_array_equal(y, [0, 50, 100])
    np.testing.assert_array_equal(bars, [[1, 1, 1], [2, 2, 2]])


def test_comparison_groups_keep_the_trained_objectives_and_add_local_checkpoints():
    groups = vision_results.comparison_groups(["masked"], with_local=True)
    assert [kind for _, kind, _ in groups].count("ours") == 1 and groups[-1][1] == "local"
    assert len(groups) == 1 + 4 + 1  # masked, the four groups of the paper, the local checkpoints


def test_each_reported_group_stands_right_after_the_objective_that_imitates_it():
    ours = {key: i for i, (_, kind, key) in enumerate(vision_results.GROUPS) if kind == "ours"}
    for name, objective, _ in paper_comparison.REPORTED_GROUPS:
        at = [key for _, _, key in vision_results.GROUPS].index(name)
        assert (ours[objective] + 1 if objective else len(vision_results.GROUPS) - 1) == at, name
    # ViT and DeiT read the class from [CLS]: beside classify, not classify-mean
    labels = [label for label, *_ in vision_results.comparison_groups(["classify", "classify-mean"])]
    assert labels.index("ViT, DeiT\n(paper)") == labels.index("classify\n(ours)") + 1
    reported = paper_comparison.reported_vision(reference.reference_table())
    assert (reported[reported.group == "supervised (ViT, DeiT)"].objective == "classify").all()


def test_comparison_points_place_each_run_and_each_reported_model():
    reported = paper_comparison.reported_vision(reference.reference_table())
    groups = vision_results.comparison_groups(["masked", "next-patch"])
    points = vision_results.comparison_points(
        groups, summary_of({"masked": [0.2, 0.4], "next-patch": [0.1, 0.3]}), reported
    )
    ours = points[(points.kind == "ours") & (points.score == "symmetry")]
    assert ours.x.tolist() == pytest.approx([0.85, 1.15, 2.85, 3.15])  # groups 1 and 3, spread by 0.15
    assert ours["median"].tolist() == [0.2, 0.4, 0.1, 0.3] and ours.q25.tolist() == pytest.approx([0.1, 0.3, 0.0, 0.2])
    assert set(ours.color) == {vision_results.COLORS["masked"], vision_results.COLORS["next-patch"]}
    paper = points[(points.kind == "paper") & (points.score == "directionality")]
    assert len(paper) == len(reported) and paper.q25.isna().all()
    igpt = paper[paper.group == [key for _, _, key in groups].index("autoregressive (iGPT)")]
    assert set(igpt.color) == {plotting.DECODER_COLOR}


def test_reported_ranges_give_each_group_its_smallest_median_and_largest_value():
    reported = paper_comparison.reported_vision(reference.reference_table())
    table = vision_results.reported_ranges(reported)
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
    learning = vision_objectives.learning_table(summary, {"masked": 1.0, "next-patch": 1.2})
    comparison = vision_objectives.compare_objectives(
        summary, learned=vision_objectives.learned_objectives(learning), **SMALL_NULL
    )
    ds = vision_results.results_dataset(
        runs, summary, learning, comparison, parameters={"n_seeds": 2}, source="made up"
    )
    assert ds.final_symmetry_median.sel(objective="masked").values.tolist() == [0.2, 0.4]
    assert ds.learned.values.tolist() == [[True, True], [True, False]]
    assert ds.context_free_loss.values.tolist() == [1.0, 1.2]
    assert ds.attrs["verdict"] == comparison.overall == stats.CANNOT_TELL
    assert ds.attrs["learning_margin"] == vision_objectives.LEARNING_MARGIN
    assert stats.NOT_LEARNED in ds.attrs["statement"] and "checkpoint_symmetry" not in ds


def test_results_dataset_adds_local_checkpoints_by_layer():
    values = {"masked": [0.2, 0.4]}
    summary = summary_of(values)
    learning = vision_objectives.learning_table(summary, {"masked": 1.0})
    comparison = vision_objectives.compare_objectives(summary, **SMALL_NULL)
    scored = tables.combine([made_up_checkpoint("a"), made_up_checkpoint("b")])
    ds = vision_results.results_dataset(
        made_up_runs(values), summary, learning, comparison, parameters={}, source="made up", scored=scored
    )
    assert ds.checkpoint_symmetry.dims == ("checkpoint", "checkpoint_layer")
    assert ds.checkpoint.values.tolist() == ["a", "b"] and ds.checkpoint_layer.size == 3
    np.testing.assert_array_equal(
        ds.checkpoint_symmetry.sel(checkpoint="a"), scored.symmetry.sel(model="a", stack="encoder")
    )
    local = vision_results.local_summary(scored)
    assert local.model.tolist() == ["a", "b"] and "2 local checkpoints scored" in vision_sentences.describe_local(local)


def test_learned_in_reads_the_saved_criterion_back():
    values = {"masked": [0.2, 0.4], "next-patch": [0.1, 0.3]}
    summary = summary_of(values, val_loss={"masked": [0.5, 0.5], "next-patch": [0.5, 2]})
    learning = vision_objectives.learning_table(summary, {"masked": 1.0, "next-patch": 1.0})
    comparison = vision_objectives.compare_objectives(summary, **SMALL_NULL)
    ds = vision_results.results_dataset(made_up_runs(values), summary, learning, comparison, parameters={}, source="")
    assert vision_objectives.learned_in(ds) == vision_objectives.learned_objectives(learning)
    with pytest.raises(ValueError, match="no 'learned' variable"):
        vision_objectives.learned_in(ds.drop_vars("learned"))


def test_the_margin_is_recorded_with_each_run():
    learning = vision_objectives.learning_table(summary_of({"masked": [0]}), {"masked": 1.0})
    assert learning.margin.tolist() == [vision_objectives.LEARNING_MARGIN]
    assert learning.threshold.tolist() == pytest.approx([1 - vision_objectives.LEARNING_MARGIN])

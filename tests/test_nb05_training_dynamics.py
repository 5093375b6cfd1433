"""Notebook 05's verdicts and the facts it states, on made-up runs with a known answer; its reductions by brute
force; its calibration runs of two schedules, described and never judged."""

import json
import re

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from attnstruct import stats
from attnstruct.analyses import nb05_training_dynamics as two_objectives
from attnstruct.analyses import text_runs
from attnstruct.report import prose

SHAPE = two_objectives.Shape(d_model=64, n_heads=4, n_layers=4)


def runs(
    encoder_symmetry: float,
    decoder_symmetry: float,
    n_seeds: int = 6,
    noise: float = 0.02,
    seed: int = 0,
    decoder_directionality: float = -0.9,
):
    """Runs whose final median symmetry is the given value per objective (plus noise), peaking mid-run at +0.6;
    directionality: encoder 0, decoder ``decoder_directionality``."""
    rng = np.random.default_rng(seed)
    steps, layers = [0, 10, 20], range(4)
    sym = np.zeros((2, n_seeds, len(steps), len(layers)))
    sym[:, :, 1] = 0.6
    sym[0, :, 2] = encoder_symmetry
    sym[1, :, 2] = decoder_symmetry
    sym[:, :, 2] += noise * rng.standard_normal((2, n_seeds, 1))
    direc = np.zeros_like(sym)
    direc[1] = decoder_directionality + noise * rng.standard_normal((n_seeds, len(steps), 4))
    dims = ("objective", "seed", "step", "layer")
    coords = {"objective": ["mlm", "next-token"], "seed": np.arange(n_seeds), "step": steps, "layer": list(layers)}
    return xr.Dataset({"symmetry": (dims, sym), "directionality": (dims, direc)}, coords=coords)


def test_a_large_encoder_decoder_gap_holds_and_none_cannot_be_told():
    large = two_objectives.objective_effects(runs(0.5, 0.0), SHAPE, n_draws=100)
    assert [e.verdict for e in large][0] == "holds"
    assert large[0].estimate == pytest.approx(0.5, abs=0.05) and large[0].n == 6
    none = two_objectives.objective_effects(runs(0.2, 0.2, noise=0.05), SHAPE, n_draws=100)
    assert none[0].verdict == "cannot tell at this scale"


def test_directionality_is_judged_against_the_null_of_its_width():
    """A decoder directionality of -0.25 over 6 seeds is beyond the null of the mean of untrained layers at width
    256 and inside it at width 64, where an untrained layer's directionality spreads far more; the paired
    encoder-decoder gap swaps objectives within a seed, whatever the width."""
    narrow, wide = two_objectives.Shape(d_model=256, n_heads=4, n_layers=4), SHAPE
    at_256 = two_objectives.objective_effects(runs(0.5, 0.0, decoder_directionality=-0.25), narrow, n_draws=50)
    at_64 = two_objectives.objective_effects(runs(0.5, 0.0, decoder_directionality=-0.25), wide, n_draws=100)
    assert [e.verdict for e in at_256[1:]] == ["holds", "holds"]
    assert [e.verdict for e in at_64[1:]] == ["holds", "cannot tell at this scale"]
    assert "null" in at_64[2].reason


def test_a_decoder_more_symmetric_than_the_encoder_does_not_hold():
    assert two_objectives.objective_effects(runs(0.0, 0.5), SHAPE, n_draws=100)[0].verdict == "does not hold"


def test_three_seeds_cannot_tell_however_large_the_gap():
    effect = two_objectives.objective_effects(runs(0.5, 0.0, n_seeds=3), SHAPE, n_draws=100)[0]
    assert effect.verdict == "cannot tell at this scale" and "0.125" in effect.reason


def test_final_median_and_transient_match_a_loop():
    ds = runs(0.3, 0.1)
    final = text_runs.final_median(ds, "symmetry")
    table = two_objectives.transient(ds)
    for objective in ("mlm", "next-token"):
        for seed in range(6):
            values = ds.symmetry.sel(objective=objective, seed=seed).values  # [step, layer]
            medians = np.median(values, axis=1)
            assert float(final.sel(objective=objective, seed=seed)) == pytest.approx(medians[-1])
            row = table.loc[(objective, seed)]
            assert row["peak"] == pytest.approx(medians.max()) and row["peak_step"] == 10
            assert row["decay"] == pytest.approx(medians.max() - medians[-1])
    assert {e.verdict for e in two_objectives.decay_effects(ds)} == {
        stats.CANNOT_TELL
    }  # 3 records: a decay is chance's


def decaying(final: float, n_steps: int = 21, n_seeds: int = 6, seed: int = 0) -> xr.Dataset:
    """Runs whose median symmetry rises linearly to +0.6 at the middle step, then falls linearly to ``final``."""
    rng = np.random.default_rng(seed)
    half = n_steps // 2
    path = np.concatenate([np.linspace(0, 0.6, half + 1), np.linspace(0.6, final, n_steps - half)[1:]])
    sym = path[None, None, :, None] + 0.01 * rng.standard_normal((2, n_seeds, n_steps, 4))
    dims = ("objective", "seed", "step", "layer")
    coords = {"objective": ["mlm", "next-token"], "seed": np.arange(n_seeds), "step": np.arange(n_steps) * 10}
    return xr.Dataset({"symmetry": (dims, sym)}, coords=coords | {"layer": range(4)})


def test_a_fall_after_the_peak_holds_and_a_level_that_stays_cannot_be_told():
    assert {e.verdict for e in two_objectives.decay_effects(decaying(0.0))} == {stats.HOLDS}
    kept = two_objectives.decay_effects(decaying(0.6))
    assert {e.verdict for e in kept} == {stats.CANNOT_TELL} and all(abs(e.estimate) < 0.2 for e in kept)
    assert all(e.family == "secondary, uncorrected" for e in kept)


def test_an_objective_missing_from_the_runs_is_named():
    with pytest.raises(ValueError, match="objective 'next-token' is not in the runs"):
        two_objectives.objective_effects(runs(0.5, 0.0).sel(objective=["mlm"]), SHAPE)


def test_claims_on_runs_that_did_not_learn_are_not_judged():
    """Claims 1 and 2 rest on both objectives' runs, claim 3 on the decoder's: a large gap that did not learn."""
    effects = two_objectives.objective_effects(
        runs(0.5, 0.0), SHAPE, n_draws=100, learned={"mlm": False, "next-token": True}
    )
    assert all(e.reason.startswith(stats.NOT_LEARNED) for e in effects[:2])
    assert {e.verdict for e in effects[:2]} == {stats.CANNOT_TELL} and not effects[2].reason.startswith(
        stats.NOT_LEARNED
    )
    decoder_only = two_objectives.objective_effects(
        runs(0.5, 0.0), SHAPE, n_draws=100, learned={"mlm": True, "next-token": False}
    )
    assert [e.reason for e in decoder_only] == [stats.NOT_LEARNED] * 3


def test_a_decay_of_runs_that_did_not_learn_is_not_judged():
    effects = two_objectives.decay_effects(decaying(0.0), learned={"mlm": True, "next-token": False})
    assert [e.verdict for e in effects] == [stats.HOLDS, stats.CANNOT_TELL]
    assert effects[1].reason == stats.NOT_LEARNED


def test_with_one_objective_there_are_no_claims_and_the_facts_say_so():
    one = runs(0.5, 0.0).sel(objective=["mlm"])
    assert two_objectives.paper_claims(one, SHAPE, n_draws=100) == []
    assert not two_objectives.claims_stated([], SHAPE, np.zeros(4)).tested
    assert two_objectives.per_layer_gap(one).empty and not two_objectives.layer_gap(one).both_trained


def test_the_transient_facts_state_each_objectives_peak_step_and_end():
    encoder, decoder = two_objectives.transients(two_objectives.transient(runs(0.3, 0.1, noise=0.0)))
    assert encoder == two_objectives.TransientFacts(text_runs.label("mlm"), "+0.60", "10", "+0.30", "+0.30")
    assert (decoder.objective, decoder.final, decoder.decay) == (text_runs.label("next-token"), "+0.10", "+0.50")


def test_the_per_layer_gap_is_the_final_difference_per_seed_and_layer():
    ds = runs(0.3, 0.1, n_seeds=3)
    ds["symmetry"].loc[{"objective": "mlm", "step": 20, "layer": 3}] = 0.9
    table = two_objectives.per_layer_gap(ds)
    final = ds.symmetry.isel(step=-1)
    expected = (final.sel(objective="mlm") - final.sel(objective="next-token")).values  # [seed, layer]
    np.testing.assert_allclose(table.to_numpy(), expected)
    assert list(table.columns) == [0, 1, 2, 3] and list(table.index) == [0, 1, 2]
    mean = expected.mean(0)
    gap = two_objectives.layer_gap(ds)
    assert gap.both_trained and gap.seeds == "3 seeds"
    assert gap.layers.endswith(f"layer 2 {mean[2]:+.2f}, layer 3 {mean[3]:+.2f}")


@pytest.mark.parametrize(
    ("encoder", "decoder", "words"),
    [(0.5, 0.0, "holds"), (0.0, 0.5, "does not hold"), (0.2, 0.2, "cannot tell at this scale")],
)
def test_the_claims_facts_carry_the_verdict_of_the_gap(encoder, decoder, words):
    claims = two_objectives.objective_effects(runs(encoder, decoder, noise=0.05), SHAPE, n_draws=100)
    assert claims[0].verdict == words
    stated = two_objectives.claims_stated(claims, SHAPE, SHAPE.null("directionality", 100, 0))
    assert (stated.holds, stated.fails) == (words == stats.HOLDS, words == stats.DOES_NOT_HOLD)
    assert stated.seeds == "6 seeds" and stated.reason == claims[0].reason and not stated.one_seed
    assert (stated.direction_verdict, stated.decoder_verdict) == (claims[1].verdict, claims[2].verdict)


def test_the_claims_facts_of_one_seed_have_no_interval():
    claims = two_objectives.objective_effects(runs(0.5, 0.0, n_seeds=1), SHAPE, n_draws=100)
    assert two_objectives.claims_stated(claims, SHAPE, SHAPE.null("directionality", 100, 0)).one_seed


def test_the_head_facts_span_every_head_layer_and_seed():
    ds = runs(0.3, 0.1, n_seeds=2)
    heads = np.zeros((2, 2, 3, 4, 2))
    heads[0, 1, 2, 3, 1], heads[1, 0, 2, 0, 0] = 0.7, -0.4
    heads[0, 0, 1, 0, 0] = 5.0  # not the last step: ignored
    ds["head_symmetry"] = (("objective", "seed", "step", "layer", "head"), heads)
    encoder, decoder = two_objectives.heads_at_end(ds)
    assert (encoder.objective, encoder.span, encoder.mean_span) == (
        text_runs.label("mlm"),
        prose.span([0.0, 0.7]),
        prose.span([0.0, 0.35]),
    )
    assert (decoder.span, decoder.mean_span) == ("-0.40 to +0.00", "-0.20 to +0.00")
    np.testing.assert_allclose(two_objectives.final_heads(ds).sel(objective="mlm", layer=3, head=1), 0.35)


def test_the_authors_runs_facts_read_their_last_step():
    reference = pd.DataFrame(
        {
            "n_layers": [4, 12, 4, 4, 4],
            "mode": ["encoder", "encoder", "decoder", "encoder", "decoder"],
            "step": [200, 200, 200, 100, 100],
            "symmetry": [0.5, 0.3, -0.2, 0.9, 0.9],
            "directionality": [-0.1, -0.2, -0.4, 0.9, 0.9],
        }
    )
    assert two_objectives.authors_runs(reference) == two_objectives.AuthorsRunsFacts(
        step="200",
        encoders="+0.30 to +0.50",
        encoders_12="+0.30",
        decoders="-0.20",
        encoder_directionality="-0.20 to -0.10",
        decoder_directionality="-0.40",
    )


def test_the_loss_curves_are_means_over_seeds_and_the_levels_the_targets():
    ds = runs(0.3, 0.1, n_seeds=2)
    ds["train_loss"] = (("objective", "seed", "step"), np.arange(12.0).reshape(2, 2, 3))
    ds["val_loss"] = (("objective", "seed", "step"), [[[1, np.nan, 3], [3, np.nan, 5]], [[0, np.nan, 0]] * 2])
    train, val = two_objectives.mean_losses(ds, "mlm")
    np.testing.assert_allclose(train, [1.5, 2.5, 3.5])
    assert list(val.step.values) == [0, 20] and list(val.values) == [2, 4]
    assert two_objectives.loss_target_levels(5.0, ["mlm", "next-token"]) == pytest.approx(
        {"mlm": 4.7, "next-token": 4.0}
    )


def test_the_dataset_records_the_gate_and_the_verdicts():
    ds = runs(0.5, 0.0).assign_attrs(scored_matrix="W_qk", runs="[]")
    effects = two_objectives.decay_effects(ds)
    out = two_objectives.result_dataset(
        ds, parameters={"steps": 20}, corpus="c", unigram_entropy=5.0, learned=False, effects=effects
    )
    assert out.attrs["loss_targets_met"] == "no" and out.attrs["runs"] == "[]"
    assert set(json.loads(out.attrs["verdicts"])) == {e.claim for e in effects}
    xr.testing.assert_identical(out.drop_attrs(), ds.drop_attrs())
    assert (
        two_objectives.result_dataset(
            ds, parameters={}, corpus="c", unigram_entropy=5.0, learned=True, effects=[]
        ).attrs["verdicts"]
        == "{}"
    )


class _Data:
    vocab_size, train = 300, range(1000)

    def describe(self):
        return "corpus: 1,000 training tokens"

    def unigram_entropy(self):
        return 5.0


class _Tokenizer:
    def encode(self, text):
        return type("Encoding", (), {"ids": [0, 1]})()

    def id_to_token(self, i):
        return ["a", "b"][i]


def test_the_setup_facts_state_the_data_the_model_and_the_passes():
    from attnstruct.tasks import text_config

    config = text_config.TextConfig(steps=10, batch_size=5, seq_len=20, d_model=32, n_layers=2, n_heads=4)
    setup = two_objectives.setup(_Data(), _Tokenizer(), config, "ab")
    assert "1,000" in setup.corpus and setup.tokens == "['a', 'b']"
    assert (setup.n_layers, setup.d_model, setup.n_heads, setup.d_head, setup.norm) == ("2", "32", "4", "8", "pre")
    assert (setup.steps, setup.batch_size, setup.seq_len, setup.passes) == ("10", "5", "20", "1.0")
    assert setup.unigram_entropy == "5.000"


def toy_runs(seeds=5, encoder=0.4, decoder=0.1):
    """Notebook 05's runs: two objectives, ``seeds`` seeds, two steps, two layers; the final symmetry of every
    layer is ``encoder`` or ``decoder``, except seed 0's decoder, which ends above the encoder."""
    dims = ("objective", "seed", "step", "layer")
    symmetry = np.zeros((2, seeds, 2, 2))
    symmetry[0, :, -1], symmetry[1, :, -1] = encoder, decoder
    symmetry[1, 0, -1] = encoder + 0.1
    symmetry[:, :, 0] = 0.6  # the peak
    heads = np.stack([symmetry, symmetry], axis=-1)
    return xr.Dataset(
        {
            "symmetry": (dims, symmetry),
            "directionality": (dims, np.full(symmetry.shape, -0.3)),
            "head_symmetry": ((*dims, "head"), heads),
        },
        coords={"objective": ["mlm", "next-token"], "seed": list(range(seeds)), "step": [0, 100], "layer": [0, 1]},
    )


def test_the_loss_facts_give_each_objectives_distance_from_the_unigram_entropy():
    targets = pd.DataFrame(
        {
            "objective": ["mlm", "mlm", "next-token", "next-token"],
            "seed": [0, 1, 0, 1],
            "below_unigram": [0.5, 0.3, 1.5, -0.1],
            "met": [True, True, True, False],
        }
    ).set_index(["objective", "seed"])
    assert two_objectives.losses_against_entropy(targets) == [
        two_objectives.ObjectiveLossFacts(text_runs.label("mlm"), "0.40", "below"),
        two_objectives.ObjectiveLossFacts(text_runs.label("next-token"), "0.70", "below"),
    ]


def test_the_scores_facts_count_seeds_only_when_they_can_tell():
    scores = two_objectives.scores_over_training(toy_runs())
    assert scores.can_tell and (scores.more, scores.seeds) == ("4", "5 seeds")
    few = two_objectives.scores_over_training(toy_runs(seeds=2))
    assert not few.can_tell and few.reason == "2 seeds, too few to compare"
    assert two_objectives.scores_over_training(toy_runs(), learned=False).reason == "the runs did not learn"


def test_the_scores_facts_quote_the_mean_over_seeds_as_the_verdicts_do():
    """The title's final values are the verdicts' statistic: the mean over seeds of the final median over layers
    (the decoder's seed 0 ends at +0.50, the other four at +0.10: mean +0.18, median +0.10)."""
    scores = two_objectives.scores_over_training(toy_runs())
    assert re.findall(r"[+-]\d\.\d\d", scores.ends)[:3] == ["+0.40", "+0.18", "-0.30"]  # encoder, decoder symmetry


def test_the_layer_and_head_facts_give_the_final_ranges():
    encoder, decoder = two_objectives.final_layer_spans(toy_runs(), 0)
    assert (encoder.objective, encoder.seed, encoder.span) == (text_runs.label("mlm"), "0", "+0.40")
    assert [h.mean_span for h in two_objectives.heads_at_end(toy_runs())] == ["+0.40", "+0.18"]


def test_beside_authors_sets_our_order_against_theirs():
    authors = pd.DataFrame(
        {"step": [10, 1000, 1000, 1000], "mode": ["encoder", "encoder", "encoder", "decoder"]}
        | {"symmetry": [0.0, 0.3, 0.5, -0.2]}
    )
    beside = two_objectives.beside_authors(toy_runs(), authors)
    assert beside.can_tell and (beside.comparison, beside.agree) == (prose.compared(0.4, -0.2), "as")
    assert (beside.encoders, beside.decoders, beside.authors_steps) == ("+0.30 to +0.50", "-0.20", "1,000")
    few = two_objectives.beside_authors(toy_runs(seeds=1), authors)
    assert not few.can_tell and few.reason == "1 seed, too few to compare"


COLUMNS = "purpose,objective,d_model,n_layers,steps,batch_size,seed,met,final_symmetry"


def calibration(root, rows: list[str]) -> None:
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "calibration.csv").write_text("\n".join([COLUMNS, *rows]) + "\n")


SCHEDULE_ROWS = [
    "grid,mlm,64,4.0,800,32,0,True,0.9",
    "schedule,mlm,64,4.0,600,64,0,True,0.01",
    "schedule,next-token,64,4.0,600,64,0,True,0.04",
    "schedule,mlm,64,4.0,600,64,0,True,0.08",
    "schedule,next-token,64,4.0,600,64,0,False,0.06",
]


def schedules(tmp_path) -> pd.DataFrame:
    calibration(tmp_path, SCHEDULE_ROWS)
    rows = two_objectives.schedule_runs(tmp_path)
    return rows.assign(schedule=["constant", "constant", "linear", "linear"])


def test_the_schedule_runs_are_the_calibration_rows_of_that_purpose(tmp_path):
    calibration(tmp_path, SCHEDULE_ROWS)
    rows = two_objectives.schedule_runs(tmp_path)
    assert len(rows) == 4 and set(rows["purpose"]) == {"schedule"}
    assert two_objectives.schedule_runs(tmp_path / "elsewhere").empty


def test_the_schedules_are_described_value_by_value(tmp_path):
    facts = two_objectives.schedules_compared(schedules(tmp_path))
    by_schedule = dict(part.split(": ") for part in facts.by_schedule.split("; "))
    assert by_schedule == {"`constant`": "mlm +0.01, next-token +0.04", "`linear`": "mlm +0.08, next-token +0.06"}
    assert facts.has_gaps and facts.gaps == "`constant` -0.03, `linear` +0.02"
    assert (facts.width, facts.layers, facts.steps, facts.batch_size) == ("64", "4", "600", "64")
    assert (facts.per_cell, facts.seeds, facts.met, facts.runs) == ("1 run", "0", "3", "4 runs")


def test_without_calibration_runs_the_facts_say_so():
    assert not two_objectives.schedules_compared(pd.DataFrame()).any


def layer_zero_gap(gap_zero: float, gap_rest, n_seeds: int = 5) -> xr.Dataset:
    """Runs of four layers whose final encoder-minus-decoder symmetry is ``gap_zero`` in layer 0 and ``gap_rest[s]``
    in the other layers of seed ``s`` (a little spread over layers)."""
    sym = np.zeros((2, n_seeds, 2, 4))
    sym[0, :, 1, 0] = gap_zero
    sym[0, :, 1, 1:] = np.asarray(gap_rest, dtype=float)[:, None] + np.array([-0.01, 0.0, 0.02])
    dims = ("objective", "seed", "step", "layer")
    coords = {"objective": ["mlm", "next-token"], "seed": np.arange(n_seeds), "step": [0, 10], "layer": range(4)}
    return xr.Dataset({"symmetry": (dims, sym), "directionality": (dims, np.zeros_like(sym))}, coords=coords)


def test_the_gap_without_layer_zero_is_a_secondary_claim_on_the_other_layers_median():
    rest = [0.05, -0.02, 0.04, -0.01, 0.03]
    ds = layer_zero_gap(0.5, rest)
    (effect,) = two_objectives.gap_without_layer_zero(ds)
    final = ds.symmetry.isel(step=-1)
    brute = [
        np.median(final.sel(objective="mlm", seed=s).values[1:])
        - np.median(final.sel(objective="next-token", seed=s).values[1:])
        for s in range(5)
    ]
    assert effect.estimate == pytest.approx(np.mean(brute)) and effect.n == 5
    assert effect.family == "secondary, uncorrected" and effect.verdict == stats.CANNOT_TELL
    assert effect.claim in {c.name for c in two_objectives.PLAN.claims}
    primary = two_objectives.objective_effects(ds, SHAPE, n_draws=50)[0]
    assert primary.estimate == pytest.approx(np.mean([np.median([0.5, r - 0.01, r, r + 0.02]) for r in rest]))


def test_the_gap_without_layer_zero_needs_both_objectives_two_layers_and_learned_runs():
    ds = layer_zero_gap(0.5, [0.3, 0.31, 0.32, 0.33, 0.34])
    assert two_objectives.gap_without_layer_zero(ds)[0].verdict == stats.HOLDS
    assert two_objectives.gap_without_layer_zero(ds.sel(objective=["mlm"])) == []
    assert two_objectives.gap_without_layer_zero(ds.sel(layer=[0])) == []
    (gated,) = two_objectives.gap_without_layer_zero(ds, learned={"mlm": True, "next-token": False})
    assert gated.reason == stats.NOT_LEARNED


def test_the_layer_gap_facts_give_the_gap_without_layer_zero_and_its_negative_seeds():
    gap = two_objectives.layer_gap(layer_zero_gap(0.5, [0.05, -0.02, 0.04, -0.01, 0.03]))
    assert gap.beyond_first and gap.without_first == prose.signed(np.mean([0.05, -0.02, 0.04, -0.01, 0.03]))
    assert gap.negative_without_first == "2 of 5 seeds"
    assert not two_objectives.layer_gap(layer_zero_gap(0.5, [0.1] * 5).sel(layer=[0])).beyond_first


def _window_fall(values, fraction=1 / 3) -> float:
    peak = int(np.argmax(values))
    after = list(values[peak + 1 :])
    if not after:
        return 0.0
    k = max(1, int(len(after) * fraction))
    return float(np.mean(after[:k]) - np.mean(after[-k:]))


def test_the_decay_claim_is_the_early_minus_the_late_third_after_the_peak_paired_by_seed():
    ds = decaying(0.2, seed=3)
    ds["symmetry"].loc[{"objective": "mlm", "seed": 2, "step": 200}] = 0.5  # one late bump in one seed
    effects = two_objectives.decay_effects(ds)
    for effect, objective in zip(effects, ("mlm", "next-token")):
        medians = ds.symmetry.sel(objective=objective).median("layer").transpose("seed", "step").values
        assert effect.estimate == pytest.approx(np.mean([_window_fall(row) for row in medians]))
        assert effect.test == "sign-flip" and effect.null is None
    claims = {c.name: c for c in two_objectives.PLAN.claims}
    declared = [claims[e.claim].statistic for e in effects]
    assert all("first third" in text and "last third" in text for text in declared)

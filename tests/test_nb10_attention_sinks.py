"""Notebook 10's analysis on known answers: toy arms whose final scores are chosen, and a planted sink table."""

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from attnstruct import stats
from attnstruct.analyses import nb10_attention_sinks as sinks_test
from attnstruct.analyses import plans
from attnstruct.sinks import packaged

SEEDS = [0, 1, 2, 3, 4]


def arm_runs(objectives, *, directionality, symmetry=0.0, val_loss=1.0, seeds=SEEDS) -> xr.Dataset:
    """One arm's combined runs: 2 steps, 3 layers; the final records per objective and seed set to the given values
    (a mapping objective -> value or per-seed list), plus a small per-seed wobble so that seeds differ."""
    dims = ("objective", "seed", "step", "layer")
    shape = (len(objectives), len(seeds), 2, 3)
    values = {"directionality": np.zeros(shape), "symmetry": np.zeros(shape), "val_loss": np.full(shape[:3], np.nan)}
    for i, objective in enumerate(objectives):
        for name, given in (("directionality", directionality), ("symmetry", symmetry)):
            value = given[objective] if isinstance(given, dict) else given
            per_seed = np.broadcast_to(np.asarray(value, dtype=float), (len(seeds),))
            values[name][i, :, -1, :] = (per_seed + 0.01 * np.arange(len(seeds)))[:, None]
        values["val_loss"][i, :, -1] = val_loss
    coords = {"objective": list(objectives), "seed": seeds, "step": [0, 10], "layer": [0, 1, 2]}
    ds = xr.Dataset(
        {
            "directionality": (dims, values["directionality"]),
            "symmetry": (dims, values["symmetry"]),
            "val_loss": (dims[:3], values["val_loss"]),
        },
        coords=coords,
    )
    ds.attrs["runs"] = json.dumps([f"{o}-{s}" for o in objectives for s in seeds])
    return ds


def three_arms(sigmoid=-0.05, softmax=-0.4, null_slot=-0.1, val_loss=1.0) -> xr.Dataset:
    return sinks_test.combined(
        {
            "softmax": arm_runs(
                ["mlm", "next-token"],
                directionality={"mlm": 0.0, "next-token": softmax},
                symmetry={"mlm": 0.5, "next-token": 0.1},
            ),
            "sigmoid": arm_runs(
                ["mlm", "next-token"],
                directionality={"mlm": 0.0, "next-token": sigmoid},
                symmetry={"mlm": 0.4, "next-token": 0.1},
                val_loss=val_loss,
            ),
            "softmax-null-slot": arm_runs(["next-token"], directionality=null_slot),
        }
    )


def test_combined_arms_leave_the_untrained_objective_empty_and_keep_every_run():
    ds = three_arms()
    assert list(ds.attention.values) == ["softmax", "sigmoid", "softmax-null-slot"]
    assert not sinks_test.trained(ds, "softmax-null-slot", "mlm")
    assert sinks_test.trained(ds, "softmax-null-slot", "next-token")
    assert len(json.loads(ds.attrs["runs"])) == 25


def test_the_sigmoid_decoder_closer_to_zero_holds_the_primary_claim():
    effects = sinks_test.normalisation_effects(three_arms(sigmoid=-0.05, softmax=-0.4))
    primary = sinks_test.primary_effect(effects)
    assert primary.family.startswith("primary")
    assert primary.estimate == pytest.approx(0.35)
    assert primary.verdict == stats.HOLDS


def test_a_more_column_dominant_sigmoid_decoder_does_not_hold():
    primary = sinks_test.primary_effect(sinks_test.normalisation_effects(three_arms(sigmoid=-0.6, softmax=-0.2)))
    assert primary.estimate == pytest.approx(-0.4)
    assert primary.verdict == stats.DOES_NOT_HOLD


def test_no_difference_cannot_be_told():
    primary = sinks_test.primary_effect(sinks_test.normalisation_effects(three_arms(sigmoid=-0.3, softmax=-0.3)))
    assert primary.verdict == stats.CANNOT_TELL


def test_every_declared_claim_is_tested_when_every_arm_ran():
    effects = sinks_test.normalisation_effects(three_arms())
    assert {e.claim for e in effects} == {c.name for c in sinks_test.PLAN.claims}
    gaps = {e.claim: e.estimate for e in effects}
    assert gaps[sinks_test.gap_claim("softmax")] == pytest.approx(0.4)
    assert gaps[sinks_test.gap_claim("sigmoid")] == pytest.approx(0.3)
    assert gaps[sinks_test.NULL_SLOT_CLAIM] == pytest.approx(0.3)


def test_an_arm_that_did_not_learn_cannot_be_told():
    ds = three_arms(sigmoid=-0.05, softmax=-0.4, val_loss=50.0)
    learned = sinks_test.learned_by_arm(sinks_test.arm_targets(ds, unigram_entropy=5.0))
    assert learned[("sigmoid", "next-token")] is False and learned[("softmax", "next-token")] is True
    primary = sinks_test.primary_effect(sinks_test.normalisation_effects(ds, learned=learned))
    assert primary.verdict == stats.CANNOT_TELL and primary.reason == stats.NOT_LEARNED


def test_the_plan_is_found_by_notebook_and_has_one_primary_claim():
    assert plans.plan_of("10_attention_sinks") is sinks_test.PLAN
    assert [c.name for c in sinks_test.PLAN.primary] == [sinks_test.PRIMARY]


def test_primary_facts_count_the_seeds_that_moved_toward_zero():
    ds = three_arms(sigmoid=-0.05, softmax=-0.4)
    facts = sinks_test.primary_facts(ds, sinks_test.normalisation_effects(ds))
    assert facts.tested and facts.toward == "5" and facts.verdict == stats.HOLDS


def test_primary_facts_without_the_sigmoid_arm_are_not_tested():
    ds = sinks_test.combined({"softmax": arm_runs(["next-token"], directionality=-0.3)})
    assert sinks_test.normalisation_effects(ds) == []
    assert not sinks_test.primary_facts(ds, []).tested


def test_arms_at_end_lists_each_trained_arm_and_objective_once():
    facts = sinks_test.arms_at_end(three_arms(softmax=-0.4))
    assert len(facts) == 5
    softmax_decoder = next(f for f in facts if f.attention == "`softmax`" and "next" in f.objective)
    assert softmax_decoder.directionality == "-0.38"  # -0.4 + the wobble's mean 0.02


def test_own_sinks_take_medians_over_seeds_and_count_overlaps_beyond_chance():
    table = pd.DataFrame(
        {
            "sink_mass": [0.1, 0.2, 0.3],
            "uniform": [0.05] * 3,
            "overlap_first": [10.0, 12.0, 2.0],
            "overlap_first_expected": [4.0] * 3,
            "overlap_first_p": [0.001, 0.01, 0.5],
            "ablation_change": [0.05, 0.1, 0.0],
            "ablation_null_mean": [0.0] * 3,
            "ablation_percentile": [100.0, 100.0, 50.0],
            "directionality": [-0.4, -0.3, -0.2],
            "directionality_without_first": [-0.2, -0.1, 0.0],
        }
    )
    facts = sinks_test.own_sinks(table, "sigmoid")
    assert facts.any and facts.sink_mass == "0.200" and facts.overlap == "10.0" and facts.beyond == "2 of 3"
    assert facts.attention == "`sigmoid`"
    assert facts.without_first == "-0.10"
    assert not sinks_test.own_sinks(table.iloc[:0]).any


def test_the_dataset_holds_the_sinks_by_seed_and_the_verdicts():
    ds = three_arms()
    ds.attrs["scored_matrix"] = "W_qk"
    effects = sinks_test.normalisation_effects(ds)
    sinks = {"sigmoid": pd.DataFrame({c: [1.0] for c in sinks_test.SINK_COLUMNS}, index=pd.Index([2], name="seed"))}
    out = sinks_test.result_dataset(
        ds, sinks=sinks, parameters={"seeds": SEEDS}, corpus="toy", unigram_entropy=5.0, learned=True, effects=effects
    )
    assert out.sink_sink_mass.sel(attention="sigmoid", seed=2) == 1.0
    assert np.isnan(out.sink_sink_mass.sel(attention="sigmoid", seed=0))
    assert np.isnan(out.sink_sink_mass.sel(attention="softmax", seed=2))  # an arm not diagnosed
    assert sinks_test.PRIMARY in json.loads(out.attrs["verdicts"])
    recomputed = sinks_test.primary_effect(sinks_test.effects_of_dataset(out))
    assert recomputed.estimate == pytest.approx(sinks_test.primary_effect(effects).estimate)


def test_real_model_facts_have_one_record_per_row_and_not_read_names_the_reason():
    assert sinks_test.real_models(pd.DataFrame(columns=list(packaged.COLUMNS))) == []
    assert sinks_test.not_read([("a-model", "not fetched")])[0].reason == "not fetched"
    row = pd.DataFrame([dict.fromkeys(packaged.COLUMNS, 0.5) | {"model": "m", "role": "decoder"}])
    assert sinks_test.real_models(row)[0].sink_mass == "0.50"


def test_a_runs_folder_is_the_one_train_many_writes(tmp_path):
    from attnstruct.tasks import text_config

    config = text_config.TextConfig(objective="next-token", seed=3, attention="sigmoid")
    folder = sinks_test.run_folder(tmp_path, config)
    assert folder.parent == tmp_path
    assert folder.name == f"{config.run_name()}-{config.digest()[:8]}"


def sinks_of(mass: float) -> dict[str, pd.DataFrame]:
    return {"softmax": pd.DataFrame({"sink_mass": [mass, mass], "uniform": [0.05, 0.05]})}


def test_the_reading_says_when_the_sigmoid_decoder_overshoots_past_zero():
    assert sinks_test.reading(three_arms(sigmoid=0.4), [], {}).overshoots
    near = sinks_test.reading(three_arms(sigmoid=-0.05), [], {})
    assert not near.overshoots and near.overshoot == "0"


def test_the_reading_sets_the_encoders_shift_and_the_null_slot_beside_the_decoder():
    ds = three_arms(sigmoid=0.4, null_slot=-0.4)
    effects = sinks_test.normalisation_effects(ds)
    read = sinks_test.reading(ds, effects, {})
    assert read.encoder_read and read.encoder_shift == "+0.00"  # both encoders end at 0 in the toy
    null = next(e for e in effects if e.claim == sinks_test.NULL_SLOT_CLAIM)
    assert read.null_read and read.null_estimate == "+0.00" and read.null_verdict == null.verdict


def test_the_reading_says_whether_the_softmax_decoders_have_a_sink_to_remove():
    assert sinks_test.reading(three_arms(), [], sinks_of(0.3)).has_sink
    flat = sinks_test.reading(three_arms(), [], sinks_of(0.06))
    assert flat.sinks_read and not flat.has_sink
    assert not sinks_test.reading(three_arms(), [], {}).sinks_read


# ---------------------------------------------------------------------------------------------- real models, docs


def real_table(*names: str) -> pd.DataFrame:
    """Rows shaped as :func:`attnstruct.sinks.packaged.diagnose_packaged` returns them, one per name."""
    rows = []
    for i, name in enumerate(names):
        row = dict.fromkeys(packaged.COLUMNS, 0.25 + i)
        row |= {"model": name, "role": "decoder", "sink_positions": "first", "first_token": "<|endoftext|>"}
        row |= {"layers": 30, "heads": 9, "qk_norm": False, "query_bias": True, "key_bias": True}
        rows.append(row)
    return pd.DataFrame(rows, columns=list(packaged.COLUMNS))


def saved_dataset(tmp_path, real: pd.DataFrame, sigmoid: float = -0.05) -> xr.Dataset:
    from attnstruct import results

    ds = three_arms(sigmoid=sigmoid)
    ds.attrs["scored_matrix"] = "W_qk"
    effects = sinks_test.normalisation_effects(ds)
    sinks = {"softmax": pd.DataFrame({c: [0.5] * 5 for c in sinks_test.SINK_COLUMNS}, index=pd.Index(SEEDS))}
    out = sinks_test.result_dataset(
        ds,
        sinks=sinks,
        parameters={"seeds": SEEDS},
        corpus="toy",
        unigram_entropy=5.0,
        learned=True,
        effects=effects,
        real=real,
    )
    path = results.save_dataset(out, tmp_path / "10_attention_sinks.nc")
    return results.load_dataset(path)


def test_the_dataset_keeps_the_real_models_by_model_and_reads_them_back(tmp_path):
    stored = saved_dataset(tmp_path, real_table("smollm2-135m", "minilm-l6"))
    assert list(stored.model.values) == ["smollm2-135m", "minilm-l6"]
    assert float(stored.real_sink_mass.sel(model="minilm-l6")) == 1.25
    assert str(stored.real_first_token.sel(model="smollm2-135m").values) == "<|endoftext|>"
    assert "real_seconds" not in stored
    back = sinks_test.real_table_of(stored)
    assert list(back["model"]) == ["smollm2-135m", "minilm-l6"]
    assert back["key_bias"].tolist() == [True, True] and back["layers"].tolist() == [30, 30]
    assert [m.sink_mass for m in sinks_test.real_models(back)] == ["0.25", "1.25"]


def test_no_real_model_read_saves_a_dataset_without_a_model_dim(tmp_path):
    stored = saved_dataset(tmp_path, real_table())
    assert "model" not in stored.dims
    assert sinks_test.real_table_of(stored).empty


def test_the_real_model_summary_counts_sinks_above_twice_uniform_and_overlaps_beyond_chance():
    frame = pd.DataFrame(
        {
            "sink_mass": [0.5, 0.05, 0.2, 0.03],
            "uniform": [0.06, 0.06, 0.06, 0.03],
            "overlap_first_p": [0.001, 0.2, 0.04, 0.05],
        }
    )
    summary = sinks_test.real_summary(frame)
    assert (summary.n, summary.with_sink, summary.beyond_chance) == ("4 models", "2", "2")

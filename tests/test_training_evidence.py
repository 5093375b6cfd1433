"""Notebook 05's verdicts and sentences on made-up runs with a known answer, and its reductions by brute force."""

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from attnstruct import stats
from attnstruct.analyses import training_dynamics as te

SHAPE = te.Shape(d_model=64, n_heads=4, n_layers=4)


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
    large = te.objective_effects(runs(0.5, 0.0), SHAPE, n_draws=100)
    assert [e.verdict for e in large][0] == "holds"
    assert large[0].estimate == pytest.approx(0.5, abs=0.05) and large[0].n == 6
    none = te.objective_effects(runs(0.2, 0.2, noise=0.05), SHAPE, n_draws=100)
    assert none[0].verdict == "cannot tell at this scale"


def test_directionality_is_judged_against_the_null_of_its_width():
    """A decoder directionality of -0.25 over 6 seeds is beyond the null of the mean of untrained layers at width
    256 and inside it at width 64, where an untrained layer's directionality spreads far more; the paired
    encoder-decoder gap swaps objectives within a seed, whatever the width."""
    narrow, wide = te.Shape(d_model=256, n_heads=4, n_layers=4), SHAPE
    at_256 = te.objective_effects(runs(0.5, 0.0, decoder_directionality=-0.25), narrow, n_draws=50)
    at_64 = te.objective_effects(runs(0.5, 0.0, decoder_directionality=-0.25), wide, n_draws=100)
    assert [e.verdict for e in at_256[1:]] == ["holds", "holds"]
    assert [e.verdict for e in at_64[1:]] == ["holds", "cannot tell at this scale"]
    assert "null" in at_64[2].reason


def test_a_decoder_more_symmetric_than_the_encoder_does_not_hold():
    assert te.objective_effects(runs(0.0, 0.5), SHAPE, n_draws=100)[0].verdict == "does not hold"


def test_three_seeds_cannot_tell_however_large_the_gap():
    effect = te.objective_effects(runs(0.5, 0.0, n_seeds=3), SHAPE, n_draws=100)[0]
    assert effect.verdict == "cannot tell at this scale" and "0.125" in effect.reason


def test_final_median_and_transient_match_a_loop():
    ds = runs(0.3, 0.1)
    final = te.final_median(ds, "symmetry")
    table = te.transient(ds)
    for objective in ("mlm", "next-token"):
        for seed in range(6):
            values = ds.symmetry.sel(objective=objective, seed=seed).values  # [step, layer]
            medians = np.median(values, axis=1)
            assert float(final.sel(objective=objective, seed=seed)) == pytest.approx(medians[-1])
            row = table.loc[(objective, seed)]
            assert row["peak"] == pytest.approx(medians.max()) and row["peak_step"] == 10
            assert row["decay"] == pytest.approx(medians.max() - medians[-1])
    assert {e.verdict for e in te.decay_effects(ds)} == {stats.CANNOT_TELL}  # 3 records: a decay is chance's


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
    assert {e.verdict for e in te.decay_effects(decaying(0.0))} == {stats.HOLDS}
    kept = te.decay_effects(decaying(0.6))
    assert {e.verdict for e in kept} == {stats.CANNOT_TELL} and all(abs(e.estimate) < 0.2 for e in kept)
    assert all(e.family == "secondary, uncorrected" for e in kept)


def test_an_objective_missing_from_the_runs_is_named():
    with pytest.raises(ValueError, match="objective 'next-token' is not in the runs"):
        te.objective_effects(runs(0.5, 0.0).sel(objective=["mlm"]), SHAPE)


def test_claims_on_runs_that_did_not_learn_are_not_judged():
    """Claims 1 and 2 rest on both objectives' runs, claim 3 on the decoder's: a large gap that did not learn."""
    effects = te.objective_effects(runs(0.5, 0.0), SHAPE, n_draws=100, learned={"mlm": False, "next-token": True})
    assert all(e.reason.startswith(stats.NOT_LEARNED) for e in effects[:2])
    assert {e.verdict for e in effects[:2]} == {stats.CANNOT_TELL} and not effects[2].reason.startswith(
        stats.NOT_LEARNED
    )
    decoder_only = te.objective_effects(runs(0.5, 0.0), SHAPE, n_draws=100, learned={"mlm": True, "next-token": False})
    assert [e.reason for e in decoder_only] == [stats.NOT_LEARNED] * 3


def test_a_decay_of_runs_that_did_not_learn_is_not_judged():
    effects = te.decay_effects(decaying(0.0), learned={"mlm": True, "next-token": False})
    assert [e.verdict for e in effects] == [stats.HOLDS, stats.CANNOT_TELL]
    assert effects[1].reason == stats.NOT_LEARNED


def test_with_one_objective_there_are_no_claims_and_the_sentences_say_so():
    one = runs(0.5, 0.0).sel(objective=["mlm"])
    assert te.paper_claims(one, SHAPE, n_draws=100) == []
    assert "not tested" in te.describe_claims([], SHAPE, np.zeros(4))
    assert te.per_layer_gap(one).empty and "only one" in te.describe_per_layer_gap(te.per_layer_gap(one)).lower()


def test_the_transient_sentence_states_each_objectives_peak_step_and_end():
    sentence = te.describe_transient(te.transient(runs(0.3, 0.1, noise=0.0)))
    assert sentence.startswith("In the encoder (masked LM), the median symmetry over layers rose to +0.60")
    assert "median step of the peak: 10) and ended at +0.30, +0.30 below its peak." in sentence
    assert "In the decoder (next token)" in sentence and "ended at +0.10, +0.50 below its peak." in sentence


def test_the_per_layer_gap_is_the_final_difference_per_seed_and_layer():
    ds = runs(0.3, 0.1, n_seeds=3)
    ds["symmetry"].loc[{"objective": "mlm", "step": 20, "layer": 3}] = 0.9
    table = te.per_layer_gap(ds)
    final = ds.symmetry.isel(step=-1)
    expected = (final.sel(objective="mlm") - final.sel(objective="next-token")).values  # [seed, layer]
    np.testing.assert_allclose(table.to_numpy(), expected)
    assert list(table.columns) == [0, 1, 2, 3] and list(table.index) == [0, 1, 2]
    mean = expected.mean(0)
    assert te.describe_per_layer_gap(table).endswith(f"layer 2 {mean[2]:+.2f}, layer 3 {mean[3]:+.2f}.")


@pytest.mark.parametrize(
    ("encoder", "decoder", "words"),
    [(0.5, 0.0, "holds"), (0.0, 0.5, "does not hold"), (0.2, 0.2, "cannot tell at this scale")],
)
def test_the_symmetry_paragraph_words_the_verdict_of_the_gap(encoder, decoder, words):
    claims = te.objective_effects(runs(encoder, decoder, noise=0.05), SHAPE, n_draws=100)
    assert claims[0].verdict == words
    paragraph = te.describe_claims(claims, SHAPE, SHAPE.null("directionality", 100, 0))
    assert paragraph.startswith(f"**Symmetry, at the end of training:** {te.SYMMETRY_WORDS[words]} (encoder minus")
    assert f"over 6 seeds; {claims[0].reason})" in paragraph and f"**Directionality:** {claims[1].verdict}" in paragraph


def test_the_symmetry_paragraph_of_one_seed_has_no_interval():
    claims = te.objective_effects(runs(0.5, 0.0, n_seeds=1), SHAPE, n_draws=100)
    paragraph = te.describe_claims(claims, SHAPE, SHAPE.null("directionality", 100, 0))
    assert "one seed, no interval" in paragraph and "[nan" not in paragraph


def test_the_head_sentence_spans_every_head_layer_and_seed():
    ds = runs(0.3, 0.1, n_seeds=2)
    heads = np.zeros((2, 2, 3, 4, 2))
    heads[0, 1, 2, 3, 1], heads[1, 0, 2, 0, 0] = 0.7, -0.4
    heads[0, 0, 1, 0, 0] = 5.0  # not the last step: ignored
    ds["head_symmetry"] = (("objective", "seed", "step", "layer", "head"), heads)
    assert te.describe_heads(ds) == (
        "Per head, at the end: encoder (masked LM) symmetry +0.00 to +0.70 over heads, layers and seeds; "
        "decoder (next token) symmetry -0.40 to +0.00 over heads, layers and seeds."
    )
    np.testing.assert_allclose(te.final_heads(ds).sel(objective="mlm", layer=3, head=1), 0.35)


def test_the_authors_runs_sentence_reads_their_last_step():
    reference = pd.DataFrame(
        {
            "n_layers": [4, 12, 4, 4, 4],
            "mode": ["encoder", "encoder", "decoder", "encoder", "decoder"],
            "step": [200, 200, 200, 100, 100],
            "symmetry": [0.5, 0.3, -0.2, 0.9, 0.9],
            "directionality": [-0.1, -0.2, -0.4, 0.9, 0.9],
        }
    )
    assert te.describe_authors_runs(reference) == (
        "The authors' runs (median over layers at step 200, their result files): encoders +0.30 to +0.50 in "
        "symmetry (+0.30 for the 12-layer runs the paper draws), decoders -0.20; directionality -0.20 to -0.10 for "
        "the encoders and -0.40 for the decoders."
    )


def test_the_loss_curves_are_means_over_seeds_and_the_levels_the_targets():
    ds = runs(0.3, 0.1, n_seeds=2)
    ds["train_loss"] = (("objective", "seed", "step"), np.arange(12.0).reshape(2, 2, 3))
    ds["val_loss"] = (("objective", "seed", "step"), [[[1, np.nan, 3], [3, np.nan, 5]], [[0, np.nan, 0]] * 2])
    train, val = te.mean_losses(ds, "mlm")
    np.testing.assert_allclose(train, [1.5, 2.5, 3.5])
    assert list(val.step.values) == [0, 20] and list(val.values) == [2, 4]
    assert te.loss_target_levels(5.0, ["mlm", "next-token"]) == pytest.approx({"mlm": 4.7, "next-token": 4.0})


def test_the_dataset_records_the_gate_and_the_verdicts():
    ds = runs(0.5, 0.0).assign_attrs(scored_matrix="W_qk", runs="[]")
    effects = te.decay_effects(ds)
    out = te.result_dataset(
        ds, parameters={"steps": 20}, corpus="c", unigram_entropy=5.0, learned=False, effects=effects
    )
    assert out.attrs["loss_targets_met"] == "no" and out.attrs["runs"] == "[]"
    assert set(json.loads(out.attrs["verdicts"])) == {e.claim for e in effects}
    xr.testing.assert_identical(out.drop_attrs(), ds.drop_attrs())
    assert (
        te.result_dataset(ds, parameters={}, corpus="c", unigram_entropy=5.0, learned=True, effects=[]).attrs[
            "verdicts"
        ]
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


def test_the_setup_lines_state_the_data_the_model_and_the_passes():
    from attnstruct.tasks import text_config

    config = text_config.TextConfig(steps=10, batch_size=5, seq_len=20, d_model=32, n_layers=2, n_heads=4)
    lines = te.describe_setup(_Data(), _Tokenizer(), config, "ab")
    assert lines == [
        "corpus: 1,000 training tokens",
        "ab -> ['a', 'b']",
        "model: 2 layers, d_model 32, 4 heads of 8, pre-LN; 10 steps of 5 x 20 tokens = 1.0 passes over the training "
        "text",
        "unigram entropy of the training tokens (the loss of a context-free model): 5.000 nats",
    ]

"""The null of each question: paired runs (labels exchangeable within a seed), "peaks then decays" (time order
taken away), and the pretrained population by family; each against brute force and on known answers."""

import itertools

import numpy as np
import pandas as pd
import pytest

from attnstruct import stats


def test_the_paired_null_is_every_swap_of_labels_within_a_unit():
    rng = np.random.default_rng(1)
    treated, baseline = rng.normal(0.3, 1, 6), rng.normal(0, 1, 6)
    brute = []
    for swapped in itertools.product((False, True), repeat=6):
        s = np.array(swapped)
        t, b = np.where(s, baseline, treated), np.where(s, treated, baseline)
        brute.append(t.mean() - b.mean())
    null = stats.paired_null(treated - baseline)
    assert len(null) == 2**6 and np.allclose(np.sort(null), np.sort(brute))


def test_the_paired_null_by_monte_carlo_agrees_with_the_exact_one():
    d = np.random.default_rng(2).normal(0.2, 1, 10)
    exact, drawn = stats.paired_null(d), stats.paired_null(d, exact=False, n_samples=20_000, seed=3)
    assert len(drawn) == 20_000 and abs(drawn.mean()) < 0.02
    assert np.quantile(drawn, [0.025, 0.975]) == pytest.approx(np.quantile(exact, [0.025, 0.975]), abs=0.05)


def test_a_large_paired_difference_lies_beyond_its_null_and_none_does_not():
    rng = np.random.default_rng(4)
    large, none = rng.normal(1.0, 0.2, 8), rng.normal(0.0, 0.2, 8)
    assert stats.compare_with_null(large.mean(), stats.paired_null(large)).percentile > 99
    assert 2.5 < stats.compare_with_null(none.mean(), stats.paired_null(none)).percentile < 97.5


def test_the_peak_null_is_every_time_order_of_the_trajectories():
    x = np.random.default_rng(5).normal(size=(2, 4))
    brute = [
        stats.peak_minus_final(np.stack([x[0, list(a)], x[1, list(b)]])).mean()
        for a in itertools.permutations(range(4))
        for b in itertools.permutations(range(4))
    ]
    null = stats.peak_null(x)
    assert len(null) == 4**2
    # each choice of final steps arises from (4 - 1)! orders of each trajectory
    assert np.allclose(np.sort(np.repeat(null, 6**2)), np.sort(brute))


def test_the_peak_null_by_monte_carlo_agrees_with_the_exact_one():
    x = np.random.default_rng(6).normal(size=(3, 10))
    exact, drawn = stats.peak_null(x), stats.peak_null(x, exact=False, n_samples=20_000, seed=1)
    assert len(exact) == 1000 and len(drawn) == 20_000
    assert drawn.mean() == pytest.approx(exact.mean(), abs=0.02)


def test_a_rise_and_decay_beats_the_peak_null_and_a_steady_rise_does_not():
    steps = np.linspace(0, 1, 20)
    rng = np.random.default_rng(7)
    decay = np.stack([np.sin(np.pi * steps * 0.9) + rng.normal(0, 0.02, 20) for _ in range(5)])
    rise = np.stack([steps + rng.normal(0, 0.02, 20) for _ in range(5)])
    for trajectories, expect_beyond in ((decay, True), (rise, False)):
        observed = stats.peak_minus_final(trajectories).mean()
        null = stats.peak_null(trajectories, n_samples=4000)
        comparison = stats.compare_with_null(observed, null)
        assert bool(comparison.percentile > 97.5) is expect_beyond, comparison
    assert stats.peak_minus_final(rise).mean() >= 0


def test_peak_minus_final_refuses_a_trajectory_of_one_step():
    with pytest.raises(ValueError, match="trajectories"):
        stats.peak_minus_final([[1.0]])
    with pytest.raises(ValueError, match="trajectories"):
        stats.peak_null([1.0, 2.0])


@pytest.mark.parametrize(
    ("model_id", "model_type", "family"),
    [
        ("facebook/musicgen-stereo-small", None, "musicgen"),
        ("openai/whisper-tiny", None, "whisper"),
        ("microsoft/speecht5_tts", None, "speecht5"),
        ("bert-base-uncased", None, "bert"),
        ("Qwen/Qwen2.5-0.5B", None, "qwen2.5"),
        ("cross-encoder/ms-marco-MiniLM-L-6-v2", "bert", "bert"),
        ("HuggingFaceTB/SmolLM2-135M", "llama", "llama"),
        ("google/t5-small", "T5", "t5"),
        ("x/roberta-large", "xlm-roberta", "xlmroberta"),
        ("openai/whisper-base", float("nan"), "whisper"),
    ],
)
def test_the_family_of_a_model(model_id, model_type, family):
    assert stats.model_family(model_id, model_type) == family


def _population():
    rows = [("enc-a", "encoder", 0.50 + 0.001 * i) for i in range(10)]  # ten fine-tunes of one encoder
    rows += [("enc-b", "encoder", 0.40), ("enc-c", "encoder", 0.45), ("enc-d", "encoder", 0.42)]
    rows += [("dec-a", "decoder", 0.10), ("dec-a", "decoder", 0.12), ("dec-b", "decoder", 0.05)]
    rows += [("dec-c", "decoder", 0.08), ("dec-d", "decoder", np.nan)]
    return pd.DataFrame(rows, columns=["family", "role", "symmetry"])


def test_family_values_are_medians_per_family_and_role():
    table = stats.family_values(_population(), "symmetry")
    assert len(table) == 7  # dec-d has no value
    row = table.set_index(["family", "role"]).loc[("enc-a", "encoder")]
    assert row["value"] == pytest.approx(np.median(0.50 + 0.001 * np.arange(10))) and row["n_models"] == 10
    with pytest.raises(KeyError, match="no column"):
        stats.family_values(_population(), "directionality")


def test_the_family_effect_counts_families_not_checkpoints():
    population = _population()
    effect = stats.family_effect(population, "symmetry", treated="encoder", control="decoder", claim="enc minus dec")
    table = stats.family_values(population, "symmetry")
    encoders, decoders = (table.loc[table.role == role, "value"] for role in ("encoder", "decoder"))
    expected = stats.two_sample_effect(encoders, decoders, claim="x", unit="family")
    assert effect.unit == "family" and effect.n == 4 and effect.p_value == expected.p_value
    assert effect.smallest == pytest.approx(1 / 35) and effect.verdict == stats.HOLDS
    flipped = population.assign(role=population.role.map({"encoder": "decoder", "decoder": "encoder"}))
    reversed_effect = stats.family_effect(flipped, "symmetry", treated="encoder", control="decoder", claim="x")
    assert reversed_effect.verdict != stats.HOLDS
    with pytest.raises(ValueError, match="no family of role"):
        stats.family_effect(population, "symmetry", treated="encoder", control="vision", claim="x")


def test_no_effect_stays_inside_the_peak_and_family_nulls():
    noise = np.random.default_rng(8).normal(size=(5, 20))
    comparison = stats.compare_with_null(stats.peak_minus_final(noise).mean(), stats.peak_null(noise))
    assert 2.5 < comparison.percentile < 97.5
    rng = np.random.default_rng(9)
    same = pd.DataFrame({"family": [f"f{i}" for i in range(12)], "role": ["encoder", "decoder"] * 6})
    same["symmetry"] = rng.normal(0.3, 0.1, 12)
    effect = stats.family_effect(same, "symmetry", treated="encoder", control="decoder", claim="x")
    assert effect.n == 6 and effect.verdict == stats.CANNOT_TELL
